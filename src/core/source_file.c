/* SPDX-License-Identifier: MIT */
/*
 * source_file.c -- whole source files in the table (kc_define_file): the
 * splitter that cuts a file into its top-level definitions (functions,
 * types, constants, macros), each named by what it defines; the record of
 * the names each file defined, so that a reload undefines the ones that
 * disappeared; and the public call, which defines all of it in one world
 * through kc__define_batch, changing only what differs. What any
 * definition's text may be (kc__check_source), and the enumerators it
 * declares (kc__declare_*), are the table's (table.c).
 *
 * In CUDA C++ (kc_define_file_lang) the splitter also reads extern "C"
 * and namespace blocks through (each definition filed with its linkage and
 * its namespaces around it), joins a name defined again (overloads, one
 * name in two namespaces) and an out-of-line member (Acc::get) to the
 * first definition of that name (of its class), and refuses what it cannot
 * file so that every use is found (operators, top-level using, ...).
 *
 * The splitter, like the scanner, takes (pointer, length), never reads past
 * it and fails only with a status and a message that names the line.
 */
#include "core/core.h"
#include "core/lex.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- split */

typedef struct piece {
  size_t start, end; /* its text */
  size_t pro; /* the bytes of the prologue that go before it */
  const char *name;
  size_t nlen;
  size_t line;
  bool externc; /* in a CUDA extern "C" { ... } block: filed inside one of its own */
  bool macro;
  size_t open, openlen; /* CUDA: the namespaces it is in, "namespace N { ", in sp->opens */
  unsigned nclose; /* the braces that close them */
  size_t head; /* CUDA: the first piece of its name (itself if none before it) */
} piece;

/* CUDA C++: a block the file's definitions stand in (extern "C" { } or
 * namespace N { }), and what was open before it. */
typedef struct wrap {
  bool externc;
  size_t open, openlen;
  size_t at; /* where it opens (for the message of a file that ends inside) */
} wrap;

enum { WRAP_MAX = 16 };

typedef struct splitter {
  kc_runtime *rt;
  const char *file, *t;
  size_t len;
  kc__sb pro; /* the file's #include and #pragma lines so far */
  piece *v;
  size_t n, cap;
  kc_status st;
  uint8_t lang; /* the file's kc_language */
  bool externc; /* inside a top-level extern "C" { ... } block (CUDA C++) */
  kc__sb opens; /* every namespace opener so far, one after the other */
  size_t open, openlen; /* the current one in opens ("" outside namespaces) */
  wrap wraps[WRAP_MAX]; /* the blocks open now, outermost first */
  unsigned nwraps, nns; /* how many; how many of them are namespaces */
} splitter;

static size_t line_at(const char *t, size_t at) {
  size_t n = 1;
  for (size_t i = 0; i < at; i++) n += t[i] == '\n';
  return n;
}

static kc_status fail(splitter *sp, size_t at, const char *what) {
  if (!sp->st)
    sp->st = kc__err(sp->rt, KC_EINVAL, "kc_define_file: %s:%zu: %s", sp->file, line_at(sp->t, at), what);
  return sp->st;
}

static bool word(const char *s, size_t n, const char *w) { return strlen(w) == n && !memcmp(s, w, n); }

/* A name a definition may have: not a keyword, not reserved. */
static bool nameable(const char *s, size_t n) {
  return !kc__is_keyword(s, n) && !(n >= 2 && s[0] == '_' && s[1] == '_') &&
         !(n >= 3 && (!memcmp(s, "KC_", 3) || !memcmp(s, "kc_", 3)));
}

/* The end of the word at i if it is w (0 if not). */
static size_t word_at(const splitter *sp, size_t i, const char *w) {
  size_t n = strlen(w);
  if (i + n > sp->len || memcmp(sp->t + i, w, n) ||
      (i + n < sp->len && kc__lx_id_char((unsigned char)sp->t[i + n])))
    return 0;
  return i + n;
}

/* The end of a name path at i (N, A::B, ::A; no blanks inside), i if none. */
static size_t path_end(const splitter *sp, size_t i) {
  const char *t = sp->t;
  size_t j = i;
  for (;;) {
    if (j + 1 < sp->len && t[j] == ':' && t[j + 1] == ':') j += 2;
    if (j >= sp->len || !kc__lx_id_start((unsigned char)t[j])) return j > i && t[j - 1] != ':' ? j : i;
    while (j < sp->len && kc__lx_id_char((unsigned char)t[j])) j++;
    if (!(j + 1 < sp->len && t[j] == ':' && t[j + 1] == ':')) return j;
  }
}

