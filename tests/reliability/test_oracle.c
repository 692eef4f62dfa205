/* SPDX-License-Identifier: MIT */
/*
 * test_oracle.c -- the differential oracle of kcache's first promise: a
 * cached launch gives exactly what a cold compile of the caller's world
 * gives (issue 22).
 *
 * A program over every kind of definition kcache takes -- functions,
 * object-like and function-like macros, a constant, an enum, a typedef, a
 * struct used by value, a header in the table, a header on disk outside it
 * (which includes another; in an -I directory, or on the host for odd
 * seeds in a system one, $C_INCLUDE_PATH), a file loaded with kc_define_file, #ifdef and
 * #if tests of a macro; and definitions in OpenCL C as written (issue 26): a
 * helper and a kernel defined with kc_define_lang, a file loaded with
 * kc_define_file_lang, mixed with dialect ones (an OpenCL C kernel calls
 * dialect helpers, an OpenCL C helper a dialect one), and names of OpenCL
 * C built-ins (odd, M_PI_F) that the program sometimes defines itself, so
 * that the rule for built-ins (a native definition depends on the
 * language's built-ins as a whole) is tested -- and five kernels that
 * reach them (K3 and the file's K4 in OpenCL C). On the host backend the
 * native ones are refused (KC_EUNAVAILABLE), and so is every kernel whose
 * closure reaches one: the cold compile must agree. Each name has two
 * texts or none. A random sequence of steps defines, redefines and
 * undefines names, edits the header on disk (then kc_refresh), reloads the
 * file, and destroys the runtime to make a new one on the same disk cache
 * (a new process, as far as the cache can tell); after every step the
 * kernels are launched, and each outcome (the value written, or the
 * failure's status) is compared with the oracle: the same world's
 * definitions defined in a new runtime with no disk cache, in another
 * order, and compiled from scratch by the same backend (memoized by the
 * world's texts).
 *
 * Beside the steps, a second thread pins the latest world, launches the
 * kernels twice (the second time on a kc_stream: on the host, run later by
 * the stream's thread, while the world moves on and code is collected)
 * and compares them with the oracle of its pinned world (when
 * the header on disk has not changed since: a compile cannot read the disk
 * of an old world), then unpins; a third calls kc_collect without pause.
 * The runtime guards its launches (kc_options.guard_launches), so that is
 * allowed.
 *
 * On a mismatch the sequence (its steps are logged) is replayed alone and
 * shrunk to a minimal one that still fails, written to
 * $KC_ORACLE_REGRESS_DIR (default: the working directory) as oracle-*.ops;
 * the files in tests/reliability/oracle/ are such sequences, replayed first.
 *
 *   KC_ORACLE_STEPS (host 1200, opencl 100), KC_ORACLE_SECONDS (run for that
 *   long instead), KC_ORACLE_SEED (1), KC_ORACLE_THREADS (1: the pinning and
 *   collecting threads; 0: none), KC_ORACLE_REPLAY=FILE (only that sequence;
 *   with KC_ORACLE_THREADS=1 the threads run beside it).
 */
#include "rel.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KC_ORACLE_DIR
#define KC_ORACLE_DIR "."
#endif

/* ------------------------------------------------------------ the program */

enum { F0, F1, M0, FM, C0, EN, TY, ST, FLAG, H0, K0, K1, K2, N0, ODD, MPI, K3, NN };
enum { NV = 3 }; /* a name's texts: 0 none (undefined), 1, 2 */
/* the header on disk, the loaded file, the loaded file of OpenCL C */
enum { DISK = NN, FILE_ = NN + 1, NFILE = NN + 2, NSLOTS = NN + 3 };
static const char *const name_of[NN] = {"f0",   "f1", "M0", "FM", "C0", "E",   "T",      "S", "FLAG",
                                        "h0.h", "K0", "K1", "K2", "n0", "odd", "M_PI_F", "K3"};
/* The language of each name's texts: n0, odd and K3 are OpenCL C as
 * written (kc_define_lang), and so is the second file
 * (kc_define_file_lang); odd and M_PI_F are names of OpenCL C's built-ins
 * (kcache's list) that the program sometimes defines itself. */
static const kc_language lang_of[NN] = {[N0] = KC_LANG_OPENCL, [ODD] = KC_LANG_OPENCL, [K3] = KC_LANG_OPENCL};
/* The kernels: K4 is the OpenCL C file's. */
static const int kernels[] = {K0, K1, K2, K3, NFILE};
static const char *const kname[] = {"K0", "K1", "K2", "K3", "K4"};
enum { NK = 5 };
static char text[NSLOTS][NV][512];

