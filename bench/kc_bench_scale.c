/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_scale.c -- what the per-runtime operations cost as the cache
 * grows, and cold starts on every core (issue 16).
 *
 *   cold start   50 kernels prepared in a new process (a forked child that
 *                has loaded nothing), with kc_prepare on one compile thread
 *                and on one per core; host `cc -O2`, OpenCL and CUDA
 *                (NVRTC, where a GPU is); the median of --reps runs each,
 *                and the ratio.
 *   kc_stats_get with 1, 100, 10,000 and 100,000 kernel handles.
 *   kc_collect   with nothing to free, and freeing one dead code instance,
 *                in a runtime of N handles (N specializations) and N
 *                definitions (no compiles: they are what a collect used to
 *                walk).
 *   redefinition of a name with one compiled dependent in a runtime of N
 *                handles and definitions; and of a name that D = 100
 *                compiled dependents also call, after 1 and after 23 rounds
 *                of redefining the other name they call (stale edges would
 *                make the later one slower).
 *
 * Usage: kc_bench_scale [--json] [--reps N] [--kernels N] [--max N]
 *                       [--skip-cold] [--skip-costs] [--cold-backend NAME]
 * (--max: the largest cache size, 100000 by default; --kernels: the cold
 * start's kernel count, 50 by default; --cold-backend: the cold start on
 * host, opencl or cuda alone.)
 */
#define KCB_PROG "kc_bench_scale"
#include "kc_bench_util.h"

#include <stdint.h>

static int reps = 3, nkernels = 50, max_size = 100000;

/* ------------------------------------------------------------ cold start */

/* In a fresh child: a runtime (backend, no disk cache), nkernels distinct
 * kernels defined, then kc_prepare of all of them on `threads` compile
 * threads into a context. Returns the milliseconds of kc_prepare, or -1 if
 * the backend is unavailable. */
static double cold_child(kc_backend_kind be, uint32_t threads) {
  /* PoCL keeps its own cache of built programs: off, and every run's
   * sources differ (salt), so that each run really compiles */
  setenv("POCL_KERNEL_CACHE", "0", 1);
  unsigned salt = (unsigned)getpid();
  kc_options o;
  kcb_options_uncached(&o, be);
  o.compile_threads = threads;
  if (be == KC_BACKEND_HOST) o.host_cc = "cc";
  kc_runtime *rt;
  if (kc_runtime_create(&o, &rt)) return -1;
  kcb_rt = rt;
  kc_context *ctx;
  KCB_CHECK(kc_context_create(rt, 0, &ctx));
  kc_kernel **ks = calloc((size_t)nkernels, sizeof *ks);
  char name[32], src[512];
  for (int i = 0; i < nkernels; i++) {
    snprintf(name, sizeof name, "cold%d", i);
    snprintf(src, sizeof src,
             "KC_KERNEL void cold%d(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a) {\n"
             "  size_t i = kc_global_id(0);\n"
             "  float s = 0.0f;\n"
             "  for (int j = 0; j < %d; j++) s += a * x[i] + (float)j;\n"
             "  y[i] = s + y[i] + %u.0f;\n}\n",
             i, 8 + i, salt);
    KCB_CHECK(kc_define(rt, name, src, NULL));
    KCB_CHECK(kc_kernel_create(rt, name, NULL, &ks[i]));
  }
  double t0 = now_ns();
  KCB_CHECK(kc_prepare(ks, (uint32_t)nkernels, ctx));
  double ms = (now_ns() - t0) / 1e6;
  kc_stats s;
  kc_stats_get(rt, &s);
  if (s.compiles != (uint64_t)nkernels || s.links != (uint64_t)nkernels) {
    fprintf(stderr, "%s: expected %d compiles and links, got %llu and %llu\n", KCB_PROG, nkernels,
            (unsigned long long)s.compiles, (unsigned long long)s.links);
    exit(1);
  }
  kc_runtime_destroy(rt);
  free(ks);
  return ms;
}

