/* SPDX-License-Identifier: MIT */
/*
 * test_faults.c -- fault-injection sweeps, SQLite style. Each main scenario
 * (define, compile, link and launch, bound arguments, launches on streams,
 * disk write, disk read) runs with the
 * Nth operation of one kind failing, for N = 1, 2, 3... until a run
 * completes without reaching the Nth operation (past N = 64, every N/8th
 * N: a compile now records dozens of headers, each an allocation and a file
 * operation; KC_FAULTS_FULL=1 sweeps every N). Kinds:
 *
 *   hook      the Nth call of the runtime's allocator hook (kc_options.alloc)
 *             that allocates: every build, also the runtime's own struct
 *   alloc     the Nth allocation of kc__fault_alloc, the  } -DKC_FAULT_INJECTION=ON
 *             allocator hook of src/testing (ltests.c)   }
 *   file      the Nth open/read/write/fsync/rename of     } (src/testing/); skipped
 *             the disk cache                             } in other builds
 *   backend   the Nth backend call that can fail         }
 *
 * each once (only the Nth fails) and sticky (the Nth and every one after it
 * fail: error paths must not need what just failed). After every run:
 *
 *  - every call that failed returned an error status with a message, and a
 *    kc_define that failed left the world where it was;
 *  - every call that succeeded gave the right answer (a failure that kcache
 *    absorbs, like a disk cache that cannot be written, changes nothing
 *    the caller sees);
 *  - a second attempt on the same runtime with faults off gives the right
 *    result (the runtime still works);
 *  - the disk cache holds no damaged entry, no temp file and no lock file,
 *    and a new runtime on it gives the right result without repairing
 *    anything;
 *  - nothing leaks (LeakSanitizer, in the ASan build, at exit).
 *
 * Runs on the host backend (tcc when installed: fast compiles).
 */
#include "rel.h"

#include "kc_internal.h"

#include <stdlib.h>
#include <unistd.h>

#define N 8

static const char SRC_H1[] = "KC_DEVICE int h(int x) { return 3 * x + 1; }";
static const char SRC_H2[] = "KC_DEVICE int h(int x) { return 5 * x + 2; }";
/* y = x + 1 */
static const char SRC_CP[] = "KC_KERNEL void cp(KC_GLOBAL int *y, KC_GLOBAL const int *x) { size_t i = "
                             "kc_global_id(0); y[i] = x[i] + 1; }";
static const char SRC_K[] =
    "KC_KERNEL void k(KC_GLOBAL int *y) { size_t i = kc_global_id(0); y[i] = h((int)i); }";

/* ---------------------------------------------------------- fault kinds */

enum { KIND_HOOK, KIND_ALLOC, KIND_FILE, KIND_BACKEND, NKINDS };
static const char *const kind_names[NKINDS] = {"hook", "alloc", "file", "backend"};

/* The allocator hook: counts calls that allocate, fails the armed one. */
static _Atomic uint64_t hook_ops, hook_fail_at, hook_hits;
static _Atomic int hook_sticky;

static void *failing_alloc(void *ud, void *ptr, size_t size) {
  (void)ud;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  uint64_t n = atomic_fetch_add(&hook_ops, 1) + 1;
  uint64_t at = atomic_load(&hook_fail_at);
  if (at && (n == at || (n > at && atomic_load(&hook_sticky)))) {
    atomic_fetch_add(&hook_hits, 1);
    return NULL;
  }
  return realloc(ptr, size);
}

static bool kind_available(int kind) {
#ifdef KC_FAULT_INJECTION
  (void)kind;
  return true;
#else
  return kind == KIND_HOOK;
#endif
}

/* Arms kind at n (0: disarms); hits counted from here. */
static void arm(int kind, uint64_t n, bool sticky) {
  atomic_store(&hook_fail_at, 0);
  atomic_store(&hook_ops, 0);
  atomic_store(&hook_hits, 0);
#ifdef KC_FAULT_INJECTION
  kc__fault_reset();
#endif
  if (!n) return;
  if (kind == KIND_HOOK) {
    atomic_store(&hook_sticky, sticky);
    atomic_store(&hook_fail_at, n);
    return;
  }
#ifdef KC_FAULT_INJECTION
  static const kc__fault_kind map[NKINDS] = {0, KC__FAULT_ALLOC, KC__FAULT_FILE, KC__FAULT_BACKEND};
  if (sticky) kc__fault_set_sticky(map[kind], n);
  else kc__fault_set(map[kind], n);
#endif
}

