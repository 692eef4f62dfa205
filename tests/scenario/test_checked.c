/* SPDX-License-Identifier: MIT */
/*
 * test_checked.c -- checked mode (kcache.h, "Checked mode"): 64 work items
 * writing into a 16-float buffer are caught, after the launch on the host
 * backend and at kc_context_finish on the others, with a message naming
 * the kernel, the argument and the offsets; the bytes inside the buffer are
 * the kernel's, the guard is restored (a later good launch is clean), and
 * the heap is intact afterwards (more buffers, the runtime destroyed; ASan
 * builds check it). Also through bound arguments, with KC_CHECKED=1, before
 * the buffer's start, and: with checked mode off the launch cache works as
 * before, and in checked mode no launch takes the fast path.
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdlib.h>

enum { N = 16, ITEMS = 64 };

static const char SRC_OOB[] = "KC_KERNEL void oob(KC_GLOBAL float *y, int shift) {\n"
                              "  size_t i = kc_global_id(0);\n"
                              "  y[(long)i + shift] = (float)i;\n"
                              "}\n";

static const char SRC_OOB2[] =
    "KC_KERNEL void oob2(KC_GLOBAL const float *a, KC_GLOBAL float *y, int shift) {\n"
    "  size_t i = kc_global_id(0);\n"
    "  y[(long)i + shift] = a[0] + (float)i;\n"
    "}\n";

static kc_runtime *checked_runtime(int checked) {
  kc_options opt;
  kc_options_init(&opt);
  opt.checked = checked;
  return kct_runtime(&opt);
}

/* Launches oob on `items` work items with y = b and the shift; returns the
 * first failing status of the launch and the finish. */
static kc_status run_oob(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t items, int shift) {
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(shift)};
  kc_dim3 grid = {items, 1, 1}, block = {1, 1, 1};
  kc_status st = kc_launch(k, ctx, &grid, &block, args, 2);
  kc_status fin = kc_context_finish(ctx);
  return st ? st : fin;
}

static const char WANT_AFTER[] =
    "checked mode: kernel 'oob' argument 0 (KC_GLOBAL float * y) wrote outside its "
    "buffer of 64 bytes, at offsets 64..255 (after its end)";

/* Where the error shows: the launch on the host backend, else the finish. */
static void expect_caught(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t items,
                          int shift, const char *want) {
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(shift)};
  kc_dim3 grid = {items, 1, 1}, block = {1, 1, 1};
  kc_status st = kc_launch(k, ctx, &grid, &block, args, 2);
  if (kct_backend == KC_BACKEND_HOST) {
    KCT_STATUS(rt, KC_ELAUNCH, st);
    assert_string_equal(kc_errmsg(rt), want);
    KCT_OK(rt, kc_context_finish(ctx)); /* reported once: the guard was restored */
  } else {
    KCT_OK(rt, st);
    KCT_STATUS(rt, KC_ELAUNCH, kc_context_finish(ctx));
    assert_string_equal(kc_errmsg(rt), want);
  }
}

/* A context of rt (*ctx), a buffer of N floats in it (*b), and oob
 * defined: its handle. */
static kc_kernel *oob_setup(kc_runtime *rt, kc_context **ctx, kc_buffer **b) {
  *ctx = kct_context(rt);
  *b = kct_buffer(rt, *ctx, N);
  kct_define(rt, "oob", SRC_OOB);
  return kct_kernel(rt, "oob", NULL);
}

static void test_overflow_caught(void **state) {
  (void)state;
  kc_runtime *rt = checked_runtime(1);
  kc_context *ctx;
  kc_buffer *b;
  kc_kernel *k = oob_setup(rt, &ctx, &b);
  expect_caught(rt, k, ctx, b, ITEMS, 0, WANT_AFTER);
  float out[N];
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  for (int i = 0; i < N; i++) assert_true(out[i] == (float)i); /* inside: the kernel's writes */
  /* within bounds: clean, however often */
  for (int i = 0; i < 3; i++) KCT_OK(rt, run_oob(k, ctx, b, N, 0));
  /* before the start: 8 items at y[-4..3] */
  kc_arg args[] = {KC_ARG_BUF(b), {&(int){-4}, sizeof(int), KC_ARG_SCALAR}};
  kc_dim3 grid = {8, 1, 1}, block = {1, 1, 1};
  kc_status st = kc_launch(k, ctx, &grid, &block, args, 2);
  kc_status fin = kc_context_finish(ctx);
  KCT_STATUS(rt, KC_ELAUNCH, st ? st : fin);
  KCT_CONTAINS(kc_errmsg(rt), "at offsets -16..-1 (before its start)");
  /* the heap is intact: more buffers come and go, then everything is freed */
  for (int i = 0; i < 8; i++) {
    kc_buffer *x = kct_buffer(rt, ctx, 1 + 100 * (uint32_t)i);
    kc_buffer_destroy(x);
  }
  KCT_OK(rt, run_oob(k, ctx, b, N, 0));
  kct_destroy(rt);
}

