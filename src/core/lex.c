/* SPDX-License-Identifier: MIT */
/*
 * lex.c -- the identifier scanner that finds a definition's dependencies
 * (kc__scan_idents): every identifier of C-family text outside comments
 * and literals, preprocessor lines included. On a #define line it reports
 * the macro's name, then its body without the macro's parameters, with
 * token pasting resolved: `a ## b` is the name "ab", and a paste that takes
 * a parameter (`op_ ## x`) is reported as KC__ID_PREFIX "op_", a name that
 * only its prefix tells (an over-approximation, never a miss). Names split
 * by a line splice are joined. #include lines report the header's name. It
 * takes (pointer, length), never reads past it, never allocates and never
 * fails: malformed text only gives fewer or vaguer names.
 */
#include "core/core.h"
#include "core/lex.h"

#include <string.h>

#define NAME_MAX_ 256 /* longest name reported whole; longer: a prefix */
#define MACRO_PARAMS 32

typedef struct lx {
  const char *t;
  size_t len;
  kc__ident_fn fn;
  void *ud;
  bool stopped;
} lx;

/* A macro's parameters, copied (a parameter may be spliced). */
typedef struct mparams {
  char buf[512];
  size_t used;
  uint16_t off[MACRO_PARAMS], len[MACRO_PARAMS];
  uint32_t n;
  bool overflow; /* more than fit: every name of the body may be one */
} mparams;

static void emit(lx *x, uint8_t kind, const char *name, size_t n, bool call, bool directive, bool joined,
                 size_t at, size_t end) {
  if (x->stopped) return;
  kc__ident id = {name, (uint32_t)n, call, kind, directive, joined, x->t + at, x->t + end};
  if (!x->fn(x->ud, &id)) x->stopped = true;
}

/* The identifier at i in [0, e): its end in the text. A name that a line
 * splice cuts is joined into buf (*joined); *cut if it did not fit. */
static size_t read_name(const char *t, size_t e, size_t i, char *buf, const char **name, size_t *n,
                        bool *joined, bool *cut) {
  size_t s = i, w = 0, sp;
  *joined = *cut = false;
  while (i < e && kc__lx_id_char((unsigned char)t[i])) i++;
  if (!(sp = kc__lx_splice(t, e, i)) || i + sp >= e || !kc__lx_id_char((unsigned char)t[i + sp])) {
    *name = t + s; /* the common case: no splice, nothing copied */
    *n = i - s;
    return i;
  }
  for (i = s;;) {
    if (i < e && kc__lx_id_char((unsigned char)t[i])) {
      if (w < NAME_MAX_) buf[w++] = t[i];
      else *cut = true;
      i++;
    } else if ((sp = kc__lx_splice(t, e, i)) != 0 && i + sp < e && kc__lx_id_char((unsigned char)t[i + sp])) {
      *joined = true;
      i += sp;
    } else {
      break;
    }
  }
  if (*joined) {
    *name = buf;
    *n = w;
  } else {
    *name = t + s;
    *n = i - s;
    *cut = false;
  }
  return i;
}

/* Past a number (pp-number: suffixes, exponents like 1.0e+5f or 0x1p-3). */
static size_t skip_number(const char *t, size_t e, size_t i) {
  size_t s = i;
  while (i < e && (kc__lx_id_char((unsigned char)t[i]) || t[i] == '.' ||
                   ((t[i] == '+' || t[i] == '-') && i > s && strchr("eEpP", t[i - 1]) != NULL)))
    i++;
  return i;
}

static bool is_param(const mparams *mp, const char *s, size_t n) {
  if (!mp) return false;
  if (mp->overflow) return true;
  for (uint32_t k = 0; k < mp->n; k++)
    if (mp->len[k] == n && !memcmp(mp->buf + mp->off[k], s, n)) return true;
  return false;
}

/* One name of a macro body, or a chain of pastes (a ## b ## c) starting
 * at j; mp: the macro's parameters (NULL outside a #define: no pasting).
 * dir: on a preprocessor line. Returns the end of what it read. */
