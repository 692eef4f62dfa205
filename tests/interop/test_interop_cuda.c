/* SPDX-License-Identifier: MIT */
/*
 * test_interop_cuda.c -- kcache inside a program that owns its CUDA
 * objects (run on a GPU by bench/gpu/check.sh; skips elsewhere). The test
 * retains the primary context itself, makes a non-blocking stream and
 * cuMemAlloc memory with raw driver calls, hands them to kcache
 * (kc_context_wrap, kc_stream_wrap, kc_buffer_wrap, KC_ARG_DEVPTR with an
 * offset, kc_buffer_view), launches with a struct argument, dynamic shared memory (also above
 * 48 KiB), cooperatively and in clusters (where the device has them),
 * captures launches into a graph (an unprepared kernel is refused with
 * KC_EBUSY and the capture survives), replays it, reads back with raw
 * cuMemcpyDtoH, destroys every kcache object and checks that the natives
 * still work.
 */
#include "kc_test.h"

#include <dlfcn.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef unsigned long long CUdeviceptr;

#define CUF(X) \
  X(cuInit, (unsigned)) \
  X(cuDeviceGet, (CUdevice *, int)) \
  X(cuDeviceGetAttribute, (int *, int, CUdevice)) \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice)) \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice)) \
  X(cuCtxSetCurrent, (CUcontext)) \
  X(cuCtxGetCurrent, (CUcontext *)) \
  X(cuCtxCreate_v2, (CUcontext *, unsigned, CUdevice)) \
  X(cuCtxDestroy_v2, (CUcontext)) \
  X(cuStreamCreate, (CUstream *, unsigned)) \
  X(cuStreamDestroy_v2, (CUstream)) \
  X(cuStreamSynchronize, (CUstream)) \
  X(cuMemAlloc_v2, (CUdeviceptr *, size_t)) \
  X(cuMemFree_v2, (CUdeviceptr)) \
  X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t)) \
  X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t)) \
  X(cuStreamBeginCapture_v2, (CUstream, int)) \
  X(cuStreamEndCapture, (CUstream, CUgraph *)) \
  X(cuGraphLaunch, (CUgraphExec, CUstream)) \
  X(cuGraphExecDestroy, (CUgraphExec)) \
  X(cuGraphDestroy, (CUgraph))
#define CU_FIELD(name, args) static CUresult(*p_##name) args;
CUF(CU_FIELD)
#undef CU_FIELD
static CUresult (*p_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);

static const char *cu_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "no CUDA driver (libcuda.so.1)";
  void *sym;
