/* SPDX-License-Identifier: MIT */
/*
 * test_interop_opencl.c -- kcache inside a program that owns its OpenCL
 * objects. The test makes them itself with raw OpenCL calls (a cl_context,
 * two in-order queues, cl_mem buffers), hands them to kcache
 * (kc_context_wrap, kc_stream_wrap, kc_buffer_wrap, kc_buffer_view),
 * launches kernels with struct, pointer-with-offset and local-memory
 * arguments on both queues, reads back with raw clEnqueueReadBuffer, destroys every
 * kcache object and checks that the native ones still work and hold no
 * reference of kcache's. Also: world age on a wrapped context (reset
 * relinks, compiles nothing), ordering between streams, SVM pointers (or
 * the message where there is none), the errors of bad native handles, and
 * two sub-devices (or two contexts) served by one compile.
 */
#define CL_TARGET_OPENCL_VERSION 200
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "kc_test.h"

#include <stdlib.h>
#include <time.h>

#define CLF(X) \
  X(clGetPlatformIDs) \
  X(clGetDeviceIDs) \
  X(clGetDeviceInfo) \
  X(clCreateContext) \
  X(clReleaseContext) \
  X(clCreateCommandQueue) \
  X(clReleaseCommandQueue) \
  X(clCreateBuffer) \
  X(clReleaseMemObject) \
  X(clEnqueueWriteBuffer) \
  X(clEnqueueReadBuffer) \
  X(clGetMemObjectInfo) \
  X(clGetCommandQueueInfo) \
  X(clFinish) \
  X(clCreateSubDevices) \
  X(clReleaseDevice) \
  X(clGetContextInfo) \
  X(clCreateProgramWithSource) \
  X(clBuildProgram) \
  X(clCreateKernel) \
  X(clGetKernelWorkGroupInfo) \
  X(clReleaseKernel) \
  X(clReleaseProgram)
#define CL_FIELD(f) static __typeof__(f) *p_##f;
CLF(CL_FIELD)
#undef CL_FIELD
static void *(*p_clSVMAlloc)(cl_context, cl_svm_mem_flags, size_t, cl_uint);
static void (*p_clSVMFree)(cl_context, void *);

static bool cl_load(void) {
#define CL_SYM(f) \
  if (!KCT_OPENCL_SYM(&p_##f, f)) return false;
  CLF(CL_SYM)
#undef CL_SYM
  /* OpenCL 2.0's: NULL where the platform has none */
  (void)KCT_OPENCL_SYM(&p_clSVMAlloc, clSVMAlloc);
  (void)KCT_OPENCL_SYM(&p_clSVMFree, clSVMFree);
  return true;
}

#define CL_OK(expr) \
  do { \
    cl_int cl_e_ = (expr); \
    if (cl_e_ != CL_SUCCESS) fail_msg("%s: OpenCL error %d", #expr, (int)cl_e_); \
  } while (0)

enum { GROUPS = 4, BLOCK = 8, N = GROUPS * BLOCK };

/* Each group reverses its items through local memory: right only if the
 * local buffer is shared by the group and large enough. */
static const char SRC_REV[] =
    "KC_KERNEL void rev(KC_GLOBAL const float *x, KC_GLOBAL float *y, KC_LOCAL float *tmp,\n"
    "                   float a) {\n"
    "  size_t l = kc_local_id(0), g = kc_global_id(0);\n"
    "  tmp[l] = x[g];\n"
    "  kc_barrier();\n"
    "  y[g] = a * tmp[kc_local_size(0) - 1 - l];\n"
    "}\n";
/* A struct argument (sizes from the compiler: the structargs probe) with a
 * pointer-with-offset and local memory, on the caller's queue. */
static const char SRC_AFF[] = "typedef struct { float scale; int shift; float bias; } Aff;";
static const char SRC_SAFF[] = "KC_KERNEL void saff(KC_GLOBAL const float *x, KC_GLOBAL float *y, Aff p,\n"
                               "                    KC_LOCAL float *tmp) {\n"
                               "  size_t l = kc_local_id(0), g = kc_global_id(0);\n"
                               "  tmp[l] = x[g];\n"
                               "  kc_barrier();\n"
                               "  y[g] = p.scale * tmp[l] + p.bias + (float)p.shift;\n"
                               "}\n";
typedef struct aff_host {
  float scale;
  int shift;
  float bias;
} aff_host;

typedef struct natives {
  cl_platform_id plat;
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q1, q2;
} natives;

static void natives_open(natives *n) {
  cl_uint np = 0;
  CL_OK(p_clGetPlatformIDs(1, &n->plat, &np));
  CL_OK(p_clGetDeviceIDs(n->plat, CL_DEVICE_TYPE_ALL, 1, &n->dev, NULL));
  cl_int e;
  n->ctx = p_clCreateContext(NULL, 1, &n->dev, NULL, NULL, &e);
  CL_OK(e);
  n->q1 = p_clCreateCommandQueue(n->ctx, n->dev, 0, &e);
  CL_OK(e);
  n->q2 = p_clCreateCommandQueue(n->ctx, n->dev, 0, &e);
  CL_OK(e);
}

static void natives_close(natives *n) {
  p_clReleaseCommandQueue(n->q1);
  p_clReleaseCommandQueue(n->q2);
  p_clReleaseContext(n->ctx);
}

static cl_mem raw_buffer(natives *n, size_t bytes, const void *init) {
  cl_int e;
  cl_mem m = p_clCreateBuffer(n->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
  CL_OK(e);
  if (init) CL_OK(p_clEnqueueWriteBuffer(n->q1, m, CL_TRUE, 0, bytes, init, 0, NULL, NULL));
  return m;
}

static cl_uint refcount(cl_mem m) {
  cl_uint r = 0;
  CL_OK(p_clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof r, &r, NULL));
  return r;
}

static cl_uint queue_refcount(cl_command_queue q) {
  cl_uint r = 0;
  CL_OK(p_clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof r, &r, NULL));
  return r;
}

/* PoCL's commands hold references on the queues and buffers they use and
 * drop them on PoCL's own threads, sometimes after clFinish has returned,
 * and a queue keeps one on itself through its last command: a count read
 * once may include a reference about to go, and the counts kcache does not
 * hold are not known in advance. So kcache's share is compared between two
 * settled counts: before, one that has not changed for 500 ms (at most
 * 10 s); after, the count awaited until it is one less (at most 10 s)
 * and then settled again (final_count), the last value read returned for
 * the assertion. */
static cl_uint mem_count(const void *o) { return refcount((cl_mem)o); }
static cl_uint queue_count(const void *o) { return queue_refcount((cl_command_queue)o); }

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&t, NULL);
}