static size_t name_or_paste(lx *x, size_t j, size_t e, const mparams *mp, bool dir) {
  const char *t = x->t;
  char piece[NAME_MAX_], cat[NAME_MAX_];
  size_t catlen = 0, prefix = 0, npieces = 0, at = j, end = j;
  bool wild = false, joined_any = false, last_param = false;
  const char *name = NULL;
  size_t n = 0;
  if (!mp) { /* outside a #define (most names): no paste, no parameter */
    bool joined, cut;
    end = read_name(t, e, j, piece, &name, &n, &joined, &cut);
    size_t nx = kc__lx_next(t, e, end, dir);
    emit(x, cut ? KC__ID_PREFIX : KC__ID_NAME, name, n, nx < e && t[nx] == '(', dir, joined, at, end);
    return end;
  }
  for (;;) {
    bool joined = false, cut = false;
    if (kc__lx_id_start((unsigned char)t[j])) {
      end = read_name(t, e, j, piece, &name, &n, &joined, &cut);
      last_param = is_param(mp, name, n);
    } else { /* a number pasted to a name */
      end = skip_number(t, e, j);
      name = t + j;
      n = end - j;
      last_param = false;
    }
    joined_any |= joined;
    npieces++;
    if (!wild && (last_param || cut || catlen + n > sizeof cat)) {
      wild = true;
      prefix = catlen;
      if (cut && !last_param && catlen + n <= sizeof cat) { /* what fits is a prefix */
        memcpy(cat + catlen, name, n);
        prefix = catlen + n;
      }
    } else if (!wild) {
      memcpy(cat + catlen, name, n);
      catlen += n;
    }
    size_t k = kc__lx_next(t, e, end, dir);
    if (mp && k + 1 < e && t[k] == '#' && t[k + 1] == '#') {
      size_t k2 = kc__lx_next(t, e, k + 2, true);
      if (k2 < e && (kc__lx_id_start((unsigned char)t[k2]) || isdigit((unsigned char)t[k2]))) {
        j = k2;
        continue;
      }
      end = k + 2;
    }
    break;
  }
  size_t nx = kc__lx_next(t, e, end, dir);
  bool call = nx < e && t[nx] == '(';
  /* a pasted number with '.', '+' or '-' (a ## 1.5e-3) makes no name: what
   * comes before it is a prefix */
  size_t known = wild ? prefix : catlen, idlen = 0;
  while (idlen < known && kc__lx_id_char((unsigned char)cat[idlen])) idlen++;
  if (npieces > 1 && idlen < known) {
    wild = true;
    prefix = idlen;
  }
  if (npieces == 1) {
    if (wild && !last_param) /* a spliced name too long to report whole */
      emit(x, KC__ID_PREFIX, cat, prefix, call, dir, true, at, end);
    else if (!last_param && kc__lx_id_start((unsigned char)name[0]))
      emit(x, KC__ID_NAME, name, n, call, dir, joined_any, at, end);
  } else if (wild) {
    if (prefix == 0 || kc__lx_id_start((unsigned char)cat[0])) /* (1 ## x is a number) */
      emit(x, KC__ID_PREFIX, cat, prefix, call, true, true, at, end);
  } else if (catlen && kc__lx_id_start((unsigned char)cat[0])) {
    emit(x, KC__ID_NAME, cat, catlen, call, true, true, at, end);
  }
  return end;
}

/* The identifiers of a preprocessor line's tokens in [j, e). */
static void line_names(lx *x, size_t j, size_t e, const mparams *mp) {
  const char *t = x->t;
  while (!x->stopped && (j = kc__lx_next(t, e, j, true)) < e) {
    unsigned char c = (unsigned char)t[j];
    if (c == '"' || c == '\'') {
      j = (size_t)(kc__lx_literal_end(t + j, t + e) - t);
      if (j < e && t[j] == (char)c) j++;
    } else if (isdigit(c) || (c == '.' && j + 1 < e && isdigit((unsigned char)t[j + 1]))) {
      j = skip_number(t, e, j);
    } else if (kc__lx_id_start(c)) {
      j = name_or_paste(x, j, e, mp, true);
    } else {
      j++;
    }
  }
}

