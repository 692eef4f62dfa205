/* SPDX-License-Identifier: MIT */
/*
 * test_groups.c -- work groups as the dialect defines them, on every
 * backend: KC_LOCAL arrays shared by a group's items, kc_barrier() between
 * them (a tree reduction, a tiled matrix product), ids read from helper
 * functions, and grids large enough that the host backend runs their
 * groups on its pool of threads (with a copy of a kernel's KC_LOCAL arrays
 * for each thread, and a scratch area each). Every result is checked
 * against the same computation in C. On the host backend also: launches of
 * one KC_LOCAL kernel from several threads at once, a barrier that only
 * some items of a group reach (refused, not a hang), and a group too large
 * for fibers.
 */
#include "kc_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* ThreadSanitizer: the parent has threads (the host backend's pool), and a
 * fiber is a thread to TSan, so it would end the child at its first fiber
 * by default (as test_fork_backend). */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

enum { WG = 128 };

/* Each group sums its WG inputs in local memory, halving with a barrier
 * between steps; item 0 writes the group's sum. */
static const char SRC_REDUCE[] = "KC_KERNEL void reduce(KC_GLOBAL const float *x, KC_GLOBAL float *out) {\n"
                                 "  KC_LOCAL float part[128];\n"
                                 "  size_t l = kc_local_id(0);\n"
                                 "  part[l] = x[kc_global_id(0)];\n"
                                 "  kc_barrier();\n"
                                 "  for (size_t s = kc_local_size(0) / 2; s > 0; s /= 2) {\n"
                                 "    if (l < s) part[l] += part[l + s];\n"
                                 "    kc_barrier();\n"
                                 "  }\n"
                                 "  if (l == 0) out[kc_group_id(0)] = part[0];\n"
                                 "}\n";

/* C = A * B for n x n matrices, in 16 x 16 tiles through local memory. */
static const char SRC_MATMUL[] = "#define TS 16\n"
                                 "KC_KERNEL void matmul(KC_GLOBAL const float *a, KC_GLOBAL const float *b,\n"
                                 "                      KC_GLOBAL float *c, int n) {\n"
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
                                 "  c[row * n + col] = acc;\n"
                                 "}\n";

/* The ids from a helper, which reaches the work item the kernel runs. */
static const char SRC_GID[] = "KC_DEVICE size_t my_gid(void) { return kc_global_id(0); }";
static const char SRC_IDS[] =
    "KC_KERNEL void ids(KC_GLOBAL float *y) {\n"
    "  size_t i = my_gid();\n"
    "  y[i] = (float)(i % 1000) + (float)kc_group_id(0) * 0.0f + (float)kc_local_size(0);\n"
    "}\n";

/* A 2-D five-point stencil, no local memory. */
static const char SRC_STENCIL[] =
    "KC_KERNEL void stencil(KC_GLOBAL const float *in, KC_GLOBAL float *out, int w, int h) {\n"
    "  int x = (int)kc_global_id(0), y = (int)kc_global_id(1);\n"
    "  if (x == 0 || y == 0 || x >= w - 1 || y >= h - 1) { out[y * w + x] = in[y * w + x]; return; }\n"
    "  out[y * w + x] = 0.5f * in[y * w + x] + 0.125f * (in[y * w + x - 1] + in[y * w + x + 1]\n"
    "                   + in[(y - 1) * w + x] + in[(y + 1) * w + x]);\n"
    "}\n";

static kc_buffer *buffer_of(kc_runtime *rt, kc_context *ctx, const float *v, size_t n) {
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, n * sizeof(float), &b));
  if (v) KCT_OK(rt, kc_buffer_write(b, 0, v, n * sizeof(float)));
  return b;
}

static float *read_all(kc_runtime *rt, kc_buffer *b, size_t n) {
  float *v = kct_calloc(n * sizeof(float));
  KCT_OK(rt, kc_buffer_read(b, 0, v, n * sizeof(float)));
  return v;
}

/* Sums of WG inputs per group, over many groups (the host's pool takes
 * them, each thread with its own copy of `part`). Failures go to r (from
 * a thread other than cmocka's) or fail the test (r NULL). */