static cl_uint settled_count(cl_uint (*count)(const void *), const void *obj) {
  double until = kct_now() + 10.0, since = kct_now();
  cl_uint got = count(obj);
  while (kct_now() - since < 0.5 && kct_now() < until) {
    sleep_ms(2);
    cl_uint now = count(obj);
    if (now != got) got = now, since = kct_now();
  }
  return got;
}

static cl_uint awaited_count(cl_uint (*count)(const void *), const void *obj, cl_uint want) {
  double until = kct_now() + 10.0;
  cl_uint got = count(obj);
  while (got != want && kct_now() < until) {
    sleep_ms(1);
    got = count(obj);
  }
  return got;
}

/* The count once it has reached want and settled (an over-release that
 * passes through want on the way down is not taken for want). */
static cl_uint final_count(cl_uint (*count)(const void *), const void *obj, cl_uint want) {
  (void)awaited_count(count, obj, want);
  return settled_count(count, obj);
}

static kc_runtime *opencl_runtime(void) {
  kc_options o;
  kc_options_init(&o);
  return kct_runtime(&o);
}

static kc_launch_config config(kc_stream *s) { return kct_config(GROUPS, BLOCK, s); }

/* The whole story of the issue: native objects in, results out through
 * raw reads, natives intact after kcache lets go. */
