/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_opencl -- a cached kc_launch against the raw OpenCL calls for the
 * same kernel and arguments (clSetKernelArg for each argument, then
 * clEnqueueNDRangeKernel, no wait), with 0, 1 and 4 arguments, in the same
 * run; the same launch through kc_launch_ex on the caller's own queue (a
 * context, queue and cl_mem the benchmark made, handed to kcache with
 * kc_context_wrap, kc_stream_wrap and kc_buffer_wrap) against the raw calls
 * on that very queue; and a relink after a context reset (the kernel made
 * again from the program the compile kept: no build) against building it
 * from source (the first compile).
 *
 * The raw side uses its own context and in-order queue on the same device,
 * with a kernel made from the very same program binary kcache compiled.
 * Launches are timed in batches; each batch is drained (clFinish) outside
 * the timing, so both sides enqueue into an empty queue.
 *
 * --cold: instead, the cold start of one kernel, medians of COLD_ROUNDS
 * fresh kernels on each side in the same run: kc_define, kc_kernel_create
 * and the first kc_launch (compile and link) until it finished, against
 * clCreateProgramWithSource, clBuildProgram, clCreateKernel and a first
 * launch until it finished (the same build options), with the program
 * builds kcache ran per kernel (kc_stats.backend_builds).
 *
 * Usage: kc_bench_opencl [--json] [--cold]    exit 77 when OpenCL is unavailable
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <kcache.h>

#define KCB_PROG "kc_bench_opencl"
#include "kc_bench_util.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CL_FNS(X) \
  X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *)) \
  X(clGetDeviceIDs, cl_int, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *)) \
  X(clCreateContext, cl_context, \
    (const cl_context_properties *, cl_uint, const cl_device_id *, \
     void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *)) \
  X(clCreateCommandQueue, cl_command_queue, \
    (cl_context, cl_device_id, cl_command_queue_properties, cl_int *)) \
  X(clCreateProgramWithSource, cl_program, (cl_context, cl_uint, const char **, const size_t *, cl_int *)) \
  X(clReleaseProgram, cl_int, (cl_program)) \
  X(clReleaseKernel, cl_int, (cl_kernel)) \
  X(clCreateProgramWithBinary, cl_program, \
    (cl_context, cl_uint, const cl_device_id *, const size_t *, const unsigned char **, cl_int *, cl_int *)) \
  X(clBuildProgram, cl_int, \
    (cl_program, cl_uint, const cl_device_id *, const char *, void(CL_CALLBACK *)(cl_program, void *), \
     void *)) \
  X(clCreateKernel, cl_kernel, (cl_program, const char *, cl_int *)) \
  X(clCreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *)) \
  X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *)) \
  X(clEnqueueNDRangeKernel, cl_int, \
    (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint, \
     const cl_event *, cl_event *)) \
  X(clFinish, cl_int, (cl_command_queue))

#define DECL(name, ret, args) static ret(CL_API_CALL *p_##name) args;
CL_FNS(DECL)
#undef DECL

static kc_runtime *rt;
static kc_context *ctx;

typedef struct {
  const char *name, *src;
  int nargs;
  kc_kernel *k;
  kc_args *bound; /* the same arguments bound once (kc_launch_args) */
  cl_kernel raw;
  double kc_ns, raw_ns, bound_ns, ex_ns;
} bk;

static bk kernels[] = {
    {"o0", "KC_KERNEL void o0(void) { }", 0},
    {"o1", "KC_KERNEL void o1(KC_GLOBAL float *y) { if (kc_global_id(0) == 0) y[0] += 1.0f; }", 1},
    {"o4",
     "KC_KERNEL void o4(KC_GLOBAL float *y, float a, int b, float c) { if (kc_global_id(0) == 0) "
     "y[0] = a * (float)b + c; }",
     4},
};
#define NK 3

