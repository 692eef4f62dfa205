/* SPDX-License-Identifier: MIT */
/*
 * test_store_key -- the disk cache's pure parts: the key changes with every
 * component that changes a compile's output (and with nothing else), the
 * entry format round-trips and detects every single-byte flip and every
 * truncation, and sizes parse.
 */
#include "kc_internal.h"
#include "st.h"

#include <stdlib.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static const kc__key_def base_defs[] = {
    {"h", "float h(float x) { return x; }", 30},
    {"g", "float g(float x) { return h(x); }", 33},
    {"k", "void k(float *y) { y[0] = g(1); }", 33},
};

static kc__key_parts base(kc__key_def *defs) {
  memcpy(defs, base_defs, sizeof base_defs);
  return (kc__key_parts){
      .format = KC__STORE_FORMAT,
      .library = "0.1.0",
      .backend = "host",
      .identity = "host|/usr/bin/cc||cc (Debian 12.2.0-14) 12.2.0",
      .options = "",
      .params = "T=float",
      .entry = "k",
      .tu = "prelude...",
      .tu_len = 10,
      .defs = defs,
      .ndefs = 3,
  };
}

static void key_of(const kc__key_parts *p, uint8_t out[16]) { kc__store_key(p, out); }

static void expect_differs(const uint8_t a[16], const kc__key_parts *p, const char *what) {
  uint8_t b[16];
  key_of(p, b);
  if (!memcmp(a, b, 16)) fail_msg("changing %s did not change the key", what);
}

static void test_key_changes_with_every_component(void **state) {
  (void)state;
  kc__key_def defs[3];
  kc__key_parts p = base(defs);
  uint8_t k0[16], again[16];
  key_of(&p, k0);
  key_of(&p, again);
  assert_memory_equal(k0, again, 16); /* deterministic */

#define VARY(field, value, what) \
  do { \
    kc__key_parts q = base(defs); \
    q.field = value; \
    expect_differs(k0, &q, what); \
  } while (0)
  VARY(format, KC__STORE_FORMAT + 1, "the store format version");
  VARY(library, "0.1.1", "kcache's version");
  VARY(backend, "opencl", "the backend");
  VARY(identity, "host|/usr/bin/cc||cc (Debian 12.2.0-15) 12.2.0", "the compiler version");
  VARY(identity, "host|/usr/local/bin/cc||cc (Debian 12.2.0-14) 12.2.0", "the compiler path");
  VARY(identity, "cuda|nvrtc 12.4|driver 12.4|sm_90|H200", "the device architecture");
  VARY(options, "-O3", "the compile options");
  VARY(params, "T=double", "the specialization parameters");
  VARY(params, "", "the specialization parameters (none)");
  VARY(entry, "k2", "the entry name");
  VARY(tu, "prelude..!", "the translation unit");
  VARY(ndefs, 2, "the closure (one definition fewer)");
#undef VARY
  /* a definition's text, and its name */
  for (int i = 0; i < 3; i++) {
    kc__key_parts q = base(defs);
    char text[64];
    snprintf(text, sizeof text, "%s ", defs[i].text);
    defs[i].text = text;
    defs[i].len++;
    expect_differs(k0, &q, "a definition's text");
    q = base(defs);
    defs[i].name = "zz";
    expect_differs(k0, &q, "a definition's name");
  }
  /* a definition more */
  kc__key_def four[4];
  memcpy(four, base_defs, sizeof base_defs);
  four[3] = (kc__key_def){"extra", "int extra;", 10};
  kc__key_parts q = base(defs);
  q.defs = four;
  q.ndefs = 4;
  expect_differs(k0, &q, "the closure (one definition more)");
  /* fields are length-prefixed: moving a byte from one to the next changes the key */
  q = base(defs);
  q.options = "-O";
  q.params = "2T=float";
  expect_differs(k0, &q, "the boundary between options and params");
}

static void test_key_ignores_closure_order(void **state) {
  (void)state;
  kc__key_def defs[3];
  kc__key_parts p = base(defs);
  uint8_t k0[16], k1[16];
  key_of(&p, k0);
  kc__key_def rev[3] = {base_defs[2], base_defs[0], base_defs[1]};
  p.defs = rev;
  key_of(&p, k1);
  assert_memory_equal(k0, k1, 16);
  /* NULL and "" options are the same thing */
  p = base(defs);
  p.options = NULL;
  key_of(&p, k1);
  assert_memory_equal(k0, k1, 16);
}

static void test_hex_round_trip(void **state) {
  (void)state;
  uint8_t k[16], back[16];
  for (int i = 0; i < 16; i++) k[i] = (uint8_t)(i * 17 + 3);
  char hex[33];
  kc__store_hex(k, hex);
  assert_int_equal(strlen(hex), 32);
  assert_true(kc__store_unhex(hex, back));
  assert_memory_equal(k, back, 16);
  assert_false(kc__store_unhex("abc", back));
  hex[5] = 'g';
  assert_false(kc__store_unhex(hex, back));
}

