/* SPDX-License-Identifier: MIT */
/*
 * test_errors.c -- names that are not defined (scenario 6), shadowed
 * builtins, and bad input of every kind (scenario 10): compiler errors with
 * the function's name and line, cached compile failures, invalid names,
 * NULL pointers, wrong arguments, recursion, destroyed contexts, undefine,
 * buffer ranges. Every error is a status and a message, never a crash.
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define N KCT_FX_N /* floats in the fixture's buffer */

static const char SRC_H1[] = "KC_DEVICE float h(float x) { return x + 1.0f; }";
static const char SRC_H2[] = "KC_DEVICE float h(float x) { return x + 2.0f; }";
static const char SRC_K[] =
    "KC_KERNEL void k(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }";

/* Fails unless st is one of the two statuses. */
static void expect_either(kc_runtime *rt, kc_status st, kc_status a, kc_status b, const char *what) {
  if (st != a && st != b)
    fail_msg("%s returned %s, expected %s or %s (message: %s)", what, kc_status_name(st), kc_status_name(a),
             kc_status_name(b), kc_errmsg(rt));
}

static kc_status run(kct_fixture *f, kc_kernel *k) {
  memset(f->out, 0, sizeof f->out);
  return kct_run(k, f->ctx, f->buf, N, f->out);
}

/* ---------------------------------------------------------- scenario 6 */

/* A kernel's name has no length limit in kcache (a generated one may be
 * long): 250 characters compile and run like any other. PoCL aborts the
 * process at the first launch of a kernel whose name is too long for a
 * directory of its cache: kcache refuses such a name on PoCL instead. */
static void test_long_kernel_name(void **state) {
  kct_fixture *f = *state;
  for (int len = 250; len <= 300; len += 50) {
    char name[301], src[900];
    memset(name, 'k', (size_t)len);
    name[len] = 0;
    snprintf(src, sizeof src,
             "KC_KERNEL void %s(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = 2.0f * (float)i; }",
             name);
    kct_define(f->rt, name, src);
    kc_status st = run(f, kct_kernel(f->rt, name, NULL));
    if (kct_backend == KC_BACKEND_OPENCL && len > 200 && st == KC_EUNAVAILABLE) { /* PoCL */
      KCT_CONTAINS(kc_errmsg(f->rt), "PoCL aborts the process on kernel names that long");
      continue;
    }
    KCT_OK(f->rt, st);
    kct_expect_linear(f->out, N, 2, 0);
  }
}

static void test_undefined_callee_is_named_then_defined(void **state) {
  kct_fixture *f = *state;
  kct_define(
      f->rt, "ku",
      "KC_KERNEL void ku(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = missing_fn((float)i); }");
  kc_kernel *k = kct_kernel(f->rt, "ku", NULL);
  kc_status st = run(f, k);
  expect_either(f->rt, st, KC_ENOTFOUND, KC_ECOMPILE, "launch of a kernel calling an undefined function");
  KCT_CONTAINS(kc_errmsg(f->rt), "missing_fn");
  kc_stats s0 = kct_stats(f->rt);
  assert_int_equal(s0.compiles, 0);
  assert_int_equal(s0.compile_failures, 1);

  /* the failure is remembered for this world: no second compiler run */
  kc_status st2 = run(f, k);
  assert_int_equal(st2, st);
  KCT_CONTAINS(kc_errmsg(f->rt), "missing_fn");
  kc_status st3 = kc_kernel_compile(k);
  assert_int_equal(st3, st);
  assert_int_equal(kct_stats(f->rt).compile_failures, s0.compile_failures);

  kct_define(f->rt, "missing_fn", "KC_DEVICE float missing_fn(float x) { return 3.0f * x; }");
  KCT_OK(f->rt, run(f, k));
  kct_expect_linear(f->out, N, 3, 0);
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compiles, 1);
  assert_int_equal(s1.compile_failures, s0.compile_failures);
  assert_int_equal(s1.invalidations, s0.invalidations + 1); /* the remembered failure */
}

/* A kernel that calls the builtin sqrt (spelled `call`, e.g. "sqrt(") is
 * invalidated when sqrt is defined, and again when that definition goes. */
static void shadow_builtin(const char *call) {
  kct_fixture f;
  kct_fx_open(&f);
  char src[512];
  snprintf(src, sizeof src,
           "KC_KERNEL void kb(KC_GLOBAL float *y) {\n"
           "  size_t i = kc_global_id(0);\n"
           "  y[i] = (float)%s(double)(i * i));\n"
           "}\n",
           call);
  kct_define(f.rt, "kb", src);
  kc_kernel *k = kct_kernel(f.rt, "kb", NULL);
  KCT_OK(f.rt, run(&f, k));
  kct_expect_linear(f.out, N, 1, 0);
  kc_code_info c0 = kct_code(f.rt, k);
  kc_stats s0 = kct_stats(f.rt);
  assert_int_equal(s0.compiles, 1);

  kct_define(f.rt, "sqrt", "KC_DEVICE double sqrt(double x) { (void)x; return 42.0; }");
  kc_stats s1 = kct_stats(f.rt);
  assert_int_equal(s1.invalidations, s0.invalidations + 1);
  KCT_OK(f.rt, run(&f, k));
  kct_expect_linear(f.out, N, 0, 42);
  assert_int_equal(kct_stats(f.rt).compiles, s0.compiles + 1);
  assert_int_not_equal(kct_code(f.rt, k).id, c0.id);

  kc_world w = 0;
  KCT_OK(f.rt, kc_undefine(f.rt, "sqrt", &w));
  assert_int_equal(w, s1.world + 1);
  kc_stats s2 = kct_stats(f.rt);
  assert_int_equal(s2.invalidations, s1.invalidations + 1);
  KCT_OK(f.rt, run(&f, k));
  kct_expect_linear(f.out, N, 1, 0); /* the builtin again */
  kct_fx_close(&f);
}

static void test_shadowing_a_builtin_invalidates(void **state) {
  (void)state;
  shadow_builtin("sqrt(");
}

/* The same call with a comment before its parenthesis: still a call. */
static void test_shadowing_a_builtin_called_through_a_comment(void **state) {
  (void)state;
  shadow_builtin("sqrt /* the builtin */ (");
}

/* --------------------------------------------------------- scenario 10 */

static const char SRC_H_BROKEN[] = "KC_DEVICE float h(float x) {\n"
                                   "  return x +;\n"
                                   "}\n";

