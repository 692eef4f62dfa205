/* SPDX-License-Identifier: MIT */
/*
 * fuzz_scan.c -- the identifier scanner (kc__scan_idents) on arbitrary
 * bytes, and the kernel parameter-list parser (kc__parse_params) on the
 * same bytes as a C string. The source of a definition is the user's text:
 * neither may read outside it, report something that is not there, leak,
 * or fail otherwise than with a status.
 *
 * Checked for the scanner: every name lies within [text, text+len) (a
 * joined one, spelled across a line splice or pasted with ##, is reported
 * with where it starts), an identifier outside preprocessor lines is a
 * valid identifier and a whole word (no identifier character on either
 * side), a joined, pasted or prefix name has only identifier characters,
 * names come in order without overlapping, `call` is set exactly when the
 * next thing after the word that is not a blank or a comment is '('
 * (unless a backslash lies between), a scan stopped after k names reported
 * exactly the first k of a full scan, two scans agree, names from a
 * preprocessor line are marked so (checked where no comment or continued
 * line can hide where lines start: before the first '/' or backslash), and
 * names of preprocessor lines, includes and joined names only come from a
 * text with a '#' or a backslash.
 *
 * Checked for the parameter parser, with the fixed name "k" and with the
 * first name in call position: on success at most KC_MAX_ARGS parameters,
 * each with a type and a name that is an identifier the scanner sees in the
 * source (not one inside a comment or a string), no preprocessor line in a
 * type, is_buffer exactly when the
 * type has a '*', a plausible kc__scalar_size; on failure no output; no
 * block left allocated; and when the Nth allocation of a successful parse
 * fails, KC_ENOMEM and nothing left allocated; and where comments can be
 * told apart without a C lexer, blanking them changes no parse.
 */
#include "fuzz.h"

#include <ctype.h>
#include <string.h>

static bool is_id_start(unsigned char c) { return c == '_' || isalpha(c); }
static bool is_id_char(unsigned char c) { return c == '_' || isalnum(c); }

typedef struct seen {
  size_t off, len;
  bool call;
} seen;

typedef struct scan {
  const char *text;
  size_t len;
  seen *ids;
  size_t n, cap;
  size_t stop_after; /* 0: never stop early */
  size_t first_slash_or_backslash; /* offset of the first '/' or '\\', or len */
} scan;

/* The next offset at or after j that is not a blank or inside a comment. */
static size_t skip_blanks_and_comments(const char *t, size_t len, size_t j) {
  for (;;) {
    while (j < len &&
           (t[j] == ' ' || t[j] == '\t' || t[j] == '\n' || t[j] == '\r' || t[j] == '\f' || t[j] == '\v'))
      j++;
    if (j + 1 < len && t[j] == '/' && t[j + 1] == '*') {
      const char *end = NULL;
      for (size_t q = j + 2; q + 1 < len; q++)
        if (t[q] == '*' && t[q + 1] == '/') {
          end = t + q;
          break;
        }
      if (!end) return len;
      j = (size_t)(end - t) + 2;
    } else if (j + 1 < len && t[j] == '/' && t[j + 1] == '/') {
      while (j < len && t[j] != '\n') j++;
    } else {
      return j;
    }
  }
}

