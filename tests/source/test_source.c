/* SPDX-License-Identifier: MIT */
/*
 * test_source.c -- real kernel sources on the backend named on the command
 * line (issue 14): a call made only through a macro (in the kernel's body
 * or a macro in the table) is a dependency; pastes and splices; #define
 * constants, types and constants as named definitions; headers in the
 * table (a redefinition recompiles exactly its includers, directly or
 * through another header; a quoted include of a file the table lacks is
 * refused); the one dialect every backend refuses with the same message;
 * specialization parameters that would rewrite the dialect.
 */
#include "source.h"

#include <stdlib.h>

uint64_t src_compiles(kc_runtime *rt) { return kct_stats(rt).compiles; }

float src_run(kct_fixture *f, const char *name) {
  kc_kernel *k = kct_kernel(f->rt, name, NULL);
  memset(f->out, 0, sizeof f->out);
  float v = kct_run_ok(f->rt, k, f->ctx, f->buf, KCT_FX_N, f->out);
  kc_kernel_destroy(k);
  return v;
}

/* A kernel and the value it must write (a list ends at kernel NULL). */
typedef struct src_want {
  const char *kernel;
  float value;
} src_want;

/* Runs each kernel of w and checks the value it writes (exactly); then,
 * unless compiles is -1, that compiles were made since c0 (the count was
 * c0). line: the caller's, for the message. */
static void expect_runs(kct_fixture *f, int line, uint64_t c0, int compiles, const src_want *w) {
  for (; w->kernel; w++) {
    float got = src_run(f, w->kernel);
    if (got != w->value) fail_msg("line %d: kernel %s wrote %g, expected %g", line, w->kernel, got, w->value);
  }
  uint64_t made = src_compiles(f->rt) - c0;
  if (compiles >= 0 && made != (uint64_t)compiles)
    fail_msg("line %d: %llu compiles, expected %d", line, (unsigned long long)made, compiles);
}
#define EXPECT_RUNS(f, c0, compiles, ...) \
  expect_runs(f, __LINE__, c0, compiles, (const src_want[]){__VA_ARGS__, {NULL, 0}})

/* Asserts that launching `name` fails with st and exactly message msg. */
static void expect_refused(kct_fixture *f, const char *name, kc_status st, const char *msg) {
  kc_kernel *k = kct_kernel(f->rt, name, NULL);
  kc_status got = kct_run(k, f->ctx, f->buf, KCT_FX_N, NULL);
  if (got != st)
    fail_msg("launching %s: %s, expected %s: %s", name, kc_status_name(got), kc_status_name(st),
             kc_errmsg(f->rt));
  if (msg && strcmp(kc_errmsg(f->rt), msg))
    fail_msg("launching %s: message\n  %s\nexpected\n  %s", name, kc_errmsg(f->rt), msg);
  kc_kernel_destroy(k);
}

/* -------------------------------------------------------------- macros */

/* Defines helper(x) = x + 1 and kernel (src), which calls helper(1.0f) in
 * a way the scanner must see through, and checks that it writes 2; then
 * that a redefinition of helper as x + add recompiles the kernel, once,
 * and it writes 1 + add. */
static void expect_helper_dependency(kct_fixture *f, const char *kernel, const char *src, int add) {
  kct_define(f->rt, "helper", "KC_DEVICE float helper(float x) { return x + 1.0f; }");
  kct_define(f->rt, kernel, src);
  EXPECT_RUNS(f, 0, -1, {kernel, 2.0f});
  uint64_t c = src_compiles(f->rt);
  char helper[96];
  snprintf(helper, sizeof helper, "KC_DEVICE float helper(float x) { return x + %d.0f; }", add);
  kct_define(f->rt, "helper", helper);
  EXPECT_RUNS(f, c, 1, {kernel, 1.0f + (float)add});
}

static void test_macro_only_call_is_a_dependency(void **state) {
  expect_helper_dependency(*state, "k",
                           "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
                           "#define CALL(x) helper(x)\n"
                           "  y[kc_global_id(0)] = CALL(1.0f);\n"
                           "}\n",
                           10);
}