/* cold_child in a forked child; its figure comes back through a pipe. */
static double cold_run(kc_backend_kind be, uint32_t threads) {
  int fd[2];
  if (pipe(fd)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    double ms = cold_child(be, threads);
    ssize_t w = write(fd[1], &ms, sizeof ms);
    _exit(w == (ssize_t)sizeof ms ? 0 : 1);
  }
  close(fd[1]);
  double ms = -1;
  if (pid < 0 || read(fd[0], &ms, sizeof ms) != (ssize_t)sizeof ms) ms = -1;
  close(fd[0]);
  int status;
  if (pid > 0) waitpid(pid, &status, 0);
  return ms;
}

typedef struct {
  const char *name, *flag; /* flag: --cold-backend's word for it */
  kc_backend_kind be;
  double one_ms, all_ms;
} cold_result;

static void cold_measure(cold_result *r, uint32_t cores) {
  double one[16], all[16];
  for (int i = 0; i < reps; i++) { /* interleaved: the load changes both alike */
    one[i] = cold_run(r->be, 1);
    all[i] = cold_run(r->be, cores);
    if (one[i] < 0 || all[i] < 0) {
      r->one_ms = r->all_ms = -1;
      return;
    }
  }
  r->one_ms = median(one, reps);
  r->all_ms = median(all, reps);
}

/* ----------------------------------------------------------------- costs */

/* A runtime of n handles (n specializations of one kernel) and n
 * definitions (names nobody calls), on the host backend with tcc where
 * there is one. */
static kc_runtime *grown(int n, kc_kernel ***handles) {
  kc_runtime *r = kcb_rt = kcb_host_runtime_fast();
  KCB_CHECK(kc_define(r, "fill", "KC_KERNEL void fill(KC_GLOBAL int *y) { y[0] = V; }", NULL));
  kc_kernel **ks = calloc((size_t)n, sizeof *ks);
  char buf[96];
  for (int i = 0; i < n; i++) {
    snprintf(buf, sizeof buf, "V=%d", i);
    KCB_CHECK(kc_kernel_create(r, "fill", buf, &ks[i]));
    snprintf(buf, sizeof buf, "KC_DEVICE int g%d(int x) { return x + %d; }", i, i);
    char name[32];
    snprintf(name, sizeof name, "g%d", i);
    KCB_CHECK(kc_define(r, name, buf, NULL));
  }
  *handles = ks;
  return r;
}

static double time_stats(kc_runtime *r) {
  enum { REPS = 201 };
  double t[REPS];
  kc_stats s;
  for (int i = 0; i < REPS; i++) {
    double t0 = now_ns();
    kc_stats_get(r, &s);
    t[i] = now_ns() - t0;
  }
  return median(t, REPS);
}

static double time_collect_empty(kc_runtime *r) {
  enum { REPS = 101 };
  double t[REPS];
  for (int i = 0; i < REPS; i++) {
    double t0 = now_ns();
    KCB_CHECK(kc_collect(r, NULL));
    t[i] = now_ns() - t0;
  }
  return median(t, REPS);
}

typedef struct {
  int n;
  double stats_ns, collect_empty_ns, collect_one_ns, redefine_ns;
} cost_row;

static void costs_at(cost_row *row) {
  kc_kernel **ks;
  kc_runtime *r = grown(row->n, &ks);
  row->stats_ns = time_stats(r);
  row->collect_empty_ns = time_collect_empty(r);
  kcb_time_redefine(r, 15, &row->redefine_ns, &row->collect_one_ns);
  kc_runtime_destroy(r);
  free(ks);
}

/* D dependents d_i call both a and b. Each sample: `rounds` times,
 * compile them all and redefine a; then compile them all and time the
 * redefinition of b, which clips the D live dependents (before issue 16 it
 * also walked the D * rounds clipped ones that stayed on b's list). The
 * median of 3 samples. */
