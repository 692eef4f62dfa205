/* SPDX-License-Identifier: MIT */
/*
 * lex.h -- the small lexical steps that the parsers of user text in
 * src/core share (lex.c: the identifier scanner; scan.c: parameter lists;
 * source_file.c: splitting a file into definitions): identifier
 * characters, line splices, literals, and skipping blanks and comments.
 * Each takes (text, length) and never reads past it.
 */
#ifndef KC_CORE_LEX_H
#define KC_CORE_LEX_H

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>

static inline bool kc__lx_id_start(unsigned char c) { return c == '_' || isalpha(c); }
static inline bool kc__lx_id_char(unsigned char c) { return c == '_' || isalnum(c); }

/* The length of the line splice (backslash-newline, or backslash-CR-LF)
 * at j, or 0 if there is none. */
static inline size_t kc__lx_splice(const char *t, size_t len, size_t j) {
  if (j + 1 < len && t[j] == '\\' && t[j + 1] == '\n') return 2;
  if (j + 2 < len && t[j] == '\\' && t[j + 1] == '\r' && t[j + 2] == '\n') return 3;
  return 0;
}

/* The end of the string or character literal that opens at q (its closing
 * quote, or the newline or end that cuts it short). A backslash escapes
 * the next character, so a spliced literal goes on past its newline. */
static inline const char *kc__lx_literal_end(const char *q, const char *end) {
  const char *r = q + 1;
  while (r < end && *r != *q && *r != '\n') {
    if (*r == '\\' && r + 1 < end) r++;
    r++;
  }
  return r;
}

/* The offset of the next token at or after j: blanks (newlines included),
 * line splices and comments skipped, as between a function's name and its
 * '('. With in_line, stops at a newline (the end of a preprocessor line). */
static inline size_t kc__lx_next(const char *t, size_t len, size_t j, bool in_line) {
  for (;;) {
    size_t s;
    while (j < len && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r' || t[j] == '\f' || t[j] == '\v' ||
                       (t[j] == '\n' && !in_line)))
      j++;
    if ((s = kc__lx_splice(t, len, j)) != 0) {
      j += s;
    } else if (j + 1 < len && t[j] == '/' && t[j + 1] == '*') {
      j += 2;
      while (j + 1 < len && !(t[j] == '*' && t[j + 1] == '/')) j++;
      j = j + 2 <= len ? j + 2 : len;
    } else if (j + 1 < len && t[j] == '/' && t[j + 1] == '/') {
      while (j < len && t[j] != '\n') j++;
    } else {
      return j;
    }
  }
}

/* The end of the preprocessor line that starts at i: its first newline
 * that is neither spliced nor inside a comment or a literal. */
static inline size_t kc__lx_line_end(const char *t, size_t len, size_t i) {
  while (i < len && t[i] != '\n') {
    size_t sp = kc__lx_splice(t, len, i);
    if (sp) {
      i += sp;
    } else if (t[i] == '/' && i + 1 < len && (t[i + 1] == '*' || t[i + 1] == '/')) {
      i = kc__lx_next(t, len, i, true);
    } else if (t[i] == '"' || t[i] == '\'') {
      i = (size_t)(kc__lx_literal_end(t + i, t + len) - t);
      if (i < len && t[i] != '\n') i++;
    } else {
      i++;
    }
  }
  return i;
}

#endif /* KC_CORE_LEX_H */