/* A new opener in sp->opens: the current one, then `more`; its offset. */
static size_t opener_with(splitter *sp, const char *more) {
  size_t open = sp->opens.len;
  char *cur = kc__strndup(sp->rt, sp->opens.buf ? sp->opens.buf + sp->open : "", sp->openlen);
  if (!cur) {
    sp->st = kc__err(sp->rt, KC_ENOMEM, "kc_define_file: out of memory");
    return open;
  }
  kc__sb_puts(&sp->opens, cur); /* a copy: opens may move as it grows */
  kc__sb_puts(&sp->opens, more);
  kc__free(sp->rt, cur);
  return open;
}

/* A piece named name. In CUDA C++ a name defined again (overloads, or the
 * same name in two namespaces) joins the first piece of that name: one
 * definition of all of them, in the file's order, so that whatever uses
 * the name depends on every one (an over-approximation). A macro's name
 * stays one definition in every language. */
static void add(splitter *sp, size_t start, size_t end, const char *name, size_t nlen, bool macro) {
  bool ok;
  KC__GROW(&sp->rt->heap, sp->v, sp->cap, sp->n + 1, 16, &ok);
  if (!ok) {
    sp->st = kc__err(sp->rt, KC_ENOMEM, "kc_define_file: out of memory");
    return;
  }
  size_t head = sp->n;
  for (size_t i = 0; i < sp->n && head == sp->n; i++)
    if (sp->v[i].head == i && sp->v[i].nlen == nlen && !memcmp(sp->v[i].name, name, nlen)) {
      if (sp->lang == KC_LANG_CUDA && !macro && !sp->v[i].macro) {
        head = i;
        break;
      }
      char msg[200];
      snprintf(msg, sizeof msg, "'%.*s' is defined twice (first at line %zu): one definition per name%s",
               (int)(nlen < 80 ? nlen : 80), name, sp->v[i].line,
               sp->lang == KC_LANG_CUDA ? " (a macro's name cannot be defined again)" : "");
      fail(sp, start, msg);
      return;
    }
  sp->v[sp->n] = (piece){start,       end,   sp->pro.len, name,        nlen,    line_at(sp->t, start),
                         sp->externc, macro, sp->open,    sp->openlen, sp->nns, head};
  if (macro) sp->v[sp->n].externc = false, sp->v[sp->n].openlen = 0, sp->v[sp->n].nclose = 0;
  sp->n++;
}

/* A preprocessor line at the top level, '#' at i; returns its end. */
static size_t top_directive(splitter *sp, size_t i) {
  const char *t = sp->t;
  size_t e = kc__lx_line_end(t, sp->len, i), j = kc__lx_next(t, e, i + 1, true), k = j;
  while (k < e && kc__lx_id_char((unsigned char)t[k])) k++;
  if (j == e) return e; /* "#" alone */
  for (size_t q = i + 1; q + 1 < e; q++) { /* the preprocessor joins a name split by a splice */
    size_t cut = t[q] == '\\' ? kc__lx_splice(t, e, q) : 0;
    if (cut && q + cut < e && kc__lx_id_char((unsigned char)t[q - 1]) &&
        kc__lx_id_char((unsigned char)t[q + cut])) {
      fail(sp, i, "a line splice inside a name on a preprocessor line (join the name's lines)");
      return e;
    }
  }
  if (word(t + j, k - j, "define")) {
    size_t a = kc__lx_next(t, e, k, true), b = a;
    while (b < e && kc__lx_id_char((unsigned char)t[b])) b++;
    if (b == a || !kc__lx_id_start((unsigned char)t[a])) fail(sp, i, "#define without a name");
    else add(sp, i, e, t + a, b - a, true); /* a macro has no linkage and no namespace */
  } else if (sp->nns && word(t + j, k - j, "include")) {
    fail(sp, i, "an #include inside a namespace block is not supported (include it at the top level)");
  } else if (word(t + j, k - j, "include") || word(t + j, k - j, "pragma")) {
    kc__sb_append(&sp->pro, t + i, e - i); /* every definition after it sees it */
    kc__sb_puts(&sp->pro, "\n");
  } else {
    fail(sp, i,
         "only #define, #include and #pragma may stand between definitions (a conditional or other "
         "directive would make what the file defines depend on the preprocessor; put it inside a "
         "definition)");
  }
  return e;
}

/* What the tokens of one top-level declaration tell about its name. */
typedef struct decl {
  size_t start;
  bool any, is_typedef, saw_eq, fn_body;
  bool qualified; /* CUDA C++: the last word at depth 0 is const, noexcept, ... (after a member's list) */
  bool op; /* CUDA C++: `operator` at depth 0 */
  bool using_; /* CUDA C++: it starts with `using` */
  bool colons; /* CUDA C++: the last token at depth 0 is `::` */
  int angle; /* CUDA C++: template brackets open at depth 0 */
  const char *lastid, *scope, *fn_scope; /* the last name; the one before `::`; before the function's */
  size_t lastidl, scopel, fn_scopel;
  int paren, bracket;
  char last; /* the last significant character at depth 0 */
  const char *fn, *last0, *first1, *tag; /* names: in call position, last, first in parens, after struct */
  size_t fnl, last0l, first1l, tagl;
  bool after_tagkw;
} decl;

