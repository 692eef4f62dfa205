/* SPDX-License-Identifier: MIT */
/*
 * fuzz_file.c -- the parsers of issue 14 beyond the scanner (fuzz_scan.c
 * has the scanner's macro bodies, pastes, splices and includes):
 * kc_define_file's splitter (kc__split_file) and the inlining of headers
 * in a translation unit (kc__emit_def), on arbitrary bytes.
 *
 * Checked for the splitter: it succeeds or fails with KC_EINVAL and a
 * message that names the file and a line, and leaves no output then; on
 * success every name is an identifier, given once, its text (after the
 * file's #include and #pragma lines) is a piece of the input, the pieces
 * come in order without overlapping, and each passes the check kc_define
 * makes (it mentions its name); two splits agree; nothing is left
 * allocated; when the Nth allocation fails, KC_ENOMEM and no leak. Odd
 * seeds split the input as CUDA C++ (kc__split_file_lang: extern "C"
 * blocks and namespace blocks read through, a name defined again joined
 * to its first definition): there a definition's text after the prologue
 * is one or more segments joined by newlines, each a piece of the input
 * with the namespaces it is in around it ("namespace a { namespace b { "
 * ... " } }"), a namespace declared before an alias ("namespace N {} "),
 * and, for a definition of an extern "C" block, a block of its own around
 * it ("extern "C" { " ... " }"); the pieces' order is not checked there (a
 * joined one comes back).
 *
 * Checked for the inlining: the input as the header "h.h" of a definition
 * that includes it (and itself, if the input includes "h.h": nesting is
 * bounded) gives KC_OK with the header's #line marker, or KC_EINVAL (too
 * deep); nothing is left allocated, also when an allocation fails.
 */
#include "fuzz.h"

#include "core/lex.h"

#include <string.h>

/* Whether the n bytes at b occur in text. */
static bool occurs(const char *text, size_t len, const char *b, size_t n) {
  for (size_t p = 0; n && p + n <= len; p++)
    if (text[p] == b[0] && !memcmp(text + p, b, n)) return true;
  return false;
}

/* CUDA C++: whether b from i to n is segments as described above (memo[i]:
 * 0 not known yet, 1 yes, 2 no; a segment ends only where its namespaces'
 * braces, then a newline or the end, follow, so this is polynomial). */
static bool segments_from(const char *text, size_t len, const char *b, size_t n, size_t i, uint8_t *memo) {
  if (memo[i]) return memo[i] == 1;
  memo[i] = 2;
  size_t at = i, opens = 0;
  for (;;) { /* the namespaces it is in, and a namespace declared before an alias */
    size_t k = n - at >= 7 && !memcmp(b + at, "inline ", 7) ? 7 : 0;
    if (n - at < k + 10 || memcmp(b + at + k, "namespace ", 10)) break;
    size_t j = at + k + 10;
    while (j < n && (kc__lx_id_char((unsigned char)b[j]) || b[j] == ':' || b[j] == ' ')) j++;
    if (j + 2 > n || b[j] != '{') break;
    if (b[j + 1] == ' ') opens++, at = j + 2;
    else if (j + 3 <= n && b[j + 1] == '}' && b[j + 2] == ' ') at = j + 3;
    else break;
  }
  static const char linkage[] = "extern \"C\" { ";
  for (int pass = 0; pass < 2; pass++) {
    size_t q = at;
    if (pass) { /* a definition of an extern "C" block: in a block of kcache's */
      if (n - q < sizeof linkage - 1 || memcmp(b + q, linkage, sizeof linkage - 1)) break;
      q += sizeof linkage - 1;
    }
    for (size_t e = q + 1; e <= n; e++) { /* the piece b[q, e), its braces, then the end or a newline */
      size_t r = e, c = 0;
      if (pass && (n - r < 2 || memcmp(b + r, " }", 2))) continue; /* the linkage block's */
      if (pass) r += 2;
      while (c < opens && n - r >= 2 && !memcmp(b + r, " }", 2)) r += 2, c++;
      if (c < opens || (r < n && b[r] != '\n')) continue;
      if (!occurs(text, len, b + q, e - q)) continue;
      if (r == n || segments_from(text, len, b, n, r + 1, memo)) {
        memo[i] = 1;
        return true;
      }
    }
  }
  return false;
}

static bool cuda_segments(const char *text, size_t len, const char *b, size_t n) {
  uint8_t *memo = calloc(n + 1, 1);
  if (!memo) abort();
  bool ok = n > 0 && segments_from(text, len, b, n, 0, memo);
  free(memo);
  return ok;
}