static bool on_ident(void *ud, const kc__ident *id) {
  scan *s = ud;
  const char *t = s->text;
  KCF_CHECK(id->at >= t && id->end >= id->at && (size_t)(id->end - t) <= s->len,
            "a name reported at [%td, %td), outside the %zu bytes scanned", id->at - t, id->end - t, s->len);
  KCF_CHECK(id->kind <= KC__ID_SYSINCLUDE, "kind %u", id->kind);
  size_t off = (size_t)(id->at - t);
  KCF_CHECK(s->n == 0 || off >= s->ids[s->n - 1].off + s->ids[s->n - 1].len,
            "a name at %zu overlaps or precedes the previous one", off);
  if (id->kind != KC__ID_NAME || id->joined || id->directive) {
    /* names of preprocessor lines, includes, pastes and spliced names: the
     * text they come from has a '#' or a backslash */
    KCF_CHECK(memchr(t, '#', s->len) || memchr(t, '\\', s->len),
              "kind %u (joined %d, directive %d) without a '#' or '\\' in the text", id->kind, id->joined,
              id->directive);
    KCF_CHECK(id->kind == KC__ID_INCLUDE || id->kind == KC__ID_SYSINCLUDE || id->kind == KC__ID_PREFIX ||
                  id->len > 0,
              "an empty name");
    if (id->kind == KC__ID_NAME || id->kind == KC__ID_PREFIX) {
      /* a joined name is copied into the scanner's buffer (256 bytes; a
       * longer one is a prefix); any other is in the text, whole, however
       * long (on a preprocessor line too) */
      if (id->joined)
        KCF_CHECK(id->len <= 256, "a joined name of %u bytes (kind %u, directive %d)", id->len, id->kind,
                  id->directive);
      else
        KCF_CHECK(id->start >= t && (size_t)(id->start - t) + id->len <= s->len,
                  "a name that is not joined lies outside the text (%u bytes, kind %u, directive %d)",
                  id->len, id->kind, id->directive);
      for (uint32_t i = 0; i < id->len; i++)
        KCF_CHECK(is_id_char((unsigned char)id->start[i]) && (i || is_id_start((unsigned char)id->start[0])),
                  "a reported name has 0x%02x at %u", (unsigned char)id->start[i], i);
    } else {
      KCF_CHECK(id->len == 0 || (id->start > t && (size_t)(id->start - t) + id->len < s->len),
                "an include's name outside the text");
    }
    if (s->n == s->cap) {
      s->cap = s->cap ? 2 * s->cap : 64;
      s->ids = realloc(s->ids, s->cap * sizeof *s->ids);
      if (!s->ids) abort();
    }
    s->ids[s->n++] = (seen){off, 0, id->call}; /* len 0: never "seen" by the parameter check */
    return !(s->stop_after && s->n >= s->stop_after);
  }
  KCF_CHECK(
      id->start == id->at && id->len > 0 && id->len <= s->len && (size_t)(id->start - t) <= s->len - id->len,
      "identifier at offset %td, length %u, outside the %zu bytes scanned", id->start - t, id->len, s->len);
  size_t end = off + id->len;
  KCF_CHECK(is_id_start((unsigned char)t[off]), "identifier at %zu starts with 0x%02x", off,
            (unsigned char)t[off]);
  for (size_t i = off + 1; i < end; i++)
    KCF_CHECK(is_id_char((unsigned char)t[i]), "identifier at %zu has 0x%02x at %zu", off,
              (unsigned char)t[i], i);
  KCF_CHECK(off == 0 || !is_id_char((unsigned char)t[off - 1]),
            "identifier at %zu is the tail of a longer word", off);
  KCF_CHECK(end == s->len || !is_id_char((unsigned char)t[end]), "identifier at %zu is cut short at %zu", off,
            end);
  /* Before the first '/' or '\\' there are no comments and no continued
   * lines, and a literal left open ends with its line: every newline starts
   * a line, and a name on a line whose first non-blank is '#' is reported
   * as on a preprocessor line. */
  if (off < s->first_slash_or_backslash) {
    size_t line = off;
    while (line > 0 && t[line - 1] != '\n') line--;
    while (line < off && t[line] && strchr(" \t\r\f\v", t[line])) line++;
    KCF_CHECK(t[line] != '#', "identifier \"%.*s\" at %zu is on a preprocessor line but not marked so",
              (int)id->len, id->start, off);
  }
  size_t j = skip_blanks_and_comments(t, s->len, end);
  /* (a line splice is a blank to the scanner, not to this check) */
  if (!memchr(t + end, '\\', (j < s->len ? j + 1 : s->len) - end)) {
    bool call = j < s->len && t[j] == '(';
    KCF_CHECK(id->call == call, "identifier \"%.*s\" at %zu: call is %d, the next token says %d",
              (int)id->len, id->start, off, id->call, call);
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 64;
    s->ids = realloc(s->ids, s->cap * sizeof *s->ids);
    if (!s->ids) abort();
  }
  s->ids[s->n++] = (seen){off, id->len, id->call};
  return !(s->stop_after && s->n >= s->stop_after);
}

static void scan_all(scan *s, const char *text, size_t len, size_t stop_after) {
  memset(s, 0, sizeof *s);
  s->text = text;
  s->len = len;
  s->stop_after = stop_after;
  s->first_slash_or_backslash = len;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '/' || text[i] == '\\') {
      s->first_slash_or_backslash = i;
      break;
    }
  kc__scan_idents(text, len, on_ident, s);
}