static double stale_edges(int rounds, int d) {
  kc_runtime *r = kcb_rt = kcb_host_runtime_fast();
  KCB_CHECK(kc_define(r, "a", "KC_DEVICE int a(int x) { return x; }", NULL));
  KCB_CHECK(kc_define(r, "b", "KC_DEVICE int b(int x) { return x; }", NULL));
  kc_kernel **ks = calloc((size_t)d, sizeof *ks);
  char name[32], src[160];
  for (int i = 0; i < d; i++) {
    snprintf(name, sizeof name, "d%d", i);
    snprintf(src, sizeof src, "KC_KERNEL void d%d(KC_GLOBAL int *y) { y[0] = a(%d) + b(1); }", i, i);
    KCB_CHECK(kc_define(r, name, src, NULL));
    KCB_CHECK(kc_kernel_create(r, name, NULL, &ks[i]));
  }
  enum { SAMPLES = 3 };
  double t[SAMPLES];
  int version = 0;
  for (int k = 0; k < SAMPLES; k++) {
    for (int round = 0; round < rounds; round++) {
      KCB_CHECK(kc_prepare(ks, (uint32_t)d, NULL));
      snprintf(src, sizeof src, "KC_DEVICE int a(int x) { return x + %d; }", ++version);
      KCB_CHECK(kc_define(r, "a", src, NULL));
    }
    KCB_CHECK(kc_prepare(ks, (uint32_t)d, NULL));
    snprintf(src, sizeof src, "KC_DEVICE int b(int x) { return x * %d; }", k + 2);
    double t0 = now_ns();
    KCB_CHECK(kc_define(r, "b", src, NULL));
    t[k] = now_ns() - t0;
  }
  kc_runtime_destroy(r);
  free(ks);
  return median(t, SAMPLES);
}

/* ---------------------------------------------------------------- memory */

/* What `count` compiled code instances (one kernel, as many
 * specializations; tcc where there is one) add to the runtime's memory,
 * per code instance: in all, and beyond the artifact. */