static float fa = 1.5f, fc = 2.5f;
static int ib = 3;
static kc_arg kargs[4], wargs[4]; /* wargs: the caller's cl_mem, wrapped */
static kc_context *wctx; /* the caller's cl_context, adopted */
static kc_launch_config wcfg; /* on the caller's queue */
static cl_mem raw_buf;
static cl_command_queue raw_q;
static const kc_dim3 one = {1, 1, 1};
static const size_t gsz[1] = {1}, lsz[1] = {1};

static void launch_kc(bk *b) {
  kc_status st = kc_launch(b->k, ctx, &one, &one, kargs, (uint32_t)b->nargs);
  if (st) kcb_die("kc_launch", st);
}

static void launch_bound(bk *b) {
  kc_status st = kc_launch_args(b->bound, &one, &one);
  if (st) kcb_die("kc_launch_args", st);
}

/* kcache inside the application: its context, queue and memory. */
static void launch_ex(bk *b) {
  kc_status st = kc_launch_ex(b->k, wctx, &wcfg, wargs, (uint32_t)b->nargs);
  if (st) kcb_die("kc_launch_ex", st);
}

/* What an application does without kcache: set every argument, enqueue. */
static void launch_raw(bk *b) {
  cl_int e = 0;
  if (b->nargs > 0) e |= p_clSetKernelArg(b->raw, 0, sizeof raw_buf, &raw_buf);
  if (b->nargs > 1) {
    e |= p_clSetKernelArg(b->raw, 1, sizeof fa, &fa);
    e |= p_clSetKernelArg(b->raw, 2, sizeof ib, &ib);
    e |= p_clSetKernelArg(b->raw, 3, sizeof fc, &fc);
  }
  e |= p_clEnqueueNDRangeKernel(raw_q, b->raw, 1, NULL, gsz, lsz, 0, NULL, NULL);
  if (e) kcb_die("raw launch", e);
}

/* One cold start on each side: a kernel neither has seen (tag makes its
 * text unique), built, launched once on 64 items and finished; ms. */
static double cold_compile_ms; /* the last cold_kc's compile (kc_code_info) */

static double cold_kc(int tag, kc_buffer *buf) {
  char name[32], src[256];
  snprintf(name, sizeof name, "cold%d", tag);
  snprintf(src, sizeof src,
           "KC_KERNEL void %s(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * %d.0f; }",
           name, tag);
  double t0 = now_ns();
  kc_kernel *k;
  KCB_CHECK(kc_define(rt, name, src, NULL));
  KCB_CHECK(kc_kernel_create(rt, name, NULL, &k));
  kc_arg a = KC_ARG_BUF(buf);
  kc_dim3 grid = {1, 1, 1}, block = {64, 1, 1};
  KCB_CHECK(kc_launch(k, ctx, &grid, &block, &a, 1));
  KCB_CHECK(kc_context_finish(ctx));
  double ms = (now_ns() - t0) / 1e6;
  kc_code_info ci;
  KCB_CHECK(kc_kernel_code(k, &ci));
  cold_compile_ms = ci.compile_ns / 1e6;
  kc_kernel_destroy(k);
  return ms;
}

static double cold_raw(int tag, cl_context rctx, cl_device_id dev) {
  char src[256];
  snprintf(
      src, sizeof src,
      "__kernel void rawcold%d(__global float *y) { size_t j = get_global_id(0); y[j] = (float)j * %d.0f; }",
      tag, tag);
  char name[32];
  snprintf(name, sizeof name, "rawcold%d", tag);
  const char *text = src;
  size_t len = strlen(src), g = 64;
  cl_int err;
  double t0 = now_ns();
  cl_program p = p_clCreateProgramWithSource(rctx, 1, &text, &len, &err);
  KCB_CHECK(err);
  KCB_CHECK(p_clBuildProgram(p, 1, &dev, "-cl-std=CL1.2 -cl-kernel-arg-info", NULL, NULL));
  cl_kernel k = p_clCreateKernel(p, name, &err);
  KCB_CHECK(err);
  KCB_CHECK(p_clSetKernelArg(k, 0, sizeof raw_buf, &raw_buf));
  KCB_CHECK(p_clEnqueueNDRangeKernel(raw_q, k, 1, NULL, &g, &g, 0, NULL, NULL));
  KCB_CHECK(p_clFinish(raw_q));
  double ms = (now_ns() - t0) / 1e6;
  p_clReleaseKernel(k);
  p_clReleaseProgram(p);
  return ms;
}

