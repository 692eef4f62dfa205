/* SPDX-License-Identifier: MIT */
/*
 * test_params.c -- a kernel's parameter list through the public API
 * (kc_kernel_param_count, kc_kernel_param): names, declared and resolved
 * types, kinds, sizes and numeric classes, specialization parameters as
 * types, the parameters following a redefinition, a pinned thread seeing
 * its world's list, a struct by value, OpenCL's KC_LOCAL pointers, and bad
 * input.
 */
#include "kc_test.h"

static const char SRC_P[] = "KC_KERNEL void p(KC_GLOBAL float *y, const T a, int n, unsigned int m,\n"
                            "                 double d, uint8_t b, uint64_t s, long l) { (void)y; }";

static kc_param_info param(kc_runtime *rt, kc_kernel *k, uint32_t i) {
  kc_param_info info;
  memset(&info, 0xab, sizeof info); /* must all be written */
  KCT_OK(rt, kc_kernel_param(k, i, &info));
  assert_int_equal(info.size, sizeof info);
  return info;
}

static void expect(kc_runtime *rt, kc_kernel *k, uint32_t i, const char *name, const char *ctype,
                   uint32_t kind, uint32_t size, uint32_t cls) {
  kc_param_info p = param(rt, k, i);
  assert_string_equal(p.name, name);
  assert_string_equal(p.ctype, ctype);
  assert_int_equal(p.kind, kind);
  assert_int_equal(p.arg_size, size);
  assert_int_equal(p.scalar, cls);
}

static void test_param_list(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "p", SRC_P);
  kc_kernel *k = kct_kernel(rt, "p", "T=float");
  uint32_t n = 0;
  KCT_OK(rt, kc_kernel_param_count(k, &n));
  assert_int_equal(n, 8);
  expect(rt, k, 0, "y", "", KC_ARG_BUFFER, 0, KC_SCALAR_NONE);
  assert_non_null(strstr(param(rt, k, 0).type, "float *"));
  expect(rt, k, 1, "a", "float", KC_ARG_SCALAR, 4, KC_SCALAR_FLOAT);
  assert_string_equal(param(rt, k, 1).type, "const T");
  expect(rt, k, 2, "n", "int", KC_ARG_SCALAR, 4, KC_SCALAR_SINT);
  expect(rt, k, 3, "m", "unsigned int", KC_ARG_SCALAR, 4, KC_SCALAR_UINT);
  expect(rt, k, 4, "d", "double", KC_ARG_SCALAR, 8, KC_SCALAR_FLOAT);
  expect(rt, k, 5, "b", "uint8_t", KC_ARG_SCALAR, 1, KC_SCALAR_UINT);
  expect(rt, k, 6, "s", "uint64_t", KC_ARG_SCALAR, 8, KC_SCALAR_UINT);
  expect(rt, k, 7, "l", "long", KC_ARG_SCALAR, 8, KC_SCALAR_SINT);
  /* another specialization: T is another type */
  kc_kernel *k2 = kct_kernel(rt, "p", "T=short");
  expect(rt, k2, 1, "a", "short", KC_ARG_SCALAR, 2, KC_SCALAR_SINT);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 2); /* asking compiled each once */
  KCT_OK(rt, kc_kernel_param_count(k, &n));
  assert_int_equal(kct_stats(rt).compiles, 2);
  kct_destroy(rt);
}