static bool same_ids(const scan *a, const scan *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a->ids[i].off != b->ids[i].off || a->ids[i].len != b->ids[i].len || a->ids[i].call != b->ids[i].call)
      return false;
  return true;
}

static bool scanner_saw(const scan *s, const char *name) {
  size_t nl = strlen(name);
  for (size_t i = 0; i < s->n; i++)
    if (s->ids[i].len == nl && !memcmp(s->text + s->ids[i].off, name, nl)) return true;
  return false;
}

static void check_params(const char *src, const scan *ids, const char *name, uint64_t seed) {
  kc_runtime *rt = kcf_runtime();
  kc__param *p = (kc__param *)1;
  uint32_t n = 99;
  kcf_alloc_reset(0);
  kc_status st = kc__parse_params(rt, name, src, &p, &n);
  long allocs = kcf_alloc_count();
  if (st != KC_OK) {
    KCF_CHECK(st == KC_EINVAL || st == KC_EARGS, "kc__parse_params(\"%s\") returned %s", name,
              kc_status_name(st));
    KCF_CHECK(p == NULL && n == 0, "kc__parse_params failed but left output");
    KCF_CHECK(kcf_alloc_live() == 0, "kc__parse_params failed and leaked %ld blocks", kcf_alloc_live());
    return;
  }
  KCF_CHECK(n <= KC_MAX_ARGS && (n == 0 || p != NULL), "%u parameters", n);
  kc__spec spec;
  memset(&spec, 0, sizeof spec);
  spec.params = "N=4,T=float";
  for (uint32_t i = 0; i < n; i++) {
    KCF_CHECK(p[i].type && p[i].name, "parameter %u has no type or no name", i);
    KCF_CHECK(kc__is_identifier(p[i].name), "parameter %u's name \"%s\" is not an identifier", i, p[i].name);
    KCF_CHECK(scanner_saw(ids, p[i].name),
              "parameter %u's name \"%s\" is not an identifier of the source outside comments, "
              "strings and preprocessor lines",
              i, p[i].name);
    size_t tl = strlen(p[i].type);
    KCF_CHECK(tl > 0 && !isspace((unsigned char)p[i].type[0]) && !isspace((unsigned char)p[i].type[tl - 1]),
              "parameter %u's type \"%s\" is empty or not trimmed", i, p[i].type);
    if (!strpbrk(p[i].type, "\"'")) /* (a literal may hold a continued line) */
      for (const char *nl = strchr(p[i].type, '\n'); nl; nl = strchr(nl + 1, '\n'))
        KCF_CHECK(nl[strspn(nl, " \t\r\f\v\n")] != '#',
                  "parameter %u's type \"%s\" holds a preprocessor line", i, p[i].type);
    KCF_CHECK(p[i].is_buffer == (strchr(p[i].type, '*') != NULL), "parameter %u (\"%s\"): is_buffer %d", i,
              p[i].type, p[i].is_buffer);
    const kc__spec *specs[] = {NULL, &spec};
    for (int k = 0; k < 2; k++) {
      uint32_t sz = kc__scalar_size(p[i].type, specs[k]);
      KCF_CHECK(sz == 0 || sz == 1 || sz == 2 || sz == 4 || sz == 8 || sz == 16 || sz == 32 || sz == 64 ||
                    sz == 128,
                "kc__scalar_size(\"%s\") = %u", p[i].type, sz);
    }
  }
  kc__free_params(rt, p, n);
  KCF_CHECK(kcf_alloc_live() == 0, "kc__parse_params leaked %ld blocks", kcf_alloc_live());

  /* The same parse with one allocation failing: an error, nothing leaked. */
  if (allocs > 0) {
    long nth = (long)(seed % (uint64_t)allocs) + 1;
    kcf_alloc_reset(nth);
    p = (kc__param *)1;
    st = kc__parse_params(rt, name, src, &p, &n);
    kcf_alloc_reset(0);
    KCF_CHECK(st == KC_ENOMEM, "allocation %ld of %ld failed: kc__parse_params returned %s", nth, allocs,
              kc_status_name(st));
    KCF_CHECK(p == NULL && n == 0, "kc__parse_params failed but left output");
    KCF_CHECK(kcf_alloc_live() == 0, "kc__parse_params ran out of memory and leaked %ld blocks",
              kcf_alloc_live());
  }
}

