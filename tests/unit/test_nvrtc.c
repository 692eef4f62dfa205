/* SPDX-License-Identifier: MIT */
/*
 * test_nvrtc.c -- the kernels of the test suite, in the portable dialect,
 * compiled by NVRTC for the CUDA backend on a machine without a GPU (through
 * kc__cuda_compile_only): the dialect, helper renaming and #line directives
 * must work there before a GPU ever sees them. Skipped (77) when NVRTC cannot
 * be loaded; the launches themselves run in the core suites with
 * `--backend cuda` on a GPU machine.
 */
#include "kc_test.h"

#include "kc_internal.h"

#include <stdlib.h>

static kc_runtime *rt; /* the allocator and error messages */

/* One definition of a closure, in dependency order (the entry last). */
typedef struct def {
  const char *name, *source;
} def;

/* The translation unit the engine builds: prelude, parameters, helper
 * renames, then each definition after `#line 1 "<name>"`. */
static char *build_tu(const char *params, const def *defs, int n) {
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  kc__sb_puts(&sb, kc__backend_of(KC_BACKEND_CUDA)->prelude);
  kc__sb_puts(&sb, "\n");
  for (const char *q = params; q && *q;) {
    const char *eq = strchr(q, '='), *end = strchr(q, ',');
    if (!end) end = q + strlen(q);
    kc__sb_printf(&sb, "#define %.*s %.*s\n", (int)(eq - q), q, (int)(end - eq - 1), eq + 1);
    q = *end ? end + 1 : end;
  }
  for (int i = 0; i + 1 < n; i++) kc__sb_printf(&sb, "#define %s kc__u_%s\n", defs[i].name, defs[i].name);
  for (int i = 0; i < n; i++) kc__sb_printf(&sb, "#line 1 \"%s\"\n%s\n", defs[i].name, defs[i].source);
  char *tu = kc__sb_take(&sb);
  assert_non_null(tu);
  return tu;
}

/* Compiles for sm_90 (cubin) and compute_90 (PTX); returns the first status. */
static kc_status compile_both(const char *entry, const char *params, const def *defs, int n) {
  char *tu = build_tu(params, defs, n);
  kc_status first = KC_OK;
  const kc__bsvc svc = kc__bsvc_of(rt); /* rt's heap and error owner */
  for (int ptx = 0; ptx < 2; ptx++) {
    void *out = NULL;
    size_t size = 0;
    kc_status st = kc__cuda_compile_only(&svc, tu, strlen(tu), entry, 90, ptx, &out, &size, NULL);
    if (st == KC_OK) {
      assert_non_null(out);
      assert_true(size > 0);
      if (ptx) { /* extern "C": the entry keeps its name */
        char want[128];
        snprintf(want, sizeof want, ".entry %s(", entry);
        KCT_CONTAINS((const char *)out, want);
      } else assert_memory_equal(out, "\177ELF", 4);
    } else if (first == KC_OK) {
      first = st;
    }
    kc__free(rt, out);
  }
  kc__free(rt, tu);
  return first;
}

#define COMPILES(entry, params, ...) \
  do { \
    const def defs_[] = {__VA_ARGS__}; \
    kc_status st_ = compile_both(entry, params, defs_, (int)(sizeof defs_ / sizeof *defs_)); \
    if (st_) \
      fail_msg("NVRTC: %s %s: %s: %s", entry, params ? params : "", kc_status_name(st_), kc_errmsg(rt)); \
  } while (0)

static const def H = {"h", "KC_DEVICE float h(float x) { return x + 1.0f; }"};
static const def G = {"g", "KC_DEVICE float g(float x) { return 10.0f * h(x); }"};

static void test_core_kernels_compile(void **state) {
  (void)state;
  COMPILES(
      "k", NULL, H,
      {"k",
       "KC_KERNEL void k(KC_GLOBAL float *y) {\n  size_t i = kc_global_id(0);\n  y[i] = h((float)i);\n}\n"});
  COMPILES(
      "kt", NULL, H, G,
      {"kt", "KC_KERNEL void kt(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = g((float)i); }"});
  static const char ks[] = "KC_KERNEL void ks(KC_GLOBAL float *y) {\n"
                           "  size_t i = kc_global_id(0);\n"
                           "  T one = (T)1, tiny = (T)1e-10;\n"
                           "  y[i] = i == 0 ? (float)sizeof(T) : (float)(one + tiny != one);\n"
                           "}\n";
  COMPILES("ks", "T=float", {"ks", ks});
  COMPILES("ks", "T=double", {"ks", ks});
  COMPILES("kn", "N=4,T=float",
           {"kn", "KC_KERNEL void kn(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)(N * sizeof(T)); }"});
  COMPILES("ka", NULL,
           {"ka", "KC_KERNEL void ka(KC_GLOBAL float *y, float base, int n) {\n"
                  "  size_t i = kc_global_id(0);\n  if ((int)i < n) y[i] = base + 0.5f * (float)i;\n}\n"});
}

/* Shadowing a builtin: the helper is renamed, so it does not clash with
 * CUDA's own sqrt(double). */
static void test_shadowed_builtin_compiles(void **state) {
  (void)state;
  static const char kb[] = "KC_KERNEL void kb(KC_GLOBAL float *y) {\n"
                           "  size_t i = kc_global_id(0);\n"
                           "  y[i] = (float)sqrt((double)(i * i));\n"
                           "}\n";
  COMPILES("kb", NULL, {"kb", kb});
  COMPILES("kb", NULL, {"sqrt", "KC_DEVICE double sqrt(double x) { (void)x; return 42.0; }"}, {"kb", kb});
}

/* kc_scratch(), the dynamic shared memory of kc_launch_ex's shared_bytes
 * (the kernels of tests/interop/test_interop_cuda.c). */
static void test_scratch_kernels_compile(void **state) {
  (void)state;
  COMPILES("rev", NULL,
           {"rev", "KC_KERNEL void rev(KC_GLOBAL const float *x, KC_GLOBAL float *y, float a) {\n"
                   "  float *t = (float *)kc_scratch();\n"
                   "  size_t l = kc_local_id(0), g = kc_global_id(0);\n"
                   "  t[l] = x[g];\n  kc_barrier();\n  y[g] = a * t[kc_local_size(0) - 1 - l];\n}\n"});
}

static void test_errors_name_the_function(void **state) {
  (void)state;
  const def broken[] = {{"h", "KC_DEVICE float h(float x) {\n  return x +;\n}\n"},
                        {"k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(1.0f); }"}};
  KCT_STATUS(rt, KC_ECOMPILE, compile_both("k", NULL, broken, 2));
  KCT_CONTAINS(kc_errmsg(rt), "h(2)"); /* NVRTC's file(line) from #line 1 "h" */
  const def undefined[] = {
      {"ku", "KC_KERNEL void ku(KC_GLOBAL float *y) { y[kc_global_id(0)] = missing_fn(1.0f); }"}};
  KCT_STATUS(rt, KC_ECOMPILE, compile_both("ku", NULL, undefined, 1));
  KCT_CONTAINS(kc_errmsg(rt), "missing_fn");
}

int main(int argc, char **argv) {
  int rc = kct_main_shared(argc, argv, "NVRTC", kc__cuda_nvrtc_unavailable,
                           &rt); /* the host backend: for the runtime only */
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_core_kernels_compile),
      cmocka_unit_test(test_shadowed_builtin_compiles),
      cmocka_unit_test(test_scratch_kernels_compile),
      cmocka_unit_test(test_errors_name_the_function),
  };
  rc = KCT_RUN(tests);
  kc_runtime_destroy(rt);
  return rc;
}