static void test_parse_size(void **state) {
  (void)state;
  static const struct {
    const char *s;
    uint64_t v;
  } good[] = {{"12345", 12345},     {"100k", 100 << 10},
              {"100K", 100 << 10},  {"512M", 512ull << 20},
              {"1G", 1ull << 30},   {"1.5G", 3ull << 29},
              {"2GiB", 2ull << 30}, {"10 MB", 10ull << 20},
              {"3T", 3ull << 40},   {"0", 0},
              {"  7  ", 7},         {"64b", 64}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    uint64_t v = 1;
    if (!kc__store_parse_size(good[i].s, &v)) fail_msg("\"%s\" did not parse", good[i].s);
    assert_int_equal(v, good[i].v);
  }
  static const char *bad[] = {"", "abc", "-1", "1X", "G", "1GG", "nan", "inf", "1e30G", NULL};
  for (int i = 0; bad[i]; i++) {
    uint64_t v;
    if (kc__store_parse_size(bad[i], &v)) fail_msg("\"%s\" parsed as a size", bad[i]);
  }
  uint64_t v;
  assert_false(kc__store_parse_size(NULL, &v));
}

/* A small entry image, for the format tests. */
static void *sample(size_t *size, kc__entry *e, uint64_t sig[2]) {
  memset(e, 0, sizeof *e);
  for (int i = 0; i < 16; i++) e->key[i] = (uint8_t)(0xa0 + i);
  e->backend = "host";
  e->identity = "host|cc|x";
  e->options = "-O3";
  e->params = "T=float";
  e->entry = "k";
  e->library = "0.1.0";
  e->created_ns = 1234567890123ull;
  e->compile_ns = 42000000;
  static kc__key_def defs[] = {{"h", "float h(float x) { return x; }", 30}, {"k", "void k(float *y) {}", 19}};
  e->defs = defs;
  e->ndefs = 2;
  sig[0] = KC__SIG(KC_ARG_BUFFER, 0);
  sig[1] = KC__SIG(KC_ARG_SCALAR, 4);
  e->sig = sig;
  e->nsig = 2;
  static const char artifact[] = "\x7f"
                                 "ELF artifact bytes";
  e->artifact = artifact;
  e->artifact_size = sizeof artifact - 1;
  e->log = "warning: something";
  e->log_len = 18;
  void *img;
  assert_int_equal(kc__entry_encode(NULL, e, &img, size), KC_OK);
  return img;
}

static void test_entry_round_trip(void **state) {
  (void)state;
  kc__entry in, out;
  uint64_t sig[2];
  size_t size;
  void *img = sample(&size, &in, sig);
  char why[128];
  assert_int_equal(kc__entry_decode(NULL, img, size, &out, why, sizeof why), KC_OK);
  assert_memory_equal(out.key, in.key, 16);
  assert_string_equal(out.backend, "host");
  assert_string_equal(out.identity, in.identity);
  assert_string_equal(out.options, "-O3");
  assert_string_equal(out.params, "T=float");
  assert_string_equal(out.entry, "k");
  assert_string_equal(out.library, "0.1.0");
  assert_int_equal(out.created_ns, in.created_ns);
  assert_int_equal(out.compile_ns, in.compile_ns);
  assert_int_equal(out.ndefs, 2);
  assert_string_equal(out.defs[1].name, "k");
  assert_int_equal(out.defs[0].len, 30);
  assert_memory_equal(out.defs[0].text, in.defs[0].text, 30);
  assert_int_equal(out.nsig, 2);
  assert_int_equal(out.sig[1], sig[1]);
  assert_int_equal(out.artifact_size, in.artifact_size);
  assert_memory_equal(out.artifact, in.artifact, in.artifact_size);
  assert_int_equal(out.log_len, 18);
  assert_string_equal(out.log, "warning: something");
  kc__entry_free(NULL, &out); /* frees img too */
}

/* Every single-byte change anywhere, and every truncation, is detected. */
static void test_entry_detects_every_flip_and_cut(void **state) {
  (void)state;
  kc__entry in, out;
  uint64_t sig[2];
  size_t size;
  uint8_t *img = sample(&size, &in, sig);
  char why[128];
  for (size_t off = 0; off < size; off++) {
    for (int bit = 0; bit < 8; bit += 3) {
      uint8_t *copy = malloc(size);
      memcpy(copy, img, size);
      copy[off] ^= (uint8_t)(1u << bit);
      if (kc__entry_decode(NULL, copy, size, &out, why, sizeof why) == KC_OK)
        fail_msg("flipping bit %d of byte %zu went unnoticed", bit, off);
    }
  }
  for (size_t cut = 0; cut < size; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1);
    memcpy(copy, img, cut);
    if (kc__entry_decode(NULL, copy, cut, &out, why, sizeof why) == KC_OK)
      fail_msg("truncating to %zu bytes went unnoticed", cut);
  }
  uint8_t *longer = malloc(size + 1);
  memcpy(longer, img, size);
  longer[size] = 0;
  assert_int_equal(kc__entry_decode(NULL, longer, size + 1, &out, why, sizeof why), KC_EIO);
  KCT_CONTAINS(why, "after the payload");
  free(img);
}

