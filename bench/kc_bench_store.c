/*
 * kc_bench_store -- what the disk cache saves, per backend that runs here.
 *
 *   first launch   a new process runs a typical kernel once: the time of
 *                  its first kc_launch (+ finish), which resolves, compiles
 *                  or loads, links and runs, with a cold store (empty
 *                  directory) and a warm one (what the cold run wrote); the
 *                  ratio is what the store saves (targets: host with cc -O2
 *                  10x, OpenCL and CUDA 20x)
 *   process        the same processes from main() to the first result
 *                  (runtime and context creation included), for context
 *   disk hit       in one process with the compiler identity and the probe
 *                  context already up: kc_kernel_compile of the typical
 *                  kernel from a warm store (key, read, verify checksums,
 *                  test-load by the backend; target < 2 ms), and the first
 *                  launch after it (the link into the context)
 *
 * Each measurement is a median over --runs runs (default 7; --quick 3).
 * Caches other than kcache's are off in the child processes (PoCL's kernel
 * cache, CUDA's JIT cache), so that "cold" is cold.
 *
 * Usage: kc_bench_store [--json] [--quick] [--runs N] [--backend host|tcc|opencl|opencl+pocl|cuda]
 */
#include <kcache.h>

#include "kc_bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A typical kernel: an entry and four helpers, a loop, branches. */
static const struct {
  const char *name, *src;
} defs[] = {
    {"lerp3", "KC_DEVICE float lerp3(float a, float b, float t) { return a + (b - a) * t; }"},
    {"smooth", "KC_DEVICE float smooth(float x) {\n"
               "  x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);\n"
               "  return x * x * (3.0f - 2.0f * x);\n"
               "}"},
    {"poly", "KC_DEVICE float poly(float x) {\n"
             "  float r = 0.0f;\n"
             "  for (int i = 0; i < 8; i++) r = r * x + (float)(i + 1) * 0.125f;\n"
             "  return r;\n"
             "}"},
    {"shade", "KC_DEVICE float shade(float x, float y) {\n"
              "  return lerp3(smooth(x), poly(y), 0.25f) + smooth(y) * poly(x);\n"
              "}"},
    {"typical", "KC_KERNEL void typical(KC_GLOBAL float *out, KC_GLOBAL const float *in, float scale, int n) {\n"
                "  size_t i = kc_global_id(0);\n"
                "  if ((int)i < n) {\n"
                "    float x = in[i] * scale;\n"
                "    out[i] = shade(x, 1.0f - x);\n"
                "  }\n"
                "}"},
};
enum { NDEFS = sizeof defs / sizeof *defs, N = 1024 };

static float lerp3_ref(float a, float b, float t) { return a + (b - a) * t; }
static float smooth_ref(float x) {
  x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
  return x * x * (3.0f - 2.0f * x);
}
static float poly_ref(float x) {
  float r = 0.0f;
  for (int i = 0; i < 8; i++) r = r * x + (float)(i + 1) * 0.125f;
  return r;
}
static float shade_ref(float x, float y) { return lerp3_ref(smooth_ref(x), poly_ref(y), 0.25f) + smooth_ref(y) * poly_ref(x); }

/* The backends measured: a name, the kind, and the host compiler. */
typedef struct bconf {
  const char *label; /* "host", "tcc", "opencl", "cuda" */
  kc_backend_kind kind;
  const char *cc;       /* host only */
  const char *compiler; /* for the table */
  double target;        /* first-launch speedup to reach */
  bool platform_cache;  /* let the platform keep its own cache (PoCL's), fresh per run */
} bconf;

static const bconf confs[] = {
    {"host", KC_BACKEND_HOST, "cc", "cc -O2", 10},
    {"tcc", KC_BACKEND_HOST, "tcc", "tcc", 0},
    {"opencl", KC_BACKEND_OPENCL, NULL, "OpenCL", 20},
    /* The same machine with PoCL's own kernel cache on (its default): the
     * cold run starts from an empty PoCL cache, the warm run finds what the
     * cold run left there, as a second process on one machine would. */
    {"opencl+pocl", KC_BACKEND_OPENCL, NULL, "OpenCL", 20, true},
    {"cuda", KC_BACKEND_CUDA, NULL, "NVRTC", 20},
};