static void test_params_follow_worlds(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "q", "KC_KERNEL void q(int a) { (void)a; }");
  kc_kernel *k = kct_kernel(rt, "q", "");
  uint32_t n;
  KCT_OK(rt, kc_kernel_param_count(k, &n));
  assert_int_equal(n, 1);
  KCT_OK(rt, kc_pin(rt, NULL));
  kct_define(rt, "q", "KC_KERNEL void q(float a, KC_GLOBAL int *b) { (void)a; (void)b; }");
  KCT_OK(rt, kc_kernel_param_count(k, &n));
  assert_int_equal(n, 1); /* the pinned world's definition */
  expect(rt, k, 0, "a", "int", KC_ARG_SCALAR, 4, KC_SCALAR_SINT);
  KCT_OK(rt, kc_unpin(rt));
  KCT_OK(rt, kc_kernel_param_count(k, &n));
  assert_int_equal(n, 2);
  expect(rt, k, 0, "a", "float", KC_ARG_SCALAR, 4, KC_SCALAR_FLOAT);
  expect(rt, k, 1, "b", "", KC_ARG_BUFFER, 0, KC_SCALAR_NONE);
  kct_define(rt, "v", "KC_KERNEL void v(void) { }");
  kc_kernel *kv = kct_kernel(rt, "v", "");
  KCT_OK(rt, kc_kernel_param_count(kv, &n));
  assert_int_equal(n, 0);
  kct_destroy(rt);
}

/* A struct by value: its size is the code's (the parameter probe's), its
 * class raw bytes. */
static void test_struct_param(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "P", "typedef struct { char c; long l; int i; float f; } P;");
  kct_define(rt, "sp", "KC_KERNEL void sp(KC_GLOBAL float *y, P p) { y[0] = p.f; }");
  kc_kernel *k = kct_kernel(rt, "sp", "");
  expect(rt, k, 1, "p", "", KC_ARG_SCALAR, 24, KC_SCALAR_OTHER);
  assert_string_equal(param(rt, k, 1).type, "P");
  kct_destroy(rt);
}

/* An OpenCL KC_LOCAL pointer parameter is sized per launch
 * (KC_ARG_LOCAL_BYTES): the code's signature says so. */
static void test_local_pointer(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  if (strcmp(kc_runtime_backend(rt), "opencl") != 0) {
    kct_destroy(rt);
    skip(); /* KC_LOCAL pointer parameters are OpenCL's */
  }
  kct_define(rt, "lp", "KC_KERNEL void lp(KC_GLOBAL int *y, KC_LOCAL int *s) { s[0] = 1; y[0] = s[0]; }");
  kc_kernel *k = kct_kernel(rt, "lp", "");
  expect(rt, k, 1, "s", "", KC_ARG_LOCAL, 0, KC_SCALAR_NONE);
  expect(rt, k, 0, "y", "", KC_ARG_BUFFER, 0, KC_SCALAR_NONE);
  kct_destroy(rt);
}

static void test_param_errors(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "q", "KC_KERNEL void q(int a) { (void)a; }");
  kc_kernel *k = kct_kernel(rt, "q", "");
  kc_param_info info;
  uint32_t n;
  KCT_STATUS(NULL, KC_EINVAL, kc_kernel_param_count(NULL, &n));
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_param_count(k, NULL));
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_param(k, 1, &info));
  KCT_CONTAINS(kc_errmsg(rt), "has 1 parameters, no parameter 1");
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_param(k, 0, NULL));
  KCT_STATUS(rt, KC_EINVAL, kc_kernel_param_size(k, 0, &info, sizeof(size_t)));
  /* a larger struct (a newer program) gets zeros past what this library fills */
  unsigned char big[sizeof info + 16];
  memset(big, 0xab, sizeof big);
  KCT_OK(rt, kc_kernel_param_size(k, 0, (kc_param_info *)big, sizeof big));
  assert_int_equal(((kc_param_info *)big)->size, sizeof info);
  for (size_t i = sizeof info; i < sizeof big; i++) assert_int_equal(big[i], 0);
  /* an undefined kernel: its lookup's error */
  kc_kernel *u = kct_kernel(rt, "nothere", "");
  KCT_STATUS(rt, KC_ENOTFOUND, kc_kernel_param_count(u, &n));
  assert_int_equal(n, 0);
  kct_destroy(rt);
}

KCT_MAIN(KCT_TEST(test_param_list), KCT_TEST(test_params_follow_worlds), KCT_TEST(test_struct_param),
         KCT_TEST(test_local_pointer), KCT_TEST(test_param_errors))
