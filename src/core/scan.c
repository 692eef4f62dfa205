/* SPDX-License-Identifier: MIT */
/*
 * scan.c -- the parsers of text that kcache does not control (the
 * identifier scanner is lex.c's): the kernel parameter-list parser, the
 * dialect check of a kernel, and the specialization parameter parser. All of
 * them take (pointer, length), never read past it, and never fail on
 * malformed input: they just find fewer things.
 */
#include "core/core.h"
#include "core/lex.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define is_id_start kc__lx_id_start
#define is_id_char kc__lx_id_char

bool kc__is_identifier(const char *s) {
  if (!s || !is_id_start((unsigned char)s[0])) return false;
  for (const char *p = s + 1; *p; p++)
    if (!is_id_char((unsigned char)*p)) return false;
  return true;
}

bool kc__is_header_name(const char *s) {
  if (!s || !*s || strlen(s) > 255 || !strchr(s, '.')) return false;
  for (const char *part = s;;) { /* each part between slashes */
    size_t n = strcspn(part, "/");
    if (n == 0 || (n == 1 && part[0] == '.') || (n == 2 && part[0] == '.' && part[1] == '.')) return false;
    for (size_t i = 0; i < n; i++)
      if (!isalnum((unsigned char)part[i]) && !strchr("_+-.", part[i])) return false;
    if (!part[n]) return true;
    part += n + 1;
  }
}

/* Words that look like calls but are not (`if (`, `sizeof (`), plus the
 * type and qualifier keywords of C, OpenCL C and CUDA that never name a
 * user function. */
static const char *const kc__keywords[] = {
    "if",
    "else",
    "for",
    "while",
    "do",
    "switch",
    "case",
    "default",
    "return",
    "break",
    "continue",
    "goto",
    "sizeof",
    "_Alignof",
    "alignof",
    "_Static_assert",
    "static_assert",
    "typedef",
    "struct",
    "union",
    "enum",
    "const",
    "volatile",
    "restrict",
    "__restrict",
    "__restrict__",
    "static",
    "extern",
    "inline",
    "__inline",
    "__inline__",
    "register",
    "auto",
    "void",
    "char",
    "short",
    "int",
    "long",
    "float",
    "double",
    "signed",
    "unsigned",
    "_Bool",
    "bool",
    "__attribute__",
    "__typeof__",
    "typeof",
    "__asm__",
    "asm",
    "__global",
    "__local",
    "__constant",
    "__private",
    "__kernel",
    "global",
    "local",
    "constant",
    "private",
    "kernel",
    "__device__",
    "__global__",
    "__host__",
    "__shared__",
    "__forceinline__",
    "defined",
    "true",
    "false",
    "half",
    "size_t",
    "uint",
    "uchar",
    "ushort",
    "ulong",
};

bool kc__is_keyword(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof kc__keywords / sizeof *kc__keywords; i++)
    if (strlen(kc__keywords[i]) == n && memcmp(kc__keywords[i], s, n) == 0) return true;
  return false;
}

/* ------------------------------------------------------ parameter lists */

typedef struct {
  const char *name;
  size_t nlen;
  const char *text;
  size_t len;
  const char *found; /* the '(' after the first `name (` */
} find_ud;

static bool find_call(void *ud, const kc__ident *id) {
  find_ud *f = ud;
  if (id->call && id->kind == KC__ID_NAME && !id->directive && !id->joined && id->len == f->nlen &&
      memcmp(id->start, f->name, f->nlen) == 0) {
    /* the '(' the scanner saw, not one in a comment in between */
    f->found = f->text + kc__lx_next(f->text, f->len, (size_t)(id->end - f->text), false);
    return false;
  }
  return true;
}

static char *trim_dup(kc_runtime *rt, const char *s, const char *e) {
  while (s < e && isspace((unsigned char)*s)) s++;
  while (e > s && isspace((unsigned char)e[-1])) e--;
  return kc__strndup(rt, s, (size_t)(e - s));
}

void kc__free_params(kc_runtime *rt, kc__param *p, uint32_t count) {
  if (!p) return;
  for (uint32_t i = 0; i < count; i++) {
    kc__free(rt, p[i].type);
    kc__free(rt, p[i].name);
  }
  kc__free(rt, p);
}

