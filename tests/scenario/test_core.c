/* SPDX-License-Identifier: MIT */
/*
 * test_core.c -- the single-threaded scenarios of the world-age cache, on the
 * backend named on the command line: compile once then hit the fast path,
 * unrelated definitions, callee and kernel redefinitions, specializations,
 * context reset and destroy, identical redefinitions, pins, the assembled
 * source, and zero allocations per cached launch.
 *
 * Every test makes its own runtime, so the counters start at zero.
 */
#include "kc_test.h"

#include <stdatomic.h>
#include <stdlib.h>

#define N KCT_FX_N /* floats in the fixture's buffer */

/* k calls h; element i of the output is h(i). */
static const char SRC_H1[] = "KC_DEVICE float h(float x) { return x + 1.0f; }";
static const char SRC_H2[] = "KC_DEVICE float h(float x) { return x + 2.0f; }";
static const char SRC_K[] = "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
                            "  size_t i = kc_global_id(0);\n"
                            "  y[i] = h((float)i);\n"
                            "}\n";
/* k2 calls nothing. */
static const char SRC_K2[] = "KC_KERNEL void k2(KC_GLOBAL float *y) { y[kc_global_id(0)] = 7.0f; }";
/* kt calls g, which calls h. */
static const char SRC_G[] = "KC_DEVICE float g(float x) { return 10.0f * h(x); }";
static const char SRC_KT[] =
    "KC_KERNEL void kt(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = g((float)i); }";
static const char SRC_U[] = "KC_DEVICE float u(float x) { return 3.0f * x; }";

/* Launches k on the fixture's buffer and fails unless out[i] == i*scale+add. */
static void run_expect(kct_fixture *f, kc_kernel *k, float scale, float add) {
  memset(f->out, 0, sizeof f->out);
  kct_run_ok(f->rt, k, f->ctx, f->buf, N, f->out);
  kct_expect_linear(f->out, N, scale, add);
}

/* ---------------------------------------------------------- scenario 1 */

static void test_first_launch_compiles_once(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = kct_define_kernel(f->rt, "h", SRC_H1, "k", SRC_K);
  kc_stats s0 = kct_stats(f->rt);
  assert_int_equal(s0.compiles, 0);
  assert_int_equal(s0.links, 0);
  assert_int_equal(s0.code_instances, 0);
  assert_int_equal(s0.world, kc_world_latest(f->rt));

  run_expect(f, k, 1, 1);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compiles, 1);
  assert_int_equal(s1.compile_failures, 0);
  assert_int_equal(s1.links, 1);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups + 1);
  assert_int_equal(s1.fast_hits, s0.fast_hits);
  assert_int_equal(s1.code_instances, 1);

  run_expect(f, k, 1, 1);
  kc_stats s2 = kct_stats(f->rt);
  assert_int_equal(s2.compiles, 1);
  assert_int_equal(s2.links, 1);
  assert_int_equal(s2.fast_hits, s1.fast_hits + 1);
  assert_int_equal(s2.slow_lookups, s1.slow_lookups);
  assert_int_equal(s2.world, s1.world);
}

/* A second handle on the same specialization shares the compiled code. */
static void test_second_handle_shares_code(void **state) {
  kct_fixture *f = *state;
  kc_kernel *a = kct_define_kernel(f->rt, "h", SRC_H1, "k", SRC_K);
  kc_kernel *b = kct_kernel(f->rt, "k", "");
  run_expect(f, a, 1, 1);
  run_expect(f, b, 1, 1);
  kc_stats s = kct_stats(f->rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 1); /* linked objects are per context and code instance */
  assert_int_equal(kct_code(f->rt, a).id, kct_code(f->rt, b).id);
  /* fast-path hits of destroyed handles still count */
  run_expect(f, b, 1, 1);
  kc_kernel_destroy(b);
  assert_int_equal(kct_stats(f->rt).fast_hits, s.fast_hits + 1);
}

/* ---------------------------------------------------------- scenario 2 */

static void test_unrelated_definition_revalidates(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = kct_define_kernel(f->rt, "h", SRC_H1, "k", SRC_K);
  run_expect(f, k, 1, 1);
  run_expect(f, k, 1, 1);
  kc_code_info c0 = kct_code(f->rt, k);
  kc_stats s0 = kct_stats(f->rt);

  kc_world w = kct_define(f->rt, "u", SRC_U);
  assert_int_equal(w, s0.world + 1);
  assert_int_equal(kc_world_latest(f->rt), w);
  assert_int_equal(kc_world_current(f->rt), w);

  /* No slow path at all: the fast path checks the code instance's range,
   * which an unrelated definition leaves open. No compile, no link. */
  run_expect(f, k, 1, 1);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.world, w);
  assert_int_equal(s1.defines, s0.defines + 1);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.links, s0.links);
  assert_int_equal(s1.invalidations, s0.invalidations);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups);
  assert_int_equal(s1.fast_hits, s0.fast_hits + 1);

  for (int i = 0; i < 3; i++) run_expect(f, k, 1, 1); /* the fast path again */
  kc_stats s2 = kct_stats(f->rt);
  assert_int_equal(s2.fast_hits, s1.fast_hits + 3);
  assert_int_equal(s2.slow_lookups, s1.slow_lookups);
  assert_int_equal(s2.compiles, s0.compiles);
  assert_int_equal(s2.links, s0.links);

  kc_code_info c1 = kct_code(f->rt, k);
  assert_int_equal(c1.id, c0.id);
  assert_int_equal(c1.min_world, c0.min_world);
  assert_true(c1.max_world == KC_WORLD_FOREVER);
  assert_true(c1.min_world <= w);
}