static void test_syntax_error_names_function_and_line(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = kct_define_kernel(f->rt, "h", SRC_H1, "k", SRC_K);
  KCT_OK(f->rt, run(f, k));
  kct_expect_linear(f->out, N, 1, 1);

  kc_world pinned;
  KCT_OK(f->rt, kc_pin(f->rt, &pinned));
  kc_world wb = kct_define(f->rt, "h", SRC_H_BROKEN); /* defining does not compile */
  assert_int_equal(wb, pinned + 1);
  KCT_OK(f->rt, run(f, k)); /* the pinned world still has the good h */
  kct_expect_linear(f->out, N, 1, 1);
  KCT_OK(f->rt, kc_unpin(f->rt));

  kc_stats s0 = kct_stats(f->rt);
  KCT_STATUS(f->rt, KC_ECOMPILE, run(f, k));
  const char *msg = kc_errmsg(f->rt);
  KCT_CONTAINS(msg, "h");
  /* the compiler's file and line, from #line 1 "h": gcc and clang (PoCL)
   * write h:2:13, NVRTC h(2) */
  KCT_CONTAINS(msg, kct_backend == KC_BACKEND_CUDA ? "h(2)" : "h:2:");
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compile_failures, s0.compile_failures + 1);
  assert_int_equal(s1.compiles, s0.compiles);

  /* cached: the same world does not run the compiler again */
  KCT_STATUS(f->rt, KC_ECOMPILE, run(f, k));
  KCT_CONTAINS(kc_errmsg(f->rt), "h");
  KCT_STATUS(f->rt, KC_ECOMPILE, kc_kernel_compile(k));
  kc_code_info info;
  KCT_STATUS(f->rt, KC_ECOMPILE, kc_kernel_code(k, &info));
  assert_int_equal(kct_stats(f->rt).compile_failures, s1.compile_failures);

  /* pinning again now pins the broken world */
  KCT_OK(f->rt, kc_pin(f->rt, NULL));
  KCT_STATUS(f->rt, KC_ECOMPILE, run(f, k));
  KCT_OK(f->rt, kc_unpin(f->rt));

  /* fixing the definition works */
  kct_define(f->rt, "h", SRC_H2);
  KCT_OK(f->rt, run(f, k));
  kct_expect_linear(f->out, N, 1, 2);
  kc_stats s2 = kct_stats(f->rt);
  assert_int_equal(s2.compiles, s1.compiles + 1);
  assert_int_equal(s2.compile_failures, s1.compile_failures);
}

/* A syntax error in the kernel itself, remembered and then fixed. */
static void test_compile_failure_is_cached(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "kbad",
             "KC_KERNEL void kbad(KC_GLOBAL float *y) {\n"
             "  y[kc_global_id(0)] = ;\n"
             "}\n");
  kc_kernel *k = kct_kernel(f->rt, "kbad", NULL);
  KCT_STATUS(f->rt, KC_ECOMPILE, run(f, k));
  KCT_CONTAINS(kc_errmsg(f->rt), "kbad");
  KCT_CONTAINS(kc_errmsg(f->rt), kct_backend == KC_BACKEND_CUDA ? "kbad(2)" : "kbad:2:");
  kc_stats s0 = kct_stats(f->rt);
  assert_int_equal(s0.compile_failures, 1);
  for (int i = 0; i < 5; i++) {
    KCT_STATUS(f->rt, KC_ECOMPILE, run(f, k));
    KCT_CONTAINS(kc_errmsg(f->rt), "kbad");
  }
  /* an unrelated definition does not make it compile again either */
  kct_define(f->rt, "unrelated", "KC_DEVICE float unrelated(float x) { return x; }");
  KCT_STATUS(f->rt, KC_ECOMPILE, run(f, k));
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compile_failures, s0.compile_failures);
  assert_int_equal(s1.compiles, 0);

  kct_define(f->rt, "kbad", "KC_KERNEL void kbad(KC_GLOBAL float *y) { y[kc_global_id(0)] = 5.0f; }");
  KCT_OK(f->rt, run(f, k));
  kct_expect_linear(f->out, N, 0, 5);
  assert_int_equal(kct_stats(f->rt).compiles, 1);
}

/* Host backend: what a broken compiler gives. A compiler that fails is
 * remembered for the world (its message carries the compiler's output); one
 * that crashes or hangs is not, since the next try may work. */
static char *fake_cc(char *dir, const char *name, const char *script) {
  static char path[4][512];
  static int next;
  char *p = path[next++ % 4];
  snprintf(p, sizeof path[0], "%s/%s", dir, name);
  kct_write_script(p, "#!/bin/sh\n%s\n", script);
  return p;
}

static void broken_compiler(const char *cc, kc_status want, const char *in_msg, bool remembered) {
  kc_options opt;
  kc_options_init(&opt);
  opt.host_cc = cc;
  opt.compile_timeout_ms = 300;
  kct_fixture f;
  memset(&f, 0, sizeof f);
  f.rt = kct_runtime(&opt);
  f.ctx = kct_context(f.rt);
  f.buf = kct_buffer(f.rt, f.ctx, N);
  kct_define(f.rt, "h", SRC_H1);
  kct_define(f.rt, "k", SRC_K);
  kc_kernel *k = kct_kernel(f.rt, "k", NULL);
  for (int attempt = 1; attempt <= 2; attempt++) {
    KCT_STATUS(f.rt, want, run(&f, k));
    KCT_CONTAINS(kc_errmsg(f.rt), in_msg);
    assert_int_equal(kct_stats(f.rt).compile_failures, remembered ? 1 : (uint64_t)attempt);
  }
  assert_int_equal(kct_stats(f.rt).compiles, 0);
  kct_destroy(f.rt);
}

static void test_host_compiler_failures(void **state) {
  (void)state;
  kct_host_only();
  char dir[] = "/tmp/kc-test-cc-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char *failing = fake_cc(dir, "failing-cc", "echo 'fake-cc: no such luck' >&2; exit 3");
  char *crashing = fake_cc(dir, "crashing-cc", "kill -SEGV $$");
  char *hanging = fake_cc(dir, "hanging-cc", "exec sleep 30");
  broken_compiler(failing, KC_ECOMPILE, "fake-cc: no such luck", true);
  broken_compiler(crashing, KC_EBACKEND, "crashed", false);
  broken_compiler(hanging, KC_EBACKEND, "300 ms", false);
  unlink(failing);
  unlink(crashing);
  unlink(hanging);
  rmdir(dir);
}

/* The compiler command and the compile options may each have the most
 * words the host backend takes (56), together; one more is an error that
 * says so (the compiler never ran: no log replaces the message). */