/* --cold: the sides alternate which goes first, round by round. */
static int cold_start(cl_context rctx, cl_device_id dev, kc_buffer *buf, bool json) {
  enum { COLD_ROUNDS = 15 };
  double kt[COLD_ROUNDS], rt_ms[COLD_ROUNDS], ct[COLD_ROUNDS], lt[COLD_ROUNDS];
  kc_stats s0, s1;
  cold_kc(1000, buf), cold_raw(1000, rctx, dev); /* warm: PoCL's first build in a process */
  KCB_CHECK(kc_stats_get(rt, &s0));
  for (int r = 0; r < COLD_ROUNDS; r++) {
    if (r % 2) rt_ms[r] = cold_raw(r + 1, rctx, dev), kt[r] = cold_kc(r + 1, buf);
    else kt[r] = cold_kc(r + 1, buf), rt_ms[r] = cold_raw(r + 1, rctx, dev);
    ct[r] = cold_compile_ms;
    lt[r] = kt[r] - ct[r]; /* the link and the first launch */
  }
  KCB_CHECK(kc_stats_get(rt, &s1));
  double builds = (double)(s1.backend_builds - s0.backend_builds) / COLD_ROUNDS;
  double compiles = (double)(s1.compiles - s0.compiles) / COLD_ROUNDS;
  double kc_ms = median(kt, COLD_ROUNDS), raw_ms = median(rt_ms, COLD_ROUNDS), c_ms = median(ct, COLD_ROUNDS);
  double l_ms = median(lt, COLD_ROUNDS);
  if (json)
    printf("{\"backend\":\"opencl\",\"device\":\"%s\",\"cold\":{\"rounds\":%d,\"kc_ms\":%.2f,"
           "\"raw_ms\":%.2f,\"ratio\":%.3f,\"kc_compile_ms\":%.2f,\"kc_link_launch_ms\":%.2f,\"compiles_per_"
           "kernel\":%.2f,\"builds_per_"
           "kernel\":%.2f}}\n",
           kc_device_name(rt, 0), COLD_ROUNDS, kc_ms, raw_ms, kc_ms / raw_ms, c_ms, l_ms, compiles, builds);
  else
    printf("cold start of one kernel on %s (medians of %d, same run)\n"
           "  kcache define + first launch  %8.2f ms  (compile %.2f, link + launch %.2f ms; %.2f builds per "
           "kernel)\n"
           "  raw build + first launch      %8.2f ms\n  ratio                         %8.3f\n",
           kc_device_name(rt, 0), COLD_ROUNDS, kc_ms, c_ms, l_ms, builds, raw_ms, kc_ms / raw_ms);
  kc_runtime_destroy(rt);
  return 0;
}

int main(int argc, char **argv) {
  bool json = false, cold = false;
  for (int i = 1; i < argc; i++) {
    json |= !strcmp(argv[i], "--json");
    cold |= !strcmp(argv[i], "--cold");
  }
  /* The first build must really build: PoCL's own kernel cache would turn a
   * build of a source it saw in an earlier run into a cache hit. Set before
   * anything initializes the platform, which reads it once. */
  setenv("POCL_KERNEL_CACHE", "0", 1);
  kcb_require_backend(KC_BACKEND_OPENCL);
  void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) kcb_die("dlopen libOpenCL.so.1", 1);