/* ---------------------------------------------------------- scenario 3 */

static void test_callee_redefinition_recompiles_dependents_only(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "h", SRC_H1);
  kct_define(f->rt, "g", SRC_G);
  kct_define(f->rt, "k", SRC_K);
  kct_define(f->rt, "k2", SRC_K2);
  kct_define(f->rt, "kt", SRC_KT);
  kc_kernel *k = kct_kernel(f->rt, "k", NULL);
  kc_kernel *k2 = kct_kernel(f->rt, "k2", NULL);
  kc_kernel *kt = kct_kernel(f->rt, "kt", NULL);
  run_expect(f, k, 1, 1);
  run_expect(f, k2, 0, 7);
  run_expect(f, kt, 10, 10);
  kc_code_info ck = kct_code(f->rt, k), ck2 = kct_code(f->rt, k2), ckt = kct_code(f->rt, kt);
  kc_stats s0 = kct_stats(f->rt);
  assert_int_equal(s0.compiles, 3);

  kc_world w = kct_define(f->rt, "h", SRC_H2);
  assert_int_equal(w, s0.world + 1);
  kc_stats s1 = kct_stats(f->rt);
  /* k (direct) and kt (through g) were clipped; k2 was not */
  assert_int_equal(s1.invalidations, s0.invalidations + 2);
  assert_int_equal(s1.compiles, s0.compiles); /* lazily: nothing compiled yet */

  run_expect(f, k, 1, 2);
  run_expect(f, kt, 10, 20);
  run_expect(f, k2, 0, 7);
  kc_stats s2 = kct_stats(f->rt);
  assert_int_equal(s2.compiles, s0.compiles + 2);
  assert_int_equal(s2.links, s0.links + 2);
  assert_int_equal(kct_code(f->rt, k2).id, ck2.id);
  assert_int_not_equal(kct_code(f->rt, k).id, ck.id);
  assert_int_not_equal(kct_code(f->rt, kt).id, ckt.id);
  assert_int_equal(kct_code(f->rt, k).min_world, w);
  assert_true(kct_code(f->rt, k2).max_world == KC_WORLD_FOREVER);

  /* k2 went through the slow path once and then hits the fast path */
  run_expect(f, k2, 0, 7);
  assert_int_equal(kct_stats(f->rt).fast_hits, s2.fast_hits + 1);
}

/* ---------------------------------------------------------- scenario 4 */

static void test_kernel_redefinition_recompiles_it(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = kct_define_kernel(f->rt, "h", SRC_H1, "k", SRC_K);
  run_expect(f, k, 1, 1);
  kc_code_info c0 = kct_code(f->rt, k);
  kc_stats s0 = kct_stats(f->rt);

  kct_define(f->rt, "k",
             "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
             "  size_t i = kc_global_id(0);\n"
             "  y[i] = 10.0f * h((float)i);\n"
             "}\n");
  run_expect(f, k, 10, 10);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compiles, s0.compiles + 1);
  assert_int_equal(s1.invalidations, s0.invalidations + 1);
  assert_int_equal(s1.links, s0.links + 1);
  kc_code_info c1 = kct_code(f->rt, k);
  assert_int_not_equal(c1.id, c0.id);
  assert_int_equal(c1.min_world, s1.world);

  /* a new signature: the cached launch with the old arguments is refused,
   * the new ones work */
  kct_define(f->rt, "k",
             "KC_KERNEL void k(KC_GLOBAL float *y, float a) {\n"
             "  size_t i = kc_global_id(0);\n"
             "  y[i] = a * h((float)i);\n"
             "}\n");
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  kc_arg old_args[] = {KC_ARG_BUF(f->buf)};
  KCT_STATUS(f->rt, KC_EARGS, kc_launch(k, f->ctx, &grid, &block, old_args, 1));
  float a = 3.0f;
  kc_arg new_args[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a)};
  KCT_OK(f->rt, kc_launch(k, f->ctx, &grid, &block, new_args, 2));
  KCT_OK(f->rt, kc_context_finish(f->ctx));
  KCT_OK(f->rt, kc_buffer_read(f->buf, 0, f->out, sizeof f->out));
  kct_expect_linear(f->out, N, 3, 3);
  assert_int_equal(kct_stats(f->rt).compiles, s1.compiles + 1);
}

