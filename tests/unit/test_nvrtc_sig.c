/* SPDX-License-Identifier: MIT */
/*
 * test_nvrtc_sig.c -- the CUDA backend's parameter probe without a GPU:
 * the struct/union/vector kernel of tests/scenario/test_structargs.c,
 * assembled as the engine assembles it (prelude, renamed helpers, the
 * closure, the CUDA epilogue), compiled by NVRTC to a cubin and to PTX
 * (kc__cuda_compile_sig, the code path of the backend's compile), must
 * give every by-value parameter the size and alignment NVRTC computed, and
 * those must be the host compiler's for the same source: then a wrong-size
 * argument gets the same KC_EARGS message on CUDA as on the host (the
 * message is made from the signature alone). Also: probe values that
 * cannot be are refused. Skipped (77) without NVRTC.
 */
#include "kc_test.h"

#include "kc_internal.h"

#include <stdlib.h>

static kc_runtime *rt; /* host backend: the allocator, errors, and the host's view */

static const char SRC_P[] = "typedef struct { char c; long l; int i; float f; } P;";
static const char SRC_U[] = "typedef union { int i; float f; uchar b[8]; } U;";
static const char SRC_SA[] = "KC_KERNEL void sa(KC_GLOBAL float *out, P p, U u, float4 v, int n) {\n"
                             "  if (kc_global_id(0) == 0) { out[0] = p.f + u.f + v.w + (float)n; }\n"
                             "}\n";

/* The CUDA translation unit of sa, as code.c's build_tu makes it. */
static char *cuda_tu(const kc__param *params, uint32_t n) {
  const kc__backend *be = kc__backend_of(KC_BACKEND_CUDA);
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  kc__sb_puts(&sb, be->prelude);
  kc__sb_puts(&sb, "\n/* specialization parameters */\n#define P kc__u_P\n#define U kc__u_U\n");
  kc__sb_printf(&sb, "#line 1 \"P\"\n%s\n#line 1 \"U\"\n%s\n#line 1 \"sa\"\n%s\n", SRC_P, SRC_U, SRC_SA);
  kc__sb_puts(&sb, "#line 1 \"<kcache>\"\n");
  kc__tu tu = {"sa", sb.buf, sb.len, params, n, NULL};
  assert_int_equal(be->epilogue(NULL, &tu, &sb), KC_OK);
  char *text = kc__sb_take(&sb);
  assert_non_null(text);
  return text;
}

/* The signature the host backend's compiler gave sa. */
static void host_sig(uint64_t *out, uint32_t n) {
  kct_define(rt, "P", SRC_P);
  kct_define(rt, "U", SRC_U);
  kct_define(rt, "sa", SRC_SA);
  kc_kernel *k = kct_kernel(rt, "sa", NULL);
  KCT_OK(rt, kc_kernel_compile(k));
  const kc__ci *ci = kc__load_acquire(&k->spec->head);
  assert_non_null(ci);
  assert_int_equal(ci->nparams, n);
  memcpy(out, ci->sig, n * sizeof *out);
  kc_kernel_destroy(k);
}

static void test_cuda_probe_sizes(void **state) {
  (void)state;
  kc__param *params = NULL;
  uint32_t n = 0;
  KCT_OK(rt, kc__parse_params(rt, "sa", SRC_SA, &params, &n));
  assert_int_equal(n, 5);
  char *text = cuda_tu(params, n);
  KCT_CONTAINS(text, "kc__probe");
  const uint64_t want[5] = {KC__SIG(KC_ARG_BUFFER, 0), kc__sig_scalar(24, 8), kc__sig_scalar(8, 4),
                            kc__sig_scalar(16, 16), kc__sig_scalar(4, 4)};
  uint64_t host[5];
  host_sig(host, 5);
  const kc__bsvc svc = kc__bsvc_of(rt);
  for (int ptx = 0; ptx < 2; ptx++) {
    uint64_t sig[5];
    for (uint32_t i = 0; i < n; i++) /* what the engine prefills: unknown for the types */
      sig[i] = params[i].is_buffer ? KC__SIG(KC_ARG_BUFFER, 0) : KC__SIG(KC_ARG_SCALAR, UINT32_MAX);
    kc__tu tu = {"sa", text, strlen(text), params, n, NULL};
    kc_status st = kc__cuda_compile_sig(&svc, &tu, 90, ptx, sig, NULL);
    if (st) fail_msg("NVRTC (%s): %s: %s", ptx ? "PTX" : "cubin", kc_status_name(st), kc_errmsg(rt));
    for (uint32_t i = 0; i < n; i++) {
      if (sig[i] != want[i])
        fail_msg("%s: parameter %u (%s): size %u alignment %u, expected size %u alignment %u",
                 ptx ? "PTX" : "cubin", i, params[i].type, (unsigned)sig[i], kc__sig_align(sig[i]),
                 (unsigned)want[i], kc__sig_align(want[i]));
      assert_true(sig[i] == host[i]); /* the host compiler agrees */
    }
  }
  kc__free(rt, text);
  kc__free_params(rt, params, n);
}

/* Values no compiler gives are refused, and sig stays as it was. */
static void test_probe_values_checked(void **state) {
  (void)state;
  kc__param params[2] = {{(char *)"KC_GLOBAL float *", (char *)"y", true}, {(char *)"P", (char *)"p", false}};
  kc__tu tu = {"k", "", 0, params, 2, NULL};
  const kc__bsvc svc = kc__bsvc_of(rt);
  uint64_t sig[2] = {KC__SIG(KC_ARG_BUFFER, 0), KC__SIG(KC_ARG_SCALAR, UINT32_MAX)};
  const uint64_t bad_align[] = {1, 24, 3}, bad_count[] = {2, 24, 8}, zero[] = {1, 0, 8}, ok[] = {1, 24, 8};
  KCT_STATUS(rt, KC_ECOMPILE, kc__probe_apply(&svc, &tu, bad_align, 3, sig));
  KCT_CONTAINS(kc_errmsg(rt), "parameter 1 (P p) has 24 bytes and alignment 3");
  KCT_STATUS(rt, KC_ECOMPILE, kc__probe_apply(&svc, &tu, bad_count, 3, sig));
  KCT_STATUS(rt, KC_ECOMPILE, kc__probe_apply(&svc, &tu, zero, 3, sig));
  KCT_STATUS(rt, KC_ECOMPILE, kc__probe_apply(&svc, &tu, ok, 2, sig)); /* too few */
  KCT_STATUS(rt, KC_ECOMPILE, kc__probe_apply(&svc, &tu, NULL, 0, sig)); /* none read back */
  assert_true(sig[1] == KC__SIG(KC_ARG_SCALAR, UINT32_MAX));
  KCT_OK(rt, kc__probe_apply(&svc, &tu, ok, 3, sig));
  assert_true(sig[0] == KC__SIG(KC_ARG_BUFFER, 0) && sig[1] == kc__sig_scalar(24, 8));
  assert_int_equal(kc__sig_align(sig[1]), 8);
  assert_true(KC__SIG_MATCH(sig[1]) == KC__SIG(KC_ARG_SCALAR, 24));
}

int main(int argc, char **argv) {
  int rc = kct_main_shared(argc, argv, "NVRTC", kc__cuda_nvrtc_unavailable,
                           &rt); /* the host backend: the runtime, and the host's view */
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_probe_sizes),
      cmocka_unit_test(test_probe_values_checked),
  };
  rc = KCT_RUN(tests);
  kc_runtime_destroy(rt);
  return rc;
}