static void decl_ident(decl *d, const char *t, size_t s, size_t e, bool call, uint8_t lang) {
  size_t n = e - s;
  if (!d->any && word(t + s, n, "typedef")) d->is_typedef = true;
  if (lang == KC_LANG_CUDA && d->paren == 0) {
    d->qualified = word(t + s, n, "const") || word(t + s, n, "noexcept") || word(t + s, n, "override") ||
                   word(t + s, n, "final") || word(t + s, n, "volatile");
    if (!d->saw_eq && word(t + s, n, "operator")) d->op = true;
    if (!d->any && word(t + s, n, "using")) d->using_ = true;
  }
  bool kw = word(t + s, n, "struct") || word(t + s, n, "union") || word(t + s, n, "enum");
  if (d->after_tagkw && !d->tag && nameable(t + s, n)) d->tag = t + s, d->tagl = n;
  d->after_tagkw = kw;
  if (d->saw_eq || d->bracket) return;
  /* a function's name may be a reserved one, for kc_define_file to refuse */
  bool fn_ok = !kc__is_keyword(t + s, n) && !(n >= 2 && t[s] == '_' && t[s + 1] == '_');
  if (d->paren == 0 && call && !d->fn_body && fn_ok) {
    d->fn = t + s, d->fnl = n;
    d->fn_scope = d->colons ? d->scope : NULL, d->fn_scopel = d->colons ? d->scopel : 0;
  }
  if (d->paren == 0 && d->angle == 0) d->lastid = t + s, d->lastidl = n;
  d->colons = false;
  if (!nameable(t + s, n)) return;
  if (d->paren == 0) d->last0 = t + s, d->last0l = n;
  else if (d->paren == 1 && !d->first1) d->first1 = t + s, d->first1l = n;
}

/* CUDA C++: a namespace alias (namespace M = N;) at the top level is filed
 * as M, with `namespace N {} ` before it, so that it compiles wherever the
 * closure puts it (before the definitions in N, or with N from a header). */
static void namespace_alias(splitter *sp, piece *p) {
  size_t j = word_at(sp, p->start, "namespace");
  if (!j) return;
  j = kc__lx_next(sp->t, p->end, j, false);
  j = kc__lx_next(sp->t, p->end, path_end(sp, j), false);
  if (j >= p->end || sp->t[j] != '=') return;
  size_t a = kc__lx_next(sp->t, p->end, j + 1, false), b = path_end(sp, a);
  if (sp->nns || b == a || b - a > 250 || sp->t[a] == ':') return; /* ::N, or in a namespace: as written */
  char more[280];
  snprintf(more, sizeof more, "namespace %.*s {} ", (int)(b - a), sp->t + a);
  size_t open = opener_with(sp, more);
  p->open = open;
  p->openlen = sp->opens.len - open;
}

/* The end of a declaration: its name, then the piece (prototypes skipped). */
static void decl_end(splitter *sp, decl *d, size_t end) {
  if (!d->any) return;
  const char *name = NULL;
  size_t n = 0;
  if (d->op) {
    fail(sp, d->start,
         "an operator (operator+, ...) cannot be a definition of its own: kcache finds what a kernel uses "
         "by the names it mentions, and `a + b` mentions none; define it inside the struct it works on, or "
         "in a header (kc_define of \"ops.h\") that the kernel includes");
    return;
  }
  if (d->using_ && !d->saw_eq) {
    fail(sp, d->start,
         "a using-directive or using-declaration (using namespace N; using N::f;) at the top level is not "
         "supported: name N::f where it is used, or write the using inside the function that needs it");
    return;
  }
  if (d->fn_body && d->fn_scope) { /* C++: Acc::get() {...}: a member, with its class (earlier in the file) */
    name = d->fn_scope, n = d->fn_scopel;
    bool known = false;
    for (size_t i = 0; i < sp->n && !known; i++)
      known = sp->v[i].nlen == n && !memcmp(sp->v[i].name, name, n);
    if (!known) {
      char msg[300];
      snprintf(msg, sizeof msg,
               "'%.*s::%.*s' is defined outside '%.*s', which this file does not define before it: a member "
               "function defined out of line joins its class's definition, which must come first in the "
               "file (a namespace's function is defined inside namespace %.*s { ... })",
               (int)(n < 60 ? n : 60), name, (int)(d->fnl < 60 ? d->fnl : 60), d->fn, (int)(n < 60 ? n : 60),
               name, (int)(n < 60 ? n : 60), name);
      fail(sp, d->start, msg);
      return;
    }
  } else if (d->fn_body) name = d->fn, n = d->fnl;
  else if (d->is_typedef) name = d->last0 ? d->last0 : d->first1, n = d->last0 ? d->last0l : d->first1l;
  else if (d->fn && !d->saw_eq && d->last0 == d->fn) return; /* a prototype: the table orders definitions */
  else if (d->tag && (!d->last0 || d->last0 == d->tag)) name = d->tag, n = d->tagl;
  else name = d->last0, n = d->last0l;
  if (!name) fail(sp, d->start, "cannot tell the name of this definition");
  else add(sp, d->start, end, name, n, false);
  if (!sp->st && sp->lang == KC_LANG_CUDA) namespace_alias(sp, &sp->v[sp->n - 1]);
}

