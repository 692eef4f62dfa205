/* SPDX-License-Identifier: MIT */
/*
 * test_collect.c -- reclaiming old worlds with kc_collect: a long hot-reload
 * session stays bounded; pinned worlds and the latest world keep their code
 * and definitions; collected code is never launched again; handles and
 * contexts keep working across collections.
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdio.h>

enum { N = 8 };

static const char *kernel_src =
    "KC_KERNEL void k(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }";

static void define_h(kc_runtime *rt, int version) {
  char src[128];
  snprintf(src, sizeof src, "KC_DEVICE float h(float x) { return x + %d.0f; }", version);
  kct_define(rt, "h", src);
}

/* h(i) = i + version */
static void expect_version(const float *out, int version) {
  for (int i = 0; i < N; i++) assert_float_equal(out[i], (float)(i + version), 0);
}

static void test_hot_reload_stays_bounded(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  define_h(rt, 0);
  kct_define(rt, "k", kernel_src);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  float out[N];
  uint64_t most_cis = 0, most_defs = 0;
  enum { RELOADS = 40, EVERY = 8 };
  for (int v = 1; v <= RELOADS; v++) {
    define_h(rt, v);
    KCT_OK(rt, kct_run(k, ctx, b, N, out));
    expect_version(out, v);
    if (v % EVERY == 0) {
      kc_collect_info info;
      KCT_OK(rt, kc_collect(rt, &info));
      /* everything but the latest world's code and definitions went (the
       * first round has one compile fewer: h=0 was never launched) */
      uint64_t compiled = v == EVERY ? EVERY - 1 : EVERY;
      assert_int_equal(info.code_instances, compiled);
      assert_int_equal(info.linked, compiled);
      assert_int_equal(info.definitions, EVERY);
      kc_stats s = kct_stats(rt);
      assert_int_equal(s.code_instances, 1);
      assert_int_equal(s.definitions, 2); /* h and k as of the latest world */
    }
    kc_stats s = kct_stats(rt);
    if (s.code_instances > most_cis) most_cis = s.code_instances;
    if (s.definitions > most_defs) most_defs = s.definitions;
  }
  assert_true(most_cis <= EVERY + 1);
  assert_true(most_defs <= EVERY + 2);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.collected, RELOADS - 1);
  assert_int_equal(s.compiles, RELOADS);
  /* the handle still takes the fast path after a collection */
  uint64_t hits = s.fast_hits;
  KCT_OK(rt, kct_run(k, ctx, b, N, out));
  assert_int_equal(kct_stats(rt).fast_hits, hits + 1);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* A pinned world keeps its code and definitions: after a collect, the
 * pinned thread still gets the old result without a compile, and a kernel
 * it never compiled still compiles from the old definitions. */
typedef struct {
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *b;
  pthread_barrier_t pinned, collected;
  float out[N], out2[N];
  kc_status st, st2;
  uint64_t compiles_before, compiles_after;
} pin_job;

static void *pinned_thread(void *arg) {
  pin_job *j = arg;
  kc_world w;
  j->st = kc_pin(j->rt, &w);
  kc_kernel *k = kc_kernel_create(j->rt, "k", NULL, &k) ? NULL : k;
  if (!j->st && k) j->st = kct_run(k, j->ctx, j->b, N, j->out); /* compiled at the pinned world */
  pthread_barrier_wait(&j->pinned); /* main redefines h, then collects */
  pthread_barrier_wait(&j->collected);
  j->compiles_before = kct_stats(j->rt).compiles;
  if (!j->st && k) j->st = kct_run(k, j->ctx, j->b, N, j->out);
  j->compiles_after = kct_stats(j->rt).compiles;
  kc_kernel *k2 = kc_kernel_create(j->rt, "k2", NULL, &k2) ? NULL : k2;
  j->st2 = k2 ? kct_run(k2, j->ctx, j->b, N, j->out2) : KC_ENOMEM;
  kc_kernel_destroy(k2);
  kc_kernel_destroy(k);
  kc_unpin(j->rt);
  return NULL;
}