static void test_compiler_word_limits(void **state) {
  (void)state;
  kct_host_only();
  char cc[2048] = "cc", opts[2048] = "";
  for (int i = 1; i < 56; i++) snprintf(cc + strlen(cc), sizeof cc - strlen(cc), " -DKC_CC%d", i);
  for (int i = 0; i < 56; i++) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "-DKC_OPT%d ", i);
  kc_options o;
  kc_options_init(&o);
  o.host_cc = cc;
  o.compile_options = opts;
  kc_runtime *rt = kct_runtime(&o);
  kc_context *ctx = kct_context(rt);
  kc_buffer *buf = kct_buffer(rt, ctx, N);
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  float out[N];
  KCT_OK(rt, kct_run(k, ctx, buf, N, out)); /* 56 + 56 words reach the compiler */
  kct_expect_linear(out, N, 1, 1);
  kct_destroy(rt);

  snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "-DKC_OPT56");
  rt = kct_runtime(&o);
  ctx = kct_context(rt);
  buf = kct_buffer(rt, ctx, N);
  kct_define(rt, "h", SRC_H1);
  kct_define(rt, "k", SRC_K);
  k = kct_kernel(rt, "k", NULL);
  KCT_STATUS(rt, KC_EINVAL, kct_run(k, ctx, buf, N, out));
  KCT_CONTAINS(kc_errmsg(rt), "compile options: too many words (at most 56)");
  kct_destroy(rt);
}

static void test_invalid_names(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_world w0 = kc_world_latest(rt);
  static const struct {
    const char *name, *source;
  } bad[] = {
      {"", "KC_DEVICE float f(float x) { return x; }"},
      {"1abc", "KC_DEVICE float 1abc(float x) { return x; }"},
      {"kc_foo", "KC_DEVICE float kc_foo(float x) { return x; }"},
      {"KC_FOO", "KC_DEVICE float KC_FOO(float x) { return x; }"},
      {"a b", "KC_DEVICE float a b(float x) { return x; }"},
      {"int", "int"},
      {"f", "KC_DEVICE float g(float x) { return x; }"}, /* never mentions f */
      {"f", "/* f */ KC_DEVICE float g(float x) { return x; }"}, /* only in a comment */
      {"f", "KC_DEVICE const char *g(void) { return \"f\"; }"}, /* only in a string */
      {NULL, "KC_DEVICE float f(float x) { return x; }"},
      {"f", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kc_world w = 12345;
    kc_status st = kc_define(rt, bad[i].name, bad[i].source, &w);
    if (st != KC_EINVAL)
      fail_msg("kc_define(\"%s\", \"%s\") returned %s, expected KC_EINVAL",
               bad[i].name ? bad[i].name : "NULL", bad[i].source ? bad[i].source : "NULL",
               kc_status_name(st));
    assert_true(strlen(kc_errmsg(rt)) > 0);
  }
  assert_int_equal(kc_world_latest(rt), w0);
  assert_int_equal(kct_stats(rt).defines, 0);

  static const char *const bad_kernels[] = {"", "1abc", "a-b", "a b"};
  for (size_t i = 0; i < sizeof bad_kernels / sizeof *bad_kernels; i++) {
    kc_kernel *k = (kc_kernel *)&k;
    KCT_STATUS(rt, KC_EINVAL, kc_kernel_create(rt, bad_kernels[i], NULL, &k));
    assert_null(k);
  }
  kc_kernel *k = (kc_kernel *)&k;
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_create(rt, NULL, NULL, &k));
  assert_null(k);
  kct_destroy(rt);
}

static void test_null_pointers_are_errors(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1}, zero = {0, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(f->buf)};

  /* runtime, context, kernel creation */
  KCT_STATUS(NULL, KC_EINVAL, kc_runtime_create(NULL, NULL));
  kc_options bad_opt;
  kc_options_init(&bad_opt);
  bad_opt.backend = (kc_backend_kind)99;
  kc_runtime *rt2 = (kc_runtime *)&rt2;
  KCT_STATUS(NULL, KC_EINVAL, kc_runtime_create(&bad_opt, &rt2));
  assert_null(rt2);
  kc_context *c = (kc_context *)&c;
  KCT_STATUS(NULL, KC_EINVAL, kc_context_create(NULL, 0, &c));
  assert_null(c);
  KCT_STATUS(rt, KC_EINVAL, kc_context_create(rt, 0, NULL));
  KCT_STATUS(rt, KC_EINVAL, kc_context_create(rt, -1, &c));
  KCT_STATUS(rt, KC_EINVAL, kc_context_create(rt, kc_device_count(rt), &c));
  kc_kernel *k2 = (kc_kernel *)&k2;
  KCT_STATUS(NULL, KC_EINVAL, kc_kernel_create(NULL, "k", NULL, &k2));
  assert_null(k2);
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_create(rt, "k", NULL, NULL));

  /* the function table */
  KCT_STATUS(NULL, KC_EINVAL, kc_define(NULL, "h", SRC_H1, NULL));
  KCT_STATUS(NULL, KC_EINVAL, kc_undefine(NULL, "h", NULL));
  KCT_STATUS(rt, KC_EINVAL, kc_undefine(rt, NULL, NULL));
  KCT_STATUS(NULL, KC_EINVAL, kc_pin(NULL, NULL));
  KCT_STATUS(NULL, KC_EINVAL, kc_unpin(NULL));
  assert_int_equal(kc_world_latest(NULL), 0);
  assert_int_equal(kc_world_current(NULL), 0);

  /* launches */
  KCT_STATUS(NULL, KC_EINVAL, kc_launch(NULL, f->ctx, &g, &b, args, 1));
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, NULL, &g, &b, args, 1));
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, f->ctx, NULL, &b, args, 1));
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, f->ctx, &g, NULL, args, 1));
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, f->ctx, &zero, &b, args, 1));
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, f->ctx, &g, &zero, args, 1));
  expect_either(rt, kc_launch(k, f->ctx, &g, &b, NULL, 1), KC_EINVAL, KC_EARGS, "kc_launch(args NULL)");
  kc_arg null_buf[] = {KC_ARG_BUF(NULL)};
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, f->ctx, &g, &b, null_buf, 1));
  /* the same through the fast path, once the handle has cached code */
  KCT_OK(rt, run(f, k));
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, f->ctx, &g, &b, null_buf, 1));
  expect_either(rt, kc_launch(k, f->ctx, &g, &b, NULL, 1), KC_EINVAL, KC_EARGS, "kc_launch(args NULL)");
  KCT_STATUS(rt, KC_EINVAL, kc_launch(k, f->ctx, &g, NULL, args, 1));
  /* kernels */
  KCT_STATUS(NULL, KC_EINVAL, kc_kernel_compile(NULL));
  kc_code_info info;
  KCT_STATUS(NULL, KC_EINVAL, kc_kernel_code(NULL, &info));
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_code(k, NULL));
  char *src = NULL;
  KCT_STATUS(NULL, KC_EINVAL, kc_kernel_source(NULL, &src));
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_source(k, NULL));

  /* contexts and buffers */
  KCT_STATUS(NULL, KC_EINVAL, kc_context_reset(NULL));
  KCT_STATUS(NULL, KC_EINVAL, kc_context_finish(NULL));
  kc_buffer *nb = (kc_buffer *)&nb;
  KCT_STATUS(NULL, KC_EINVAL, kc_buffer_create(NULL, 16, &nb));
  assert_null(nb);
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_create(f->ctx, 16, NULL));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_create(f->ctx, 0, &nb));
  float tmp[4] = {0};
  KCT_STATUS(NULL, KC_EINVAL, kc_buffer_write(NULL, 0, tmp, sizeof tmp));
  KCT_STATUS(NULL, KC_EINVAL, kc_buffer_read(NULL, 0, tmp, sizeof tmp));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_write(f->buf, 0, NULL, sizeof tmp));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_read(f->buf, 0, NULL, sizeof tmp));

  /* queries and destroys that take NULL */
  kc_stats s;
  memset(&s, 0xab, sizeof s);
  kc_stats_get(NULL, &s);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.world, 0);
  kc_stats_get(rt, NULL);
  assert_non_null(kc_errmsg(NULL));
  assert_int_equal(kc_context_id(NULL), 0);
  assert_int_equal(kc_buffer_size(NULL), 0);
  assert_null(kc_runtime_backend(NULL));
  assert_int_equal(kc_device_count(NULL), 0);
  assert_null(kc_device_name(NULL, 0));
  assert_null(kc_device_name(rt, -1));
  assert_null(kc_device_name(rt, kc_device_count(rt)));
  assert_true(kc_device_count(rt) >= 1);
  assert_non_null(kc_device_name(rt, 0));
  kc_options_init(NULL);
  kc_free(NULL, NULL);
  kc_free(rt, NULL);
  kc_runtime_destroy(NULL);
  kc_context_destroy(NULL);
  kc_kernel_destroy(NULL);
  kc_buffer_destroy(NULL);

  /* everything still works */
  KCT_OK(rt, run(f, k));
  kct_expect_linear(f->out, N, 1, 1);
}

