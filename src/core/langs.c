/* SPDX-License-Identifier: MIT */
/*
 * langs.c -- the backend-native languages (kcache.h, "backend-native
 * languages"): their names, the built-in names of OpenCL C and CUDA C++
 * that a native definition does not depend on one by one (resolve.c gives
 * it one edge on the language's watcher instead, which every definition
 * of such a name ends: table.c), and the check that a native entry is a
 * kernel of its language. Like scan.c, it reads text by (pointer, length)
 * and never fails on malformed input.
 */
#include "core/core.h"
#include "core/lex.h"

#include <stdlib.h>
#include <string.h>

const char *kc_language_name(kc_language lang) {
  switch (lang) {
  case KC_LANG_DIALECT: return "dialect";
  case KC_LANG_OPENCL: return "opencl";
  case KC_LANG_CUDA: return "cuda";
  }
  return NULL;
}

const char *kc__lang_title(uint8_t lang) {
  return lang == KC_LANG_OPENCL ? "OpenCL C (KC_LANG_OPENCL)"
         : lang == KC_LANG_CUDA ? "CUDA C++ (KC_LANG_CUDA)"
                                : "kcache's dialect";
}

/* ------------------------------------------------------------ built-ins */

/* Sorted (strcmp order: bsearch). Names of the language that the program
 * does not define: work-item and synchronisation functions, their flags,
 * math, geometric, relational and atomic functions, image and sampler
 * names, attributes, extension pragmas' words, constants and vector
 * components. Families (float4, convert_int_sat, as_uint, vload4,
 * atomic_add ...) are matched by the rules in ocl_family. Over-inclusion
 * is safe: a name here that the table defines is a dependency anyway. */
static const char *const ocl_names[] = {
    "CHAR_BIT",
    "CLK_ADDRESS_CLAMP",
    "CLK_ADDRESS_CLAMP_TO_EDGE",
    "CLK_ADDRESS_MIRRORED_REPEAT",
    "CLK_ADDRESS_NONE",
    "CLK_ADDRESS_REPEAT",
    "CLK_FILTER_LINEAR",
    "CLK_FILTER_NEAREST",
    "CLK_GLOBAL_MEM_FENCE",
    "CLK_LOCAL_MEM_FENCE",
    "CLK_NORMALIZED_COORDS_FALSE",
    "CLK_NORMALIZED_COORDS_TRUE",
    "DBL_EPSILON",
    "DBL_MAX",
    "DBL_MIN",
    "ENABLE",
    "EXTENSION",
    "FLT_EPSILON",
    "FLT_MAX",
    "FLT_MIN",
    "FP_CONTRACT",
    "HUGE_VAL",
    "HUGE_VALF",
    "INFINITY",
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "MAXFLOAT",
    "M_1_PI",
    "M_1_PI_F",
    "M_2_PI",
    "M_2_PI_F",
    "M_E",
    "M_E_F",
    "M_LN2",
    "M_LN2_F",
    "M_PI",
    "M_PI_2",
    "M_PI_2_F",
    "M_PI_4",
    "M_PI_4_F",
    "M_PI_F",
    "M_SQRT2",
    "M_SQRT2_F",
    "NAN",
    "OFF",
    "ON",
    "OPENCL",
    "SHRT_MAX",
    "SHRT_MIN",
    "UCHAR_MAX",
    "UINT_MAX",
    "ULONG_MAX",
    "USHRT_MAX",
    "abs",
    "abs_diff",
    "acos",
    "acosh",
    "add_sat",
    "aligned",
    "all",
    "any",
    "asin",
    "asinh",
    "async_work_group_copy",
    "async_work_group_strided_copy",
    "atan",
    "atan2",
    "atanh",
    "barrier",
    "bitselect",
    "cbrt",
    "ceil",
    "clamp",
    "clz",
    "copysign",
    "cos",
    "cosh",
    "cospi",
    "cross",
    "degrees",
    "disable",
    "distance",
    "dot",
    "enable",
    "endian",
    "erf",
    "erfc",
    "even",
    "event_t",
    "exp",
    "exp10",
    "exp2",
    "expm1",
    "fabs",
    "fast_distance",
    "fast_length",
    "fast_normalize",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "fract",
    "frexp",
    "get_enqueued_local_size",
    "get_global_id",
    "get_global_linear_id",
    "get_global_offset",
    "get_global_size",
    "get_group_id",
    "get_image_dim",
    "get_image_height",
    "get_image_width",
    "get_local_id",
    "get_local_linear_id",
    "get_local_size",
    "get_num_groups",
    "get_work_dim",
    "hadd",
    "hi",
    "hypot",
    "ilogb",
    "image1d_t",
    "image2d_array_t",
    "image2d_t",
    "image3d_t",
    "intptr_t",
    "isequal",
    "isfinite",
    "isgreater",
    "isgreaterequal",
    "isinf",
    "isless",
    "islessequal",
    "isnan",
    "isnormal",
    "isnotequal",
    "ldexp",
    "length",
    "lgamma",
    "lo",
    "log",
    "log10",
    "log1p",
    "log2",
    "logb",
    "mad",
    "mad24",
    "mad_hi",
    "mad_sat",
    "max",
    "maxmag",
    "mem_fence",
    "min",
    "minmag",
    "mix",
    "modf",
    "mul24",
    "mul_hi",
    "nan",
    "nextafter",
    "normalize",
    "nosvm",
    "odd",
    "packed",
    "popcount",
    "pow",
    "pown",
    "powr",
    "prefetch",
    "printf",
    "ptrdiff_t",
    "radians",
    "read_imagef",
    "read_imagei",
    "read_imageui",
    "read_mem_fence",
    "read_only",
    "read_write",
    "remainder",
    "remquo",
    "reqd_work_group_size",
    "rhadd",
    "rint",
    "rootn",
    "rotate",
    "round",
    "rsqrt",
    "s0",
    "s1",
    "s2",
    "s3",
    "s4",
    "s5",
    "s6",
    "s7",
    "s8",
    "s9",
    "sA",
    "sB",
    "sC",
    "sD",
    "sE",
    "sF",
    "sa",
    "sampler_t",
    "sb",
    "sc",
    "sd",
    "se",
    "select",
    "sf",
    "shuffle",
    "shuffle2",
    "sign",
    "signbit",
    "sin",
    "sincos",
    "sinh",
    "sinpi",
    "smoothstep",
    "sqrt",
    "step",
    "sub_sat",
    "tan",
    "tanh",
    "tanpi",
    "tgamma",
    "trunc",
    "uintptr_t",
    "upsample",
    "vec_type_hint",
    "w",
    "wait_group_events",
    "work_group_size_hint",
    "write_imagef",
    "write_imagei",
    "write_imageui",
    "write_mem_fence",
    "write_only",
    "x",
    "xy",
    "xyz",
    "xyzw",
    "y",
    "z",
};

