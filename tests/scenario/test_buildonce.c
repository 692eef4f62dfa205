/* SPDX-License-Identifier: MIT */
/*
 * test_buildonce.c -- the OpenCL backend builds a kernel once: a fresh
 * compile and its first launch in a context kcache made run one program
 * build (kc_stats.backend_builds counts clBuildProgram), and the links
 * that follow (a second context, a reset, threads with their own
 * contexts) reuse the compile's program and still compute the right thing,
 * with the kernel objects, buffers and queues of each context its own. A
 * context destroyed while another uses the same cl_context leaves the
 * other working. OpenCL backend only (PoCL here), without compile helpers.
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdlib.h>

#define N 64
#define NTHREADS 3

/* y[j] = j * 2 + 1 */
static kc_kernel *lin_kernel(kc_runtime *rt) {
  kct_define(rt, "lin",
             "KC_KERNEL void lin(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * 2.0f + "
             "1.0f; }");
  return kct_kernel(rt, "lin", NULL);
}

static void run_lin(kc_runtime *rt, kc_kernel *k, kc_context *ctx) {
  kc_buffer *b = kct_buffer(rt, ctx, N);
  float out[N];
  kct_run_ok(rt, k, ctx, b, N, out);
  kct_expect_linear(out, N, 2.0f, 1.0f);
  kc_buffer_destroy(b);
}

/* One compile, one build; every later link reuses the program. */
static void test_compile_and_links_build_once(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_kernel *k = lin_kernel(rt);
  kc_context *a = kct_context(rt);
  run_lin(rt, k, a);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 1);
  assert_int_equal(s.backend_builds, 1); /* before: 2 (source, then the binary) */

  kc_context *b = kct_context(rt);
  run_lin(rt, k, b);
  KCT_OK(rt, kc_context_reset(a)); /* drops a's kernel object: relinked */
  run_lin(rt, k, a);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 3);
  assert_int_equal(s.backend_builds, 1);

  /* b shares a's cl_context: destroying it leaves a working */
  kc_buffer *kept = kct_buffer(rt, a, N);
  kc_context_destroy(b);
  float out[N];
  kct_run_ok(rt, k, a, kept, N, out);
  kct_expect_linear(out, N, 2.0f, 1.0f);
  kc_buffer_destroy(kept);

  /* a redefinition is a new compile: one more build, still one per kernel */
  kct_define(
      rt, "lin",
      "KC_KERNEL void lin(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * 3.0f; }");
  kc_buffer *c = kct_buffer(rt, a, N);
  kct_run_ok(rt, k, a, c, N, out);
  kct_expect_linear(out, N, 3.0f, 0.0f);
  kc_buffer_destroy(c);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.backend_builds, 2);
  kct_destroy(rt);
}

typedef struct worker {
  kc_runtime *rt;
  kc_kernel *k;
  pthread_barrier_t *bar;
  kct_report r;
} worker;

/* Each thread makes its own context and launches the same kernel. */
static void *work(void *arg) {
  worker *w = arg;
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  if (kc_context_create(w->rt, 0, &ctx) || kc_buffer_create(ctx, N * sizeof(float), &b))
    kct_report_fail(&w->r, "context or buffer: %s", kc_errmsg(w->rt));
  pthread_barrier_wait(w->bar);
  float out[N];
  for (int round = 0; round < 3 && b; round++) {
    kc_status st = kct_run(w->k, ctx, b, N, out);
    if (st) kct_report_fail(&w->r, "launch: %s: %s", kc_status_name(st), kc_errmsg(w->rt));
    for (int j = 0; j < N && !st; j++)
      if (out[j] != (float)j * 2.0f + 1.0f && kct_report_fail(&w->r, "element %d is %g", j, (double)out[j]))
        break;
    if (round == 1 && kc_context_reset(ctx)) kct_report_fail(&w->r, "reset: %s", kc_errmsg(w->rt));
  }
  if (b) kc_buffer_destroy(b);
  if (ctx) kc_context_destroy(ctx);
  return NULL;
}

/* Threads compile (single flight) and link in their own contexts at once:
 * one compile, one build, every result right. Run under TSan too. */
static void test_threads_share_the_build(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_kernel *k = lin_kernel(rt);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NTHREADS);
  worker w[NTHREADS];
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (worker){.rt = rt, .k = k, .bar = &bar};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < NTHREADS; i++) kct_report_check("worker", &w[i].r);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 2 * NTHREADS);
  assert_int_equal(s.backend_builds, 1);
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_only(argc, argv, KC_BACKEND_OPENCL, "OpenCL");
  if (rc >= 0) return rc;
  /* builds in this process: a compile helper's build would be a second
   * clBuildProgram here, of its binary, at the first link (test_clhelp) */
  setenv("KC_OPENCL_HELPERS", "0", 1);
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_compile_and_links_build_once),
      KCT_TEST(test_threads_share_the_build),
  };
  return KCT_RUN(tests);
}