#define CU_SYM(name, args) \
  if (!(sym = dlsym(lib, #name))) return "the CUDA driver lacks " #name; \
  memcpy(&p_##name, &sym, sizeof sym);
  CUF(CU_SYM)
#undef CU_SYM
  if (!(sym = dlsym(lib, "cuGraphInstantiateWithFlags")))
    return "the CUDA driver lacks cuGraphInstantiateWithFlags";
  memcpy(&p_cuGraphInstantiateWithFlags, &sym, sizeof sym);
  return NULL;
}

#define CU_OK(expr) \
  do { \
    CUresult cu_r_ = (expr); \
    if (cu_r_ != 0) fail_msg("%s: CUDA error %d", #expr, (int)cu_r_); \
  } while (0)

enum { GROUPS = 8, BLOCK = 128, N = GROUPS * BLOCK, OFF = 16 };

/* Each block reverses its items through dynamic shared memory. */
static const char SRC_REV[] = "KC_KERNEL void rev(KC_GLOBAL const float *x, KC_GLOBAL float *y, float a) {\n"
                              "  float *t = (float *)kc_scratch();\n"
                              "  size_t l = kc_local_id(0), g = kc_global_id(0);\n"
                              "  t[l] = x[g];\n"
                              "  kc_barrier();\n"
                              "  y[g] = a * t[kc_local_size(0) - 1 - l];\n"
                              "}\n";
/* A struct argument (sizes from NVRTC: the structargs probe). */
static const char SRC_AFF[] = "typedef struct { float scale; int shift; float bias; } Aff;";
static const char SRC_SAFF[] = "KC_KERNEL void saff(KC_GLOBAL const float *x, KC_GLOBAL float *y, Aff p) {\n"
                               "  size_t g = kc_global_id(0);\n"
                               "  y[g] = p.scale * x[g] + p.bias + (float)p.shift;\n"
                               "}\n";
typedef struct aff_host {
  float scale;
  int shift;
  float bias;
} aff_host;
static const char SRC_INC[] = "KC_KERNEL void inc(KC_GLOBAL float *y) { y[kc_global_id(0)] += 1.0f; }\n";
static const char SRC_NEW[] = "KC_KERNEL void fresh(KC_GLOBAL float *y) { y[kc_global_id(0)] = 5.0f; }\n";

typedef struct natives {
  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  CUdeviceptr x, y;
} natives;

static void natives_open(natives *n) {
  CU_OK(p_cuInit(0));
  CU_OK(p_cuDeviceGet(&n->dev, 0));
  CU_OK(p_cuDevicePrimaryCtxRetain(&n->ctx, n->dev));
  CU_OK(p_cuCtxSetCurrent(n->ctx));
  CU_OK(p_cuStreamCreate(&n->s, 1 /* CU_STREAM_NON_BLOCKING */));
  CU_OK(p_cuMemAlloc_v2(&n->x, N * sizeof(float)));
  CU_OK(p_cuMemAlloc_v2(&n->y, (N + OFF) * sizeof(float)));
}

static void natives_close(natives *n) {
  CU_OK(p_cuMemFree_v2(n->x));
  CU_OK(p_cuMemFree_v2(n->y));
  CU_OK(p_cuStreamDestroy_v2(n->s));
  CU_OK(p_cuDevicePrimaryCtxRelease_v2(n->dev));
}

static kc_launch_config config(kc_stream *s, uint32_t shared) {
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.grid = (kc_dim3){GROUPS, 1, 1};
  c.block = (kc_dim3){BLOCK, 1, 1};
  c.stream = s;
  c.shared_bytes = shared;
  return c;
}

static void expect_reversed(const float *x, const float *y, float a) {
  for (int i = 0; i < N; i++) {
    int g = i / BLOCK, l = i % BLOCK;
    if (y[i] != a * x[g * BLOCK + BLOCK - 1 - l])
      fail_msg("y[%d] = %g, expected %g", i, y[i], a * x[g * BLOCK + BLOCK - 1 - l]);
  }
}

static void test_native_objects(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  static float x[N], y[N + OFF];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  CU_OK(p_cuMemcpyHtoD_v2(n.x, x, sizeof x));
  CU_OK(p_cuMemcpyHtoD_v2(n.y, (float[N + OFF]){0}, sizeof y));

  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx;
  KCT_OK(rt, kc_context_wrap(rt, n.ctx, NULL, &ctx));
  assert_ptr_equal(kc_context_native(ctx), n.ctx);
  kc_stream *s;
  KCT_OK(rt, kc_stream_wrap(ctx, n.s, &s));
  kc_buffer *bx;
  KCT_OK(rt, kc_buffer_wrap(ctx, (void *)(uintptr_t)n.x, sizeof x, &bx));
  assert_ptr_equal(kc_buffer_native(bx), (void *)(uintptr_t)n.x);
  kct_define(rt, "rev", SRC_REV);
  kc_kernel *k = kct_kernel(rt, "rev", NULL);
  float a = 3.0f;
  CUdeviceptr yoff = n.y + OFF * sizeof(float); /* a raw pointer with an offset */
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_DEVPTR(yoff), KC_ARG_VAL(a)};
  kc_launch_config c = config(s, BLOCK * sizeof(float));
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
  CU_OK(p_cuStreamSynchronize(n.s));
  CU_OK(p_cuMemcpyDtoH_v2(y, n.y, sizeof y));
  for (int i = 0; i < OFF; i++) assert_float_equal(y[i], 0, 0);
  expect_reversed(x, y + OFF, a);

  /* above 48 KiB of shared memory: the function's limit is raised */
  int optin = 0;
  CU_OK(p_cuDeviceGetAttribute(&optin, 97 /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */, n.dev));
  if (optin >= 64 << 10) {
    c.shared_bytes = 64 << 10;
    a = 4.0f;
    KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
    CU_OK(p_cuStreamSynchronize(n.s));
    CU_OK(p_cuMemcpyDtoH_v2(y, n.y, sizeof y));
    expect_reversed(x, y + OFF, a);
    printf("64 KiB of dynamic shared memory: launched and checked\n");
  }
  c.shared_bytes = BLOCK * sizeof(float);

  /* a view: the buffer at an offset */
  kc_buffer *by, *vy;
  KCT_OK(rt, kc_buffer_wrap(ctx, (void *)(uintptr_t)n.y, sizeof y, &by));
  KCT_OK(rt, kc_buffer_view(by, OFF * sizeof(float), N * sizeof(float), &vy));
  a = 5.0f;
  kc_arg vargs[] = {KC_ARG_BUF(bx), KC_ARG_BUF(vy), KC_ARG_VAL(a)};
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, vargs, 3));
  KCT_OK(rt, kc_stream_sync(s));
  KCT_OK(rt, kc_buffer_read(vy, 0, y, N * sizeof(float)));
  expect_reversed(x, y, a);

  /* cooperative and cluster launches */
  c.flags = KC_LAUNCH_COOPERATIVE;
  kc_status st = kc_launch_ex(k, ctx, &c, vargs, 3);
  printf("cooperative launch: %s %s\n", kc_status_name(st), st ? kc_errmsg(rt) : "");
  if (!st) {
    KCT_OK(rt, kc_stream_sync(s));
    KCT_OK(rt, kc_buffer_read(vy, 0, y, N * sizeof(float)));
    expect_reversed(x, y, a);
  }
  c.flags = 0;
  int major = 0;
  CU_OK(p_cuDeviceGetAttribute(&major, 75, n.dev));
  c.cluster = (kc_dim3){2, 1, 1};
  st = kc_launch_ex(k, ctx, &c, vargs, 3);
  printf("cluster launch (sm_%d.x): %s %s\n", major, kc_status_name(st), st ? kc_errmsg(rt) : "");
  if (major >= 9) {
    KCT_OK(rt, st);
    KCT_OK(rt, kc_stream_sync(s));
    KCT_OK(rt, kc_buffer_read(vy, 0, y, N * sizeof(float)));
    expect_reversed(x, y, a);
  }
  c.cluster = (kc_dim3){0, 0, 0};

  /* a struct argument, a raw pointer with an offset, on the caller's stream */
  kct_define(rt, "Aff", SRC_AFF);
  kct_define(rt, "saff", SRC_SAFF);
  kc_kernel *kaff = kct_kernel(rt, "saff", NULL);
  aff_host p = {3.0f, 2, 0.25f};
  kc_arg fargs[] = {KC_ARG_BUF(bx), KC_ARG_DEVPTR(yoff), KC_ARG_VAL(p)};
  c.shared_bytes = 0;
  KCT_OK(rt, kc_launch_ex(kaff, ctx, &c, fargs, 3));
  CU_OK(p_cuStreamSynchronize(n.s));
  CU_OK(p_cuMemcpyDtoH_v2(y, n.y, sizeof y));
  for (int i = 0; i < N; i++)
    if (y[OFF + i] != 3.0f * x[i] + 2.25f) fail_msg("saff: y[%d] = %g", i, y[OFF + i]);
  c.shared_bytes = BLOCK * sizeof(float);

  /* world age on the adopted context */
  kc_stats before = kct_stats(rt);
  KCT_OK(rt, kc_context_reset(ctx));
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, vargs, 3));
  KCT_OK(rt, kc_stream_sync(s));
  kc_stats after = kct_stats(rt);
  assert_int_equal(after.compiles, before.compiles);
  assert_int_equal(after.links - before.links, 1);

  kc_stream_destroy(s);
  kc_buffer_destroy(bx);
  kc_buffer_destroy(by);
  kc_context_destroy(ctx);
  kct_destroy(rt);
  /* the natives still work: the context is current, the stream and memory live */
  CU_OK(p_cuCtxSetCurrent(n.ctx));
  CU_OK(p_cuMemcpyHtoD_v2(n.x, y, N * sizeof(float)));
  CU_OK(p_cuStreamSynchronize(n.s));
  float z[N];
  CU_OK(p_cuMemcpyDtoH_v2(z, n.x, sizeof z));
  assert_memory_equal(z, y, sizeof z);
  natives_close(&n);
}

