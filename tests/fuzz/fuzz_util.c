/* SPDX-License-Identifier: MIT */
/* fuzz_util.c -- the helpers declared in fuzz.h. */
#include "fuzz.h"

#include <stdarg.h>
#include <string.h>

void kcf_check_failed(const char *file, int line, const char *cond, const char *fmt, ...) {
  fprintf(stderr, "\nfuzz check failed at %s:%d: %s\n  ", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  abort();
}

static long kcf_count, kcf_live, kcf_fail_at;

static void *kcf_alloc(void *ud, void *p, size_t n) {
  (void)ud;
  if (n == 0) {
    if (p) kcf_live--;
    free(p);
    return NULL;
  }
  if (++kcf_count == kcf_fail_at) return NULL; /* one failure; later ones succeed */
  void *q = realloc(p, n);
  if (q && !p) kcf_live++;
  return q;
}

kc_runtime *kcf_runtime(void) {
  static kc_runtime rt;
  if (!rt.heap.fn) {
    rt.heap.fn = kcf_alloc;
    rt.id = kc__next_id();
  }
  return &rt;
}

void kcf_alloc_reset(long fail_nth) {
  kcf_count = 0;
  kcf_fail_at = fail_nth;
}

long kcf_alloc_count(void) { return kcf_count; }
long kcf_alloc_live(void) { return kcf_live; }

char *kcf_cstr(const uint8_t *data, size_t size) {
  size_t n = size ? strnlen((const char *)data, size) : 0;
  char *s = malloc(n + 1);
  if (!s) abort();
  if (n) memcpy(s, data, n);
  s[n] = 0;
  return s;
}

void *kcf_dup(const void *data, size_t size) {
  void *p = malloc(size ? size : 1);
  if (!p) abort();
  if (size) memcpy(p, data, size);
  return p;
}

uint64_t kcf_seed(const uint8_t *data, size_t size) { return kc__hash(data, size); }