/* Compile options reach the compiler: -D works on every backend. */
static void test_compile_options(void **state) {
  (void)state;
  kc_options opt;
  kc_options_init(&opt);
  opt.compile_options = "-DEXTRA_VALUE=5";
  kc_runtime *rt = kct_runtime(&opt);
  kc_context *ctx = kct_context(rt);
  kc_buffer *buf = kct_buffer(rt, ctx, 1);
  kct_define(rt, "ke", "KC_KERNEL void ke(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)EXTRA_VALUE; }");
  kc_kernel *k = kct_kernel(rt, "ke", NULL);
  assert_true(kct_run_ok(rt, k, ctx, buf, 1, NULL) == 5.0f);
  kct_destroy(rt);
}

/* ---------------------------------------------------------- scenario 5 */

/* Pinned in the same thread: the old world keeps its code and its
 * definitions (the multi-threaded version is in test_threads.c). */
static void test_pinned_world_keeps_old_code(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "h", SRC_H1);
  kct_define(f->rt, "k", SRC_K);
  kct_define(f->rt, "g", SRC_G);
  kct_define(f->rt, "kt", SRC_KT);
  kc_kernel *k = kct_kernel(f->rt, "k", NULL);
  kc_kernel *kt = kct_kernel(f->rt, "kt", NULL);
  run_expect(f, k, 1, 1);
  kc_code_info old = kct_code(f->rt, k);

  kc_world pinned = 0;
  KCT_OK(f->rt, kc_pin(f->rt, &pinned));
  assert_int_equal(pinned, kc_world_latest(f->rt));
  kc_world w = kct_define(f->rt, "h", SRC_H2);
  assert_int_equal(w, pinned + 1);
  assert_int_equal(kc_world_current(f->rt), pinned);

  run_expect(f, k, 1, 1); /* still h1 */
  kc_code_info ci = kct_code(f->rt, k);
  assert_int_equal(ci.id, old.id);
  assert_int_equal(ci.max_world, pinned);
  assert_true(ci.min_world <= pinned);
  kc_stats s0 = kct_stats(f->rt);
  run_expect(f, kt, 10, 10); /* never compiled before: from h1, as of the pin */
  assert_int_equal(kct_stats(f->rt).compiles, s0.compiles + 1);
  assert_int_equal(kct_code(f->rt, kt).max_world, pinned);
  char *src = NULL; /* the source as of the pinned world */
  KCT_OK(f->rt, kc_kernel_source(k, &src));
  KCT_CONTAINS(src, SRC_H1);
  if (strstr(src, SRC_H2)) fail_msg("the pinned world's source has the new h:\n%s", src);
  kc_free(f->rt, src);
  KCT_OK(f->rt, kc_unpin(f->rt));
  KCT_OK(f->rt, kc_kernel_source(k, &src));
  KCT_CONTAINS(src, SRC_H2);
  kc_free(f->rt, src);

  assert_int_equal(kc_world_current(f->rt), w);
  run_expect(f, k, 1, 2);
  run_expect(f, kt, 10, 20);
  assert_true(kct_code(f->rt, k).max_world == KC_WORLD_FOREVER);
}

static void test_pins_nest(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_world w1 = kc_world_latest(rt);
  assert_int_equal(w1, 1); /* the first world of a runtime */
  KCT_STATUS(rt, KC_EBUSY, kc_unpin(rt)); /* no pin */
  kc_world p1 = 0, p2 = 0;
  KCT_OK(rt, kc_pin(rt, &p1));
  assert_int_equal(p1, w1);
  kc_world w2 = kct_define(rt, "u", SRC_U);
  assert_int_equal(w2, w1 + 1);
  assert_int_equal(kc_world_current(rt), w1);
  KCT_OK(rt, kc_pin(rt, &p2));
  assert_int_equal(p2, w1); /* the outer pin's world */
  KCT_OK(rt, kc_unpin(rt));
  assert_int_equal(kc_world_current(rt), w1); /* still pinned once */
  KCT_OK(rt, kc_unpin(rt));
  assert_int_equal(kc_world_current(rt), w2);
  KCT_STATUS(rt, KC_EBUSY, kc_unpin(rt));
  KCT_CONTAINS(kc_errmsg(rt), "pin");

  /* one runtime at a time per thread */
  kc_runtime *rt2 = kct_runtime(NULL);
  KCT_OK(rt, kc_pin(rt, NULL));
  KCT_STATUS(rt2, KC_EBUSY, kc_pin(rt2, NULL));
  KCT_STATUS(rt2, KC_EBUSY, kc_unpin(rt2));
  assert_int_equal(kc_world_current(rt2), kc_world_latest(rt2));
  KCT_OK(rt, kc_unpin(rt));
  KCT_OK(rt2, kc_pin(rt2, NULL));
  KCT_OK(rt2, kc_unpin(rt2));
  kct_destroy(rt2);
  kct_destroy(rt);
}

