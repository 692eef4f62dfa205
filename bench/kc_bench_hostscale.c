/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_hostscale -- what kcache's operations cost as one runtime grows to
 * many specializations, each compiled and linked: whether costs stay flat
 * in the number already there. Host backend, the tcc compiler by default
 * (fast compiles), disk cache off.
 *
 * The run makes --kernels specializations of one kernel (k with V=0, 1, ...)
 * in ten equal parts; compiles run on --threads threads (kc_kernel_compile),
 * then each is linked by its first launch in each of --contexts contexts
 * (1 by default; C contexts make C linked objects of each code instance,
 * each loaded on its own, so that the number linked can grow past what
 * the compiles of one run allow). After each tenth it prints, for the
 * runtime as it then is:
 *
 *   linked          linked objects so far (specializations x contexts)
 *   link_us         first launch of a compiled kernel in a context (the
 *                   link, and one launch), median over the tenth's links
 *   compile_ms      kc_kernel_compile, median over the tenth's kernels
 *   hot_ns          kc_launch of one kernel again and again, median of runs
 *   rr_ns           kc_launch of every kernel so far in turn in the first
 *                   context (up to 20,000 of them, spread over all), per
 *                   launch: the fast path over a working set larger than
 *                   the caches
 *   rr_ctx_ns       the same over every linked object (kernel, context):
 *                   with more than 4 contexts a handle's slots (KC__HSLOTS)
 *                   do not hold them all, and launches take the slow path
 *                   (rr_slow, rr_ctx_slow: the share of each that did)
 *   define_us       kc_define of an unrelated name, median
 *   stats_us        kc_stats_get, median
 *   collect_ms      kc_collect with nothing to free, median
 *   rss_per_ci_kb   resident memory growth since the start, per code instance
 *                   (with its linked objects)
 *
 * and at the end the time of kc_runtime_destroy, in total and per linked
 * object, on the clock and in the thread's CPU time (on a loaded machine the
 * clock counts other processes' turns too), and each figure's last tenth
 * over its first (flat: within 2x).
 *
 * Usage: kc_bench_hostscale [--json] [--kernels N] [--contexts C] [--threads T]
 *                           [--cc COMPILER]
 */
#include <kcache.h>

#define KCB_PROG "kc_bench_hostscale"
#include "kc_bench_util.h"

#include <pthread.h>
#include <stdint.h>

#define PARTS 10
#define RR_MAX 20000
#define SAMPLES 15

typedef struct part {
  long upto, linked;
  double link_us, compile_ms, hot_ns, rr_ns, rr_ctx_ns, define_us, stats_us, collect_ms, rss_per_ci_kb;
  double rr_slow, rr_ctx_slow; /* the share of those launches that took the slow path */
} part;

static kc_runtime *rt;
static kc_context **ctxs;
static int nctx = 1;
static kc_buffer **bufs; /* one per context */
static kc_kernel **kernels;
static double *compile_ns;
static const kc_dim3 one = {1, 1, 1};
static kc_arg *args; /* one per context */
static size_t artifact_bytes; /* of the first code instance */

