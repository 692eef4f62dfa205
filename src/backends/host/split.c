/* SPDX-License-Identifier: MIT */
/*
 * split.c -- a kernel with kc_barrier() as loops over its group's work
 * items (PoCL's work-item loops, MCUDA's loop fission), written as C
 * source: the kernel's body is cut at its barriers into regions, each a
 * loop over the group's items (kc__split, which the group function calls;
 * codegen.c). A statement that contains barriers (a block, if, for, while
 * or do) stays outside the loops; its condition is evaluated by every item
 * in a loop of its own and checked to be the same for all (OpenCL and CUDA
 * require it: otherwise the launch fails with KC_ELAUNCH, as the fibers'
 * does), or once where it reads only values the same for every item.
 *
 * The locals declared where the body is cut (its top, the blocks and
 * loops with barriers) live in one of five ways (plan_decls): KC_LOCAL and
 * static ones once, at the top; one used only in its region, as written
 * there; one never written whose value is a pure function of the ids, the
 * arguments and constants (no memory), computed again at the top of each
 * loop over items; one written only where the group runs once (a loop's
 * increment) from values the same for every item (plan_uniform), once for
 * the group; any other, kept per item, an array over the group's items
 * whose name is a macro for the running item's element (the arrays' bytes
 * bounded by the caller: a larger group runs as fibers). A for loop
 * without barriers over such a uniform counter is cut as if it had one
 * (promotable), so that its loop over items is innermost and vectorizes;
 * but for one of a few constant trips, which the C compiler unrolls whole.
 *
 * Only what it reads with certainty: anything else (goto, labels, a
 * switch or an expression around a barrier, a barrier in a helper or a
 * macro, a break or continue or return across a region, a declaration it
 * cannot tell, a name used outside the scope it has or declared twice, a
 * parameter written, preprocessor lines in the body...) leaves the kernel
 * to the fibers (exec.c), with the reason in the debug log (codegen.c).
 */
#include "backends/host/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_ID, T_NUM, T_STR, T_PUNCT };
typedef struct tok {
  const char *p;
  uint32_t n;
  uint8_t k;
} tok;

enum { S_EMPTY, S_EXPR, S_DECL, S_BARRIER, S_BLOCK, S_IF, S_FOR, S_WHILE, S_DO, S_SWITCH, S_RETURN, S_JUMP };

typedef struct stmt {
  int kind;
  uint32_t a, b; /* tokens [a, b) */
  uint32_t c0, c1; /* the condition (if, for, while, do) */
  uint32_t i0, i1, n0, n1; /* for: init (without its ';') and increment */
  int body, els; /* sub-statements, -1 */
  int first, next; /* a block's first item; the next item of the block this one is in */
  unsigned barriers; /* kc_barrier tokens within */
  bool free_break, free_cont, ret;
  bool promoted; /* a barrier-free for loop of a uniform counter, split as if it had a barrier */
} stmt;

/* A declarator of a declaration at a split level. */
typedef struct decl {
  uint32_t name; /* its token */
  uint32_t s0, s1; /* the specifiers */
  uint32_t d0, d1; /* the declarator */
  uint32_t e0, e1; /* the initializer (empty: none) */
  uint32_t at, end; /* the scope: the declaration to the end of its block (tokens) */
  uint32_t r0, r1; /* the region it is declared in */
  int stmt; /* the declaration statement */
  bool is_static, array, keep, remat, uniform, via_macro, addr;
  unsigned alias; /* nonzero: its name is declared again in another scope; written NAME__kcALIAS */
} decl;

typedef struct macro {
  const char *name;
  uint32_t n;
  tok *t; /* its replacement */
  uint32_t nt;
} macro;

typedef struct sp {
  const kc__bsvc *sv;
  const kc__tu *tu;
  tok *t;
  uint32_t nt;
  stmt *s;
  uint32_t ns;
  size_t scap;
  decl *d;
  uint32_t nd;
  size_t dcap;
  uint32_t *names; /* every declarator's name token in the body, any depth */
  uint32_t nnames;
  size_t ncap;
  macro *m;
  uint32_t nm;
  size_t mcap;
  tok *mt; /* the macros' tokens */
  uint32_t nmt, mtcap;
  const char *why;
  const char *last_pp; /* where the last preprocessor line tokenize skipped starts */
  uint32_t *alias; /* for each token of a name that has aliases, its alias (else 0); NULL: none */
  unsigned nbar, ncond, nregion;
  bool int_ids; /* the kernel takes an id as int: `(int)kc_local_id(0)`, `int x = kc_global_id(0)` */
  uint32_t top_last_bar; /* the top level's statement index after which no barrier comes */
  /* the expressions of loops with barriers run once for the group when
   * uniform: their increments, and their inits that are not declarations */
#define SPLIT_MAX_ONCE 64
  uint32_t once[SPLIT_MAX_ONCE][2];
  unsigned nonce;
  kc__sb *out;
} sp;

