/* SPDX-License-Identifier: MIT */
/*
 * params.c -- a kernel's parameters for bindings (kc_kernel_param_count,
 * kc_kernel_param): what the code instance of the caller's world was
 * compiled with, with each scalar's size and numeric class, so that a
 * language binding converts its values to the kernel's own C types; and
 * the other calls that ask for the code of the caller's world
 * (kc_kernel_compile, kc_kernel_code, kc_kernel_source): above code.c and
 * world.c (the caller's world and grace section), which frees code.
 */
#include "core/core.h"
#include "core/lex.h"

#include <ctype.h>
#include <stddef.h>
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

static int id_char(char c) { return kc__lx_id_char((unsigned char)c); }

/* Skips a comment (and the blanks after it), string or character literal
 * at p (lex.h's rules, as the scanner reads them); returns p if none. */
static const char *skip_noise(const char *p, const char *end) {
  if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) return p + kc__lx_next(p, (size_t)(end - p), 0, true);
  if (*p == '"' || *p == '\'') {
    const char *r = kc__lx_literal_end(p, end);
    return r < end && *r == *p ? r + 1 : r;
  }
  return p;
}

/* The type a plain typedef of `name` in the translation unit `src` names
 * ("typedef unsigned int u32;" -> "unsigned int") into out; 0 if there is
 * none (a struct, a function or array type, a pointer: not a number). The
 * last such typedef wins, outside comments and literals. */
static int typedef_of(const char *src, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  int found = 0;
  const char *end = src + strlen(src);
  for (const char *p = src; p && *p;) {
    const char *q = skip_noise(p, end);
    if (q != p) {
      p = q;
      continue;
    }
    if (strncmp(p, "typedef", 7) || (p > src && id_char(p[-1])) || id_char(p[7])) {
      p++;
      continue;
    }
    const char *b = p + 7, *e = b + strcspn(b, ";{}()[]*/\"'#");
    p = e;
    if (*e != ';') continue;
    const char *t = e;
    while (t > b && isspace((unsigned char)t[-1])) t--;
    if ((size_t)(t - b) <= nl || memcmp(t - nl, name, nl) || id_char(t[-(ptrdiff_t)nl - 1])) continue;
    size_t len = (size_t)(t - nl - b);
    if (len >= cap) continue;
    memcpy(out, b, len);
    out[len] = 0;
    found = 1;
  }
  return found;
}

/* The scalar type of a parameter's type text, through plain typedefs of
 * the translation unit (up to 8 deep): its size (0 if unknown), base and lanes. */
static uint32_t resolved_type(const char *src, const kc__spec *spec, const char *type, const char **base,
                              uint32_t *lanes) {
  char name[64], target[128];
  uint32_t size = kc__scalar_type(type, spec, base, lanes);
  for (int depth = 0; depth < 8 && !**base && src; depth++) {
    /* the type's name without qualifiers: one identifier, else not a typedef name */
    size_t n = 0, words = 0;
    for (const char *p = type; *p;) {
      while (*p && !id_char(*p)) p++;
      const char *w = p;
      while (id_char(*p)) p++;
      size_t wl = (size_t)(p - w);
      if (!wl || (wl == 5 && !memcmp(w, "const", 5)) || (wl == 8 && !memcmp(w, "volatile", 8))) continue;
      if (wl >= sizeof name) return size;
      memcpy(name, w, wl), name[wl] = 0, n = wl, words++;
    }
    if (words != 1 || !n || !typedef_of(src, name, target, sizeof target)) break;
    size = kc__scalar_type(target, spec, base, lanes);
    type = target;
  }
  return size;
}

/* The code instance that answers (inside a grace section, which the
 * caller leaves with kc__leave once it has read it, if this succeeded). */
static kc_status param_ci(kc_kernel *k, const char *what, kc__ci **ci) {
  if (!k) return kc__err(NULL, KC_EINVAL, "%s: NULL kernel", what);
  kc_status st = kc__enter(k->rt, what);
  if (st) return st;
  st = kc__ci_get(k->rt, k->spec, kc__caller_world(k->rt), ci);
  if (st) kc__leave();
  return st;
}

