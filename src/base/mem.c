/* SPDX-License-Identifier: MIT */
/* mem.c -- allocation through a kc__heap (the user's allocator hook, or
 * libc for a NULL heap) and the kit's grow-array. */
#include "base/kit.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

void *kc__libc_alloc(void *ud, void *ptr, size_t size) {
  (void)ud;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

void *kc__heap_alloc(const kc__heap *h, size_t n) {
  if (n == 0) n = 1;
  return h ? h->fn(h->ud, NULL, n) : malloc(n);
}

void *kc__heap_calloc(const kc__heap *h, size_t n) {
  if (!h) return calloc(1, n ? n : 1);
  void *p = kc__heap_alloc(h, n);
  if (p) memset(p, 0, n);
  return p;
}

void *kc__heap_realloc(const kc__heap *h, void *p, size_t n) {
  if (n == 0) n = 1;
  return h ? h->fn(h->ud, p, n) : realloc(p, n);
}

void kc__heap_free(const kc__heap *h, void *p) {
  if (!p) return;
  if (h) h->fn(h->ud, p, 0);
  else free(p);
}

char *kc__heap_strndup(const kc__heap *h, const char *s, size_t n) {
  char *d = kc__heap_alloc(h, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *kc__heap_strdup(const kc__heap *h, const char *s) { return kc__heap_strndup(h, s, strlen(s)); }

void *kc__grow_array(const kc__heap *heap, void *arr, size_t *cap, size_t need, size_t elem, size_t first) {
  if (need <= *cap && arr) return arr;
  size_t nc = *cap ? *cap : (first ? first : 1);
  while (nc < need) {
    if (nc > SIZE_MAX / 2 / elem) return NULL;
    nc *= 2;
  }
  void *p = kc__heap_realloc(heap, arr, nc * elem);
  if (p) *cap = nc;
  return p;
}