/* Enters `[inline] namespace name {` (name: "" for an unnamed one). */
static void push_namespace(splitter *sp, const char *name, bool inline_, size_t at) {
  if (sp->nwraps == WRAP_MAX) {
    fail(sp, at, "namespaces and extern \"C\" blocks nested deeper than 16");
    return;
  }
  sp->wraps[sp->nwraps++] = (wrap){false, sp->open, sp->openlen, at};
  char more[320];
  snprintf(more, sizeof more, "%snamespace %s%s{ ", inline_ ? "inline " : "", name, *name ? " " : "");
  size_t open = opener_with(sp, more);
  sp->open = open;
  sp->openlen = sp->opens.len - open;
  sp->nns++;
}

/* CUDA C++: the end of `extern "C" {` or `[inline] namespace [N] {` at i
 * (just past its brace), having entered it; 0 if the text at i is not
 * that. */
static size_t wrap_open(splitter *sp, size_t i) {
  const char *t = sp->t;
  if (sp->lang != KC_LANG_CUDA) return 0;
  size_t j = word_at(sp, i, "extern");
  if (j) {
    j = kc__lx_next(t, sp->len, j, false);
    if (j + 3 > sp->len || memcmp(t + j, "\"C\"", 3)) return 0;
    j = kc__lx_next(t, sp->len, j + 3, false);
    if (j >= sp->len || t[j] != '{') return 0;
    for (unsigned k = 0; k < sp->nwraps; k++)
      if (sp->wraps[k].externc) {
        fail(sp, i, "an extern \"C\" block inside another is not supported");
        return 0;
      }
    if (sp->nwraps == WRAP_MAX) {
      fail(sp, i, "namespaces and extern \"C\" blocks nested deeper than 16");
      return 0;
    }
    sp->wraps[sp->nwraps++] = (wrap){true, sp->open, sp->openlen, i};
    sp->externc = true; /* read through: its definitions are the file's */
    return j + 1;
  }
  bool inline_ = false;
  if ((j = word_at(sp, i, "inline")) != 0) {
    inline_ = true;
    i = kc__lx_next(t, sp->len, j, false);
  }
  if ((j = word_at(sp, i, "namespace")) == 0) return 0;
  size_t a = kc__lx_next(t, sp->len, j, false), b = path_end(sp, a);
  size_t k = kc__lx_next(t, sp->len, b, false);
  if (k < sp->len && t[k] != '{' && t[k] != '=') { /* namespace A B {: not C++ */
    fail(sp, k,
         "a namespace's name is followed by neither '{' nor '=' (namespace N { ... }, namespace M = N;)");
    return 0;
  }
  if (k >= sp->len || t[k] != '{') return 0; /* an alias (namespace M = N;): a declaration */
  if (a < sp->len && t[a] == ':') {
    fail(sp, a, "a namespace's name cannot start with '::'");
    return 0;
  }
  if (b - a > 250) {
    fail(sp, a, "a namespace's name longer than 250 bytes");
    return 0;
  }
  char name[260];
  snprintf(name, sizeof name, "%.*s", (int)(b - a), t + a);
  push_namespace(sp, name, inline_, i);
  return k + 1;
}

/* CUDA C++: the '}' that closes the innermost block, at the top level. */
static void wrap_close(splitter *sp) {
  wrap *w = &sp->wraps[--sp->nwraps];
  if (w->externc) sp->externc = false;
  else sp->nns--;
  sp->open = w->open;
  sp->openlen = w->openlen;
}

/* Longer than 80 lines on purpose: one pass over the file, a branch per
 * token that matters at the top level. */
