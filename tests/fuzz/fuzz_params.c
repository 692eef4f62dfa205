/* SPDX-License-Identifier: MIT */
/*
 * fuzz_params.c -- the specialization parameter parser (kc__canon_params)
 * on arbitrary C strings. Its output names compiled code (two handles with
 * the same canonical string share it) and becomes `#define KEY VALUE` lines,
 * so it must be a function of the set of pairs and nothing else.
 *
 * Checked: on success the output is well formed ("" or KEY=VALUE pairs
 * joined by ',', keys identifiers in strictly increasing order, values
 * trimmed, non-empty, without ',', '=', '\\' or a line break, at most 64
 * pairs); canon(canon(x)) == canon(x); the pairs of canon(x) in other
 * orders, with blanks around ',' and '=', give canon(x) again; on failure
 * no output; nothing left allocated; and when the Nth allocation of a
 * successful call fails, KC_ENOMEM and nothing left allocated.
 */
#include "fuzz.h"

#include <ctype.h>
#include <string.h>

typedef struct pair {
  const char *k, *v;
  size_t kl, vl;
} pair;

/* Splits a canonical string (checked well formed on the way). */
static size_t split_canon(const char *c, pair *out, size_t max) {
  size_t n = 0;
  if (!*c) return 0;
  for (const char *p = c;;) {
    const char *e = strchr(p, ',');
    if (!e) e = p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(e - p));
    KCF_CHECK(eq && eq > p, "canonical \"%s\": \"%.*s\" is not KEY=VALUE", c, (int)(e - p), p);
    KCF_CHECK(n < max, "canonical \"%s\" has more than %zu pairs", c, max);
    pair pr = {p, eq + 1, (size_t)(eq - p), (size_t)(e - eq - 1)};
    KCF_CHECK(pr.k[0] == '_' || isalpha((unsigned char)pr.k[0]), "canonical \"%s\": bad key", c);
    for (size_t i = 0; i < pr.kl; i++)
      KCF_CHECK(pr.k[i] == '_' || isalnum((unsigned char)pr.k[i]), "canonical \"%s\": bad key", c);
    KCF_CHECK(pr.vl > 0 && !isspace((unsigned char)pr.v[0]) && !isspace((unsigned char)pr.v[pr.vl - 1]),
              "canonical \"%s\": value of \"%.*s\" is empty or not trimmed", c, (int)pr.kl, pr.k);
    for (size_t i = 0; i < pr.vl; i++)
      KCF_CHECK(!strchr("=\\\n\r", pr.v[i]), "canonical \"%s\": value holds 0x%02x", c,
                (unsigned char)pr.v[i]);
    if (n) {
      const pair *q = &out[n - 1];
      size_t m = q->kl < pr.kl ? q->kl : pr.kl;
      int cmp = memcmp(q->k, pr.k, m);
      KCF_CHECK(cmp < 0 || (cmp == 0 && q->kl < pr.kl),
                "canonical \"%s\": keys \"%.*s\" and \"%.*s\" out of order or repeated", c, (int)q->kl, q->k,
                (int)pr.kl, pr.k);
    }
    out[n++] = pr;
    if (!*e) break;
    p = e + 1;
  }
  return n;
}

/* canon(s) must succeed and give want; nothing leaked. */
static void expect_canon(const char *s, const char *want, const char *what) {
  kc_runtime *rt = kcf_runtime();
  long live = kcf_alloc_live();
  char *c = NULL;
  kc_status st = kc__canon_params(rt, s, &c);
  KCF_CHECK(st == KC_OK, "%s: kc__canon_params(\"%s\") returned %s: %s", what, s, kc_status_name(st),
            kc_errmsg(rt));
  KCF_CHECK(c && !strcmp(c, want), "%s: kc__canon_params(\"%s\") = \"%s\", expected \"%s\"", what, s,
            c ? c : "(null)", want);
  kc_free(rt, c);
  KCF_CHECK(kcf_alloc_live() == live, "kc__canon_params leaked %ld blocks", kcf_alloc_live() - live);
}