/* The text from s to end with each comment replaced by a space (literals
 * kept as they are), so that a comment in a parameter list (after
 * "float *y", say "output, n floats") neither hides nor fakes a ',' or ')'
 * and never becomes part of a type or a name. */
static char *strip_comments(kc_runtime *rt, const char *s, const char *end) {
  char *out = kc__alloc(rt, (size_t)(end - s) + 1), *w = out;
  if (!out) return NULL;
  while (s < end) {
    if (s + 1 < end && s[0] == '/' && s[1] == '*') {
      const char *c = s + 2;
      while (c + 1 < end && !(c[0] == '*' && c[1] == '/')) c++;
      s = c + 1 < end ? c + 2 : end;
      *w++ = ' ';
    } else if (s + 1 < end && s[0] == '/' && s[1] == '/') {
      while (s < end && *s != '\n') s++;
      *w++ = ' ';
    } else if (*s == '"' || *s == '\'') {
      const char *e = kc__lx_literal_end(s, end);
      if (e < end && *e == *s) e++;
      memcpy(w, s, (size_t)(e - s));
      w += e - s;
      s = e;
    } else {
      *w++ = *s++;
    }
  }
  *w = 0;
  return out;
}

/* Makes blanks of the line splices of s that stand between tokens, not
 * inside a word (CuPy's examples end the lines of a parameter list with
 * one): the ones left may join two words, which the parser refuses.
 * (Literals are the parser's to skip; a splice in one stays.) */
static void blank_splices(char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"' || s[i] == '\'') {
      i = (size_t)(kc__lx_literal_end(s + i, s + n) - s);
      continue;
    }
    size_t sp = kc__lx_splice(s, n, i);
    if (sp &&
        !(i > 0 && is_id_char((unsigned char)s[i - 1]) && i + sp < n && is_id_char((unsigned char)s[i + sp])))
      memset(s + i, ' ', sp);
  }
}

/* Longer than 80 lines on purpose: one pass over the parameter list (find
 * the definition, split at top-level commas, name and type each piece)
 * whose allocations share one cleanup path. */
kc_status kc__parse_params(kc_runtime *rt, const char *name, const char *source, kc__param **out,
                           uint32_t *count) {
  *out = NULL;
  *count = 0;
  size_t len = strlen(source);
  find_ud f = {name, strlen(name), source, len, NULL};
  kc__scan_idents(source, len, find_call, &f);
  if (!f.found)
    return kc__err(rt, KC_EINVAL, "cannot find the parameter list of kernel '%s' in its definition", name);
  char *list = strip_comments(rt, f.found + 1, source + len);
  if (!list) return kc__err(rt, KC_ENOMEM, "out of memory");
  blank_splices(list);
  const char *p = list, *end = list + strlen(list);
  kc__param *params = NULL;
  uint32_t n = 0;
  kc_status st = KC_OK;
  const char *start = p;
  int depth = 0;
  bool line_start = false; /* only blanks so far on this line of the list */
  for (; p < end; p++) {
    if (*p == '\n') {
      line_start = true;
      continue;
    }
    if (*p == '#' && line_start) {
      /* which parameters exist would depend on the preprocessor */
      st = kc__err(rt, KC_EINVAL, "kernel '%s': a preprocessor line in its parameter list is not supported",
                   name);
      break;
    }
    if (!isspace((unsigned char)*p)) line_start = false;
    if (kc__lx_splice(p, (size_t)(end - p), 0)) {
      /* a splice may join two words into one: the scanner's names would
       * not be the parser's */
      st = kc__err(rt, KC_EINVAL,
                   "kernel '%s': a line splice (backslash-newline) in its parameter list is not supported",
                   name);
      break;
    }
    if (*p == '"' || *p == '\'') { /* its brackets and commas are not the list's */
      const char *e = kc__lx_literal_end(p, end);
      if (e == end || *e != *p) {
        st = kc__err(rt, KC_EINVAL, "kernel '%s': unterminated literal in its parameter list", name);
        break;
      }
      p = e;
      continue;
    }
    if (*p == '(' || *p == '[') depth++;
    else if ((*p == ')' || *p == ']') && depth > 0) depth--;
    else if ((*p == ',' || *p == ')') && depth == 0) {
      const char *ps = start, *pe = p;
      while (ps < pe && isspace((unsigned char)*ps)) ps++;
      while (pe > ps && isspace((unsigned char)pe[-1])) pe--;
      bool empty = ps == pe || (pe - ps == 4 && memcmp(ps, "void", 4) == 0);
      if (empty && *p == ')' && n == 0) break; /* "()" or "(void)" */
      if (empty || n == KC_MAX_ARGS) {
        st = kc__err(rt, empty ? KC_EINVAL : KC_EARGS,
                     empty ? "kernel '%s': empty parameter in its parameter list"
                           : "kernel '%s' has more than %d parameters",
                     name, KC_MAX_ARGS);
        break;
      }
      /* the name is the last identifier of the declaration, a whole token
       * (not the tail of a number like 1.e or 1e+x) */
      const char *ne = pe;
      const char *ns = ne;
      while (ns > ps && is_id_char((unsigned char)ns[-1])) ns--;
      if (ns == ne || !is_id_start((unsigned char)*ns) || ns == ps || strchr(".+-", ns[-1])) {
        st = kc__err(rt, KC_EINVAL, "kernel '%s': parameter %u has no name or no type", name, n + 1);
        break;
      }
      kc__param *np = kc__realloc(rt, params, sizeof *params * (n + 1));
      if (!np) {
        st = kc__err(rt, KC_ENOMEM, "out of memory");
        break;
      }
      params = np;
      params[n].type = trim_dup(rt, ps, ns);
      params[n].name = kc__strndup(rt, ns, (size_t)(ne - ns));
      n++;
      if (!params[n - 1].type || !params[n - 1].name) {
        st = kc__err(rt, KC_ENOMEM, "out of memory");
        break;
      }
      params[n - 1].is_buffer = memchr(ps, '*', (size_t)(ns - ps)) != NULL;
      if (*p == ')') break;
      start = p + 1;
    }
  }
  if (!st && p >= end) st = kc__err(rt, KC_EINVAL, "kernel '%s': unterminated parameter list", name);
  kc__free(rt, list);
  if (st) {
    kc__free_params(rt, params, n);
    return st;
  }
  *out = params;
  *count = n;
  return KC_OK;
}