static void split(splitter *sp) {
  const char *t = sp->t;
  size_t len = sp->len, i = 0;
  int depth = 0; /* braces */
  bool line_start = true;
  decl d = {0};
  while (i < len && !sp->st) {
    unsigned char c = (unsigned char)t[i];
    size_t s;
    if (c == '\n') {
      line_start = true;
      i++;
    } else if (isspace(c) || (s = kc__lx_splice(t, len, i)) != 0) {
      i += isspace(c) ? 1 : s;
    } else if (c == '/' && i + 1 < len && (t[i + 1] == '/' || t[i + 1] == '*')) {
      i = kc__lx_next(t, len, i, true);
    } else if (c == '#' && line_start) {
      if (depth > 0) i = kc__lx_line_end(t, len, i); /* inside a body: the definition's own */
      else if (d.any) fail(sp, i, "a preprocessor line inside a top-level declaration is not supported");
      else i = top_directive(sp, i);
    } else if (!d.any && depth == 0 && (s = wrap_open(sp, i)) != 0) {
      line_start = false; /* read through: its definitions are the file's */
      i = s;
    } else if (!d.any && depth == 0 && sp->nwraps && c == '}') {
      wrap_close(sp);
      line_start = false;
      i++;
    } else {
      line_start = false;
      if (!d.any && depth == 0) d = (decl){.start = i};
      if (c == '"' || c == '\'') {
        i = (size_t)(kc__lx_literal_end(t + i, t + len) - t);
        if (i < len && t[i] == (char)c) i++;
      } else if (kc__lx_id_start(c) || isdigit(c)) {
        size_t e = i;
        while (e < len && (kc__lx_id_char((unsigned char)t[e]) || (isdigit(c) && t[e] == '.'))) e++;
        size_t cut = depth == 0 && e < len ? kc__lx_splice(t, len, e) : 0;
        if (cut && e + cut < len && kc__lx_id_char((unsigned char)t[e + cut])) {
          fail(sp, i, "a line splice inside a name at the top level (join the name's lines)");
          break;
        }
        size_t nx = kc__lx_next(t, len, e, false);
        if (depth == 0 && kc__lx_id_start(c)) decl_ident(&d, t, i, e, nx < len && t[nx] == '(', sp->lang);
        i = e;
      } else {
        if (depth == 0 && c == ':' && i + 1 < len && t[i + 1] == ':' && sp->lang == KC_LANG_CUDA) {
          if (d.paren == 0) d.scope = d.lastid, d.scopel = d.lastidl; /* Acc::get, Acc<T>::get */
          d.colons = d.paren == 0;
          d.last = ':';
          d.any = true;
          i += 2;
          continue;
        }
        if (depth == 0 && d.paren == 0 && !d.saw_eq && sp->lang == KC_LANG_CUDA) {
          if (c == '<') d.angle++;
          else if (c == '>' && d.angle > 0) d.angle--;
        }
        if (depth == 0) d.colons = false;
        if (depth == 0) {
          if (c == '(') d.paren++;
          else if (c == ')' && d.paren > 0) d.paren--;
          else if (c == '[') d.bracket++;
          else if (c == ']' && d.bracket > 0) d.bracket--;
          else if (c == '=' && d.paren == 0) d.saw_eq = true;
        }
        if (c == '{') {
          /* a function's body: after its parameter list, or (C++) after a qualifier of a member's */
          if (depth == 0 && (d.last == ')' || (d.qualified && d.fn)) && d.paren == 0 && !d.saw_eq)
            d.fn_body = true;
          depth++;
        } else if (c == '}') {
          if (depth == 0) fail(sp, i, "'}' without its '{'");
          else if (--depth == 0 && d.fn_body) {
            decl_end(sp, &d, i + 1);
            d.any = false;
            i++;
            continue;
          }
        } else if (c == ';' && depth == 0 && d.paren == 0) {
          decl_end(sp, &d, i + 1);
          d.any = false;
          i++;
          continue;
        }
        i++;
      }
      if (depth == 0 && d.any) d.last = (char)c;
      d.any = true;
    }
  }
  if (!sp->st && (depth > 0 || d.any)) fail(sp, d.start, "the file ends inside this definition");
  if (!sp->st && sp->nwraps)
    fail(sp, sp->wraps[sp->nwraps - 1].at,
         sp->wraps[sp->nwraps - 1].externc ? "the file ends inside this extern \"C\" block"
                                           : "the file ends inside this namespace");
}

/* --------------------------------------------------------- file records */

struct kc__srcfile {
  kc__srcfile *next;
  char *file;
  char **names;
  size_t n;
};

static void rec_free(kc_runtime *rt, kc__srcfile *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) kc__free(rt, r->names[i]);
  kc__free(rt, r->names);
  kc__free(rt, r->file);
  kc__free(rt, r);
}

static kc__srcfile **rec_find(kc_runtime *rt, const char *file) {
  kc__srcfile **p = &rt->files;
  while (*p && strcmp((*p)->file, file)) p = &(*p)->next;
  return p;
}

bool kc__file_of(kc_runtime *rt, const char *name, char *buf, size_t size) {
  bool found = false;
  kc__lock(&rt->world_lock);
  for (const kc__srcfile *r = rt->files; r && !found; r = r->next)
    for (size_t i = 0; i < r->n && !found; i++)
      if (!strcmp(r->names[i], name)) {
        snprintf(buf, size, "%s", r->file);
        found = true;
      }
  kc__unlock(&rt->world_lock);
  return found;
}

