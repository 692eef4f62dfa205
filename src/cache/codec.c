/* SPDX-License-Identifier: MIT */
/*
 * cache/codec.c -- owns the entry image (format.h): encoding, decoding with
 * every length and checksum verified, the peek at header and metadata that
 * listings use, and the framing that the remote tier asks about. Images are
 * written in two passes (measure, then fill a buffer of exactly that size),
 * so the codec needs no growable buffer.
 */
#include "cache/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

/* ------------------------------------------------------------- writing */

/* A cursor: with p NULL it only measures. */
typedef struct wr {
  uint8_t *p;
  size_t len;
  bool overflow;
} wr;

static void w_put(wr *w, const void *d, size_t n) {
  if (n > SIZE_MAX - w->len) {
    w->overflow = true;
    return;
  }
  if (w->p && n) memcpy(w->p + w->len, d, n);
  w->len += n;
}
static void w_u32(wr *w, uint32_t v) {
  uint8_t x[4];
  kc__le32(x, v);
  w_put(w, x, 4);
}
static void w_u64(wr *w, uint64_t v) {
  uint8_t x[8];
  kc__le64(x, v);
  w_put(w, x, 8);
}
static size_t w_section(wr *w, uint32_t tag) {
  w_u32(w, tag);
  w_u32(w, 0);
  size_t at = w->len;
  w_u64(w, 0);
  return at;
}
static void w_section_end(wr *w, size_t at) {
  if (w->p && !w->overflow) kc__le64(w->p + at, w->len - at - 8);
}

static void meta_kv(wr *w, const char *k, const char *v) {
  if (!v) v = "";
  size_t kl = strlen(k), vl = strlen(v) + 1;
  w_u32(w, (uint32_t)kl);
  w_u32(w, (uint32_t)vl);
  w_put(w, k, kl);
  w_put(w, v, vl);
}

static void meta_u64(wr *w, const char *k, uint64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%llu", (unsigned long long)v);
  meta_kv(w, k, s);
}

static void defs_write(wr *w, const kc__key_def *defs, uint32_t n) {
  w_u32(w, n);
  for (uint32_t i = 0; i < n; i++) {
    size_t nl = strlen(defs[i].name) + 1;
    w_u32(w, (uint32_t)nl);
    w_put(w, defs[i].name, nl);
    w_u64(w, defs[i].len + 1);
    w_put(w, defs[i].text, defs[i].len);
    w_put(w, "", 1);
  }
}

bool kc__entry_defs_encode(const kc__heap *mem, const kc__key_def *defs, uint32_t n, void **out,
                           size_t *len) {
  wr w = {0};
  defs_write(&w, defs, n);
  *out = w.overflow ? NULL : kc__heap_alloc(mem, w.len);
  if (!*out) return false;
  w = (wr){.p = *out};
  defs_write(&w, defs, n);
  *len = w.len;
  return true;
}

/* One pass over the image of e; the DEFS section from defs_blob if given. */
static void image_write(wr *w, const kc__entry *e, const void *defs_blob, size_t defs_len) {
  uint8_t zero[KC__STORE_HEADER] = {0};
  w_put(w, zero, sizeof zero);

  size_t at = w_section(w, KC__SEC_META);
#define KC__X(name, tag, first) meta_kv(w, #name, e->name);
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  meta_u64(w, "created_ns", e->created_ns);
  meta_u64(w, "compile_ns", e->compile_ns);
  char hex[33];
  kc__store_hex(e->tu_hash, hex);
  meta_kv(w, "tu_hash", hex);
  w_section_end(w, at);

  at = w_section(w, KC__SEC_DEFS);
  if (defs_blob) w_put(w, defs_blob, defs_len);
  else defs_write(w, e->defs, e->ndefs);
  w_section_end(w, at);

  at = w_section(w, KC__SEC_LOG);
  w_put(w, e->log ? e->log : "", e->log ? e->log_len : 0);
  w_put(w, "", 1);
  w_section_end(w, at);

  at = w_section(w, KC__SEC_SIG);
  w_u32(w, e->nsig);
  for (uint32_t i = 0; i < e->nsig; i++) w_u64(w, e->sig[i]);
  w_section_end(w, at);

  at = w_section(w, KC__SEC_ARTIFACT);
  w_put(w, e->artifact, e->artifact_size);
  w_section_end(w, at);

  if (e->nfiles) {
    at = w_section(w, KC__SEC_FILES);
    w_u32(w, e->nfiles);
    for (uint32_t i = 0; i < e->nfiles; i++) {
      const kc__filedep *f = &e->files[i];
      size_t pl = strlen(f->path) + 1;
      w_u32(w, f->flags);
      w_u32(w, (uint32_t)pl);
      w_u64(w, f->size);
      w_u64(w, f->hash);
      w_u64(w, f->mtime_ns);
      w_u64(w, f->ctime_ns);
      w_u64(w, f->dev);
      w_u64(w, f->ino);
      w_put(w, f->path, pl);
    }
    w_section_end(w, at);
  }
}