static void test_native_objects(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  cl_uint align_bits = 0;
  CL_OK(p_clGetDeviceInfo(n.dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL));
  size_t off = align_bits / 8 > sizeof(float) ? align_bits / 8 : 64; /* an offset OpenCL allows */
  float x[N], y1[N], y2[N];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  cl_mem mx = raw_buffer(&n, sizeof x, x);
  cl_mem my = raw_buffer(&n, off + 2 * sizeof x, NULL); /* [off, +N): rev's; after it: add's */

  kc_runtime *rt = opencl_runtime();
  kc_context *ctx;
  KCT_OK(rt, kc_context_wrap(rt, n.ctx, n.dev, &ctx));
  assert_ptr_equal(kc_context_native(ctx), n.ctx);
  kc_stream *s1, *s2;
  KCT_OK(rt, kc_stream_wrap(ctx, n.q1, &s1));
  KCT_OK(rt, kc_stream_wrap(ctx, n.q2, &s2));
  assert_ptr_equal(kc_stream_native(s1), n.q1);
  kc_buffer *bx, *by, *vy1, *vy2;
  KCT_OK(rt, kc_buffer_wrap(ctx, mx, sizeof x, &bx));
  KCT_OK(rt, kc_buffer_wrap(ctx, my, off + 2 * sizeof x, &by));
  assert_ptr_equal(kc_buffer_native(bx), mx);
  KCT_OK(rt, kc_buffer_view(by, off, sizeof x, &vy1));
  KCT_OK(rt, kc_buffer_view(by, off + sizeof x, sizeof x, &vy2));
  assert_int_equal(kc_buffer_size(vy1), sizeof x);

  kct_define(rt, "rev", SRC_REV);
  kct_define(rt, "add", kct_src_add);
  kc_kernel *krev = kct_kernel(rt, "rev", NULL), *kadd = kct_kernel(rt, "add", NULL);
  float a = 2.0f, b = 0.5f;
  kc_arg rargs[] = {KC_ARG_BUF(bx), KC_ARG_BUF(vy1), KC_ARG_LOCAL_BYTES(BLOCK * sizeof(float)),
                    KC_ARG_VAL(a)};
  kc_arg aargs[] = {KC_ARG_BUF(bx), KC_ARG_BUF(vy2), KC_ARG_VAL(b)};
  kc_launch_config c1 = config(s1), c2 = config(s2);
  kc_stats before = kct_stats(rt);
  for (int round = 0; round < 3; round++) { /* the first compiles and links; the others are cached */
    KCT_OK(rt, kc_launch_ex(krev, ctx, &c1, rargs, 4));
    KCT_OK(rt, kc_launch_ex(kadd, ctx, &c2, aargs, 3));
  }
  kc_stats after = kct_stats(rt);
  assert_int_equal(after.compiles - before.compiles, 2);
  assert_int_equal(after.links - before.links, 2);
  assert_true(after.fast_hits - before.fast_hits >= 4);
  CL_OK(p_clFinish(n.q1));
  CL_OK(p_clFinish(n.q2));
  CL_OK(p_clEnqueueReadBuffer(n.q1, my, CL_TRUE, off, sizeof y1, y1, 0, NULL, NULL));
  CL_OK(p_clEnqueueReadBuffer(n.q2, my, CL_TRUE, off + sizeof x, sizeof y2, y2, 0, NULL, NULL));
  for (int i = 0; i < N; i++) {
    int g = i / BLOCK, l = i % BLOCK;
    assert_float_equal(y1[i], 2.0f * x[g * BLOCK + BLOCK - 1 - l], 0);
    assert_float_equal(y2[i], x[i] + 0.5f, 0);
  }
  /* a struct argument through a view, with local memory, on q2 */
  kct_define(rt, "Aff", SRC_AFF);
  kct_define(rt, "saff", SRC_SAFF);
  kc_kernel *kaff = kct_kernel(rt, "saff", NULL);
  aff_host p = {3.0f, 2, 0.25f};
  kc_arg fargs[] = {KC_ARG_BUF(bx), KC_ARG_BUF(vy2), KC_ARG_VAL(p),
                    KC_ARG_LOCAL_BYTES(BLOCK * sizeof(float))};
  KCT_OK(rt, kc_launch_ex(kaff, ctx, &c2, fargs, 4));
  CL_OK(p_clEnqueueReadBuffer(n.q2, my, CL_TRUE, off + sizeof x, sizeof y2, y2, 0, NULL, NULL));
  for (int i = 0; i < N; i++) assert_float_equal(y2[i], 3.0f * x[i] + 0.25f + 2.0f, 0);
  KCT_OK(rt, kc_launch_ex(kadd, ctx, &c2, aargs, 3)); /* back to add's results */
  CL_OK(p_clEnqueueReadBuffer(n.q2, my, CL_TRUE, off + sizeof x, sizeof y2, y2, 0, NULL, NULL));
  /* a view reads and writes at its offset */
  float back[N];
  KCT_OK(rt, kc_buffer_read(vy2, 0, back, sizeof back));
  assert_memory_equal(back, y2, sizeof back);

  /* world age on the adopted context: a reset relinks without compiling */
  uint64_t id = kc_context_id(ctx);
  KCT_OK(rt, kc_context_reset(ctx));
  before = kct_stats(rt);
  KCT_OK(rt, kc_launch_ex(kadd, ctx, &c2, aargs, 3));
  KCT_OK(rt, kc_stream_sync(s2));
  after = kct_stats(rt);
  assert_int_equal(after.compiles, before.compiles);
  assert_int_equal(after.links - before.links, 1);
  assert_int_equal(kc_context_id(ctx), id);

  /* kcache holds one reference on each native it was given, and drops it
   * (counted once PoCL's commands have let go: above) */
  CL_OK(p_clFinish(n.q1));
  CL_OK(p_clFinish(n.q2));
  cl_uint rx = settled_count(mem_count, mx), ry = settled_count(mem_count, my),
          rq1 = settled_count(queue_count, n.q1), rq2 = settled_count(queue_count, n.q2);
  kc_stream_destroy(s1);
  kc_stream_destroy(s2);
  kc_buffer_destroy(by); /* and its views */
  assert_int_equal(kc_buffer_size(vy1), 0);
  kc_context_destroy(ctx);
  kct_destroy(rt);
  assert_int_equal(final_count(mem_count, mx, rx - 1), rx - 1);
  assert_int_equal(final_count(mem_count, my, ry - 1 - 2), ry - 1 - 2); /* and the two sub-buffers' */
  assert_int_equal(final_count(queue_count, n.q1, rq1 - 1), rq1 - 1);
  assert_int_equal(final_count(queue_count, n.q2, rq2 - 1), rq2 - 1);

  /* the natives still work */
  float z[N] = {0};
  CL_OK(p_clEnqueueWriteBuffer(n.q2, mx, CL_TRUE, 0, sizeof y1, y1, 0, NULL, NULL));
  CL_OK(p_clEnqueueReadBuffer(n.q1, mx, CL_TRUE, 0, sizeof z, z, 0, NULL, NULL));
  assert_memory_equal(z, y1, sizeof z);
  p_clReleaseMemObject(mx);
  p_clReleaseMemObject(my);
  natives_close(&n);
}

/* Work on s2 after kc_stream_wait(s2, s1) sees what s1 did; a stream kcache
 * made works like the caller's. */
