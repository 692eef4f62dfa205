/* SPDX-License-Identifier: MIT */
/*
 * util.c -- owns the status table (kc_status_name/string), kc_version,
 * kc_errmsg and kc_free, the one size check of the public structs that
 * grow (kc__abi_check, abi.h), and the runtime's thin wrappers over src/base:
 * kc__alloc and friends through rt->heap (kc_options.alloc), kc__err
 * keyed by rt->id.
 */

#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kc_version(void) { return KC_VERSION_STRING; }
int kc_version_number(void) { return KC_VERSION_NUMBER; }

const char *kc_status_name(kc_status s) {
  switch (s) {
#define KC__STATUS_NAME(name, msg) \
  case KC_##name: return "KC_" #name;
    KC_STATUS_MAP(KC__STATUS_NAME)
#undef KC__STATUS_NAME
  default: return "KC_UNKNOWN";
  }
}

const char *kc_status_string(kc_status s) {
  switch (s) {
#define KC__STATUS_MSG(name, msg) \
  case KC_##name: return msg;
    KC_STATUS_MAP(KC__STATUS_MSG)
#undef KC__STATUS_MSG
  default: return "unknown status";
  }
}

/* ------------------------------------------------------------ allocation */

/* Through rt->heap (kc_options.alloc). Test builds fail allocations in
 * the allocator hook a test installs (kc__fault_alloc), not here. */
void *kc__alloc(kc_runtime *rt, size_t size) {
  if (size == 0) size = 1;
  return rt->heap.fn(rt->heap.ud, NULL, size);
}

void *kc__calloc(kc_runtime *rt, size_t size) {
  void *p = kc__alloc(rt, size);
  if (p) memset(p, 0, size);
  return p;
}

void *kc__realloc(kc_runtime *rt, void *p, size_t size) {
  if (size == 0) size = 1;
  return rt->heap.fn(rt->heap.ud, p, size);
}

void kc__free(kc_runtime *rt, void *p) {
  if (p) rt->heap.fn(rt->heap.ud, p, 0);
}

void kc_free(kc_runtime *rt, void *p) {
  if (rt) kc__free(rt, p);
}

char *kc__strndup(kc_runtime *rt, const char *s, size_t n) {
  char *d = kc__alloc(rt, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *kc__strdup(kc_runtime *rt, const char *s) { return kc__strndup(rt, s, strlen(s)); }

const kc__heap *kc__rt_heap(const kc_runtime *rt) { return rt ? &rt->heap : NULL; }

/* ------------------------------------------------------------ struct sizes */

kc_status kc__abi_check(const kc_runtime *rt, const char *what, const char *init, const void *p, size_t size,
                        size_t min, size_t known) {
  if (size == 0) return kc__err(rt, KC_EINVAL, "%s has size 0: %s", what, init);
  if (size < min)
    return kc__err(rt, KC_EINVAL,
                   "%s of %zu bytes is smaller than the oldest layout this library reads (%zu bytes)", what,
                   size, min);
  if (size > known && p) {
    const unsigned char *b = p;
    for (size_t i = known; i < size; i++)
      if (b[i])
        return kc__err(rt, KC_EINVAL,
                       "%s of %zu bytes, this library knows %zu: byte %zu is set, so the program was built "
                       "against a newer kcache.h than this library (%s)",
                       what, size, known, i, KC_VERSION_STRING);
  }
  return KC_OK;
}

/* ----------------------------------------------------------------- errors */

kc_status kc__verr(const kc_runtime *rt, kc_status st, const char *fmt, va_list ap) {
  return kc__verr_owner(rt ? rt->id : 0, st, fmt, ap);
}

kc_status kc__err(const kc_runtime *rt, kc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc__verr(rt, st, fmt, ap);
  va_end(ap);
  return st;
}

/* A message about another runtime (or none) is not this runtime's error. */
const char *kc_errmsg(const kc_runtime *rt) { return kc__errmsg_owner(rt ? rt->id : 0); }