static void check_split(const char *text, size_t len, uint64_t seed) {
  kc_runtime *rt = kcf_runtime();
  kc__change *v = (kc__change *)1, *v2 = NULL;
  size_t n = 99, n2 = 0;
  uint8_t lang = seed & 1 ? KC_LANG_CUDA : KC_LANG_DIALECT;
  static const char linkage[] = "extern \"C\" ";
  kcf_alloc_reset(0);
  kc_status st = kc__split_file_lang(rt, "f.cl", text, len, lang, &v, &n);
  long allocs = kcf_alloc_count();
  if (st) {
    KCF_CHECK(st == KC_EINVAL, "kc__split_file returned %s", kc_status_name(st));
    KCF_CHECK(v == NULL && n == 0, "a failed split left output");
    KCF_CHECK(!strncmp(kc_errmsg(rt), "kc_define_file: f.cl:", 21), "message \"%s\"", kc_errmsg(rt));
    KCF_CHECK(kcf_alloc_live() == 0, "a failed split leaked %ld blocks", kcf_alloc_live());
    return;
  }
  const char *prev_end = text;
  for (size_t i = 0; i < n; i++) {
    KCF_CHECK(kc__is_identifier(v[i].name), "item %zu's name \"%s\" is not an identifier", i, v[i].name);
    for (size_t j = 0; j < i; j++) KCF_CHECK(strcmp(v[i].name, v[j].name), "\"%s\" twice", v[i].name);
    KCF_CHECK(strlen(v[i].source) == v[i].len, "item %zu: length %zu, text of %zu", i, v[i].len,
              strlen(v[i].source));
    /* its own text is the input's, after the prologue (a prefix of the
     * file's #include/#pragma lines, each ending with a newline) */
    /* Of the ways to take the prologue off, the one whose text comes
     * first after the previous item: a later match of a shorter cut (the
     * prologue's last line and the item, repeated further on) is not it. */
    const char *own = NULL, *own_end = NULL;
    for (size_t skip = 0; skip <= v[i].len && !(own && lang == KC_LANG_CUDA); skip++) {
      if (skip && v[i].source[skip - 1] != '\n') continue;
      size_t ol = v[i].len - skip;
      const char *body = v[i].source + skip;
      if (lang == KC_LANG_CUDA) { /* segments (above) */
        if (cuda_segments(text, len, body, ol)) own = body;
        continue;
      }
      for (int pass = 0; pass < 2; pass++) {
        if (pass) { /* a definition of a CUDA extern "C" block: the linkage is kcache's */
          if (lang != KC_LANG_CUDA || ol < sizeof linkage - 1 || memcmp(body, linkage, sizeof linkage - 1))
            break;
          body += sizeof linkage - 1;
          ol -= sizeof linkage - 1;
        }
        for (const char *p = prev_end; ol && p + ol <= text + len && (!own || p < own); p++)
          if (!memcmp(p, body, ol)) {
            own = p;
            own_end = p + ol;
            break;
          }
      }
    }
    if (own_end) prev_end = own_end;
    KCF_CHECK(own != NULL, "item %zu (\"%s\") is not a piece of the input after the previous one", i,
              v[i].name);
    KCF_CHECK(kc__check_source(rt, v[i].name, v[i].source, v[i].len) == KC_OK, "item \"%s\": %s", v[i].name,
              kc_errmsg(rt));
  }
  KCF_CHECK(kc__split_file_lang(rt, "f.cl", text, len, lang, &v2, &n2) == KC_OK && n2 == n,
            "a second split differs");
  for (size_t i = 0; i < n; i++)
    KCF_CHECK(!strcmp(v[i].name, v2[i].name) && v[i].len == v2[i].len &&
                  !memcmp(v[i].source, v2[i].source, v[i].len),
              "a second split differs at item %zu", i);
  kc__free_changes(rt, v, n);
  kc__free_changes(rt, v2, n2);
  KCF_CHECK(kcf_alloc_live() == 0, "kc__split_file leaked %ld blocks", kcf_alloc_live());
  if (allocs > 0) {
    long nth = (long)(seed % (uint64_t)allocs) + 1;
    kcf_alloc_reset(nth);
    st = kc__split_file_lang(rt, "f.cl", text, len, lang, &v, &n);
    kcf_alloc_reset(0);
    KCF_CHECK(st == KC_ENOMEM, "allocation %ld of %ld failed: %s", nth, allocs, kc_status_name(st));
    KCF_CHECK(kcf_alloc_live() == 0, "kc__split_file ran out of memory and leaked %ld blocks",
              kcf_alloc_live());
  }
}

static void check_inline(const char *text, size_t len, uint64_t seed) {
  kc_runtime *rt = kcf_runtime();
  static const char inc[] = "#include \"h.h\"\n";
  char *ktext = malloc(sizeof inc + len);
  if (!ktext) abort();
  memcpy(ktext, inc, sizeof inc - 1);
  memcpy(ktext + sizeof inc - 1, text, len);
  kc__binding bh = {.name = "h.h"}, bk = {.name = "k"};
  kc__def dh = {.binding = &bh, .source = (char *)text, .len = len, .hash = kc__hash(text, len)};
  kc__def dk = {.binding = &bk, .source = ktext, .len = sizeof inc - 1 + len};
  kc__def *defs[] = {&dh, &dk};
  kc__closure c = {defs, 2, NULL, 0};
  for (int round = 0; round < 2; round++) {
    kcf_alloc_reset(round ? (long)(seed % 8) + 1 : 0);
    kc__sb sb;
    kc__sb_init(&sb, kc__rt_heap(rt));
    kc_status st = kc__emit_def(rt, &sb, &c, &dk);
    kcf_alloc_reset(0);
    if (!round) {
      KCF_CHECK(st == KC_OK || st == KC_EINVAL, "kc__emit_def returned %s", kc_status_name(st));
      KCF_CHECK(st || (sb.buf && strstr(sb.buf, "#line 1 \"h.h\"")), "the header was not inlined");
    } else {
      KCF_CHECK(st == KC_OK || st == KC_EINVAL || st == KC_ENOMEM, "kc__emit_def returned %s",
                kc_status_name(st));
    }
    kc__sb_free(&sb);
    KCF_CHECK(kcf_alloc_live() == 0, "kc__emit_def leaked %ld blocks", kcf_alloc_live());
  }
  free(ktext);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t seed = kcf_seed(data, size);
  char *text = kcf_dup(data, size);
  check_split(text, size, seed);
  if (size < 4096) check_inline(text, size, seed);
  free(text);
  return 0;
}
