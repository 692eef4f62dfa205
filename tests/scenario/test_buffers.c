/* SPDX-License-Identifier: MIT */
/*
 * test_buffers.c -- buffers after they or their context are destroyed.
 * kc_context_destroy releases its buffers' memory; the handles stay safe to
 * pass back (buffers are type-stable like contexts): every kc_buffer_* call
 * on them says KC_EDESTROYED, a second kc_buffer_destroy is no double free,
 * a launch with one fails with KC_EARGS, and their structs are recycled, so
 * a create/destroy loop does not grow. Run under ASan (scripts/test.sh asan)
 * this is where a use after free would show. Host memory used in place
 * (kc_buffer_host): kernels read and write the caller's memory itself, a
 * read into that memory is the synchronization, the memory outlives the
 * buffer; KC_EUNAVAILABLE where the device cannot see host memory.
 */
#include "kc_test.h"

#include <stdlib.h>

enum { N = 8 };

static const char SRC_K[] = "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
                            "  size_t i = kc_global_id(0);\n"
                            "  y[i] = (float)i + 1.0f;\n"
                            "}\n";

/* Every call on a destroyed buffer b: KC_EDESTROYED, saying so. */
static void expect_destroyed(kc_runtime *rt, kc_buffer *b) {
  float v[N] = {0};
  KCT_STATUS(rt, KC_EDESTROYED, kc_buffer_write(b, 0, v, sizeof v));
  KCT_CONTAINS(kc_errmsg(rt), "buffer has been destroyed");
  KCT_STATUS(rt, KC_EDESTROYED, kc_buffer_read(b, 0, v, sizeof v));
  KCT_CONTAINS(kc_errmsg(rt), "kc_buffer_read");
  KCT_STATUS(rt, KC_EDESTROYED, kc_buffer_read(b, 0, v, 0));
  assert_int_equal(kc_buffer_size(b), 0);
  kc_buffer_destroy(b); /* no double free */
  KCT_CONTAINS(kc_errmsg(rt), "kc_buffer_destroy: the buffer has been destroyed");
}

static void test_buffer_after_context_destroy(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b1 = kct_buffer(rt, ctx, N), *b2 = kct_buffer(rt, ctx, N);
  kc_context_destroy(ctx);
  expect_destroyed(rt, b1);
  expect_destroyed(rt, b2);
  expect_destroyed(rt, b1); /* and again */
  kct_destroy(rt);
}

static void test_buffer_destroyed_twice(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *keep = kct_buffer(rt, ctx, N), *b = kct_buffer(rt, ctx, N);
  float pattern[N], back[N];
  for (int i = 0; i < N; i++) pattern[i] = (float)(3 * i);
  KCT_OK(rt, kc_buffer_write(keep, 0, pattern, sizeof pattern));
  kc_buffer_destroy(b);
  expect_destroyed(rt, b);
  /* the other buffer of the context is untouched */
  assert_int_equal(kc_buffer_size(keep), sizeof pattern);
  KCT_OK(rt, kc_buffer_read(keep, 0, back, sizeof back));
  assert_memory_equal(back, pattern, sizeof back);
  kc_context_destroy(ctx);
  expect_destroyed(rt, keep);
  kct_destroy(rt);
}

/* A runtime with k defined (*k, a handle on it), a context (*ctx) and a
 * buffer of N floats in it (*b). */
static kc_runtime *runtime_with_k(kc_kernel **k, kc_context **ctx, kc_buffer **b) {
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "k", SRC_K);
  *k = kct_kernel(rt, "k", NULL);
  *ctx = kct_context(rt);
  *b = kct_buffer(rt, *ctx, N);
  return rt;
}

/* A destroyed buffer as a launch argument: KC_EARGS that says so, on the
 * checked path (kc_launch) and when binding (kc_args_create). */