static void test_macro_in_the_table(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "SCALE", "#define SCALE 3.0f");
  kct_define(f->rt, "dbl", "KC_DEVICE float dbl(float x) { return 2.0f * x; }");
  kct_define(f->rt, "TWICE", "#define TWICE(x) \\\n  (dbl(x) * SCALE)"); /* spliced, and two names */
  kct_define(f->rt, "km", "KC_KERNEL void km(KC_GLOBAL float *y) { y[kc_global_id(0)] = TWICE(1.0f); }");
  kct_define(f->rt, "other", "KC_KERNEL void other(KC_GLOBAL float *y) { y[kc_global_id(0)] = 5.0f; }");
  EXPECT_RUNS(f, 0, -1, {"km", 6.0f}, {"other", 5.0f});
  uint64_t c = src_compiles(f->rt);
  kct_define(f->rt, "dbl", "KC_DEVICE float dbl(float x) { return 4.0f * x; }"); /* through the macro */
  EXPECT_RUNS(f, c, 1, {"km", 12.0f}, {"other", 5.0f});
  kct_define(f->rt, "SCALE", "#define SCALE 1.0f"); /* a constant macro */
  EXPECT_RUNS(f, c, 2, {"km", 4.0f});
  /* undefined: the kernel no longer compiles, and says why */
  KCT_OK(f->rt, kc_undefine(f->rt, "SCALE", NULL));
  kc_kernel *k = kct_kernel(f->rt, "km", NULL);
  assert_int_not_equal(kct_run(k, f->ctx, f->buf, KCT_FX_N, NULL), KC_OK);
  KCT_CONTAINS(kc_errmsg(f->rt), "SCALE");
  kc_kernel_destroy(k);
}

/* A paste of known pieces is one name; a paste of a parameter depends on
 * every name with the known prefix, even one defined later. */
static void test_pastes(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "op_add", "KC_DEVICE float op_add(float x) { return x + 100.0f; }");
  kct_define(f->rt, "OP", "#define OP(name, x) op_ ## name(x)");
  kct_define(f->rt, "JOINED", "#define JOINED(x) op_ ## add(x)");
  kct_define(f->rt, "kp", "KC_KERNEL void kp(KC_GLOBAL float *y) { y[kc_global_id(0)] = OP(add, 1.0f); }");
  kct_define(f->rt, "kj", "KC_KERNEL void kj(KC_GLOBAL float *y) { y[kc_global_id(0)] = JOINED(2.0f); }");
  EXPECT_RUNS(f, 0, -1, {"kp", 101.0f}, {"kj", 102.0f});
  uint64_t c = src_compiles(f->rt);
  kct_define(f->rt, "op_add", "KC_DEVICE float op_add(float x) { return x + 200.0f; }");
  EXPECT_RUNS(f, c, 2, {"kp", 201.0f}, {"kj", 202.0f});
  /* a new op_ name: kp (which cannot know which op_ it calls) recompiles, kj does not */
  kct_define(f->rt, "op_mul", "KC_DEVICE float op_mul(float x) { return x * 3.0f; }");
  EXPECT_RUNS(f, c, 3, {"kp", 201.0f}, {"kj", 202.0f});
  kct_define(f->rt, "unrelated", "KC_DEVICE float unrelated(float x) { return x; }");
  EXPECT_RUNS(f, c, 3, {"kp", 201.0f});
}

static void test_spliced_name(void **state) {
  expect_helper_dependency(
      *state, "ks", "KC_KERNEL void ks(KC_GLOBAL float *y) { y[kc_global_id(0)] = hel\\\nper(1.0f); }", 3);
}

