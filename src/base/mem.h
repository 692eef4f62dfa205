/* SPDX-License-Identifier: MIT */
/* mem.h -- allocation through a heap: the user's allocator hook
 * (kc_options.alloc) and its argument, or libc for a NULL heap (the kcache
 * command walks stores without a runtime). Sizes of 0 allocate 1 byte. */
#ifndef KC_BASE_MEM_H
#define KC_BASE_MEM_H

#include <stddef.h>

#include "kcache.h"

typedef struct kc__heap {
  kc_alloc_fn fn;
  void *ud;
} kc__heap;

void *kc__heap_alloc(const kc__heap *h, size_t n); /* NULL on failure */
void *kc__heap_calloc(const kc__heap *h, size_t n); /* zeroed */
void *kc__heap_realloc(const kc__heap *h, void *p, size_t n);
void kc__heap_free(const kc__heap *h, void *p);
char *kc__heap_strdup(const kc__heap *h, const char *s);
char *kc__heap_strndup(const kc__heap *h, const char *s, size_t n);

/* The allocator of a runtime created without kc_options.alloc (realloc/free). */
void *kc__libc_alloc(void *ud, void *ptr, size_t size);

#endif /* KC_BASE_MEM_H */