#define LOAD(name, ret, args) \
  if (!(*(void **)&p_##name = dlsym(lib, #name))) kcb_die("dlsym " #name, 1);
  CL_FNS(LOAD)
#undef LOAD

  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_OPENCL);
  rt = kcb_main_runtime(&o, &ctx);
  kc_buffer *buf;
  KCB_CHECK(kc_buffer_create(ctx, 256, &buf));
  kc_arg all[4] = {KC_ARG_BUF(buf), KC_ARG_VAL(fa), KC_ARG_VAL(ib), KC_ARG_VAL(fc)};
  memcpy(kargs, all, sizeof all);

  /* the raw side: first platform with a device, like kcache's default */
  cl_platform_id plats[8];
  cl_uint np = 0;
  KCB_CHECK(p_clGetPlatformIDs(8, plats, &np));
  cl_device_id dev = NULL;
  for (cl_uint i = 0; i < np && !dev; i++)
    if (p_clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  if (!dev) kcb_die("no OpenCL device", 1);
  cl_int err;
  cl_context rctx = p_clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  KCB_CHECK(err);
  raw_q = p_clCreateCommandQueue(rctx, dev, 0, &err);
  KCB_CHECK(err);
  raw_buf = p_clCreateBuffer(rctx, CL_MEM_READ_WRITE, 256, NULL, &err);
  KCB_CHECK(err);
  if (cold) return cold_start(rctx, dev, buf, json);
  KCB_CHECK(kc_context_wrap(rt, rctx, dev, &wctx));
  kc_stream *wq;
  KCB_CHECK(kc_stream_wrap(wctx, raw_q, &wq));
  kc_buffer *wbuf;
  KCB_CHECK(kc_buffer_wrap(wctx, raw_buf, 256, &wbuf));
  kc_arg wall[4] = {KC_ARG_BUF(wbuf), KC_ARG_VAL(fa), KC_ARG_VAL(ib), KC_ARG_VAL(fc)};
  memcpy(wargs, wall, sizeof wall);
  KCB_CHECK(kc_launch_config_init(&wcfg));
  wcfg.stream = wq;

  double first_build_ms = 0;
  for (int i = 0; i < NK; i++) {
    bk *b = &kernels[i];
    KCB_CHECK(kc_define(rt, b->name, b->src, NULL));
    KCB_CHECK(kc_kernel_create(rt, b->name, NULL, &b->k));
    KCB_CHECK(kc_kernel_compile(b->k));
    kc_code_info ci;
    KCB_CHECK(kc_kernel_code(b->k, &ci));
    if (i == 0) first_build_ms = ci.compile_ns / 1e6;
    const unsigned char *bin = ci.artifact;
    size_t n = ci.artifact_size;
    cl_int bst;
    cl_program p = p_clCreateProgramWithBinary(rctx, 1, &dev, &n, &bin, &bst, &err);
    KCB_CHECK(err);
    KCB_CHECK(p_clBuildProgram(p, 1, &dev, "", NULL, NULL));
    b->raw = p_clCreateKernel(p, b->name, &err);
    KCB_CHECK(err);
    KCB_CHECK(kc_args_create(b->k, ctx, kargs, (uint32_t)b->nargs, &b->bound));
  }

  enum { BATCH = 200, ROUNDS = 301 };
  enum { SIDES = 4 };
  static double t[SIDES][ROUNDS]; /* kc_launch, raw, kc_launch_args, kc_launch_ex on raw_q */
  void (*const side_fn[SIDES])(bk *) = {launch_kc, launch_raw, launch_bound, launch_ex};
  for (int i = 0; i < NK; i++) {
    bk *b = &kernels[i];
    for (int w = 0; w < 5; w++) { /* warm: PoCL makes machine code at first launch */
      for (int j = 0; j < BATCH; j++) launch_kc(b), launch_raw(b), launch_bound(b), launch_ex(b);
      KCB_CHECK(kc_context_finish(ctx));
      KCB_CHECK(p_clFinish(raw_q));
    }
    for (int r = 0; r < ROUNDS; r++) {
      /* rotate which side goes first, so that an order effect (PoCL's
       * workers still winding down, caches) falls on all alike */
      for (int k = 0; k < SIDES; k++) {
        int side = (r + k) % SIDES;
        double t0 = now_ns();
        for (int j = 0; j < BATCH; j++) side_fn[side](b);
        double t1 = now_ns();
        KCB_CHECK(side == 1 || side == 3 ? (kc_status)p_clFinish(raw_q) : kc_context_finish(ctx));
        t[side][r] = (t1 - t0) / BATCH;
      }
    }
    b->kc_ns = median(t[0], ROUNDS);
    b->raw_ns = median(t[1], ROUNDS);
    b->bound_ns = median(t[2], ROUNDS);
    b->ex_ns = median(t[3], ROUNDS);
  }

  /* relink after a reset (the kept program), against the first build */
  enum { RELINKS = 21 };
  double rl[RELINKS];
  kc_stats s0, s1;
  kc_stats_get(rt, &s0);
  for (int r = 0; r < RELINKS; r++) {
    KCB_CHECK(kc_context_reset(ctx));
    double t0 = now_ns();
    launch_kc(&kernels[0]);
    rl[r] = (now_ns() - t0) / 1e6;
    KCB_CHECK(kc_context_finish(ctx));
  }
  kc_stats_get(rt, &s1);
  double relink_ms = median(rl, RELINKS);

  if (json) {
    printf("{\"backend\":\"opencl\",\"device\":\"%s\",\"launch\":[", kc_device_name(rt, 0));
    for (int i = 0; i < NK; i++)
      printf("%s{\"args\":%d,\"kc_ns\":%.1f,\"raw_ns\":%.1f,\"ratio\":%.3f,\"bound_ns\":%.1f,"
             "\"bound_ratio\":%.3f,\"ex_callers_queue_ns\":%.1f,\"ex_ratio\":%.3f}",
             i ? "," : "", kernels[i].nargs, kernels[i].kc_ns, kernels[i].raw_ns,
             kernels[i].kc_ns / kernels[i].raw_ns, kernels[i].bound_ns,
             kernels[i].bound_ns / kernels[i].raw_ns, kernels[i].ex_ns, kernels[i].ex_ns / kernels[i].raw_ns);
    printf("],\"first_build_ms\":%.2f,\"relink_ms\":%.3f,\"relink_speedup\":%.1f,"
           "\"compiles_during_relinks\":%llu}\n",
           first_build_ms, relink_ms, first_build_ms / relink_ms,
           (unsigned long long)(s1.compiles - s0.compiles));
  } else {
    printf("kcache %s OpenCL benchmark on %s (medians of the same run)\n\n", kc_version(),
           kc_device_name(rt, 0));
    printf("%-30s %10s %10s %8s %10s %8s %10s %8s\n", "cached launch (enqueue, no wait)", "kc ns", "raw ns",
           "ratio", "bound ns", "ratio", "ex ns", "ratio");
    for (int i = 0; i < NK; i++)
      printf("  %d argument%-19s %10.1f %10.1f %8.3f %10.1f %8.3f %10.1f %8.3f\n", kernels[i].nargs,
             kernels[i].nargs == 1 ? "" : "s", kernels[i].kc_ns, kernels[i].raw_ns,
             kernels[i].kc_ns / kernels[i].raw_ns, kernels[i].bound_ns,
             kernels[i].bound_ns / kernels[i].raw_ns, kernels[i].ex_ns, kernels[i].ex_ns / kernels[i].raw_ns);
    printf("(kc: kc_launch, arguments checked at each launch; bound: kc_launch_args; ex: kc_launch_ex on\n"
           " the raw side's own queue, context and cl_mem, adopted: the same queue as raw)\n");
    printf("\nfirst build from source        %10.2f ms\n", first_build_ms);
    printf("relink after a context reset   %10.3f ms  (%.0fx faster; compiles: %llu)\n", relink_ms,
           first_build_ms / relink_ms, (unsigned long long)(s1.compiles - s0.compiles));
  }
  kc_runtime_destroy(rt);
  return 0;
}
