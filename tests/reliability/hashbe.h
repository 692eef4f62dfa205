/* SPDX-License-Identifier: MIT */
/*
 * hashbe.h -- a backend for tests that compiles nothing: its compile takes
 * the translation unit that kcache assembled, checks its shape (prelude,
 * specialization parameters, private names of helpers, one `#line 1 "name"`
 * block per definition, callees before callers, the entry last), and makes
 * a digest of what it holds: the parameters and the closure's (name, text)
 * pairs. Its launch writes that digest (8 bytes) into the first buffer.
 * So a launch tells exactly which definitions the code it ran was made of,
 * in microseconds, without a compiler.
 */
#ifndef KC_HASHBE_H
#define KC_HASHBE_H

#include "kc_internal.h"

extern const kc__backend kc__backend_hash;

/* FNV-1a, 64 bits: the digest's hash, also for reference models. */
uint64_t hashbe_fnv(uint64_t h, const void *data, size_t len);
#define HASHBE_FNV_INIT 0xcbf29ce484222325ull

/* A closure as the digest sees it. */
typedef struct hashbe_def {
  const char *name;
  const char *text;
  size_t len;
} hashbe_def;

/* The digest of a closure: params canonical ("K=V,K2=V2" or ""), defs in
 * any order (sorted here by name), entry the kernel's name. */
uint64_t hashbe_digest(const char *params, const hashbe_def *defs, uint32_t ndefs, const char *entry);

/* Parses a translation unit as the backend's compile does: on success, the
 * digest; else false with why. */
bool hashbe_parse(const char *tu, size_t len, const char *entry, uint64_t *digest, char *why, size_t whylen);

/* Compiles done by the hash backend in this process (every runtime). */
uint64_t hashbe_compiles(void);
/* fn(ud) runs at the start of every compile (NULL: none): a test that
 * changes the world outside kcache while the backend compiles. */
void hashbe_on_compile(void (*fn)(void *ud), void *ud);

#endif