static void test_stream_order(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  kc_runtime *rt = opencl_runtime();
  kc_context *ctx;
  KCT_OK(rt, kc_context_wrap(rt, n.ctx, NULL, &ctx)); /* one device: it need not be named */
  kc_stream *mine, *theirs;
  KCT_OK(rt, kc_stream_create(ctx, &mine));
  KCT_OK(rt, kc_stream_wrap(ctx, n.q2, &theirs));
  float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)(3 * i);
  cl_mem mx = raw_buffer(&n, sizeof x, x), m1 = raw_buffer(&n, sizeof x, NULL),
         m2 = raw_buffer(&n, sizeof x, NULL);
  kc_buffer *bx, *b1, *b2;
  KCT_OK(rt, kc_buffer_wrap(ctx, mx, sizeof x, &bx));
  KCT_OK(rt, kc_buffer_wrap(ctx, m1, sizeof x, &b1));
  KCT_OK(rt, kc_buffer_wrap(ctx, m2, sizeof x, &b2));
  kct_define(rt, "add", kct_src_add);
  kc_kernel *k = kct_kernel(rt, "add", NULL);
  float one = 1.0f, ten = 10.0f;
  kc_arg first[] = {KC_ARG_BUF(bx), KC_ARG_BUF(b1), KC_ARG_VAL(one)};
  kc_arg second[] = {KC_ARG_BUF(b1), KC_ARG_BUF(b2), KC_ARG_VAL(ten)};
  kc_launch_config cm = config(mine), ct = config(theirs);
  for (int round = 0; round < 20; round++) {
    KCT_OK(rt, kc_launch_ex(k, ctx, &cm, first, 3));
    KCT_OK(rt, kc_stream_wait(theirs, mine));
    KCT_OK(rt, kc_launch_ex(k, ctx, &ct, second, 3));
    float y[N];
    CL_OK(p_clEnqueueReadBuffer(n.q2, m2, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL));
    for (int i = 0; i < N; i++) assert_float_equal(y[i], x[i] + 11.0f, 0);
    KCT_OK(rt, kc_stream_sync(mine));
    CL_OK(p_clEnqueueWriteBuffer(n.q2, m2, CL_TRUE, 0, sizeof x, x, 0, NULL,
                                 NULL)); /* reset for the next round */
  }
  /* bound arguments on the caller's queue */
  kc_args *bound;
  KCT_OK(rt, kc_args_create(k, ctx, second, 3, &bound));
  KCT_OK(rt, kc_launch_args_ex(bound, &ct));
  float yb[N];
  CL_OK(p_clEnqueueReadBuffer(n.q2, m2, CL_TRUE, 0, sizeof yb, yb, 0, NULL, NULL));
  for (int i = 0; i < N; i++) assert_float_equal(yb[i], x[i] + 11.0f, 0); /* m1 still holds x + 1 */
  kc_args_destroy(bound);
  /* streams left at context destroy are released with it, then say so */
  KCT_OK(rt, kc_stream_sync(theirs));
  cl_uint rq2 = settled_count(queue_count, n.q2);
  kc_context_destroy(ctx);
  KCT_STATUS(rt, KC_EDESTROYED, kc_stream_sync(theirs));
  assert_null(kc_stream_native(theirs));
  assert_int_equal(final_count(queue_count, n.q2, rq2 - 1), rq2 - 1);
  kc_stream_destroy(mine);
  kc_stream_destroy(theirs);
  kct_destroy(rt);
  p_clReleaseMemObject(mx);
  p_clReleaseMemObject(m1);
  p_clReleaseMemObject(m2);
  natives_close(&n);
}