static void test_launch_with_destroyed_buffer(void **state) {
  (void)state;
  kc_kernel *k;
  kc_context *ctx;
  kc_buffer *b;
  kc_runtime *rt = runtime_with_k(&k, &ctx, &b);
  float out[N];
  kct_run_ok(rt, k, ctx, b, N, out);
  kct_expect_linear(out, N, 1, 1);
  kc_buffer_destroy(b);
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  kc_arg arg = KC_ARG_BUF(b);
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &grid, &block, &arg, 1));
  KCT_CONTAINS(kc_errmsg(rt), "is a buffer that has been destroyed");
  kc_args *bound = (kc_args *)&bound;
  KCT_STATUS(rt, KC_EARGS, kc_args_create(k, ctx, &arg, 1, &bound));
  KCT_CONTAINS(kc_errmsg(rt), "is a buffer that has been destroyed");
  assert_null(bound);
  /* a new buffer in the same context works (it may reuse b's memory) */
  kc_buffer *nb = kct_buffer(rt, ctx, N);
  if (nb == b) print_message("the new buffer reuses the destroyed one's memory\n");
  kct_run_ok(rt, k, ctx, nb, N, out);
  kct_expect_linear(out, N, 1, 1);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* Bound arguments hold their buffers by pointer and check nothing per
 * launch: a buffer destroyed after binding makes the next kc_launch_args
 * fail with KC_EARGS (never reach the kernel), and kc_args_set with a live
 * buffer mends them. */
static void test_bound_arguments_with_destroyed_buffer(void **state) {
  (void)state;
  kc_kernel *k;
  kc_context *ctx;
  kc_buffer *b;
  kc_runtime *rt = runtime_with_k(&k, &ctx, &b);
  kc_arg arg = KC_ARG_BUF(b);
  kc_args *bound = NULL;
  KCT_OK(rt, kc_args_create(k, ctx, &arg, 1, &bound));
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch_args(bound, &grid, &block));
  KCT_OK(rt, kc_launch_args(bound, &grid, &block)); /* the fast path */
  kc_buffer_destroy(b);
  KCT_STATUS(rt, KC_EARGS, kc_launch_args(bound, &grid, &block));
  KCT_CONTAINS(kc_errmsg(rt), "argument 0 is a buffer that has been destroyed since it was bound");
  KCT_STATUS(rt, KC_EARGS, kc_launch_args(bound, &grid, &block)); /* and stays so */
  /* also once a new buffer of the context has taken b's struct (its free
   * list gives it back first): the new buffer is not bound */
  kc_buffer *nb = kct_buffer(rt, ctx, N);
  assert_ptr_equal(nb, b); /* (the context's free list is last in, first out) */
  KCT_STATUS(rt, KC_EARGS, kc_launch_args(bound, &grid, &block));
  KCT_CONTAINS(kc_errmsg(rt), "argument 0 is a buffer that has been destroyed since it was bound");
  KCT_OK(rt, kc_args_set(bound, 0, KC_ARG_BUF(nb)));
  KCT_OK(rt, kc_launch_args(bound, &grid, &block));
  KCT_OK(rt, kc_context_finish(ctx));
  float out[N];
  KCT_OK(rt, kc_buffer_read(nb, 0, out, sizeof out));
  kct_expect_linear(out, N, 1, 1);
  kc_args_destroy(bound);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* Outstanding blocks of the runtime's allocator. */
typedef struct {
  long live;
} counting;

static void *counting_alloc(void *ud, void *ptr, size_t size) {
  counting *c = ud;
  if (size == 0) {
    if (ptr) c->live--;
    free(ptr);
    return NULL;
  }
  void *p = realloc(ptr, size);
  if (p && !ptr) c->live++;
  return p;
}

/* Contexts and buffers made and dropped again and again (buffers left to
 * their context's destroy, or destroyed first): their structs are reused,
 * so the allocator's outstanding blocks stop growing after the first
 * round; destroying the runtime returns every one of them. */
