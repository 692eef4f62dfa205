/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_hostcpu.c -- the host backend's throughput (issue 29): five
 * kernels in kcache's dialect, run by the host backend on 1, 2, ... every
 * core (kc_options.host_threads), against the same loops written in C
 * (bench/hostcpu_ref.c: -O2 and -O3 -march=native on one thread, and with
 * OpenMP on as many threads), and against kcache's OpenCL backend (PoCL on
 * the same CPU, where it is installed), in one process and one run:
 *
 *   saxpy    y = a x + y, 16 Mi floats, groups of 256 (memory bound)
 *   madd     64 dependent multiply-adds per item, 4 Mi items (compute bound)
 *   reduce   the sum of each group of 256 through KC_LOCAL memory and
 *            kc_barrier() (a tree), 16 Mi inputs; C: a loop per block
 *   stencil  a 5-point 2-D stencil, 4096 x 2048, groups of 64 x 4
 *   matmul   512 x 512 matrices in 16 x 16 tiles through KC_LOCAL memory
 *            and barriers; C: the i-k-j loop
 *
 * Each figure is the best of --reps runs of a launch and its finish
 * (milliseconds), after a warm-up; every kcache result is checked against
 * the C loop's. Then the crossover of the pool: saxpy launches of growing
 * grids on one thread and on every core (microseconds per launch, median),
 * where waking the pool starts to pay. The host compiler is cc (--cc), with the
 * backend's default flags (-O3 -march=native). The kernels with barriers
 * (reduce, matmul) run on the host split at their barriers into loops over
 * each group's items (src/backends/host/split.c); on one thread they run
 * also as fibers, the way the host ran every such kernel before the split
 * (the same kernel with its barriers through a helper, which the split
 * leaves to the fibers).
 *
 * Usage: kc_bench_hostcpu [--json] [--reps N] [--max-threads N] [--no-opencl] [--kernel NAME]
 *                         [--cc COMPILER]  (the host backend's compiler, default cc; the C
 *                         reference is always the build's own compiler)
 * With --kernel NAME, that kernel alone (in the table and the JSON) and no
 * crossover. With --json, the figures as one JSON line first, then the table; the
 * JSON line is what bench/plot_hostcpu.py draws (throughput against
 * threads).
 */
#define KCB_PROG "kc_bench_hostcpu"
#include "kc_bench_util.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* the C reference, three builds of bench/hostcpu_ref.c */
#define DECL(p) \
  void p##saxpy(float *y, const float *x, float a, size_t n); \
  void p##madd(float *y, const float *x, float a, size_t n); \
  void p##reduce(float *out, const float *x, size_t n, size_t wg); \
  void p##stencil(float *out, const float *in, int w, int h); \
  void p##matmul(float *c, const float *a, const float *b, int n);
DECL(o2_)
DECL(o3_)
DECL(omp_)
void omp_threads(int n); /* hostcpu_omp.c */

enum { SAXPY_N = 16 << 20, MADD_N = 4 << 20, RED_N = 16 << 20, WG = 256, ST_W = 4096, ST_H = 2048, MM = 512 };

static const char SRC_SAXPY[] =
    "KC_KERNEL void saxpy(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a) {\n"
    "  size_t i = kc_global_id(0);\n"
    "  y[i] = a * x[i] + y[i];\n}\n";
static const char SRC_MADD[] =
    "KC_KERNEL void madd(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a) {\n"
    "  size_t i = kc_global_id(0);\n"
    "  float v = x[i];\n"
    "  for (int k = 0; k < 64; k++) v = v * a + 0.5f;\n"
    "  y[i] = v;\n}\n";
static const char SRC_REDUCE[] = "KC_KERNEL void reduce(KC_GLOBAL float *out, KC_GLOBAL const float *x) {\n"
                                 "  KC_LOCAL float part[256];\n"
                                 "  size_t l = kc_local_id(0);\n"
                                 "  part[l] = x[kc_global_id(0)];\n"
                                 "  kc_barrier();\n"
                                 "  for (size_t s = kc_local_size(0) / 2; s > 0; s /= 2) {\n"
                                 "    if (l < s) part[l] += part[l + s];\n"
                                 "    kc_barrier();\n"
                                 "  }\n"
                                 "  if (l == 0) out[kc_group_id(0)] = part[0];\n}\n";
static const char SRC_STENCIL[] =
    "KC_KERNEL void stencil(KC_GLOBAL float *out, KC_GLOBAL const float *in, int w, int h) {\n"
    "  int x = (int)kc_global_id(0), y = (int)kc_global_id(1), i = y * w + x;\n"
    "  if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { out[i] = in[i]; return; }\n"
    "  out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);\n}\n";
static const char SRC_MATMUL[] = "#define TS 16\n"
                                 "KC_KERNEL void matmul(KC_GLOBAL float *c, KC_GLOBAL const float *a,\n"
                                 "                      KC_GLOBAL const float *b, int n) {\n"
                                 "  KC_LOCAL float ta[TS][TS];\n"
                                 "  KC_LOCAL float tb[TS][TS];\n"
                                 "  int lx = (int)kc_local_id(0), ly = (int)kc_local_id(1);\n"
                                 "  int col = (int)kc_global_id(0), row = (int)kc_global_id(1);\n"
                                 "  float acc = 0.0f;\n"
                                 "  for (int t = 0; t < n; t += TS) {\n"
                                 "    ta[ly][lx] = a[row * n + t + lx];\n"
                                 "    tb[ly][lx] = b[(t + ly) * n + col];\n"
                                 "    kc_barrier();\n"
                                 "    for (int k = 0; k < TS; k++) acc += ta[ly][k] * tb[k][lx];\n"
                                 "    kc_barrier();\n"
                                 "  }\n"
                                 "  c[row * n + col] = acc;\n}\n";

enum { K_SAXPY, K_MADD, K_REDUCE, K_STENCIL, K_MATMUL, NKERN };
static const char *const knames[NKERN] = {"saxpy", "madd", "reduce", "stencil", "matmul"};
static const char *const ksrc[NKERN] = {SRC_SAXPY, SRC_MADD, SRC_REDUCE, SRC_STENCIL, SRC_MATMUL};

static int reps = 5;
static const char *host_cc = "cc"; /* --cc: the host backend's compiler */
static float *in1, *in2, *ref_out, *got; /* inputs, the C result, kcache's */
static size_t in1_n, in2_n, out_n;

/* The inputs and output sizes of kernel k. */
static void inputs(int k) {
  free(in1), free(in2), free(ref_out), free(got);
  in2 = NULL;
  in2_n = 0;
  switch (k) {
  case K_SAXPY: in1_n = SAXPY_N, in2_n = SAXPY_N, out_n = SAXPY_N; break;
  case K_MADD: in1_n = MADD_N, out_n = MADD_N; break;
  case K_REDUCE: in1_n = RED_N, out_n = RED_N / WG; break;
  case K_STENCIL: in1_n = (size_t)ST_W * ST_H, out_n = in1_n; break;
  case K_MATMUL: in1_n = (size_t)MM * MM, in2_n = in1_n, out_n = in1_n; break;
  }
  in1 = malloc(in1_n * sizeof(float));
  in2 = in2_n ? malloc(in2_n * sizeof(float)) : NULL;
  ref_out = calloc(out_n, sizeof(float));
  got = calloc(out_n, sizeof(float));
  if (!in1 || (in2_n && !in2) || !ref_out || !got) kcb_die("out of memory", KC_ENOMEM);
  for (size_t i = 0; i < in1_n; i++) in1[i] = (float)(i % 97) * 0.01f - 0.3f;
  for (size_t i = 0; i < in2_n; i++) in2[i] = (float)(i % 89) * 0.02f - 0.5f;
}

/* One run of the C reference of k (variant v: 0 -O2, 1 -O3 native, 2 OpenMP), ms. */
static double run_c(int k, int v) {
  float *y = ref_out;
  double t0;
  if (k == K_SAXPY) { /* y starts as in2 each run */
    memcpy(y, in2, out_n * sizeof(float));
  }
  t0 = now_ns();
#define CALL(p) \
  do { \
    switch (k) { \
    case K_SAXPY: p##saxpy(y, in1, 1.5f, SAXPY_N); break; \
    case K_MADD: p##madd(y, in1, 0.999f, MADD_N); break; \
    case K_REDUCE: p##reduce(y, in1, RED_N, WG); break; \
    case K_STENCIL: p##stencil(y, in1, ST_W, ST_H); break; \
    case K_MATMUL: p##matmul(y, in1, in2, MM); break; \
    } \
  } while (0)
  if (v == 0) CALL(o2_);
  else if (v == 1) CALL(o3_);
  else CALL(omp_);
#undef CALL
  return (now_ns() - t0) / 1e6;
}

static double best_c(int k, int v) {
  double best = 1e30;
  run_c(k, v); /* warm */
  for (int r = 0; r < reps; r++) {
    double t = run_c(k, v);
    if (t < best) best = t;
  }
  return best;
}

/* ksrc[k] with each kc_barrier() through the helper sync (fibers on the
 * host), in a static buffer. */
static const char SRC_SYNC[] = "KC_DEVICE void sync(void) { kc_barrier(); }";
static const char *fibers_src(int k) {
  static char buf[2048];
  size_t o = 0;
  for (const char *p = ksrc[k]; *p && o + 8 < sizeof buf;) {
    if (!strncmp(p, "kc_barrier()", 12)) memcpy(buf + o, "sync()", 6), o += 6, p += 12;
    else buf[o++] = *p++;
  }
  buf[o] = 0;
  return buf;
}

/* kcache on backend be (host: threads), kernel k: best ms of a launch and
 * its finish; checks the result against the C one (ref_out). <0: the
 * backend is not here. fibers: its barriers through a helper. */
static double run_kc(kc_backend_kind be, uint32_t threads, int k, bool fibers) {
  kc_options o;
  kcb_options_uncached(&o, be);
  if (be == KC_BACKEND_HOST) {
    o.host_cc = host_cc;
    o.host_threads = threads;
  }
  kc_runtime *rt;
  if (kc_runtime_create(&o, &rt)) return -1;
  kcb_rt = rt;
  kc_context *ctx;
  KCB_CHECK(kc_context_create(rt, 0, &ctx));
  if (fibers) KCB_CHECK(kc_define(rt, "sync", SRC_SYNC, NULL));
  KCB_CHECK(kc_define(rt, knames[k], fibers ? fibers_src(k) : ksrc[k], NULL));
  kc_kernel *kk;
  KCB_CHECK(kc_kernel_create(rt, knames[k], NULL, &kk));
  kc_buffer *b1, *b2 = NULL, *bo;
  KCB_CHECK(kc_buffer_create(ctx, in1_n * sizeof(float), &b1));
  KCB_CHECK(kc_buffer_write(b1, 0, in1, in1_n * sizeof(float)));
  if (in2_n) {
    KCB_CHECK(kc_buffer_create(ctx, in2_n * sizeof(float), &b2));
    KCB_CHECK(kc_buffer_write(b2, 0, in2, in2_n * sizeof(float)));
  }
  KCB_CHECK(kc_buffer_create(ctx, out_n * sizeof(float), &bo));
  float a = k == K_MADD ? 0.999f : 1.5f;
  int w = ST_W, h = ST_H, n = MM;
  kc_arg args[4];
  uint32_t nargs;
  kc_dim3 g, b;
  switch (k) {
  case K_SAXPY:
    args[0] = KC_ARG_BUF(bo), args[1] = KC_ARG_BUF(b1), args[2] = KC_ARG_VAL(a), nargs = 3;
    g = (kc_dim3){SAXPY_N / 256, 1, 1}, b = (kc_dim3){256, 1, 1};
    break;
  case K_MADD:
    args[0] = KC_ARG_BUF(bo), args[1] = KC_ARG_BUF(b1), args[2] = KC_ARG_VAL(a), nargs = 3;
    g = (kc_dim3){MADD_N / 256, 1, 1}, b = (kc_dim3){256, 1, 1};
    break;
  case K_REDUCE:
    args[0] = KC_ARG_BUF(bo), args[1] = KC_ARG_BUF(b1), nargs = 2;
    g = (kc_dim3){RED_N / WG, 1, 1}, b = (kc_dim3){WG, 1, 1};
    break;
  case K_STENCIL:
    args[0] = KC_ARG_BUF(bo), args[1] = KC_ARG_BUF(b1), args[2] = KC_ARG_VAL(w), args[3] = KC_ARG_VAL(h),
    nargs = 4;
    g = (kc_dim3){ST_W / 64, ST_H / 4, 1}, b = (kc_dim3){64, 4, 1};
    break;
  default:
    args[0] = KC_ARG_BUF(bo), args[1] = KC_ARG_BUF(b1), args[2] = KC_ARG_BUF(b2), args[3] = KC_ARG_VAL(n),
    nargs = 4;
    g = (kc_dim3){MM / 16, MM / 16, 1}, b = (kc_dim3){16, 16, 1};
    break;
  }
  double best = 1e30;
  for (int r = -1; r < reps; r++) { /* r = -1: compile, link and warm */
    if (k == K_SAXPY) KCB_CHECK(kc_buffer_write(bo, 0, in2, out_n * sizeof(float)));
    KCB_CHECK(kc_context_finish(ctx));
    double t0 = now_ns();
    KCB_CHECK(kc_launch(kk, ctx, &g, &b, args, nargs));
    KCB_CHECK(kc_context_finish(ctx));
    double t = (now_ns() - t0) / 1e6;
    if (r >= 0 && t < best) best = t;
  }
  KCB_CHECK(kc_buffer_read(bo, 0, got, out_n * sizeof(float)));
  for (size_t i = 0; i < out_n; i++) { /* the same result as C's (float sums in another order: close) */
    double d = fabs((double)got[i] - ref_out[i]), tol = 1e-3 * (fabs(ref_out[i]) + 1);
    if (!(d <= tol)) {
      fprintf(stderr, "%s: %s on %s: [%zu] = %g, C says %g\n", KCB_PROG, knames[k], kc_runtime_backend(rt), i,
              got[i], ref_out[i]);
      exit(1);
    }
  }
  kc_runtime_destroy(rt);
  kcb_rt = NULL;
  return best;
}

/* Saxpy launches of n items on the host with `threads`: median us. */
static double crossover(uint32_t threads, uint32_t n) {
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  o.host_cc = host_cc;
  o.host_threads = threads;
  kc_context *ctx;
  kc_runtime *rt = kcb_main_runtime(&o, &ctx);
  KCB_CHECK(kc_define(rt, "saxpy", SRC_SAXPY, NULL));
  kc_kernel *k;
  KCB_CHECK(kc_kernel_create(rt, "saxpy", NULL, &k));
  kc_buffer *x, *y;
  KCB_CHECK(kc_buffer_create(ctx, n * sizeof(float), &x));
  KCB_CHECK(kc_buffer_create(ctx, n * sizeof(float), &y));
  float a = 1.0001f;
  kc_arg args[] = {KC_ARG_BUF(y), KC_ARG_BUF(x), KC_ARG_VAL(a)};
  kc_dim3 g = {n / 64 ? n / 64 : 1, 1, 1}, b = {n < 64 ? n : 64, 1, 1};
  enum { R = 41 };
  double t[R];
  uint32_t inner = n >= (1u << 20) ? 4 : n >= (1u << 14) ? 32 : 256;
  for (int r = -2; r < R; r++) {
    double t0 = now_ns();
    for (uint32_t i = 0; i < inner; i++) KCB_CHECK(kc_launch(k, ctx, &g, &b, args, 3));
    if (r >= 0) t[r] = (now_ns() - t0) / 1e3 / inner;
  }
  kc_runtime_destroy(rt);
  kcb_rt = NULL;
  return median(t, R);
}

int main(int argc, char **argv) {
  bool json = false, opencl = true;
  const char *only = NULL; /* --kernel NAME */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int maxt = cores > 0 ? (int)cores : 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--no-opencl")) opencl = false;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-threads") && i + 1 < argc) maxt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--cc") && i + 1 < argc) host_cc = argv[++i];
    else {
      fprintf(
          stderr,
          "usage: %s [--json] [--reps N] [--max-threads N] [--no-opencl] [--kernel NAME] [--cc COMPILER]\n",
          argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > 100 || maxt < 1 || maxt > 256) {
    fprintf(stderr, "%s: --reps takes 1..100, --max-threads 1..256\n", KCB_PROG);
    return 2;
  }
  bool want[NKERN], known = !only; /* the kernels measured */
  for (int k = 0; k < NKERN; k++) known |= want[k] = !only || !strcmp(only, knames[k]);
  if (!known) {
    fprintf(stderr, "%s: --kernel takes one of", KCB_PROG);
    for (int k = 0; k < NKERN; k++) fprintf(stderr, " %s", knames[k]);
    fprintf(stderr, ", not \"%s\"\n", only);
    return 2;
  }
  /* the thread counts: 1, 2, 4, ... and every core */
  int tc[16], ntc = 0;
  for (int t = 1; t < maxt && ntc < 15; t *= 2) tc[ntc++] = t;
  tc[ntc++] = maxt;
  const char *why = NULL;
  if (opencl && !kc_backend_available(KC_BACKEND_OPENCL, &why)) opencl = false;
  double c_o2[NKERN], c_o3[NKERN], c_omp[NKERN][16], kc[NKERN][16], cl[NKERN], fib[NKERN];
  for (int k = 0; k < NKERN; k++) {
    c_o2[k] = c_o3[k] = cl[k] = fib[k] = -1;
    for (int i = 0; i < ntc; i++) kc[k][i] = c_omp[k][i] = -1;
    if (!want[k]) continue;
    inputs(k);
    c_o2[k] = best_c(k, 0);
    c_o3[k] = best_c(k, 1); /* ref_out: the -O3 result, which kcache's is checked against */
    for (int i = 0; i < ntc; i++) {
      omp_threads(tc[i]);
      c_omp[k][i] = best_c(k, 2);
    }
    best_c(k, 1);
    for (int i = 0; i < ntc; i++) kc[k][i] = run_kc(KC_BACKEND_HOST, (uint32_t)tc[i], k, false);
    if (strstr(ksrc[k], "kc_barrier()")) fib[k] = run_kc(KC_BACKEND_HOST, 1, k, true);
    cl[k] = opencl ? run_kc(KC_BACKEND_OPENCL, 0, k, false) : -1;
    if (!json) fprintf(stderr, "%s: %s measured\n", KCB_PROG, knames[k]);
  }
  static const uint32_t cross_n[] = {256, 1024, 4096, 16384, 65536, 262144, 1048576};
  enum { NX = sizeof cross_n / sizeof *cross_n };
  double x1[NX], xall[NX];
  for (int i = 0; i < NX; i++) {
    x1[i] = xall[i] = -1;
    if (only) continue;
    x1[i] = crossover(1, cross_n[i]);
    xall[i] = crossover((uint32_t)maxt, cross_n[i]);
  }
  char host[256] = "";
  FILE *f = fopen("/proc/cpuinfo", "r");
  for (char line[512]; f && fgets(line, sizeof line, f);)
    if (!strncmp(line, "model name", 10)) {
      snprintf(host, sizeof host, "%s", strchr(line, ':') + 2);
      host[strcspn(host, "\n")] = 0;
      break;
    }
  if (f) fclose(f);
  if (json) {
    printf("{\"cpu\":\"%s\",\"cores\":%ld,\"reps\":%d,\"host_cc\":\"%s\",\"threads\":[", host, cores, reps,
           host_cc);
    for (int i = 0; i < ntc; i++) printf("%s%d", i ? "," : "", tc[i]);
    printf("],\"kernels\":[");
    for (int k = 0, first = 1; k < NKERN; k++) {
      if (!want[k]) continue; /* not measured */
      printf("%s{\"name\":\"%s\",\"c_o2_ms\":%.3f,\"c_o3_native_ms\":%.3f,\"opencl_ms\":%.3f,\"kcache_ms\":[",
             first ? "" : ",", knames[k], c_o2[k], c_o3[k], cl[k]);
      first = 0;
      for (int i = 0; i < ntc; i++) printf("%s%.3f", i ? "," : "", kc[k][i]);
      printf("],\"c_openmp_ms\":[");
      for (int i = 0; i < ntc; i++) printf("%s%.3f", i ? "," : "", c_omp[k][i]);
      printf("],\"kcache_fibers_ms\":%.3f}", fib[k]);
    }
    printf("],\"crossover\":["); /* empty with --kernel */
    for (int i = 0; i < NX && !only; i++)
      printf("%s{\"items\":%u,\"one_thread_us\":%.3f,\"all_threads_us\":%.3f}", i ? "," : "", cross_n[i],
             x1[i], xall[i]);
    printf("]}\n"); /* then the table too: a log holds both */
  }
  printf("kcache %s host backend throughput, %s, %ld cores (best of %d, ms; host compiler %s)\n",
         kc_version(), host, cores, reps, host_cc);
  printf("\n%-8s %9s %9s", "kernel", "C -O2", "C -O3nat");
  for (int i = 0; i < ntc; i++) printf(" %7s%-2d", "kc t=", tc[i]);
  for (int i = 0; i < ntc; i++) printf(" %7s%-2d", "omp t=", tc[i]);
  printf(" %9s  %s\n", "OpenCL", "kc 1t / C -O3nat");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k]) continue;
    printf("%-8s %9.2f %9.2f", knames[k], c_o2[k], c_o3[k]);
    for (int i = 0; i < ntc; i++) printf(" %9.2f", kc[k][i]);
    for (int i = 0; i < ntc; i++) printf(" %9.2f", c_omp[k][i]);
    if (cl[k] >= 0) printf(" %9.2f", cl[k]);
    else printf(" %9s", "-");
    printf("  %.2fx\n", kc[k][0] / c_o3[k]);
  }
  if (!opencl) printf("(OpenCL: %s)\n", why ? why : "left out");
  bool fibers = false;
  for (int k = 0; k < NKERN; k++) fibers |= fib[k] >= 0;
  if (fibers) {
    printf("\nkernels with kc_barrier(), one thread: split at the barriers (kc t=1) against fibers (ms)\n");
    printf("%-8s %9s %9s %9s\n", "kernel", "split", "fibers", "speedup");
    for (int k = 0; k < NKERN; k++)
      if (fib[k] >= 0) printf("%-8s %9.2f %9.2f %8.1fx\n", knames[k], kc[k][0], fib[k], fib[k] / kc[k][0]);
  }
  if (only) return 0; /* the crossover is measured only in a run of every kernel */
  printf("\nthe pool's crossover: saxpy launches of n items, us per launch (median)\n");
  printf("%10s %12s %12s\n", "items", "1 thread", "all threads");
  for (int i = 0; i < NX; i++) printf("%10u %12.2f %12.2f\n", cross_n[i], x1[i], xall[i]);
  return 0;
}