static void run_reduce_on(kc_runtime *rt, kc_context *ctx, uint32_t groups, kct_report *r) {
  size_t n = (size_t)groups * WG;
  float *x = malloc(n * sizeof(float)), *out = calloc(groups, sizeof(float));
  kc_buffer *bx = NULL, *bo = NULL;
  kc_kernel *k = NULL;
  kc_status st = x && out ? KC_OK : KC_ENOMEM;
  for (size_t i = 0; !st && i < n; i++) x[i] = (float)(i % 7) + 0.25f * (float)(i % 3);
  if (!st) st = kc_buffer_create(ctx, n * sizeof(float), &bx);
  if (!st) st = kc_buffer_create(ctx, groups * sizeof(float), &bo);
  if (!st) st = kc_buffer_write(bx, 0, x, n * sizeof(float));
  if (!st) st = kc_kernel_create(rt, "reduce", NULL, &k);
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(bo)};
  kc_dim3 g = {groups, 1, 1}, b = {WG, 1, 1};
  if (!st) st = kc_launch(k, ctx, &g, &b, args, 2);
  if (!st) st = kc_context_finish(ctx);
  if (!st) st = kc_buffer_read(bo, 0, out, groups * sizeof(float));
  char msg[300] = "";
  if (st)
    snprintf(msg, sizeof msg, "reduce over %u groups: %s: %s", groups, kc_status_name(st), kc_errmsg(rt));
  for (uint32_t gi = 0; !st && !msg[0] && gi < groups; gi++) {
    double want = 0;
    for (size_t i = 0; i < WG; i++) want += x[(size_t)gi * WG + i];
    if (fabs(out[gi] - want) > 1e-3 * fabs(want) + 1e-3)
      snprintf(msg, sizeof msg, "group %u of %u: %g, expected %g", gi, groups, out[gi], want);
  }
  free(x);
  free(out);
  kc_buffer_destroy(bx);
  kc_buffer_destroy(bo);
  kc_kernel_destroy(k);
  if (msg[0]) {
    if (r) kct_report_fail(r, "%s", msg);
    else fail_msg("%s", msg);
  }
}

static void run_reduce(kc_runtime *rt, kc_context *ctx, uint32_t groups) {
  run_reduce_on(rt, ctx, groups, NULL);
}

static void test_reduction_with_local_memory_and_barriers(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "reduce", SRC_REDUCE);
  run_reduce(rt, ctx, 1);
  run_reduce(rt, ctx, 3);
  run_reduce(rt, ctx, 4096); /* 512 Ki items */
  kct_destroy(rt);
}

static void test_tiled_matmul(void **state) {
  (void)state;
  enum { M = 128 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "matmul", SRC_MATMUL);
  float *a = kct_calloc(M * M * sizeof(float)), *b = kct_calloc(M * M * sizeof(float));
  for (int i = 0; i < M * M; i++) {
    a[i] = (float)(i % 13) * 0.5f - 2.0f;
    b[i] = (float)(i % 11) * 0.25f - 1.0f;
  }
  kc_buffer *ba = buffer_of(rt, ctx, a, M * M), *bb = buffer_of(rt, ctx, b, M * M),
            *bc = buffer_of(rt, ctx, NULL, M * M);
  int n = M;
  kc_arg args[] = {KC_ARG_BUF(ba), KC_ARG_BUF(bb), KC_ARG_BUF(bc), KC_ARG_VAL(n)};
  kc_dim3 g = {M / 16, M / 16, 1}, blk = {16, 16, 1};
  kc_kernel *k = kct_kernel(rt, "matmul", NULL);
  KCT_OK(rt, kc_launch(k, ctx, &g, &blk, args, 4));
  KCT_OK(rt, kc_context_finish(ctx));
  float *c = read_all(rt, bc, M * M);
  for (int r = 0; r < M; r++)
    for (int col = 0; col < M; col++) {
      double want = 0;
      for (int k2 = 0; k2 < M; k2++) want += (double)a[r * M + k2] * b[k2 * M + col];
      if (fabs(c[r * M + col] - want) > 1e-3 * (fabs(want) + 1))
        fail_msg("c[%d][%d] = %g, expected %g", r, col, c[r * M + col], want);
    }
  kct_free(a);
  kct_free(b);
  kct_free(c);
  kct_destroy(rt);
}

static void test_ids_from_helpers_on_large_grids(void **state) {
  (void)state;
  enum { N = 1 << 20 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "my_gid", SRC_GID);
  kct_define(rt, "ids", SRC_IDS);
  kc_buffer *by = buffer_of(rt, ctx, NULL, N);
  kc_arg args[] = {KC_ARG_BUF(by)};
  kc_dim3 g = {N / 256, 1, 1}, b = {256, 1, 1};
  KCT_OK(rt, kc_launch(kct_kernel(rt, "ids", NULL), ctx, &g, &b, args, 1));
  KCT_OK(rt, kc_context_finish(ctx));
  float *y = read_all(rt, by, N);
  for (size_t i = 0; i < N; i++)
    if (y[i] != (float)(i % 1000) + 256.0f)
      fail_msg("y[%zu] = %g, expected %g", i, y[i], (float)(i % 1000) + 256.0f);
  kct_free(y);
  kct_destroy(rt);
}