static const char *const cuda_names[] = {
    "CUDART_INF_F",
    "CUDART_NAN_F",
    "CUDART_PI",
    "CUDART_PI_F",
    "FLT_MAX",
    "FLT_MIN",
    "INFINITY",
    "INT_MAX",
    "INT_MIN",
    "NAN",
    "UINT_MAX",
    "abs",
    "acosf",
    "asinf",
    "assert",
    "atan2f",
    "atanf",
    "atomicAdd",
    "atomicAnd",
    "atomicCAS",
    "atomicDec",
    "atomicExch",
    "atomicInc",
    "atomicMax",
    "atomicMin",
    "atomicOr",
    "atomicSub",
    "atomicXor",
    "blockDim",
    "blockIdx",
    "cbrtf",
    "ceil",
    "ceilf",
    "class",
    "const_cast",
    "constexpr",
    "copysignf",
    "cos",
    "cosf",
    "coshf",
    "decltype",
    "delete",
    "dim3",
    "erff",
    "exp",
    "exp2f",
    "expf",
    "fabs",
    "fabsf",
    "false",
    "floor",
    "floorf",
    "fma",
    "fmaf",
    "fmax",
    "fmaxf",
    "fmin",
    "fminf",
    "fmodf",
    "gridDim",
    "hypotf",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log10f",
    "log1pf",
    "log2f",
    "logf",
    "max",
    "min",
    "namespace",
    "new",
    "noexcept",
    "nullptr",
    "operator",
    "pow",
    "powf",
    "printf",
    "public",
    "reinterpret_cast",
    "rintf",
    "roundf",
    "rsqrt",
    "rsqrtf",
    "sin",
    "sincosf",
    "sinf",
    "sinhf",
    "sqrt",
    "sqrtf",
    "static_cast",
    "std",
    "tan",
    "tanf",
    "tanh",
    "tanhf",
    "template",
    "this",
    "threadIdx",
    "true",
    "truncf",
    "typename",
    "using",
    "w",
    "warpSize",
    "x",
    "y",
    "z",
};