kc_status kc__file_prepare(kc_runtime *rt, const char *file, const kc__change *items, size_t n,
                           const char ***gone, size_t *ngone, kc__srcfile **rec) {
  *gone = NULL;
  *ngone = 0;
  kc__srcfile *r = kc__calloc(rt, sizeof *r), *old = *rec_find(rt, file);
  if (r) r->file = kc__strdup(rt, file);
  if (r && r->file) r->names = kc__calloc(rt, (n ? n : 1) * sizeof *r->names);
  bool ok = r && r->names;
  for (size_t i = 0; ok && i < n; i++) ok = (r->names[r->n++] = kc__strdup(rt, items[i].name)) != NULL;
  if (ok && old && old->n) {
    *gone = kc__alloc(rt, old->n * sizeof **gone);
    ok = *gone != NULL;
    for (size_t i = 0; ok && i < old->n; i++) {
      bool kept = false;
      for (size_t j = 0; j < n && !kept; j++) kept = !strcmp(old->names[i], items[j].name);
      if (!kept) (*gone)[(*ngone)++] = old->names[i];
    }
  }
  if (!ok) {
    kc__free(rt, *gone);
    *gone = NULL;
    *ngone = 0;
    rec_free(rt, r);
    return kc__err(rt, KC_ENOMEM, "kc_define_file: out of memory");
  }
  *rec = r;
  return KC_OK;
}

void kc__file_commit(kc_runtime *rt, kc__srcfile *rec) {
  kc__srcfile **p = rec_find(rt, rec->file), *old = *p;
  rec->next = old ? old->next : NULL;
  *p = rec;
  rec_free(rt, old);
}

void kc__file_abort(kc_runtime *rt, kc__srcfile *rec) { rec_free(rt, rec); }

void kc__files_free(kc_runtime *rt) {
  for (kc__srcfile *r = rt->files, *next; r; r = next) {
    next = r->next;
    rec_free(rt, r);
  }
  rt->files = NULL;
}

/* -------------------------------------------------------------- batches */

/* The new definition of (b, item) for world w+1, or NULL (out of memory). */
static kc__def *new_def(kc_runtime *rt, kc__binding *b, const kc__change *it, kc_world w) {
  kc__def *d = kc__calloc(rt, sizeof *d);
  char *text = d ? kc__strndup(rt, it->source, it->len) : NULL;
  if (!text) {
    kc__free(rt, d);
    return NULL;
  }
  d->source = text;
  d->len = it->len;
  d->hash = kc__hash(it->source, it->len);
  d->lang = it->lang;
  d->binding = b;
  d->min_world = w + 1;
  atomic_init(&d->max_world, KC_WORLD_FOREVER);
  return d;
}

/* Under world_lock: the bindings and new definitions of items (NULL where
 * nothing changes); false when out of memory (nothing changed). */
static bool batch_prepare(kc_runtime *rt, kc__change *items, size_t n, kc__binding **bs, kc__def **ds,
                          kc_world w) {
  for (size_t i = 0; i < n; i++) {
    kc__change *it = &items[i];
    kc__binding *b = bs[i] = kc__binding_get(rt, it->name, strlen(it->name));
    if (!b) return false;
    kc__def *cur = kc__visible_def(b, w);
    it->changed = it->source ? !cur || cur->len != it->len || cur->lang != it->lang ||
                                   memcmp(cur->source, it->source, it->len)
                             : cur != NULL;
    ds[i] = NULL;
    if (it->changed && it->source && !(ds[i] = new_def(rt, b, it, w))) return false;
    if (ds[i] && !kc__declare_prepare(rt, bs[i], it->source, it->len)) return false;
  }
  return true;
}

/* After world_lock: kc_define_file_ex's report of each changed name
 * (kinds[i] 0: unchanged), and the vanished names' copies freed (all[n..total)
 * own their names when fn is set). */
static void report(kc_runtime *rt, const kc__change *all, size_t n, size_t total, const unsigned char *kinds,
                   kc_change_fn fn, void *user) {
  for (size_t i = 0; fn && kinds && i < total; i++)
    if (kinds[i]) fn(user, all[i].name, (kc_change_kind)kinds[i]);
  for (size_t i = n; fn && all && i < total; i++) kc__free(rt, (char *)all[i].name);
}

/* Longer than 80 lines because its steps share one lock and one cleanup:
 * validate, prepare every definition, then change the table at once. */