/* Bad native handles and arguments: clear errors, nothing lost. */
static void test_errors(void **state) {
  (void)state;
  natives n, other;
  natives_open(&n);
  natives_open(&other);
  kc_runtime *rt = opencl_runtime();
  kc_context *ctx;
  KCT_STATUS(rt, KC_EINVAL, kc_context_wrap(rt, NULL, NULL, &ctx));
  KCT_CONTAINS(kc_errmsg(rt), "cl_context is NULL");
  KCT_OK(rt, kc_context_wrap(rt, n.ctx, n.dev, &ctx));
  kc_stream *s;
  KCT_STATUS(rt, KC_EINVAL, kc_stream_wrap(ctx, other.q1, &s));
  KCT_CONTAINS(kc_errmsg(rt), "another cl_context");
  /* a kc_stream is in order: an out-of-order queue is refused */
  cl_int e = CL_SUCCESS;
  cl_command_queue ooo = p_clCreateCommandQueue(n.ctx, n.dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &e);
  if (ooo) { /* a device may not offer out-of-order queues at all */
    KCT_STATUS(rt, KC_EINVAL, kc_stream_wrap(ctx, ooo, &s));
    KCT_CONTAINS(kc_errmsg(rt), "out of order");
    p_clReleaseCommandQueue(ooo);
  }
  cl_mem foreign = raw_buffer(&other, 64, NULL), small = raw_buffer(&n, 64, NULL);
  kc_buffer *b;
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_wrap(ctx, foreign, 64, &b));
  KCT_CONTAINS(kc_errmsg(rt), "another cl_context");
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_wrap(ctx, small, 65, &b));
  KCT_CONTAINS(kc_errmsg(rt), "fewer than the 65 asked for");
  KCT_OK(rt, kc_buffer_wrap(ctx, small, 64, &b));
  kc_buffer *v;
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_view(b, 4, 8, &v));
  KCT_CONTAINS(kc_errmsg(rt), "CL_DEVICE_MEM_BASE_ADDR_ALIGN");
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_view(b, 0, 65, &v));

  kct_define(rt, "rev", SRC_REV);
  kc_kernel *k = kct_kernel(rt, "rev", NULL);
  float a = 1;
  kc_dim3 g = {1, 1, 1}, bl = {4, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES(16), KC_ARG_VAL(a)};
  /* kc_launch takes no local memory sizes; kc_launch_ex does */
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &g, &bl, args, 4));
  KCT_CONTAINS(kc_errmsg(rt), "only kc_launch_ex takes");
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.block = bl;
  kc_arg nolocal[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_VAL(a)};
  KCT_STATUS(rt, KC_EARGS, kc_launch_ex(k, ctx, &c, nolocal, 4));
  KCT_CONTAINS(kc_errmsg(rt), "KC_ARG_LOCAL_BYTES(n)");
  c.shared_bytes = 16;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, &c, args, 4));
  KCT_CONTAINS(kc_errmsg(rt), "sizes local memory per parameter");
  c.shared_bytes = 0;
  c.flags = KC_LAUNCH_COOPERATIVE;
  KCT_STATUS(rt, KC_EUNAVAILABLE, kc_launch_ex(k, ctx, &c, args, 4));
  c.flags = 0;
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 4));
  /* local memory bound once: kc_launch_args_ex passes it (a group of 4
   * reversed in place), kc_launch_args refuses it and says to use that */
  float lv[4] = {1, 2, 3, 4}, lr[4];
  KCT_OK(rt, kc_buffer_write(b, 0, lv, sizeof lv));
  kc_args *ba;
  /* a bad argument after a local memory size: the message names it, not
   * the local memory (which bound arguments take) */
  double wide = 1;
  kc_arg bad[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES(16), KC_ARG_VAL(wide)};
  KCT_STATUS(rt, KC_EARGS, kc_args_create(k, ctx, bad, 4, &ba));
  KCT_CONTAINS(kc_errmsg(rt), "argument 3 (float a) is a 4-byte value (alignment 4); 8 bytes were given");
  KCT_OK(rt, kc_args_create(k, ctx, args, 4, &ba));
  KCT_OK(rt, kc_launch_args_ex(ba, &c));
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(b, 0, lr, sizeof lr));
  for (int i = 0; i < 4; i++) assert_float_equal(lr[i], lv[3 - i], 0);
  KCT_STATUS(rt, KC_EARGS, kc_launch_args(ba, &g, &bl));
  KCT_CONTAINS(kc_errmsg(rt), "launch them with kc_launch_args_ex");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(ba, 2, KC_ARG_LOCAL_BYTES(0)));
  KCT_CONTAINS(kc_errmsg(rt), "0 bytes");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(ba, 2, KC_ARG_BUF(b)));
  KCT_CONTAINS(kc_errmsg(rt), "KC_LOCAL pointer");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(ba, 0, KC_ARG_LOCAL_BYTES(16)));
  KCT_CONTAINS(kc_errmsg(rt), "clGetKernelArgInfo"); /* why kcache says it is not KC_LOCAL */
  KCT_OK(rt, kc_args_set(ba, 2, KC_ARG_LOCAL_BYTES(32)));
  KCT_OK(rt, kc_launch_args_ex(ba, &c)); /* the cached path */
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(b, 0, lr, sizeof lr));
  for (int i = 0; i < 4; i++) assert_float_equal(lr[i], lv[i], 0); /* reversed back */
  /* a bound buffer destroyed (the cached code forgotten), another bound in
   * its place: kc_launch_args still refuses the local memory size */
  kc_buffer *b3;
  KCT_OK(rt, kc_buffer_create(ctx, 64, &b3));
  KCT_OK(rt, kc_args_set(ba, 0, KC_ARG_BUF(b3)));
  kc_buffer_destroy(b3);
  KCT_OK(rt, kc_args_set(ba, 0, KC_ARG_BUF(b)));
  KCT_STATUS(rt, KC_EARGS, kc_launch_args(ba, &g, &bl));
  KCT_CONTAINS(kc_errmsg(rt), "launch them with kc_launch_args_ex");
  KCT_OK(rt, kc_launch_args_ex(ba, &c));
  kc_args_destroy(ba);
  /* a stream of another context */
  kc_context *ctx2;
  KCT_OK(rt, kc_context_wrap(rt, other.ctx, other.dev, &ctx2));
  KCT_OK(rt, kc_stream_wrap(ctx2, other.q1, &s));
  c.stream = s;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, &c, args, 4));
  KCT_CONTAINS(kc_errmsg(rt), "stream belongs to another context");
  kc_stream_destroy(s);
  kct_destroy(rt);
  assert_int_equal(final_count(mem_count, small, 1), 1); /* once PoCL's commands have let go */
  p_clReleaseMemObject(foreign);
  p_clReleaseMemObject(small);
  natives_close(&n);
  natives_close(&other);
}