/* The constant needs OpenCL's address space; the rest is one dialect. */
static void texts_init(void) {
  const char *q = kct_backend == KC_BACKEND_OPENCL ? "__constant" : "static const";
  static const char *const t[NN][2] = {
      {"KC_DEVICE float f0(float x) { return x + M0; }",
       "KC_DEVICE float f0(float x) { return x * 2.0f + f1(x); }"},
      {"KC_DEVICE float f1(float x) { return x + 3.0f; }",
       "KC_DEVICE float f1(float x) { return x - (float)EA; }"},
      {"#define M0 1.0f", "#define M0 (C0 + 2.0f)"},
      {"#define FM(x) ((x) * 3.0f)", "#define FM(x) ((x) + M0)"},
      {"%s float C0 = 4.0f;", "%s float C0 = 8.0f;"},
      {"enum E { EA = 1, EB = 2 };", "enum E { EB = 5, EA = 7 };"},
      {"typedef float T;", "typedef int T;"},
      {"struct S { float a; float b; };", "struct S { float a; float b; float c; };"},
      {"#define FLAG 1", "#define FLAG 0"},
      {"#pragma once\n#define HV 10.0f\n", "#pragma once\n#define HV 20.0f\n"},
      {"KC_KERNEL void K0(KC_GLOBAL float *y) { y[kc_global_id(0)] = f0(1.0f) + FM(2.0f) + (float)EA; }",
       "KC_KERNEL void K0(KC_GLOBAL float *y) { y[kc_global_id(0)] = f0(0.5f) * 2.0f + (float)EB + FM(1.0f); "
       "}"},
      {"#include \"h0.h\"\n#include <d0.h>\nKC_KERNEL void K1(KC_GLOBAL float *y) {\n#ifdef FLAG\n"
       "  y[kc_global_id(0)] = HV + DV + (T)2.5f;\n#else\n  y[kc_global_id(0)] = HV - DV + "
       "(float)sizeof(struct "
       "S);\n#endif\n}",
       "#include \"h0.h\"\n#include <d0.h>\nKC_KERNEL void K1(KC_GLOBAL float *y) {\n#if FLAG\n"
       "  y[kc_global_id(0)] = HV * 2.0f + (T)1.5f;\n#else\n  y[kc_global_id(0)] = DV + (float)sizeof(struct "
       "S);\n#endif\n}"},
      {"KC_KERNEL void K2(KC_GLOBAL float *y) { y[kc_global_id(0)] = p0(C0) + (float)EB + M0; }",
       "KC_KERNEL void K2(KC_GLOBAL float *y) { y[kc_global_id(0)] = p0(1.0f) + p1(C0) + M0; }"},
      /* OpenCL C: a helper that calls a built-in, then a dialect helper */
      {"float n0(float x) { return x * 2.0f + (float)get_local_size(0); }",
       "inline float n0(float x) { return fmax(x, 3.0f) + f1(x); }"},
      /* a built-in's name defined: a function, then a macro */
      {"float odd(float x) { return x * 5.0f; }", "#define odd(x) ((x) + 11.0f)"},
      /* a built-in macro's name redefined (a dialect definition) */
      {"#define M_PI_F 3.0f", "#define M_PI_F (M0 + 0.5f)"},
      /* an OpenCL C kernel as written, with dialect helpers in its closure */
      {"__kernel void K3(__global float *y) { y[get_global_id(0)] = n0(1.0f) + M_PI_F + M0; }",
       "kernel void K3(global float *y) {\n  size_t i = get_global_id(0);\n"
       "  y[i] = odd(2.0f) + n0(0.5f) + f0(1.0f) + (float)get_global_size(0) + mad(2.0f, 3.0f, 1.0f);\n}"},
  };
  for (int n = 0; n < NN; n++)
    for (int v = 1; v < NV; v++) snprintf(text[n][v], sizeof text[n][v], t[n][v - 1], q);
  /* the header on disk: none, one, or one that includes another */
  snprintf(text[DISK][1], sizeof text[DISK][1], "#define DV 100.0f\n");
  snprintf(text[DISK][2], sizeof text[DISK][2], "#include \"d1.h\"\n#define DV (300.0f + D1)\n");
  /* the file: empty (every name it defined goes), one helper, two and a macro */
  snprintf(text[FILE_][1], sizeof text[FILE_][1], "KC_DEVICE float p0(float x) { return x + 0.25f; }\n");
  snprintf(text[FILE_][2], sizeof text[FILE_][2],
           "#define PQ 0.5f\nKC_DEVICE float p0(float x) { return x + PQ; }\n"
           "KC_DEVICE float p1(float x) { return x * 3.0f; }\n");
  /* the OpenCL C file: a helper and a kernel, then a macro, a helper that
   * calls another file's and a built-in's name, and the kernel */
  snprintf(text[NFILE][1], sizeof text[NFILE][1],
           "float q0(float x) { return x + 0.5f; }\n"
           "__kernel void K4(__global float *y) { y[get_global_id(0)] = q0(2.0f) + C0; }\n");
  snprintf(text[NFILE][2], sizeof text[NFILE][2],
           "#define QK 2.0f\nfloat q0(float x) { return x * QK + n0(x); }\n"
           "kernel void K4(global float *y) {\n  size_t i = get_global_id(0);\n"
           "  y[i] = q0(1.0f) + odd(1.0f) + M_PI_F;\n}\n");
}

/* A world's texts: the variant of each slot. */
typedef struct state {
  uint8_t v[NSLOTS];
} state;

/* The slots each kernel can reach through any text of any slot it
 * mentions (the test's own reading of its texts, a superset of what any
 * world's closure holds): a cold compile of the kernel depends on those
 * alone, so the oracle is memoized by them. */
static bool reach[NK][NSLOTS];

static bool mentions(const char *t, const char *word) {
  size_t n = strlen(word);
  for (const char *p = strstr(t, word); p; p = strstr(p + 1, word)) {
    bool l = p == t || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    bool r = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (l && r) return true;
  }
  return false;
}

/* Whether any text of slot a mentions slot b. */
static bool slot_mentions(int a, int b) {
  static const char *const extra[NSLOTS][4] = {[EN] = {"EA", "EB"},
                                               [H0] = {"HV"},
                                               [DISK] = {"d0.h", "DV"},
                                               [FILE_] = {"p0", "p1", "PQ"},
                                               [NFILE] = {"q0", "QK", "K4"}};
  for (int v = 1; v < NV; v++) {
    if (b < NN && mentions(text[a][v], name_of[b])) return true;
    for (int e = 0; e < 4 && extra[b][e]; e++)
      if (mentions(text[a][v], extra[b][e])) return true;
  }
  return false;
}

static void reach_init(void) {
  for (int i = 0; i < NK; i++) {
    reach[i][kernels[i]] = true;
    for (bool more = true; more;) {
      more = false;
      for (int a = 0; a < NSLOTS; a++)
        for (int b = 0; reach[i][a] && b < NSLOTS; b++)
          if (a != b && !reach[i][b] && slot_mentions(a, b)) more = reach[i][b] = true;
    }
  }
}