kc_status kc__entry_encode_defs(const kc__heap *mem, const kc__entry *e, const void *defs_blob,
                                size_t defs_len, void **out, size_t *size) {
  wr w = {0};
  image_write(&w, e, defs_blob, defs_len);
  uint8_t *h = w.overflow ? NULL : kc__heap_alloc(mem, w.len);
  if (!h) return kc__err_owner(0, KC_ENOMEM, "out of memory encoding a disk cache entry");
  size_t len = w.len;
  w = (wr){.p = h};
  image_write(&w, e, defs_blob, defs_len);
  memcpy(h, KC__STORE_MAGIC, 8);
  kc__le32(h + 8, KC__STORE_FORMAT);
  kc__le32(h + 12, KC__STORE_HEADER);
  memcpy(h + 16, e->key, 16);
  kc__le64(h + 32, len - KC__STORE_HEADER);
  kc__le64(h + 40, XXH3_64bits(h + KC__STORE_HEADER, len - KC__STORE_HEADER));
  kc__le64(h + 48, 0);
  kc__le64(h + 56, XXH3_64bits(h, 56));
  *out = h;
  *size = len;
  return KC_OK;
}

kc_status kc__entry_encode(const kc__heap *mem, const kc__entry *e, void **out, size_t *size) {
  return kc__entry_encode_defs(mem, e, NULL, 0, out, size);
}

/* ------------------------------------------------------------- reading */