static void test_types_and_constants(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "P", "typedef struct P { float x, y; } P;");
  /* a program-scope constant: OpenCL C wants it in the constant space */
  const char *cq = kct_backend == KC_BACKEND_OPENCL ? "__constant" : "static const";
  char src[128];
  snprintf(src, sizeof src, "%s float OFFSET = 0.5f;", cq);
  kct_define(f->rt, "OFFSET", src);
  kct_define(f->rt, "sum", "KC_DEVICE float sum(P p) { return p.x + p.y + OFFSET; }");
  kct_define(f->rt, "kt",
             "KC_KERNEL void kt(KC_GLOBAL float *y) { P p = {1.0f, 2.0f}; y[kc_global_id(0)] = sum(p); }");
  EXPECT_RUNS(f, 0, -1, {"kt", 3.5f});
  uint64_t c = src_compiles(f->rt);
  kct_define(f->rt, "P", "typedef struct P { float y, x; } P;");
  EXPECT_RUNS(f, c, -1, {"kt", 3.5f});
  snprintf(src, sizeof src, "%s float OFFSET = 1.5f;", cq);
  kct_define(f->rt, "OFFSET", src);
  EXPECT_RUNS(f, c, 2, {"kt", 4.5f});
}

/* An enumerator is found through the enum that declares it. */
static void test_enumerators(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "Mode", "enum Mode { MODE_SLOW = 1, MODE_FAST = (2 + 1), MODE_LAST };");
  kct_define(f->rt, "ke", "KC_KERNEL void ke(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)MODE_FAST; }");
  kct_define(f->rt, "kl", "KC_KERNEL void kl(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)MODE_LAST; }");
  EXPECT_RUNS(f, 0, -1, {"ke", 3.0f}, {"kl", 4.0f});
  uint64_t c = src_compiles(f->rt);
  kct_define(f->rt, "Mode", "enum Mode { MODE_SLOW = 1, MODE_FAST = 7, MODE_LAST };");
  EXPECT_RUNS(f, c, 2, {"ke", 7.0f}, {"kl", 8.0f});
  /* MODE_FAST no longer declared: the kernel does not compile, and says so */
  kct_define(f->rt, "Mode", "enum Mode { MODE_SLOW = 1, MODE_LAST };");
  kc_kernel *k = kct_kernel(f->rt, "ke", NULL);
  assert_int_not_equal(kct_run(k, f->ctx, f->buf, KCT_FX_N, NULL), KC_OK);
  KCT_CONTAINS(kc_errmsg(f->rt), "MODE_FAST");
  kc_kernel_destroy(k);
  assert_true(src_run(f, "kl") == 2.0f);
}

/* ------------------------------------------------------------- headers */

static const char K_INC[] = "#include \"common.h\"\n"
                            "KC_KERNEL void k1(KC_GLOBAL float *y) { y[kc_global_id(0)] = base_value(); }\n";
static const char K_NESTED[] =
    "#include \"outer.h\"\n"
    "KC_KERNEL void k3(KC_GLOBAL float *y) { y[kc_global_id(0)] = outer_value(); }\n";

static void test_header_redefinition_recompiles_its_includers(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "common.h", "#pragma once\nKC_DEVICE float base_value(void) { return 5.0f; }\n");
  kct_define(f->rt, "outer.h",
             "#ifndef OUTER_H\n#define OUTER_H\n#include \"common.h\"\n"
             "KC_DEVICE float outer_value(void) { return base_value() * 2.0f; }\n#endif\n");
  kct_define(f->rt, "k1", K_INC);
  kct_define(f->rt, "k3", K_NESTED);
  kct_define(f->rt, "k2", "KC_KERNEL void k2(KC_GLOBAL float *y) { y[kc_global_id(0)] = 7.0f; }");
  /* both headers reach k4, which includes common.h twice (once through outer.h) */
  kct_define(
      f->rt, "k4",
      "#include \"common.h\"\n#include \"outer.h\"\n"
      "KC_KERNEL void k4(KC_GLOBAL float *y) { y[kc_global_id(0)] = outer_value() + base_value(); }\n");
  EXPECT_RUNS(f, 0, -1, {"k1", 5.0f}, {"k2", 7.0f}, {"k3", 10.0f}, {"k4", 15.0f});
  uint64_t c = src_compiles(f->rt);
  kct_define(f->rt, "common.h", "#pragma once\nKC_DEVICE float base_value(void) { return 6.0f; }\n");
  /* k1, k3 (through outer.h) and k4 recompile, not k2 */
  EXPECT_RUNS(f, c, 3, {"k1", 6.0f}, {"k2", 7.0f}, {"k3", 12.0f}, {"k4", 18.0f});
  kct_define(f->rt, "outer.h",
             "#ifndef OUTER_H\n#define OUTER_H\n#include \"common.h\"\n"
             "KC_DEVICE float outer_value(void) { return base_value() * 3.0f; }\n#endif\n");
  EXPECT_RUNS(f, c, 5, {"k1", 6.0f}, {"k3", 18.0f}, {"k4", 24.0f}); /* k3 and k4 */
  /* the header's text is in the translation unit, not an #include of a file */
  kc_kernel *k = kct_kernel(f->rt, "k3", NULL);
  char *src;
  KCT_OK(f->rt, kc_kernel_source(k, &src));
  KCT_CONTAINS(src, "#line 1 \"outer.h\"");
  KCT_CONTAINS(src, "return base_value() * 3.0f");
  assert_null(strstr(src, "#include \"common.h\""));
  kc_free(f->rt, src);
  kc_kernel_destroy(k);
}