/* A launch with an empty grid or block is KC_EINVAL, on the slow path and
 * on the fast path alike, and runs no work item (OpenCL must not drop an
 * empty y or z dimension and run the rest). */
static void test_empty_grid_runs_nothing(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(f->buf)};
  kc_dim3 zeros[] = {{0, 1, 1}, {1, 0, 1}, {1, 1, 0}};
  float marker[N];
  for (int i = 0; i < N; i++) marker[i] = -1.0f;
  for (int pass = 0; pass < 2; pass++) { /* 0: nothing cached (slow path), 1: fast path */
    if (pass == 1) KCT_OK(rt, run(f, k));
    KCT_OK(rt, kc_buffer_write(f->buf, 0, marker, sizeof marker));
    for (int z = 0; z < 3; z++)
      for (int which = 0; which < 2; which++) {
        kc_status st = which ? kc_launch(k, f->ctx, &g, &zeros[z], args, 1)
                             : kc_launch(k, f->ctx, &zeros[z], &b, args, 1);
        if (st != KC_EINVAL)
          fail_msg("empty %s {%u,%u,%u} (%s path): %s, expected KC_EINVAL", which ? "block" : "grid",
                   zeros[z].x, zeros[z].y, zeros[z].z, pass ? "fast" : "slow", kc_status_name(st));
        KCT_CONTAINS(kc_errmsg(rt), "at least 1");
        KCT_OK(rt, kc_context_finish(f->ctx));
        KCT_OK(rt, kc_buffer_read(f->buf, 0, f->out, sizeof f->out));
        for (int i = 0; i < N; i++)
          if (f->out[i] != -1.0f)
            fail_msg("empty %s {%u,%u,%u} (%s path) returned %s and ran work item %d (wrote %g)",
                     which ? "block" : "grid", zeros[z].x, zeros[z].y, zeros[z].z, pass ? "fast" : "slow",
                     kc_status_name(st), i, (double)f->out[i]);
      }
  }
}

/* The launch fast path leaves grid, block and the arguments to the entry of
 * the linked code (on the host backend, code compiled for the kernel): the
 * same errors as the slow path, for kernels with and without parameters. */
static void test_fast_path_checks_like_the_slow_path(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kct_define(rt, "h", SRC_H1);
  kct_define(rt, "k", SRC_K);
  kct_define(rt, "kz", "KC_KERNEL void kz(void) { }");
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  kc_kernel *kz = kct_kernel(rt, "kz", NULL);
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1}, zero = {1, 0, 1};
  kc_arg args[] = {KC_ARG_BUF(f->buf)};
  for (int pass = 0; pass < 2; pass++) { /* 0: slow path (nothing cached), 1: fast path */
    const char *path = pass ? "fast" : "slow";
    if (pass == 1) {
      KCT_OK(rt, run(f, k));
      KCT_OK(rt, kc_launch(kz, f->ctx, &g, &b, NULL, 0));
    } else {
      KCT_OK(rt, kc_context_reset(f->ctx));
    }
    kc_stats s0 = kct_stats(rt);
    struct {
      kc_kernel *k;
      const kc_dim3 *g, *b;
      const kc_arg *a;
      uint32_t n;
      kc_status want;
      const char *msg;
    } cases[] = {
        {k, NULL, &b, args, 1, KC_EINVAL, "NULL"},
        {k, &g, NULL, args, 1, KC_EINVAL, "NULL"},
        {kz, NULL, &b, NULL, 0, KC_EINVAL, "NULL"},
        {kz, &g, NULL, NULL, 0, KC_EINVAL, "NULL"},
        {kz, &zero, &b, NULL, 0, KC_EINVAL, "at least 1"},
        {kz, &g, &zero, NULL, 0, KC_EINVAL, "at least 1"},
        {kz, &g, &b, args, 1, KC_EARGS, "takes 0 arguments, 1 given"},
        {k, &g, &b, args, 0, KC_EARGS, "takes 1 argument, 0 given"},
        {k, &g, &b, NULL, 0, KC_EARGS, "takes 1 argument, 0 given"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      if (pass == 0) KCT_OK(rt, kc_context_reset(f->ctx));
      kc_status st = kc_launch(cases[i].k, f->ctx, cases[i].g, cases[i].b, cases[i].a, cases[i].n);
      if (st != cases[i].want)
        fail_msg("case %zu (%s path): %s, expected %s", i, path, kc_status_name(st),
                 kc_status_name(cases[i].want));
      KCT_CONTAINS(kc_errmsg(rt), cases[i].msg);
    }
    /* a kernel without parameters ignores args when nargs is 0 */
    KCT_OK(rt, kc_launch(kz, f->ctx, &g, &b, args, 0));
    KCT_OK(rt, kc_context_finish(f->ctx));
    kc_stats s1 = kct_stats(rt);
    if (pass == 1) assert_int_equal(s1.slow_lookups, s0.slow_lookups); /* all of it on the fast path */
    assert_int_equal(s1.compiles, 2);
  }
}

