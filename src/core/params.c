/* SPDX-License-Identifier: MIT */
/*
 * params.c -- a kernel's parameters for bindings (kc_kernel_param_count,
 * kc_kernel_param): what the code instance of the caller's world was
 * compiled with, with each scalar's size and numeric class, so that a
 * language binding converts its values to the kernel's own C types.
 */
#include "core/core.h"

#include <string.h>

/* The numeric class of a type named in kcache's scalar table. */
static kc_scalar_class scalar_class(const char *base, uint32_t lanes) {
  if (!*base || lanes != 1) return KC_SCALAR_OTHER;
  if (!strcmp(base, "float") || !strcmp(base, "double") || !strcmp(base, "half")) return KC_SCALAR_FLOAT;
  if (!strncmp(base, "unsigned", 8) || base[0] == 'u' || !strcmp(base, "bool") || !strcmp(base, "_Bool") ||
      !strcmp(base, "size_t"))
    return KC_SCALAR_UINT;
  return KC_SCALAR_SINT; /* char is signed on the backends kcache targets (x86-64, OpenCL, CUDA) */
}

static kc_status param_ci(kc_kernel *k, const char *what, kc__ci **ci) {
  if (!k) return kc__err(NULL, KC_EINVAL, "%s: NULL kernel", what);
  return kc__ci_get(k->rt, k->spec, kc__caller_world(k->rt), ci);
}

kc_status kc_kernel_param_count(kc_kernel *k, uint32_t *count) {
  if (!count) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_param_count: NULL count");
  *count = 0;
  kc__ci *ci;
  kc_status st = param_ci(k, "kc_kernel_param_count", &ci);
  if (st) return st;
  *count = ci->nparams;
  return KC_OK;
}

kc_status kc_kernel_param_size(kc_kernel *k, uint32_t index, kc_param_info *out, size_t size) {
  const size_t least = offsetof(kc_param_info, scalar) + sizeof out->scalar;
  if (!out || size < least)
    return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_param: %s",
                   out ? "kc_param_info smaller than this library's first layout" : "NULL out");
  kc_param_info info;
  memset(&info, 0, sizeof info);
  size_t fill = size < sizeof info ? size : sizeof info;
  memset(out, 0, size);
  kc__ci *ci;
  kc_status st = param_ci(k, "kc_kernel_param", &ci);
  if (!st && index >= ci->nparams)
    st = kc__err(k->rt, KC_EINVAL, "kc_kernel_param: kernel '%s' has %u parameters, no parameter %u",
                 k->spec->name, ci->nparams, index);
  if (st) {
    out->size = fill;
    return st;
  }
  const kc__param *p = &ci->params[index];
  info.name = p->name;
  info.type = p->type;
  uint32_t kind = KC__SIG_KIND(ci->sig[index]); /* the backend's word: OpenCL marks KC_LOCAL pointers */
  if (p->is_buffer || kind != KC_ARG_SCALAR) {
    info.ctype = "";
    info.kind = kind == KC_ARG_LOCAL ? KC_ARG_LOCAL : KC_ARG_BUFFER;
    info.scalar = KC_SCALAR_NONE;
  } else {
    const char *base;
    uint32_t lanes;
    info.kind = KC_ARG_SCALAR;
    info.arg_size = kc__scalar_type(p->type, k->spec, &base, &lanes);
    info.ctype = base;
    info.scalar = scalar_class(base, lanes);
    /* the code's own size where it has one (the parameter probe sizes
     * structs, unions and typedefs that kcache's table does not know) */
    uint32_t sig_size = (uint32_t)ci->sig[index];
    if (sig_size != UINT32_MAX) info.arg_size = sig_size;
  }
  info.size = fill;
  memcpy(out, &info, fill);
  return KC_OK;
}