/* The pairs in the order of idx, with separators chosen by seed. */
static char *join(const pair *pairs, const size_t *idx, size_t n, uint64_t seed) {
  static const char *const seps[] = {",", ", ", " ,", " , ", ",\t"};
  static const char *const eqs[] = {"=", " =", "= ", " = "};
  size_t cap = 16;
  for (size_t i = 0; i < n; i++) cap += pairs[i].kl + pairs[i].vl + 8;
  char *s = malloc(cap), *w = s;
  if (!s) abort();
  if (seed & 1) *w++ = ' ';
  for (size_t i = 0; i < n; i++) {
    const pair *p = &pairs[idx[i]];
    if (i) w += sprintf(w, "%s", seps[(seed >> (2 * i % 60)) % 5]);
    memcpy(w, p->k, p->kl);
    w += p->kl;
    w += sprintf(w, "%s", eqs[(seed >> (3 * i % 60)) % 4]);
    memcpy(w, p->v, p->vl);
    w += p->vl;
  }
  if (seed & 2) *w++ = '\t';
  *w = 0;
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_runtime *rt = kcf_runtime();
  uint64_t seed = kcf_seed(data, size);
  char *s = kcf_cstr(data, size);
  char *c = (char *)1;
  kcf_alloc_reset(0);
  kc_status st = kc__canon_params(rt, s, &c);
  long allocs = kcf_alloc_count();
  if (st != KC_OK) {
    KCF_CHECK(st == KC_EINVAL, "kc__canon_params(\"%s\") returned %s", s, kc_status_name(st));
    KCF_CHECK(c == NULL, "kc__canon_params failed but left output");
    KCF_CHECK(kcf_alloc_live() == 0, "kc__canon_params failed and leaked %ld blocks", kcf_alloc_live());
    KCF_CHECK(*kc_errmsg(rt), "kc__canon_params failed without a message");
    free(s);
    return 0;
  }
  KCF_CHECK(c != NULL, "kc__canon_params succeeded without output");
  pair pairs[65] = {{0}};
  size_t n = split_canon(c, pairs, 64);

  expect_canon(c, c, "idempotence");

  size_t idx[64] = {0};
  for (size_t i = 0; i < n; i++) idx[i] = n - 1 - i; /* reversed */
  char *j = join(pairs, idx, n, seed);
  expect_canon(j, c, "reversed");
  free(j);
  uint64_t r = seed;
  for (size_t i = 0; i < n; i++) idx[i] = i;
  for (size_t i = n; i > 1; i--) { /* Fisher-Yates, from the input's hash */
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    size_t k = (size_t)((r >> 33) % i), t = idx[i - 1];
    idx[i - 1] = idx[k];
    idx[k] = t;
  }
  j = join(pairs, idx, n, seed >> 7);
  expect_canon(j, c, "shuffled");
  free(j);

  kc_free(rt, c);
  KCF_CHECK(kcf_alloc_live() == 0, "kc__canon_params leaked %ld blocks", kcf_alloc_live());

  /* The same call with one allocation failing: an error, nothing leaked. */
  if (allocs > 0) {
    long nth = (long)(seed % (uint64_t)allocs) + 1;
    kcf_alloc_reset(nth);
    c = (char *)1;
    st = kc__canon_params(rt, s, &c);
    kcf_alloc_reset(0);
    KCF_CHECK(st == KC_ENOMEM && c == NULL, "allocation %ld of %ld failed: kc__canon_params returned %s", nth,
              allocs, kc_status_name(st));
    KCF_CHECK(kcf_alloc_live() == 0, "kc__canon_params ran out of memory and leaked %ld blocks",
              kcf_alloc_live());
  }
  free(s);
  return 0;
}