static void test_status_table(void **state) {
  (void)state;
  assert_string_equal(kc_status_name(KC_OK), "KC_OK");
  assert_string_equal(kc_status_name(KC_EINVAL), "KC_EINVAL");
  assert_string_equal(kc_status_name(KC_EBACKEND), "KC_EBACKEND");
  assert_string_equal(kc_status_name((kc_status)999), "KC_UNKNOWN");
  assert_string_equal(kc_status_name((kc_status)-1), "KC_UNKNOWN");
  for (int s = 0; s < KC__STATUS_COUNT; s++) {
    assert_non_null(kc_status_string((kc_status)s));
    assert_true(strlen(kc_status_string((kc_status)s)) > 0);
  }
  assert_non_null(kc_status_string((kc_status)999));
  assert_string_equal(kc_version(), KC_VERSION_STRING);
  assert_int_equal(kc_version_number(), KC_VERSION_NUMBER);
  const char *why = NULL;
  assert_int_equal(kc_backend_available((kc_backend_kind)99, &why), 0);
  assert_non_null(why);
  assert_int_equal(kc_backend_available(kct_backend, NULL), 1);
}

/* A kernel with a buffer, a float and an int. */
static const char SRC_KA[] = "KC_KERNEL void ka(KC_GLOBAL float *y, float a, int n) {\n"
                             "  size_t i = kc_global_id(0);\n"
                             "  if ((int)i < n) y[i] = a;\n"
                             "}\n";

/* Defines ka in rt; its handle, and in *foreign a buffer of N floats in a
 * context of its own (not the fixture's). */
static kc_kernel *define_ka(kc_runtime *rt, kc_buffer **foreign) {
  kct_define(rt, "ka", SRC_KA);
  kc_kernel *k = kct_kernel(rt, "ka", NULL);
  kc_context *other = kct_context(rt);
  *foreign = kct_buffer(rt, other, N);
  return k;
}

static void test_wrong_arguments(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kc_buffer *foreign;
  kc_kernel *k = define_ka(rt, &foreign);
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1};
  float a = 2.5f;
  double ad = 2.5;
  int n = N;
  int64_t n64 = N;

  /* pass 0: every bad call takes the slow path (a reset empties the handle's
   * cache); pass 1: the fast path, after a good launch cached the code */
  for (int pass = 0; pass < 2; pass++) {
#define BAD(args, nargs) \
  do { \
    if (pass == 0) KCT_OK(rt, kc_context_reset(f->ctx)); \
    KCT_STATUS(rt, KC_EARGS, kc_launch(k, f->ctx, &g, &b, (args), (nargs))); \
  } while (0)
    if (pass == 1) {
      kc_arg ok[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a), KC_ARG_VAL(n)};
      KCT_OK(rt, kc_launch(k, f->ctx, &g, &b, ok, 3));
    }
    kc_arg one[] = {KC_ARG_BUF(f->buf)};
    BAD(one, 1);
    KCT_CONTAINS(kc_errmsg(rt), "takes 3 arguments");
    KCT_CONTAINS(kc_errmsg(rt), "1 given");
    kc_arg four[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a), KC_ARG_VAL(n), KC_ARG_VAL(n)};
    BAD(four, 4);
    KCT_CONTAINS(kc_errmsg(rt), "4 given");
    BAD(NULL, 0);
    KCT_CONTAINS(kc_errmsg(rt), "0 given");
    kc_arg dbl[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(ad), KC_ARG_VAL(n)};
    BAD(dbl, 3);
    KCT_CONTAINS(kc_errmsg(rt), "8");
    kc_arg wide[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a), KC_ARG_VAL(n64)};
    BAD(wide, 3);
    kc_arg buf_for_scalar[] = {KC_ARG_BUF(f->buf), KC_ARG_BUF(f->buf), KC_ARG_VAL(n)};
    BAD(buf_for_scalar, 3);
    KCT_CONTAINS(kc_errmsg(rt), "scalar");
    kc_arg scalar_for_buf[] = {KC_ARG_VAL(a), KC_ARG_VAL(a), KC_ARG_VAL(n)};
    BAD(scalar_for_buf, 3);
    KCT_CONTAINS(kc_errmsg(rt), "buffer");
    kc_arg sized_buf[] = {{f->buf, 4, KC_ARG_BUFFER}, KC_ARG_VAL(a), KC_ARG_VAL(n)};
    BAD(sized_buf, 3);
    KCT_CONTAINS(kc_errmsg(rt), "whose size is 0");
    kc_arg bad_kind[] = {KC_ARG_BUF(f->buf), {&a, sizeof a, 7u}, KC_ARG_VAL(n)};
    BAD(bad_kind, 3);
    kc_arg null_val[] = {KC_ARG_BUF(f->buf), {NULL, sizeof a, KC_ARG_SCALAR}, KC_ARG_VAL(n)};
    BAD(null_val, 3);
    kc_arg wrong_ctx[] = {KC_ARG_BUF(foreign), KC_ARG_VAL(a), KC_ARG_VAL(n)};
    BAD(wrong_ctx, 3);
    kc_arg too_many[KC_MAX_ARGS + 1];
    for (int i = 0; i <= KC_MAX_ARGS; i++) too_many[i] = KC_ARG_VAL(n);
    BAD(too_many, KC_MAX_ARGS + 1);
#undef BAD
  }

  /* nothing was launched by the bad calls, and good ones still work */
  kc_stats s0 = kct_stats(rt);
  kc_arg ok[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a), KC_ARG_VAL(n)};
  KCT_OK(rt, kc_launch(k, f->ctx, &g, &b, ok, 3));
  KCT_OK(rt, kc_context_finish(f->ctx));
  KCT_OK(rt, kc_buffer_read(f->buf, 0, f->out, sizeof f->out));
  kct_expect_linear(f->out, N, 0, 2.5f);
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.fast_hits, s0.fast_hits + 1);
  assert_int_equal(s1.compiles, 1);
}