/* ------------------------------------------------------- bound arguments */

/* kb(y, a, n): y[i] = a * h(i) + n */
static const char SRC_KB[] = "KC_KERNEL void kb(KC_GLOBAL float *y, float a, int n) {\n"
                             "  size_t i = kc_global_id(0);\n"
                             "  y[i] = a * h((float)i) + (float)n;\n"
                             "}\n";
/* the same name and parameters, another body */
static const char SRC_KB2[] = "KC_KERNEL void kb(KC_GLOBAL float *y, float a, int n) {\n"
                              "  size_t i = kc_global_id(0);\n"
                              "  y[i] = a * h((float)i) - (float)n;\n"
                              "}\n";
/* one parameter more */
static const char SRC_KB3[] = "KC_KERNEL void kb(KC_GLOBAL float *y, float a, int n, int m) {\n"
                              "  size_t i = kc_global_id(0);\n"
                              "  y[i] = a * h((float)i) + (float)(n * m);\n"
                              "}\n";

static void expect_run_args(kct_fixture *f, kc_args *a, float scale, float add) {
  memset(f->out, 0, sizeof f->out);
  KCT_OK(f->rt, kct_run_args(a, f->ctx, f->buf, N, f->out));
  kct_expect_linear(f->out, N, scale, add);
}

static void test_bound_arguments(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = kct_define_kernel(f->rt, "h", SRC_H1, "kb", SRC_KB);
  float a = 2.0f;
  int n = 5;
  kc_arg args[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a), KC_ARG_VAL(n)};
  kc_args *bound = NULL;
  KCT_OK(f->rt, kc_args_create(k, f->ctx, args, 3, &bound));
  assert_non_null(bound);
  assert_int_equal(kct_stats(f->rt).compiles, 1); /* binding compiled it, to check the arguments */
  a = 100.0f, n = 100; /* scalars were copied when bound */
  expect_run_args(f, bound, 2, 2 + 5); /* 2 * (i + 1) + 5 */

  /* the cached path: no lookups, no compiles, no links */
  kc_stats s0 = kct_stats(f->rt);
  for (int i = 0; i < 3; i++) expect_run_args(f, bound, 2, 7);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.fast_hits, s0.fast_hits + 3);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.links, s0.links);

  /* kc_launch of the same handle shares the code and the link */
  float one = 1.0f;
  int zero = 0;
  kc_arg args1[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(one), KC_ARG_VAL(zero)};
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1};
  KCT_OK(f->rt, kc_launch(k, f->ctx, &g, &b, args1, 3));
  KCT_OK(f->rt, kc_context_finish(f->ctx));
  KCT_OK(f->rt, kc_buffer_read(f->buf, 0, f->out, sizeof f->out));
  kct_expect_linear(f->out, N, 1, 1);
  assert_int_equal(kct_stats(f->rt).links, s0.links);

  /* kc_args_set replaces one argument */
  float a2 = 3.0f;
  KCT_OK(f->rt, kc_args_set(bound, 1, KC_ARG_VAL(a2)));
  expect_run_args(f, bound, 3, 3 + 5);
  kc_buffer *other = kct_buffer(f->rt, f->ctx, N);
  KCT_OK(f->rt, kc_args_set(bound, 0, KC_ARG_BUF(other)));
  KCT_OK(f->rt, kc_launch_args(bound, &g, &b));
  KCT_OK(f->rt, kc_context_finish(f->ctx));
  float out2[N];
  KCT_OK(f->rt, kc_buffer_read(other, 0, out2, sizeof out2));
  kct_expect_linear(out2, N, 3, 8);
  KCT_OK(f->rt, kc_args_set(bound, 0, KC_ARG_BUF(f->buf)));

  /* a callee redefined: the new code has the same parameters, the bound
   * arguments serve it */
  kct_define(f->rt, "h", SRC_H2);
  expect_run_args(f, bound, 3, 6 + 5); /* 3 * (i + 2) + 5 */
  /* the kernel redefined with the same parameters: likewise */
  kct_define(f->rt, "kb", SRC_KB2);
  expect_run_args(f, bound, 3, 6 - 5);
  assert_int_equal(kct_stats(f->rt).compiles, 3);

  /* pinned: the old world's code, with the same bound arguments */
  kc_world pinned;
  KCT_OK(f->rt, kc_pin(f->rt, &pinned));
  kct_define(f->rt, "h", SRC_H1);
  expect_run_args(f, bound, 3, 1); /* still h2 and kb2 */
  KCT_OK(f->rt, kc_unpin(f->rt));
  expect_run_args(f, bound, 3, 3 - 5);

  /* parameters changed: the launch fails and says which argument is missing */
  kct_define(f->rt, "kb", SRC_KB3);
  KCT_STATUS(f->rt, KC_EARGS, kc_launch_args(bound, &g, &b));
  KCT_CONTAINS(kc_errmsg(f->rt), "changed since the arguments were bound");
  KCT_CONTAINS(kc_errmsg(f->rt), "takes 4 arguments, 3 given");
  /* and back: the same parameters as bound */
  kct_define(f->rt, "kb", SRC_KB);
  expect_run_args(f, bound, 3, 3 + 5);

  /* a reset context relinks without compiling */
  kc_stats s2 = kct_stats(f->rt);
  KCT_OK(f->rt, kc_context_reset(f->ctx));
  expect_run_args(f, bound, 3, 8);
  kc_stats s3 = kct_stats(f->rt);
  assert_int_equal(s3.compiles, s2.compiles);
  assert_int_equal(s3.links, s2.links + 1);

  /* two bindings of one kernel; destroying the kernel destroys its
   * bindings (the leak check of the ASan build sees the rest) */
  kc_args *second = NULL;
  kc_arg args2[] = {KC_ARG_BUF(other), KC_ARG_VAL(one), KC_ARG_VAL(zero)};
  KCT_OK(f->rt, kc_args_create(k, f->ctx, args2, 3, &second));
  KCT_OK(f->rt, kct_run_args(second, f->ctx, other, N, out2));
  kct_expect_linear(out2, N, 1, 1);
  expect_run_args(f, bound, 3, 8);
  kc_args_destroy(second);
  kc_args_destroy(NULL);
  kc_kernel_destroy(k);
}