static void test_include_outside_the_table_is_refused(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "kn",
             "#include \"nope.h\"\nKC_KERNEL void kn(KC_GLOBAL float *y) { y[kc_global_id(0)] = NOPE; }\n");
  char msg[512];
  snprintf(msg, sizeof msg,
           "'kn' includes \"nope.h\", which is not defined in kcache (world %llu): define it with "
           "kc_define(rt, \"nope.h\", text). Quoted includes name headers in kcache; a header on disk is "
           "included with <...> (kcache records the files the compiler reads)",
           (unsigned long long)kc_world_latest(f->rt));
  expect_refused(f, "kn", KC_ENOTFOUND, msg);
  kct_define(f->rt, "nope.h", "#define NOPE 9.0f\n");
  assert_true(src_run(f, "kn") == 9.0f);
  /* a computed include, and a name that is no header name */
  kct_define(f->rt, "kc2",
             "#define HDR \"nope.h\"\n#include HDR\nKC_KERNEL void kc2(KC_GLOBAL float *y) { }\n");
  expect_refused(f, "kc2", KC_EINVAL, NULL);
  KCT_CONTAINS(kc_errmsg(f->rt), "computed or malformed #include");
  kct_define(f->rt, "kd", "#include \"../etc/x.h\"\nKC_KERNEL void kd(KC_GLOBAL float *y) { }\n");
  expect_refused(f, "kd", KC_EINVAL, NULL);
  KCT_CONTAINS(kc_errmsg(f->rt), "no header name kcache can hold");
  /* header names: a bad one is refused at define */
  KCT_STATUS(f->rt, KC_EINVAL, kc_define(f->rt, "/abs.h", "x", NULL));
  KCT_STATUS(f->rt, KC_EINVAL, kc_define(f->rt, "a/../b.h", "x", NULL));
}

/* A system header stays the compiler's (host: <math.h>; CUDA's and
 * OpenCL's built-ins need no include). */
static void test_system_header_keeps_working(void **state) {
  kct_fixture *f = *state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kct_define(
      f->rt, "km2",
      "#include <math.h>\nKC_KERNEL void km2(KC_GLOBAL float *y) { y[kc_global_id(0)] = sqrtf(16.0f); }\n");
  assert_true(src_run(f, "km2") == 4.0f);
}

/* ------------------------------------------------------------- dialect */

static void test_one_dialect_one_message(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "helper", "KC_DEVICE float helper(float x) { return x + 1.0f; }");
  expect_refused(
      f, "helper", KC_EINVAL,
      "'helper' is a KC_DEVICE helper, not a kernel: only a function declared KC_KERNEL void can be "
      "launched");
  kct_define(f->rt, "nomark", "void nomark(KC_GLOBAL float *y) { y[0] = 1.0f; }");
  expect_refused(
      f, "nomark", KC_EINVAL,
      "kernel 'nomark' is not declared KC_KERNEL: write KC_KERNEL void nomark(...), as every backend "
      "needs");
  kct_define(f->rt, "nospace", "KC_KERNEL void nospace(float *y) { y[0] = 1.0f; }");
  expect_refused(f, "nospace", KC_EINVAL,
                 "kernel 'nospace': pointer parameter 'y' has no address space: declare it KC_GLOBAL "
                 "(KC_GLOBAL float *y), or KC_LOCAL for local memory, as every backend needs");
  assert_int_equal(kct_stats(f->rt).compiles, 0); /* refused before any compiler saw them */
}