static void test_recursion_is_rejected(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  /* mutual: kernel -> ping_fn -> pong_fn -> ping_fn */
  kct_define(rt, "ping_fn",
             "KC_DEVICE float ping_fn(float x) { return x <= 0.0f ? 0.0f : pong_fn(x - 1.0f); }");
  kct_define(rt, "pong_fn", "KC_DEVICE float pong_fn(float x) { return ping_fn(x) + 1.0f; }");
  kct_define(rt, "km", "KC_KERNEL void km(KC_GLOBAL float *y) { y[kc_global_id(0)] = ping_fn(3.0f); }");
  kc_kernel *km = kct_kernel(rt, "km", NULL);
  KCT_STATUS(rt, KC_ERECURSION, run(f, km));
  KCT_CONTAINS(kc_errmsg(rt), "ping_fn");
  KCT_CONTAINS(kc_errmsg(rt), "pong_fn");
  KCT_STATUS(rt, KC_ERECURSION, kc_kernel_compile(km));
  char *src = NULL;
  KCT_STATUS(rt, KC_ERECURSION, kc_kernel_source(km, &src));
  assert_null(src);

  /* self */
  kct_define(rt, "self_fn",
             "KC_DEVICE float self_fn(float x) { return x <= 0.0f ? 0.0f : self_fn(x - 1.0f); }");
  kct_define(rt, "ks", "KC_KERNEL void ks(KC_GLOBAL float *y) { y[kc_global_id(0)] = self_fn(3.0f); }");
  kc_kernel *ks = kct_kernel(rt, "ks", NULL);
  KCT_STATUS(rt, KC_ERECURSION, run(f, ks));
  KCT_CONTAINS(kc_errmsg(rt), "self_fn");

  /* a kernel that calls itself */
  kct_define(rt, "kself", "KC_KERNEL void kself(KC_GLOBAL float *y) { if (y[0] > 1.0f) kself(y); }");
  kc_kernel *kself = kct_kernel(rt, "kself", NULL);
  KCT_STATUS(rt, KC_ERECURSION, run(f, kself));
  KCT_CONTAINS(kc_errmsg(rt), "kself");
  assert_int_equal(kct_stats(rt).compiles, 0);

  /* breaking the cycle makes it work */
  kct_define(rt, "pong_fn", "KC_DEVICE float pong_fn(float x) { return x + 10.0f; }");
  KCT_OK(rt, run(f, km));
  kct_expect_linear(f->out, N, 0, 12.0f); /* ping_fn(3) = pong_fn(2) = 12 */
}

static void test_undefine(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kc_world w0 = kc_world_latest(rt);
  KCT_STATUS(rt, KC_ENOTFOUND, kc_undefine(rt, "never_defined", NULL));
  KCT_CONTAINS(kc_errmsg(rt), "never_defined");
  assert_int_equal(kc_world_latest(rt), w0);

  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  KCT_OK(rt, run(f, k));
  kct_expect_linear(f->out, N, 1, 1);
  kc_stats s0 = kct_stats(rt);
  kc_world w = 0;
  KCT_OK(rt, kc_undefine(rt, "h", &w));
  assert_int_equal(w, s0.world + 1);
  assert_int_equal(kct_stats(rt).invalidations, s0.invalidations + 1);
  kc_status st = run(f, k);
  expect_either(rt, st, KC_ENOTFOUND, KC_ECOMPILE, "launch after undefining its callee");
  KCT_CONTAINS(kc_errmsg(rt), "h");
  KCT_STATUS(rt, KC_ENOTFOUND, kc_undefine(rt, "h", NULL)); /* twice */
  assert_int_equal(kc_world_latest(rt), w);

  kct_define(rt, "h", SRC_H2);
  KCT_OK(rt, run(f, k));
  kct_expect_linear(f->out, N, 1, 2);

  /* undefining the kernel itself */
  KCT_OK(rt, kc_undefine(rt, "k", NULL));
  KCT_STATUS(rt, KC_ENOTFOUND, run(f, k));
  KCT_CONTAINS(kc_errmsg(rt), "k");
}

static void test_buffer_ranges(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  const size_t size = N * sizeof(float);
  char tmp[2 * N * sizeof(float)];
  memset(tmp, 1, sizeof tmp);
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_write(f->buf, size - 4, tmp, 8));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_write(f->buf, 0, tmp, size + 1));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_write(f->buf, size + 1, tmp, 0));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_write(f->buf, 8, tmp, SIZE_MAX));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_read(f->buf, SIZE_MAX, tmp, 2));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_read(f->buf, 1, tmp, size));
  KCT_CONTAINS(kc_errmsg(rt), "outside");
  /* exactly the buffer, and empty copies at its end, are fine */
  float pattern[N];
  for (int i = 0; i < N; i++) pattern[i] = (float)i * 0.25f;
  KCT_OK(rt, kc_buffer_write(f->buf, 0, pattern, size));
  KCT_OK(rt, kc_buffer_write(f->buf, size, tmp, 0));
  KCT_OK(rt, kc_buffer_read(f->buf, size, tmp, 0));
  float back[N];
  KCT_OK(rt, kc_buffer_read(f->buf, 0, back, size));
  assert_memory_equal(back, pattern, size);
  KCT_OK(rt, kc_buffer_read(f->buf, size - sizeof(float), back, sizeof(float)));
  assert_true(back[0] == pattern[N - 1]);
}

static void test_undefined_kernel(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kc_kernel *k = kct_kernel(rt, "nosuch", NULL); /* handles may precede definitions */
  KCT_STATUS(rt, KC_ENOTFOUND, run(f, k));
  KCT_CONTAINS(kc_errmsg(rt), "nosuch");
  KCT_STATUS(rt, KC_ENOTFOUND, kc_kernel_compile(k));
  kc_code_info info;
  KCT_STATUS(rt, KC_ENOTFOUND, kc_kernel_code(k, &info));
  char *src = NULL;
  KCT_STATUS(rt, KC_ENOTFOUND, kc_kernel_source(k, &src));
  assert_int_equal(kct_stats(rt).compile_failures, 0);

  kct_define(rt, "nosuch", "KC_KERNEL void nosuch(KC_GLOBAL float *y) { y[kc_global_id(0)] = 9.0f; }");
  KCT_OK(rt, run(f, k));
  kct_expect_linear(f->out, N, 0, 9);
}

static void test_launch_on_destroyed_context(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_kernel *k = kct_define_kernel(rt, "h", SRC_H1, "k", SRC_K);
  kc_context *ctx = kct_context(rt);
  kc_dim3 one = {1, 1, 1};
  kc_context_destroy(ctx); /* before any launch: nothing cached */
  KCT_STATUS(rt, KC_EDESTROYED, kc_launch(k, ctx, &one, &one, NULL, 0));
  KCT_CONTAINS(kc_errmsg(rt), "destroyed");
  assert_int_equal(kct_stats(rt).compiles, 0);
  kct_destroy(rt);
}

/* Bound arguments: every check kc_launch makes, made when binding (and
 * when replacing one), and the launch's own checks on both its paths. */