/* ---------------------------------------------------------- scenario 7 */

static const char SRC_KS[] = "KC_KERNEL void ks(KC_GLOBAL float *y) {\n"
                             "  size_t i = kc_global_id(0);\n"
                             "  T one = (T)1, tiny = (T)1e-10;\n"
                             "  y[i] = i == 0 ? (float)sizeof(T) : (float)(one + tiny != one);\n"
                             "}\n";
static const char SRC_KN[] =
    "KC_KERNEL void kn(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)(N * sizeof(T)); }";

static void test_specializations(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "ks", SRC_KS);
  kct_define(f->rt, "kn", SRC_KN);
  kc_kernel *kf = kct_kernel(f->rt, "ks", "T=float");
  kc_kernel *kd = kct_kernel(f->rt, "ks", "T=double");
  kct_run_ok(f->rt, kf, f->ctx, f->buf, 2, f->out);
  assert_true(f->out[0] == 4.0f); /* sizeof(float) */
  assert_true(f->out[1] == 0.0f); /* 1 + 1e-10 rounds to 1 in float */
  kct_run_ok(f->rt, kd, f->ctx, f->buf, 2, f->out);
  assert_true(f->out[0] == 8.0f);
  assert_true(f->out[1] == 1.0f);
  kc_stats s = kct_stats(f->rt);
  assert_int_equal(s.compiles, 2);
  assert_int_not_equal(kct_code(f->rt, kf).id, kct_code(f->rt, kd).id);

  /* order and blanks do not matter */
  kc_kernel *a = kct_kernel(f->rt, "kn", "T=float,N=4");
  kc_kernel *b = kct_kernel(f->rt, "kn", "N=4,T=float");
  kc_kernel *c = kct_kernel(f->rt, "kn", " N = 4 , T=float ");
  assert_true(kct_run_ok(f->rt, a, f->ctx, f->buf, 1, NULL) == 16.0f);
  assert_int_equal(kct_stats(f->rt).compiles, s.compiles + 1);
  assert_true(kct_run_ok(f->rt, b, f->ctx, f->buf, 1, NULL) == 16.0f);
  assert_true(kct_run_ok(f->rt, c, f->ctx, f->buf, 1, NULL) == 16.0f);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compiles, s.compiles + 1);
  assert_int_equal(s1.links, s.links + 1);
  uint64_t id = kct_code(f->rt, a).id;
  assert_int_equal(kct_code(f->rt, b).id, id);
  assert_int_equal(kct_code(f->rt, c).id, id);

  /* a different value is a different specialization */
  kc_kernel *d = kct_kernel(f->rt, "kn", "N=2,T=double");
  assert_true(kct_run_ok(f->rt, d, f->ctx, f->buf, 1, NULL) == 16.0f);
  assert_int_equal(kct_stats(f->rt).compiles, s1.compiles + 1);
  assert_int_not_equal(kct_code(f->rt, d).id, id);
}

static void test_bad_params_strings(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  static const char *const bad[] = {"T",        "=x",       "T=a,T=b", "1T=x",  "T=",    "T=float,",
                                    ",T=float", "T=a,,N=1", "T=a=b",   "T-1=x", "T=a\nb"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kc_kernel *k = (kc_kernel *)&k; /* must be cleared */
    kc_status st = kc_kernel_create(rt, "k", bad[i], &k);
    if (st != KC_EINVAL) fail_msg("params \"%s\": %s, expected KC_EINVAL", bad[i], kc_status_name(st));
    assert_null(k);
    assert_true(strlen(kc_errmsg(rt)) > 0);
  }
  kct_destroy(rt);
}