kc_status kc__define_batch(kc_runtime *rt, const char *file, kc__change *items, size_t n, kc_change_fn fn,
                           void *user, size_t *changed, kc_world *new_world) {
  for (size_t i = 0; i < n; i++) {
    kc_status st = kc__check_name(rt, "kc_define_file", items[i].name);
    if (!st && items[i].source) st = kc__check_source(rt, items[i].name, items[i].source, items[i].len);
    if (st) return st;
  }
  kc__lock(&rt->world_lock);
  kc_world w = kc__load_relaxed(&rt->world);
  const char **gone = NULL;
  size_t ngone = 0, total = n, nchanged = 0;
  kc__srcfile *rec = NULL;
  kc__change *all = items;
  kc__binding **bs = NULL;
  kc__def **ds = NULL;
  unsigned char *kinds = NULL; /* kc_change_kind of each item, 0: unchanged (fn only) */
  kc_status st = file ? kc__file_prepare(rt, file, items, n, &gone, &ngone, &rec) : KC_OK;
  if (!st && ngone) { /* the vanished names, undefined after the items */
    total = n + ngone;
    all = kc__alloc(rt, total * sizeof *all);
    if (all) { /* with fn, copies: the old record goes at kc__file_commit, before the report */
      memcpy(all, items, n * sizeof *all);
      for (size_t i = 0; i < ngone; i++) {
        const char *name = fn ? kc__strdup(rt, gone[i]) : gone[i];
        all[n + i] = (kc__change){name, NULL, 0, false};
        if (!name) st = kc__err(rt, KC_ENOMEM, "kc_define_file: out of memory");
      }
    }
  }
  size_t longest = 0; /* the watchers' buffer (kc__table_clip) */
  for (size_t i = 0; !st && all && i < total; i++)
    if (strlen(all[i].name) > longest) longest = strlen(all[i].name);
  char *wbuf = NULL;
  if (!st) {
    bs = kc__alloc(rt, (total ? total : 1) * sizeof *bs);
    ds = kc__calloc(rt, (total ? total : 1) * sizeof *ds);
    wbuf = kc__alloc(rt, longest + 2);
    if (fn) kinds = kc__calloc(rt, total ? total : 1);
  }
  if (!st && (!all || !bs || !ds || !wbuf || (fn && !kinds) || !batch_prepare(rt, all, total, bs, ds, w)))
    st = kc__err(rt, KC_ENOMEM, "kc_define_file: out of memory");
  if (st) {
    for (size_t i = 0; ds && i < total; i++)
      if (ds[i]) kc__free(rt, ds[i]->source), kc__free(rt, ds[i]);
    if (rec) kc__file_abort(rt, rec);
  } else {
    for (size_t i = 0; i < total; i++) {
      if (!all[i].changed) continue;
      nchanged++;
      kc__def *cur = kc__visible_def(bs[i], w);
      if (kinds) kinds[i] = !ds[i] ? KC_CHANGE_UNDEFINED : cur ? KC_CHANGE_REDEFINED : KC_CHANGE_DEFINED;
      kc__table_clip(rt, bs[i], w, wbuf);
      kc__def_replace(rt, bs[i], cur, ds[i], w);
      if (ds[i]) {
        kc__declare_commit(rt, bs[i], ds[i]->source, ds[i]->len, w);
        kc__fetch_add_relaxed(&rt->n_defs, 1);
      }
    }
    for (size_t i = 0; i < n; i++) items[i].changed = all[i].changed;
    if (rec) kc__file_commit(rt, rec); /* gone[] points into the old record: last */
    if (nchanged) {
      kc__fetch_add_relaxed(&rt->n_defines, 1);
      kc__store_release(&rt->world, w + 1); /* publish only after every clip */
      if (!rt->npins) kc__store_release(&rt->fast_world, w + 1);
    }
  }
  kc__unlock(&rt->world_lock);
  if (all != items) {
    report(rt, all, n, total, st ? NULL : kinds, fn, user);
    kc__free(rt, all);
  } else report(rt, all, n, n, st ? NULL : kinds, fn, user);
  kc__free(rt, kinds);
  kc__free(rt, gone);
  kc__free(rt, bs);
  kc__free(rt, ds);
  kc__free(rt, wbuf);
  if (!st && changed) *changed = nchanged;
  if (!st && new_world) *new_world = nchanged ? w + 1 : w;
  return st;
}

/* ------------------------------------------------------------- the call */

kc_status kc__split_file(kc_runtime *rt, const char *file, const char *text, size_t len, kc__change **out,
                         size_t *n) {
  return kc__split_file_lang(rt, file, text, len, KC_LANG_DIALECT, out, n);
}

