/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_cuda -- a cached kc_launch against a raw cuLaunchKernel of the
 * same function (the same cubin, loaded by hand into the same primary
 * context) with the same arguments, 0, 1 and 8 of them, in the same run:
 * median host time per launch, without synchronizing each launch (batches of
 * launches, synchronized between batches outside the timing), and with a
 * synchronization after every launch; also kc_launch_args with the same
 * arguments bound once; and kc_launch_ex on a non-default stream the
 * benchmark made (cuStreamCreate, handed over with kc_stream_wrap) against
 * cuLaunchKernel on that same stream. Then the first compile against the
 * relink after a context reset (which must not call NVRTC).
 *
 * Usage: kc_bench_cuda [--json]      exit 77 when CUDA is unavailable
 */
#include <kcache.h>

#define KCB_PROG "kc_bench_cuda"
#include "kc_bench_util.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUctx_st *CUcontext;

static CUresult (*p_cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void **, void **);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUstream raw_stream; /* the caller's non-default stream */
static kc_launch_config scfg; /* kc_launch_ex on it */

static kc_runtime *rt;
static kc_context *ctx;

typedef struct {
  const char *name, *src;
  int nargs;
  kc_kernel *k;
  kc_args *bound; /* the same arguments, bound once (kc_launch_args) */
  CUfunction raw;
  kc_arg args[8];
  void *params[8];
  double kc_ns, raw_ns, bound_ns, kc_sync_ns, raw_sync_ns, ex_ns, raw_stream_ns;
} bk;

static bk kernels[] = {
    {"e0", "KC_KERNEL void e0(void) { }", 0},
    {"e1", "KC_KERNEL void e1(KC_GLOBAL float *y) { if (kc_global_id(0) == 0) y[0] += 1.0f; }", 1},
    {"e8",
     "KC_KERNEL void e8(KC_GLOBAL float *y, float a, float b, int c, int d, float e, float f, int "
     "g) { if (kc_global_id(0) == 0) y[0] = a + b + c + d + e + f + g; }",
     8},
};
#define NK 3

static const kc_dim3 one = {1, 1, 1};

static void launch_kc(bk *b) {
  if (kc_launch(b->k, ctx, &one, &one, b->args, (uint32_t)b->nargs)) kcb_die("kc_launch", 1);
}
static void launch_bound(bk *b) {
  if (kc_launch_args(b->bound, &one, &one)) kcb_die("kc_launch_args", 1);
}
static void launch_raw(bk *b) {
  CUresult r = p_cuLaunchKernel(b->raw, 1, 1, 1, 1, 1, 1, 0, NULL, b->params, NULL);
  if (r) kcb_die("cuLaunchKernel", r);
}
static void launch_ex(bk *b) {
  if (kc_launch_ex(b->k, ctx, &scfg, b->args, (uint32_t)b->nargs)) kcb_die("kc_launch_ex", 1);
}
static void launch_raw_stream(bk *b) {
  CUresult r = p_cuLaunchKernel(b->raw, 1, 1, 1, 1, 1, 1, 0, raw_stream, b->params, NULL);
  if (r) kcb_die("cuLaunchKernel (stream)", r);
}