/* ---------------------------------------------------------- scenario 8 */

static void test_context_reset_relinks_without_compiling(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = kct_define_kernel(f->rt, "h", SRC_H1, "k", SRC_K);
  run_expect(f, k, 1, 1);
  run_expect(f, k, 1, 1);
  kc_buffer *keep = kct_buffer(f->rt, f->ctx, 4);
  const float pattern[4] = {1.5f, -2.0f, 3.25f, 4.0f};
  KCT_OK(f->rt, kc_buffer_write(keep, 0, pattern, sizeof pattern));
  uint64_t id = kc_context_id(f->ctx);
  kc_stats s0 = kct_stats(f->rt);

  KCT_OK(f->rt, kc_context_reset(f->ctx));
  assert_int_equal(kc_context_id(f->ctx), id); /* same context, new generation */
  float back[4] = {0};
  KCT_OK(f->rt, kc_buffer_read(keep, 0, back, sizeof back)); /* buffers survive a reset */
  assert_memory_equal(back, pattern, sizeof pattern);

  run_expect(f, k, 1, 1);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.links, s0.links + 1);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups + 1);
  assert_int_equal(s1.fast_hits, s0.fast_hits);
  run_expect(f, k, 1, 1);
  assert_int_equal(kct_stats(f->rt).fast_hits, s1.fast_hits + 1);
}

static void test_context_destroy_never_reuses_linked_objects(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  kc_context *c1 = kct_context(rt);
  kc_buffer *b1 = kct_buffer(rt, c1, N);
  float out[N];
  kct_run_ok(rt, k, c1, b1, N, out);
  kct_expect_linear(out, N, 1, 1);
  kct_run_ok(rt, k, c1, b1, N, out); /* the handle caches (c1, world) now */
  uint64_t id1 = kc_context_id(c1);
  kc_stats s0 = kct_stats(rt);

  kc_context_destroy(c1); /* frees b1 too */
  assert_int_equal(kc_context_id(c1), 0);
  kc_dim3 one = {1, 1, 1};
  KCT_STATUS(rt, KC_EDESTROYED, kc_launch(k, c1, &one, &one, NULL, 0));
  KCT_CONTAINS(kc_errmsg(rt), "destroyed");
  KCT_STATUS(rt, KC_EDESTROYED, kc_context_finish(c1));
  KCT_STATUS(rt, KC_EDESTROYED, kc_context_reset(c1));
  kc_buffer *nb = (kc_buffer *)&nb;
  KCT_STATUS(rt, KC_EDESTROYED, kc_buffer_create(c1, 16, &nb));
  assert_null(nb);
  kc_context_destroy(c1); /* twice: nothing */

  kc_context *c2 = kct_context(rt);
  if (c2 == c1) print_message("the new context reuses the destroyed one's memory\n");
  assert_int_not_equal(kc_context_id(c2), id1);
  kc_buffer *b2 = kct_buffer(rt, c2, N);
  kct_run_ok(rt, k, c2, b2, N, out);
  kct_expect_linear(out, N, 1, 1);
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.links, s0.links + 1);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.fast_hits, s0.fast_hits);

  /* and once more through a third context, after destroying the second */
  kc_context_destroy(c2);
  kc_context *c3 = kct_context(rt);
  kc_buffer *b3 = kct_buffer(rt, c3, N);
  kct_run_ok(rt, k, c3, b3, N, out);
  kct_expect_linear(out, N, 1, 1);
  assert_int_equal(kct_stats(rt).links, s1.links + 1);
  kct_destroy(rt);
}

/* Two live contexts: each links its own copy, the compiled code is shared. */
static void test_two_contexts_share_compiled_code(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  kc_context *c1 = kct_context(rt), *c2 = kct_context(rt);
  assert_ptr_not_equal(c1, c2);
  assert_int_not_equal(kc_context_id(c1), kc_context_id(c2));
  kc_buffer *b1 = kct_buffer(rt, c1, N), *b2 = kct_buffer(rt, c2, N);
  float out[N];
  for (int round = 0; round < 2; round++) {
    kct_run_ok(rt, k, c1, b1, N, out);
    kct_expect_linear(out, N, 1, 1);
    kct_run_ok(rt, k, c2, b2, N, out);
    kct_expect_linear(out, N, 1, 1);
  }
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 2);
  assert_true(s.slow_lookups >= 2);
  assert_int_equal(s.slow_lookups + s.fast_hits, 4);
  /* a buffer of one context is not an argument in another */
  kc_dim3 g = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b1)};
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, c2, &g, &g, args, 1));
  kct_destroy(rt);
}

/* --------------------------------------------------------- scenario 11 */

