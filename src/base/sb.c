/* SPDX-License-Identifier: MIT */
/* sb.c -- the growable byte/string buffer (sb.h). */
#include "base/bytes.h"
#include "base/sb.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void kc__sb_init(kc__sb *sb, const kc__heap *heap) {
  memset(sb, 0, sizeof *sb);
  sb->heap = heap;
}

void kc__sb_append(kc__sb *sb, const void *s, size_t n) {
  if (sb->failed) return;
  if (sb->len + n + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + n + 1) cap *= 2;
    char *b = kc__heap_realloc(sb->heap, sb->buf, cap);
    if (!b) {
      sb->failed = true;
      return;
    }
    sb->buf = b;
    sb->cap = cap;
  }
  if (n) memcpy(sb->buf + sb->len, s, n);
  sb->len += n;
  sb->buf[sb->len] = 0;
}

void kc__sb_puts(kc__sb *sb, const char *s) { kc__sb_append(sb, s, strlen(s)); }

void kc__sb_printf(kc__sb *sb, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    sb->failed = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    kc__sb_append(sb, small, (size_t)n);
    return;
  }
  char *big = kc__heap_alloc(sb->heap, (size_t)n + 1);
  if (!big) {
    sb->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  kc__sb_append(sb, big, (size_t)n);
  kc__heap_free(sb->heap, big);
}

char *kc__sb_take(kc__sb *sb) {
  if (sb->failed) {
    kc__sb_free(sb);
    return NULL;
  }
  if (!sb->buf) kc__sb_append(sb, "", 0);
  if (sb->failed) return NULL;
  char *b = sb->buf;
  sb->buf = NULL;
  sb->len = sb->cap = 0;
  return b;
}

void kc__sb_free(kc__sb *sb) {
  kc__heap_free(sb->heap, sb->buf);
  sb->buf = NULL;
  sb->len = sb->cap = 0;
}