static uint64_t key_of(const state *s, int kernel) {
  uint64_t k = (uint64_t)kernel;
  for (int i = 0; i < NSLOTS; i++) k = k * NV + (reach[kernel][i] ? s->v[i] : 0);
  return k;
}

typedef struct outcome {
  kc_status st;
  float value;
  char why[600]; /* the failure's message (its start), for the report */
} outcome;

/* Room for need items of size sz in *p (libc; the test's own arrays). */
static bool grow(void *p, size_t *cap, size_t need, size_t sz) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *q = realloc(*(void **)p, c * sz);
  if (!q) return false;
  *(void **)p = q;
  *cap = c;
  return true;
}

/* ---------------------------------------------------------------- oracle */

typedef struct run_cfg {
  char root[KCT_DIR_LEN], inc[KCT_DIR_LEN + 16], cache[KCT_DIR_LEN + 16], opts[KCT_DIR_LEN + 32];
} run_cfg;
static run_cfg cfg;

/* The memo of the oracle's outcomes, by key. */
#define MEMO_CAP (1u << 20)
static struct memo_slot {
  uint64_t key; /* key_of + 1; 0: empty */
  outcome out;
} * memo;
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
/* Held while the disk changes, and while the oracle compiles (it reads it). */
static pthread_mutex_t disk_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int disk_now; /* the variant on disk now */
static _Atomic uint64_t oracle_compiles;

/* The tested runtime's options (cache: its disk cache; guard: guarded
 * launches, for kc_collect on another thread), and the oracle's (neither). */
static kc_options run_options(bool cache, bool guard) {
  kc_options o;
  kc_options_init(&o);
  o.backend = kct_backend;
  o.compile_options = cfg.opts;
  if (kct_backend == KC_BACKEND_HOST) o.host_cc = rel_cc();
  o.cache_dir = cache ? cfg.cache : NULL;
  o.cache_disable = !cache;
  o.guard_launches = guard;
  return o;
}

/* One launch of k: the value it wrote, or its failure. */
static outcome launch(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b) {
  float y[4] = {0};
  outcome o = {kct_run_bytes(k, ctx, b, 1, y, sizeof(float)), 0, ""};
  o.value = o.st ? 0 : y[0];
  if (o.st) snprintf(o.why, sizeof o.why, "%s", kc_errmsg(rt));
  return o;
}

/* The same launch on the stream s (kc_launch_ex; the host runs it on the
 * stream's thread), synced, then read back. */
static outcome launch_on(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b, kc_stream *s) {
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.stream = s;
  kc_arg args[] = {KC_ARG_BUF(b)};
  outcome o = {kc_launch_ex(k, ctx, &c, args, 1), 0, ""};
  float y[4] = {0};
  if (!o.st) o.st = kc_stream_sync(s);
  if (!o.st) o.st = kc_buffer_read(b, 0, y, sizeof(float));
  o.value = o.st ? 0 : y[0];
  if (o.st) snprintf(o.why, sizeof o.why, "%s", kc_errmsg(rt));
  return o;
}

/* Handles on the kernels in rt (kept: their launches are cached). */
static void handles(kc_runtime *rt, kc_kernel *k[NK]) {
  for (int i = 0; i < NK; i++)
    if (kc_kernel_create(rt, kname[i], NULL, &k[i])) fail_msg("kernel: %s", kc_errmsg(rt));
}

/* Loads variant v of a file slot (FILE_ in the dialect, NFILE in OpenCL C). */
static kc_status load_file(kc_runtime *rt, int slot, int v, kc_world *w) {
  return kc_define_file_lang(rt, slot == FILE_ ? "prog.c" : "native.cl", text[slot][v], strlen(text[slot][v]),
                             slot == FILE_ ? KC_LANG_DIALECT : KC_LANG_OPENCL, NULL, NULL, NULL, w);
}

/* Defines s's texts into rt (in the order of perm) and loads its file. */
static kc_status define_state(kc_runtime *rt, const state *s, const int *perm) {
  for (int i = 0; i < NN; i++) {
    int n = perm ? perm[i] : i;
    if (s->v[n]) {
      kc_status st = kc_define_lang(rt, name_of[n], text[n][s->v[n]], lang_of[n], NULL);
      if (st) return st;
    }
  }
  kc_status st = s->v[FILE_] ? kc_define_file(rt, "prog.c", text[FILE_][s->v[FILE_]],
                                              strlen(text[FILE_][s->v[FILE_]]), NULL, NULL)
                             : KC_OK;
  return st || !s->v[NFILE] ? st : load_file(rt, NFILE, s->v[NFILE], NULL);
}

/* The outcome of a cold compile of kernel i in s; false when it cannot be
 * had now (s's header on disk, which kernel i may read, is not the one on
 * disk). */
