/* SPDX-License-Identifier: MIT */
/*
 * cache/key.h -- content keys of the disk cache (key.c): what changes what a
 * backend makes of a kernel, hashed to 128 bits, and text hashes for an
 * entry's metadata. Knows no runtime: the engine's glue fills the parts.
 */
#ifndef KC_CACHE_KEY_H
#define KC_CACHE_KEY_H

#include "cache/format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kc__key_def {
  const char *name;
  const char *text;
  size_t len;
} kc__key_def;

/* Everything that changes what a backend makes of a kernel. The identity
 * fields (KC__IDENTITY_FIELDS): backend ("host", "opencl", "cuda"),
 * identity (compiler and device: path, --version, driver, arch), options
 * (compile options, "" for none), params (canonical specialization
 * parameters), entry (the kernel's name), library (KC_VERSION_STRING:
 * backends' fixed flags live in the code). */
typedef struct kc__key_parts {
  uint32_t format; /* KC__STORE_FORMAT */
#define KC__X(name, tag, first) const char *name;
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  const char *tu; /* the translation unit (prelude, trampoline), may be NULL */
  size_t tu_len;
  const kc__key_def *defs; /* the closure in any order; hashed sorted by name */
  uint32_t ndefs;
} kc__key_parts;

/* XXH3-128 over every part, each length-prefixed; worlds never enter it. */
void kc__store_key(const kc__key_parts *p, uint8_t key[16]);
void kc__store_hex(const uint8_t key[16], char hex[33]);
/* Parses 32 hex digits; false if s is not exactly that. */
bool kc__store_unhex(const char *s, uint8_t key[16]);
/* The first 32 characters of s as a key (no length check); false if not hex. */
bool kc__store_unhex_n(const char *s, uint8_t key[16]);
/* XXH3-128 of one text, for metadata ("which definition changed"). */
void kc__store_text_hash(const char *text, size_t len, uint8_t out[16]);

#endif /* KC_CACHE_KEY_H */