/* Capture: a kernel not yet linked is refused (KC_EBUSY) without breaking
 * the capture; linked ones are recorded; the graph replays. */
static void test_capture(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx;
  KCT_OK(rt, kc_context_wrap(rt, n.ctx, NULL, &ctx));
  kc_stream *s;
  KCT_OK(rt, kc_stream_wrap(ctx, n.s, &s));
  kc_buffer *by;
  KCT_OK(rt, kc_buffer_wrap(ctx, (void *)(uintptr_t)n.y, N * sizeof(float), &by));
  kct_define(rt, "inc", SRC_INC);
  kct_define(rt, "fresh", SRC_NEW);
  kc_kernel *inc = kct_kernel(rt, "inc", NULL), *fresh = kct_kernel(rt, "fresh", NULL);
  kc_arg args[] = {KC_ARG_BUF(by)};
  kc_launch_config c = config(s, 0);
  KCT_OK(rt, kc_launch_ex(inc, ctx, &c, args, 1)); /* warm-up: compiled and linked before the capture */
  KCT_OK(rt, kc_stream_sync(s));
  static float zero[N], y[N];
  CU_OK(p_cuMemcpyHtoD_v2(n.y, zero, sizeof zero));

  kc_stats before = kct_stats(rt);
  CU_OK(p_cuStreamBeginCapture_v2(n.s, 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */));
  KCT_STATUS(rt, KC_EBUSY, kc_launch_ex(fresh, ctx, &c, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "kc_kernel_prepare");
  enum { CAPTURED = 5, REPLAYS = 3 };
  for (int i = 0; i < CAPTURED; i++) KCT_OK(rt, kc_launch_ex(inc, ctx, &c, args, 1));
  CUgraph g = NULL;
  CU_OK(p_cuStreamEndCapture(n.s, &g)); /* the refused launch did not break it */
  kc_stats after = kct_stats(rt);
  assert_int_equal(after.compiles, before.compiles);
  assert_int_equal(after.links, before.links);
  CU_OK(p_cuMemcpyDtoH_v2(y, n.y, sizeof y));
  assert_float_equal(y[0], 0, 0); /* captured, not run */
  CUgraphExec ge = NULL;
  CU_OK(p_cuGraphInstantiateWithFlags(&ge, g, 0));
  for (int r = 0; r < REPLAYS; r++) CU_OK(p_cuGraphLaunch(ge, n.s));
  CU_OK(p_cuStreamSynchronize(n.s));
  CU_OK(p_cuMemcpyDtoH_v2(y, n.y, sizeof y));
  for (int i = 0; i < N; i++) assert_float_equal(y[i], (float)(CAPTURED * REPLAYS), 0);
  printf("captured %d launches, replayed %d times: checked\n", CAPTURED, REPLAYS);
  /* outside the capture the refused kernel compiles as usual */
  KCT_OK(rt, kc_launch_ex(fresh, ctx, &c, args, 1));
  KCT_OK(rt, kc_stream_sync(s));
  CU_OK(p_cuGraphExecDestroy(ge));
  CU_OK(p_cuGraphDestroy(g));
  kct_destroy(rt);
  natives_close(&n);
}

/* Makes no context current on this thread. cuCtxSetCurrent(NULL) pops the
 * top of the thread's context stack, and the stack here holds two (the
 * primary context natives_open made current, then the one cuCtxCreate
 * pushed): one call would leave the primary current, so pop until none. */
static void no_context_current(void) {
  CUcontext cur = NULL;
  for (int i = 0; i < 16; i++) {
    CU_OK(p_cuCtxGetCurrent(&cur));
    if (!cur) return;
    CU_OK(p_cuCtxSetCurrent(NULL));
  }
  fail_msg("the thread's context stack did not empty");
}

/* kcache leaves the calling thread's current context as it found it
 * (kcache.h): with another context current (a framework's, made by
 * cuCtxCreate) and with none, every kcache call here, launches included,
 * returns with that one still current. */
static void test_current_context_kept(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  CUcontext other = NULL, cur = NULL;
  CU_OK(p_cuCtxCreate_v2(&other, 0, n.dev)); /* current now */
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx;
  for (int round = 0; round < 2; round++) {
    CUcontext want = round == 0 ? other : NULL;
    if (want) CU_OK(p_cuCtxSetCurrent(want));
    else no_context_current();
    KCT_OK(rt, kc_context_create(rt, 0, &ctx));
    CU_OK(p_cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, want);
    kct_define(rt, "inc", SRC_INC);
    kc_kernel *k = kct_kernel(rt, "inc", NULL);
    float y[N] = {0};
    kc_buffer *b;
    KCT_OK(rt, kc_buffer_create(ctx, sizeof y, &b));
    KCT_OK(rt, kc_buffer_write(b, 0, y, sizeof y));
    kc_arg args[] = {KC_ARG_BUF(b)};
    kc_dim3 g = {GROUPS, 1, 1}, bl = {BLOCK, 1, 1};
    KCT_OK(rt, kc_launch(k, ctx, &g, &bl, args, 1)); /* links */
    KCT_OK(rt, kc_launch(k, ctx, &g, &bl, args, 1)); /* the fast path */
    kc_stream *s;
    KCT_OK(rt, kc_stream_create(ctx, &s));
    kc_launch_config c = config(s, 0);
    KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 1));
    KCT_OK(rt, kc_context_finish(ctx));
    KCT_OK(rt, kc_buffer_read(b, 0, y, sizeof y));
    for (int i = 0; i < N; i++) assert_true(y[i] == 3.0f);
    CU_OK(p_cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, want);
    kc_stream_destroy(s);
    kc_buffer_destroy(b);
    kc_context_destroy(ctx);
    CU_OK(p_cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, want);
  }
  kct_destroy(rt);
  CU_OK(p_cuCtxSetCurrent(n.ctx));
  CU_OK(p_cuCtxDestroy_v2(other));
  natives_close(&n);
}

