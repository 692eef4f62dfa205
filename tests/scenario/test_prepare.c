/* SPDX-License-Identifier: MIT */
/*
 * test_prepare.c -- kc_kernel_prepare and kc_prepare: a batch compiled on
 * the compile pool while other threads launch the same kernels (each kernel
 * compiled and linked once, every launch right), a prepared kernel's first
 * launch on the cached path, compile-only preparing, a pinned caller's
 * world, and bad input and compile failures inside a batch.
 *
 * Worker threads never call cmocka: they record what they saw, and the test
 * checks it after joining them. Run under -DKC_SANITIZE=thread too.
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdlib.h>

#define NK 8 /* distinct kernels */
#define NLAUNCHERS 3
#define N 16

/* Kernel i writes y[j] = j * (i + 1) + helper(i). */
static void define_kernels(kc_runtime *rt, kc_kernel **ks) {
  kct_define(rt, "base", "KC_DEVICE float base(float x) { return x + 1.0f; }");
  for (int i = 0; i < NK; i++) {
    char name[32], src[256];
    snprintf(name, sizeof name, "p%d", i);
    snprintf(src, sizeof src,
             "KC_KERNEL void p%d(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = base((float)j * "
             "%d.0f) + %d.0f; }",
             i, i + 1, i);
    kct_define(rt, name, src);
    ks[i] = kct_kernel(rt, name, NULL);
  }
}

static bool kernel_ok(kct_report *r, int i, const float *out) {
  for (int j = 0; j < N; j++) {
    float want = (float)j * (float)(i + 1) + 1.0f + (float)i;
    if (out[j] != want) {
      kct_report_fail(r, "p%d: element %d is %g, expected %g", i, j, (double)out[j], (double)want);
      return false;
    }
  }
  return true;
}

/* A runtime, a context of it (*ctx), a buffer of N floats in it (*b) and
 * the kernels of define_kernels (ks). */
static kc_runtime *runtime_with_kernels(kc_context **ctx, kc_buffer **b, kc_kernel **ks) {
  kc_runtime *rt = kct_runtime(NULL);
  *ctx = kct_context(rt);
  *b = kct_buffer(rt, *ctx, N);
  define_kernels(rt, ks);
  return rt;
}

/* Runs every kernel of ks in ctx on b (into out) and checks each result
 * (kernel_ok), reported together as `what`. */
static void run_all_ok(kc_runtime *rt, kc_context *ctx, kc_buffer *b, kc_kernel **ks, const char *what,
                       float *out) {
  kct_report r = {0};
  for (int i = 0; i < NK; i++) {
    KCT_OK(rt, kct_run(ks[i], ctx, b, N, out));
    kernel_ok(&r, i, out);
  }
  kct_report_check(what, &r);
}

typedef struct launcher {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel **ks;
  pthread_barrier_t *bar;
  int first; /* launches start from this kernel, so threads differ */
  kct_report r;
} launcher;

static void *launch_all(void *arg) {
  launcher *t = arg;
  kc_buffer *b = NULL;
  if (kc_buffer_create(t->ctx, N * sizeof(float), &b)) kct_report_fail(&t->r, "buffer: %s", kc_errmsg(t->rt));
  pthread_barrier_wait(t->bar);
  float out[N];
  for (int round = 0; round < 2 && b; round++)
    for (int n = 0; n < NK; n++) {
      int i = (t->first + n) % NK;
      kc_status st = kct_run(t->ks[i], t->ctx, b, N, out);
      if (st) kct_report_fail(&t->r, "launch of p%d: %s: %s", i, kc_status_name(st), kc_errmsg(t->rt));
      else kernel_ok(&t->r, i, out);
    }
  return NULL;
}

/* kc_prepare on a pool of 4 while three threads launch the same kernels:
 * each kernel is compiled once and linked once (single flight across the
 * pool and the launching threads), every launch computes the right thing. */
static void test_batch_while_launching(void **state) {
  (void)state;
  kc_options opt;
  kc_options_init(&opt);
  opt.compile_threads = 4;
  kc_runtime *rt = kct_runtime(&opt);
  kc_context *ctx = kct_context(rt);
  kc_kernel *ks[NK], *batch[2 * NK];
  define_kernels(rt, ks);
  for (int i = 0; i < NK; i++) batch[i] = batch[NK + i] = ks[i]; /* duplicates too */
  kc_stats s0 = kct_stats(rt);

  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NLAUNCHERS + 1);
  launcher t[NLAUNCHERS];
  pthread_t th[NLAUNCHERS];
  for (int i = 0; i < NLAUNCHERS; i++) {
    t[i] = (launcher){.rt = rt, .ctx = ctx, .ks = ks, .bar = &bar, .first = i * 3};
    assert_int_equal(pthread_create(&th[i], NULL, launch_all, &t[i]), 0);
  }
  pthread_barrier_wait(&bar);
  KCT_OK(rt, kc_prepare(batch, 2 * NK, ctx));
  for (int i = 0; i < NLAUNCHERS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < NLAUNCHERS; i++) kct_report_check("launcher", &t[i].r);

  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.compiles - s0.compiles, NK);
  assert_int_equal(s1.links - s0.links, NK);
  assert_int_equal(s1.compile_failures, s0.compile_failures);
  /* a second batch finds everything done */
  KCT_OK(rt, kc_prepare(batch, 2 * NK, ctx));
  kc_stats s2 = kct_stats(rt);
  assert_int_equal(s2.compiles, s1.compiles);
  assert_int_equal(s2.links, s1.links);
  kct_destroy(rt);
}