static bool oracle1(const state *s, int i, uint64_t *seed, outcome *out) {
  uint64_t key = key_of(s, i) + 1;
  size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 44) & (MEMO_CAP - 1);
  pthread_mutex_lock(&memo_mu);
  for (size_t j = h; memo[j].key; j = (j + 1) & (MEMO_CAP - 1))
    if (memo[j].key == key) {
      *out = memo[j].out;
      pthread_mutex_unlock(&memo_mu);
      return true;
    }
  pthread_mutex_unlock(&memo_mu);
  pthread_mutex_lock(&disk_mu);
  if (reach[i][DISK] && atomic_load(&disk_now) != s->v[DISK]) {
    pthread_mutex_unlock(&disk_mu);
    return false;
  }
  kc_options o = run_options(false, false);
  kc_runtime *rt = NULL;
  kc_status st = kc_runtime_create(&o, &rt);
  if (st) fail_msg("oracle runtime: %s", kc_errmsg(NULL));
  int perm[NN];
  for (int j = 0; j < NN; j++) perm[j] = j;
  for (int j = NN - 1; j > 0; j--) {
    int r = (int)rel_below(seed, (uint32_t)j + 1), tmp = perm[j];
    perm[j] = perm[r];
    perm[r] = tmp;
  }
  if ((st = define_state(rt, s, perm))) fail_msg("oracle define: %s", kc_errmsg(rt));
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  if (kc_context_create(rt, 0, &ctx) || kc_buffer_create(ctx, 16, &b) ||
      kc_kernel_create(rt, kname[i], NULL, &k))
    fail_msg("oracle: %s", kc_errmsg(rt));
  *out = launch(rt, k, ctx, b);
  kc_runtime_destroy(rt);
  pthread_mutex_unlock(&disk_mu);
  atomic_fetch_add(&oracle_compiles, 1);
  pthread_mutex_lock(&memo_mu);
  size_t j = h;
  while (memo[j].key && memo[j].key != key) j = (j + 1) & (MEMO_CAP - 1);
  memo[j].key = key;
  memo[j].out = *out;
  pthread_mutex_unlock(&memo_mu);
  return true;
}

/* ----------------------------------------------------------------- steps */

typedef struct step {
  char op; /* 'd' define or undefine slot n to v, 'x' disk, 'f' file, 'r' recreate, 'l' launch only */
  uint8_t n, v;
} step;

/* The tested runtime and what the threads share. */
typedef struct world_rec {
  kc_world w;
  state s;
  int disk_gen;
} world_rec;

typedef struct tested {
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *buf;
  kc_kernel *k[NK];
  bool guard;
  _Atomic unsigned gen; /* runtimes made so far (the threads' handles are of one) */
  state s;
  _Atomic int disk_gen; /* edits of the disk so far (moved on before the disk changes) */
  pthread_rwlock_t gate; /* write: recreate (the threads take it to read for a round) */
  /* the state of each world the steps made, for the pinning thread */
  pthread_mutex_t worlds_mu;
  pthread_cond_t worlds_cv;
  world_rec *worlds;
  size_t nworlds, capworlds;
  /* a step (but a re-creation) is changing the runtime: the worlds past the
   * last recorded one may be its (a world kcache made itself, when a
   * compile saw a new version of a file, changes no text: the last
   * recorded world's state is its state) */
  bool in_step;
  _Atomic bool stop;
  _Atomic uint64_t compared, pinned_compared, collects, mismatches;
  _Atomic uint64_t valued[NK], refused[NK]; /* compared launches that wrote a value; KC_EUNAVAILABLE */
  char first[3000];
  pthread_mutex_t first_mu;
} tested;

/* What a run reports. */
typedef struct run_stats {
  uint64_t steps, compared, pinned_compared, collects, valued[NK], refused[NK];
} run_stats;

static void write_disk(int v) {
  char path[KCT_DIR_LEN + 32];
  snprintf(path, sizeof path, "%s/d0.h", cfg.inc);
  if (v == 0) {
    if (unlink(path) && errno != ENOENT) fail_msg("unlink %s: %s", path, strerror(errno));
    return;
  }
  /* a new file under the name (as editors write), so that readers never
   * see half of it */
  char tmp[KCT_DIR_LEN + 40];
  snprintf(tmp, sizeof tmp, "%s/.d0.h.tmp", cfg.inc);
  FILE *f = fopen(tmp, "w");
  if (!f) fail_msg("write %s: %s", tmp, strerror(errno));
  fputs(text[DISK][v], f);
  fclose(f);
  if (rename(tmp, path)) fail_msg("rename %s: %s", path, strerror(errno));
}

/* The world w a step made (as its call returned it: a world kcache makes
 * itself in between is not the step's) holds the step's state. */
static void record_world(tested *t, kc_world w) {
  pthread_mutex_lock(&t->worlds_mu);
  if (!grow(&t->worlds, &t->capworlds, t->nworlds + 1, sizeof *t->worlds)) fail_msg("out of memory");
  t->worlds[t->nworlds++] = (world_rec){w, t->s, atomic_load(&t->disk_gen)};
  t->in_step = false;
  pthread_cond_broadcast(&t->worlds_cv);
  pthread_mutex_unlock(&t->worlds_mu);
}

static void step_begins(tested *t) {
  pthread_mutex_lock(&t->worlds_mu);
  t->in_step = true;
  pthread_mutex_unlock(&t->worlds_mu);
}

static void open_tested(tested *t) {
  kc_options o = run_options(true, t->guard);
  if (kc_runtime_create(&o, &t->rt)) fail_msg("runtime: %s", kc_errmsg(NULL));
  if (kc_context_create(t->rt, 0, &t->ctx) || kc_buffer_create(t->ctx, 16, &t->buf))
    fail_msg("context: %s", kc_errmsg(t->rt));
  handles(t->rt, t->k);
  if (define_state(t->rt, &t->s, NULL)) fail_msg("define: %s", kc_errmsg(t->rt));
  pthread_mutex_lock(&t->worlds_mu);
  t->nworlds = 0;
  pthread_mutex_unlock(&t->worlds_mu);
  atomic_fetch_add(&t->gen, 1);
  record_world(t, kc_world_latest(t->rt));
}

