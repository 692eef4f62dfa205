/* SPDX-License-Identifier: MIT */
/*
 * registry.c -- the one table of backends: their kinds (kcache.h), their
 * tables, the stubs of backends left out of this build, and the order in
 * which KC_BACKEND_AUTO tries them. Adding a backend is its file or
 * folder under src/backends/ (src/sources.cmake's glob finds it), one row
 * of KC__BACKENDS below and its KC__ABSENT_BACKEND stub under
 * #ifdef KC_WITHOUT_<NAME> (every backend but host may be left out: its
 * KC_WITH_<NAME> option), with stubs of any function of its own that
 * backend.h declares for the tests (CUDA's kc__cuda_*); the rest is listed
 * in doc/design.md, "Adding a backend". It sees backend.h only:
 * the core asks it for a table (kc__backend_of, kc__backend_pick), and
 * device listing and kc_backend_available, which need the configuration
 * resolved, are the runtime's (runtime.c).
 */
#include "backend.h"

#include <stdio.h>
#include <string.h>

/* (kind, table): in pick order, the first that can run here wins. */
#define KC__BACKENDS(X) \
  X(KC_BACKEND_CUDA, kc__backend_cuda) \
  X(KC_BACKEND_OPENCL, kc__backend_opencl) \
  X(KC_BACKEND_HOST, kc__backend_host)

/* Each backend's table, defined in its own file (or below, absent). */
#define KC__BACKEND_EXTERN(kind, table) extern const kc__backend table;
KC__BACKENDS(KC__BACKEND_EXTERN)
#undef KC__BACKEND_EXTERN

/* A backend whose source file is not part of this build. */
#define KC__ABSENT_BACKEND(var, nm) \
  static const char *var##_absent(const kc__bconfig *cfg) { \
    (void)cfg; \
    return "kcache was built without the " nm " backend"; \
  } \
  const kc__backend var = {.name = nm, .unavailable = var##_absent};
#ifdef KC_WITHOUT_OPENCL
KC__ABSENT_BACKEND(kc__backend_opencl, "opencl")
#endif
#ifdef KC_WITHOUT_CUDA
KC__ABSENT_BACKEND(kc__backend_cuda, "cuda")
const char *kc__cuda_nvrtc_unavailable(void) { return "kcache was built without the cuda backend"; }
kc_status kc__cuda_compile_only(const kc__bsvc *svc, const char *source_tu, size_t len, const char *entry,
                                int sm, bool ptx, void **out, size_t *out_size, kc__sb *log) {
  (void)source_tu, (void)len, (void)entry, (void)sm, (void)ptx, (void)out, (void)out_size, (void)log;
  return kc__bs_err(svc, KC_EUNAVAILABLE, "kcache was built without the cuda backend");
}
kc_status kc__cuda_compile_sig(const kc__bsvc *svc, const kc__tu *tu, int sm, bool ptx, uint64_t *sig,
                               kc__sb *log) {
  (void)tu, (void)sm, (void)ptx, (void)sig, (void)log;
  return kc__bs_err(svc, KC_EUNAVAILABLE, "kcache was built without the cuda backend");
}
#endif

static const struct registry_row {
  kc_backend_kind kind;
  const kc__backend *be;
} registry_rows[] = {
#define KC__BACKEND_ROW(kind, table) {kind, &table},
    KC__BACKENDS(KC__BACKEND_ROW)
#undef KC__BACKEND_ROW
};
#define KC__NBACKENDS (sizeof registry_rows / sizeof *registry_rows)

const kc__backend *kc__backend_of(kc_backend_kind kind) {
  for (size_t i = 0; i < KC__NBACKENDS; i++)
    if (registry_rows[i].kind == kind) return registry_rows[i].be;
  return NULL;
}

/* want if set, else the one named, else the rows in order: the first that
 * can run here. */
kc_status kc__backend_pick(kc_backend_kind want, const char *named, const char *what, const kc__bconfig *cfg,
                           const kc__backend **out) {
  if (want == KC_BACKEND_AUTO && named && strcmp(named, "auto") != 0) {
    for (size_t i = 0; i < KC__NBACKENDS && want == KC_BACKEND_AUTO; i++)
      if (!strcmp(named, registry_rows[i].be->name)) want = registry_rows[i].kind;
    if (want == KC_BACKEND_AUTO) {
      char names[256] = "";
      size_t len = 0;
      for (size_t i = 0; i < KC__NBACKENDS; i++) { /* the rows' names, host first as users know them */
        const char *nm = registry_rows[KC__NBACKENDS - 1 - i].be->name;
        int n = snprintf(names + len, sizeof names - len, "%s, ", nm);
        if (n > 0 && (size_t)n < sizeof names - len) len += (size_t)n;
      }
      return kc__err_owner(0, KC_EINVAL, "%s: expected %sor auto", what ? what : named, names);
    }
  }
  if (want != KC_BACKEND_AUTO) {
    const kc__backend *be = kc__backend_of(want);
    if (!be) return kc__err_owner(0, KC_EINVAL, "unknown backend kind %d", (int)want);
    const char *why = be->unavailable(cfg);
    if (why) return kc__err_owner(0, KC_EUNAVAILABLE, "backend %s is not available: %s", be->name, why);
    *out = be;
    return KC_OK;
  }
  for (size_t i = 0; i < KC__NBACKENDS; i++)
    if (!registry_rows[i].be->unavailable(cfg)) {
      *out = registry_rows[i].be;
      return KC_OK;
    }
  return kc__err_owner(0, KC_EUNAVAILABLE, "no backend is available: %s",
                       kc__backend_of(KC_BACKEND_HOST)->unavailable(cfg));
}