/* A raw SVM pointer where the device has SVM; the reason where not. */
static void test_svm_pointer(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  kc_runtime *rt = opencl_runtime();
  kc_context *ctx;
  KCT_OK(rt, kc_context_wrap(rt, n.ctx, n.dev, &ctx));
  kct_define(rt, "add", kct_src_add);
  kc_kernel *k = kct_kernel(rt, "add", NULL);
  cl_bitfield caps = 0;
  bool svm = p_clSVMAlloc &&
             p_clGetDeviceInfo(n.dev, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL) == CL_SUCCESS &&
             (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER);
  float *px = svm ? p_clSVMAlloc(n.ctx, CL_MEM_READ_WRITE, N * sizeof(float), 0) : NULL;
  float *py = svm ? p_clSVMAlloc(n.ctx, CL_MEM_READ_WRITE, N * sizeof(float), 0) : NULL;
  float b = 4.0f, x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i * i);
  cl_mem my = raw_buffer(&n, sizeof y, NULL);
  kc_buffer *by;
  KCT_OK(rt, kc_buffer_wrap(ctx, my, sizeof y, &by));
  kc_launch_config c = config(NULL);
  if (px && py) {
    /* coarse grain: the host writes through a mapped copy; a write-buffer
     * from a host array into the SVM range is the simplest legal way */
    cl_int e;
    cl_mem via = p_clCreateBuffer(n.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof x, px, &e);
    CL_OK(e);
    CL_OK(p_clEnqueueWriteBuffer(n.q1, via, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL));
    CL_OK(p_clFinish(n.q1));
    kc_arg args[] = {KC_ARG_DEVPTR(px), KC_ARG_BUF(by), KC_ARG_VAL(b)};
    KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
    KCT_OK(rt, kc_context_finish(ctx));
    CL_OK(p_clEnqueueReadBuffer(n.q1, my, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL));
    for (int i = 0; i < N; i++) assert_float_equal(y[i], x[i] + 4.0f, 0);
    p_clReleaseMemObject(via);
    printf("SVM pointer argument: launched and checked\n");
  } else {
    kc_arg args[] = {KC_ARG_DEVPTR(x), KC_ARG_BUF(by), KC_ARG_VAL(b)};
    KCT_STATUS(rt, KC_EARGS, kc_launch_ex(k, ctx, &c, args, 3));
    KCT_CONTAINS(kc_errmsg(rt), "shared virtual memory");
    printf("no SVM here: the launch says %s\n", kc_errmsg(rt));
  }
  kc_arg wrong[] = {KC_ARG_BUF(by), KC_ARG_BUF(by), KC_ARG_DEVPTR(x)};
  KCT_STATUS(rt, KC_EARGS, kc_launch_ex(k, ctx, &c, wrong, 3));
  KCT_CONTAINS(kc_errmsg(rt), "is a scalar; a raw pointer");
  kct_destroy(rt);
  if (px) p_clSVMFree(n.ctx, px);
  if (py) p_clSVMFree(n.ctx, py);
  p_clReleaseMemObject(my);
  natives_close(&n);
}

/* Two sub-devices of the CPU device (or, where it cannot be split, two
 * contexts on it): one compile, one link per context, both right. */
static void test_two_devices(void **state) {
  (void)state;
  natives n;
  natives_open(&n);
  cl_device_id sub[4];
  cl_uint nsub = 0, cus = 0;
  CL_OK(p_clGetDeviceInfo(n.dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL));
  cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY,
                                          (cl_device_partition_property)(cus / 2), 0};
  bool split = cus >= 2 && p_clCreateSubDevices(n.dev, props, 4, sub, &nsub) == CL_SUCCESS && nsub >= 2;
  cl_device_id devs[2] = {split ? sub[0] : n.dev, split ? sub[1] : n.dev};
  printf("two %s\n",
         split ? "sub-devices of the CPU device" : "contexts on one device (it cannot be split here)");
  kc_runtime *rt = opencl_runtime();
  kct_define(rt, "add", kct_src_add);
  kc_kernel *k = kct_kernel(rt, "add", NULL);
  kc_stats before = kct_stats(rt);
  for (int d = 0; d < 2; d++) {
    cl_int e;
    cl_context cctx = p_clCreateContext(NULL, 1, &devs[d], NULL, NULL, &e);
    CL_OK(e);
    cl_command_queue q = p_clCreateCommandQueue(cctx, devs[d], 0, &e);
    CL_OK(e);
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i + d);
    cl_mem mx = p_clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &e);
    CL_OK(e);
    kc_context *ctx;
    KCT_OK(rt, kc_context_wrap(rt, cctx, devs[d], &ctx));
    kc_stream *s;
    KCT_OK(rt, kc_stream_wrap(ctx, q, &s));
    kc_buffer *bx;
    KCT_OK(rt, kc_buffer_wrap(ctx, mx, sizeof x, &bx));
    kc_buffer *by;
    KCT_OK(rt, kc_buffer_create(ctx, sizeof y, &by));
    float b = (float)(d + 1);
    kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(by), KC_ARG_VAL(b)};
    kc_launch_config c = config(s);
    KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
    CL_OK(p_clEnqueueReadBuffer(q, (cl_mem)kc_buffer_native(by), CL_TRUE, 0, sizeof y, y, 0, NULL, NULL));
    for (int i = 0; i < N; i++) assert_float_equal(y[i], x[i] + b, 0);
    kc_stream_destroy(s);
    kc_context_destroy(ctx);
    p_clReleaseMemObject(mx);
    p_clReleaseCommandQueue(q);
    p_clReleaseContext(cctx);
  }
  kc_stats after = kct_stats(rt);
  assert_int_equal(after.compiles - before.compiles, 1);
  assert_int_equal(after.links - before.links, 2);
  kct_destroy(rt);
  for (cl_uint i = 0; split && i < nsub; i++) p_clReleaseDevice(sub[i]);
  natives_close(&n);
}

/* kc_context_finish waits for the context's kc_streams too (each is a
 * queue of its own on OpenCL): a slow kernel on a kcache stream has written
 * its result once finish returns, and kc_stream_get_native tells a
 * destroyed stream from a live one. */
static const char SRC_SLOW[] = "KC_KERNEL void slow(KC_GLOBAL int *y, int n) {\n"
                               "  int acc = 0;\n"
                               "  for (int j = 0; j < n; j++) acc = acc * 1103515245 + 12345 + j;\n"
                               "  y[kc_global_id(0)] = acc == 7 ? 1 : 42;\n"
                               "}\n";