static void mem_per_ci(int count, double *total, double *beyond, double *artifact) {
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  o.host_cc = access("/usr/bin/tcc", X_OK) == 0 ? "tcc" : NULL;
  o.alloc = kcb_sized_alloc;
  kc_runtime *r;
  KCB_CHECK(kc_runtime_create(&o, &r));
  kcb_rt = r;
  KCB_CHECK(kc_define(r, "m",
                      "KC_KERNEL void m(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a) { size_t i = "
                      "kc_global_id(0); y[i] = a * x[i] + (float)V; }",
                      NULL));
  kc_kernel **ks = calloc((size_t)count, sizeof *ks);
  char buf[32];
  for (int i = 0; i < count; i++) {
    snprintf(buf, sizeof buf, "V=%d", i);
    KCB_CHECK(kc_kernel_create(r, "m", buf, &ks[i]));
  }
  KCB_CHECK(kc_kernel_compile(ks[0])); /* first-compile state of the backend, if any */
  long long before = *kcb_live_bytes();
  KCB_CHECK(kc_prepare(ks + 1, (uint32_t)count - 1, NULL));
  long long after = *kcb_live_bytes();
  double art = 0;
  for (int i = 1; i < count; i++) {
    kc_code_info ci;
    KCB_CHECK(kc_kernel_code(ks[i], &ci));
    art += (double)ci.artifact_size;
  }
  kc_runtime_destroy(r);
  free(ks);
  *total = (double)(after - before) / (count - 1);
  *artifact = art / (count - 1);
  *beyond = *total - *artifact;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  bool json = false, cold = true, costs = true;
  const char *cold_only = NULL; /* --cold-backend */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--skip-cold")) cold = false;
    else if (!strcmp(argv[i], "--skip-costs")) costs = false;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) nkernels = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max_size = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cold-backend") && i + 1 < argc) cold_only = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--json] [--reps N] [--kernels N] [--max N] [--skip-cold] [--skip-costs]"
              " [--cold-backend host|opencl|cuda]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > 16 || nkernels < 1 || max_size < 1) {
    fprintf(stderr, "%s: --reps takes 1..16; --kernels and --max at least 1\n", KCB_PROG);
    return 2;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  cold_result cr[] = {{"host cc -O2", "host", KC_BACKEND_HOST, 0, 0},
                      {"opencl", "opencl", KC_BACKEND_OPENCL, 0, 0},
                      {"cuda NVRTC", "cuda", KC_BACKEND_CUDA, 0, 0}};
  enum { NCOLD = sizeof cr / sizeof cr[0] };
  bool cold_on[NCOLD];
  for (int i = 0; i < NCOLD; i++) cold_on[i] = !cold_only || !strcmp(cold_only, cr[i].flag);
  if (cold_only && !cold_on[0] && !cold_on[1] && !cold_on[2]) {
    fprintf(stderr, "%s: --cold-backend takes host, opencl or cuda\n", KCB_PROG);
    return 2;
  }
  if (cold)
    for (int i = 0; i < NCOLD; i++)
      if (cold_on[i]) cold_measure(&cr[i], (uint32_t)cores);
  const int sizes[] = {1, 100, 10000, 100000};
  cost_row rows[4];
  int nrows = 0;
  double stale1 = 0, stale23 = 0, mem_total = 0, mem_beyond = 0, mem_art = 0;
  if (costs) {
    for (int i = 0; i < 4 && sizes[i] <= max_size; i++) {
      rows[nrows].n = sizes[i];
      costs_at(&rows[nrows++]);
    }
    mem_per_ci(201, &mem_total, &mem_beyond, &mem_art);
    stale1 = stale_edges(1, 100);
    stale23 = stale_edges(23, 100);
  }

  if (json) {
    printf("{\"cores\":%ld,\"reps\":%d,\"kernels\":%d", cores, reps, nkernels);
    if (cold) {
      printf(",\"cold_start\":[");
      for (int i = 0, n = 0; i < NCOLD; i++)
        if (cold_on[i])
          printf("%s{\"backend\":\"%s\",\"one_thread_ms\":%.1f,\"all_cores_ms\":%.1f,\"speedup\":%.3f}",
                 n++ ? "," : "", cr[i].name, cr[i].one_ms, cr[i].all_ms,
                 cr[i].all_ms > 0 ? cr[i].one_ms / cr[i].all_ms : 0.0);
      printf("]");
    }
    if (costs) {
      printf(",\"costs\":[");
      for (int i = 0; i < nrows; i++)
        printf("%s{\"handles\":%d,\"stats_get_ns\":%.0f,\"collect_empty_ns\":%.0f,\"collect_one_ns\":%.0f,"
               "\"redefine_ns\":%.0f}",
               i ? "," : "", rows[i].n, rows[i].stats_ns, rows[i].collect_empty_ns, rows[i].collect_one_ns,
               rows[i].redefine_ns);
      printf("],\"redefine_100_dependents_ns\":{\"after_1_round\":%.0f,\"after_23_rounds\":%.0f}", stale1,
             stale23);
      printf(",\"code_instance_bytes\":{\"total\":%.0f,\"artifact\":%.0f,\"beyond_artifact\":%.0f}",
             mem_total, mem_art, mem_beyond);
    }
    printf("}\n");
    return 0;
  }
  printf("kcache %s scale benchmark, %ld cores (medians)\n", kc_version(), cores);
  if (cold) {
    printf("\ncold start: %d kernels prepared in a new process (median of %d)\n", nkernels, reps);
    printf("  %-14s %12s %12s %8s\n", "backend", "1 thread ms", "all cores ms", "speedup");
    for (int i = 0; i < NCOLD; i++) {
      if (!cold_on[i]) continue;
      if (cr[i].one_ms < 0) printf("  %-14s unavailable here\n", cr[i].name);
      else
        printf("  %-14s %12.1f %12.1f %8.2f\n", cr[i].name, cr[i].one_ms, cr[i].all_ms,
               cr[i].one_ms / cr[i].all_ms);
    }
  }
  if (costs) {
    printf("\ncosts vs cache size (N handles = N specializations, plus N definitions)\n");
    printf("  %8s %14s %18s %16s %14s\n", "N", "stats_get ns", "collect empty ns", "collect 1 ns",
           "redefine ns");
    for (int i = 0; i < nrows; i++)
      printf("  %8d %14.0f %18.0f %16.0f %14.0f\n", rows[i].n, rows[i].stats_ns, rows[i].collect_empty_ns,
             rows[i].collect_one_ns, rows[i].redefine_ns);
    printf("\nredefinition of a name 100 compiled dependents call, after rounds of redefining the other\n");
    printf("  after 1 round %10.0f ns, after 23 rounds %10.0f ns\n", stale1, stale23);
    printf("\nmemory per code instance (200 specializations, the runtime's allocator)\n");
    printf("  %.0f bytes: %.0f of artifact, %.0f beyond it\n", mem_total, mem_art, mem_beyond);
  }
  return 0;
}