/* A prepared kernel's first launch takes the cached path: no compile, no
 * link, no slow lookup. ctx NULL compiles only. */
static void test_prepared_launch_is_cached(void **state) {
  (void)state;
  kc_context *ctx;
  kc_buffer *b;
  kc_kernel *ks[NK];
  kc_runtime *rt = runtime_with_kernels(&ctx, &b, ks);
  kc_stats s0 = kct_stats(rt);
  KCT_OK(rt, kc_kernel_prepare(ks[0], NULL));
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.compiles, s0.compiles + 1);
  assert_int_equal(s1.links, s0.links);
  KCT_OK(rt, kc_kernel_prepare(ks[0], ctx));
  KCT_OK(rt, kc_prepare(ks + 1, NK - 1, ctx));
  kc_stats s2 = kct_stats(rt);
  assert_int_equal(s2.compiles, s0.compiles + NK);
  assert_int_equal(s2.links, s0.links + NK);
  float out[N];
  run_all_ok(rt, ctx, b, ks, "main", out);
  kc_stats s3 = kct_stats(rt);
  assert_int_equal(s3.compiles, s2.compiles);
  assert_int_equal(s3.links, s2.links);
  assert_int_equal(s3.slow_lookups, s2.slow_lookups);
  assert_int_equal(s3.fast_hits, s2.fast_hits + NK);
  kct_destroy(rt);
}

/* A pinned caller's batch compiles for its pinned world, not the latest. */
static void test_prepare_pinned_world(void **state) {
  (void)state;
  kc_context *ctx;
  kc_buffer *b;
  kc_kernel *ks[NK];
  kc_runtime *rt = runtime_with_kernels(&ctx, &b, ks);
  kc_world pinned;
  KCT_OK(rt, kc_pin(rt, &pinned));
  kct_define(rt, "base", "KC_DEVICE float base(float x) { return x + 100.0f; }");
  KCT_OK(rt, kc_prepare(ks, NK, ctx));
  kc_stats s0 = kct_stats(rt);
  float out[N];
  run_all_ok(rt, ctx, b, ks, "pinned", out); /* the old base */
  assert_int_equal(kct_stats(rt).compiles, s0.compiles);
  KCT_OK(rt, kc_unpin(rt));
  KCT_OK(rt, kct_run(ks[0], ctx, b, N, out));
  assert_true(out[0] == 100.0f); /* the latest world: compiled now */
  assert_int_equal(kct_stats(rt).compiles, s0.compiles + 1);
  kct_destroy(rt);
}

/* Bad input changes nothing; a failing kernel is named, the rest are
 * prepared all the same. */
static void test_prepare_errors(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_kernel *ks[NK];
  define_kernels(rt, ks);
  KCT_STATUS(NULL, KC_EINVAL, kc_kernel_prepare(NULL, ctx));
  KCT_STATUS(rt, KC_EINVAL, kc_prepare(NULL, 2, ctx));
  KCT_OK(rt, kc_prepare(NULL, 0, ctx));
  kc_kernel *with_null[3] = {ks[0], NULL, ks[1]};
  KCT_STATUS(rt, KC_EINVAL, kc_prepare(with_null, 3, ctx));
  KCT_CONTAINS(kc_errmsg(rt), "kernel 1 of 3 is NULL");
  kc_runtime *other = kct_runtime(NULL);
  kc_context *octx = kct_context(other);
  KCT_STATUS(rt, KC_EINVAL, kc_prepare(ks, 2, octx));
  KCT_CONTAINS(kc_errmsg(rt), "another runtime");
  assert_int_equal(kct_stats(rt).compiles, 0);

  kct_define(rt, "bad", "KC_KERNEL void bad(KC_GLOBAL float *y) { y[0] = ; }");
  kc_kernel *bad = kct_kernel(rt, "bad", NULL);
  kc_kernel *mix[4] = {ks[0], bad, ks[1], ks[2]};
  KCT_STATUS(rt, KC_ECOMPILE, kc_prepare(mix, 4, NULL));
  KCT_CONTAINS(kc_errmsg(rt), "kernel 1 ('bad') failed");
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 3);
  assert_int_equal(s.links, 0);
  kc_context *dead = kct_context(rt);
  kc_context_destroy(dead);
  KCT_STATUS(rt, KC_EDESTROYED, kc_kernel_prepare(ks[0], dead));
  kct_destroy(other);
  kct_destroy(rt);
}

KCT_MAIN(KCT_TEST(test_batch_while_launching), KCT_TEST(test_prepared_launch_is_cached),
         KCT_TEST(test_prepare_pinned_world), KCT_TEST(test_prepare_errors))