static void test_identical_redefinition_is_a_no_op(void **state) {
  kct_fixture *f = *state;
  kc_world wh = kct_define(f->rt, "h", SRC_H1);
  kc_world wk = kct_define(f->rt, "k", SRC_K);
  assert_int_equal(wk, wh + 1);
  kc_kernel *k = kct_kernel(f->rt, "k", NULL);
  run_expect(f, k, 1, 1);
  run_expect(f, k, 1, 1);
  kc_code_info c0 = kct_code(f->rt, k);
  kc_stats s0 = kct_stats(f->rt);

  kc_world w = 0;
  KCT_OK(f->rt, kc_define(f->rt, "h", SRC_H1, &w));
  assert_int_equal(w, s0.world); /* the current world comes back */
  KCT_OK(f->rt, kc_define(f->rt, "k", SRC_K, &w));
  assert_int_equal(w, s0.world);
  /* a copy of the text, not the same pointer */
  char *copy = strdup(SRC_H1);
  assert_non_null(copy);
  KCT_OK(f->rt, kc_define(f->rt, "h", copy, NULL));
  free(copy);
  assert_int_equal(kc_world_latest(f->rt), s0.world);

  run_expect(f, k, 1, 1);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.world, s0.world);
  assert_int_equal(s1.defines, s0.defines);
  assert_int_equal(s1.invalidations, s0.invalidations);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups); /* not even the slow path */
  assert_int_equal(s1.fast_hits, s0.fast_hits + 1);
  assert_int_equal(kct_code(f->rt, k).id, c0.id);

  /* one character more is a change */
  kc_world w2 = kct_define(f->rt, "h", "KC_DEVICE float h(float x) { return x + 1.0f; } ");
  assert_int_equal(w2, s0.world + 1);
  assert_int_equal(kct_stats(f->rt).invalidations, s0.invalidations + 1);
}

/* ---------------------------------------------------- introspection */

static void test_kernel_source_in_dependency_order(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "k", SRC_K); /* defined before its callee: order comes from calls */
  kct_define(rt, "h", SRC_H1);
  kct_define(rt, "u", SRC_U);
  kc_kernel *k = kct_kernel(rt, "k", "T=float,N=4");
  char *src = NULL;
  KCT_OK(rt, kc_kernel_source(k, &src));
  assert_non_null(src);
  const char *lh = strstr(src, "#line 1 \"h\"");
  const char *lk = strstr(src, "#line 1 \"k\"");
  if (!lh || !lk || lh > lk) fail_msg("expected #line 1 \"h\" before #line 1 \"k\" in:\n%s", src);
  KCT_CONTAINS(src, "#define T float");
  KCT_CONTAINS(src, "#define N 4");
  KCT_CONTAINS(src, SRC_H1);
  KCT_CONTAINS(src, SRC_K);
  if (strstr(src, SRC_U)) fail_msg("the unrelated u is in the closure:\n%s", src);
  /* the parameters come before the closure */
  assert_true(strstr(src, "#define T float") < lh);
  kc_free(rt, src);

  /* three levels: h, then g, then kt */
  kc_kernel *kt = kct_define_kernel(rt, "g", SRC_G, "kt", SRC_KT);
  KCT_OK(rt, kc_kernel_source(kt, &src));
  const char *a = strstr(src, "#line 1 \"h\""), *b = strstr(src, "#line 1 \"g\""),
             *c = strstr(src, "#line 1 \"kt\"");
  if (!a || !b || !c || !(a < b && b < c)) fail_msg("expected h, g, kt in that order in:\n%s", src);
  kc_free(rt, src);

  /* the same text as the compiled code instance, once compiled */
  kc_context *ctx = kct_context(rt);
  kc_buffer *buf = kct_buffer(rt, ctx, 1);
  KCT_OK(rt, kc_kernel_source(k, &src));
  kct_run_ok(rt, k, ctx, buf, 1, NULL);
  char *src2 = NULL;
  KCT_OK(rt, kc_kernel_source(k, &src2));
  assert_string_equal(src, src2);
  kc_free(rt, src);
  kc_free(rt, src2);
  kc_code_info ci = kct_code(rt, k);
  assert_non_null(ci.artifact);
  assert_true(ci.artifact_size > 0);
  kct_destroy(rt);
}

/* --------------------------------------------------------- allocations */

typedef struct counting {
  _Atomic uint64_t allocs; /* new blocks */
  _Atomic uint64_t reallocs; /* resized blocks */
  _Atomic uint64_t frees;
} counting;

static void *counting_alloc(void *ud, void *p, size_t n) {
  counting *c = ud;
  if (n == 0) {
    if (p) atomic_fetch_add(&c->frees, 1);
    free(p);
    return NULL;
  }
  atomic_fetch_add(p ? &c->reallocs : &c->allocs, 1);
  return realloc(p, n);
}