static void test_stencil_2d(void **state) {
  (void)state;
  enum { W = 512, H = 256 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "stencil", SRC_STENCIL);
  float *in = kct_calloc(W * H * sizeof(float));
  for (int i = 0; i < W * H; i++) in[i] = (float)((i * 7919) % 101);
  kc_buffer *bi = buffer_of(rt, ctx, in, W * H), *bo = buffer_of(rt, ctx, NULL, W * H);
  int w = W, h = H;
  kc_arg args[] = {KC_ARG_BUF(bi), KC_ARG_BUF(bo), KC_ARG_VAL(w), KC_ARG_VAL(h)};
  kc_dim3 g = {W / 32, H / 4, 1}, b = {32, 4, 1};
  KCT_OK(rt, kc_launch(kct_kernel(rt, "stencil", NULL), ctx, &g, &b, args, 4));
  KCT_OK(rt, kc_context_finish(ctx));
  float *out = read_all(rt, bo, W * H);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int i = y * W + x;
      float want = x == 0 || y == 0 || x == W - 1 || y == H - 1
                       ? in[i]
                       : 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - W] + in[i + W]);
      if (fabsf(out[i] - want) > 1e-4f * (fabsf(want) + 1))
        fail_msg("(%d, %d): %g, expected %g", x, y, out[i], want);
    }
  kct_free(in);
  kct_free(out);
  kct_destroy(rt);
}

/* Host: several threads launch one KC_LOCAL kernel at once; each launch
 * has its own copies of its local arrays. */
typedef struct {
  kc_runtime *rt;
  kc_context *ctx;
  kct_report r;
} conc_ctx;

static void *conc_thread(void *arg) {
  conc_ctx *c = arg;
  for (int i = 0; i < 6; i++) run_reduce_on(c->rt, c->ctx, i % 2 ? 37 : 512, &c->r);
  return NULL;
}

static void test_local_arrays_under_concurrent_launches(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "reduce", SRC_REDUCE);
  conc_ctx c[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    memset(&c[i], 0, sizeof c[i]);
    c[i].rt = rt;
    c[i].ctx = kct_context(rt);
    assert_int_equal(pthread_create(&t[i], NULL, conc_thread, &c[i]), 0);
  }
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 3; i++) kct_report_check("launching thread", &c[i].r);
  kct_destroy(rt);
}

/* Host: a barrier that some items of a group never reach is refused (they
 * would wait for ever on a GPU); so is a group larger than the fibers take.
 * The runtime launches as before after. */
static void test_barrier_misuse_is_refused(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "halfway",
             "KC_KERNEL void halfway(KC_GLOBAL float *y) {\n"
             "  if (kc_local_id(0) < 4) kc_barrier();\n"
             "  y[kc_global_id(0)] = 1.0f;\n"
             "}\n");
  kc_buffer *by = buffer_of(rt, ctx, NULL, 8192);
  kc_arg args[] = {KC_ARG_BUF(by)};
  kc_dim3 g = {1, 1, 1}, b = {8, 1, 1};
  kc_kernel *k = kct_kernel(rt, "halfway", NULL);
  KCT_STATUS(rt, KC_ELAUNCH, kc_launch(k, ctx, &g, &b, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "every item of a group must reach each barrier");
  g.x = 64; /* on the pool: the message comes back to this thread */
  KCT_STATUS(rt, KC_ELAUNCH, kc_launch(k, ctx, &g, &b, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "kc_barrier()");
  kc_dim3 big = {8192, 1, 1}, one = {1, 1, 1};
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, ctx, &one, &big, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "is more than the host backend takes");
  kct_define(rt, "reduce", SRC_REDUCE);
  run_reduce(rt, ctx, 64);
  kct_destroy(rt);
}

/* Host: a child of fork() launches on the pool its parent had started
 * (the workers are not in the child: it starts its own). */
static void test_pool_after_fork(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "reduce", SRC_REDUCE);
  run_reduce(rt, ctx, 2048); /* the pool is running */
  kct_child c;
  if (kct_fork(&c, false)) {
    kct_report r;
    memset(&r, 0, sizeof r);
    run_reduce_on(rt, ctx, 2048, &r);
    run_reduce_on(rt, ctx, 3, &r);
    kct_child_send(&c, &r, sizeof r);
    _exit(0);
  }
  kct_report r;
  memset(&r, 0, sizeof r);
  size_t got = kct_child_wait(&c, &r, sizeof r, 120);
  assert_int_equal(got, sizeof r);
  kct_report_check("the child", &r);
  run_reduce(rt, ctx, 2048); /* and the parent's pool goes on */
  kct_destroy(rt);
}

KCT_MAIN_INIT_ONLY(KCT_TEST(test_reduction_with_local_memory_and_barriers), KCT_TEST(test_tiled_matmul),
                   KCT_TEST(test_ids_from_helpers_on_large_grids), KCT_TEST(test_stencil_2d),
                   KCT_TEST(test_local_arrays_under_concurrent_launches),
                   KCT_TEST(test_barrier_misuse_is_refused), KCT_TEST(test_pool_after_fork))