/* ------------------------------------------------------------ dialect */

typedef struct {
  const char *name;
  size_t nlen;
  int marker; /* 0 none, 1 KC_KERNEL, 2 KC_DEVICE: the last one before the declarator */
  bool found;
} dialect_ud;

static bool dialect_ident(void *ud, const kc__ident *id) {
  dialect_ud *d = ud;
  if (id->kind != KC__ID_NAME || id->directive) return true;
  if (id->len == 9 && !memcmp(id->start, "KC_KERNEL", 9)) d->marker = 1;
  else if (id->len == 9 && !memcmp(id->start, "KC_DEVICE", 9)) d->marker = 2;
  else if (id->call && id->len == d->nlen && !memcmp(id->start, d->name, d->nlen)) {
    d->found = true;
    return false;
  }
  return true;
}

static bool has_word(const char *s, const char *w) {
  size_t n = strlen(w);
  for (const char *p = strstr(s, w); p; p = strstr(p + 1, w))
    if ((p == s || !is_id_char((unsigned char)p[-1])) && !is_id_char((unsigned char)p[n])) return true;
  return false;
}

kc_status kc__check_dialect(kc_runtime *rt, const char *name, const char *source, const kc__param *params,
                            uint32_t nparams) {
  dialect_ud d = {name, strlen(name), 0, false};
  kc__scan_idents(source, strlen(source), dialect_ident, &d);
  if (d.marker == 2)
    return kc__err(rt, KC_EINVAL,
                   "'%s' is a KC_DEVICE helper, not a kernel: only a function declared KC_KERNEL void can "
                   "be launched",
                   name);
  if (d.marker != 1)
    return kc__err(rt, KC_EINVAL,
                   "kernel '%s' is not declared KC_KERNEL: write KC_KERNEL void %s(...), as every backend "
                   "needs",
                   name, name);
  for (uint32_t i = 0; i < nparams; i++)
    if (params[i].is_buffer && !has_word(params[i].type, "KC_GLOBAL") &&
        !has_word(params[i].type, "KC_LOCAL"))
      return kc__err(rt, KC_EINVAL,
                     "kernel '%s': pointer parameter '%s' has no address space: declare it KC_GLOBAL "
                     "(KC_GLOBAL %s%s), or KC_LOCAL for local memory, as every backend needs",
                     name, params[i].name, params[i].type, params[i].name);
  return KC_OK;
}