/* Applies one step to the tested runtime (and the model). */
static void apply(tested *t, step s) {
  kc_status st = KC_OK;
  kc_world w = 0;
  if (s.op != 'r') step_begins(t);
  switch (s.op) {
  case 'd':
    t->s.v[s.n] = s.v;
    st = s.v ? kc_define_lang(t->rt, name_of[s.n], text[s.n][s.v], lang_of[s.n], &w)
             : kc_undefine(t->rt, name_of[s.n], &w);
    if (st == KC_ENOTFOUND && !s.v) { /* undefining what is undefined */
      st = KC_OK;
      w = kc_world_latest(t->rt);
    }
    break;
  case 'x':
    pthread_mutex_lock(&disk_mu);
    atomic_fetch_add(&t->disk_gen, 1); /* first: a launch that sees the new disk sees this too */
    write_disk(s.v);
    t->s.v[DISK] = s.v;
    atomic_store(&disk_now, s.v);
    st = kc_refresh(t->rt, NULL, &w);
    pthread_mutex_unlock(&disk_mu);
    break;
  case 'f':
    t->s.v[s.n] = s.v;
    st = load_file(t->rt, s.n, s.v, &w);
    break;
  case 'r':
    pthread_rwlock_wrlock(&t->gate);
    kc_runtime_destroy(t->rt);
    open_tested(t);
    pthread_rwlock_unlock(&t->gate);
    return;
  default: w = kc_world_latest(t->rt); break;
  }
  if (st) fail_msg("step %c %d %d: %s", s.op, s.n, s.v, kc_errmsg(t->rt));
  record_world(t, w);
}

/* A failure seen on any thread: the first is kept (cmocka is the main
 * thread's only). */
static void fail_note(tested *t, const char *msg) {
  pthread_mutex_lock(&t->first_mu);
  if (atomic_fetch_add(&t->mismatches, 1) == 0) snprintf(t->first, sizeof t->first, "%s", msg);
  pthread_mutex_unlock(&t->first_mu);
}

static void mismatch(tested *t, const char *who, const char *kernel, outcome got, outcome want) {
  char msg[3000];
  snprintf(msg, sizeof msg, "%.1200s: %s gave %s %g (%.500s), a cold compile %s %g (%.500s)", who, kernel,
           kc_status_name(got.st), got.value, got.why, kc_status_name(want.st), want.value, want.why);
  fail_note(t, msg);
}

static bool same(outcome a, outcome b) { return a.st == b.st && (a.st || a.value == b.value); }

/* The disk cache and the header directory copied aside (KC_ORACLE_KEEP=DIR),
 * at the first mismatch only (a later one's launches may have written over
 * an entry), for reading after the run: 0 copied, >0 the copy failed, -1
 * not asked for or done already. */
static int keep_evidence(void) {
  static atomic_flag done = ATOMIC_FLAG_INIT;
  const char *keep = getenv("KC_ORACLE_KEEP");
  if (!keep || !*keep || atomic_flag_test_and_set(&done)) return -1;
  char cmd[3 * KCT_DIR_LEN + 600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp -a '%s' '%s' '%s/'", keep, keep, cfg.cache,
           cfg.inc, keep);
  return system(cmd);
}

/* More of a latest-world mismatch, appended to msg: the same kernel again
 * through a new handle (a stale handle cache gives the right value there)
 * and through a new runtime on the same disk cache (a wrong entry on disk
 * gives the wrong value there too), after keep_evidence. */
static void evidence(tested *t, int i, char *msg, size_t room) {
  int kept = keep_evidence(); /* first, before a launch below writes over an entry */
  const char *keep = getenv("KC_ORACLE_KEEP");
  kc_kernel *k2 = NULL;
  outcome fresh = {KC_EINVAL, 0, ""};
  if (kc_kernel_create(t->rt, kname[i], NULL, &k2) == KC_OK) {
    fresh = launch(t->rt, k2, t->ctx, t->buf);
    kc_kernel_destroy(k2);
  }
  outcome other = {KC_EINVAL, 0, ""};
  kc_options o = run_options(true, false);
  kc_runtime *rt = NULL;
  if (kc_runtime_create(&o, &rt) == KC_OK) {
    kc_context *ctx = NULL;
    kc_buffer *b = NULL;
    kc_kernel *k = NULL;
    if (!define_state(rt, &t->s, NULL) && !kc_context_create(rt, 0, &ctx) && !kc_buffer_create(ctx, 16, &b) &&
        !kc_kernel_create(rt, kname[i], NULL, &k))
      other = launch(rt, k, ctx, b);
    kc_runtime_destroy(rt);
  }
  snprintf(msg, room, "; a new handle: %s %g; a new runtime on the disk cache: %s %g; %s%s",
           kc_status_name(fresh.st), fresh.value, kc_status_name(other.st), other.value,
           kept == 0  ? "disk cache and headers copied to "
           : kept > 0 ? "copying failed to "
                      : "not copied",
           kept >= 0 && keep ? keep : "");
}

