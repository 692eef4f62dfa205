/* SPDX-License-Identifier: MIT */
/*
 * cache/codec.h -- the ONE entry codec (codec.c): encode, decode and peek
 * at entry images (format.h). The store, the remote tier and the kcache
 * command all read and write entries through it and nothing else.
 *
 * Memory comes from the heap `mem` (base/mem.h), or libc when mem is NULL
 * (the CLI, tests).
 */
#ifndef KC_CACHE_CODEC_H
#define KC_CACHE_CODEC_H

#include "cache/key.h"
#include "base/base.h"
#include "kcache.h"

/* A decoded entry. Strings point into buf and are NUL-terminated. */
typedef struct kc__entry {
  uint8_t key[16];
  uint32_t format;
#define KC__X(name, tag, first) const char *name;
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  uint64_t created_ns; /* CLOCK_REALTIME */
  uint64_t compile_ns;
  uint8_t tu_hash[16];
  uint32_t ndefs;
  kc__key_def *defs; /* allocated */
  uint32_t nsig;
  uint64_t *sig; /* allocated */
  const void *artifact;
  size_t artifact_size;
  const char *log;
  size_t log_len;
  /* The files outside kcache's table that the compile read (or looked for):
   * allocated, their paths point into buf. */
  uint32_t nfiles;
  kc__filedep *files;
  void *buf; /* the whole file, owned */
  size_t size;
} kc__entry;

/* Decodes an entry image held in buf (taken over, freed on failure too). On
 * failure returns KC_EIO with why (a short reason) filled, or KC_ENOMEM
 * when memory ran out (the entry may be sound). */
kc_status kc__entry_decode(const kc__heap *mem, void *buf, size_t size, kc__entry *out, char *why,
                           size_t whylen);
void kc__entry_free(const kc__heap *mem, kc__entry *e);
/* Encodes e (buf, size, format ignored; key, strings, defs, sig, artifact,
 * log, files used) into a new image. */
kc_status kc__entry_encode(const kc__heap *mem, const kc__entry *e, void **out, size_t *size);
/* The same with the DEFS section's body given already encoded (defs_blob,
 * from kc__entry_defs_encode) instead of e->defs. */
kc_status kc__entry_encode_defs(const kc__heap *mem, const kc__entry *e, const void *defs_blob,
                                size_t defs_len, void **out, size_t *size);
/* The body of a DEFS section for defs[0..n); false when out of memory. */
bool kc__entry_defs_encode(const kc__heap *mem, const kc__key_def *defs, uint32_t n, void **out, size_t *len);

/* kc__entry_peek on the first n bytes of an image of `total` bytes held in
 * memory (the remote tier reads a value's head with GETRANGE): the header
 * and metadata only (malloc'd); defs, sig, log and artifact stay empty. */
kc_status kc__entry_peek_mem(const void *buf, size_t n, size_t total, kc__entry *out, char *why, size_t wl);

/* How long the entry image at the start of value (n bytes) is, from its
 * header: KC_OK with *image_len, or KC_EIO with why (too short for a
 * header, not an entry, or shorter than its header says). The payload is not
 * verified (kc__entry_decode does that). */
kc_status kc__entry_frame(const void *value, size_t n, size_t *image_len, char *why, size_t wl);
/* The size that the header at head (KC__STORE_HEADER bytes) gives its image. */
uint64_t kc__entry_image_size(const void *head);

/* For the file reader (entry_file.c): the header of an image of `total`
 * bytes and the header of its META section (h: the first
 * KC__STORE_HEADER + 16 bytes). exact: the payload must fill the image (a
 * file), else fit in it (a prefix). Returns the metadata's length, or -1
 * with why. */
int64_t kc__entry_head(const uint8_t *h, uint64_t total, bool exact, char *why, size_t wl);
/* Parses the metadata m (len bytes, malloc'd; e owns it on success, it is
 * freed on failure) of the image whose header is h and size total. */
kc_status kc__entry_head_meta(const uint8_t *h, uint8_t *m, size_t len, size_t total, kc__entry *e, char *why,
                              size_t wl);

#endif /* KC_CACHE_CODEC_H */