static bool idc(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is(const sp *x, uint32_t i, const char *w) {
  size_t n = strlen(w);
  return i < x->nt && x->t[i].n == n && memcmp(x->t[i].p, w, n) == 0;
}

static bool tok_eq(const tok *a, const tok *b) { return a->n == b->n && memcmp(a->p, b->p, a->n) == 0; }

static bool tok_is(const tok *a, const char *w) { return a->n == strlen(w) && memcmp(a->p, w, a->n) == 0; }

static bool fail(sp *x, const char *why) {
  if (!x->why) x->why = why;
  return false;
}

/* Tokens of text [p, end) into *t (grown); false on a byte it does not
 * know, a preprocessor line (unless skip_pp: then lines starting with '#'
 * are skipped) or memory. */
static const char *const punct3[] = {"<<=", ">>=", "..."};
static const char *const punct2[] = {"->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&",
                                     "||", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "##"};

static bool tokenize(sp *x, const char *p, const char *end, tok **t, uint32_t *nt, uint32_t *cap,
                     bool skip_pp) {
  bool bol = true;
  while (p < end) {
    char c = *p;
    if (c == '\n') {
      bol = true, p++;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      p++;
      continue;
    }
    if (c == '\\') return fail(x, "a line continuation in the kernel's body");
    if (c == '/' && p + 1 < end && p[1] == '/') {
      while (p < end && *p != '\n') p++;
      continue;
    }
    if (c == '/' && p + 1 < end && p[1] == '*') {
      const char *e = p + 2;
      while (e + 1 < end && !(e[0] == '*' && e[1] == '/')) e++;
      if (e + 1 >= end) return fail(x, "an unterminated comment");
      p = e + 2;
      continue;
    }
    if (c == '#' && bol && skip_pp) {
      x->last_pp = p;
      while (p < end && *p != '\n') {
        if (*p == '\\' && p + 1 < end && p[1] == '\n') p++;
        p++;
      }
      continue;
    }
    bol = false;
    if (*nt == *cap) {
      uint32_t nc = *cap ? *cap * 2 : 256;
      tok *g = kc__bs_alloc(x->sv, nc * sizeof *g);
      if (!g) return fail(x, "out of memory");
      if (*nt) memcpy(g, *t, *nt * sizeof *g);
      kc__bs_free(x->sv, *t);
      *t = g, *cap = nc;
    }
    tok *k = &(*t)[(*nt)++];
    k->p = p;
    if (idc(c) && !(c >= '0' && c <= '9')) {
      while (p < end && idc(*p)) p++;
      k->k = T_ID;
      if (p < end && (*p == '\'' || *p == '"')) return fail(x, "a prefixed literal");
    } else if ((c >= '0' && c <= '9') || (c == '.' && p + 1 < end && p[1] >= '0' && p[1] <= '9')) {
      while (p < end &&
             (idc(*p) || *p == '.' ||
              ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E' || p[-1] == 'p' || p[-1] == 'P'))))
        p++;
      k->k = T_NUM;
    } else if (c == '"' || c == '\'') {
      const char *e = p + 1;
      while (e < end && *e != c && *e != '\n') e += *e == '\\' ? 2 : 1;
      if (e >= end || *e != c) return fail(x, "an unterminated literal");
      p = e + 1;
      k->k = T_STR;
    } else {
      k->k = T_PUNCT;
      size_t n = 1;
      for (size_t i = 0; i < sizeof punct3 / sizeof *punct3 && n == 1; i++)
        if (end - p >= 3 && memcmp(p, punct3[i], 3) == 0) n = 3;
      for (size_t i = 0; i < sizeof punct2 / sizeof *punct2 && n == 1; i++)
        if (end - p >= 2 && memcmp(p, punct2[i], 2) == 0) n = 2;
      if (c == '#' || c == '@' || c == '$' || c == '`' || (unsigned char)c >= 0x80)
        return fail(x, "a preprocessor line or an unknown character in the kernel's body");
      p += n;
    }
    k->n = (uint32_t)(p - k->p);
  }
  return true;
}

/* --------------------------------------------------------- statements */

/* The token after the bracket that opens at i ('(' '[' '{'), or nt. */
static uint32_t match(const sp *x, uint32_t i) {
  int depth = 0;
  for (; i < x->nt; i++) {
    const tok *k = &x->t[i];
    if (k->k != T_PUNCT || k->n != 1) continue;
    char c = k->p[0];
    if (c == '(' || c == '[' || c == '{') depth++;
    else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return x->nt;
}

/* The ';' at bracket depth 0 from i before lim, or lim. */
static uint32_t semi(const sp *x, uint32_t i, uint32_t lim) {
  while (i < lim) {
    if (is(x, i, ";")) return i;
    if (is(x, i, "(") || is(x, i, "[") || is(x, i, "{")) i = match(x, i);
    else i++;
  }
  return lim;
}

static unsigned count_bar(const sp *x, uint32_t a, uint32_t b) {
  unsigned n = 0;
  for (uint32_t i = a; i < b; i++) n += is(x, i, "kc_barrier");
  return n;
}

static const char *const kw_spec[] = {
    "const",         "volatile", "restrict", "__restrict",    "void",          "char",     "short",
    "int",           "long",     "float",    "double",        "signed",        "unsigned", "_Bool",
    "bool",          "static",   "KC_LOCAL", "KC_GLOBAL",     "struct",        "union",    "enum",
    "auto",          "register", "typedef",  "extern",        "_Thread_local", "inline",   "_Alignas",
    "__attribute__", "_Atomic",  "_Complex", "__extension__", "__typeof__",    "typeof",   "_Static_assert"};
static const char *const kw_type[] = {"void",   "char",   "short",    "int",   "long", "float",
                                      "double", "signed", "unsigned", "_Bool", "bool", "_Complex"};
static const char *const kw_refuse[] = {
    "typedef",       "extern",     "_Thread_local", "inline",         "_Alignas", "__attribute__", "_Atomic",
    "__extension__", "__typeof__", "typeof",        "_Static_assert", "auto",     "register"};
static const char *const kw_stmt[] = {"if",       "else", "for",     "while",    "do",
                                      "switch",   "case", "default", "return",   "break",
                                      "continue", "goto", "sizeof",  "_Alignof", "_Generic"};
/* typedef names the prelude gives, besides any ending in _t */
static const char *const known_types[] = {"uint", "uchar", "ushort", "ulong", "half"};

static bool in_list(const tok *k, const char *const *l, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (tok_is(k, l[i])) return true;
  return false;
}
#define IN(k, l) in_list((k), (l), sizeof(l) / sizeof *(l))

static bool known_type(const tok *k) {
  if (k->k != T_ID) return false;
  if (IN(k, known_types) || IN(k, kw_type)) return true;
  if (k->n > 2 && k->p[k->n - 2] == '_' && k->p[k->n - 1] == 't') return true;
  /* the vector types: char2 ... double4 */
  static const char *const base[] = {"char", "uchar", "short", "ushort", "int",
                                     "uint", "long",  "ulong", "float",  "double"};
  for (size_t i = 0; i < sizeof base / sizeof *base; i++) {
    size_t n = strlen(base[i]);
    if (k->n == n + 1 && memcmp(k->p, base[i], n) == 0 && (k->p[n] == '2' || k->p[n] == '4')) return true;
  }
  return false;
}

static bool add_name(sp *x, uint32_t i) {
  bool ok;
  KC__GROW(&x->sv->heap, x->names, x->ncap, (size_t)x->nnames + 1, 64, &ok);
  if (!ok) return fail(x, "out of memory");
  x->names[x->nnames++] = i;
  return true;
}

/* Whether tokens [a, b) (without the ';') are a declaration; false with
 * x->why set when it cannot tell. */
static bool is_decl(sp *x, uint32_t a, uint32_t b, bool *decl) {
  *decl = false;
  if (a >= b) return true;
  const tok *k = &x->t[a];
  if (k->k != T_ID) return true;
  if (IN(k, kw_stmt)) return true;
  if (IN(k, kw_spec)) {
    if (IN(k, kw_refuse)) return fail(x, "a declaration with a storage class or attribute it does not take");
    *decl = true;
    return true;
  }
  if (a + 1 < b && x->t[a + 1].k == T_ID) {
    *decl = true;
    return true;
  }
  if (a + 1 < b && is(x, a + 1, "*")) {
    if (known_type(k)) *decl = true;
    else return fail(x, "a statement 'NAME * ...' that may be a declaration");
  }
  return true;
}

/* The declarators of declaration [a, b): each one's name into the list
 * of every name; at a split level, each into x->d as well (scope to end,
 * region [r0, r1) filled in later). */
static bool parse_decl(sp *x, uint32_t a, uint32_t b, bool split, uint32_t end, int st) {
  uint32_t i = a;
  bool seen_type = false, is_static = false;
  for (; i < b; i++) {
    const tok *k = &x->t[i];
    if (k->k != T_ID) break;
    if (IN(k, kw_refuse)) return fail(x, "a declaration with a storage class or attribute it does not take");
    if (tok_is(k, "static") || tok_is(k, "KC_LOCAL")) {
      is_static = true;
      continue;
    }
    if (tok_is(k, "struct") || tok_is(k, "union") || tok_is(k, "enum")) {
      if (i + 1 >= b || x->t[i + 1].k != T_ID || is(x, i + 2, "{"))
        return fail(x, "a struct, union or enum defined in the kernel's body");
      i++;
      seen_type = true;
      continue;
    }
    if (IN(k, kw_type)) {
      seen_type = true;
      continue;
    }
    if (tok_is(k, "const") || tok_is(k, "volatile") || tok_is(k, "restrict") || tok_is(k, "__restrict") ||
        tok_is(k, "KC_GLOBAL"))
      continue;
    if (!seen_type) {
      seen_type = true; /* a typedef name */
      continue;
    }
    break;
  }
  if (!seen_type || i >= b) return fail(x, "a declaration it cannot read");
  uint32_t s1 = i;
  while (i < b) {
    uint32_t d0 = i, eq = 0, name = 0;
    bool array = false, ptr = false;
    while (i < b && !is(x, i, ",")) {
      if (is(x, i, "=")) {
        eq = i;
        i = i + 1;
        while (i < b && !is(x, i, ",")) {
          if (is(x, i, "(") || is(x, i, "[") || is(x, i, "{")) i = match(x, i);
          else i++;
        }
        break;
      }
      if (is(x, i, "(")) return fail(x, "a declarator with parentheses (a function or its pointer)");
      if (is(x, i, "[")) {
        array = true;
        i = match(x, i);
        continue;
      }
      if (is(x, i, "*")) ptr = true;
      else if (x->t[i].k == T_ID && !tok_is(&x->t[i], "const") && !tok_is(&x->t[i], "volatile") &&
               !tok_is(&x->t[i], "restrict") && !tok_is(&x->t[i], "__restrict")) {
        if (name) return fail(x, "a declarator it cannot read");
        name = i;
      } else if (x->t[i].k != T_ID) return fail(x, "a declarator it cannot read");
      i++;
    }
    (void)ptr;
    if (!name) return fail(x, "a declarator without a name");
    if (!split && !add_name(x, name)) return false;
    if (split) {
      bool ok;
      KC__GROW(&x->sv->heap, x->d, x->dcap, (size_t)x->nd + 1, 32, &ok);
      if (!ok) return fail(x, "out of memory");
      decl *d = &x->d[x->nd++];
      memset(d, 0, sizeof *d);
      d->name = name, d->s0 = a, d->s1 = s1, d->d0 = d0, d->d1 = eq ? eq : i;
      d->e0 = eq ? eq + 1 : 0, d->e1 = eq ? i : 0;
      d->at = a, d->end = end, d->stmt = st;
      d->is_static = is_static, d->array = array;
    }
    if (i < b) i++; /* ',' */
  }
  return true;
}

static int new_stmt(sp *x, int kind, uint32_t a) {
  bool ok;
  KC__GROW(&x->sv->heap, x->s, x->scap, (size_t)x->ns + 1, 64, &ok);
  if (!ok) return fail(x, "out of memory"), -1;
  stmt *s = &x->s[x->ns];
  memset(s, 0, sizeof *s);
  s->kind = kind, s->a = a, s->body = s->els = s->first = s->next = -1;
  return (int)x->ns++;
}

/* One statement from token i (inside a block that ends at token end,
 * whose items are at a split level when split); its index, -1 on failure.
 * Sets *next to the token after it. */
static int parse_stmt(sp *x, uint32_t i, uint32_t end, bool split, uint32_t *next);

static bool paren_at(sp *x, uint32_t i, uint32_t end, uint32_t *close) {
  if (!is(x, i, "(")) return fail(x, "a control statement it cannot read");
  *close = match(x, i);
  if (*close > end) return fail(x, "a control statement it cannot read");
  return true;
}

static void merge(stmt *s, const stmt *c, bool loop, bool sw) {
  s->barriers += c->barriers;
  s->ret |= c->ret;
  if (!loop && !sw) s->free_break |= c->free_break;
  if (!loop) s->free_cont |= c->free_cont;
}

static int parse_stmt(sp *x, uint32_t i, uint32_t end, bool split, uint32_t *next) {
  if (x->why) return -1;
  if (i >= end) return fail(x, "a statement it cannot read"), -1;
  const tok *k = &x->t[i];
  int si;
  if (is(x, i, "{")) {
    uint32_t e = match(x, i);
    if (e > end) return fail(x, "unbalanced braces"), -1;
    if ((si = new_stmt(x, S_BLOCK, i)) < 0) return -1;
    uint32_t j = i + 1;
    int prev = -1;
    while (j < e - 1) {
      uint32_t nj;
      int c = parse_stmt(x, j, e - 1, false, &nj);
      if (c < 0) return -1;
      /* the block's own items are at a split level when it has barriers:
       * known only once it is read, so they are read again then */
      if (prev < 0) x->s[si].first = c;
      else x->s[prev].next = c;
      prev = c;
      merge(&x->s[si], &x->s[c], false, false);
      j = nj;
    }
    x->s[si].b = e;
    *next = e;
    (void)split;
    return si;
  }
  if (k->k == T_ID && (tok_is(k, "if") || tok_is(k, "while") || tok_is(k, "switch"))) {
    uint32_t cl;
    if (!paren_at(x, i + 1, end, &cl)) return -1;
    int kind = tok_is(k, "if") ? S_IF : tok_is(k, "while") ? S_WHILE : S_SWITCH;
    if ((si = new_stmt(x, kind, i)) < 0) return -1;
    x->s[si].c0 = i + 2, x->s[si].c1 = cl - 1;
    x->s[si].barriers = count_bar(x, i + 2, cl - 1);
    uint32_t nj;
    int b = parse_stmt(x, cl, end, false, &nj);
    if (b < 0) return -1;
    x->s[si].body = b;
    merge(&x->s[si], &x->s[b], kind == S_WHILE, kind == S_SWITCH);
    if (kind == S_IF && is(x, nj, "else")) {
      int e = parse_stmt(x, nj + 1, end, false, &nj);
      if (e < 0) return -1;
      x->s[si].els = e;
      merge(&x->s[si], &x->s[e], false, false);
    }
    x->s[si].b = nj;
    *next = nj;
    return si;
  }
  if (tok_is(k, "for") && k->k == T_ID) {
    uint32_t cl;
    if (!paren_at(x, i + 1, end, &cl)) return -1;
    uint32_t s1 = semi(x, i + 2, cl - 1), s2 = s1 < cl - 1 ? semi(x, s1 + 1, cl - 1) : cl - 1;
    if (s2 >= cl - 1) return fail(x, "a for statement it cannot read"), -1;
    if ((si = new_stmt(x, S_FOR, i)) < 0) return -1;
    stmt *s = &x->s[si];
    s->i0 = i + 2, s->i1 = s1, s->c0 = s1 + 1, s->c1 = s2, s->n0 = s2 + 1, s->n1 = cl - 1;
    s->barriers = count_bar(x, i + 2, cl - 1);
    uint32_t nj;
    int b = parse_stmt(x, cl, end, false, &nj);
    if (b < 0) return -1;
    x->s[si].body = b;
    merge(&x->s[si], &x->s[b], true, false);
    x->s[si].b = nj;
    bool d;
    if (!is_decl(x, i + 2, s1, &d)) return -1;
    if (d) {
      /* a split level's loop: its declarations are split-level ones,
       * decided by the caller (parse_decl again with split) */
      if (!parse_decl(x, i + 2, s1, false, nj, si)) return -1;
      x->s[si].kind = S_FOR;
    }
    *next = nj;
    return si;
  }
  if (tok_is(k, "do") && k->k == T_ID) {
    if ((si = new_stmt(x, S_DO, i)) < 0) return -1;
    uint32_t nj, cl;
    int b = parse_stmt(x, i + 1, end, false, &nj);
    if (b < 0) return -1;
    x->s[si].body = b;
    merge(&x->s[si], &x->s[b], true, false);
    if (!is(x, nj, "while") || !paren_at(x, nj + 1, end, &cl) || !is(x, cl, ";"))
      return fail(x, "a do statement it cannot read"), -1;
    x->s[si].c0 = nj + 2, x->s[si].c1 = cl - 1;
    x->s[si].barriers += count_bar(x, nj + 2, cl - 1);
    x->s[si].b = cl + 1;
    *next = cl + 1;
    return si;
  }
  if (k->k == T_ID && (tok_is(k, "goto") || tok_is(k, "case") || tok_is(k, "default"))) {
    if (!tok_is(k, "goto")) {
      /* a switch's label, then its statement: read as a jump (the switch
       * around it never is split) */
      uint32_t c = i + 1;
      while (c < end && !is(x, c, ":")) c++;
      if ((si = new_stmt(x, S_JUMP, i)) < 0) return -1;
      x->s[si].b = c + 1;
      *next = c + 1;
      return si;
    }
    return fail(x, "goto"), -1;
  }
  if (k->k == T_ID && is(x, i + 1, ":") && !IN(k, kw_spec)) return fail(x, "a label"), -1;
  uint32_t e = semi(x, i, end);
  if (e >= end) return fail(x, "a statement without its ';'"), -1;
  if (k->k == T_ID && (tok_is(k, "break") || tok_is(k, "continue"))) {
    if ((si = new_stmt(x, S_JUMP, i)) < 0) return -1;
    x->s[si].free_break = tok_is(k, "break");
    x->s[si].free_cont = !x->s[si].free_break;
  } else if (k->k == T_ID && tok_is(k, "return")) {
    if ((si = new_stmt(x, S_RETURN, i)) < 0) return -1;
    x->s[si].ret = true;
    if (e != i + 1) return fail(x, "a return with a value"), -1;
  } else if (e == i) {
    if ((si = new_stmt(x, S_EMPTY, i)) < 0) return -1;
  } else if (e == i + 3 && is(x, i, "kc_barrier") && is(x, i + 1, "(") && is(x, i + 2, ")")) {
    if ((si = new_stmt(x, S_BARRIER, i)) < 0) return -1;
    x->s[si].barriers = 1;
  } else {
    bool d;
    if (!is_decl(x, i, e, &d)) return -1;
    if ((si = new_stmt(x, d ? S_DECL : S_EXPR, i)) < 0) return -1;
    x->s[si].barriers = count_bar(x, i, e);
    if (x->s[si].barriers) return fail(x, "kc_barrier() inside an expression or declaration"), -1;
    for (uint32_t j = i; j + 1 < e; j++)
      if (is(x, j, "(") && is(x, j + 1, "{")) return fail(x, "a statement expression"), -1;
    if (d && !parse_decl(x, i, e, false, end, si)) return -1;
  }
  x->s[si].b = e + 1;
  *next = e + 1;
  return si;
}

static bool is_macro(const sp *x, const tok *k, uint32_t *mi);
static bool assign_op(const tok *k);

/* Whether token i of an expression that starts at a reads memory: an
 * element, a member through a pointer, or a '*' that may not be a product.
 * A '*' after ')' counts as a read: it may be a dereference after a cast,
 * `(float)*(a + i)` (taking a product for a read only costs an array per
 * item; the other way round a value re-read after a barrier). */
static bool reads_memory(const sp *x, uint32_t a, uint32_t i) {
  const tok *k = &x->t[i];
  if (tok_is(k, "[") || tok_is(k, "->")) return true;
  if (!tok_is(k, "*")) return false;
  if (i == a) return true;
  const tok *p = &x->t[i - 1];
  return p->k == T_PUNCT && !tok_is(p, "]");
}
static bool written(const tok *t, uint32_t n, uint32_t i, bool obj);
static bool mentions_at(const sp *x, uint32_t i, const tok *name);
static bool const_macro(const sp *x, const tok *k);

/* Whether macro mi may expand (through others: bounded) to a declaration,
 * a block or more than one statement. */
static bool macro_declares(const sp *x, uint32_t mi, int depth) {
  const macro *m = &x->m[mi];
  for (uint32_t i = 0; i < m->nt; i++) {
    const tok *k = &m->t[i];
    uint32_t mj;
    if (tok_is(k, ";") || tok_is(k, "{") || tok_is(k, "}") ||
        (IN(k, kw_spec) && !tok_is(k, "const") && !tok_is(k, "volatile")))
      return true;
    if (k->k == T_ID && depth > 0 && is_macro(x, k, &mj) && mj != mi && macro_declares(x, mj, depth - 1))
      return true;
  }
  return false;
}

/* Whether macro mi may (through others: bounded) write to something it is
 * given or names: an assignment, an increment, an address taken. */
static bool macro_writes(const sp *x, uint32_t mi, int depth) {
  const macro *m = &x->m[mi];
  for (uint32_t i = 0; i < m->nt; i++) {
    const tok *k = &m->t[i];
    uint32_t mj;
    if (assign_op(k) || tok_is(k, "&")) return true;
    if (k->k == T_ID && depth > 0 && is_macro(x, k, &mj) && mj != mi && macro_writes(x, mj, depth - 1))
      return true;
  }
  return false;
}

/* Whether macro mi's replacement (or a macro it names, to depth) may jump:
 * return, break, continue or goto, which the statements' parse does not
 * see where the macro is used; or pastes (##), which may make any of them,
 * or kc_barrier. */
static bool macro_jumps(const sp *x, uint32_t mi, int depth) {
  static const char *const jumps[] = {"return", "break", "continue", "goto"};
  const macro *m = &x->m[mi];
  for (uint32_t i = 0; i < m->nt; i++) {
    const tok *k = &m->t[i];
    uint32_t mj;
    if (k->n && k->p[0] == '#') return true;
    if (k->k != T_ID) continue;
    for (size_t j = 0; j < sizeof jumps / sizeof *jumps; j++)
      if (tok_is(k, jumps[j])) return true;
    if (depth > 0 && is_macro(x, k, &mj) && mj != mi && macro_jumps(x, mj, depth - 1)) return true;
  }
  return false;
}

/* Whether statement [a, b) at a split level names such a macro. */
static bool declaring_macro(const sp *x, uint32_t a, uint32_t b) {
  for (uint32_t i = a; i < b; i++) {
    uint32_t mi;
    if (x->t[i].k == T_ID && is_macro(x, &x->t[i], &mi) && macro_declares(x, mi, 4)) return true;
  }
  return false;
}

/* --------------------------------------------------------- split levels */

/* Marks the declarations of the split levels under statement si (a
 * barrier-containing statement, or the body's block), with their regions:
 * a region is a run of barrier-free items of one block. */
static bool mark_levels(sp *x, int si);

/* Whether statement si is cut: it has barriers, or is a promoted loop. */
static bool splits(const sp *x, int si) { return x->s[si].barriers || x->s[si].promoted; }

/* Whether [a, b) reads only constants, scalar arguments, the group's ids
 * and sizes, and the token v (0: none); writes (with `writes`) only v. */
static bool counter_expr(const sp *x, uint32_t a, uint32_t b, uint32_t v, bool writes) {
  static const char *const ids[] = {"kc_local_size", "kc_group_id", "kc_num_groups", "kc_global_size"};
  if (a >= b) return false;
  for (uint32_t i = a; i < b; i++) {
    const tok *k = &x->t[i];
    if (k->k == T_NUM) continue;
    if (k->k == T_STR) return false;
    if (k->k == T_PUNCT) {
      if (tok_is(k, ".") || tok_is(k, "&") || reads_memory(x, a, i)) return false;
      if (assign_op(k) && !writes) return false;
      continue;
    }
    if (v && tok_eq(k, &x->t[v])) continue;
    if (IN(k, ids) || IN(k, kw_type) || known_type(k) || const_macro(x, k)) continue;
    bool ok = false;
    for (uint32_t p = 0; !ok && p < x->tu->nparams; p++)
      ok = !x->tu->params[p].is_buffer && tok_is(k, x->tu->params[p].name);
    if (!ok) return false;
  }
  if (writes) /* what is written: only v */
    for (uint32_t i = a; i < b; i++)
      if (x->t[i].k == T_ID && written(x->t, b, i, true) && !(v && tok_eq(&x->t[i], &x->t[v]))) return false;
  return true;
}

/* The value of token i when it is an integer constant: a number, or an
 * object-like macro that is one (parenthesized or not). */
static bool int_const(const sp *x, uint32_t i, unsigned long long *v) {
  const tok *k = &x->t[i];
  uint32_t mi;
  if (k->k == T_ID && is_macro(x, k, &mi)) {
    const macro *m = &x->m[mi];
    if (m->nt == 3 && tok_is(&m->t[0], "(") && tok_is(&m->t[2], ")")) k = &m->t[1];
    else if (m->nt == 1) k = &m->t[0];
    else return false;
    if (m->t[0].p == m->name + m->n) return false; /* function-like */
  }
  if (k->k != T_NUM) return false;
  char b[32];
  if (k->n >= sizeof b) return false;
  memcpy(b, k->p, k->n);
  b[k->n] = 0;
  char *e;
  *v = strtoull(b, &e, 0);
  while (*e == 'u' || *e == 'U' || *e == 'l' || *e == 'L') e++;
  return *e == 0 && e != b;
}

/* Whether for loop s over counter v (its init's value at [a, i1)) runs a
 * constant number of times, at most SPLIT_UNROLL_MAX: `v = A; v < B; v++`
 * (or <=, !=; ++v, v += 1) with A and B constants. The C compiler unrolls
 * such a loop whole inside the loop over items, which then vectorizes
 * with the loop's values in registers (a tile's k loop): better than
 * cutting it, which keeps every item's values in memory. */
#define SPLIT_UNROLL_MAX 16
static bool short_const_loop(const sp *x, const stmt *s, uint32_t v, uint32_t a) {
  unsigned long long lo, hi;
  if (a + 1 != s->i1 || !int_const(x, a, &lo)) return false;
  if (s->c1 != s->c0 + 3 || !tok_eq(&x->t[s->c0], &x->t[v]) || !int_const(x, s->c0 + 2, &hi)) return false;
  bool le = is(x, s->c0 + 1, "<="), lt = is(x, s->c0 + 1, "<") || is(x, s->c0 + 1, "!=");
  if (!le && !lt) return false;
  bool inc = (s->n1 == s->n0 + 2 && ((tok_eq(&x->t[s->n0], &x->t[v]) && is(x, s->n0 + 1, "++")) ||
                                     (is(x, s->n0, "++") && tok_eq(&x->t[s->n0 + 1], &x->t[v])))) ||
             (s->n1 == s->n0 + 3 && tok_eq(&x->t[s->n0], &x->t[v]) && is(x, s->n0 + 1, "+=") &&
              is(x, s->n0 + 2, "1"));
  if (!inc || hi < lo) return false;
  return hi - lo + le <= SPLIT_UNROLL_MAX;
}

/* A for loop without barriers whose counter is the same for every item
 * (declared in its init from constants, arguments and the group's sizes,
 * compared and stepped from them, written nowhere else): cut as if its
 * body ended with a barrier (PoCL's implicit loop barriers), so that the
 * loop over the items is the innermost and vectorizes across items. A
 * program without races between items gives the same results. */
static bool promotable(sp *x, int si) {
  const stmt *s = &x->s[si], *b = &x->s[s->body];
  if (s->kind != S_FOR || s->barriers || b->free_break || b->free_cont || b->ret) return false;
  bool d;
  const char *why = x->why;
  if (!is_decl(x, s->i0, s->i1, &d) || !d) return x->why = why, false;
  /* one declarator: type words, its name, '=', the value */
  uint32_t eq = s->i0;
  while (eq < s->i1 && !is(x, eq, "=")) eq++;
  if (eq >= s->i1 || eq < s->i0 + 2) return false;
  uint32_t v = eq - 1;
  if (x->t[v].k != T_ID) return false;
  unsigned ndecl = 0; /* (a counter declared again elsewhere would refuse the whole split) */
  for (uint32_t j = 0; j < x->nnames; j++) ndecl += tok_eq(&x->t[x->names[j]], &x->t[v]);
  if (ndecl != 1) return false;
  for (uint32_t i = s->i0; i < v; i++)
    if (x->t[i].k != T_ID || !(IN(&x->t[i], kw_type) || known_type(&x->t[i]))) return false;
  for (uint32_t i = eq + 1; i < s->i1; i++)
    if (is(x, i, ",")) return false;
  if (!counter_expr(x, eq + 1, s->i1, 0, false) || !counter_expr(x, s->c0, s->c1, v, false) ||
      !counter_expr(x, s->n0, s->n1, v, true) || short_const_loop(x, s, v, eq + 1))
    return false;
  for (uint32_t i = b->a; i < b->b; i++)
    if (mentions_at(x, i, &x->t[v]) && (!tok_eq(&x->t[i], &x->t[v]) || written(x->t, x->nt, i, true)))
      return false;
  return true;
}

static bool mark_block(sp *x, int first, uint32_t end) {
  uint32_t r0 = 0;
  size_t rstart = x->nd; /* declarations of the open region */
  bool open = false, seen_ret = false;
  for (int c = first; c >= 0; c = x->s[c].next) {
    stmt *s = &x->s[c];
    /* (not after a return: the items that returned would run it) */
    if (!s->barriers && !seen_ret && promotable(x, c)) s->promoted = true;
    seen_ret |= s->ret;
    if (!s->barriers && !s->promoted) {
      if (!open) r0 = s->a, open = true, rstart = x->nd;
      if (s->free_break || s->free_cont)
        return fail(x, "a break or continue out of a region between barriers");
      if (s->kind == S_DECL && !parse_decl(x, s->a, s->b - 1, true, end, c)) return false;
      if (s->kind == S_EXPR && declaring_macro(x, s->a, s->b))
        return fail(x, "a macro that may declare or open a block");
      for (size_t j = rstart; j < x->nd; j++) x->d[j].r0 = r0, x->d[j].r1 = s->b;
      continue;
    }
    open = false;
    if (!mark_levels(x, c)) return false;
  }
  return true;
}

static bool mark_levels(sp *x, int si) {
  stmt *s = &x->s[si];
  switch (s->kind) {
  case S_BARRIER: return true;
  case S_BLOCK: return mark_block(x, s->first, s->b);
  case S_IF:
  case S_WHILE:
  case S_DO:
  case S_FOR:
    if (count_bar(x, s->c0, s->c1) || (s->kind == S_FOR && count_bar(x, s->n0, s->n1)))
      return fail(x, "kc_barrier() in a condition");
    if (s->kind == S_FOR && s->i1 > s->i0) {
      bool d;
      if (!is_decl(x, s->i0, s->i1, &d)) return false;
      if (d) {
        size_t at = x->nd;
        if (!parse_decl(x, s->i0, s->i1, true, s->b, si)) return false;
        for (size_t j = at; j < x->nd; j++) x->d[j].r0 = s->i0, x->d[j].r1 = s->i1;
      } else if (count_bar(x, s->i0, s->i1)) return fail(x, "kc_barrier() in a condition");
    }
    if (s->kind == S_FOR && x->nonce + 2 <= SPLIT_MAX_ONCE) {
      x->once[x->nonce][0] = s->n0, x->once[x->nonce++][1] = s->n1;
      bool d = true;
      if (s->i1 > s->i0 && is_decl(x, s->i0, s->i1, &d) && !d)
        x->once[x->nonce][0] = s->i0, x->once[x->nonce++][1] = s->i1;
    }
    if (s->kind != S_IF && (x->s[s->body].free_break || x->s[s->body].free_cont))
      return fail(x, "a break or continue in a loop with barriers");
    if (s->promoted) {
      if (x->s[s->body].kind == S_BLOCK && !mark_block(x, x->s[s->body].first, x->s[s->body].b)) return false;
    } else if (x->s[s->body].barriers && !mark_levels(x, s->body)) return false;
    if (s->els >= 0 && x->s[s->els].barriers && !mark_levels(x, s->els)) return false;
    return true;
  case S_SWITCH: return fail(x, "a switch with kc_barrier() inside");
  default: return fail(x, "kc_barrier() where it cannot split");
  }
}

/* ------------------------------------------------------------- checks */

static bool assign_op(const tok *k) {
  static const char *const ops[] = {
      "=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "<<=", ">>=", "++", "--"};
  return k->k == T_PUNCT && IN(k, ops);
}

/* Whether token i of t (n of them) is written: assigned, incremented, its
 * address taken, or (obj) a member or element of it assigned; through
 * parentheses around it too, `(v)++`, `&(v)`. (Writes inside a macro's
 * replacement: macro_writes.) */
static bool written(const tok *t, uint32_t n, uint32_t i, bool obj) {
  /* the name, then the name with each pair of parentheses around it */
  for (uint32_t a = i, b = i;; a--, b++) {
    if (a > 0 && (tok_is(&t[a - 1], "&") || tok_is(&t[a - 1], "++") || tok_is(&t[a - 1], "--"))) return true;
    if (b + 1 < n && assign_op(&t[b + 1])) return true;
    if (obj && b + 1 < n && (tok_is(&t[b + 1], ".") || tok_is(&t[b + 1], "["))) return true;
    if (!(a > 0 && b + 1 < n && tok_is(&t[a - 1], "(") && tok_is(&t[b + 1], ")"))) break;
  }
  return false;
}

/* The closure's macros past the prelude: their names and replacements. */
static bool read_macros(sp *x) {
  size_t from = strlen(host_prelude);
  const char *p = x->tu->text + (x->tu->len > from ? from : x->tu->len), *end = x->tu->text + x->tu->len;
  while (p < end) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e) e = end;
    const char *q = p;
    while (q < e && (*q == ' ' || *q == '\t')) q++;
    if (q < e && *q == '#') {
      q++;
      while (q < e && (*q == ' ' || *q == '\t')) q++;
      if (e - q > 7 && memcmp(q, "define", 6) == 0 && (q[6] == ' ' || q[6] == '\t')) {
        q += 7;
        while (q < e && (*q == ' ' || *q == '\t')) q++;
        const char *nm = q;
        while (q < e && idc(*q)) q++;
        /* the replacement, with its continued lines */
        const char *re = e;
        while (re > q && re < end && re[-1] == '\\') {
          const char *n2 = memchr(re + 1, '\n', (size_t)(end - re - 1));
          re = n2 ? n2 : end;
        }
        bool grown;
        KC__GROW(&x->sv->heap, x->m, x->mcap, (size_t)x->nm + 1, 32, &grown);
        if (!grown) return fail(x, "out of memory");
        macro *m = &x->m[x->nm++];
        m->name = nm, m->n = (uint32_t)(q - nm);
        uint32_t at = x->nmt;
        /* continuation backslashes are refused by the tokenizer: blank them
         * by reading line by line */
        const char *lp = q;
        while (lp < re) {
          const char *le = memchr(lp, '\n', (size_t)(re - lp));
          if (!le) le = re;
          const char *lend = le > lp && le[-1] == '\\' ? le - 1 : le;
          const char *why = x->why;
          if (!tokenize(x, lp, lend, &x->mt, &x->nmt, &x->mtcap, false)) {
            x->why = why; /* a macro it cannot read: its tokens so far stand (stringizing and the like) */
            if (!x->mt) return fail(x, "out of memory");
          }
          lp = le + 1;
        }
        m->t = NULL; /* set below: mt may move */
        m->nt = x->nmt - at;
        m->name = nm;
        m->t = (tok *)(uintptr_t)at;
        e = re;
      }
    }
    p = e + 1;
  }
  for (uint32_t i = 0; i < x->nm; i++) x->m[i].t = x->mt + (uintptr_t)x->m[i].t;
  return true;
}

/* Whether macro mi's expansion may mention name (through other macros:
 * a bounded fixpoint). */
static bool macro_mentions(const sp *x, uint32_t mi, const tok *name, int depth) {
  const macro *m = &x->m[mi];
  for (uint32_t i = 0; i < m->nt; i++) {
    if (m->t[i].k != T_ID) continue;
    if (tok_eq(&m->t[i], name)) return true;
    if (depth > 0)
      for (uint32_t j = 0; j < x->nm; j++)
        if (j != mi && x->m[j].n == m->t[i].n && memcmp(x->m[j].name, m->t[i].p, m->t[i].n) == 0 &&
            macro_mentions(x, j, name, depth - 1))
          return true;
  }
  return false;
}

static bool is_macro(const sp *x, const tok *k, uint32_t *mi) {
  for (uint32_t j = 0; j < x->nm; j++)
    if (x->m[j].n == k->n && memcmp(x->m[j].name, k->p, k->n) == 0) return *mi = j, true;
  return false;
}

/* Whether token i is an identifier outside [a, b) of the body that names,
 * or (a macro) may expand to, name. */
static bool mentions_at(const sp *x, uint32_t i, const tok *name) {
  const tok *k = &x->t[i];
  if (k->k != T_ID) return false;
  if (tok_eq(k, name)) return true;
  uint32_t mi;
  return is_macro(x, k, &mi) && macro_mentions(x, mi, name, 4);
}

/* Whether k is a closure macro of numbers and operators only (TS). */
static bool const_macro(const sp *x, const tok *k) {
  uint32_t mi;
  if (k->k != T_ID || !is_macro(x, k, &mi)) return false;
  const macro *m = &x->m[mi];
  if (m->nt && tok_is(&m->t[0], "(") && m->t[0].p == m->name + m->n) return false; /* function-like */
  for (uint32_t i = 0; i < m->nt; i++)
    if (!(m->t[i].k == T_NUM || (m->t[i].k == T_PUNCT && !assign_op(&m->t[i])))) return false;
  return true;
}

static bool in_list_tok(const tok *k, const char *const *l, size_t n) { return in_list(k, l, n); }

/* The split-level declaration token i names (its name, inside its
 * scope), or -1. */
static int decl_at(const sp *x, uint32_t i) {
  if (x->t[i].k != T_ID) return -1;
  for (uint32_t j = 0; j < x->nd; j++)
    if (tok_eq(&x->t[i], &x->t[x->d[j].name]) && i >= x->d[j].at && i < x->d[j].end) return (int)j;
  return -1;
}

/* Whether [a, b) reads only what is the same for every item of the
 * group: constants, scalar arguments, the group's ids and sizes, uniform
 * variables (no memory); writes (with `writes`) only to those. */
static bool uniform_expr(const sp *x, uint32_t a, uint32_t b, bool writes) {
  static const char *const ids[] = {"kc_local_size", "kc_group_id", "kc_num_groups", "kc_global_size",
                                    "sizeof"};
  if (a >= b) return false;
  for (uint32_t i = a; i < b; i++) {
    const tok *k = &x->t[i];
    if (k->k == T_NUM) continue;
    if (k->k == T_STR) return false;
    if (k->k == T_PUNCT) {
      if (tok_is(k, ".") || reads_memory(x, a, i) || (!writes && assign_op(k))) return false;
      continue;
    }
    if (IN(k, ids) || IN(k, kw_type) || tok_is(k, "const") || known_type(k) || const_macro(x, k)) continue;
    bool ok = false;
    for (uint32_t p = 0; !ok && p < x->tu->nparams; p++)
      ok = !x->tu->params[p].is_buffer && tok_is(k, x->tu->params[p].name);
    int j = decl_at(x, i);
    ok = ok || (j >= 0 && x->d[j].uniform);
    if (!ok) return false;
  }
  return true;
}

static int once_of(const sp *x, uint32_t i) {
  for (unsigned r = 0; r < x->nonce; r++)
    if (i >= x->once[r][0] && i < x->once[r][1]) return (int)r;
  return -1;
}

/* Which variables kept per item are the same for every item (PoCL's
 * uniform values): a scalar written only where the group runs once (the
 * increments of loops with barriers), from uniform values, and made from
 * them. One copy of such a variable for the group, and conditions of
 * uniform values evaluated once. */
static void plan_uniform(sp *x, uint32_t b0, uint32_t b1) {
  for (uint32_t di = 0; di < x->nd; di++) {
    decl *d = &x->d[di];
    d->uniform = d->keep && !d->array && !d->via_macro && !d->addr;
    for (uint32_t i = b0; d->uniform && i < b1; i++)
      if (i != d->name && decl_at(x, i) == (int)di && written(x->t, x->nt, i, true) && once_of(x, i) < 0)
        d->uniform = false;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t di = 0; di < x->nd; di++) {
      decl *d = &x->d[di];
      if (!d->uniform) continue;
      bool ok = !d->e0 || uniform_expr(x, d->e0, d->e1, false);
      for (uint32_t i = b0; ok && i < b1; i++)
        if (i != d->name && decl_at(x, i) == (int)di && written(x->t, x->nt, i, true)) {
          int r = once_of(x, i);
          ok = r >= 0 && uniform_expr(x, x->once[r][0], x->once[r][1], true);
        }
      if (!ok) d->uniform = false, changed = true;
    }
  }
  for (uint32_t di = 0; di < x->nd; di++)
    if (x->d[di].uniform) x->d[di].keep = false;
}

/* Decides, for each split-level declaration, how it lives: static (one
 * for the group), kept in its region (used nowhere else), computed again
 * (remat) or per item (keep); and refuses what it cannot be sure of. */
static bool plan_decls(sp *x, uint32_t b0, uint32_t b1) {
  static const char *const ids[] = {"kc_local_id",   "kc_global_id",   "kc_group_id", "kc_local_size",
                                    "kc_num_groups", "kc_global_size", "sizeof"};
  for (uint32_t di = 0; di < x->nd; di++) {
    decl *d = &x->d[di];
    const tok *nm = &x->t[d->name];
    unsigned ndecl = 0, nsplit = 0;
    for (uint32_t j = 0; j < x->nnames; j++) ndecl += tok_eq(&x->t[x->names[j]], nm);
    for (uint32_t j = 0; j < x->nd; j++) {
      if (!tok_eq(&x->t[x->d[j].name], nm)) continue;
      nsplit++;
      if (j != di && x->d[j].at < d->end && d->at < x->d[j].end)
        return fail(x, "a name declared twice in the kernel's body");
    }
    /* declared again where the body is cut, in scopes apart: each its own
     * name (every declaration of it must be such: one nested in a region
     * could not be told from it) */
    if (ndecl > 1 && nsplit != ndecl) return fail(x, "a name declared twice in the kernel's body");
    if (ndecl > 1) d->alias = di + 1;
    for (uint32_t p = 0; p < x->tu->nparams; p++)
      if (tok_is(nm, x->tu->params[p].name)) return fail(x, "a local named as a parameter");
    uint32_t mi;
    if (is_macro(x, nm, &mi)) return fail(x, "a local named as a macro");
    if (nm->n > 4 && memcmp(nm->p, "kc__", 4) == 0) return fail(x, "a local named kc__...");
    bool outside = false, written_after = false, decays = false;
    for (uint32_t i = b0; i < b1; i++) {
      if (!mentions_at(x, i, nm)) continue;
      bool direct = tok_eq(&x->t[i], nm);
      if (direct && i > 0 && (is(x, i - 1, ".") || is(x, i - 1, "->")))
        return fail(x, "a local named as a member");
      if (direct && d->alias && decl_at(x, i) != (int)di) {
        if (decl_at(x, i) < 0) return fail(x, "a local's name used outside its scope");
        continue; /* another declaration's */
      }
      if (!direct && d->alias) return fail(x, "a macro that names a local declared more than once");
      if (i < d->at || i >= d->end) return fail(x, "a local's name used outside its scope");
      if (i < d->r0 || i >= d->r1) outside = true;
      if (!direct) outside = true; /* through a macro: wherever it is */
      if (direct && i != d->name && written(x->t, x->nt, i, !d->array)) written_after = true;
      if (!direct) written_after = true, d->via_macro = true; /* a macro may write it */
      if (direct && i > 0 && is(x, i - 1, "&")) d->addr = true;
      /* an array used other than by its elements: a pointer to it may outlive the region */
      if (direct && i != d->name && d->array && !is(x, i + 1, "[")) decays = true;
    }
    if (d->is_static) continue;
    if ((d->array && decays) || d->addr || written_after) outside = true;
    if (!outside) continue; /* kept in its region */
    /* computed again: never written, of ids, arguments and constants */
    bool pure = d->e0 && !d->array;
    for (uint32_t i = d->e0; pure && i < d->e1; i++) {
      const tok *k = &x->t[i];
      if (k->k == T_PUNCT && reads_memory(x, d->e0, i)) pure = false; /* (memory may change) */
      else if (k->k == T_NUM || (k->k == T_PUNCT && !assign_op(k))) continue;
      else if (k->k == T_STR) pure = false;
      else if (in_list_tok(k, ids, sizeof ids / sizeof *ids) || IN(k, kw_type) || tok_is(k, "const") ||
               known_type(k))
        continue;
      else {
        bool ok = false;
        for (uint32_t p = 0; p < x->tu->nparams; p++) ok |= tok_is(k, x->tu->params[p].name);
        int j = decl_at(x, i);
        ok |= j >= 0 && (uint32_t)j < di && x->d[j].remat;
        pure = ok || const_macro(x, k);
      }
    }
    for (uint32_t i = d->s0; pure && i < d->s1; i++)
      if (tok_is(&x->t[i], "volatile")) pure = false;
    if (written_after) pure = false;
    if (pure) d->remat = true;
    else d->keep = true;
    /* its initializer becomes an assignment: none for an array, no braces */
    if (d->keep && d->e0 && (d->array || is(x, d->e0, "{")))
      return fail(x, "an initialized array or braced initializer of a variable that lives across a barrier");
    /* a member of struct kc__S (file scope): its array sizes constants */
    for (uint32_t i = d->d0; d->keep && i < d->d1; i++)
      if (x->t[i].k == T_ID && !const_macro(x, &x->t[i]) && i != d->name && !tok_is(&x->t[i], "const") &&
          !tok_is(&x->t[i], "volatile") && !tok_is(&x->t[i], "restrict") && !tok_is(&x->t[i], "__restrict"))
        return fail(x, "an array that lives across a barrier sized by a variable");
  }
  for (uint32_t di = 0; di < x->nd; di++) {
    const decl *d = &x->d[di];
    if (!d->alias) continue;
    if (!x->alias && !(x->alias = kc__bs_calloc(x->sv, x->nt * sizeof *x->alias)))
      return fail(x, "out of memory");
    for (uint32_t i = d->at; i < d->end && i < x->nt; i++)
      if (tok_eq(&x->t[i], &x->t[d->name])) x->alias[i] = d->alias;
  }
  plan_uniform(x, b0, b1);
  /* parameters are each item's own: none may be written */
  for (uint32_t p = 0; p < x->tu->nparams; p++) {
    const kc__param *pa = &x->tu->params[p];
    if (strchr(pa->type, '[') || strchr(pa->type, '('))
      return fail(x, "a parameter of array or function type");
    for (uint32_t i = b0; i < b1; i++)
      if (x->t[i].k == T_ID && tok_is(&x->t[i], pa->name) &&
          !(i > 0 && (is(x, i - 1, ".") || is(x, i - 1, "->"))) && written(x->t, x->nt, i, !pa->is_buffer))
        return fail(x, "a parameter written in the kernel's body");
    for (uint32_t m = 0; m < x->nm; m++)
      for (uint32_t i = 0; i < x->m[m].nt; i++)
        if (tok_is(&x->m[m].t[i], pa->name) && written(x->m[m].t, x->m[m].nt, i, !pa->is_buffer))
          return fail(x, "a parameter written by a macro");
  }
  return true;
}

/* ------------------------------------------------------------- output */

/* Token i, its name's alias where it has one. */
static void put_tok(sp *x, uint32_t i) {
  kc__sb_append(x->out, x->t[i].p, x->t[i].n);
  if (x->alias && x->alias[i]) kc__sb_printf(x->out, "__kc%u", x->alias[i]);
}

/* Declaration d's name as the output spells it, into buf. */
static const char *name_of(const sp *x, const decl *d, char *buf, size_t size) {
  if (d->alias) snprintf(buf, size, "%.*s__kc%u", (int)x->t[d->name].n, x->t[d->name].p, d->alias);
  else snprintf(buf, size, "%.*s", (int)x->t[d->name].n, x->t[d->name].p);
  return buf;
}

static void put_toks(sp *x, uint32_t a, uint32_t b) {
  for (uint32_t i = a; i < b; i++) {
    put_tok(x, i);
    kc__sb_puts(x->out, is(x, i, ";") || is(x, i, "{") || is(x, i, "}") ? "\n" : " ");
  }
}

static const decl *decl_of_stmt(const sp *x, int si, uint32_t *from) {
  for (uint32_t j = *from; j < x->nd; j++)
    if (x->d[j].stmt == si) return *from = j + 1, &x->d[j];
  return NULL;
}

/* The opening of a loop over the group's items, with the item's ids and
 * its replicated and recomputed variables. */
static void items_open(sp *x) {
  kc__sb_puts(x->out, "KC__ITEMS {\n  KC__ITEM\n");
  for (uint32_t j = 0; j < x->nd; j++) {
    const decl *d = &x->d[j];
    if (!d->remat) continue;
    put_toks(x, d->s0, d->s1);
    put_toks(x, d->d0, d->d1);
    kc__sb_puts(x->out, "= ");
    put_toks(x, d->e0, d->e1);
    char nb[300];
    kc__sb_printf(x->out, ";\n(void)%s;\n", name_of(x, d, nb, sizeof nb));
  }
}

/* A declaration statement of a split level inside its region. */
static void put_decl(sp *x, int si) {
  const stmt *s = &x->s[si];
  uint32_t from = 0;
  const decl *d = decl_of_stmt(x, si, &from);
  if (!d) {
    put_toks(x, s->a, s->b);
    return;
  }
  from = 0; /* declarator by declarator, each as it lives */
  while ((d = decl_of_stmt(x, si, &from))) {
    if (d->is_static || d->remat || d->uniform) continue; /* at the top, in every loop, or once */
    if (d->keep) {
      if (d->e0) {
        put_tok(x, d->name);
        kc__sb_puts(x->out, " = ");
        put_toks(x, d->e0, d->e1);
        kc__sb_puts(x->out, ";\n");
      }
      continue;
    }
    put_toks(x, d->s0, d->s1);
    put_toks(x, d->d0, d->d1);
    if (d->e0) {
      kc__sb_puts(x->out, "= ");
      put_toks(x, d->e0, d->e1);
    }
    kc__sb_puts(x->out, ";\n");
  }
}

/* A region's statement, with 'return' (only in the last regions) going
 * to the next item. */
static void put_stmt_region(sp *x, int si, unsigned region) {
  const stmt *s = &x->s[si];
  if (s->kind == S_DECL) {
    put_decl(x, si);
    return;
  }
  for (uint32_t i = s->a; i < s->b; i++) {
    if (is(x, i, "return")) {
      kc__sb_printf(x->out, "goto kc__next%u ", region);
      continue;
    }
    put_tok(x, i);
    kc__sb_puts(x->out, is(x, i, ";") || is(x, i, "{") || is(x, i, "}") ? "\n" : " ");
  }
}

static bool emit_split(sp *x, int si, bool top);
static void uniform_inits(sp *x, int si);

static bool emit_list(sp *x, int first, bool top) {
  int c = first;
  while (c >= 0) {
    if (splits(x, c)) {
      if (!emit_split(x, c, top)) return false;
      c = x->s[c].next;
      continue;
    }
    int last = c; /* the region: [c, last] */
    while (x->s[last].next >= 0 && !splits(x, x->s[last].next)) last = x->s[last].next;
    unsigned r = x->nregion++;
    for (int e = c;; e = x->s[e].next) {
      if (x->s[e].kind == S_DECL) uniform_inits(x, e);
      if (e == last) break;
    }
    items_open(x);
    kc__sb_puts(x->out, "{\n");
    bool ret = false;
    for (int e = c;; e = x->s[e].next) {
      /* a return ends the item: only where no barrier comes after it */
      if (x->s[e].ret && !(top && e > (int)x->top_last_bar)) return fail(x, "a return before a barrier");
      ret |= x->s[e].ret;
      put_stmt_region(x, e, r);
      if (e == last) break;
    }
    if (ret) kc__sb_printf(x->out, "}\nkc__next%u:;\n}\n", r);
    else kc__sb_puts(x->out, "}\n}\n");
    c = x->s[last].next;
  }
  return true;
}

/* The condition [a, b) of a statement around barriers: every item's, the
 * same for all, into kc__cN. */
static unsigned cond_eval(sp *x, uint32_t a, uint32_t b) {
  unsigned n = x->ncond++;
  if (uniform_expr(x, a, b, false)) { /* the same for all: once */
    kc__sb_printf(x->out, "int kc__c%u = !!(", n);
    put_toks(x, a, b);
    kc__sb_puts(x->out, ");\n");
    return n;
  }
  kc__sb_printf(x->out, "int kc__c%u = 0, kc__d%u = 0;\n", n, n);
  items_open(x);
  kc__sb_printf(x->out, "int kc__v = !!(");
  put_toks(x, a, b);
  kc__sb_printf(x->out,
                ");\nif (kc__i == 0) kc__c%u = kc__v; else if (kc__v != kc__c%u) kc__d%u = (int)kc__i;\n}\n"
                "if (kc__d%u) return kc__split_bad(kc__hs, (unsigned)kc__d%u, kc__c%u);\n",
                n, n, n, n, n, n);
  return n;
}

/* The uniform variables that declaration statement si gives values to,
 * once, before the loop over items of its region. */
static void uniform_inits(sp *x, int si) {
  uint32_t from = 0;
  const decl *d;
  while ((d = decl_of_stmt(x, si, &from)))
    if (d->uniform && d->e0) {
      put_tok(x, d->name);
      kc__sb_puts(x->out, " = ");
      put_toks(x, d->e0, d->e1);
      kc__sb_puts(x->out, ";\n");
    }
}

/* A region of one statement (a for's init or increment): once for the
 * group where it is uniform. */
static void region_of(sp *x, uint32_t a, uint32_t b, bool declares, int si) {
  if (a >= b) return;
  if (declares) {
    uniform_inits(x, si);
    uint32_t from = 0;
    const decl *d;
    bool per_item = false;
    while ((d = decl_of_stmt(x, si, &from))) per_item |= !d->uniform && !d->is_static && !d->remat;
    if (!per_item) return;
    items_open(x);
    put_decl(x, si);
  } else if (uniform_expr(x, a, b, true)) {
    put_toks(x, a, b);
    kc__sb_puts(x->out, ";\n");
    return;
  } else {
    items_open(x);
    put_toks(x, a, b);
    kc__sb_puts(x->out, ";\n");
  }
  kc__sb_puts(x->out, "}\n");
}

static bool emit_body(sp *x, int si, bool top) {
  if (x->s[si].kind == S_BLOCK) {
    kc__sb_puts(x->out, "{\n");
    bool ok = x->s[si].first < 0 || emit_list(x, x->s[si].first, top);
    kc__sb_puts(x->out, "}\n");
    return ok;
  }
  int saved = x->s[si].next;
  x->s[si].next = -1;
  kc__sb_puts(x->out, "{\n");
  bool ok = emit_list(x, si, top);
  kc__sb_puts(x->out, "}\n");
  x->s[si].next = saved;
  return ok;
}

static bool emit_split(sp *x, int si, bool top) {
  (void)top;
  stmt *s = &x->s[si];
  switch (s->kind) {
  case S_BARRIER: x->nbar++; return true;
  case S_BLOCK: return emit_body(x, si, false);
  case S_IF: {
    kc__sb_puts(x->out, "{\n");
    unsigned c = cond_eval(x, s->c0, s->c1);
    kc__sb_printf(x->out, "if (kc__c%u) ", c);
    if (!emit_body(x, s->body, false)) return false;
    if (s->els >= 0) {
      kc__sb_puts(x->out, "else ");
      if (!emit_body(x, s->els, false)) return false;
    }
    kc__sb_puts(x->out, "}\n");
    return true;
  }
  case S_WHILE:
  case S_DO:
  case S_FOR: {
    kc__sb_puts(x->out, "{\n");
    if (s->kind == S_FOR) {
      bool d;
      if (!is_decl(x, s->i0, s->i1, &d)) return false;
      region_of(x, s->i0, s->i1, d, si);
    }
    kc__sb_puts(x->out, "for (;;) {\n");
    if (s->kind != S_DO && s->c1 > s->c0) {
      unsigned c = cond_eval(x, s->c0, s->c1);
      kc__sb_printf(x->out, "if (!kc__c%u) break;\n", c);
    }
    if (!emit_body(x, s->body, false)) return false;
    if (s->kind == S_FOR) region_of(x, s->n0, s->n1, false, -1);
    if (s->kind == S_DO) {
      unsigned c = cond_eval(x, s->c0, s->c1);
      kc__sb_printf(x->out, "if (!kc__c%u) break;\n", c);
    }
    kc__sb_puts(x->out, "}\n}\n");
    return true;
  }
  default: return fail(x, "kc_barrier() where it cannot split");
  }
}

/* ------------------------------------------------------------- driver */

/* Declaration d as an object that is assigned (a member of struct kc__S,
 * or a uniform variable at the function's top): without its initializer,
 * its own const dropped, its name prefixed. */
static void put_object(sp *x, const decl *d, const char *prefix, const char *dim) {
  bool ptr = false;
  uint32_t last_star = d->d0;
  for (uint32_t i = d->d0; i < d->d1; i++)
    if (is(x, i, "*")) ptr = true, last_star = i;
  for (uint32_t i = d->s0; i < d->s1; i++) {
    if (!ptr && (is(x, i, "const") || is(x, i, "volatile"))) continue;
    kc__sb_puts(x->out, " ");
    put_tok(x, i);
  }
  for (uint32_t i = d->d0; i < d->d1; i++) {
    if (ptr && i > last_star && (is(x, i, "const") || is(x, i, "volatile"))) continue;
    kc__sb_puts(x->out, " ");
    if (i == d->name) kc__sb_puts(x->out, prefix);
    put_tok(x, i);
    if (i == d->name) kc__sb_puts(x->out, dim);
  }
  kc__sb_puts(x->out, ";");
}

bool host_includes_from_disk(const kc__tu *tu) {
  static const char *const std[] = {"<assert.h>", "<float.h>",  "<limits.h>", "<math.h>",  "<stdbool.h>",
                                    "<stddef.h>", "<stdint.h>", "<string.h>", "<stdlib.h>"};
  size_t from = strlen(host_prelude);
  if (!tu->text || tu->len <= from) return false;
  const char *t = tu->text + from, *end = tu->text + tu->len;
  for (const char *p = t; (p = memmem(p, (size_t)(end - p), "include", 7)); p += 7) {
    const char *q = p; /* back over blanks to a '#' that starts its line */
    while (q > t && (q[-1] == ' ' || q[-1] == '\t')) q--;
    if (q == t || q[-1] != '#') continue;
    q--;
    while (q > t && (q[-1] == ' ' || q[-1] == '\t')) q--;
    if (q != t && q[-1] != '\n') continue;
    const char *a = p + 7, *eol = memchr(a, '\n', (size_t)(end - a));
    if (!eol) eol = end;
    while (a < eol && (*a == ' ' || *a == '\t')) a++;
    bool known = false;
    for (size_t k = 0; k < sizeof std / sizeof *std && !known; k++) {
      size_t n = strlen(std[k]);
      known = (size_t)(eol - a) >= n && !memcmp(a, std[k], n);
    }
    if (!known) return true;
  }
  return false;
}

/* Whether the closure past the prelude, but for the kernel's body [b, e),
 * may read an item's own ids (helpers, through the thread's item, also in
 * a header it includes from disk, which kcache does not read): then
 * each loop over items keeps the item's ids in it. */
static bool ids_outside(const kc__tu *tu, const char *b, const char *e) {
  /* (a header on disk may hold a helper that reads them) */
  if (host_includes_from_disk(tu)) return true;
  static const char *const names[] = {"kc_local_id", "kc_global_id", "kc__cur", "kc__item", "kc__lid"};
  const char *t = tu->text + strlen(host_prelude), *end = tu->text + tu->len;
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    size_t n = strlen(names[k]);
    for (const char *p = t; (p = memmem(p, (size_t)(end - p), names[k], n)); p += n)
      if ((p == t || !idc(p[-1])) && (p + n == end || !idc(p[n])) && (p < b || p >= e)) return true;
  }
  return false;
}

static void sp_free(sp *x) {
  kc__bs_free(x->sv, x->t);
  kc__bs_free(x->sv, x->s);
  kc__bs_free(x->sv, x->d);
  kc__bs_free(x->sv, x->names);
  kc__bs_free(x->sv, x->m);
  kc__bs_free(x->sv, x->mt);
  kc__bs_free(x->sv, x->alias);
}

/* Occurrences of the identifier kc_barrier in the closure past the prelude
 * (comments and strings too). */
static unsigned barrier_mentions(const kc__tu *tu) {
  size_t from = strlen(host_prelude);
  const char *t = tu->text + (tu->len > from ? from : tu->len), *end = tu->text + tu->len;
  unsigned n = 0;
  for (const char *p = t; (p = memmem(p, (size_t)(end - p), "kc_barrier", 10)); p += 10)
    n += (p == t || !idc(p[-1])) && (p + 10 == end || !idc(p[10]));
  return n;
}

/* Finds the kernel's definition in tu's text: the tokens from it on in
 * x->t, its body's tokens [b0, b1). False with x->why. */
static bool find_body(sp *x, const kc__tu *tu, uint32_t *b0p, uint32_t *b1p) {
  if (!tu->text) return fail(x, "no source");
  /* the entry's definition: after the prologue's macro and its #line */
  char key[300];
  snprintf(key, sizeof key, "#define %s(...) %s(const struct kc__wi *kc__wp", tu->entry, tu->entry);
  const char *end = tu->text + tu->len, *p = NULL;
  for (const char *q = tu->text; (q = memmem(q, (size_t)(end - q), key, strlen(key))); q++) p = q;
  if (!p) return fail(x, "the kernel's definition not found");
  while (p < end && !(p[0] == '\n' && p + 1 < end && memcmp(p + 1, "#line", 5) == 0)) p++;
  if (p >= end) return fail(x, "the kernel's definition not found");
  p = memchr(p + 1, '\n', (size_t)(end - p - 1));
  if (!p) return fail(x, "the kernel's definition not found");
  p++;
  /* up to the #line the epilogue starts with: nothing else after the entry */
  static const char tail[] = "#line 1 \"<kcache>\"\n";
  if ((size_t)(end - p) < sizeof tail - 1 || memcmp(end - (sizeof tail - 1), tail, sizeof tail - 1) != 0)
    return fail(x, "the kernel's definition not found");
  end -= sizeof tail - 1;
  uint32_t tcap = 0;
  bool ok = tokenize(x, p, end, &x->t, &x->nt, &tcap, true);
  /* the definition: NAME ( ... ) { at depth 0 */
  uint32_t b0 = 0, b1 = 0;
  for (uint32_t i = 0; ok && i < x->nt; i++) {
    if (is(x, i, "{")) {
      i = match(x, i) - 1;
      continue;
    }
    if (x->t[i].k == T_ID && tok_is(&x->t[i], tu->entry) && is(x, i + 1, "(")) {
      uint32_t c = match(x, i + 1);
      if (is(x, c, "{")) {
        b0 = c, b1 = match(x, c);
        break;
      }
    }
  }
  if (ok && !b1) fail(x, "the kernel's body not found");
  *b0p = b0, *b1p = b1;
  return ok && !x->why;
}

/* Reads the kernel's definition in tu's text: its body's tokens [b0, b1),
 * its statements, the split levels, how each local lives. The root
 * statement (the body), or -1 with x->why. */
static int read_kernel(sp *x, const kc__tu *tu, uint32_t *b0p, uint32_t *b1p) {
  uint32_t b0 = 0, b1 = 0;
  bool ok = find_body(x, tu, &b0, &b1);
  /* no preprocessor line from the body on: the macros stay as they were */
  if (ok && x->last_pp && x->last_pp > x->t[b0].p)
    ok = fail(x, "a preprocessor line in or after the kernel's body");
  if (ok) ok = read_macros(x);
  for (uint32_t i = b0; ok && i < b1; i++)
    if (x->t[i].k == T_ID && tok_is(&x->t[i], tu->entry)) ok = fail(x, "the kernel's name in its body");
  int root = -1;
  if (ok) {
    uint32_t nj;
    root = parse_stmt(x, b0, b1, true, &nj);
    ok = root >= 0 && !x->why;
  }
  /* a macro that may write what it is given (`BUMP(v)`): the writes are in
   * its replacement, where the checks of the variables do not look */
  for (uint32_t i = b0; ok && i < b1; i++) {
    uint32_t mi;
    if (x->t[i].k != T_ID || !is_macro(x, &x->t[i], &mi)) continue;
    if (macro_writes(x, mi, 4))
      ok = fail(x, "a macro that may assign or take an address in the kernel's body");
    else if (macro_jumps(x, mi, 4))
      ok = fail(x, "a macro that may return, break, continue, goto or paste (##) in the kernel's body");
  }
  if (ok && x->s[root].barriers != barrier_mentions(tu))
    ok = fail(x, "kc_barrier named outside the kernel's body statements (a helper, a macro, a comment)");
  if (ok && !x->s[root].barriers) ok = fail(x, "no barrier in the kernel's body");
  if (ok) {
    /* the last top-level statement with a barrier */
    ok = mark_block(x, x->s[root].first, x->s[root].b);
    x->top_last_bar = 0; /* (once the promoted loops are known) */
    for (int c = x->s[root].first; c >= 0; c = x->s[c].next)
      if (splits(x, c)) x->top_last_bar = (uint32_t)c;
  }
  if (ok) ok = plan_decls(x, b0, b1);
  *b0p = b0, *b1p = b1;
  return ok ? root : (fail(x, "out of memory"), -1);
}

/* The per-item storage, the function, the statics, the regions into
 * x->out. */
static bool emit_function(sp *x, const kc__tu *tu, int root, uint32_t b0, uint32_t b1) {
  kc__sb *body = x->out;
  unsigned nkeep = 0;
  kc__sb_puts(body, "struct kc__S {");
  for (uint32_t j = 0; j < x->nd; j++)
    if (x->d[j].keep) nkeep++, put_object(x, &x->d[j], "kc__m_", "");
  if (!nkeep) kc__sb_puts(body, " char kc__none;");
  kc__sb_puts(body, " };\n");
  for (uint32_t j = 0; j < x->nd; j++)
    if (x->d[j].keep) {
      char nb[300];
      name_of(x, &x->d[j], nb, sizeof nb);
      kc__sb_printf(body, "#define %s (kc__a_%s[kc__i])\n", nb, nb);
    }
  /* the item's ids in its struct only where a helper may read them */
  kc__sb_printf(body, "#define KC__ITEM (void)kc__row; %s\n",
                ids_outside(tu, x->t[b0].p, x->t[b1 - 1].p + 1)
                    ? "kc__w->kc__lid[0] = kc__l; kc__w->kc__lid[1] = kc__y; kc__w->kc__lid[2] = kc__z;"
                    : "");
  /* the item's index computed from the row's (a counter carried across
   * rows keeps gcc from vectorizing the innermost loop). A kernel that
   * takes its ids as int (x->int_ids): int counters (the group has at most
   * HOST_SPLIT_MAX_BYTES items), so that (int)kc_local_id(0) is the
   * counter itself, whose addresses gcc sees affine (cut from a size_t,
   * they are not: gathers); its global ids int ones too where they all fit
   * in int (kc__nar, a constant in each of the group function's two
   * copies). Any other: size_t counters, which gcc splits a loop over at
   * `if (l < s)` (a tree reduction; as an int's widening it does not, and
   * runs every item masked at each step). */
  if (x->int_ids)
    kc__sb_puts(body,
                "#define KC__ITEMS for (int kc__z = 0; kc__z < kc__n2; kc__z++) "
                "for (int kc__y = 0; kc__y < kc__n1; kc__y++) "
                "for (int kc__row = (kc__z * kc__n1 + kc__y) * kc__n0, kc__l = 0; "
                "kc__l < kc__n0; kc__l++)\n"
                "#define kc__i (kc__row + kc__l)\n"
                "#undef kc_global_id\n"
                "#define kc_global_id(d) (kc__nar ? (size_t)KC__PICK((d), kc__G0 + kc__l, kc__G1 + kc__y, "
                "kc__G2 + kc__z) : kc_group_id(d) * kc_local_size(d) + kc_local_id(d))\n");
  else
    kc__sb_puts(body, "#define KC__ITEMS for (unsigned kc__z = 0; kc__z < (unsigned)kc__n2; kc__z++) "
                      "for (unsigned kc__y = 0; kc__y < (unsigned)kc__n1; kc__y++) "
                      "for (size_t kc__row = ((size_t)kc__z * (unsigned)kc__n1 + kc__y) * (unsigned)kc__n0, "
                      "kc__l = 0; kc__l < (unsigned)kc__n0; kc__l++)\n"
                      "#define kc__i (kc__row + kc__l)\n"
                      "#undef kc_global_id\n"
                      "#define kc_global_id(d) (kc_group_id(d) * kc_local_size(d) + kc_local_id(d))\n");
  /* in the loops, an item's ids are the loops' variables */
  kc__sb_puts(body, "#undef kc_local_id\n"
                    "#define kc_local_id(d) ((size_t)KC__PICK((d), kc__l, kc__y, kc__z))\n");
  kc__sb_puts(
      body, "KC_KERNEL int kc__split(struct kc__wi *kc__w, const struct kc__a *kc__x, const int kc__nar) {\n"
            "  const int kc__n0 = (int)kc__w->kc__lsz[0], kc__n1 = (int)kc__w->kc__lsz[1], kc__n2 = "
            "(int)kc__w->kc__lsz[2];\n"
            "  const unsigned kc__nn = (unsigned)kc__n0 * (unsigned)kc__n1 * (unsigned)kc__n2;\n"
            "  const int kc__G0 = kc__nar ? (int)(kc__w->kc__grp[0] * kc__w->kc__lsz[0]) : 0,\n"
            "            kc__G1 = kc__nar ? (int)(kc__w->kc__grp[1] * kc__w->kc__lsz[1]) : 0,\n"
            "            kc__G2 = kc__nar ? (int)(kc__w->kc__grp[2] * kc__w->kc__lsz[2]) : 0;\n"
            "  const struct kc__wi *kc__wp = kc__w;\n"
            "  (void)kc__wp; (void)kc__nn; (void)kc__G0; (void)kc__G1; (void)kc__G2;\n");
  /* what each item keeps: an array of the group's items for each (their
   * bytes in all bounded by the caller, HOST_SPLIT_MAX_BYTES) */
  for (uint32_t j = 0; j < x->nd; j++)
    if (x->d[j].keep) {
      put_object(x, &x->d[j], "kc__a_", "[kc__nn]");
      kc__sb_puts(body, "\n");
    }
  for (uint32_t i = 0; i < tu->nparams; i++)
    kc__sb_printf(body, "  %s %s = kc__x->kc__v%u; (void)%s;\n", tu->params[i].type, tu->params[i].name, i,
                  tu->params[i].name);
  for (uint32_t j = 0; j < x->nd; j++)
    if (x->d[j].uniform) {
      put_object(x, &x->d[j], "", "");
      kc__sb_puts(body, "\n");
    }
  for (uint32_t j = 0; j < x->nd; j++) {
    const decl *d = &x->d[j];
    if (!d->is_static) continue;
    put_toks(x, d->s0, d->s1);
    put_toks(x, d->d0, d->d1);
    if (d->e0) {
      kc__sb_puts(body, "= ");
      put_toks(x, d->e0, d->e1);
    }
    kc__sb_puts(body, ";\n");
  }
  bool ok = emit_list(x, x->s[root].first, true);
  kc__sb_puts(body, "  return 0;\n}\n#undef KC__ITEMS\n#undef KC__ITEM\n#undef kc__i\n#undef kc_local_id\n"
                    "#undef kc_global_id\n" HOST_ID_MACROS);
  for (uint32_t j = 0; j < x->nd; j++)
    if (x->d[j].keep) {
      char nb[300];
      kc__sb_printf(body, "#undef %s\n", name_of(x, &x->d[j], nb, sizeof nb));
    }
  return ok;
}

int host_ids_outside(const kc__bsvc *sv, const kc__tu *tu) {
  sp x;
  memset(&x, 0, sizeof x);
  x.sv = sv, x.tu = tu;
  uint32_t b0 = 0, b1 = 0;
  /* (a body it cannot find: as if they did; out of memory: -1, so that
   * no unit other than the one a compile with memory makes is compiled,
   * and stored under another key) */
  bool found = find_body(&x, tu, &b0, &b1);
  int out = !found && x.why && !strcmp(x.why, "out of memory")
                ? -1
                : !found || ids_outside(tu, x.t[b0].p, x.t[b1 - 1].p + 1);
  sp_free(&x);
  return out;
}

/* Whether the body [b0, b1) takes a local or global id as int: a cast
 * `(int)kc_local_id(..)` or a declaration `int x = kc_global_id(..)`. */
static bool takes_int_ids(const sp *x, uint32_t b0, uint32_t b1) {
  for (uint32_t i = b0 + 3; i < b1; i++) {
    if (!is(x, i, "kc_local_id") && !is(x, i, "kc_global_id")) continue;
    if (is(x, i - 3, "(") && is(x, i - 2, "int") && is(x, i - 1, ")")) return true;
    if (is(x, i - 3, "int") && x->t[i - 2].k == T_ID && is(x, i - 1, "=")) return true;
  }
  return false;
}

bool host_split_emit(const kc__bsvc *sv, const kc__tu *tu, kc__sb *out, const char **why, unsigned *nbar,
                     bool *int_ids) {
  sp x;
  memset(&x, 0, sizeof x);
  x.sv = sv, x.tu = tu;
  *nbar = 0;
  *why = NULL;
  uint32_t b0 = 0, b1 = 0;
  int root = read_kernel(&x, tu, &b0, &b1);
  x.int_ids = *int_ids = root >= 0 && takes_int_ids(&x, b0, b1);
  kc__sb body;
  kc__sb_init(&body, &sv->heap);
  x.out = &body;
  bool ok = root >= 0 && emit_function(&x, tu, root, b0, b1);
  if (ok && body.failed) ok = fail(&x, "out of memory");
  if (ok) {
    *nbar = x.nbar;
    kc__sb_append(out, body.buf, body.len);
  } else *why = x.why ? x.why : "out of memory";
  kc__sb_free(&body);
  sp_free(&x);
  return ok;
}

int host_split_bad(void *hs, unsigned item, int first) {
  host_state *s = hs;
  return kc__bs_err(s->sv, KC_ELAUNCH,
                    "work item %u of a group and work item 0 (%s) went different ways at a condition around "
                    "kc_barrier(): every item of a group must reach each barrier",
                    item, first ? "true" : "false");
}