/* ---------------------------------------------------------- scalar sizes */

static const struct {
  const char *name;
  uint32_t size;
} kc__scalar_types[] = {
    {"char", 1},           {"signed char", 1},  {"unsigned char", 1},
    {"uchar", 1},          {"bool", 1},         {"_Bool", 1},
    {"int8_t", 1},         {"uint8_t", 1},      {"short", 2},
    {"unsigned short", 2}, {"ushort", 2},       {"half", 2},
    {"int16_t", 2},        {"uint16_t", 2},     {"int", 4},
    {"unsigned", 4},       {"unsigned int", 4}, {"signed int", 4},
    {"uint", 4},           {"float", 4},        {"int32_t", 4},
    {"uint32_t", 4},       {"long", 8},         {"unsigned long", 8},
    {"ulong", 8},          {"long long", 8},    {"unsigned long long", 8},
    {"double", 8},         {"int64_t", 8},      {"uint64_t", 8},
    {"size_t", 8},         {"ptrdiff_t", 8},
};

uint32_t kc__scalar_size(const char *type, const kc__spec *spec) {
  return kc__scalar_type(type, spec, NULL, NULL);
}

uint32_t kc__scalar_type(const char *type, const kc__spec *spec, const char **base, uint32_t *lanes) {
  if (base) *base = "";
  if (lanes) *lanes = 1;
  /* Normalize: drop qualifiers, collapse spaces, substitute parameters. */
  char norm[128];
  size_t n = 0;
  const char *p = type;
  while (*p) {
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *s = p;
    if (is_id_start((unsigned char)*p))
      while (*p && is_id_char((unsigned char)*p)) p++;
    else p++;
    size_t wl = (size_t)(p - s);
    if ((wl == 5 && memcmp(s, "const", 5) == 0) || (wl == 8 && memcmp(s, "volatile", 8) == 0)) continue;
    const char *w = s;
    /* a specialization parameter used as a type: "T" with T=float */
    if (spec && spec->params && is_id_start((unsigned char)*s)) {
      const char *q = spec->params;
      while (*q) {
        const char *eq = strchr(q, '=');
        if (!eq) break;
        const char *ve = strchr(eq, ',');
        if (!ve) ve = eq + strlen(eq);
        if ((size_t)(eq - q) == wl && memcmp(q, s, wl) == 0) {
          w = eq + 1;
          wl = (size_t)(ve - w);
          break;
        }
        q = *ve ? ve + 1 : ve;
      }
    }
    if (n + wl + 2 >= sizeof norm) return 0;
    if (n) norm[n++] = ' ';
    memcpy(norm + n, w, wl);
    n += wl;
  }
  norm[n] = 0;
  for (size_t i = 0; i < sizeof kc__scalar_types / sizeof *kc__scalar_types; i++)
    if (strcmp(norm, kc__scalar_types[i].name) == 0) {
      if (base) *base = kc__scalar_types[i].name;
      return kc__scalar_types[i].size;
    }
  /* OpenCL vector types: float4, int2, uchar16 ... */
  size_t bl = strcspn(norm, "0123456789");
  if (bl > 0 && bl < n && norm[bl - 1] != ' ') {
    int n_lanes = atoi(norm + bl);
    if (n_lanes == 2 || n_lanes == 3 || n_lanes == 4 || n_lanes == 8 || n_lanes == 16) {
      char bname[64];
      if (bl >= sizeof bname) return 0;
      memcpy(bname, norm, bl);
      bname[bl] = 0;
      for (size_t i = 0; i < sizeof kc__scalar_types / sizeof *kc__scalar_types; i++)
        if (strcmp(bname, kc__scalar_types[i].name) == 0) {
          if (base) *base = kc__scalar_types[i].name;
          if (lanes) *lanes = (uint32_t)n_lanes;
          return kc__scalar_types[i].size * (uint32_t)(n_lanes == 3 ? 4 : n_lanes);
        }
    }
  }
  return 0;
}

/* --------------------------------------------- specialization parameters */

typedef struct {
  const char *k, *v;
  size_t kl, vl;
} kv;