static void test_finish_waits_for_streams(void **state) {
  (void)state;
  kc_runtime *rt = opencl_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "slow", SRC_SLOW);
  kc_kernel *k = kct_kernel(rt, "slow", NULL);
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, 64 * sizeof(int), &b));
  int y[64] = {0};
  kc_stream *s;
  KCT_OK(rt, kc_stream_create(ctx, &s));
  kc_launch_config cfg;
  kc_launch_config_init(&cfg);
  cfg.block = (kc_dim3){64, 1, 1};
  cfg.stream = s;
  int n = 0;
  kc_arg warm[] = {KC_ARG_BUF(b), KC_ARG_VAL(n)};
  KCT_OK(rt, kc_launch_ex(k, ctx, &cfg, warm, 2)); /* compiled and linked: the next one only runs */
  KCT_OK(rt, kc_stream_sync(s));
  KCT_OK(rt, kc_buffer_write(b, 0, y, sizeof y));
  n = 30000000; /* a few hundred ms of PoCL */
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(n)};
  KCT_OK(rt, kc_launch_ex(k, ctx, &cfg, args, 2));
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(b, 0, y, sizeof y));
  for (int i = 0; i < 64; i++) assert_int_equal(y[i], 42);
  void *native = NULL;
  KCT_OK(rt, kc_stream_get_native(s, &native));
  assert_non_null(native);
  assert_ptr_equal(native, kc_stream_native(s));
  kc_stream_destroy(s);
  KCT_STATUS(rt, KC_EDESTROYED, kc_stream_get_native(s, &native));
  assert_null(native);
  assert_null(kc_stream_native(s));
  kc_buffer_destroy(b);
  kct_destroy(rt);
}

/* A kernel with local memory of its own (CL_KERNEL_LOCAL_MEM_SIZE) and a
 * KC_LOCAL parameter. */
static const char SRC_OWN[] = "KC_KERNEL void own(KC_GLOBAL float *y, KC_LOCAL float *tmp) {\n"
                              "  KC_LOCAL float mine[1024];\n"
                              "  size_t l = kc_local_id(0);\n"
                              "  mine[l] = (float)l;\n"
                              "  tmp[l] = 1.0f;\n"
                              "  kc_barrier();\n"
                              "  y[kc_global_id(0)] = mine[kc_local_size(0) - 1 - l] + tmp[l];\n"
                              "}\n";

/* SRC_OWN in plain OpenCL C, built straight through the platform. */
static const char SRC_OWN_CL[] = "__kernel void own(__global float *y, __local float *tmp) {\n"
                                 "  __local float mine[1024];\n"
                                 "  size_t l = get_local_id(0);\n"
                                 "  mine[l] = (float)l;\n"
                                 "  tmp[l] = 1.0f;\n"
                                 "  barrier(CLK_LOCAL_MEM_FENCE);\n"
                                 "  y[get_global_id(0)] = mine[get_local_size(0) - 1 - l] + tmp[l];\n"
                                 "}\n";

/* What the platform itself says of SRC_OWN's own local memory on ctx's
 * device (CL_KERNEL_LOCAL_MEM_SIZE of a kernel built without kcache):
 * some platforms say 0 for a kernel whose __local arrays they place
 * elsewhere, and then kcache cannot subtract them either. */
static cl_ulong platform_own_local(kc_context *ctx) {
  cl_context cctx = kc_context_native(ctx);
  cl_device_id dev;
  CL_OK(p_clGetContextInfo(cctx, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL));
  const char *src = SRC_OWN_CL;
  cl_int e;
  cl_program prog = p_clCreateProgramWithSource(cctx, 1, &src, NULL, &e);
  CL_OK(e);
  CL_OK(p_clBuildProgram(prog, 1, &dev, "", NULL, NULL));
  cl_kernel k = p_clCreateKernel(prog, "own", &e);
  CL_OK(e);
  cl_ulong own = 0;
  CL_OK(p_clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof own, &own, NULL));
  p_clReleaseKernel(k);
  p_clReleaseProgram(prog);
  return own;
}

/* The number after `what` in the last message (0: none). */
static unsigned long long number_after(kc_runtime *rt, const char *what) {
  const char *m = strstr(kc_errmsg(rt), what);
  return m ? strtoull(m + strlen(what), NULL, 10) : 0;
}

/* Sizes the device cannot hold are refused before they reach the platform
 * (PoCL aborts the process on local memory above its size), with the limit
 * named; sizes at the limit run; the runtime is unharmed after. */