/* A view's writes past its buffer's end are caught at the launch on the
 * host backend (at the finish elsewhere), naming the kernel, the argument
 * and the view; a view of a view is a view of the buffer. */
static void test_view_overflow_caught(void **state) {
  (void)state;
  kc_runtime *rt = checked_runtime(1);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, 256), *v, *vv;
  KCT_OK(rt, kc_buffer_view(b, 512, 512, &v));
  kct_define(rt, "oob", SRC_OOB);
  kc_kernel *k = kct_kernel(rt, "oob", NULL);
  /* 136 items from byte 512: bytes 1024..1055 are past the buffer's end */
  static const char want[] =
      "checked mode: kernel 'oob' argument 0 (KC_GLOBAL float * y, a view of 512 bytes at "
      "offset 512) wrote outside its buffer of 1024 bytes, at offsets 1024..1055 (after "
      "its end)";
  int shift = 0;
  expect_caught(rt, k, ctx, v, 136, shift, want);
  kc_dim3 block = {1, 1, 1};
  kc_status st;
  /* a view of the view: bytes 768..895 of the buffer */
  KCT_OK(rt, kc_buffer_view(v, 256, 128, &vv));
  kc_arg args2[] = {KC_ARG_BUF(vv), KC_ARG_VAL(shift)};
  kc_dim3 inside = {64, 1, 1}, past = {80, 1, 1};
  /* past the view's end but inside the buffer: not seen */
  KCT_OK(rt, kc_launch(k, ctx, &inside, &block, args2, 2));
  KCT_OK(rt, kc_context_finish(ctx));
  /* past the buffer's end: 80 items reach byte 1088 */
  st = kc_launch(k, ctx, &past, &block, args2, 2);
  kc_status fin = kc_context_finish(ctx);
  KCT_STATUS(rt, KC_ELAUNCH, st ? st : fin);
  KCT_CONTAINS(kc_errmsg(rt), "(KC_GLOBAL float * y, a view of 128 bytes at offset 768) wrote outside its "
                              "buffer of 1024 bytes, at offsets 1024..1087 (after its end)");
  /* kc_launch_ex: the same, at the same point; on a stream too (the host
   * runs it on the stream's thread: checked once it has run) */
  kc_stream *s;
  KCT_OK(rt, kc_stream_create(ctx, &s));
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.grid = past;
  for (int on = 0; on < 2; on++) {
    c.stream = on ? s : NULL;
    st = kc_launch_ex(k, ctx, &c, args2, 2);
    if (kct_backend == KC_BACKEND_HOST) KCT_STATUS(rt, KC_ELAUNCH, st);
    else KCT_STATUS(rt, KC_ELAUNCH, kc_context_finish(ctx));
    KCT_CONTAINS(kc_errmsg(rt),
                 "kernel 'oob' argument 0 (KC_GLOBAL float * y, a view of 128 bytes at offset 768)");
    KCT_OK(rt, kc_context_finish(ctx));
  }
  kc_stream_destroy(s);
  /* two views of one buffer in one launch: the guards are the buffer's, so
   * the message names both */
  kct_define(rt, "oob2", SRC_OOB2);
  kc_kernel *k2 = kct_kernel(rt, "oob2", NULL);
  kc_buffer *lo;
  KCT_OK(rt, kc_buffer_view(b, 0, 128, &lo));
  kc_arg two[] = {KC_ARG_BUF(lo), KC_ARG_BUF(vv), KC_ARG_VAL(shift)};
  st = kc_launch(k2, ctx, &past, &block, two, 3);
  fin = kc_context_finish(ctx);
  KCT_STATUS(rt, KC_ELAUNCH, st ? st : fin);
  KCT_CONTAINS(kc_errmsg(rt),
               "kernel 'oob2' argument 0 (KC_GLOBAL const float * a, a view of 128 bytes at offset "
               "0) or argument 1 (KC_GLOBAL float * y, a view of 128 bytes at offset 768) wrote");
  kc_buffer_destroy(lo);
  kc_buffer_destroy(vv);
  kc_buffer_destroy(v);
  kct_destroy(rt);
}