static const bconf *conf_named(const char *label) {
  for (size_t i = 0; i < sizeof confs / sizeof *confs; i++)
    if (!strcmp(confs[i].label, label)) return &confs[i];
  return NULL;
}

static kc_runtime *make_runtime(const bconf *c, const char *dir) {
  kc_options o;
  kc_options_init(&o);
  o.backend = c->kind;
  o.host_cc = c->cc;
  o.cache_dir = dir;
  kc_runtime *rt = NULL;
  kc_status st = kc_runtime_create(&o, &rt);
  if (st) {
    fprintf(stderr, "kc_bench_store: %s runtime: %s: %s\n", c->label, kc_status_name(st), kc_errmsg(NULL));
    return NULL;
  }
  return rt;
}

typedef struct session {
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *in, *out;
  kc_kernel *k;
} session;

static bool session_open(session *s, const bconf *c, const char *dir) {
  memset(s, 0, sizeof *s);
  if (!(s->rt = make_runtime(c, dir))) return false;
  float in[N];
  for (int i = 0; i < N; i++) in[i] = (float)i / N;
  kc_status st = kc_context_create(s->rt, 0, &s->ctx);
  if (!st) st = kc_buffer_create(s->ctx, sizeof in, &s->in);
  if (!st) st = kc_buffer_create(s->ctx, sizeof in, &s->out);
  if (!st) st = kc_buffer_write(s->in, 0, in, sizeof in);
  for (int i = 0; !st && i < NDEFS; i++) st = kc_define(s->rt, defs[i].name, defs[i].src, NULL);
  if (!st) st = kc_kernel_create(s->rt, "typical", NULL, &s->k);
  if (st) fprintf(stderr, "kc_bench_store: setting up: %s: %s\n", kc_status_name(st), kc_errmsg(s->rt));
  return st == KC_OK;
}

static kc_status session_launch(session *s) {
  float scale = 1.5f;
  int n = N;
  kc_arg args[] = {KC_ARG_BUF(s->out), KC_ARG_BUF(s->in), KC_ARG_VAL(scale), KC_ARG_VAL(n)};
  kc_dim3 grid = {N / 64, 1, 1}, block = {64, 1, 1};
  kc_status st = kc_launch(s->k, s->ctx, &grid, &block, args, 4);
  return st ? st : kc_context_finish(s->ctx);
}

static bool session_check(session *s) {
  float out[N];
  if (kc_buffer_read(s->out, 0, out, sizeof out)) return false;
  for (int i = 0; i < N; i++) {
    float x = (float)i / N * 1.5f, want = shade_ref(x, 1.0f - x);
    if (fabsf(out[i] - want) > 1e-3f * (1.0f + fabsf(want))) {
      fprintf(stderr, "kc_bench_store: wrong result at %d: %g, expected %g\n", i, out[i], want);
      return false;
    }
  }
  return true;
}

static void session_close(session *s) {
  kc_kernel_destroy(s->k);
  kc_runtime_destroy(s->rt); /* contexts and buffers with it */
}

/* --child LABEL DIR: one first launch; prints "first_ns total_ns compiles disk_hits". */
static int child(const char *label, const char *dir) {
  double t0 = now_ns();
  const bconf *c = conf_named(label);
  session s;
  if (!c || !session_open(&s, c, dir)) return 1;
  double t1 = now_ns();
  kc_status st = session_launch(&s);
  double t2 = now_ns();
  if (st) {
    fprintf(stderr, "kc_bench_store: first launch: %s: %s\n", kc_status_name(st), kc_errmsg(s.rt));
    return 1;
  }
  if (!session_check(&s)) return 1;
  kc_stats k;
  kc_stats_get(s.rt, &k);
  printf("%.0f %.0f %llu %llu\n", t2 - t1, t2 - t0, (unsigned long long)k.compiles,
         (unsigned long long)k.disk_hits);
  session_close(&s);
  return 0;
}