static void test_cached_launch_allocates_nothing(void **state) {
  (void)state;
  static counting cnt; /* static: the teardown may destroy the runtime after this returns */
  memset(&cnt, 0, sizeof cnt);
  kc_options opt;
  kc_options_init(&opt);
  opt.alloc = counting_alloc;
  opt.alloc_ud = &cnt;
  kc_runtime *rt = kct_runtime(&opt);
  assert_true(atomic_load(&cnt.allocs) > 0); /* the runtime itself comes from the hook */
  kc_context *ctx = kct_context(rt);
  kc_buffer *buf = kct_buffer(rt, ctx, N);
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  float out[N];
  kct_run_ok(rt, k, ctx, buf, N, out);
  kct_run_ok(rt, k, ctx, buf, N, out);
  kc_stats s0 = kct_stats(rt);

  uint64_t a0 = atomic_load(&cnt.allocs), r0 = atomic_load(&cnt.reallocs), f0 = atomic_load(&cnt.frees);
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(buf)};
  for (int i = 0; i < 1000; i++) {
    kc_status st = kc_launch(k, ctx, &grid, &block, args, 1);
    if (st) fail_msg("launch %d: %s: %s", i, kc_status_name(st), kc_errmsg(rt));
  }
  assert_int_equal(atomic_load(&cnt.allocs), a0);
  assert_int_equal(atomic_load(&cnt.reallocs), r0);
  assert_int_equal(atomic_load(&cnt.frees), f0);
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(buf, 0, out, sizeof out));
  kct_expect_linear(out, N, 1, 1);
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.fast_hits, s0.fast_hits + 1000);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups);

  /* the same with bound arguments */
  kc_args *bound = NULL;
  KCT_OK(rt, kc_args_create(k, ctx, args, 1, &bound));
  KCT_OK(rt, kct_run_args(bound, ctx, buf, N, out));
  a0 = atomic_load(&cnt.allocs), r0 = atomic_load(&cnt.reallocs), f0 = atomic_load(&cnt.frees);
  for (int i = 0; i < 1000; i++) {
    kc_status st = kc_launch_args(bound, &grid, &block);
    if (st) fail_msg("bound launch %d: %s: %s", i, kc_status_name(st), kc_errmsg(rt));
  }
  assert_int_equal(atomic_load(&cnt.allocs), a0);
  assert_int_equal(atomic_load(&cnt.reallocs), r0);
  assert_int_equal(atomic_load(&cnt.frees), f0);
  kc_stats s2 = kct_stats(rt);
  assert_int_equal(s2.fast_hits, s1.fast_hits + 1000);
  assert_int_equal(s2.slow_lookups, s1.slow_lookups + 1); /* its first launch */

  /* everything kcache took from the hook goes back at destroy */
  kct_destroy(rt);
  assert_int_equal(atomic_load(&cnt.frees), atomic_load(&cnt.allocs));
}

/* The listing names the device the runtime uses, and truncates safely. */
static void test_list_devices(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  char buf[8192];
  int n = kc_list_devices(kct_backend, buf, sizeof buf);
  assert_true(n > 0 && (size_t)n < sizeof buf);
  assert_int_equal(strlen(buf), (size_t)n);
  KCT_CONTAINS(buf, "platform 0: ");
  KCT_CONTAINS(buf, "  device 0: ");
  KCT_CONTAINS(buf, kc_device_name(rt, 0));
  char small[12];
  assert_int_equal(kc_list_devices(kct_backend, small, sizeof small), n);
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_int_equal(memcmp(small, buf, sizeof small - 1), 0);
  assert_int_equal(kc_list_devices(kct_backend, NULL, 0), n);
  assert_int_equal(kc_list_devices((kc_backend_kind)42, buf, sizeof buf), -1);
  kct_destroy(rt);
}

KCT_MAIN(KCT_FX_TEST(test_first_launch_compiles_once), KCT_TEST(test_list_devices),
         KCT_FX_TEST(test_second_handle_shares_code), KCT_FX_TEST(test_unrelated_definition_revalidates),
         KCT_FX_TEST(test_callee_redefinition_recompiles_dependents_only),
         KCT_FX_TEST(test_kernel_redefinition_recompiles_it), KCT_TEST(test_compile_options),
         KCT_FX_TEST(test_pinned_world_keeps_old_code), KCT_TEST(test_pins_nest),
         KCT_FX_TEST(test_specializations), KCT_TEST(test_bad_params_strings),
         KCT_FX_TEST(test_context_reset_relinks_without_compiling),
         KCT_TEST(test_context_destroy_never_reuses_linked_objects),
         KCT_TEST(test_two_contexts_share_compiled_code), KCT_FX_TEST(test_identical_redefinition_is_a_no_op),
         KCT_TEST(test_kernel_source_in_dependency_order), KCT_TEST(test_cached_launch_allocates_nothing),
         KCT_FX_TEST(test_bound_arguments))