/* #define NAME(params) body, j at NAME. */
static void on_define(lx *x, size_t j, size_t e) {
  const char *t = x->t;
  if (j >= e || !kc__lx_id_start((unsigned char)t[j])) return;
  char buf[NAME_MAX_];
  const char *name;
  size_t n, sp;
  bool joined, cut;
  size_t k = read_name(t, e, j, buf, &name, &n, &joined, &cut);
  size_t nx = kc__lx_next(t, e, k, true);
  emit(x, cut ? KC__ID_PREFIX : KC__ID_NAME, name, n, nx < e && t[nx] == '(', true, joined, j, k);
  while ((sp = kc__lx_splice(t, e, k)) != 0) k += sp;
  mparams mp;
  mp.used = 0;
  mp.n = 0;
  mp.overflow = false;
  if (k < e && t[k] == '(') { /* function-like: no blank before '(' */
    for (k++; (k = kc__lx_next(t, e, k, true)) < e && t[k] != ')';) {
      if (t[k] == '.' && k + 2 < e && t[k + 1] == '.' && t[k + 2] == '.') {
        name = "__VA_ARGS__";
        n = 11;
        k += 3;
      } else if (kc__lx_id_start((unsigned char)t[k])) {
        k = read_name(t, e, k, buf, &name, &n, &joined, &cut);
        if (cut) mp.overflow = true;
      } else {
        k++; /* ',' (or junk) */
        continue;
      }
      if (mp.n == MACRO_PARAMS || mp.used + n > sizeof mp.buf) {
        mp.overflow = true;
        continue;
      }
      memcpy(mp.buf + mp.used, name, n);
      mp.off[mp.n] = (uint16_t)mp.used;
      mp.len[mp.n++] = (uint16_t)n;
      mp.used += n;
    }
    if (k < e) k++;
  }
  line_names(x, k, e, &mp);
}

/* #include "name" or <name>; hash: where the line's '#' is. */
static void on_include(lx *x, size_t hash, size_t j, size_t e) {
  const char *t = x->t;
  if (j < e && (t[j] == '"' || t[j] == '<')) {
    const char *close = memchr(t + j + 1, t[j] == '"' ? '"' : '>', e - j - 1);
    if (close) {
      uint8_t kind = t[j] == '"' ? KC__ID_INCLUDE : KC__ID_SYSINCLUDE;
      emit(x, kind, t + j + 1, (size_t)(close - t - j - 1), false, true, false, hash, e);
      return;
    }
  }
  /* a computed include (#include MACRO), or a broken one: an include no
   * one can name, then its names */
  emit(x, KC__ID_INCLUDE, t + j, 0, false, true, false, hash, hash);
  line_names(x, j, e, NULL);
}

static bool word_is(const char *s, size_t n, const char *w) { return strlen(w) == n && !memcmp(s, w, n); }

/* The preprocessor line whose '#' is at i; returns its end. */
static size_t directive(lx *x, size_t i) {
  const char *t = x->t;
  size_t e = kc__lx_line_end(t, x->len, i);
  size_t j = kc__lx_next(t, e, i + 1, true);
  if (j >= e || !kc__lx_id_start((unsigned char)t[j])) return e; /* "#" alone, "# 1" */
  char buf[NAME_MAX_];
  const char *w;
  size_t n;
  bool joined, cut;
  size_t k = read_name(t, e, j, buf, &w, &n, &joined, &cut);
  size_t a = kc__lx_next(t, e, k, true);
  if (word_is(w, n, "define")) on_define(x, a, e);
  else if (word_is(w, n, "include") || word_is(w, n, "include_next") || word_is(w, n, "import"))
    on_include(x, i, a, e);
  else if (!word_is(w, n, "error") && !word_is(w, n, "warning")) line_names(x, a, e, NULL);
  return e;
}

/* Longer than 80 lines on purpose: one pass over the text, a branch per
 * kind of token (the state is only "at the start of a line"). */