static int kv_cmp(const void *a, const void *b) {
  const kv *x = a, *y = b;
  size_t m = x->kl < y->kl ? x->kl : y->kl;
  int c = memcmp(x->k, y->k, m);
  return c ? c : (x->kl > y->kl) - (x->kl < y->kl);
}

kc_status kc__canon_params(kc_runtime *rt, const char *params, char **canon) {
  *canon = NULL;
  if (!params) params = "";
  kv items[64];
  size_t n = 0;
  const char *p = params;
  while (*p) {
    const char *e = strchr(p, ',');
    if (!e) e = p + strlen(p);
    const char *s = p;
    while (s < e && isspace((unsigned char)*s)) s++;
    const char *t = e;
    while (t > s && isspace((unsigned char)t[-1])) t--;
    if (s == t) {
      if (*e == 0 && n == 0 && e == params + strlen(params)) break; /* all blank */
      return kc__err(rt, KC_EINVAL, "specialization parameters \"%s\": empty entry", params);
    }
    const char *eq = memchr(s, '=', (size_t)(t - s));
    if (!eq)
      return kc__err(rt, KC_EINVAL, "specialization parameters \"%s\": \"%.*s\" is not KEY=VALUE", params,
                     (int)(t - s), s);
    const char *ke = eq;
    while (ke > s && isspace((unsigned char)ke[-1])) ke--;
    const char *vs = eq + 1;
    while (vs < t && isspace((unsigned char)*vs)) vs++;
    bool key_ok = ke > s && is_id_start((unsigned char)*s);
    for (const char *q = s; q < ke && key_ok; q++) key_ok = is_id_char((unsigned char)*q);
    if (!key_ok)
      return kc__err(rt, KC_EINVAL, "specialization parameters \"%s\": key \"%.*s\" is not an identifier",
                     params, (int)(ke - s), s);
    if (key_ok && ke - s >= 3 && (!memcmp(s, "KC_", 3) || !memcmp(s, "kc_", 3)))
      return kc__err(rt, KC_EINVAL,
                     "specialization parameters \"%s\": key \"%.*s\" is reserved (names starting with KC_ "
                     "or kc_ belong to the kernel dialect)",
                     params, (int)(ke - s), s);
    if (vs == t)
      return kc__err(rt, KC_EINVAL, "specialization parameters \"%s\": key \"%.*s\" has no value", params,
                     (int)(ke - s), s);
    for (const char *q = vs; q + 1 < t; q++)
      if ((q[0] == '/' && (q[1] == '*' || q[1] == '/')) || (q[0] == '*' && q[1] == '/'))
        return kc__err(rt, KC_EINVAL,
                       "specialization parameters \"%s\": value of \"%.*s\" contains a comment token "
                       "(\"%.2s\"), which would hide what follows it in the translation unit",
                       params, (int)(ke - s), s, q);
    for (const char *q = vs; q < t; q++)
      if (*q == '\n' || *q == '\r' || *q == '\\' || *q == '=')
        return kc__err(rt, KC_EINVAL,
                       "specialization parameters \"%s\": value of \"%.*s\" contains a newline, "
                       "backslash (a line splice) or '='",
                       params, (int)(ke - s), s);
    if (n == sizeof items / sizeof *items)
      return kc__err(rt, KC_EINVAL, "specialization parameters: more than 64 entries");
    items[n++] = (kv){s, vs, (size_t)(ke - s), (size_t)(t - vs)};
    p = *e ? e + 1 : e;
    if (*e == ',' && !*p)
      return kc__err(rt, KC_EINVAL, "specialization parameters \"%s\": trailing comma", params);
  }
  qsort(items, n, sizeof *items, kv_cmp);
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  for (size_t i = 0; i < n; i++) {
    if (i && kv_cmp(&items[i - 1], &items[i]) == 0)
      return kc__sb_free(&sb),
             kc__err(rt, KC_EINVAL, "specialization parameters \"%s\": key \"%.*s\" given twice", params,
                     (int)items[i].kl, items[i].k);
    if (i) kc__sb_append(&sb, ",", 1);
    kc__sb_append(&sb, items[i].k, items[i].kl);
    kc__sb_append(&sb, "=", 1);
    kc__sb_append(&sb, items[i].v, items[i].vl);
  }
  *canon = kc__sb_take(&sb);
  return *canon ? KC_OK : kc__err(rt, KC_ENOMEM, "out of memory");
}
