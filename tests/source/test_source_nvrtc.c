/* SPDX-License-Identifier: MIT */
/*
 * test_source_nvrtc.c -- the sources of issue 14 compiled by NVRTC for the
 * CUDA backend on a machine without a GPU (kc__cuda_compile_only): the
 * table of a host runtime resolves the closure (a call only through a
 * macro in the kernel's body, a header with #pragma once included twice,
 * a paste of a macro parameter, a #define constant), the translation unit
 * is built as the engine builds it (the CUDA prelude, helper renames but
 * not for macros and headers, each definition with its headers inlined)
 * and NVRTC must compile it to PTX with the entry's name. Skipped (77)
 * when NVRTC cannot be loaded.
 */
#include "kc_test.h"

#include "kc_internal.h"

#include <stdlib.h>

static kc_runtime *rt;

static char *cuda_tu(const char *entry) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, entry, "", &spec));
  kc__closure c;
  KCT_OK(rt, kc__resolve(rt, spec, kc_world_latest(rt), &c));
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  kc__sb_puts(&sb, kc__backend_of(KC_BACKEND_CUDA)->prelude);
  kc__sb_puts(&sb, "\n");
  for (uint32_t i = 0; i + 1 < c.ndefs; i++)
    if (!kc__def_is_header(c.defs[i]) && !kc__def_is_macro(c.defs[i]))
      kc__sb_printf(&sb, "#define %s kc__u_%s\n", c.defs[i]->binding->name, c.defs[i]->binding->name);
  for (uint32_t i = 0; i < c.ndefs; i++) {
    if (kc__def_is_header(c.defs[i])) continue;
    kc__sb_printf(&sb, "#line 1 \"%s\"\n", c.defs[i]->binding->name);
    KCT_OK(rt, kc__emit_def(rt, &sb, &c, c.defs[i]));
    kc__sb_puts(&sb, "\n");
  }
  kc__closure_free(rt, &c);
  char *tu = kc__sb_take(&sb);
  assert_non_null(tu);
  return tu;
}

static void test_issue14_sources_compile_for_cuda(void **state) {
  (void)state;
  kct_define(rt, "helper", "KC_DEVICE float helper(float x) { return x + 1.0f; }");
  kct_define(rt, "op_add", "KC_DEVICE float op_add(float x) { return x + 100.0f; }");
  kct_define(rt, "OP", "#define OP(name, x) op_ ## name(x)");
  kct_define(rt, "SCALE", "#define SCALE 3.0f");
  kct_define(rt, "common.h", "#pragma once\nKC_DEVICE float base_value(void) { return SCALE; }\n");
  kct_define(rt, "outer.h",
             "#include \"common.h\"\nKC_DEVICE float outer_value(void) { return 2.0f * base_value(); }\n");
  kct_define(rt, "k",
             "#include \"common.h\"\n#include \"outer.h\"\n"
             "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
             "#define CALL(x) helper(x)\n"
             "  y[kc_global_id(0)] = CALL(1.0f) + OP(add, 2.0f) + outer_value() + base_value();\n"
             "}\n");
  char *tu = cuda_tu("k");
  KCT_CONTAINS(tu, "#define helper kc__u_helper"); /* the helper reached only through CALL */
  KCT_CONTAINS(tu, "#define op_add kc__u_op_add"); /* and the one reached through the paste */
  assert_null(strstr(tu, "#define SCALE kc__u_SCALE")); /* a macro keeps its own #define */
  const kc__bsvc svc = kc__bsvc_of(rt);
  void *out = NULL;
  size_t size = 0;
  kc_status st = kc__cuda_compile_only(&svc, tu, strlen(tu), "k", 90, true, &out, &size, NULL);
  if (st) fail_msg("NVRTC: %s: %s\n%s", kc_status_name(st), kc_errmsg(rt), tu);
  KCT_CONTAINS((const char *)out, ".entry k(");
  kc__free(rt, out);
  free(tu);
}

int main(int argc, char **argv) {
  int rc = kct_main_shared(argc, argv, "NVRTC", kc__cuda_nvrtc_unavailable,
                           &rt); /* the host backend: for the table only */
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_issue14_sources_compile_for_cuda)};
  rc = KCT_RUN(tests);
  kc_runtime_destroy(rt);
  return rc;
}