void kc__scan_idents(const char *text, size_t len, kc__ident_fn fn, void *ud) {
  lx x = {text, len, fn, ud, false};
  size_t i = 0;
  bool line_start = true; /* only whitespace so far on this line */
  while (i < len && !x.stopped) {
    unsigned char c = (unsigned char)text[i];
    size_t sp;
    if (c == '\n') {
      line_start = true;
      i++;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      i++;
      continue;
    }
    if ((sp = kc__lx_splice(text, len, i)) != 0) {
      i += sp;
      continue;
    }
    if (c == '/' && i + 1 < len && (text[i + 1] == '/' || text[i + 1] == '*')) {
      i = kc__lx_next(text, len, i, true);
      continue;
    }
    if (c == '#' && line_start) {
      i = directive(&x, i);
      continue;
    }
    line_start = false;
    if (c == '"' || c == '\'') {
      /* past the closing quote; a literal left open at the end of its line
       * stops before the newline, which starts the next line */
      i = (size_t)(kc__lx_literal_end(text + i, text + len) - text);
      if (i < len && text[i] == (char)c) i++;
      continue;
    }
    if (isdigit(c) || (c == '.' && i + 1 < len && isdigit((unsigned char)text[i + 1]))) {
      i = skip_number(text, len, i);
      continue;
    }
    if (kc__lx_id_start(c)) {
      i = name_or_paste(&x, i, len, NULL, false);
      continue;
    }
    i++;
  }
}

/* ----------------------------------------------------------- enumerators */

typedef struct en {
  kc__ident_fn fn;
  void *ud;
  int state; /* 0 outside, 1 after `enum`, 4 after its tag, 2 in its body at an item's start, 3 in an item */
  int depth; /* braces and parentheses inside the body */
  bool stopped;
} en;

static bool en_ident(void *ud, const kc__ident *id) {
  en *e = ud;
  if (id->kind != KC__ID_NAME || id->directive) return true;
  if (id->len == 4 && !memcmp(id->start, "enum", 4)) e->state = 1;
  else if (e->state == 1) e->state = 4; /* the tag */
  else if (e->state == 4) e->state = 0; /* enum Color c: no body */
  else if (e->state == 2 && e->depth == 0) {
    e->state = 3;
    if (!e->fn(e->ud, id)) return false;
  }
  return true;
}

void kc__scan_enumerators(const char *text, size_t len, kc__ident_fn fn, void *ud) {
  /* the scanner gives the names; the braces and commas between them are
   * read here, between one name and the next */
  en e = {fn, ud, 0, 0, false};
  const char *t = text;
  size_t i = 0;
  while (i < len && !e.stopped) {
    size_t next = kc__lx_next(t, len, i, false);
    if (next > i) {
      i = next;
      continue;
    }
    unsigned char c = (unsigned char)t[i];
    if (c == '"' || c == '\'') {
      i = (size_t)(kc__lx_literal_end(t + i, t + len) - t);
      if (i < len && t[i] == (char)c) i++;
    } else if (c == '#' && (i == 0 || t[i - 1] == '\n')) {
      i = kc__lx_line_end(t, len, i);
    } else if (kc__lx_id_start(c) || isdigit(c)) {
      size_t s = i;
      while (i < len && kc__lx_id_char((unsigned char)t[i])) i++;
      if (kc__lx_id_start(c)) {
        kc__ident id = {t + s, (uint32_t)(i - s), false, KC__ID_NAME, false, false, t + s, t + i};
        if (!en_ident(&e, &id)) e.stopped = true;
      }
    } else {
      if (c == '{' && (e.state == 1 || e.state == 4)) e.state = 2, e.depth = 0;
      else if (e.state == 1 || e.state == 4) e.state = 0;
      else if (e.state >= 2 && (c == '(' || c == '{' || c == '[')) e.depth++;
      else if (e.state >= 2 && (c == ')' || c == ']' || (c == '}' && e.depth > 0))) e.depth--;
      else if (e.state >= 2 && c == '}') e.state = 0;
      else if (e.state == 3 && c == ',' && e.depth == 0) e.state = 2;
      i++;
    }
  }
}