/* Runs a child process; fills first and total (ns) and the counters. */
static bool run_child(const char *self, const char *label, const char *dir, double *first, double *total,
                      double *process, unsigned long long *compiles, unsigned long long *hits) {
  int p[2];
  if (pipe(p)) return false;
  fflush(NULL);
  double t0 = now_ns();
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    const bconf *c = conf_named(label);
    if (c && c->platform_cache) {
      char pocl[4200];
      snprintf(pocl, sizeof pocl, "%s/pocl", dir); /* fresh per run: cold is cold */
      setenv("POCL_KERNEL_CACHE", "1", 1);
      setenv("POCL_CACHE_DIR", pocl, 1);
    } else {
      setenv("POCL_KERNEL_CACHE", "0", 1); /* cold must be cold */
    }
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    unsetenv("KC_CACHE_DISABLE");
    execl(self, self, "--child", label, dir, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char buf[256];
  ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  int status;
  waitpid(pid, &status, 0);
  *process = now_ns() - t0;
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status)) return false;
  buf[n] = 0;
  return sscanf(buf, "%lf %lf %llu %llu", first, total, compiles, hits) == 4;
}

static void rmrf(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) {
  }
}

typedef struct result {
  const bconf *c;
  bool ran;
  char why[256];
  double cold_first, warm_first, cold_total, warm_total, cold_process, warm_process;
  double hit, hit_link;
  unsigned long long cold_compiles, warm_compiles, warm_hits;
} result;