static long rss_kb(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ------------------------------------------------------------- compiles */

typedef struct compile_job {
  long from, to, next, stride;
} compile_job;

static void *compile_worker(void *p) {
  compile_job *j = p;
  for (long i = j->from + j->next; i < j->to; i += j->stride) {
    double t0 = now_ns();
    KCB_CHECK(kc_kernel_compile(kernels[i]));
    compile_ns[i] = now_ns() - t0;
  }
  return NULL;
}

/* Makes and compiles kernels [from, to) on `threads` threads. */
static void make_kernels(long from, long to, int threads) {
  for (long i = from; i < to; i++) {
    char params[32];
    snprintf(params, sizeof params, "V=%ld", i);
    KCB_CHECK(kc_kernel_create(rt, "k", params, &kernels[i]));
  }
  pthread_t tid[64];
  compile_job jobs[64];
  for (int t = 0; t < threads; t++) {
    jobs[t] = (compile_job){from, to, t, threads};
    if (pthread_create(&tid[t], NULL, compile_worker, &jobs[t])) kcb_die("pthread_create", KC_ENOMEM);
  }
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
}

/* ------------------------------------------------------------- measures */

static void launch(kc_kernel *k, int c) {
  if (kc_launch(k, ctxs[c], &one, &one, &args[c], 1)) kcb_die("kc_launch", KC_ELAUNCH);
}

static double hot_ns(kc_kernel *k) {
  double v[SAMPLES];
  for (int s = 0; s < SAMPLES; s++) {
    double t0 = now_ns();
    for (int i = 0; i < 2000; i++) launch(k, 0);
    v[s] = (now_ns() - t0) / 2000;
  }
  return median(v, SAMPLES);
}

/* Over the n kernels in context 0 (contexts 1), or over the n x nctx linked
 * objects (contexts nctx): object j is kernel j / contexts in context
 * j % contexts. */
static double rr_ns(long n, int contexts, double *slow) {
  long total = n * contexts, m = total < RR_MAX ? total : RR_MAX;
  double v[7];
  kc_stats before, after;
  KCB_CHECK(kc_stats_get(rt, &before));
  for (int s = 0; s < 7; s++) {
    double t0 = now_ns();
    for (long i = 0; i < m; i++) {
      long j = (long)((double)i * (double)total / (double)m);
      launch(kernels[j / contexts], (int)(j % contexts));
    }
    v[s] = (now_ns() - t0) / (double)m;
  }
  KCB_CHECK(kc_stats_get(rt, &after));
  *slow = (double)(after.slow_lookups - before.slow_lookups) / (7.0 * (double)m);
  return median(v, 7);
}

static double define_us(long tenth) {
  double v[SAMPLES];
  for (int s = 0; s < SAMPLES; s++) {
    char src[128];
    snprintf(src, sizeof src, "KC_DEVICE int unrelated(void) { return %ld; }", tenth * SAMPLES + s);
    double t0 = now_ns();
    KCB_CHECK(kc_define(rt, "unrelated", src, NULL));
    v[s] = (now_ns() - t0) / 1e3;
  }
  return median(v, SAMPLES);
}

static double stats_us(void) {
  double v[SAMPLES];
  for (int s = 0; s < SAMPLES; s++) {
    kc_stats st;
    double t0 = now_ns();
    KCB_CHECK(kc_stats_get(rt, &st));
    v[s] = (now_ns() - t0) / 1e3;
  }
  return median(v, SAMPLES);
}

static double collect_ms(void) {
  double v[5];
  for (int s = 0; s < 5; s++) {
    kc_collect_info ci;
    double t0 = now_ns();
    KCB_CHECK(kc_collect(rt, &ci));
    v[s] = (now_ns() - t0) / 1e6;
  }
  return median(v, 5);
}

/* Grows the runtime by one tenth and measures it. */
static void run_part(part *p, long from, long to, int threads, long rss0) {
  make_kernels(from, to, threads);
  long nl = (to - from) * nctx;
  double *link = malloc((size_t)nl * sizeof *link);
  if (!link) kcb_die("malloc", KC_ENOMEM);
  for (long i = from; i < to; i++)
    for (int c = 0; c < nctx; c++) {
      double t0 = now_ns();
      launch(kernels[i], c);
      link[(i - from) * nctx + c] = (now_ns() - t0) / 1e3;
    }
  p->upto = to;
  p->linked = to * nctx;
  p->link_us = median(link, (int)nl);
  for (long i = from; i < to; i++) link[i - from] = compile_ns[i] / 1e6;
  p->compile_ms = median(link, (int)(to - from));
  free(link);
  p->hot_ns = hot_ns(kernels[to - 1]);
  p->rr_ns = rr_ns(to, 1, &p->rr_slow);
  p->rr_ctx_ns = rr_ns(to, nctx, &p->rr_ctx_slow);
  p->define_us = define_us(to);
  p->stats_us = stats_us();
  p->collect_ms = collect_ms();
  p->rss_per_ci_kb = (double)(rss_kb() - rss0) / (double)to;
}

/* --------------------------------------------------------------- output */

static const char *const names[] = {"link_us",   "compile_ms", "hot_ns",     "rr_ns",        "rr_ctx_ns",
                                    "define_us", "stats_us",   "collect_ms", "rss_per_ci_kb"};
#define NF (int)(sizeof names / sizeof *names)

static double field(const part *p, int f) {
  const double v[NF] = {p->link_us,   p->compile_ms, p->hot_ns,     p->rr_ns,        p->rr_ctx_ns,
                        p->define_us, p->stats_us,   p->collect_ms, p->rss_per_ci_kb};
  return v[f];
}

static double destroy_cpu_ms; /* the thread's CPU time in kc_runtime_destroy */

static double cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void print_json(const part *parts, long n, int threads, const char *cc, double destroy_ms) {
  printf("{\"bench\":\"hostscale\",\"backend\":\"host\",\"cc\":\"%s\",\"kernels\":%ld,\"contexts\":%d,"
         "\"threads\":%d,\"parts\":[",
         cc, n, nctx, threads);
  for (int i = 0; i < PARTS; i++) {
    printf("%s{\"upto\":%ld,\"linked\":%ld", i ? "," : "", parts[i].upto, parts[i].linked);
    for (int f = 0; f < NF; f++) printf(",\"%s\":%.4g", names[f], field(&parts[i], f));
    printf(",\"rr_slow\":%.3f,\"rr_ctx_slow\":%.3f", parts[i].rr_slow, parts[i].rr_ctx_slow);
    printf("}");
  }
  printf(
      "],\"artifact_bytes\":%zu,\"destroy_ms\":%.3f,\"destroy_cpu_ms\":%.3f,\"destroy_per_object_ns\":%.1f,"
      "\"last_over_first\":{",
      artifact_bytes, destroy_ms, destroy_cpu_ms, destroy_ms * 1e6 / (double)(n * nctx));
  for (int f = 0; f < NF; f++)
    printf("%s\"%s\":%.3f", f ? "," : "", names[f], field(&parts[PARTS - 1], f) / field(&parts[0], f));
  printf("}}\n");
}

static void print_text(const part *parts, long n, int threads, const char *cc, double destroy_ms) {
  printf("kcache scale benchmark: host backend (%s), %ld specializations in %d context(s), %d compile "
         "threads, disk cache off\n",
         cc, n, nctx, threads);
  printf("%9s %9s %9s %10s %8s %8s %9s %9s %9s %10s %9s\n", "specs", "linked", "link_us", "compile_ms",
         "hot_ns", "rr_ns", "rr_ctx_ns", "define_us", "stats_us", "collect_ms", "KB/ci");
  for (int i = 0; i < PARTS; i++) {
    const part *p = &parts[i];
    printf("%9ld %9ld %9.1f %10.2f %8.1f %8.1f %9.1f %9.2f %9.2f %10.3f %9.2f\n", p->upto, p->linked,
           p->link_us, p->compile_ms, p->hot_ns, p->rr_ns, p->rr_ctx_ns, p->define_us, p->stats_us,
           p->collect_ms, p->rss_per_ci_kb);
  }
  printf("artifact (relocatable object) of one code instance: %zu bytes\n", artifact_bytes);
  printf("kc_runtime_destroy: %.1f ms (%.0f ns per linked object), %.1f ms of CPU\n", destroy_ms,
         destroy_ms * 1e6 / (double)(n * nctx), destroy_cpu_ms);
  printf("last tenth / first tenth:");
  for (int f = 0; f < NF; f++)
    printf(" %s %.2f", names[f], field(&parts[PARTS - 1], f) / field(&parts[0], f));
  printf("\n");
}

int main(int argc, char **argv) {
  bool json = false;
  long n = 100000;
  int threads = 2;
  const char *cc = "tcc";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) n = atol(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--contexts") && i + 1 < argc) nctx = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cc") && i + 1 < argc) cc = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--json] [--kernels N] [--contexts C] [--threads T] [--cc COMPILER]\n",
              argv[0]);
      return 2;
    }
  }
  if (n < PARTS || threads < 1 || threads > 64 || nctx < 1 || nctx > 1000) {
    fprintf(stderr, "%s: --kernels must be at least %d, --threads 1 to 64, --contexts 1 to 1000\n", KCB_PROG,
            PARTS);
    return 2;
  }
  char why[256];
  if (kcb_backend_missing(KC_BACKEND_HOST, cc, why, sizeof why)) {
    printf("%s: skipped: %s\n", KCB_PROG, why);
    return 77;
  }
  long rss0 = rss_kb();
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  o.host_cc = cc;
  ctxs = calloc((size_t)nctx, sizeof *ctxs);
  bufs = calloc((size_t)nctx, sizeof *bufs);
  args = calloc((size_t)nctx, sizeof *args);
  if (!ctxs || !bufs || !args) kcb_die("calloc", KC_ENOMEM);
  rt = kcb_main_runtime(&o, &ctxs[0]);
  for (int c = 0; c < nctx; c++) {
    if (c) KCB_CHECK(kc_context_create(rt, 0, &ctxs[c]));
    KCB_CHECK(kc_buffer_create(ctxs[c], sizeof(int), &bufs[c]));
    args[c] = KC_ARG_BUF(bufs[c]);
  }
  KCB_CHECK(kc_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL int *y) { y[kc_global_id(0)] += V; }", NULL));
  kernels = calloc((size_t)n, sizeof *kernels);
  compile_ns = calloc((size_t)n, sizeof *compile_ns);
  if (!kernels || !compile_ns) kcb_die("calloc", KC_ENOMEM);
  part parts[PARTS];
  for (int i = 0; i < PARTS; i++) {
    run_part(&parts[i], n * i / PARTS, n * (i + 1) / PARTS, threads, rss0);
    if (!json) fprintf(stderr, "%s: %ld of %ld\n", KCB_PROG, parts[i].upto, n);
    if (i == 0) {
      kc_code_info info;
      KCB_CHECK(kc_kernel_code(kernels[0], &info));
      artifact_bytes = info.artifact_size;
    }
  }
  double t0 = now_ns(), c0 = cpu_ns();
  kc_runtime_destroy(rt);
  double destroy_ms = (now_ns() - t0) / 1e6;
  destroy_cpu_ms = (cpu_ns() - c0) / 1e6;
  kcb_rt = NULL;
  if (json) print_json(parts, n, threads, cc, destroy_ms);
  else print_text(parts, n, threads, cc, destroy_ms);
  free(kernels);
  free(compile_ns);
  free(ctxs);
  free(bufs);
  free(args);
  return 0;
}