/* Random bytes never decode and never crash (a small fuzz). */
/* The framing that the remote tier and the kcache command ask the codec
 * about: an image's length from its header, whatever follows it. */
static void test_entry_frame(void **state) {
  (void)state;
  kc__entry e;
  uint64_t sig[2];
  size_t size;
  uint8_t *img = sample(&size, &e, sig);
  char why[128];
  size_t len = 0;
  assert_int_equal(kc__entry_image_size(img), size);
  assert_int_equal(kc__entry_frame(img, size, &len, why, sizeof why), KC_OK);
  assert_int_equal(len, size);
  uint8_t *longer = malloc(size + 40);
  memcpy(longer, img, size);
  memset(longer + size, 'x', 40);
  len = 0;
  assert_int_equal(kc__entry_frame(longer, size + 40, &len, why, sizeof why), KC_OK);
  assert_int_equal(len, size); /* a trailer is the caller's business */
  assert_int_equal(kc__entry_frame(img, size - 1, &len, why, sizeof why), KC_EIO);
  KCT_CONTAINS(why, "truncated");
  assert_int_equal(kc__entry_frame(img, 10, &len, why, sizeof why), KC_EIO);
  KCT_CONTAINS(why, "truncated (10 bytes)");
  longer[0] ^= 1;
  assert_int_equal(kc__entry_frame(longer, size + 40, &len, why, sizeof why), KC_EIO);
  KCT_CONTAINS(why, "bad magic");
  free(longer);
  free(img);
}

static void test_entry_garbage(void **state) {
  (void)state;
  srand(7);
  char why[128];
  kc__entry out;
  for (int round = 0; round < 2000; round++) {
    size_t n = (size_t)(rand() % 300);
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)rand();
    if (round % 2 && n >= 8) memcpy(b, KC__STORE_MAGIC, 8);
    assert_int_equal(kc__entry_decode(NULL, b, n, &out, why, sizeof why), KC_EIO);
  }
  /* Mutations behind valid checksums reach the section parser: it must
   * reject or accept them without reading out of bounds (ASan watches). */
  kc__entry in;
  uint64_t sig[2];
  size_t size;
  uint8_t *img = sample(&size, &in, sig);
  for (int round = 0; round < 20000; round++) {
    uint8_t *b = malloc(size);
    memcpy(b, img, size);
    for (int k = 1 + rand() % 3; k > 0; k--) {
      size_t off = KC__STORE_HEADER + (size_t)rand() % (size - KC__STORE_HEADER);
      b[off] = rand() % 4 ? (uint8_t)rand() : (uint8_t)(b[off] ^ 0x80);
    }
    uint64_t psum = XXH3_64bits(b + KC__STORE_HEADER, size - KC__STORE_HEADER);
    for (int i = 0; i < 8; i++) b[40 + i] = (uint8_t)(psum >> (8 * i));
    uint64_t hsum = XXH3_64bits(b, 56);
    for (int i = 0; i < 8; i++) b[56 + i] = (uint8_t)(hsum >> (8 * i));
    if (kc__entry_decode(NULL, b, size, &out, why, sizeof why) == KC_OK) {
      /* whatever it accepted must be internally consistent */
      for (uint32_t i = 0; i < out.ndefs; i++) {
        const uint8_t *name = (const uint8_t *)out.defs[i].name, *text = (const uint8_t *)out.defs[i].text;
        assert_true(name >= b && name + strlen(out.defs[i].name) < b + size);
        assert_true(text >= b && text + out.defs[i].len < b + size && text[out.defs[i].len] == 0);
      }
      assert_true((const uint8_t *)out.artifact >= b &&
                  (const uint8_t *)out.artifact + out.artifact_size <= b + size);
      kc__entry_free(NULL, &out);
    }
  }
  free(img);
}

KCT_MAIN_INIT_ONLY(cmocka_unit_test(test_key_changes_with_every_component),
                   cmocka_unit_test(test_key_ignores_closure_order), cmocka_unit_test(test_hex_round_trip),
                   cmocka_unit_test(test_parse_size), cmocka_unit_test(test_entry_round_trip),
                   cmocka_unit_test(test_entry_detects_every_flip_and_cut),
                   cmocka_unit_test(test_entry_garbage), cmocka_unit_test(test_entry_frame))