static void test_device_limits(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "rev", SRC_REV);
  kct_define(rt, "add", kct_src_add);
  kct_define(rt, "own", SRC_OWN);
  kc_kernel *krev = kct_kernel(rt, "rev", NULL), *kadd = kct_kernel(rt, "add", NULL),
            *kown = kct_kernel(rt, "own", NULL);
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, 4096 * sizeof(float), &b));
  float a = 1;
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.block = (kc_dim3){4, 1, 1};

  /* local memory: far above, one byte above, exactly at the limit */
  kc_arg big[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES(UINT32_MAX), KC_ARG_VAL(a)};
  KCT_STATUS(rt, KC_EARGS, kc_launch_ex(krev, ctx, &c, big, 4));
  KCT_CONTAINS(kc_errmsg(rt),
               "kernel 'rev': 4294967295 bytes of local memory (KC_ARG_LOCAL_BYTES, from argument 2");
  unsigned long long dev = number_after(rt, "CL_DEVICE_LOCAL_MEM_SIZE is ");
  unsigned long long room = number_after(rt, "are above the ");
  assert_true(dev > 0 && dev < UINT32_MAX);
  assert_int_equal(room, dev); /* rev has no local memory of its own */
  kc_arg over[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES((uint32_t)dev + 1), KC_ARG_VAL(a)};
  KCT_STATUS(rt, KC_EARGS, kc_launch_ex(krev, ctx, &c, over, 4));
  kc_arg at[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES((uint32_t)dev), KC_ARG_VAL(a)};
  KCT_OK(rt, kc_launch_ex(krev, ctx, &c, at, 4));
  KCT_OK(rt, kc_context_finish(ctx));
  /* bound arguments: refused at the launch (kc_args_set may come first) */
  kc_args *ba;
  KCT_OK(rt, kc_args_create(krev, ctx, at, 4, &ba));
  KCT_OK(rt, kc_launch_args_ex(ba, &c));
  KCT_OK(rt, kc_args_set(ba, 2, KC_ARG_LOCAL_BYTES((uint32_t)dev + 1)));
  KCT_STATUS(rt, KC_EARGS, kc_launch_args_ex(ba, &c));
  KCT_CONTAINS(kc_errmsg(rt), "CL_DEVICE_LOCAL_MEM_SIZE");
  kc_args_destroy(ba);
  /* a kernel's own __local variables leave less for its parameters, where
   * the platform says how much they take (PoCL 3.1 does; a platform that
   * says 0 leaves kcache nothing to subtract, and the case is not checked) */
  cl_ulong said = platform_own_local(ctx);
  if (said) {
    kc_arg ownbig[] = {KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES((uint32_t)dev)};
    KCT_STATUS(rt, KC_EARGS, kc_launch_ex(kown, ctx, &c, ownbig, 2));
    KCT_CONTAINS(kc_errmsg(rt), "(CL_KERNEL_LOCAL_MEM_SIZE)");
    unsigned long long own = number_after(rt, "less ");
    assert_int_equal(own, said);
    assert_true(own >= 1024 * sizeof(float) && own < dev);
    assert_int_equal(number_after(rt, "are above the "), dev - own);
    kc_arg ownat[] = {KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES((uint32_t)(dev - own))};
    KCT_OK(rt, kc_launch_ex(kown, ctx, &c, ownat, 2));
  } else {
    printf("this platform says CL_KERNEL_LOCAL_MEM_SIZE 0 for a kernel with a __local float[1024]: "
           "its own local memory is not checked here\n");
    kc_arg ownsmall[] = {KC_ARG_BUF(b), KC_ARG_LOCAL_BYTES(4 * sizeof(float))};
    KCT_OK(rt, kc_launch_ex(kown, ctx, &c, ownsmall, 2));
  }
  float y[4];
  KCT_OK(rt, kc_buffer_read(b, 0, y, sizeof y));
  for (int i = 0; i < 4; i++) assert_float_equal(y[i], (float)(3 - i) + 1.0f, 0);

  /* groups: above the kernel's maximum, one dimension above the device's,
   * and a shape whose product does not fit 32 bits; kc_launch and
   * kc_launch_ex alike */
  kc_arg aargs[] = {KC_ARG_BUF(b), KC_ARG_BUF(b), KC_ARG_VAL(a)};
  kc_dim3 g1 = {1, 1, 1}, huge = {1u << 20, 1, 1}, deep = {1, 1, 1u << 20}, wide = {65536, 65536, 1};
  KCT_STATUS(rt, KC_EINVAL, kc_launch(kadd, ctx, &g1, &huge, aargs, 3));
  KCT_CONTAINS(kc_errmsg(rt),
               "kernel 'add': a group of 1048576x1x1 work-items is more than the device takes");
  KCT_CONTAINS(kc_errmsg(rt), "(CL_KERNEL_WORK_GROUP_SIZE)");
  unsigned long long most = number_after(rt, "at most ");
  assert_true(most >= 1 && most < (1u << 20));
  KCT_STATUS(rt, KC_EINVAL, kc_launch(kadd, ctx, &g1, &deep, aargs, 3));
  KCT_CONTAINS(kc_errmsg(rt), "(CL_DEVICE_MAX_WORK_ITEM_SIZES)");
  KCT_STATUS(rt, KC_EINVAL, kc_launch(kadd, ctx, &g1, &wide, aargs, 3));
  c.block = huge;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(kadd, ctx, &c, aargs, 3));
  KCT_CONTAINS(kc_errmsg(rt), "CL_KERNEL_WORK_GROUP_SIZE");
  c.block = wide;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(kadd, ctx, &c, aargs, 3));
  /* the largest group the kernel takes runs */
  kc_dim3 best = {(uint32_t)(most < 4096 ? most : 4096), 1, 1};
  KCT_OK(rt, kc_launch(kadd, ctx, &g1, &best, aargs, 3));
  KCT_OK(rt, kc_context_finish(ctx));
  kc_buffer_destroy(b);
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_only(argc, argv, KC_BACKEND_OPENCL, "OpenCL");
  if (rc >= 0) return rc;
  if (!cl_load()) {
    printf("SKIPPED: libOpenCL.so.1 or one of its OpenCL 1.2 calls is missing\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_native_objects), KCT_TEST(test_stream_order), KCT_TEST(test_errors),
      KCT_TEST(test_svm_pointer),    KCT_TEST(test_two_devices),  KCT_TEST(test_finish_waits_for_streams),
      KCT_TEST(test_device_limits),
  };
  return KCT_RUN(tests);
}