kc_status kc_kernel_param_count(kc_kernel *k, uint32_t *count) {
  if (!count) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_param_count: NULL count");
  *count = 0;
  kc__ci *ci;
  kc_status st = param_ci(k, "kc_kernel_param_count", &ci);
  if (st) return st;
  *count = ci->nparams;
  kc__leave();
  return KC_OK;
}

kc_status kc_kernel_param_size(kc_kernel *k, uint32_t index, kc_param_info *out, size_t size) {
  if (!out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_param: NULL out");
  kc_status st =
      kc__abi_check(k ? k->rt : NULL, "kc_param_info", KC__SIZE_HINT(kc_kernel_param, kc_param_info), NULL,
                    size, KC__END_OF(kc_param_info, scalar), sizeof(kc_param_info));
  if (st) return st;
  kc_param_info info;
  memset(&info, 0, sizeof info);
  size_t fill = size < sizeof info ? size : sizeof info;
  memset(out, 0, size);
  kc__ci *ci;
  st = param_ci(k, "kc_kernel_param", &ci);
  if (!st && index >= ci->nparams) {
    st = kc__err(k->rt, KC_EINVAL, "kc_kernel_param: kernel '%s' has %u parameters, no parameter %u",
                 k->spec->name, ci->nparams, index);
    kc__leave();
  }
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
    int via_typedef = !kc__scalar_type(p->type, k->spec, NULL, NULL);
    /* a published code instance may not keep its translation unit: rebuilt then */
    char *tu = NULL;
    if (via_typedef && !ci->source && kc_kernel_source(k, &tu) != KC_OK) tu = NULL;
    info.arg_size = resolved_type(ci->source ? ci->source : tu, k->spec, p->type, &base, &lanes);
    if (tu) kc_free(k->rt, tu);
    info.ctype = base;
    info.scalar = scalar_class(base, lanes);
    /* the code's own size where it has one (the parameter probe sizes
     * structs, unions and typedefs that kcache's table does not know); a
     * typedef resolved to another size than the code's is not trusted */
    uint32_t sig_size = (uint32_t)ci->sig[index];
    if (via_typedef && sig_size != UINT32_MAX && sig_size != info.arg_size) info.scalar = KC_SCALAR_OTHER;
    if (sig_size != UINT32_MAX) info.arg_size = sig_size;
  }
  kc__leave();
  info.size = fill;
  memcpy(out, &info, fill);
  return KC_OK;
}

/* ------------------------------------------------- a kernel's code */

kc_status kc_kernel_compile(kc_kernel *k) {
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_kernel_compile: kernel is NULL");
  kc_status st = kc__enter(k->rt, "kc_kernel_compile");
  if (st) return st;
  kc__ci *ci;
  st = kc__ci_get(k->rt, k->spec, kc__caller_world(k->rt), &ci);
  kc__leave();
  return st;
}

static kc_status code_info(kc_kernel *k, kc_code_info *out);

kc_status kc_kernel_code(kc_kernel *k, kc_code_info *out) {
  if (!k || !out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_code: NULL argument");
  kc_status st = kc__enter(k->rt, "kc_kernel_code");
  if (st) return st;
  st = code_info(k, out);
  kc__leave();
  return st;
}

static kc_status code_info(kc_kernel *k, kc_code_info *out) {
  kc__ci *ci;
  kc_status st = kc__ci_get(k->rt, k->spec, kc__caller_world(k->rt), &ci);
  if (st) return st;
  out->max_world = kc__load_acquire(&ci->max_world);
  out->min_world = kc__load_relaxed(&ci->min_world);
  out->id = ci->id;
  out->artifact = ci->artifact;
  out->artifact_size = ci->artifact_size;
  out->compile_ns = ci->compile_ns;
  return KC_OK;
}

kc_status kc_kernel_source(kc_kernel *k, char **out) {
  if (!k || !out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_source: NULL argument");
  *out = NULL;
  kc_status st = kc__enter(k->rt, "kc_kernel_source");
  if (st) return st;
  st = kc__ci_source(k->rt, k->spec, kc__caller_world(k->rt), out);
  kc__leave();
  return st;
}