static void test_bound_argument_errors(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt = f->rt;
  kc_buffer *foreign;
  kc_kernel *k = define_ka(rt, &foreign);
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1}, zero = {1, 0, 1};
  float a = 2.5f;
  double ad = 2.5;
  int n = N;
  kc_arg ok[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(a), KC_ARG_VAL(n)};
  kc_args *bound = (kc_args *)&bound;

  /* binding */
  KCT_STATUS(rt, KC_EINVAL, kc_args_create(k, f->ctx, ok, 3, NULL));
  KCT_STATUS(NULL, KC_EINVAL, kc_args_create(NULL, f->ctx, ok, 3, &bound));
  assert_null(bound);
  KCT_STATUS(rt, KC_EINVAL, kc_args_create(k, NULL, ok, 3, &bound));
  kc_arg one[] = {KC_ARG_BUF(f->buf)};
  KCT_STATUS(rt, KC_EARGS, kc_args_create(k, f->ctx, one, 1, &bound));
  KCT_CONTAINS(kc_errmsg(rt), "takes 3 arguments, 1 given");
  KCT_STATUS(rt, KC_EINVAL, kc_args_create(k, f->ctx, NULL, 3, &bound));
  kc_arg dbl[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(ad), KC_ARG_VAL(n)};
  KCT_STATUS(rt, KC_EARGS, kc_args_create(k, f->ctx, dbl, 3, &bound));
  KCT_CONTAINS(kc_errmsg(rt), "8");
  kc_arg null_val[] = {KC_ARG_BUF(f->buf), {NULL, sizeof a, KC_ARG_SCALAR}, KC_ARG_VAL(n)};
  KCT_STATUS(rt, KC_EARGS, kc_args_create(k, f->ctx, null_val, 3, &bound));
  kc_arg wrong_ctx[] = {KC_ARG_BUF(foreign), KC_ARG_VAL(a), KC_ARG_VAL(n)};
  KCT_STATUS(rt, KC_EARGS, kc_args_create(k, f->ctx, wrong_ctx, 3, &bound));
  KCT_CONTAINS(kc_errmsg(rt), "another context");
  assert_null(bound);
  kc_runtime *rt2 = kct_runtime(NULL);
  kc_context *ctx2 = kct_context(rt2);
  KCT_STATUS(rt, KC_EINVAL, kc_args_create(k, ctx2, ok, 3, &bound));
  kct_destroy(rt2);
  kc_kernel *undefined = kct_kernel(rt, "nowhere", NULL);
  KCT_STATUS(rt, KC_ENOTFOUND, kc_args_create(undefined, f->ctx, NULL, 0, &bound));
  KCT_CONTAINS(kc_errmsg(rt), "nowhere");

  KCT_OK(rt, kc_args_create(k, f->ctx, ok, 3, &bound));
  for (int pass = 0; pass < 2; pass++) { /* 0: slow path (nothing cached), 1: fast path */
    if (pass == 0) KCT_OK(rt, kc_context_reset(f->ctx));
    else KCT_OK(rt, kc_launch_args(bound, &g, &b));
    KCT_STATUS(rt, KC_EINVAL, kc_launch_args(bound, NULL, &b));
    KCT_CONTAINS(kc_errmsg(rt), "NULL");
    if (pass == 0) KCT_OK(rt, kc_context_reset(f->ctx));
    KCT_STATUS(rt, KC_EINVAL, kc_launch_args(bound, &g, NULL));
    if (pass == 0) KCT_OK(rt, kc_context_reset(f->ctx));
    KCT_STATUS(rt, KC_EINVAL, kc_launch_args(bound, &zero, &b));
    KCT_CONTAINS(kc_errmsg(rt), "at least 1");
    if (pass == 0) KCT_OK(rt, kc_context_reset(f->ctx));
    KCT_STATUS(rt, KC_EINVAL, kc_launch_args(bound, &g, &zero));
  }
  KCT_STATUS(NULL, KC_EINVAL, kc_launch_args(NULL, &g, &b));

  /* replacing one argument: checked, and a failure changes nothing */
  KCT_STATUS(NULL, KC_EINVAL, kc_args_set(NULL, 0, KC_ARG_BUF(f->buf)));
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 3, KC_ARG_VAL(n)));
  KCT_CONTAINS(kc_errmsg(rt), "does not exist");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 0, KC_ARG_VAL(a)));
  KCT_CONTAINS(kc_errmsg(rt), "buffer");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 0, KC_ARG_BUF(NULL)));
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 0, ((kc_arg){f->buf, 4, KC_ARG_BUFFER})));
  KCT_CONTAINS(kc_errmsg(rt), "whose size is 0");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 0, KC_ARG_BUF(foreign)));
  KCT_CONTAINS(kc_errmsg(rt), "another context");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 1, KC_ARG_BUF(f->buf)));
  KCT_CONTAINS(kc_errmsg(rt), "scalar");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 1, KC_ARG_VAL(ad)));
  KCT_CONTAINS(kc_errmsg(rt), "8");
  KCT_STATUS(rt, KC_EARGS, kc_args_set(bound, 2, ((kc_arg){NULL, sizeof n, KC_ARG_SCALAR})));
  KCT_OK(rt, kct_run_args(bound, f->ctx, f->buf, N, f->out));
  kct_expect_linear(f->out, N, 0, 2.5f); /* the arguments as bound */

  /* the context destroyed, and another one created in its place */
  kc_context_destroy(f->ctx);
  KCT_STATUS(rt, KC_EDESTROYED, kc_launch_args(bound, &g, &b));
  KCT_CONTAINS(kc_errmsg(rt), "destroyed");
  kc_context *again = kct_context(rt); /* may reuse the destroyed one's memory */
  KCT_STATUS(rt, KC_EDESTROYED, kc_launch_args(bound, &g, &b)); /* not the new context */
  kc_buffer *fresh = kct_buffer(rt, again, N);
  KCT_STATUS(rt, KC_EDESTROYED, kc_args_set(bound, 0, KC_ARG_BUF(fresh)));
  kct_destroy(rt); /* frees the bound arguments with their kernel */
}

/* Each argument of a five-parameter kernel, one at a time, made bad in
 * each way kc_launch checks, on the cached path (after a good launch): a
 * NULL pointer, a wrong size, the other kind, an unknown kind, and for a
 * buffer a buffer of another context. Every one is KC_EARGS naming that
 * argument, and launches nothing. On the host backend the compiled entry
 * checks the arguments two at a time as packed signatures where the
 * compiler targets AVX2 (the last pair of an odd count overlapping the one
 * before it), else one after another: both forms run here (-O2 targets no
 * AVX2; tcc none), so that every lane of the packed compare is seen to
 * catch its argument. */
