/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_deps -- what the rule "every identifier a definition mentions is
 * an edge" (src/core/resolve.c) costs in needless recompiles, on real
 * kernels. The rule before it recorded only names the table defined, and
 * names in call position; the new rule also records every name that is
 * absent and never called: local variables, parameters, struct members,
 * macros of the C library, names tested by #ifdef. A later definition of
 * such a name now recompiles the kernel. Most of those recompiles are
 * needless (a local `acc` shadows a helper named acc), some are not (the
 * name is a macro tested by #ifndef, a type, an enumerator).
 *
 * For each KC_KERNEL of each corpus file (bench/deps_corpus: real.c,
 * everyday kernels; project.c, kcache's own), in a child process of its
 * own (a crash or a hang costs that kernel's row, not the run):
 *   - a host-backend runtime (tcc if /usr/bin/tcc exists, else cc; no disk
 *     cache), the file loaded with kc_define_file, the kernel's closure
 *     from kc__resolve: its edges (files left out), those to defined names,
 *     to absent names some mention calls (the old rule had these too), and
 *     to absent names never called (new with this rule);
 *   - a reference launch: 256 work items (grid 256x1x1, block 1x1x1),
 *     x = 256 pseudo-random floats in [-1, 1), y zeroed, n = 16;
 *   - for each absent, never-called name N: kc_define(N, "KC_DEVICE int
 *     N(int kc_unused) { return 0; }") (a helper a user adds later), a
 *     launch (did it recompile: compiles or compile_failures grew; is y
 *     bitwise the reference; a failed launch is "changed: fails"), then
 *     kc_undefine(N) and a launch to be back (checked against the
 *     reference: not_restored counts those that were not). A name
 *     kc_define refuses is "not definable".
 * A recompile with the reference's result is a needless one.
 *
 * Usage: kc_bench_deps [--json] [FILE.c ...]   (default: the two corpus files)
 *   cmake --build build --target kc_bench_deps && build/bench/kc_bench_deps
 * The table per kernel with the names behind each count, then totals per
 * corpus and overall; --json prints only the totals, as one JSON object.
 */
#include "core/core.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef KC_DEPS_CORPUS
#define KC_DEPS_CORPUS "bench/deps_corpus"
#endif

enum { NX = 256, NITEMS = 256, NROW = 16, MAX_KERNELS = 64, NAME_MAX_LEN = 64, LIST = 2048, TIMEOUT_S = 300 };

/* The counts of a kernel, a corpus, all corpora. */
enum {
  C_KERNELS,
  C_FAILED, /* kernels that could not be measured (row.msg says why) */
  C_EDGES,
  C_DEFINED,
  C_ABS_CALLED,
  C_ABS_UNCALLED,
  C_NOTDEF,
  C_RECOMPILES,
  C_NEEDLESS,
  C_CHANGED, /* ran, and y differs from the reference */
  C_FAILS, /* the launch failed (did not compile) */
  C_NOT_RESTORED, /* after kc_undefine, y was not the reference again */
  C_N
};
static const char *const cnames[C_N] = {"kernels",       "failed_kernels",  "edges",         "defined",
                                        "absent_called", "absent_uncalled", "not_definable", "recompiles",
                                        "needless",      "changed",         "changed_fails", "not_restored"};

typedef struct counts {
  unsigned v[C_N];
} counts;

/* One kernel's row, as a child sends it back. */
typedef struct row {
  char kernel[NAME_MAX_LEN];
  counts c;
  char msg[256]; /* why the kernel could not be measured */
  char needless[LIST], changed[LIST], notdef[LIST], not_restored[LIST];
} row;

/* One kernel's runtime, context, buffers and reference result. */
typedef struct session {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *y, *x;
  float ref[NITEMS], out[NITEMS];
} session;

static const char *host_cc(void) { return access("/usr/bin/tcc", X_OK) == 0 ? "tcc" : "cc"; }

/* Appends " NAME" (or NAME(note)) to a list, "..." once it is full. */
static void list_add(char *list, const char *name, const char *note) {
  size_t n = strlen(list);
  if (n + 4 >= LIST) return;
  int w = snprintf(list + n, LIST - n, note ? " %s(%s)" : " %s", name, note);
  if (w < 0 || (size_t)w >= LIST - n) snprintf(list + (n < LIST - 5 ? n : LIST - 5), 5, " ...");
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n + 4096 + 1 > cap) {
      cap = (n + 4096 + 1) * 2;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    got = fread(buf + n, 1, 4096, f);
    n += got;
  } while (got > 0);
  fclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}

/* Blanks t's comments (and the insides of its literals), so that a
 * kernel named in a comment is not taken for one. */
static void blank_comments(char *t) {
  for (char *p = t; *p; p++) {
    if (p[0] == '/' && p[1] == '*') {
      char *e = strstr(p + 2, "*/");
      e = e ? e + 2 : p + strlen(p);
      memset(p, ' ', (size_t)(e - p));
      p = e - 1;
    } else if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') *p++ = ' ';
      if (!*p) break;
    } else if (*p == '"' || *p == '\'') {
      char q = *p;
      for (p++; *p && *p != q && *p != '\n'; p++) {
        if (*p == '\\' && p[1]) *p++ = ' ';
        *p = ' ';
      }
      if (!*p) break;
    }
  }
}

/* The names of "KC_KERNEL void NAME(" in text outside comments, in file order. */
static size_t find_kernels(const char *text, char names[][NAME_MAX_LEN], size_t max) {
  static const char mark[] = "KC_KERNEL void ";
  char *t = strdup(text);
  size_t n = 0;
  if (!t) return 0;
  blank_comments(t);
  for (const char *p = strstr(t, mark); p && n < max; p = strstr(p + 1, mark)) {
    const char *s = p + sizeof mark - 1, *e = s;
    while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') || *e == '_') e++;
    if (e == s || *e != '(' || (size_t)(e - s) >= NAME_MAX_LEN) continue;
    memcpy(names[n], s, (size_t)(e - s));
    names[n++][e - s] = 0;
  }
  free(t);
  return n;
}

/* x: 256 floats in [-1, 1) from a fixed linear congruential sequence. */
static void fill_x(float *x) {
  uint32_t state = 20261201u;
  for (int i = 0; i < NX; i++) {
    state = state * 1664525u + 1013904223u;
    x[i] = (float)(state >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
}

static void fail_row(row *r, const char *what, kc_runtime *rt, kc_status st) {
  snprintf(r->msg, sizeof r->msg, "%s: %s: %.180s", what, kc_status_name(st), kc_errmsg(rt));
  r->c.v[C_FAILED] = 1;
}

/* A runtime with the file loaded, the kernel's handle, a context and x. */
static bool session_open(session *s, row *r, const char *file, const char *text, size_t len) {
  kc_options o;
  kc_options_init(&o);
  o.backend = KC_BACKEND_HOST;
  o.host_cc = host_cc();
  o.cache_disable = 1;
  o.log_level = KC_LOG_ERROR;
  kc_status st = kc_runtime_create(&o, &s->rt);
  if (st) return fail_row(r, "kc_runtime_create", NULL, st), false;
  float x[NX];
  fill_x(x);
  if ((st = kc_define_file(s->rt, file, text, len, NULL, NULL))) fail_row(r, "kc_define_file", s->rt, st);
  else if ((st = kc_kernel_create(s->rt, r->kernel, NULL, &s->k))) fail_row(r, "kc_kernel_create", s->rt, st);
  else if ((st = kc_context_create(s->rt, 0, &s->ctx))) fail_row(r, "kc_context_create", s->rt, st);
  else if ((st = kc_buffer_create(s->ctx, NITEMS * sizeof(float), &s->y)) ||
           (st = kc_buffer_create(s->ctx, NX * sizeof(float), &s->x)))
    fail_row(r, "kc_buffer_create", s->rt, st);
  else if ((st = kc_buffer_write(s->x, 0, x, sizeof x))) fail_row(r, "kc_buffer_write", s->rt, st);
  return st == KC_OK;
}

/* One launch with y zeroed; y read back into out. */
static kc_status launch(session *s, float *out) {
  static const float zeros[NITEMS];
  int n = NROW;
  kc_arg args[] = {KC_ARG_BUF(s->y), KC_ARG_BUF(s->x), KC_ARG_VAL(n)};
  kc_dim3 grid = {NITEMS, 1, 1}, block = {1, 1, 1};
  kc_status st = kc_buffer_write(s->y, 0, zeros, sizeof zeros);
  if (!st) st = kc_launch(s->k, s->ctx, &grid, &block, args, 3);
  if (!st) st = kc_context_finish(s->ctx);
  if (!st) st = kc_buffer_read(s->y, 0, out, NITEMS * sizeof(float));
  return st;
}

/* Compiles tried: those that succeeded and those that failed. */
static uint64_t compiles_tried(kc_runtime *rt) {
  kc_stats st;
  kc_stats_get(rt, &st);
  return st.compiles + st.compile_failures;
}

/* The kernel's closure at the latest world: counts its edges, and copies
 * the names of the absent, never-called ones into *names (malloc'd). */
static bool closure_names(session *s, row *r, char ***names, size_t *n) {
  kc__closure c;
  kc_status st = kc__resolve(s->rt, s->k->spec, kc_world_latest(s->rt), &c);
  if (st) return fail_row(r, "kc__resolve", s->rt, st), false;
  *names = calloc(c.nedges ? c.nedges : 1, sizeof **names);
  *n = 0;
  for (uint32_t i = 0; *names && i < c.nedges; i++) {
    const char *name = c.edges[i].binding->name;
    if (name[0] == '<' || name[0] == '/') continue; /* files outside the table */
    r->c.v[C_EDGES]++;
    if (c.edges[i].def) r->c.v[C_DEFINED]++;
    else if (c.edges[i].call) r->c.v[C_ABS_CALLED]++;
    else {
      r->c.v[C_ABS_UNCALLED]++;
      (*names)[(*n)++] = strdup(name);
    }
  }
  kc__closure_free(s->rt, &c);
  if (!*names) snprintf(r->msg, sizeof r->msg, "out of memory"), r->c.v[C_FAILED] = 1;
  return *names != NULL;
}

/* Defines `name` as a helper, launches, compares, undefines, launches. */
static void trial(session *s, row *r, const char *name) {
  char src[256];
  kc_status st = KC_EINVAL;
  if (kc__is_identifier(name) && strlen(name) < 128) {
    snprintf(src, sizeof src, "KC_DEVICE int %s(int kc_unused) { return 0; }", name);
    st = kc_define(s->rt, name, src, NULL);
  }
  if (st) {
    r->c.v[C_NOTDEF]++;
    list_add(r->notdef, name, kc_status_name(st));
    return;
  }
  uint64_t before = compiles_tried(s->rt);
  kc_status lst = launch(s, s->out);
  bool recompiled = compiles_tried(s->rt) > before;
  bool same = !lst && !memcmp(s->out, s->ref, sizeof s->ref);
  r->c.v[C_RECOMPILES] += recompiled;
  if (lst) {
    r->c.v[C_FAILS]++;
    list_add(r->changed, name, "fails");
  } else if (!same) {
    r->c.v[C_CHANGED]++;
    list_add(r->changed, name, "differs");
  } else if (recompiled) {
    r->c.v[C_NEEDLESS]++;
    list_add(r->needless, name, NULL);
  }
  st = kc_undefine(s->rt, name, NULL);
  if (st || launch(s, s->out) || memcmp(s->out, s->ref, sizeof s->ref)) {
    r->c.v[C_NOT_RESTORED]++;
    list_add(r->not_restored, name, NULL);
  }
}

/* A whole kernel's measurement (in the child). */
static void measure(const char *file, const char *text, size_t len, row *r) {
  session s = {0};
  r->c.v[C_KERNELS] = 1;
  char **names = NULL;
  size_t n = 0;
  if (session_open(&s, r, file, text, len) && closure_names(&s, r, &names, &n)) {
    kc_status st = launch(&s, s.ref);
    if (st) fail_row(r, "the reference launch", s.rt, st);
    for (size_t i = 0; !st && i < n; i++) trial(&s, r, names[i]);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  kc_runtime_destroy(s.rt);
}

/* measure() in a child process: its row comes back through a pipe; a
 * child that crashes or runs past TIMEOUT_S leaves a failed row. */
static void measure_isolated(const char *file, const char *text, size_t len, row *r) {
  int fds[2];
  fflush(stdout);
  pid_t pid = -1;
  if (pipe(fds) == 0 && (pid = fork()) == 0) {
    close(fds[0]);
    alarm(TIMEOUT_S);
    measure(file, text, len, r);
    size_t off = 0;
    while (off < sizeof *r) {
      ssize_t w = write(fds[1], (const char *)r + off, sizeof *r - off);
      if (w <= 0) _exit(2);
      off += (size_t)w;
    }
    _exit(0);
  }
  if (pid < 0) {
    snprintf(r->msg, sizeof r->msg, "pipe or fork failed");
    r->c.v[C_KERNELS] = r->c.v[C_FAILED] = 1;
    return;
  }
  close(fds[1]);
  row got;
  size_t off = 0;
  ssize_t n;
  while (off < sizeof got && (n = read(fds[0], (char *)&got + off, sizeof got - off)) > 0) off += (size_t)n;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (off == sizeof got && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    *r = got;
    return;
  }
  r->c.v[C_KERNELS] = r->c.v[C_FAILED] = 1;
  if (WIFSIGNALED(status))
    snprintf(r->msg, sizeof r->msg, "the child died of signal %d%s", WTERMSIG(status),
             WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
  else snprintf(r->msg, sizeof r->msg, "the child exited with status %d", WEXITSTATUS(status));
}

static void counts_add(counts *to, const counts *c) {
  for (int i = 0; i < C_N; i++) to->v[i] += c->v[i];
}

static double ratio(unsigned a, unsigned b) { return b ? (double)a / b : 0.0; }

static const char header_fmt[] = "%-16s %6s %8s %8s %10s %8s %10s %8s %8s %6s\n";
static const char row_fmt[] = "%-16s %6u %8u %8u %10u %8u %10u %8u %8u %6u\n";

static void print_counts(const char *label, const counts *c) {
  const unsigned *v = c->v;
  printf(row_fmt, label, v[C_EDGES], v[C_DEFINED], v[C_ABS_CALLED], v[C_ABS_UNCALLED], v[C_NOTDEF],
         v[C_RECOMPILES], v[C_NEEDLESS], v[C_CHANGED], v[C_FAILS]);
}

static void print_row(const row *r) {
  if (r->c.v[C_FAILED]) {
    printf("%-16s not measured: %s\n", r->kernel, r->msg);
    return;
  }
  print_counts(r->kernel, &r->c);
  if (*r->needless) printf("    needless:%s\n", r->needless);
  if (*r->changed) printf("    changed:%s\n", r->changed);
  if (*r->notdef) printf("    not definable:%s\n", r->notdef);
  if (*r->not_restored) printf("    NOT RESTORED after kc_undefine:%s\n", r->not_restored);
}

static void print_fractions(const char *label, const counts *c) {
  const unsigned *v = c->v;
  unsigned measured = v[C_KERNELS] - v[C_FAILED];
  printf("%s: %u kernels (%u not measured); needless recompiles %u of %u absent-uncalled names (%.3f), "
         "%.2f per kernel; results changed %u (%u of them fail to compile or launch), %.3f per name; "
         "not definable %u; not restored %u\n",
         label, v[C_KERNELS], v[C_FAILED], v[C_NEEDLESS], v[C_ABS_UNCALLED],
         ratio(v[C_NEEDLESS], v[C_ABS_UNCALLED]), ratio(v[C_NEEDLESS], measured), v[C_CHANGED] + v[C_FAILS],
         v[C_FAILS], ratio(v[C_CHANGED] + v[C_FAILS], v[C_ABS_UNCALLED]), v[C_NOTDEF], v[C_NOT_RESTORED]);
}

static void json_counts(const counts *c) {
  const unsigned *v = c->v;
  for (int i = 0; i < C_N; i++) printf("\"%s\": %u, ", cnames[i], v[i]);
  unsigned measured = v[C_KERNELS] - v[C_FAILED];
  printf("\"needless_per_absent_uncalled\": %.4f, \"needless_per_kernel\": %.4f, "
         "\"changed_per_absent_uncalled\": %.4f",
         ratio(v[C_NEEDLESS], v[C_ABS_UNCALLED]), ratio(v[C_NEEDLESS], measured),
         ratio(v[C_CHANGED] + v[C_FAILS], v[C_ABS_UNCALLED]));
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Every kernel of one corpus file: its rows printed (unless json), its
 * totals into *total. false if the file cannot be read. */
static bool run_corpus(const char *path, bool json, counts *total) {
  size_t len;
  char *text = slurp(path, &len);
  if (!text) {
    fprintf(stderr, "kc_bench_deps: cannot read %s\n", path);
    return false;
  }
  static char kernels[MAX_KERNELS][NAME_MAX_LEN];
  size_t nk = find_kernels(text, kernels, MAX_KERNELS);
  if (!json) {
    printf("\ncorpus %s: %zu kernels\n", base_name(path), nk);
    printf(header_fmt, "kernel", "edges", "defined", "abs-call", "abs-uncall", "not-def", "recompiles",
           "needless", "changed", "fails");
  }
  counts sum = {{0}};
  for (size_t i = 0; i < nk; i++) {
    static row r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernels[i]);
    measure_isolated(path, text, len, &r);
    counts_add(&sum, &r.c);
    if (!json) print_row(&r);
  }
  free(text);
  if (!json) {
    print_counts("total", &sum);
    print_fractions(base_name(path), &sum);
  }
  *total = sum;
  return true;
}

int main(int argc, char **argv) {
  bool json = false;
  const char *files[16];
  int nfiles = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (argv[i][0] == '-' || nfiles == 16) {
      fprintf(stderr, "usage: kc_bench_deps [--json] [FILE.c ...]\n");
      return 2;
    } else files[nfiles++] = argv[i];
  }
  if (!nfiles) {
    files[nfiles++] = KC_DEPS_CORPUS "/real.c";
    files[nfiles++] = KC_DEPS_CORPUS "/project.c";
  }
  if (!json)
    printf("kc_bench_deps: needless recompiles of the rule \"every identifier is an edge\"; host backend, "
           "host_cc %s, disk cache off; %d work items, n = %d; a helper `KC_DEVICE int N(int kc_unused)` "
           "defined for each absent, never-called name N of each kernel's closure\n",
           host_cc(), NITEMS, NROW);
  counts per[16], all = {{0}};
  for (int f = 0; f < nfiles; f++) {
    if (!run_corpus(files[f], json, &per[f])) return 1;
    counts_add(&all, &per[f]);
  }
  if (!json) {
    printf("\n");
    print_fractions("all corpora", &all);
    return 0;
  }
  printf("{\"bench\": \"kc_bench_deps\", \"host_cc\": \"%s\", \"corpora\": [", host_cc());
  for (int f = 0; f < nfiles; f++) {
    printf("%s{\"file\": \"%s\", ", f ? ", " : "", base_name(files[f]));
    json_counts(&per[f]);
    printf("}");
  }
  printf("], \"total\": {");
  json_counts(&all);
  printf("}}\n");
  return 0;
}