static uint64_t hits(void) {
#ifdef KC_FAULT_INJECTION
  return atomic_load(&hook_hits) + kc__fault_hits();
#else
  return atomic_load(&hook_hits);
#endif
}

/* ------------------------------------------------------------ scenarios */

typedef struct env {
  int kind;
  char dir[512]; /* the disk cache of disk scenarios */
  kc_options opt;
  /* made by the scenario and kept for the second attempt */
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *buf;
  kc_kernel *k;
  kc_args *bound; /* e->buf bound for e->k */
  kc_stream *s, *s2; /* the stream scenario: two streams of e->ctx, */
  kc_buffer *buf2; /* a second buffer */
  kc_kernel *cp; /* and cp */
  bool pinned;
  /* the first failure */
  kc_status st;
  char step[200];
  char msg[600];
  /* a call that succeeded with a wrong answer, or broke a promise */
  bool wrong;
  char wrong_what[600];
} env;

static kc_status failed(env *e, kc_status st, const char *step) {
  e->st = st;
  snprintf(e->step, sizeof e->step, "%s", step);
  snprintf(e->msg, sizeof e->msg, "%s", kc_errmsg(e->rt));
  return st;
}

static kc_status wrong(env *e, const char *fmt, ...) KCT_PRINTF(2, 3);
static kc_status wrong(env *e, const char *fmt, ...) {
  if (!e->wrong) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->wrong_what, sizeof e->wrong_what, fmt, ap);
    va_end(ap);
  }
  e->wrong = true;
  return KC_EBACKEND;
}