static void each_argument_checked(kc_runtime *rt, const char *how) {
  kc_context *ctx = kct_context(rt), *other = kct_context(rt);
  kc_buffer *y = kct_buffer(rt, ctx, N), *z = kct_buffer(rt, ctx, N), *foreign = kct_buffer(rt, other, N);
  kct_define(rt, "k5",
             "KC_KERNEL void k5(KC_GLOBAL float *y, float a, KC_GLOBAL float *z, int n, float c) {\n"
             "  size_t i = kc_global_id(0); y[i] = a * (float)i + c; z[i] = (float)n; }");
  kc_kernel *k = kct_kernel(rt, "k5", NULL);
  kc_dim3 g = {N, 1, 1}, b = {1, 1, 1};
  float a = 2.0f, c = 1.0f;
  double wide = 2.0;
  int n = 7;
  const kc_arg good[5] = {KC_ARG_BUF(y), KC_ARG_VAL(a), KC_ARG_BUF(z), KC_ARG_VAL(n), KC_ARG_VAL(c)};
  KCT_OK(rt, kc_launch(k, ctx, &g, &b, good, 5));
  KCT_OK(rt, kc_context_finish(ctx));
  float out[N] = {0};
  KCT_OK(rt, kc_buffer_write(y, 0, out, sizeof out));
  KCT_OK(rt, kc_buffer_write(z, 0, out, sizeof out));
  kc_stats s0 = kct_stats(rt);
  for (int i = 0; i < 5; i++) {
    bool buf = good[i].kind == KC_ARG_BUFFER;
    const kc_arg bad[] = {
        {NULL, good[i].size, good[i].kind},
        buf ? (kc_arg){y, 4, KC_ARG_BUFFER} : KC_ARG_VAL(wide),
        buf ? KC_ARG_VAL(a) : KC_ARG_BUF(y),
        {good[i].ptr, good[i].size, 7u},
        buf ? KC_ARG_BUF(foreign) : (kc_arg){&a, 0, KC_ARG_SCALAR},
    };
    for (size_t j = 0; j < sizeof bad / sizeof *bad; j++) {
      kc_arg args[5];
      memcpy(args, good, sizeof args);
      args[i] = bad[j];
      kc_status st = kc_launch(k, ctx, &g, &b, args, 5);
      char want[32];
      snprintf(want, sizeof want, "argument %d", i);
      if (st != KC_EARGS || !strstr(kc_errmsg(rt), want))
        fail_msg("%s: argument %d, bad form %zu: %s, expected KC_EARGS about %s (message: %s)", how, i, j,
                 kc_status_name(st), want, kc_errmsg(rt));
    }
  }
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.compiles, s0.compiles);
  /* none of them ran the kernel: both buffers are still zero */
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(y, 0, out, sizeof out));
  kct_expect_linear(out, N, 0, 0);
  KCT_OK(rt, kc_buffer_read(z, 0, out, sizeof out));
  kct_expect_linear(out, N, 0, 0);
  KCT_OK(rt, kc_launch(k, ctx, &g, &b, good, 5));
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(y, 0, out, sizeof out));
  kct_expect_linear(out, N, a, c);
}

static void test_each_argument_checked(void **state) {
  (void)state;
  kc_options o;
  kc_options_init(&o);
  kc_runtime *rt = kct_runtime(&o);
  each_argument_checked(rt, "the default options");
  kct_destroy(rt);
  if (kct_backend != KC_BACKEND_HOST) return;
  o.host_opt = "-O2"; /* x86-64 without AVX2: the checks one after another */
  rt = kct_runtime(&o);
  each_argument_checked(rt, "host -O2");
  kct_destroy(rt);
  if (kct_in_path("tcc")) {
    kc_options_init(&o);
    o.host_cc = "tcc";
    rt = kct_runtime(&o);
    each_argument_checked(rt, "host tcc");
    kct_destroy(rt);
  }
}

/* A context of another runtime is not a context of this one. */
static void test_context_of_another_runtime(void **state) {
  kct_fixture *f = *state;
  kc_runtime *rt2 = kct_runtime(NULL);
  kc_kernel *k2 = kct_define_kernel(rt2, "h", SRC_H1, "k", SRC_K);
  KCT_STATUS(rt2, KC_EINVAL, run(f, k2));
  KCT_CONTAINS(kc_errmsg(rt2), "another runtime");
  kct_destroy(rt2);
}

/* A pin on a runtime that another thread destroyed: the pinning thread can
 * no longer unpin it, so its next kc_pin of another runtime drops it;
 * a pin on a runtime that lives is still refused. */
typedef struct pin_job {
  kc_runtime *rt1, *rt2;
  pthread_barrier_t *b;
  kc_status first, live, after, unpin;
  kc_world world, latest;
} pin_job;

static void *pin_then_pin_another(void *arg) {
  pin_job *j = arg;
  j->first = kc_pin(j->rt1, NULL);
  j->live = kc_pin(j->rt2, NULL); /* rt1 lives: refused */
  pthread_barrier_wait(j->b); /* the main thread destroys rt1 */
  pthread_barrier_wait(j->b);
  j->after = kc_pin(j->rt2, &j->world);
  j->latest = kc_world_latest(j->rt2);
  j->unpin = kc_unpin(j->rt2);
  return NULL;
}

static void test_pin_on_a_destroyed_runtime(void **state) {
  (void)state;
  kc_runtime *rt1 = kct_runtime(NULL), *rt2 = kct_runtime(NULL);
  kct_define(rt2, "h", SRC_H1);
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, 2);
  pin_job j = {.rt1 = rt1, .rt2 = rt2, .b = &b};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pin_then_pin_another, &j), 0);
  pthread_barrier_wait(&b);
  kct_destroy(rt1); /* with the other thread's pin on it */
  pthread_barrier_wait(&b);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&b);
  assert_int_equal(j.first, KC_OK);
  assert_int_equal(j.live, KC_EBUSY);
  KCT_OK(rt2, j.after);
  assert_int_equal(j.world, j.latest);
  KCT_OK(rt2, j.unpin);
  kct_destroy(rt2);
}

KCT_MAIN(KCT_FX_TEST(test_undefined_callee_is_named_then_defined), KCT_FX_TEST(test_long_kernel_name),
         KCT_TEST(test_shadowing_a_builtin_invalidates),
         KCT_TEST(test_shadowing_a_builtin_called_through_a_comment),
         KCT_FX_TEST(test_syntax_error_names_function_and_line), KCT_FX_TEST(test_compile_failure_is_cached),
         KCT_TEST(test_host_compiler_failures), KCT_TEST(test_compiler_word_limits),
         KCT_TEST(test_invalid_names), KCT_FX_TEST(test_null_pointers_are_errors),
         KCT_FX_TEST(test_empty_grid_runs_nothing), KCT_FX_TEST(test_fast_path_checks_like_the_slow_path),
         KCT_TEST(test_status_table), KCT_FX_TEST(test_wrong_arguments),
         KCT_TEST(test_pin_on_a_destroyed_runtime), KCT_FX_TEST(test_recursion_is_rejected),
         KCT_FX_TEST(test_undefine), KCT_FX_TEST(test_buffer_ranges), KCT_FX_TEST(test_undefined_kernel),
         KCT_TEST(test_launch_on_destroyed_context), KCT_FX_TEST(test_context_of_another_runtime),
         KCT_FX_TEST(test_bound_argument_errors), KCT_TEST(test_each_argument_checked))
