/* SPDX-License-Identifier: MIT */
/*
 * probe.c -- owns the parameter probe (backend.h, "The parameter probe"):
 * the code a backend's epilogue appends to a translation unit so that its
 * own compiler computes the size and alignment of every by-value parameter
 * type (a scalar, a struct or union of the closure, a vector type, half),
 * in the three dialects, and the check of the values read back before they
 * become the parameters' signatures. Nothing here knows a type by name:
 * what kcache checks an argument against is what the compiler says.
 */
#include "backend.h"

#include <string.h>

uint32_t kc__probe_count(const kc__tu *tu) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < tu->nparams; i++) m += !tu->params[i].is_buffer;
  return m;
}

/* C (host): an array the loader reads with dlsym. */
static void emit_c(kc__sb *out, const kc__tu *tu, uint32_t m) {
  kc__sb_printf(out, "__attribute__((visibility(\"default\"))) const unsigned long long kc__probe[] = {%uu",
                m);
  for (uint32_t i = 0; i < tu->nparams; i++)
    if (!tu->params[i].is_buffer)
      kc__sb_printf(out, ",\n  sizeof(%s), _Alignof(%s)", tu->params[i].type, tu->params[i].type);
  kc__sb_puts(out, "};\n");
}

/* OpenCL C 1.2 has no _Alignof: a kernel, run once, writes each size and
 * the offset of the type after a char in a struct (its alignment). */
static void emit_opencl(kc__sb *out, const kc__tu *tu, uint32_t m) {
  kc__sb_printf(out, "__kernel void kc__probe(__global ulong *kc__o) {\n  kc__o[0] = %uu;\n", m);
  for (uint32_t i = 0, j = 1; i < tu->nparams; i++) {
    if (tu->params[i].is_buffer) continue;
    const char *t = tu->params[i].type;
    kc__sb_printf(out,
                  "  { struct { char kc__c; %s kc__t; } kc__x; kc__o[%u] = sizeof(%s);\n"
                  "    kc__o[%u] = (ulong)((char *)&kc__x.kc__t - (char *)&kc__x); }\n",
                  t, j, t, j + 1);
    j += 2;
  }
  kc__sb_puts(out, "}\n");
}

/* CUDA C++: a device array, whose initializer NVRTC writes into the PTX. */
static void emit_cuda(kc__sb *out, const kc__tu *tu, uint32_t m) {
  kc__sb_printf(out, "extern \"C\" __device__ const unsigned long long kc__probe[] = {%uull", m);
  for (uint32_t i = 0; i < tu->nparams; i++)
    if (!tu->params[i].is_buffer)
      kc__sb_printf(out, ",\n  sizeof(%s), alignof(%s)", tu->params[i].type, tu->params[i].type);
  kc__sb_puts(out, "};\n");
}

void kc__probe_emit(kc__sb *out, const kc__tu *tu, kc__probe_dialect d) {
  uint32_t m = kc__probe_count(tu);
  if (!m) return;
  kc__sb_puts(out, "#line 1 \"<kcache probe>\"\n");
  if (d == KC__PROBE_OPENCL) emit_opencl(out, tu, m);
  else if (d == KC__PROBE_CUDA) emit_cuda(out, tu, m);
  else emit_c(out, tu, m);
}

kc_status kc__probe_apply(const kc__bsvc *sv, const kc__tu *tu, const uint64_t *vals, size_t n,
                          uint64_t *sig) {
  uint32_t m = kc__probe_count(tu);
  if (!m) return KC_OK;
  if (!vals || n < 1 + 2 * (size_t)m || vals[0] != m)
    return kc__bs_err(sv, KC_ECOMPILE,
                      "kernel '%s': the compiler's parameter probe gave %zu values (%llu parameters) for %u "
                      "by-value parameters",
                      tu->entry, n, vals && n ? (unsigned long long)vals[0] : 0ull, m);
  for (uint32_t i = 0, j = 1; i < tu->nparams; i++) {
    if (tu->params[i].is_buffer) continue;
    uint64_t size = vals[j], align = vals[j + 1];
    j += 2;
    if (!size || size >= UINT32_MAX || !align || align > (1u << 16) || (align & (align - 1)) || size % align)
      return kc__bs_err(
          sv, KC_ECOMPILE,
          "kernel '%s': the compiler's parameter probe says parameter %u (%s %s) has %llu bytes "
          "and alignment %llu, which cannot be",
          tu->entry, i, tu->params[i].type, tu->params[i].name, (unsigned long long)size,
          (unsigned long long)align);
  }
  for (uint32_t i = 0, j = 1; i < tu->nparams; i++) {
    if (tu->params[i].is_buffer) continue;
    sig[i] = kc__sig_scalar((uint32_t)vals[j], (uint32_t)vals[j + 1]);
    j += 2;
  }
  return KC_OK;
}