/* The kernels in the latest world, against the oracle. */
static void check_latest(tested *t, uint64_t *seed) {
  outcome want[NK];
  for (int i = 0; i < NK; i++)
    if (!oracle1(&t->s, i, seed, &want[i])) fail_msg("the oracle could not run at the latest world");
  for (int r = 0; r < 2; r++) /* the second: from the handle's cache */
    for (int i = 0; i < NK; i++) {
      kc_stats pre = {0};
      kc_stats_get(t->rt, &pre);
      outcome got = launch(t->rt, t->k[i], t->ctx, t->buf);
      if (!same(got, want[i])) {
        /* what served it: the counters the launch moved (a compile, a disk
         * hit, the handle's cache), taken before anything else runs */
        kc_stats st = {0};
        kc_stats_get(t->rt, &st);
        kc_code_info ci = {0};
        kc_status cs = kc_kernel_code(t->k[i], &ci);
        char who[1000];
        int n = snprintf(
            who, sizeof who,
            "latest world %llu (launch %d; code %s #%llu, %llu..%llu; compiles %llu, disk hits %llu, "
            "invalidations %llu, files changed %llu, disk stale %llu; this launch: +%llu compiles, +%llu "
            "disk "
            "hits, +%llu fast hits, +%llu slow lookups, +%llu disk stale)",
            (unsigned long long)kc_world_latest(t->rt), r, kc_status_name(cs), (unsigned long long)ci.id,
            (unsigned long long)ci.min_world, (unsigned long long)ci.max_world,
            (unsigned long long)st.compiles, (unsigned long long)st.disk_hits,
            (unsigned long long)st.invalidations, (unsigned long long)st.files_changed,
            (unsigned long long)st.disk_stale, (unsigned long long)(st.compiles - pre.compiles),
            (unsigned long long)(st.disk_hits - pre.disk_hits),
            (unsigned long long)(st.fast_hits - pre.fast_hits),
            (unsigned long long)(st.slow_lookups - pre.slow_lookups),
            (unsigned long long)(st.disk_stale - pre.disk_stale));
        if (n < 0 || (size_t)n >= sizeof who) n = (int)strlen(who); /* (cut: append at its end) */
        evidence(t, i, who + n, sizeof who - (size_t)n);
        mismatch(t, who, kname[i], got, want[i]);
      }
      atomic_fetch_add(&t->compared, 1);
      if (!got.st) atomic_fetch_add(&t->valued[i], 1);
      if (got.st == KC_EUNAVAILABLE) atomic_fetch_add(&t->refused[i], 1);
    }
}

/* --------------------------------------------------------------- threads */

