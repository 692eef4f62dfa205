/* SPDX-License-Identifier: MIT */
/* sb.h -- the one growable byte/string buffer. On allocation failure
 * `failed` is set and appends stop; the buffer stays NUL-terminated. */
#ifndef KC_BASE_SB_H
#define KC_BASE_SB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/mem.h"

typedef struct kc__sb {
  const kc__heap *heap;
  char *buf;
  size_t len, cap;
  bool failed;
} kc__sb;

void kc__sb_init(kc__sb *sb, const kc__heap *heap);
void kc__sb_append(kc__sb *sb, const void *s, size_t n);
void kc__sb_puts(kc__sb *sb, const char *s);
void kc__sb_printf(kc__sb *sb, const char *fmt, ...) KC__PRINTF(2, 3);
/* Takes the buffer (NUL-terminated, never NULL unless failed). */
char *kc__sb_take(kc__sb *sb);
void kc__sb_free(kc__sb *sb);

#endif /* KC_BASE_SB_H */