static void measure(const char *self, const bconf *c, int runs, result *r) {
  memset(r, 0, sizeof *r);
  r->c = c;
  const char *why = NULL;
  if (!kc_backend_available(c->kind, &why)) {
    snprintf(r->why, sizeof r->why, "%s", why ? why : "unavailable");
    return;
  }
  if (c->cc && system(c->kind == KC_BACKEND_HOST && !strcmp(c->cc, "tcc") ? "command -v tcc >/dev/null 2>&1"
                                                                          : "command -v cc >/dev/null 2>&1")) {
    snprintf(r->why, sizeof r->why, "%s is not installed", c->cc);
    return;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  double cf[32], wf[32], ct[32], wt[32], cp[32], wp[32], hit[32], hl[32];
  for (int i = 0; i < runs; i++) {
    snprintf(dir, sizeof dir, "%s/kc-bench-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
      snprintf(r->why, sizeof r->why, "mkdtemp: %s", strerror(errno));
      return;
    }
    unsigned long long hits;
    if (!run_child(self, c->label, dir, &cf[i], &ct[i], &cp[i], &r->cold_compiles, &hits) ||
        !run_child(self, c->label, dir, &wf[i], &wt[i], &wp[i], &r->warm_compiles, &r->warm_hits)) {
      snprintf(r->why, sizeof r->why, "a child process failed");
      rmrf(dir);
      return;
    }
    /* the disk hit, in a process whose identity and probe context are up */
    session s;
    if (!session_open(&s, c, dir)) {
      rmrf(dir);
      snprintf(r->why, sizeof r->why, "runtime failed");
      return;
    }
    kc_kernel *warm = NULL;
    kc_define(s.rt, "warmup", "KC_KERNEL void warmup(KC_GLOBAL float *y) { y[0] = 1.0f; }", NULL);
    kc_kernel_create(s.rt, "warmup", NULL, &warm);
    kc_kernel_compile(warm); /* compiles (first time) or hits: identity and probe are up */
    kc_kernel_destroy(warm);
    double t0 = now_ns();
    kc_status st = kc_kernel_compile(s.k);
    double t1 = now_ns();
    if (!st) st = session_launch(&s);
    double t2 = now_ns();
    kc_stats k;
    kc_stats_get(s.rt, &k);
    if (st || !session_check(&s) || k.compiles > 1) {
      snprintf(r->why, sizeof r->why, "the disk hit did not happen (%s, %llu compiles)", kc_status_name(st),
               (unsigned long long)k.compiles);
      session_close(&s);
      rmrf(dir);
      return;
    }
    hit[i] = t1 - t0;
    hl[i] = t2 - t0;
    session_close(&s);
    rmrf(dir);
  }
  r->cold_first = median(cf, runs);
  r->warm_first = median(wf, runs);
  r->cold_total = median(ct, runs);
  r->warm_total = median(wt, runs);
  r->cold_process = median(cp, runs);
  r->warm_process = median(wp, runs);
  r->hit = median(hit, runs);
  r->hit_link = median(hl, runs);
  r->ran = true;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child")) return child(argv[2], argv[3]);
  bool json = false;
  int runs = 7;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--quick")) runs = 3;
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--json] [--quick] [--runs N] [--backend host|tcc|opencl|opencl+pocl|cuda]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  if (runs > 32) runs = 32;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "kc_bench_store: cannot find its own executable\n");
    return 1;
  }
  self[n] = 0;
  enum { NC = sizeof confs / sizeof *confs };
  result res[NC];
  int nres = 0;
  for (int i = 0; i < NC; i++) {
    if (only && strcmp(only, confs[i].label)) continue;
    if (!json) fprintf(stderr, "measuring %s...\n", confs[i].label);
    measure(self, &confs[i], runs, &res[nres++]);
  }
  int missed = 0;
  if (json) {
    printf("{\"runs\": %d, \"backends\": [", runs);
    for (int i = 0; i < nres; i++) {
      result *r = &res[i];
      printf("%s\n {\"backend\": \"%s\", \"compiler\": \"%s\"", i ? "," : "", r->c->label, r->c->compiler);
      if (!r->ran) {
        printf(", \"skipped\": \"%s\"}", r->why);
        continue;
      }
      double speed = r->cold_first / r->warm_first;
      printf(", \"cold_first_launch_ms\": %.3f, \"warm_first_launch_ms\": %.3f, \"first_launch_speedup\": %.1f"
             ", \"target_speedup\": %.0f, \"cold_process_ms\": %.3f, \"warm_process_ms\": %.3f"
             ", \"process_speedup\": %.1f, \"disk_hit_ms\": %.3f, \"disk_hit_and_link_ms\": %.3f"
             ", \"cold_compiles\": %llu, \"warm_compiles\": %llu, \"warm_disk_hits\": %llu, \"meets_targets\": %s}",
             r->cold_first / 1e6, r->warm_first / 1e6, speed, r->c->target, r->cold_total / 1e6,
             r->warm_total / 1e6, r->cold_total / r->warm_total, r->hit / 1e6, r->hit_link / 1e6,
             r->cold_compiles, r->warm_compiles, r->warm_hits,
             (speed >= r->c->target && r->hit < 2e6) ? "true" : "false");
    }
    printf("\n]}\n");
    return 0;
  }
  printf("kcache disk cache: first launch in a new process, cold store vs warm (median of %d)\n\n", runs);
  printf("%-8s %-8s %11s %11s %8s %7s   %11s %11s %8s   %9s %11s\n", "backend", "compiler", "cold first",
         "warm first", "speedup", "target", "cold proc.", "warm proc.", "speedup", "disk hit", "hit+link");
  for (int i = 0; i < nres; i++) {
    result *r = &res[i];
    if (!r->ran) {
      printf("%-8s %-8s skipped: %s\n", r->c->label, r->c->compiler, r->why);
      continue;
    }
    double speed = r->cold_first / r->warm_first;
    bool ok = speed >= r->c->target && r->hit < 2e6;
    missed += !ok;
    char target[16];
    if (r->c->target > 0) snprintf(target, sizeof target, ">=%.0fx", r->c->target);
    else snprintf(target, sizeof target, "-");
    printf("%-8s %-8s %8.2f ms %8.2f ms %7.1fx %7s   %8.2f ms %8.2f ms %7.1fx   %6.3f ms %8.3f ms%s\n", r->c->label,
           r->c->compiler, r->cold_first / 1e6, r->warm_first / 1e6, speed, target, r->cold_total / 1e6,
           r->warm_total / 1e6, r->cold_total / r->warm_total, r->hit / 1e6, r->hit_link / 1e6,
           ok ? "" : "  (target missed)");
  }
  printf("\nfirst: the first kc_launch + finish of the kernel in the process (resolve, compile or load,\n"
         "link, run); proc.: main() to the first result (runtime and context creation included);\n"
         "disk hit: kc_kernel_compile from a warm store (key, read, verify, test-load; target < 2 ms);\n"
         "hit+link: that plus the first launch (link into the context, run).\n");
  if (missed) printf("\n%d backend(s) missed a target\n", missed);
  return 0;
}