kc_status kc__split_file_lang(kc_runtime *rt, const char *file, const char *text, size_t len, uint8_t lang,
                              kc__change **out, size_t *n) {
  *out = NULL;
  *n = 0;
  splitter sp = {.rt = rt, .file = file, .t = text, .len = len, .lang = lang};
  kc__sb_init(&sp.pro, kc__rt_heap(rt));
  kc__sb_init(&sp.opens, kc__rt_heap(rt));
  if (memchr(text, 0, len)) fail(&sp, (size_t)((const char *)memchr(text, 0, len) - text), "a NUL byte");
  else split(&sp);
  if (!sp.st && (sp.pro.failed || sp.opens.failed))
    sp.st = kc__err(rt, KC_ENOMEM, "kc_define_file: out of memory");
  kc__change *v = sp.st ? NULL : kc__calloc(rt, (sp.n ? sp.n : 1) * sizeof *v);
  if (!sp.st && !v) sp.st = kc__err(rt, KC_ENOMEM, "kc_define_file: out of memory");
  for (size_t i = 0; !sp.st && i < sp.n; i++) {
    const piece *p = &sp.v[i];
    if (p->head != i) continue; /* joined the first piece of its name */
    size_t pro = p->pro; /* the prologue: up to the last piece of the name */
    for (size_t j = i + 1; j < sp.n; j++)
      if (sp.v[j].head == i) pro = sp.v[j].pro;
    kc__sb sb;
    kc__sb_init(&sb, kc__rt_heap(rt));
    kc__sb_append(&sb, sp.pro.buf ? sp.pro.buf : "", pro);
    for (size_t j = i; j < sp.n; j++) {
      const piece *q = &sp.v[j];
      if (q->head != i) continue;
      if (j != i) kc__sb_puts(&sb, "\n");
      kc__sb_append(&sb, sp.opens.buf ? sp.opens.buf + q->open : "", q->openlen);
      /* a block, not a prefix: `extern "C" T x;` would make a variable a
       * declaration only and refuse `static`; in a block both are as written */
      if (q->externc) kc__sb_puts(&sb, "extern \"C\" { ");
      kc__sb_append(&sb, text + q->start, q->end - q->start);
      if (q->externc) kc__sb_puts(&sb, " }");
      for (unsigned k = 0; k < q->nclose; k++) kc__sb_puts(&sb, " }");
    }
    size_t total = sb.len;
    char *src = kc__sb_take(&sb), *name = kc__strndup(rt, p->name, p->nlen);
    if (!name || !src) {
      kc__free(rt, name);
      kc__free(rt, src);
      sp.st = kc__err(rt, KC_ENOMEM, "kc_define_file: out of memory");
      break;
    }
    v[*n] = (kc__change){name, src, total, false, lang};
    ++*n;
    if (kc__check_source(rt, name, src, total) != KC_OK) { /* what the splitter and the scanner disagree on */
      sp.st = kc__err(rt, KC_EINVAL,
                      "kc_define_file: %s:%zu: this definition, filed as '%s', does not define that name as "
                      "the preprocessor reads it (a name split by a line splice, or a directive that does "
                      "not start its line?)",
                      file, p->line, name);
      break;
    }
  }
  kc__sb_free(&sp.pro);
  kc__sb_free(&sp.opens);
  kc__free(rt, sp.v);
  if (sp.st) {
    kc__free_changes(rt, v, *n);
    *n = 0;
    return sp.st;
  }
  *out = v;
  return KC_OK;
}

void kc__free_changes(kc_runtime *rt, kc__change *v, size_t n) {
  for (size_t i = 0; v && i < n; i++) {
    kc__free(rt, (char *)v[i].name);
    kc__free(rt, (char *)v[i].source);
  }
  kc__free(rt, v);
}

kc_status kc_define_file_ex(kc_runtime *rt, const char *file, const char *text, size_t len,
                            kc_change_fn on_change, void *user, size_t *changed, kc_world *new_world) {
  return kc_define_file_lang(rt, file, text, len, KC_LANG_DIALECT, on_change, user, changed, new_world);
}

kc_status kc_define_file_lang(kc_runtime *rt, const char *file, const char *text, size_t len,
                              kc_language lang, kc_change_fn on_change, void *user, size_t *changed,
                              kc_world *new_world) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_define_file: runtime is NULL");
  if (!file || !*file || !text)
    return kc__err(rt, KC_EINVAL, "kc_define_file: file or text is NULL or empty");
  if (!kc_language_name(lang))
    return kc__err(rt, KC_EINVAL, "kc_define_file_lang: %d is not a kc_language", (int)lang);
  kc__change *v;
  size_t n;
  kc_status st = kc__split_file_lang(rt, file, text, len, (uint8_t)lang, &v, &n);
  if (st) return st;
  st = kc__define_batch(rt, file, v, n, on_change, user, changed, new_world);
  kc__free_changes(rt, v, n);
  return st;
}

kc_status kc_define_file(kc_runtime *rt, const char *file, const char *text, size_t len, size_t *changed,
                         kc_world *new_world) {
  return kc_define_file_ex(rt, file, text, len, NULL, NULL, changed, new_world);
}