static void test_buffers_are_recycled(void **state) {
  (void)state;
  counting c = {0};
  kc_options o;
  kc_options_init(&o);
  o.alloc = counting_alloc;
  o.alloc_ud = &c;
  kc_runtime *rt = kct_runtime(&o);
  long after_first = 0;
  for (int round = 0; round < 12; round++) {
    kc_context *ctx = kct_context(rt);
    kc_buffer *b[4];
    for (int i = 0; i < 4; i++) b[i] = kct_buffer(rt, ctx, N);
    if (round % 2) kc_buffer_destroy(b[round % 4]);
    kc_context_destroy(ctx);
    for (int i = 0; i < 4; i++) assert_int_equal(kc_buffer_size(b[i]), 0);
    if (round == 0) after_first = c.live;
    else assert_int_equal(c.live, after_first);
  }
  kct_destroy(rt);
  assert_int_equal(c.live, 0);
}

/* kc_buffer_host: y[i] = 2 * y[i] + 1 on the caller's own memory, twice
 * (the second launch sees the first's writes), synchronized by a read into
 * that memory; the memory stays the caller's after kc_buffer_destroy. On
 * a device that cannot see host memory: KC_EUNAVAILABLE saying so. */
static void test_host_memory_in_place(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(
      rt, "dbl",
      "KC_KERNEL void dbl(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = 2.0f * y[i] + 1.0f; }");
  kc_kernel *k = kct_kernel(rt, "dbl", NULL);
  kc_context *ctx = kct_context(rt);
  enum { M = 1024 };
  float *mem = aligned_alloc(4096, M * sizeof(float));
  assert_non_null(mem);
  for (int i = 0; i < M; i++) mem[i] = (float)i;
  kc_buffer *b = NULL;
  kc_status st = kc_buffer_host(ctx, mem, M * sizeof(float), &b);
  if (st == KC_EUNAVAILABLE) {
    assert_int_not_equal(kct_backend, KC_BACKEND_HOST); /* the host backend always can */
    KCT_CONTAINS(kc_errmsg(rt), "kc_buffer_write");
    assert_null(b);
    print_message("kc_buffer_host: %s\n", kc_errmsg(rt));
  } else {
    KCT_OK(rt, st);
    assert_int_equal(kc_buffer_size(b), M * sizeof(float));
    if (kct_backend == KC_BACKEND_HOST) assert_ptr_equal(kc_buffer_native(b), mem); /* the memory itself */
    kc_dim3 grid = {M / 64, 1, 1}, block = {64, 1, 1}; /* grid: groups */
    kc_arg arg = KC_ARG_BUF(b);
    for (int round = 0; round < 2; round++) KCT_OK(rt, kc_launch(k, ctx, &grid, &block, &arg, 1));
    KCT_OK(rt, kc_buffer_read(b, 0, mem, M * sizeof(float))); /* the synchronization, no copy */
    for (int i = 0; i < M; i++) assert_float_equal(mem[i], 4.0f * (float)i + 3.0f, 0.0f);
    /* a read elsewhere is an ordinary read */
    float part[4];
    KCT_OK(rt, kc_buffer_read(b, 8 * sizeof(float), part, sizeof part));
    assert_float_equal(part[0], 35.0f, 0.0f);
    kc_buffer_destroy(b);
    for (int i = 0; i < M; i++) assert_float_equal(mem[i], 4.0f * (float)i + 3.0f, 0.0f); /* still there */
  }
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_host(ctx, NULL, 16, &b));
  KCT_CONTAINS(kc_errmsg(rt), "the pointer is NULL");
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_host(ctx, mem, 0, &b));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_host(NULL, mem, 16, &b));
  free(mem);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

KCT_MAIN(KCT_TEST(test_buffer_after_context_destroy), KCT_TEST(test_buffer_destroyed_twice),
         KCT_TEST(test_launch_with_destroyed_buffer), KCT_TEST(test_bound_arguments_with_destroyed_buffer),
         KCT_TEST(test_buffers_are_recycled), KCT_TEST(test_host_memory_in_place))