/* Where no literal, preprocessor line or backslash can hold a comment
 * marker, a comment is a blank: the parse of the text with each comment
 * replaced by one space must be the parse of the text. */
static void check_comments_are_blanks(const char *src, const char *name) {
  if (strpbrk(src, "\"'#\\") || !strchr(src, '/')) return;
  size_t len = strlen(src);
  char *blank = malloc(len + 1), *w = blank;
  if (!blank) abort();
  for (const char *s = src, *end = src + len; s < end;) {
    if (s + 1 < end && s[0] == '/' && s[1] == '*') {
      const char *c = strstr(s + 2, "*/");
      s = c ? c + 2 : end;
      *w++ = ' ';
    } else if (s + 1 < end && s[0] == '/' && s[1] == '/') {
      while (s < end && *s != '\n') s++;
      *w++ = ' ';
    } else {
      *w++ = *s++;
    }
  }
  *w = 0;
  kc_runtime *rt = kcf_runtime();
  kc__param *p1 = NULL, *p2 = NULL;
  uint32_t n1 = 0, n2 = 0;
  kc_status s1 = kc__parse_params(rt, name, src, &p1, &n1);
  kc_status s2 = kc__parse_params(rt, name, blank, &p2, &n2);
  KCF_CHECK(s1 == s2 && n1 == n2,
            "kernel '%s': %s with %u parameters, but with its comments blanked %s with %u", name,
            kc_status_name(s1), n1, kc_status_name(s2), n2);
  for (uint32_t i = 0; i < n1; i++)
    KCF_CHECK(!strcmp(p1[i].type, p2[i].type) && !strcmp(p1[i].name, p2[i].name) &&
                  p1[i].is_buffer == p2[i].is_buffer,
              "kernel '%s': parameter %u is \"%s\" \"%s\", with comments blanked \"%s\" \"%s\"", name, i,
              p1[i].type, p1[i].name, p2[i].type, p2[i].name);
  kc__free_params(rt, p1, n1);
  kc__free_params(rt, p2, n2);
  free(blank);
}

/* Enumerators: identifiers of the text, in order. */
typedef struct enums {
  const char *text;
  size_t len;
  const char *last;
} enums;

static bool on_enum(void *ud, const kc__ident *id) {
  enums *e = ud;
  KCF_CHECK(id->start >= e->text && (size_t)(id->start - e->text) + id->len <= e->len && id->len > 0,
            "an enumerator outside the text");
  KCF_CHECK(is_id_start((unsigned char)id->start[0]), "an enumerator that is no identifier");
  KCF_CHECK(!e->last || id->start > e->last, "enumerators out of order");
  e->last = id->start;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t seed = kcf_seed(data, size);
  char *text = kcf_dup(data, size);
  scan full, again, part;
  scan_all(&full, text, size, 0);
  scan_all(&again, text, size, 0);
  KCF_CHECK(again.n == full.n && same_ids(&again, &full, full.n),
            "two scans of the same text differ (%zu and %zu identifiers)", full.n, again.n);
  if (full.n) {
    size_t k = (size_t)(seed % full.n) + 1;
    scan_all(&part, text, size, k);
    KCF_CHECK(part.n == k && same_ids(&part, &full, k),
              "a scan told to stop after %zu identifiers reported %zu", k, part.n);
    free(part.ids);
  }
  free(again.ids);
  free(full.ids);
  enums en = {text, size, NULL};
  kc__scan_enumerators(text, size, on_enum, &en);
  free(text);

  /* The parameter parser takes C strings. */
  char *src = kcf_cstr(data, size);
  scan ids;
  scan_all(&ids, src, strlen(src), 0);
  check_params(src, &ids, "k", seed);
  check_comments_are_blanks(src, "k");
  for (size_t i = 0; i < ids.n; i++) {
    if (!ids.ids[i].call) continue;
    if (ids.ids[i].len < 64) {
      char name[64];
      memcpy(name, src + ids.ids[i].off, ids.ids[i].len);
      name[ids.ids[i].len] = 0;
      if (strcmp(name, "k")) {
        check_params(src, &ids, name, seed);
        check_comments_are_blanks(src, name);
      }
    }
    break;
  }
  free(ids.ids);
  free(src);
  return 0;
}