static void *pinner(void *arg) {
  tested *t = arg;
  uint64_t seed = 0x5eed;
  unsigned gen = 0;
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_stream *s = NULL;
  kc_kernel *k[NK];
  char msg[300];
  while (!atomic_load(&t->stop)) {
    pthread_rwlock_rdlock(&t->gate);
    if (gen != atomic_load(&t->gen)) { /* a new runtime: its own context and handles */
      gen = atomic_load(&t->gen);
      if (kc_context_create(t->rt, 0, &ctx) || kc_buffer_create(ctx, 16, &b) || kc_stream_create(ctx, &s)) {
        snprintf(msg, sizeof msg, "pinner: %s", kc_errmsg(t->rt));
        fail_note(t, msg);
        pthread_rwlock_unlock(&t->gate);
        break;
      }
      for (int i = 0; i < NK; i++) kc_kernel_create(t->rt, kname[i], NULL, &k[i]);
    }
    kc_world w;
    if (kc_pin(t->rt, &w)) {
      snprintf(msg, sizeof msg, "kc_pin: %s", kc_errmsg(t->rt));
      fail_note(t, msg);
      pthread_rwlock_unlock(&t->gate);
      break;
    }
    world_rec rec = {0};
    pthread_mutex_lock(&t->worlds_mu);
    /* the step that made w records it; a world no step made is the last
     * recorded one's, as far as texts go */
    while (t->in_step && t->worlds[t->nworlds - 1].w < w) pthread_cond_wait(&t->worlds_cv, &t->worlds_mu);
    for (size_t i = t->nworlds; i-- > 0;)
      if (t->worlds[i].w <= w) {
        rec = t->worlds[i];
        break;
      }
    pthread_mutex_unlock(&t->worlds_mu);
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < NK; i++) {
        int gen0 = atomic_load(&t->disk_gen);
        outcome got = r ? launch_on(t->rt, k[i], ctx, b, s) : launch(t->rt, k[i], ctx, b), want;
        /* a compile for w reads the disk as it is now: only while it is w's */
        bool disk_same = !reach[i][DISK] || (gen0 == rec.disk_gen && atomic_load(&t->disk_gen) == gen0);
        if (!disk_same || !oracle1(&rec.s, i, &seed, &want)) continue;
        if (!same(got, want)) {
          char who[200];
          kc_code_info ci = {0};
          kc_status cs = kc_kernel_code(k[i], &ci);
          (void)keep_evidence();
          snprintf(who, sizeof who, "pinned world %llu%s (recorded %llu; code: %s, #%llu, %llu..%llu)",
                   (unsigned long long)w, r ? ", on a stream" : "", (unsigned long long)rec.w,
                   kc_status_name(cs), (unsigned long long)ci.id, (unsigned long long)ci.min_world,
                   (unsigned long long)ci.max_world);
          char *src = NULL;
          if (kc_kernel_source(k[i], &src) == KC_OK)
            fprintf(stderr, "pinned TU:\n%s\n", src + strlen(src) - (strlen(src) > 900 ? 900 : strlen(src)));
          kc_free(t->rt, src);
          pthread_mutex_lock(&t->worlds_mu);
          for (size_t j = 0; j < t->nworlds; j++) {
            fprintf(stderr, "world %llu:", (unsigned long long)t->worlds[j].w);
            for (int q = 0; q < NSLOTS; q++) fprintf(stderr, " %d", t->worlds[j].s.v[q]);
            fprintf(stderr, "\n");
          }
          pthread_mutex_unlock(&t->worlds_mu);
          mismatch(t, who, kname[i], got, want);
        }
        atomic_fetch_add(&t->pinned_compared, 1);
      }
    kc_unpin(t->rt);
    pthread_rwlock_unlock(&t->gate);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void *collector(void *arg) {
  tested *t = arg;
  while (!atomic_load(&t->stop)) {
    pthread_rwlock_rdlock(&t->gate);
    kc_collect_info info;
    if (kc_collect(t->rt, &info)) fail_note(t, "kc_collect failed");
    pthread_rwlock_unlock(&t->gate);
    atomic_fetch_add(&t->collects, 1);
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* ------------------------------------------------------------------ runs */

static step random_step(const state *s, uint64_t *seed) {
  uint32_t r = rel_below(seed, 100);
  step st = {'l', 0, 0};
  if (r < 70) {
    st.op = 'd';
    st.n = (uint8_t)rel_below(seed, NN);
  } else if (r < 80) {
    st.op = 'x';
    st.n = DISK;
  } else if (r < 90) {
    st.op = 'f';
    st.n = rel_below(seed, 2) ? NFILE : FILE_;
  } else if (r < 92) {
    st.op = 'r';
    return st;
  } else {
    return st;
  }
  do st.v = (uint8_t)rel_below(seed, NV);
  while (st.v == s->v[st.n]);
  return st;
}

/* Runs steps (a fixed list, or random ones until n or `until` seconds)
 * on a fresh tested runtime and disk; threads: the pinner and collector.
 * The steps run go to *log (if log). Returns the mismatches. */
static uint64_t run(const step *fixed, size_t nfixed, uint64_t n, double until, uint64_t seed, bool threads,
                    step **log, size_t *nlog, run_stats *stats) {
  tested *t = calloc(1, sizeof *t);
  if (!t) fail_msg("out of memory");
  t->guard = threads; /* kc_collect runs beside launches only then; without, the plain fast path */
  pthread_rwlock_init(&t->gate, NULL);
  pthread_mutex_init(&t->worlds_mu, NULL);
  pthread_mutex_init(&t->first_mu, NULL);
  pthread_cond_init(&t->worlds_cv, NULL);
  kct_rmrf(cfg.cache);
  write_disk(0);
  atomic_store(&disk_now, 0);
  for (int k = 0; k < NN; k++) t->s.v[k] = 0;
  for (int i = 0; i < NK; i++) t->s.v[kernels[i]] = 1; /* the kernels, the OpenCL C file */
  open_tested(t);
  pthread_t pt, ct;
  bool collecting = threads && rel_env_u64("KC_ORACLE_COLLECT", 1);
  if (threads) pthread_create(&pt, NULL, pinner, t);
  if (collecting) pthread_create(&ct, NULL, collector, t);
  size_t cap = 0;
  double t0 = rel_now();
  uint64_t done = 0;
  for (;; done++) {
    if (fixed ? done >= nfixed : until ? rel_now() - t0 >= until : done >= n) break;
    step s = fixed ? fixed[done] : random_step(&t->s, &seed);
    if (log && grow(log, &cap, *nlog + 1, sizeof **log)) (*log)[(*nlog)++] = s;
    apply(t, s);
    check_latest(t, &seed);
    if (atomic_load(&t->mismatches)) break;
    if (!fixed && done % 5000 == 4999) /* long runs: where they are */
      fprintf(stderr, "oracle: %llu steps, %.0f s, %llu cold compiles\n", (unsigned long long)done + 1,
              rel_now() - t0, (unsigned long long)atomic_load(&oracle_compiles));
  }
  atomic_store(&t->stop, true);
  if (threads) pthread_join(pt, NULL);
  if (collecting) pthread_join(ct, NULL);
  uint64_t bad = atomic_load(&t->mismatches);
  if (bad) print_message("oracle: mismatch after %llu steps: %s\n", (unsigned long long)done, t->first);
  if (stats) {
    stats->steps += done;
    stats->compared += atomic_load(&t->compared);
    stats->pinned_compared += atomic_load(&t->pinned_compared);
    stats->collects += atomic_load(&t->collects);
    for (int i = 0; i < NK; i++) {
      stats->valued[i] += atomic_load(&t->valued[i]);
      stats->refused[i] += atomic_load(&t->refused[i]);
    }
  }
  kc_runtime_destroy(t->rt);
  free(t->worlds);
  pthread_rwlock_destroy(&t->gate);
  pthread_mutex_destroy(&t->worlds_mu);
  pthread_mutex_destroy(&t->first_mu);
  pthread_cond_destroy(&t->worlds_cv);
  free(t);
  return bad;
}

/* The shortest sequence (steps taken out one at a time, largest chunks
 * first) that still fails when replayed alone. */
static size_t shrink(step *s, size_t n, uint64_t seed) {
  for (size_t chunk = n / 2; chunk >= 1; chunk /= 2) {
    for (size_t at = 0; at + chunk <= n;) {
      step *trial = malloc((n - chunk) * sizeof *trial);
      memcpy(trial, s, at * sizeof *s);
      memcpy(trial + at, s + at + chunk, (n - at - chunk) * sizeof *s);
      if (run(trial, n - chunk, 0, 0, seed, false, NULL, NULL, NULL)) {
        memcpy(s, trial, (n - chunk) * sizeof *s);
        n -= chunk;
      } else {
        at += chunk;
      }
      free(trial);
    }
    if (chunk == 1) break;
  }
  return n;
}

static const char *slot_name(int n) {
  return n < NN ? name_of[n] : n == DISK ? "<disk>" : n == FILE_ ? "<file>" : "<nfile>";
}

static void write_ops(const char *path, const step *s, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "# kcache oracle sequence (tests/reliability/test_oracle.c): slot variant per line\n");
  for (size_t i = 0; i < n; i++) {
    const char *name = slot_name(s[i].n);
    fprintf(f, "%c %s %d\n", s[i].op, s[i].op == 'r' || s[i].op == 'l' ? "-" : name, s[i].v);
  }
  fclose(f);
}

static size_t read_ops(const char *path, step **out) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot read %s", path);
  char line[256];
  size_t n = 0, cap = 0;
  *out = NULL;
  while (fgets(line, sizeof line, f)) {
    char op, name[64];
    int v;
    if (line[0] == '#' || sscanf(line, "%c %63s %d", &op, name, &v) != 3) continue;
    step s = {op, 0, (uint8_t)v};
    if (!strcmp(name, "<disk>")) s.n = DISK;
    else if (!strcmp(name, "<file>")) s.n = FILE_;
    else if (!strcmp(name, "<nfile>")) s.n = NFILE;
    else
      for (int k = 0; k < NN; k++)
        if (!strcmp(name, name_of[k])) s.n = (uint8_t)k;
    if (grow(out, &cap, n + 1, sizeof **out)) (*out)[n++] = s;
  }
  fclose(f);
  return n;
}

static void replay_dir(uint64_t seed) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s/*.ops 2>/dev/null", KC_ORACLE_DIR);
  FILE *p = popen(cmd, "r");
  char path[512];
  int replayed = 0;
  while (p && fgets(path, sizeof path, p)) {
    path[strcspn(path, "\n")] = 0;
    step *s;
    size_t n = read_ops(path, &s);
    if (run(s, n, 0, 0, seed, false, NULL, NULL, NULL)) fail_msg("regression sequence %s fails again", path);
    free(s);
    replayed++;
  }
  if (p) pclose(p);
  print_message("oracle: %d regression sequences replayed\n", replayed);
}

static void test_oracle(void **state) {
  (void)state;
  texts_init();
  reach_init();
  for (int i = 0; i < NK; i++) {
    print_message("reach %s:", kname[i]);
    for (int j = 0; j < NSLOTS; j++)
      if (reach[i][j]) print_message(" %s", slot_name(j));
    print_message("\n");
  }
  memo = calloc(MEMO_CAP, sizeof *memo);
  assert_non_null(memo);
  rel_mkdtemp(cfg.root, sizeof cfg.root, "oracle");
  snprintf(cfg.inc, sizeof cfg.inc, "%s/inc", cfg.root);
  snprintf(cfg.cache, sizeof cfg.cache, "%s/cache", cfg.root);
  uint64_t seed = rel_env_u64("KC_ORACLE_SEED", 1);
  /* the header on disk's directory: given with -I, or on the host for odd
   * seeds a system one ($C_INCLUDE_PATH: tcc lists none of what it reads
   * there, kcache gives it those as -I) */
  bool sysdir = kct_backend == KC_BACKEND_HOST && (seed & 1);
  if (sysdir) setenv("C_INCLUDE_PATH", cfg.inc, 1);
  else snprintf(cfg.opts, sizeof cfg.opts, "-I%s", cfg.inc);
  print_message("oracle: the header on disk in %s directory\n",
                sysdir ? "a system ($C_INCLUDE_PATH)" : "an -I");
  assert_int_equal(mkdir(cfg.inc, 0700), 0);
  char d1[KCT_DIR_LEN + 32];
  snprintf(d1, sizeof d1, "%s/d1.h", cfg.inc);
  FILE *f = fopen(d1, "w");
  assert_non_null(f);
  fputs("#define D1 7.0f\n", f);
  fclose(f);
  const char *replay = getenv("KC_ORACLE_REPLAY");
  if (replay && *replay) {
    step *s;
    size_t n = read_ops(replay, &s);
    /* KC_ORACLE_THREADS=1 with a replay: the pinning and collecting threads too */
    uint64_t bad = run(s, n, 0, 0, seed, rel_env_u64("KC_ORACLE_THREADS", 0) != 0, NULL, NULL, NULL);
    free(s);
    if (bad) fail_msg("%s fails", replay);
    kct_rmrf(cfg.root);
    return;
  }
  replay_dir(seed);
  uint64_t steps = rel_env_u64("KC_ORACLE_STEPS", kct_backend == KC_BACKEND_HOST ? 1200 : 100);
  double seconds = (double)rel_env_u64("KC_ORACLE_SECONDS", 0);
  bool threads = rel_env_u64("KC_ORACLE_THREADS", 1) != 0;
  step *log = NULL;
  size_t nlog = 0;
  run_stats stats = {0};
  double t0 = rel_now();
  uint64_t bad = run(NULL, 0, steps, seconds, seed, threads, &log, &nlog, &stats);
  double took = rel_now() - t0;
  if (bad) {
    size_t n = nlog;
    bool alone = run(log, n, 0, 0, seed, false, NULL, NULL, NULL) != 0;
    if (alone) n = shrink(log, n, seed);
    char path[600];
    const char *dir = getenv("KC_ORACLE_REGRESS_DIR");
    snprintf(path, sizeof path, "%s/oracle-%s-seed%llu.ops", dir && *dir ? dir : ".", kct_backend_name,
             (unsigned long long)seed);
    write_ops(path, log, n);
    fail_msg("cached launches differ from cold compiles (%s): %zu steps %s, written to %s", kct_backend_name,
             n, alone ? "fail alone (shrunk)" : "failed only with the threads (not shrunk)", path);
  }
  rel_summary("oracle_%s: %llu steps in %.0f s, %llu launches compared with a cold compile (%llu more in "
              "pinned worlds), %llu collects beside them, %llu cold compiles, 0 mismatches, 0 crashes",
              kct_backend_name, (unsigned long long)stats.steps, took, (unsigned long long)stats.compared,
              (unsigned long long)stats.pinned_compared, (unsigned long long)stats.collects,
              (unsigned long long)oracle_compiles);
  /* what the compared launches gave, by kernel: a value, KC_EUNAVAILABLE (a
   * native definition in the closure, off its backend), another failure */
  for (int i = 0; i < NK; i++)
    print_message("oracle: %s: %llu values, %llu KC_EUNAVAILABLE, %llu other failures\n", kname[i],
                  (unsigned long long)stats.valued[i], (unsigned long long)stats.refused[i],
                  (unsigned long long)(stats.compared / NK - stats.valued[i] - stats.refused[i]));
  free(log);
  free(memo);
  kct_rmrf(cfg.root);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_oracle)};
  return cmocka_run_group_tests_name("oracle", tests, NULL, NULL);
}