/* Bound arguments take the checked path too, and KC_CHECKED=1 turns it on. */
static void test_bound_arguments_and_environment(void **state) {
  (void)state;
  setenv("KC_CHECKED", "1", 1);
  kc_runtime *rt = checked_runtime(0);
  unsetenv("KC_CHECKED");
  kc_context *ctx;
  kc_buffer *b;
  kc_kernel *k = oob_setup(rt, &ctx, &b);
  int shift = 0;
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(shift)};
  kc_args *a = NULL;
  KCT_OK(rt, kc_args_create(k, ctx, args, 2, &a));
  kc_dim3 grid = {ITEMS, 1, 1}, block = {1, 1, 1};
  kc_stats before = kct_stats(rt);
  for (int pass = 0; pass < 2; pass++) { /* the second would be a cached launch */
    kc_status st = kc_launch_args(a, &grid, &block);
    kc_status fin = kc_context_finish(ctx);
    KCT_STATUS(rt, KC_ELAUNCH, st ? st : fin);
    assert_string_equal(kc_errmsg(rt), WANT_AFTER);
  }
  kc_stats after = kct_stats(rt);
  assert_true(after.fast_hits == before.fast_hits); /* no launch took the fast path */
  kc_args_destroy(a);
  kct_destroy(rt);
}

/* Off (the default): launches fill the cache and hit it, as always. */
static void test_off_by_default(void **state) {
  (void)state;
  kc_runtime *rt = checked_runtime(0);
  kc_context *ctx;
  kc_buffer *b;
  kc_kernel *k = oob_setup(rt, &ctx, &b);
  kc_stats before = kct_stats(rt);
  for (int i = 0; i < 4; i++) KCT_OK(rt, run_oob(k, ctx, b, N, 0));
  kc_stats after = kct_stats(rt);
  assert_true(after.fast_hits - before.fast_hits == 3);
  kct_destroy(rt);
}

/* Threads launching at once in checked mode, each on its own buffer of one
 * context, one of them overflowing: the others stay clean (TSan builds see
 * the recording and the checks race with nothing). */
enum { THREADS = 4, ROUNDS = 25 };
typedef struct worker {
  kc_kernel *k;
  kc_context *ctx;
  kc_buffer *b;
  uint32_t items;
  int caught;
  kct_report rep;
} worker;

static void *work(void *p) {
  worker *w = p;
  for (int r = 0; r < ROUNDS; r++) {
    int shift = 0;
    kc_arg args[] = {KC_ARG_BUF(w->b), KC_ARG_VAL(shift)};
    kc_dim3 grid = {w->items, 1, 1}, block = {1, 1, 1};
    kc_status st = kc_launch(w->k, w->ctx, &grid, &block, args, 2);
    if (st == KC_ELAUNCH && w->items > N) w->caught++;
    else if (st) kct_report_fail(&w->rep, "launch: %s", kc_status_name(st));
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  kc_runtime *rt = checked_runtime(1);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "oob", SRC_OOB);
  kc_kernel *k = kct_kernel(rt, "oob", NULL);
  KCT_OK(rt, kc_kernel_compile(k));
  worker w[THREADS];
  pthread_t t[THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){k, ctx, kct_buffer(rt, ctx, N), i == 0 ? ITEMS : N, 0, {0}};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  kc_status fin = kc_context_finish(ctx);
  for (int i = 0; i < THREADS; i++) kct_report_check("worker", &w[i].rep);
  if (kct_backend == KC_BACKEND_HOST) {
    assert_int_equal(w[0].caught, ROUNDS); /* each launch, at once */
    KCT_OK(rt, fin);
  } else {
    KCT_STATUS(rt, KC_ELAUNCH, fin); /* once, at the finish */
    KCT_CONTAINS(kc_errmsg(rt), "at offsets 64..255 (after its end)");
  }
  for (int i = 1; i < THREADS; i++) {
    float out[N];
    KCT_OK(rt, kc_buffer_read(w[i].b, 0, out, sizeof out));
    for (int j = 0; j < N; j++) assert_true(out[j] == (float)j);
  }
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  kct_memory_only();
  unsetenv("KC_CHECKED");
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_overflow_caught),
      KCT_TEST(test_view_overflow_caught),
      KCT_TEST(test_bound_arguments_and_environment),
      KCT_TEST(test_off_by_default),
      KCT_TEST(test_threads),
  };
  return KCT_RUN(tests);
}