static void test_pinned_world_survives_collect(void **state) {
  (void)state;
  pin_job j = {0};
  j.rt = kct_runtime(NULL);
  j.ctx = kct_context(j.rt);
  j.b = kct_buffer(j.rt, j.ctx, N);
  define_h(j.rt, 1);
  kct_define(j.rt, "k", kernel_src);
  kct_define(j.rt, "k2", "KC_KERNEL void k2(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(0.0f); }");
  pthread_barrier_init(&j.pinned, NULL, 2);
  pthread_barrier_init(&j.collected, NULL, 2);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pinned_thread, &j), 0);
  pthread_barrier_wait(&j.pinned);
  define_h(j.rt, 2);
  define_h(j.rt, 3);
  kc_kernel *k = kct_kernel(j.rt, "k", NULL);
  float out[N];
  KCT_OK(j.rt, kct_run(k, j.ctx, j.b, N, out));
  expect_version(out, 3);
  kc_collect_info info;
  KCT_OK(j.rt, kc_collect(j.rt, &info));
  /* world of h=2 was never used by anyone: only its definition goes; the
   * pinned world's code (h=1) and the latest (h=3) stay */
  assert_int_equal(info.code_instances, 0);
  assert_int_equal(info.definitions, 1);
  pthread_barrier_wait(&j.collected);
  pthread_join(t, NULL);
  KCT_OK(j.rt, j.st);
  expect_version(j.out, 1);
  assert_int_equal(j.compiles_after, j.compiles_before);
  KCT_OK(j.rt, j.st2);
  for (int i = 0; i < N; i++) assert_float_equal(j.out2[i], 1.0f, 0); /* h(0) with h=1 */
  /* unpinned now: the old world's code and h=1 go at the next collect */
  KCT_OK(j.rt, kc_collect(j.rt, &info));
  assert_int_equal(info.code_instances, 2);
  assert_int_equal(info.definitions, 1);
  KCT_OK(j.rt, kct_run(k, j.ctx, j.b, N, out));
  expect_version(out, 3);
  pthread_barrier_destroy(&j.pinned);
  pthread_barrier_destroy(&j.collected);
  kc_kernel_destroy(k);
  kct_destroy(j.rt);
}

/* Collected code is never launched again: a handle whose cached entry
 * pointed at collected code relinks the current code; another context's
 * linked objects go too; undefined names leave nothing behind. */
static void test_collect_across_contexts(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *c1 = kct_context(rt), *c2 = kct_context(rt);
  kc_buffer *b1 = kct_buffer(rt, c1, N), *b2 = kct_buffer(rt, c2, N);
  define_h(rt, 1);
  kct_define(rt, "k", kernel_src);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  float out[N];
  KCT_OK(rt, kct_run(k, c1, b1, N, out));
  KCT_OK(rt, kct_run(k, c2, b2, N, out));
  define_h(rt, 2);
  KCT_OK(rt, kct_run(k, c1, b1, N, out)); /* only c1 moves on */
  expect_version(out, 2);
  kc_collect_info info;
  KCT_OK(rt, kc_collect(rt, &info));
  assert_int_equal(info.code_instances, 1);
  assert_int_equal(info.linked, 2); /* the old code was linked in both contexts */
  kc_stats s0 = kct_stats(rt);
  KCT_OK(rt, kct_run(k, c2, b2, N, out)); /* its entry pointed at collected code */
  expect_version(out, 2);
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.links, s0.links + 1);
  /* an undefined kernel: its definition goes once no live world sees it */
  KCT_OK(rt, kc_undefine(rt, "k", NULL));
  KCT_STATUS(rt, KC_ENOTFOUND, kct_run(k, c1, b1, N, out));
  KCT_OK(rt, kc_collect(rt, &info));
  assert_int_equal(info.code_instances, 1);
  assert_int_equal(info.definitions, 1);
  assert_int_equal(kct_stats(rt).definitions, 1); /* h */
  KCT_STATUS(rt, KC_EINVAL, kc_collect(NULL, NULL));
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  kct_memory_only();
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_hot_reload_stays_bounded),
      KCT_TEST(test_pinned_world_survives_collect),
      KCT_TEST(test_collect_across_contexts),
  };
  return KCT_RUN(tests);
}