int main(int argc, char **argv) {
  bool json = argc > 1 && !strcmp(argv[1], "--json");
  kcb_require_backend(KC_BACKEND_CUDA);
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu) kcb_die("dlopen libcuda.so.1", 1);
  *(void **)&p_cuModuleLoadData = dlsym(cu, "cuModuleLoadData");
  *(void **)&p_cuModuleGetFunction = dlsym(cu, "cuModuleGetFunction");
  *(void **)&p_cuLaunchKernel = dlsym(cu, "cuLaunchKernel");
  *(void **)&p_cuCtxSynchronize = dlsym(cu, "cuCtxSynchronize");
  *(void **)&p_cuStreamCreate = dlsym(cu, "cuStreamCreate");
  *(void **)&p_cuCtxSetCurrent = dlsym(cu, "cuCtxSetCurrent");
  if (!p_cuModuleLoadData || !p_cuModuleGetFunction || !p_cuLaunchKernel || !p_cuCtxSynchronize ||
      !p_cuStreamCreate || !p_cuCtxSetCurrent)
    kcb_die("dlsym", 1);

  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_CUDA);
  rt = kcb_main_runtime(&o, &ctx);
  /* the program holds kcache's context current, as a framework holds its
   * own: kcache leaves the caller's current context as it found it, so the
   * raw driver calls below need it, and kcache's launches find it there
   * (the direct path); the switching path is measured at the end */
  KCB_CHECK(p_cuCtxSetCurrent((CUcontext)kc_context_native(ctx)));
  kc_buffer *buf;
  KCB_CHECK(kc_buffer_create(ctx, 256, &buf));
  static float fa = 1, fb = 2, fe = 3, ff = 4;
  static int ic = 5, id = 6, ig = 7;
  kc_arg all[8] = {KC_ARG_BUF(buf), KC_ARG_VAL(fa), KC_ARG_VAL(fb), KC_ARG_VAL(ic),
                   KC_ARG_VAL(id),  KC_ARG_VAL(fe), KC_ARG_VAL(ff), KC_ARG_VAL(ig)};
  /* a kc_buffer starts with its CUdeviceptr: what cuLaunchKernel wants */
  void *raw_params[8] = {buf, &fa, &fb, &ic, &id, &fe, &ff, &ig};

  double first_compile_ms = 0, relink_ms = 0;
  unsigned long long compiles_before_relink = 0, compiles_after_relink = 0;
  for (int i = 0; i < NK; i++) {
    bk *b = &kernels[i];
    KCB_CHECK(kc_define(rt, b->name, b->src, NULL));
    KCB_CHECK(kc_kernel_create(rt, b->name, NULL, &b->k));
    memcpy(b->args, all, sizeof all);
    memcpy(b->params, raw_params, sizeof raw_params);
    double t0 = now_ns();
    launch_kc(b); /* compile + link + launch */
    KCB_CHECK(p_cuCtxSynchronize());
    if (i == 0) first_compile_ms = (now_ns() - t0) / 1e6;
    kc_code_info ci;
    KCB_CHECK(kc_kernel_code(b->k, &ci));
    CUmodule m;
    KCB_CHECK(p_cuModuleLoadData(&m, ci.artifact));
    KCB_CHECK(p_cuModuleGetFunction(&b->raw, m, b->name));
    KCB_CHECK(kc_args_create(b->k, ctx, b->args, (uint32_t)b->nargs, &b->bound));
    launch_bound(b);
    KCB_CHECK(p_cuCtxSynchronize());
  }

  /* the primary context is current (set above): the stream is in it */
  KCB_CHECK(p_cuStreamCreate(&raw_stream, 1 /* CU_STREAM_NON_BLOCKING */));
  kc_stream *ws;
  KCB_CHECK(kc_stream_wrap(ctx, raw_stream, &ws));
  KCB_CHECK(kc_launch_config_init(&scfg));
  scfg.stream = ws;

  enum { BATCH = 256, ROUNDS = 101, SYNC_REPS = 2001 };
  static double te[ROUNDS], ts[ROUNDS];
  static double tk[ROUNDS], tb[ROUNDS], tr[ROUNDS], sk[SYNC_REPS], sr[SYNC_REPS];
  for (int i = 0; i < NK; i++) {
    bk *b = &kernels[i];
    for (int w = 0; w < 10; w++) {
      for (int j = 0; j < BATCH; j++)
        launch_kc(b), launch_bound(b), launch_raw(b), launch_ex(b), launch_raw_stream(b);
      KCB_CHECK(p_cuCtxSynchronize());
    }
    for (int r = 0; r < ROUNDS; r++) { /* interleaved rounds: drift hits both */
      double t0 = now_ns();
      for (int j = 0; j < BATCH; j++) launch_kc(b);
      double t1 = now_ns();
      KCB_CHECK(p_cuCtxSynchronize());
      double t2 = now_ns();
      for (int j = 0; j < BATCH; j++) launch_raw(b);
      double t3 = now_ns();
      KCB_CHECK(p_cuCtxSynchronize());
      double t4 = now_ns();
      for (int j = 0; j < BATCH; j++) launch_bound(b);
      double t5 = now_ns();
      KCB_CHECK(p_cuCtxSynchronize());
      double t5b = now_ns();
      for (int j = 0; j < BATCH; j++) launch_ex(b);
      double t6 = now_ns();
      KCB_CHECK(p_cuCtxSynchronize());
      double t7 = now_ns();
      for (int j = 0; j < BATCH; j++) launch_raw_stream(b);
      double t8 = now_ns();
      KCB_CHECK(p_cuCtxSynchronize());
      tk[r] = (t1 - t0) / BATCH;
      tr[r] = (t3 - t2) / BATCH;
      tb[r] = (t5 - t4) / BATCH;
      te[r] = (t6 - t5b) / BATCH;
      ts[r] = (t8 - t7) / BATCH;
    }
    b->ex_ns = median(te, ROUNDS);
    b->raw_stream_ns = median(ts, ROUNDS);
    b->kc_ns = median(tk, ROUNDS);
    b->raw_ns = median(tr, ROUNDS);
    b->bound_ns = median(tb, ROUNDS);
    for (int r = 0; r < SYNC_REPS; r++) {
      double t0 = now_ns();
      launch_kc(b);
      KCB_CHECK(p_cuCtxSynchronize());
      double t1 = now_ns();
      launch_raw(b);
      KCB_CHECK(p_cuCtxSynchronize());
      double t2 = now_ns();
      sk[r] = t1 - t0;
      sr[r] = t2 - t1;
    }
    b->kc_sync_ns = median(sk, SYNC_REPS);
    b->raw_sync_ns = median(sr, SYNC_REPS);
  }

  /* kc_launch with no context current (a program that never made one
   * current): each launch makes kcache's current and restores none */
  static double tw[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    KCB_CHECK(p_cuCtxSetCurrent(NULL));
    double t0 = now_ns();
    for (int j = 0; j < BATCH; j++) launch_kc(&kernels[0]);
    double t1 = now_ns();
    KCB_CHECK(p_cuCtxSetCurrent((CUcontext)kc_context_native(ctx)));
    KCB_CHECK(p_cuCtxSynchronize());
    tw[r] = (t1 - t0) / BATCH;
  }
  double switch_ns = median(tw, ROUNDS);

  /* relink after a reset: no NVRTC call, the stored cubin is loaded again */
  kc_stats s;
  kc_stats_get(rt, &s);
  compiles_before_relink = s.compiles;
  KCB_CHECK(kc_context_reset(ctx));
  double t0 = now_ns();
  launch_kc(&kernels[0]);
  KCB_CHECK(p_cuCtxSynchronize());
  relink_ms = (now_ns() - t0) / 1e6;
  kc_stats_get(rt, &s);
  compiles_after_relink = s.compiles;

  if (json) {
    printf("{\"backend\":\"cuda\",\"device\":\"%s\",\"launch\":[", kc_device_name(rt, 0));
    for (int i = 0; i < NK; i++)
      printf("%s{\"args\":%d,\"kc_ns\":%.1f,\"raw_ns\":%.1f,\"ratio\":%.3f,\"bound_ns\":%.1f,"
             "\"bound_ratio\":%.3f,\"kc_sync_ns\":%.1f,\"raw_sync_ns\":%.1f,\"sync_ratio\":%.3f,"
             "\"ex_stream_ns\":%.1f,\"raw_stream_ns\":%.1f,\"ex_stream_ratio\":%.3f}",
             i ? "," : "", kernels[i].nargs, kernels[i].kc_ns, kernels[i].raw_ns,
             kernels[i].kc_ns / kernels[i].raw_ns, kernels[i].bound_ns,
             kernels[i].bound_ns / kernels[i].raw_ns, kernels[i].kc_sync_ns, kernels[i].raw_sync_ns,
             kernels[i].kc_sync_ns / kernels[i].raw_sync_ns, kernels[i].ex_ns, kernels[i].raw_stream_ns,
             kernels[i].ex_ns / kernels[i].raw_stream_ns);
    printf("],\"switch_ns\":%.1f,\"switch_ratio\":%.3f,\"first_compile_ms\":%.2f,\"relink_ms\":%.3f,\"relink_"
           "speedup\":%.1f,"
           "\"compiles_during_relink\":%llu}\n",
           switch_ns, switch_ns / kernels[0].raw_ns, first_compile_ms, relink_ms,
           first_compile_ms / relink_ms, compiles_after_relink - compiles_before_relink);
  } else {
    printf("kcache %s CUDA benchmark on %s (medians of the same run)\n\n", kc_version(),
           kc_device_name(rt, 0));
    printf("%-26s %10s %10s %7s %10s %7s | %12s %12s %7s\n", "cached launch", "kc ns", "raw ns", "ratio",
           "bound ns", "ratio", "kc+sync ns", "raw+sync ns", "ratio");
    for (int i = 0; i < NK; i++)
      printf("  %d argument%-14s %10.1f %10.1f %7.3f %10.1f %7.3f | %12.1f %12.1f %7.3f\n", kernels[i].nargs,
             kernels[i].nargs == 1 ? "" : "s", kernels[i].kc_ns, kernels[i].raw_ns,
             kernels[i].kc_ns / kernels[i].raw_ns, kernels[i].bound_ns,
             kernels[i].bound_ns / kernels[i].raw_ns, kernels[i].kc_sync_ns, kernels[i].raw_sync_ns,
             kernels[i].kc_sync_ns / kernels[i].raw_sync_ns);
    printf("(kc: kc_launch, arguments checked at each launch; bound: kc_launch_args)\n");
    printf("\n%-26s %10s %10s %7s\n", "on a non-default stream", "ex ns", "raw ns", "ratio");
    for (int i = 0; i < NK; i++)
      printf("  %d argument%-14s %10.1f %10.1f %7.3f\n", kernels[i].nargs, kernels[i].nargs == 1 ? "" : "s",
             kernels[i].ex_ns, kernels[i].raw_stream_ns, kernels[i].ex_ns / kernels[i].raw_stream_ns);
    printf("(ex: kc_launch_ex on the caller's CUstream, wrapped; raw: cuLaunchKernel on it)\n");
    printf("\nkc_launch, %d arguments, no context current %9.1f ns (%.3fx raw: kcache makes its context\n"
           "current for the launch and restores none)\n",
           kernels[0].nargs, switch_ns, switch_ns / kernels[0].raw_ns);
    printf("\nfirst compile + link + launch  %9.2f ms\n", first_compile_ms);
    printf("relink after context reset     %9.3f ms  (%.0fx faster; NVRTC calls: %llu)\n", relink_ms,
           first_compile_ms / relink_ms, compiles_after_relink - compiles_before_relink);
  }
  kc_runtime_destroy(rt);
  return 0;
}