static bool meta_parse(kc__entry *e, const uint8_t *p, size_t n, char *why, size_t wl) {
  size_t off = 0;
  while (off < n) {
    if (n - off < 8) {
      snprintf(why, wl, "truncated metadata");
      return false;
    }
    uint32_t kl = kc__rd32(p + off), vl = kc__rd32(p + off + 4);
    off += 8;
    if (kl > n - off || vl > n - off - kl || vl == 0 || p[off + kl + vl - 1] != 0) {
      snprintf(why, wl, "malformed metadata");
      return false;
    }
    const char *k = (const char *)p + off, *v = (const char *)p + off + kl;
    off += kl + vl;
#define KC__IS(name) (kl == sizeof name - 1 && !memcmp(k, name, kl))
#define KC__X(name, tag, first) \
  if (KC__IS(#name)) e->name = v; \
  else
    KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
    if (KC__IS("created_ns")) e->created_ns = strtoull(v, NULL, 10);
    else if (KC__IS("compile_ns")) e->compile_ns = strtoull(v, NULL, 10);
    else if (KC__IS("tu_hash")) kc__store_unhex(v, e->tu_hash);
#undef KC__IS
  }
  bool complete = true;
#define KC__X(name, tag, first) complete = complete && e->name;
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  if (!complete) {
    snprintf(why, wl, "metadata incomplete");
    return false;
  }
  return true;
}

static bool defs_parse(const kc__heap *mem, kc__entry *e, const uint8_t *p, size_t n, char *why, size_t wl,
                       bool *oom) {
  if (n < 4) goto bad;
  uint32_t cnt = kc__rd32(p);
  size_t off = 4;
  if (cnt > (n - 4) / 14) goto bad; /* each takes at least 14 bytes */
  e->defs = kc__heap_alloc(mem, (cnt ? cnt : 1) * sizeof *e->defs);
  if (!e->defs) {
    snprintf(why, wl, "out of memory");
    *oom = true;
    return false;
  }
  for (uint32_t i = 0; i < cnt; i++) {
    if (n - off < 4) goto bad;
    uint32_t nl = kc__rd32(p + off);
    off += 4;
    if (nl == 0 || nl > n - off || p[off + nl - 1] != 0) goto bad;
    const char *name = (const char *)p + off;
    off += nl;
    if (n - off < 8) goto bad;
    uint64_t tl = kc__rd64(p + off);
    off += 8;
    if (tl == 0 || tl > n - off || p[off + tl - 1] != 0) goto bad;
    e->defs[i] = (kc__key_def){name, (const char *)p + off, (size_t)tl - 1};
    off += tl;
  }
  e->ndefs = cnt;
  if (off == n) return true;
bad:
  snprintf(why, wl, "malformed closure section");
  return false;
}

/* FILES: each record at least 57 bytes, an absolute path. */
static bool files_parse(const kc__heap *mem, kc__entry *e, const uint8_t *p, size_t n, char *why, size_t wl,
                        bool *oom) {
  if (n < 4) goto bad;
  uint32_t cnt = kc__rd32(p);
  size_t off = 4;
  if (cnt == 0 || cnt > KC__STORE_MAX_FILES || cnt > (n - 4) / 57) goto bad;
  e->files = kc__heap_calloc(mem, cnt * sizeof *e->files);
  if (!e->files) {
    snprintf(why, wl, "out of memory");
    *oom = true;
    return false;
  }
  for (uint32_t i = 0; i < cnt; i++) {
    if (n - off < 56) goto bad;
    kc__filedep *f = &e->files[i];
    f->flags = kc__rd32(p + off);
    uint32_t pl = kc__rd32(p + off + 4);
    f->size = kc__rd64(p + off + 8);
    f->hash = kc__rd64(p + off + 16);
    f->mtime_ns = kc__rd64(p + off + 24);
    f->ctime_ns = kc__rd64(p + off + 32);
    f->dev = kc__rd64(p + off + 40);
    f->ino = kc__rd64(p + off + 48);
    off += 56;
    if (pl < 2 || pl > n - off || p[off + pl - 1] != 0 || p[off] != '/' || memchr(p + off, 0, pl - 1))
      goto bad;
    if (f->flags & ~(uint32_t)(KC__FILEDEP_ABSENT | KC__FILEDEP_RACY)) goto bad; /* never stored UNKNOWN */
    f->path = (char *)(uintptr_t)(p + off);
    off += pl;
  }
  e->nfiles = cnt;
  if (off == n) return true;
bad:
  snprintf(why, wl, "malformed files section");
  return false;
}

#define KC__BAD(...) \
  do { \
    snprintf(why, wl, __VA_ARGS__); \
    return false; \
  } while (0)

/* The header of a whole image: false with why if it is not sound. */
static bool header_check(kc__entry *e, const uint8_t *b, size_t size, char *why, size_t wl) {
  if (size == 0) KC__BAD("empty file");
  if (size < KC__STORE_HEADER) KC__BAD("truncated header (%zu bytes)", size);
  if (memcmp(b, KC__STORE_MAGIC, 8)) KC__BAD("not a kcache entry (bad magic)");
  if (kc__rd64(b + 56) != XXH3_64bits(b, 56)) KC__BAD("header checksum mismatch");
  e->format = kc__rd32(b + 8);
  if (e->format != KC__STORE_FORMAT) KC__BAD("format version %u, expected %u", e->format, KC__STORE_FORMAT);
  if (kc__rd32(b + 12) != KC__STORE_HEADER) KC__BAD("unexpected header size %u", kc__rd32(b + 12));
  memcpy(e->key, b + 16, 16);
  uint64_t plen = kc__rd64(b + 32);
  if (plen > size - KC__STORE_HEADER)
    KC__BAD("truncated payload (%zu of %llu bytes)", size - KC__STORE_HEADER, (unsigned long long)plen);
  if (plen < size - KC__STORE_HEADER)
    KC__BAD("%llu bytes after the payload", (unsigned long long)(size - KC__STORE_HEADER - plen));
  if (XXH3_64bits(b + KC__STORE_HEADER, plen) != kc__rd64(b + 40)) KC__BAD("payload checksum mismatch");
  return true;
}

/* One section of tag, body p[0..len). */
static bool section_parse(const kc__heap *mem, kc__entry *e, uint32_t tag, const uint8_t *p, uint64_t len,
                          char *why, size_t wl, bool *oom) {
  switch (tag) {
  case KC__SEC_META: return meta_parse(e, p, len, why, wl);
  case KC__SEC_DEFS: return defs_parse(mem, e, p, len, why, wl, oom);
  case KC__SEC_LOG:
    if (len == 0 || p[len - 1] != 0) KC__BAD("malformed build log");
    e->log = (const char *)p;
    e->log_len = len - 1;
    return true;
  case KC__SEC_SIG:
    if (len < 4 || (len - 4) % 8 || (len - 4) / 8 != kc__rd32(p)) KC__BAD("malformed signature");
    e->nsig = kc__rd32(p);
    e->sig = kc__heap_alloc(mem, (e->nsig ? e->nsig : 1) * sizeof *e->sig);
    *oom = !e->sig;
    if (*oom) KC__BAD("out of memory");
    for (uint32_t i = 0; i < e->nsig; i++) e->sig[i] = kc__rd64(p + 4 + 8 * i);
    return true;
  case KC__SEC_ARTIFACT:
    e->artifact = p;
    e->artifact_size = len;
    return true;
  case KC__SEC_FILES: return files_parse(mem, e, p, len, why, wl, oom);
  default: /* a later writer's addition: ignored */ return true;
  }
}

static bool sections_parse(const kc__heap *mem, kc__entry *e, const uint8_t *b, size_t size, char *why,
                           size_t wl, bool *oom) {
  unsigned seen = 0;
  for (size_t off = KC__STORE_HEADER; off < size;) {
    if (size - off < 16) KC__BAD("truncated section header");
    uint32_t tag = kc__rd32(b + off);
    uint64_t len = kc__rd64(b + off + 8);
    off += 16;
    if (len > size - off) KC__BAD("section %u overruns the file", tag);
    const uint8_t *p = b + off;
    off += len;
    if (tag >= KC__SEC_META && tag <= KC__SEC_FILES) {
      if (seen & (1u << tag)) KC__BAD("section %u appears twice", tag);
      seen |= 1u << tag;
    }
    if (!section_parse(mem, e, tag, p, len, why, wl, oom)) return false;
  }
  unsigned need = 1u << KC__SEC_META | 1u << KC__SEC_DEFS | 1u << KC__SEC_LOG | 1u << KC__SEC_SIG |
                  1u << KC__SEC_ARTIFACT;
  if ((seen & need) != need) KC__BAD("a section is missing");
  return true;
}
#undef KC__BAD

kc_status kc__entry_decode(const kc__heap *mem, void *buf, size_t size, kc__entry *e, char *why, size_t wl) {
  char local[128];
  if (!why || !wl) {
    why = local;
    wl = sizeof local;
  }
  memset(e, 0, sizeof *e);
  e->buf = buf;
  e->size = size;
  bool oom = false; /* the entry may be sound: not damage */
  if (header_check(e, buf, size, why, wl) && sections_parse(mem, e, buf, size, why, wl, &oom)) return KC_OK;
  kc__entry_free(mem, e);
  return oom ? KC_ENOMEM : KC_EIO;
}

void kc__entry_free(const kc__heap *mem, kc__entry *e) {
  if (!e) return;
  kc__heap_free(mem, e->defs);
  kc__heap_free(mem, e->sig);
  kc__heap_free(mem, e->files);
  kc__heap_free(mem, e->buf);
  memset(e, 0, sizeof *e);
}

/* --------------------------------------------------------------- peeks */

int64_t kc__entry_head(const uint8_t *h, uint64_t total, bool exact, char *why, size_t wl) {
  uint64_t room = total - KC__STORE_HEADER; /* total >= KC__STORE_HEADER + 16: checked by callers */
  if (memcmp(h, KC__STORE_MAGIC, 8)) {
    snprintf(why, wl, "not a kcache entry (bad magic)");
  } else if (kc__rd64(h + 56) != XXH3_64bits(h, 56)) {
    snprintf(why, wl, "header checksum mismatch");
  } else if (kc__rd32(h + 8) != KC__STORE_FORMAT) {
    snprintf(why, wl, "format version %u, expected %u", kc__rd32(h + 8), KC__STORE_FORMAT);
  } else if (exact ? kc__rd64(h + 32) != room : kc__rd64(h + 32) > room) {
    snprintf(why, wl, "payload length %llu, but the image holds %llu", (unsigned long long)kc__rd64(h + 32),
             (unsigned long long)room);
  } else if (kc__rd32(h + KC__STORE_HEADER) != KC__SEC_META ||
             kc__rd64(h + KC__STORE_HEADER + 8) > room - 16) {
    snprintf(why, wl, "malformed metadata");
  } else {
    return (int64_t)kc__rd64(h + KC__STORE_HEADER + 8);
  }
  return -1;
}

kc_status kc__entry_head_meta(const uint8_t *h, uint8_t *m, size_t len, size_t total, kc__entry *e, char *why,
                              size_t wl) {
  if (!meta_parse(e, m, len, why, wl)) {
    free(m);
    memset(e, 0, sizeof *e);
    return KC_EIO;
  }
  e->buf = m;
  e->size = total;
  e->format = KC__STORE_FORMAT;
  memcpy(e->key, h + 16, 16);
  return KC_OK;
}

kc_status kc__entry_peek_mem(const void *buf, size_t n, size_t total, kc__entry *e, char *why, size_t wl) {
  char local[128];
  if (!why || !wl) {
    why = local;
    wl = sizeof local;
  }
  memset(e, 0, sizeof *e);
  const uint8_t *h = buf;
  if (n < KC__STORE_HEADER + 16 || total < n) {
    snprintf(why, wl, "truncated (%zu bytes)", total);
    return KC_EIO;
  }
  int64_t len = kc__entry_head(h, total, false, why, wl);
  if (len < 0) return KC_EIO;
  if ((uint64_t)len > n - KC__STORE_HEADER - 16) {
    snprintf(why, wl, "metadata of %llu bytes: more than the %zu bytes read", (unsigned long long)len, n);
    return KC_EIO;
  }
  uint8_t *m = malloc(len ? (size_t)len : 1);
  if (!m) {
    snprintf(why, wl, "out of memory");
    return KC_EUNAVAILABLE;
  }
  memcpy(m, h + KC__STORE_HEADER + 16, (size_t)len);
  return kc__entry_head_meta(h, m, (size_t)len, total, e, why, wl);
}

kc_status kc__entry_frame(const void *value, size_t n, size_t *image_len, char *why, size_t wl) {
  const uint8_t *v = value;
  if (n < KC__STORE_HEADER) {
    snprintf(why, wl, "truncated (%zu bytes)", n);
    return KC_EIO;
  }
  if (memcmp(v, KC__STORE_MAGIC, 8)) {
    snprintf(why, wl, "not a kcache entry (bad magic)");
    return KC_EIO;
  }
  uint64_t plen = kc__rd64(v + 32);
  if (plen > n - KC__STORE_HEADER) {
    snprintf(why, wl, "truncated (%zu of %llu bytes)", n, (unsigned long long)plen + KC__STORE_HEADER);
    return KC_EIO;
  }
  *image_len = KC__STORE_HEADER + (size_t)plen;
  return KC_OK;
}

uint64_t kc__entry_image_size(const void *head) {
  return KC__STORE_HEADER + kc__rd64((const uint8_t *)head + 32);
}