static int cmp_name(const void *key, const void *elem) {
  return strcmp((const char *)key, *(const char *const *)elem);
}

static bool in_list(const char *const *list, size_t n, const char *s) {
  return bsearch(s, list, n, sizeof *list, cmp_name) != NULL;
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* The element types of OpenCL C's and CUDA's vector types. */
static const char *const vec_bases[] = {"bool", "char",  "double",    "float", "half",
                                        "int",  "long",  "longlong",  "short", "uchar",
                                        "uint", "ulong", "ulonglong", "ushort"};

/* A vector type: a base above and a lane count (1 to 16). */
static bool is_vector(const char *s) {
  for (size_t i = 0; i < sizeof vec_bases / sizeof *vec_bases; i++) {
    size_t n = strlen(vec_bases[i]);
    if (strncmp(s, vec_bases[i], n) || !s[n]) continue;
    char *end;
    long lanes = strtol(s + n, &end, 10);
    if (!*end && lanes >= 1 && lanes <= 16 && s[n] != '0') return true;
  }
  return false;
}

/* OpenCL C's families of built-ins, by their prefixes. */
static bool ocl_family(const char *s) {
  static const char *const prefixes[] = {
      "convert_", "as_",     "vload",   "vstore", "atomic_",   "atom_",       "native_",    "half_",
      "cl_khr_",  "cl_ext_", "cl_amd_", "cl_nv_", "cl_intel_", "work_group_", "sub_group_", "get_sub_group_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (starts(s, prefixes[i])) return true;
  return is_vector(s);
}

/* CUDA's: every name starting with "__" (the implementation's:
 * __syncthreads, __shfl_down_sync, __ldg, __expf, __launch_bounds__, ...),
 * make_float4 and the like, the vector types. */
static bool cuda_family(const char *s) { return starts(s, "__") || starts(s, "make_") || is_vector(s); }

bool kc__lang_builtin(uint8_t lang, const char *s, size_t n) {
  char name[64];
  if (n == 0 || n >= sizeof name) return false;
  memcpy(name, s, n);
  name[n] = 0;
  if (lang == KC_LANG_OPENCL)
    return in_list(ocl_names, sizeof ocl_names / sizeof *ocl_names, name) || ocl_family(name);
  if (lang == KC_LANG_CUDA)
    return in_list(cuda_names, sizeof cuda_names / sizeof *cuda_names, name) || cuda_family(name);
  return false;
}

/* ----------------------------------------------------- name expressions */

static bool word_is_s(const kc__ident *id, const char *w) {
  return id->len == strlen(w) && !memcmp(id->start, w, id->len);
}

size_t kc__name_expr_base(const char *s) {
  size_t n = 0;
  if (!s || !kc__lx_id_start((unsigned char)s[0])) return 0;
  while (kc__lx_id_char((unsigned char)s[n])) n++;
  size_t j = n;
  while (s[j] == ' ') j++;
  if (s[j] != '<' || strlen(s) > 255) return 0;
  int depth = 0, parens = 0;
  for (const char *p = s + j; *p; p++) {
    if (*p == '<') depth++;
    else if (*p == '>' && --depth == 0) {
      for (p++; *p == ' '; p++) {}
      return *p || parens ? 0 : n;
    } else if (*p == '(') parens++;
    else if (*p == ')' && --parens < 0) return 0;
    else if (!kc__lx_id_char((unsigned char)*p) && !strchr(" ,:*&.+-", *p)) return 0;
  }
  return 0;
}

/* The template arguments of a name expression (between its outer angle
 * brackets), one by one: the start and length of argument i, or false. */
static bool expr_arg(const char *expr, uint32_t i, const char **at, size_t *len) {
  const char *p = strchr(expr, '<') + 1;
  for (uint32_t k = 0;; k++) {
    int depth = 0;
    const char *q = p;
    while (*q && !(depth == 0 && (*q == ',' || *q == '>'))) {
      depth += *q == '<' || *q == '(';
      depth -= *q == '>' || *q == ')';
      q++;
    }
    if (k == i) {
      while (p < q && *p == ' ') p++;
      while (q > p && q[-1] == ' ') q--;
      *at = p;
      *len = (size_t)(q - p);
      return q > p;
    }
    if (*q != ',') return false;
    p = q + 1;
  }
}

typedef struct tmpl_ud {
  const char *name;
  size_t nlen;
  const char *tmpl; /* the last `template` before the entry's name */
  const char *at;
} tmpl_ud;

static bool tmpl_ident(void *ud, const kc__ident *id) {
  tmpl_ud *t = ud;
  if (id->kind != KC__ID_NAME || id->directive) return true;
  if (word_is_s(id, "template")) t->tmpl = id->end;
  else if (id->call && id->len == t->nlen && !memcmp(id->start, t->name, t->nlen)) {
    t->at = id->at;
    return false;
  }
  return true;
}

/* Replaces each whole word `from` (n bytes) of *type by `to` (m bytes). */
static kc_status replace_word(kc_runtime *rt, char **type, const char *from, size_t n, const char *to,
                              size_t m) {
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  const char *t = *type;
  for (size_t i = 0; t[i];) {
    if (kc__lx_id_start((unsigned char)t[i]) && (i == 0 || !kc__lx_id_char((unsigned char)t[i - 1]))) {
      size_t e = i;
      while (kc__lx_id_char((unsigned char)t[e])) e++;
      if (e - i == n && !memcmp(t + i, from, n)) kc__sb_append(&sb, to, m);
      else kc__sb_append(&sb, t + i, e - i);
      i = e;
    } else {
      kc__sb_append(&sb, t + i, 1);
      i++;
    }
  }
  char *out = kc__sb_take(&sb);
  if (!out) return kc__err(rt, KC_ENOMEM, "out of memory");
  kc__free(rt, *type);
  *type = out;
  return KC_OK;
}

/* Whether the entry `name` (n bytes) of source is declared a template. */
static bool is_template(const char *source, const char *name, size_t n) {
  tmpl_ud t = {name, n, NULL, NULL};
  kc__scan_idents(source, strlen(source), tmpl_ident, &t);
  return t.tmpl && t.at && t.tmpl < t.at;
}

kc_status kc__template_params(kc_runtime *rt, const char *expr, const char *source, kc__param *params,
                              uint32_t nparams) {
  size_t base = kc__name_expr_base(expr);
  tmpl_ud t = {expr, base, NULL, NULL};
  kc__scan_idents(source, strlen(source), tmpl_ident, &t);
  if (!t.tmpl || !t.at || t.tmpl > t.at)
    return kc__err(rt, KC_EINVAL, "'%s' names an instantiation, but '%.*s' is not declared as a template",
                   expr, (int)base, expr);
  /* the template's parameter list: `< typename T, int N = 4, ... >` */
  const char *p = strchr(t.tmpl, '<');
  if (!p || p > t.at)
    return kc__err(rt, KC_EINVAL, "'%.*s': cannot read its template parameters", (int)base, expr);
  p++;
  for (uint32_t i = 0;; i++) {
    int depth = 0;
    const char *q = p;
    while (q < t.at && !(depth == 0 && (*q == ',' || *q == '>'))) {
      depth += *q == '<' || *q == '(';
      depth -= *q == '>' || *q == ')';
      q++;
    }
    const char *e = memchr(p, '=', (size_t)(q - p)); /* a default: the name is before it */
    e = e ? e : q;
    while (e > p && !kc__lx_id_char((unsigned char)e[-1])) e--;
    const char *b = e;
    while (b > p && kc__lx_id_char((unsigned char)b[-1])) b--;
    const char *arg;
    size_t alen;
    if (b < e && expr_arg(expr, i, &arg, &alen))
      for (uint32_t k = 0; k < nparams; k++) {
        kc_status st = replace_word(rt, &params[k].type, b, (size_t)(e - b), arg, alen);
        if (st) return st;
      }
    if (q >= t.at || *q != ',') break;
    p = q + 1;
  }
  return KC_OK;
}

/* ----------------------------------------------------- native entries */

typedef struct entry_ud {
  const char *name;
  size_t nlen;
  uint8_t lang;
  bool marked, found;
  const char *at; /* where the entry's name is */
} entry_ud;

static bool entry_ident(void *ud, const kc__ident *id) {
  entry_ud *e = ud;
  if (id->kind != KC__ID_NAME || id->directive) return true;
  if (e->lang == KC_LANG_OPENCL && (word_is_s(id, "__kernel") || word_is_s(id, "kernel"))) e->marked = true;
  else if (e->lang == KC_LANG_CUDA && word_is_s(id, "__global__")) e->marked = true;
  else if (id->call && id->len == e->nlen && !memcmp(id->start, e->name, e->nlen)) {
    e->found = true;
    e->at = id->at;
    return false;
  }
  return true;
}

/* Whether the declaration at `at` in source has C linkage: `extern "C"` in
 * that declaration (after the last ';', '{' or '}' before it), or an
 * extern "C" { ... } block around it. Comments, string and character
 * literals and preprocessor lines are skipped, so neither a comment nor an
 * earlier helper's extern "C" counts. */
static bool extern_c_before(const char *source, const char *at) {
  enum { DEPTH_MAX = 64 };
  size_t len = (size_t)(at - source), j = 0;
  bool decl_c = false, line_start = true;
  unsigned depth = 0, cblocks = 0; /* braces open; how many of them are extern "C" blocks */
  bool is_c[DEPTH_MAX] = {false};
  for (;;) {
    size_t k = kc__lx_next(source, len, j, false);
    for (size_t q = j; q < k; q++)
      if (source[q] == '\n') line_start = true;
    if ((j = k) >= len) break;
    char c = source[j];
    if (c == '#' && line_start) {
      j = kc__lx_line_end(source, len, j);
      continue;
    }
    line_start = false;
    if (kc__lx_id_char((unsigned char)c)) {
      size_t e = j;
      while (e < len && kc__lx_id_char((unsigned char)source[e])) e++;
      if (e - j == 6 && !memcmp(source + j, "extern", 6)) {
        size_t q = kc__lx_next(source, len, e, false);
        if (q + 3 <= len && !memcmp(source + q, "\"C\"", 3)) {
          size_t r = kc__lx_next(source, len, q + 3, false);
          if (r < len && source[r] == '{') {
            if (depth < DEPTH_MAX) is_c[depth] = true, cblocks++; /* deeper: not counted, refused */
            depth++;
            decl_c = false;
            j = r + 1;
            continue;
          }
          decl_c = true;
          e = q + 3;
        }
      }
      j = e;
    } else if (c == '"' || c == '\'') {
      j = (size_t)(kc__lx_literal_end(source + j, source + len) - source);
      if (j < len) j++;
    } else {
      if (c == '{') {
        if (depth < DEPTH_MAX) is_c[depth] = false;
        depth++;
      } else if (c == '}' && depth) {
        depth--;
        if (depth < DEPTH_MAX && is_c[depth]) is_c[depth] = false, cblocks--;
      }
      if (c == '{' || c == '}' || c == ';') decl_c = false;
      j++;
    }
  }
  return decl_c || cblocks > 0;
}

kc_status kc__check_native(kc_runtime *rt, uint8_t lang, const char *name, const char *source) {
  size_t base = kc__name_expr_base(name);
  entry_ud e = {name, base ? base : strlen(name), lang, false, false, NULL};
  kc__scan_idents(source, strlen(source), entry_ident, &e);
  if (e.marked && lang == KC_LANG_CUDA && !base && e.at && is_template(source, name, e.nlen))
    return kc__err(rt, KC_EINVAL,
                   "'%s' (CUDA C++) is a template: name an instantiation, e.g. kc_kernel_create(rt, "
                   "\"%s<float>\", ...), which NVRTC instantiates",
                   name, name);
  if (e.marked && lang == KC_LANG_CUDA && !base && e.at && !extern_c_before(source, e.at))
    return kc__err(rt, KC_EINVAL,
                   "'%s' (CUDA C++) is not declared extern \"C\": kcache finds a kernel by its name, which "
                   "C++ would mangle; write extern \"C\" __global__ void %s(...)",
                   name, name);
  if (e.marked) return KC_OK;
  return kc__err(rt, KC_EINVAL,
                 lang == KC_LANG_OPENCL
                     ? "'%s' (OpenCL C) is not declared __kernel: only a __kernel void function can be "
                       "launched"
                     : "'%s' (CUDA C++) is not declared __global__: only an extern \"C\" __global__ void "
                       "function can be launched",
                 name);
}