/* Sizes the device cannot hold: refused with the limit named (KC_EINVAL
 * for shapes, KC_EARGS for shared memory), by kc_launch and kc_launch_ex;
 * the runtime launches as before after. */
static void test_device_limits(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "add", kct_src_add);
  kc_kernel *k = kct_kernel(rt, "add", NULL);
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, 1024 * sizeof(float), &b));
  float a = 1;
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_VAL(a)};
  kc_dim3 g1 = {1, 1, 1}, b1 = {256, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &g1, &b1, args, 3));
  kc_dim3 wide = {4096, 1, 1}, many = {32, 32, 2}, tall = {1, 1u << 20, 1};
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, ctx, &g1, &wide, args, 3));
  KCT_CONTAINS(kc_errmsg(rt), "(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)");
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, ctx, &g1, &many, args, 3));
  KCT_CONTAINS(kc_errmsg(rt), "a block of 2048 threads (32x32x2)");
  KCT_CONTAINS(kc_errmsg(rt), "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK");
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, ctx, &tall, &g1, args, 3));
  KCT_CONTAINS(kc_errmsg(rt), "(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)");
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.block = b1;
  c.shared_bytes = 64u << 20; /* above any device's */
  KCT_STATUS(rt, KC_EARGS, kc_launch_ex(k, ctx, &c, args, 3));
  KCT_CONTAINS(kc_errmsg(rt), "67108864 bytes of dynamic shared memory (shared_bytes)");
  KCT_CONTAINS(kc_errmsg(rt), "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  c.shared_bytes = 0;
  c.block = many;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, &c, args, 3));
  KCT_CONTAINS(kc_errmsg(rt), "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK");
  c.block = b1;
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
  KCT_OK(rt, kc_context_finish(ctx));
  kc_buffer_destroy(b);
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_only(argc, argv, KC_BACKEND_CUDA, "CUDA");
  if (rc >= 0) return rc;
  const char *why = cu_load();
  if (why) {
    printf("SKIPPED: %s\n", why);
    return 77;
  }
  const struct CMUnitTest tests[] = {KCT_TEST(test_native_objects), KCT_TEST(test_capture),
                                     KCT_TEST(test_current_context_kept), KCT_TEST(test_device_limits)};
  return KCT_RUN(tests);
}