#define STEP(e, call) \
  do { \
    kc_status st_ = (call); \
    if (st_ != KC_OK) return failed((e), st_, #call); \
  } while (0)

/* kc_define / kc_undefine: a failure must leave the world where it was. */
#define CHANGE(e, call) \
  do { \
    kc_world before_ = kc_world_latest((e)->rt); \
    kc_status st_ = (call); \
    if (st_ != KC_OK) { \
      failed((e), st_, #call); \
      if (kc_world_latest((e)->rt) != before_) \
        return wrong((e), "%s failed (%s) but moved the world from %llu to %llu", #call, \
                     kc_status_name(st_), (unsigned long long)before_, \
                     (unsigned long long)kc_world_latest((e)->rt)); \
      return st_; \
    } \
  } while (0)

static kc_status ensure_runtime(env *e) {
  if (e->rt) return KC_OK;
  kc_runtime *rt = (kc_runtime *)&rt;
  kc_status st = kc_runtime_create(&e->opt, &rt);
  if (st == KC_OK) e->rt = rt;
  else if (rt) return wrong(e, "kc_runtime_create failed (%s) but set *out", kc_status_name(st));
  return st;
}

static kc_status ensure_context(env *e) {
  if (!e->ctx) STEP(e, kc_context_create(e->rt, 0, &e->ctx));
  if (!e->buf) STEP(e, kc_buffer_create(e->ctx, N * sizeof(int32_t), &e->buf));
  int32_t pattern[N];
  for (int i = 0; i < N; i++) pattern[i] = -1 - i;
  STEP(e, kc_buffer_write(e->buf, 0, pattern, sizeof pattern));
  return KC_OK;
}

/* Checks y[i] == a*i + b. */
static kc_status check_out(env *e, const int32_t *out, int a, int b, const char *what) {
  for (int i = 0; i < N; i++)
    if (out[i] != a * i + b) return wrong(e, "%s: element %d is %d, expected %d", what, i, out[i], a * i + b);
  return KC_OK;
}

/* Launches e->k (with its bound arguments once the scenario bound them)
 * and checks the result. */
static kc_status launch_check(env *e, int a, int b, const char *what) {
  int32_t out[N];
  if (e->bound) {
    kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
    STEP(e, kc_launch_args(e->bound, &grid, &block));
    STEP(e, kc_context_finish(e->ctx));
    STEP(e, kc_buffer_read(e->buf, 0, out, sizeof out));
  } else {
    STEP(e, rel_run(e->k, e->ctx, e->buf, N, out));
  }
  return check_out(e, out, a, b, what);
}

static kc_status sc_define(env *e) {
  STEP(e, ensure_runtime(e));
  kc_runtime *rt = e->rt;
  CHANGE(e, kc_define(rt, "h", SRC_H1, NULL));
  CHANGE(e, kc_define(rt, "k", SRC_K, NULL));
  CHANGE(e, kc_define(rt, "h", SRC_H2, NULL));
  kc_world w = kc_world_latest(rt), same = 0;
  CHANGE(e, kc_define(rt, "h", SRC_H2, &same)); /* identical: no new world */
  if (same != w) return wrong(e, "an identical definition made world %llu", (unsigned long long)same);
  CHANGE(e, kc_undefine(rt, "h", NULL));
  CHANGE(e, kc_define(rt, "h", SRC_H1, NULL));
  kc_kernel *k = NULL;
  STEP(e, kc_kernel_create(rt, "k", "T=int", &k));
  char *src = NULL;
  kc_status st = kc_kernel_source(k, &src);
  if (st) {
    kc_kernel_destroy(k);
    return failed(e, st, "kc_kernel_source(k, &src)");
  }
  if (!strstr(src, SRC_H1) || !strstr(src, SRC_K) || strstr(src, SRC_H2))
    wrong(e, "the translation unit of k is not the closure of the latest world:\n%s", src);
  kc_free(rt, src);
  kc_kernel_destroy(k);
  return e->wrong ? KC_EBACKEND : KC_OK;
}

static kc_status sc_compile(env *e) {
  STEP(e, ensure_runtime(e));
  CHANGE(e, kc_define(e->rt, "h", SRC_H1, NULL));
  CHANGE(e, kc_define(e->rt, "k", SRC_K, NULL));
  if (!e->k) STEP(e, kc_kernel_create(e->rt, "k", NULL, &e->k));
  STEP(e, kc_kernel_compile(e->k));
  kc_code_info info;
  STEP(e, kc_kernel_code(e->k, &info));
  /* A code instance whose backedges could not be recorded (out of memory)
   * is trusted only up to the world it was made in: still valid now. */
  kc_world now = kc_world_current(e->rt);
  if (!info.artifact || !info.artifact_size || info.min_world > now || info.max_world < now)
    return wrong(e, "kc_kernel_code: artifact %p (%zu bytes), worlds %llu..%llu", info.artifact,
                 info.artifact_size, (unsigned long long)info.min_world, (unsigned long long)info.max_world);
  return KC_OK;
}

/* The runtime, a context with its buffer, h and k defined, a handle on k. */
static kc_status kernel_ready(env *e) {
  STEP(e, ensure_runtime(e));
  kc_status st = ensure_context(e);
  if (st) return st;
  CHANGE(e, kc_define(e->rt, "h", SRC_H1, NULL));
  CHANGE(e, kc_define(e->rt, "k", SRC_K, NULL));
  if (!e->k) STEP(e, kc_kernel_create(e->rt, "k", NULL, &e->k));
  return KC_OK;
}

/* Launches: a first and a cached one, a pinned one across a redefinition,
 * one in the new world, one after a context reset. */
static kc_status launches(env *e) {
  kc_status st;
  if ((st = launch_check(e, 3, 1, "first launch"))) return st;
  if ((st = launch_check(e, 3, 1, "cached launch"))) return st;
  STEP(e, kc_pin(e->rt, NULL));
  e->pinned = true;
  CHANGE(e, kc_define(e->rt, "h", SRC_H2, NULL));
  if ((st = launch_check(e, 3, 1, "pinned launch after a redefinition"))) return st;
  STEP(e, kc_unpin(e->rt));
  e->pinned = false;
  if ((st = launch_check(e, 5, 2, "launch in the new world"))) return st;
  STEP(e, kc_context_reset(e->ctx));
  return launch_check(e, 5, 2, "launch after a context reset");
}

/* Link and launch with kc_launch. */
static kc_status sc_launch(env *e) {
  kc_status st = kernel_ready(e);
  return st ? st : launches(e);
}

/* The same with bound arguments; binding compiles. */
static kc_status sc_bound(env *e) {
  kc_status st = kernel_ready(e);
  if (st) return st;
  if (!e->bound) {
    kc_arg arg = KC_ARG_BUF(e->buf);
    kc_args *bound = (kc_args *)&bound;
    st = kc_args_create(e->k, e->ctx, &arg, 1, &bound);
    if (st && bound) return wrong(e, "kc_args_create failed (%s) but set *out", kc_status_name(st));
    if (st) return failed(e, st, "kc_args_create(e->k, e->ctx, &arg, 1, &bound)");
    e->bound = bound;
  }
  return launches(e);
}

/* A launch of k on the stream s, y its first argument and x (if not
 * NULL) its second (the host runs it on the stream's thread, or on the
 * caller where no thread is to be had). */
static kc_status launch_on(env *e, kc_stream *s, kc_kernel *k, kc_buffer *y, kc_buffer *x) {
  kc_launch_config c = kct_config(N, 1, s);
  kc_arg a[] = {KC_ARG_BUF(y), KC_ARG_BUF(x)};
  STEP(e, kc_launch_ex(k, e->ctx, &c, a, x ? 2 : 1));
  return KC_OK;
}

/* Launches on streams: k on s, synced; then k in a new world on s2 into
 * a second buffer, a wait of s for s2, and cp on s from that buffer into
 * the first (their queue items and threads; a failure kept for the sync).
 * Every launch shows in the result: a launch lost, or a wait that did not
 * order, leaves the wrong numbers. */
static kc_status sc_stream(env *e) {
  kc_status st = kernel_ready(e);
  if (st) return st;
  /* the second attempt: what the first left queued has run, and a failure
   * it left for a sync is said there (the first attempt's, not this one's) */
  if (e->s) (void)kc_stream_sync(e->s);
  if (e->s2) (void)kc_stream_sync(e->s2);
  if (!e->s) STEP(e, kc_stream_create(e->ctx, &e->s));
  if (!e->s2) STEP(e, kc_stream_create(e->ctx, &e->s2));
  if (!e->buf2) STEP(e, kc_buffer_create(e->ctx, N * sizeof(int32_t), &e->buf2));
  int32_t out[N];
  for (int i = 0; i < N; i++) out[i] = -1 - i;
  STEP(e, kc_buffer_write(e->buf2, 0, out, sizeof out));
  CHANGE(e, kc_define(e->rt, "cp", SRC_CP, NULL));
  if (!e->cp) STEP(e, kc_kernel_create(e->rt, "cp", NULL, &e->cp));
  if ((st = launch_on(e, e->s, e->k, e->buf, NULL))) return st;
  STEP(e, kc_stream_sync(e->s));
  STEP(e, kc_buffer_read(e->buf, 0, out, sizeof out));
  if ((st = check_out(e, out, 3, 1, "a launch on a stream, synced"))) return st;
  CHANGE(e, kc_define(e->rt, "h", SRC_H2, NULL));
  if ((st = launch_on(e, e->s2, e->k, e->buf2, NULL))) return st;
  STEP(e, kc_stream_wait(e->s, e->s2));
  if ((st = launch_on(e, e->s, e->cp, e->buf, e->buf2))) return st;
  STEP(e, kc_stream_sync(e->s));
  STEP(e, kc_stream_sync(e->s2));
  STEP(e, kc_buffer_read(e->buf, 0, out, sizeof out));
  return check_out(e, out, 5, 3, "a launch on one stream, copied on another after a wait for it");
}

/* Before the stream scenario's faults are armed: the runtime, h, k and cp
 * defined and compiled, so that the sweep's dense first Ns reach the
 * streams' own allocations (their queue items, at most a few per run). */
static void stream_prepare(env *e) {
  kc_status st = kernel_ready(e);
  if (!st) st = kc_define(e->rt, "cp", SRC_CP, NULL);
  if (!st) st = kc_kernel_create(e->rt, "cp", NULL, &e->cp);
  if (!st) st = kc_kernel_compile(e->k);
  if (!st) st = kc_kernel_compile(e->cp);
  if (st) fail_msg("preparing the stream scenario: %s: %s", kc_status_name(st), kc_errmsg(e->rt));
}

/* Disk write: a miss compiles and writes the entry. */
static kc_status sc_disk(env *e) {
  kc_status st = kernel_ready(e);
  return st ? st : launch_check(e, 3, 1, "launch with a disk cache");
}

/* Disk read: the entry is there (written before faults were armed). */
static void fill_store(env *e) {
  kc_options o = e->opt;
  o.alloc = NULL;
  kc_runtime *rt = NULL;
  KCT_OK(NULL, kc_runtime_create(&o, &rt));
  env tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.rt = rt;
  kc_status st = sc_disk(&tmp);
  if (st)
    fail_msg("filling the store: %s at %s: %s %s", kc_status_name(st), tmp.step, tmp.msg, tmp.wrong_what);
  kc_stats s;
  kc_stats_get(rt, &s);
  kc_runtime_destroy(rt);
  assert_int_equal(s.disk_writes, 1);
}

typedef struct scenario {
  const char *name;
  kc_status (*run)(env *e);
  bool disk;
  void (*prepare)(env *e); /* before faults are armed */
} scenario;

static const scenario scenarios[] = {
    {"define", sc_define, false, NULL},
    {"compile", sc_compile, false, NULL},
    {"link+launch", sc_launch, false, NULL},
    {"bound arguments", sc_bound, false, NULL},
    {"streams", sc_stream, false, stream_prepare},
    {"disk write", sc_disk, true, NULL},
    {"disk read", sc_disk, true, fill_store},
};
#define NSCENARIOS (sizeof scenarios / sizeof *scenarios)

/* ---------------------------------------------------------------- sweeps */

typedef struct totals {
  uint64_t runs, faults, reported, absorbed, max_n;
} totals;

/* What a sweep found wrong: collected, so that one run lists every problem
 * (the same step failing the same way is reported once, with its count). */
#define MAXPROBLEMS 40
static struct {
  char what[700];
  char key[512];
  unsigned count;
} problems[MAXPROBLEMS];
static int nproblems;

/* Library bugs that these sweeps found and that are not fixed yet: a
 * problem whose text contains one of these is printed as KNOWN and does not
 * fail the test, unless KC_FAULTS_STRICT=1. None at the moment (bugs 1 and 2
 * of RELIABILITY.md are fixed, so they fail the test again); add a line for
 * a new one only while its fix is pending. */
static const struct {
  const char *text;
  const char *bug;
} known_bugs[] = {
    {NULL, NULL},
};
static unsigned known_seen[sizeof known_bugs / sizeof *known_bugs];

static void problem(const char *key, const char *fmt, ...) KCT_PRINTF(2, 3);
static void problem(const char *key, const char *fmt, ...) {
  char what[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (!rel_env_u64("KC_FAULTS_STRICT", 0))
    for (size_t i = 0; i < sizeof known_bugs / sizeof *known_bugs; i++)
      if (known_bugs[i].text && strstr(what, known_bugs[i].text)) {
        if (!known_seen[i]++) print_message("KNOWN (%s): %s\n", known_bugs[i].bug, what);
        return;
      }
  for (int i = 0; i < nproblems; i++)
    if (!strcmp(problems[i].key, key)) {
      problems[i].count++;
      return;
    }
  if (nproblems == MAXPROBLEMS) return;
  snprintf(problems[nproblems].key, sizeof problems[0].key, "%s", key);
  snprintf(problems[nproblems].what, sizeof problems[0].what, "%s", what);
  problems[nproblems++].count = 1;
}

static totals by_kind[NKINDS];
static uint64_t total_runs;

/* dir: the disk cache of a disk scenario (NULL: a new one). */
static void env_open(env *e, const scenario *sc, int kind, const char *dir) {
  memset(e, 0, sizeof *e);
  e->kind = kind;
  kc_options_init(&e->opt);
  e->opt.backend = KC_BACKEND_HOST;
  e->opt.host_cc = rel_cc();
  if (kind == KIND_HOOK) e->opt.alloc = failing_alloc;
#ifdef KC_FAULT_INJECTION
  if (kind == KIND_ALLOC) e->opt.alloc = kc__fault_alloc; /* counts KC__FAULT_ALLOC; libc behind it */
#endif
  if (sc->disk) {
    if (dir) snprintf(e->dir, sizeof e->dir, "%s", dir);
    else rel_mkdtemp(e->dir, sizeof e->dir, "faults");
    e->opt.cache_dir = e->dir;
    e->opt.cache_lock_timeout_ms = 2000;
  } else {
    e->opt.cache_disable = 1;
  }
}

/* The store after a run: sound, and a new runtime gets the right answer
 * from it without repairing anything. */
static void check_store(const scenario *sc, int kind, uint64_t n, env *e) {
  rel_store_check c;
  rel_store_check_dir(e->dir, &c);
  char key[200];
  snprintf(key, sizeof key, "%s/%s/store", sc->name, kind_names[kind]);
  if (c.damaged || c.misplaced || c.temps || c.locks)
    problem(key, "%s, %s fault %llu: the store is not sound: %s", sc->name, kind_names[kind],
            (unsigned long long)n, c.first_problem);
  env fresh;
  env_open(&fresh, sc, KIND_BACKEND, e->dir); /* no allocator hook, no faults armed */
  kc_status st = sc_disk(&fresh);
  kc_stats s;
  kc_stats_get(fresh.rt, &s);
  kc_runtime_destroy(fresh.rt);
  if (st || fresh.wrong)
    problem(key, "%s, %s fault %llu: a new runtime on the store: %s at %s: %s%s", sc->name, kind_names[kind],
            (unsigned long long)n, kc_status_name(st), fresh.step, fresh.msg, fresh.wrong_what);
  if (s.disk_repairs)
    problem(key, "%s, %s fault %llu: the store held %llu damaged entr%s", sc->name, kind_names[kind],
            (unsigned long long)n, (unsigned long long)s.disk_repairs, s.disk_repairs == 1 ? "y" : "ies");
  rel_store_check_dir(e->dir, &c);
  if (c.damaged || c.temps || c.locks || c.entries != 1)
    problem(key, "%s, %s fault %llu: after a clean run the store holds %zu entries: %s", sc->name,
            kind_names[kind], (unsigned long long)n, c.entries, c.first_problem);
}

static void sweep(const scenario *sc, int kind, bool sticky) {
  totals *t = &by_kind[kind];
  /* to look at one run: KC_FAULTS_SCENARIO=name KC_FAULTS_N=n (with KC_FAULT_BACKTRACE=1) */
  const char *only = getenv("KC_FAULTS_SCENARIO");
  if (only && *only && strcmp(only, sc->name)) return;
  uint64_t only_n = rel_env_u64("KC_FAULTS_N", 0);
  /* every N up to DENSE, then every N/8th (the error paths past there are
   * the same kinds again: one more file record, one more edge); all of them
   * with KC_FAULTS_FULL=1 */
  enum { DENSE = 64 };
  bool full = rel_env_u64("KC_FAULTS_FULL", 0) != 0;
  for (uint64_t n = only_n ? only_n : 1;; n += full || n < DENSE ? 1 : n / 8) {
    if (n > 100000) fail_msg("%s, %s: the sweep does not end", sc->name, kind_names[kind]);
    env e;
    env_open(&e, sc, kind, NULL);
    if (sc->prepare) sc->prepare(&e);
    arm(kind, n, sticky);
    kc_status st = sc->run(&e);
    uint64_t h = hits();
    arm(kind, 0, false);
    if (e.pinned && kc_unpin(e.rt) == KC_OK) e.pinned = false; /* the caller's pin, not kcache's */
    const char *mode = sticky ? "sticky " : "";
    char key[512];
    snprintf(key, sizeof key, "%s/%s%s/%s/%s", sc->name, mode, kind_names[kind], e.wrong ? "wrong" : e.step,
             kc_status_name(st));
    if (e.wrong)
      problem(key, "%s, %s%s fault %llu: %s", sc->name, mode, kind_names[kind], (unsigned long long)n,
              e.wrong_what);
    if (st != KC_OK && !e.wrong) {
      if (!h)
        problem(key, "%s, %s%s fault %llu: %s returned %s without an injected fault: %s", sc->name, mode,
                kind_names[kind], (unsigned long long)n, e.step, kc_status_name(st), e.msg);
      else if (!e.msg[0])
        problem(key, "%s, %s%s fault %llu: %s returned %s without a message", sc->name, mode,
                kind_names[kind], (unsigned long long)n, e.step, kc_status_name(st));
      t->reported++;
    } else if (h) {
      t->absorbed++;
    }
    /* the second attempt, faults off: on the same runtime if there is one */
    char first[256];
    snprintf(first, sizeof first, "%s at %s", kc_status_name(st), st ? e.step : "-");
    e.st = KC_OK;
    e.wrong = false;
    e.step[0] = e.msg[0] = 0;
    kc_status st2 = sc->run(&e);
    if (st2 || e.wrong) {
      snprintf(key, sizeof key, "%s/%s%s/second/%s", sc->name, mode, kind_names[kind], first);
      problem(key, "%s, %s%s fault %llu (first attempt: %s): the second attempt failed: %s at %s: %s%s",
              sc->name, mode, kind_names[kind], (unsigned long long)n, first, kc_status_name(st2), e.step,
              e.msg, e.wrong_what);
    }
    if (e.pinned && kc_unpin(e.rt) == KC_OK) e.pinned = false;
    /* Every entry in the store is sound: none may be taken for damage, except
     * that one the backend refuses to load is removed by design (an injected
     * link failure while the store tries it looks just like that). */
    if (sc->disk && e.rt && kind != KIND_BACKEND) {
      kc_stats s;
      kc_stats_get(e.rt, &s);
      snprintf(key, sizeof key, "%s/%s%s/repair", sc->name, mode, kind_names[kind]);
      if (s.disk_repairs)
        problem(key, "%s, %s%s fault %llu: a sound entry was taken for a damaged one and removed", sc->name,
                mode, kind_names[kind], (unsigned long long)n);
    }
    kc_runtime_destroy(e.rt);
    if (sc->disk) {
      check_store(sc, kind, n, &e);
      rel_rmrf(e.dir);
    }
    t->runs++;
    t->faults += h;
    total_runs++;
    if (!h || only_n) {
      if (n - 1 > t->max_n) t->max_n = n - 1; /* (past DENSE: within n / 8 of it) */
      break;
    }
  }
}

static void sweep_kind(int kind) {
  if (!kind_available(kind)) {
    print_message("%s faults need a build with -DKC_FAULT_INJECTION=ON\n", kind_names[kind]);
    skip();
  }
  totals before = by_kind[kind];
  for (size_t i = 0; i < NSCENARIOS; i++) {
    if (kind == KIND_FILE && !scenarios[i].disk) continue; /* no file operations there */
    sweep(&scenarios[i], kind, false);
    sweep(&scenarios[i], kind, true);
  }
  totals *t = &by_kind[kind];
  /* a sweep that never hit a fault tested nothing: the hook is not wired */
  if (!getenv("KC_FAULTS_SCENARIO") && t->faults == before.faults)
    fail_msg("%s faults: no fault was injected in any scenario", kind_names[kind]);
  if (nproblems) {
    for (int i = 0; i < nproblems; i++) print_message("  - %s (x%u)\n", problems[i].what, problems[i].count);
    int np = nproblems;
    nproblems = 0;
    fail_msg("%s faults: the %d problem(s) above", kind_names[kind], np);
  }
  rel_summary("faults %s: %llu injected in %llu runs (%llu reported as errors, %llu absorbed), "
              "up to N=%llu, nothing lost",
              kind_names[kind], (unsigned long long)(t->faults - before.faults),
              (unsigned long long)(t->runs - before.runs),
              (unsigned long long)(t->reported - before.reported),
              (unsigned long long)(t->absorbed - before.absorbed), (unsigned long long)t->max_n);
}

static void test_allocator_hook(void **state) {
  (void)state;
  sweep_kind(KIND_HOOK);
}

static void test_alloc(void **state) {
  (void)state;
  sweep_kind(KIND_ALLOC);
}

static void test_file(void **state) {
  (void)state;
  sweep_kind(KIND_FILE);
}

static void test_backend(void **state) {
  (void)state;
  sweep_kind(KIND_BACKEND);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  if (kct_backend != KC_BACKEND_HOST) {
    printf("SKIPPED: the sweeps run on the host backend\n");
    return 77;
  }
  unsetenv("KC_CACHE_DISABLE"); /* the disk scenarios need their store */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allocator_hook),
      cmocka_unit_test(test_alloc),
      cmocka_unit_test(test_file),
      cmocka_unit_test(test_backend),
  };
  rc = KCT_RUN(tests);
  uint64_t faults = 0;
  for (int k = 0; k < NKINDS; k++) faults += by_kind[k].faults;
  rel_summary("faults total: %llu injected in %llu runs", (unsigned long long)faults,
              (unsigned long long)total_runs);
  for (size_t i = 0; i < sizeof known_bugs / sizeof *known_bugs; i++)
    if (known_seen[i] && known_bugs[i].bug)
      rel_summary("faults: known library bug still seen %u time(s): %s", known_seen[i], known_bugs[i].bug);
  return rc;
}
