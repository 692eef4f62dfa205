/* SPDX-License-Identifier: MIT */
/*
 * cache/key.c -- owns the disk cache's content key (XXH3-128 over the
 * identity fields of format.h, the translation unit and the closure sorted
 * by name) and the hex form and text hashes that entries and file names use.
 */
#include "cache/key.h"
#include "base/base.h"
#include "kcache.h"

#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static void key_field(XXH3_state_t *s, uint8_t tag, const void *data, size_t len) {
  uint8_t h[9];
  h[0] = tag;
  kc__le64(h + 1, len);
  XXH3_128bits_update(s, h, sizeof h);
  if (len) XXH3_128bits_update(s, data, len);
}

static void key_str(XXH3_state_t *s, uint8_t tag, const char *str) {
  key_field(s, tag, str ? str : "", str ? strlen(str) : 0);
}

/* (name, index) order: the closure by name, whatever order it came in,
 * without allocating. Closures are small; this is quadratic. */
static bool def_before(const kc__key_def *d, uint32_t i, uint32_t j) {
  int c = strcmp(d[i].name, d[j].name);
  return c < 0 || (c == 0 && i < j);
}

void kc__store_key(const kc__key_parts *p, uint8_t key[16]) {
  XXH3_state_t s;
  XXH3_INITSTATE(&s);
  XXH3_128bits_reset(&s);
  uint8_t f[4];
  kc__le32(f, p->format);
  key_field(&s, 'F', f, sizeof f);
#define KC__X(name, tag, first) \
  if (first) key_str(&s, tag, p->name);
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
#define KC__X(name, tag, first) \
  if (!first) key_str(&s, tag, p->name);
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  if (p->tu) key_field(&s, 'T', p->tu, p->tu_len);
  uint8_t n[4];
  kc__le32(n, p->ndefs);
  key_field(&s, 'N', n, sizeof n);
  uint32_t prev = UINT32_MAX;
  for (uint32_t k = 0; k < p->ndefs; k++) {
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < p->ndefs; i++)
      if ((prev == UINT32_MAX || def_before(p->defs, prev, i)) &&
          (best == UINT32_MAX || def_before(p->defs, i, best)))
        best = i;
    key_str(&s, 'D', p->defs[best].name);
    key_field(&s, 'X', p->defs[best].text, p->defs[best].len);
    prev = best;
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&s));
  memcpy(key, c.digest, 16);
}

void kc__store_text_hash(const char *text, size_t len, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(text, len));
  memcpy(out, c.digest, 16);
}

void kc__store_hex(const uint8_t key[16], char hex[33]) { kc__hex(key, 16, hex); }

bool kc__store_unhex_n(const char *s, uint8_t key[16]) {
  for (int i = 0; i < 16; i++) {
    int hi = kc__hexval((unsigned char)s[2 * i]), lo = hi < 0 ? -1 : kc__hexval((unsigned char)s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    key[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

bool kc__store_unhex(const char *s, uint8_t key[16]) {
  return s && strlen(s) == 32 && kc__store_unhex_n(s, key);
}