static void test_specialization_cannot_rewrite_the_dialect(void **state) {
  kct_fixture *f = *state;
  kc_kernel *k = NULL;
  KCT_STATUS(f->rt, KC_EINVAL, kc_kernel_create(f->rt, "k", "KC_KERNEL=1", &k));
  KCT_CONTAINS(kc_errmsg(f->rt), "is reserved");
  KCT_STATUS(f->rt, KC_EINVAL, kc_kernel_create(f->rt, "k", "kc_global_id=1", &k));
  KCT_STATUS(f->rt, KC_EINVAL, kc_kernel_create(f->rt, "k", "A=1 /*,B=*/ 2", &k));
  KCT_CONTAINS(kc_errmsg(f->rt), "comment token");
  KCT_STATUS(f->rt, KC_EINVAL, kc_kernel_create(f->rt, "k", "A=1 // x", &k));
  KCT_STATUS(f->rt, KC_EINVAL, kc_kernel_create(f->rt, "k", "A=1 \\", &k));
  assert_null(k);
  KCT_OK(f->rt, kc_kernel_create(f->rt, "k", "A=a/b,B=2*3", &k)); /* '/' and '*' alone are fine */
  kc_kernel_destroy(k);
}

KCT_MAIN(KCT_FX_TEST(test_macro_only_call_is_a_dependency), KCT_FX_TEST(test_macro_in_the_table),
         KCT_FX_TEST(test_pastes), KCT_FX_TEST(test_spliced_name), KCT_FX_TEST(test_types_and_constants),
         KCT_FX_TEST(test_enumerators), KCT_FX_TEST(test_header_redefinition_recompiles_its_includers),
         KCT_FX_TEST(test_include_outside_the_table_is_refused),
         KCT_FX_TEST(test_system_header_keeps_working), KCT_FX_TEST(test_one_dialect_one_message),
         KCT_FX_TEST(test_specialization_cannot_rewrite_the_dialect),
         KCT_FX_TEST(test_file_defines_everything_in_one_world),
         KCT_FX_TEST(test_file_reload_recompiles_what_reaches_the_edit),
         KCT_FX_TEST(test_file_removed_names_are_undefined), KCT_FX_TEST(test_file_reports_each_change),
         KCT_FX_TEST(test_file_reloads_are_collected), KCT_FX_TEST(test_file_refuses_what_it_cannot_split),
         KCT_FX_TEST(test_big_file_edit_recompiles_one_kernel), KCT_FX_TEST(test_file_loads_from_threads),
         KCT_FX_TEST(test_names_defined_after_their_users),
         KCT_FX_TEST(test_preprocessor_tests_follow_definitions), KCT_FX_TEST(test_failures_live_in_worlds),
         KCT_FX_TEST(test_deep_chains_and_wide_fan_ins), KCT_FX_TEST(test_enumerator_of_an_old_world),
         KCT_TEST(test_disk_headers_in_memory), KCT_TEST(test_disk_headers_across_runtimes),
         KCT_TEST(test_disk_headers_created_later), KCT_TEST(test_disk_headers_in_system_dirs),
         KCT_TEST(test_disk_headers_gone_after_the_compile),
         KCT_TEST(test_disk_headers_changed_during_a_compile),
         KCT_TEST(test_disk_headers_read_before_a_refresh), KCT_TEST(test_disk_headers_two_change_at_once),
         KCT_TEST(test_disk_headers_new_set_starts_at_the_change),
         KCT_TEST(test_disk_headers_tcc_unidentified), KCT_TEST(test_disk_headers_tcc_header_appearing),
         KCT_TEST(test_disk_headers_helper_reads_ids), KCT_TEST(test_disk_headers_tcc_empty_environment),
         KCT_TEST(test_disk_headers_link_switched_during_a_compile),
         KCT_TEST(test_disk_headers_link_switched_during_a_recompile))
