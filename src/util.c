/*
 * util.c -- status table, per-thread error messages, the per-runtime
 * allocator, growable strings, hashing and clocks. Nothing here knows about
 * worlds or backends.
 */

#include "kc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

const char *kc_version(void) { return KC_VERSION_STRING; }
int kc_version_number(void) { return KC_VERSION_NUMBER; }

const char *kc_status_name(kc_status s) {
  switch (s) {
#define KC__STATUS_NAME(name, msg) \
  case KC_##name:                  \
    return "KC_" #name;
    KC_STATUS_MAP(KC__STATUS_NAME)
#undef KC__STATUS_NAME
  default:
    return "KC_UNKNOWN";
  }
}

const char *kc_status_string(kc_status s) {
  switch (s) {
#define KC__STATUS_MSG(name, msg) \
  case KC_##name:                 \
    return msg;
    KC_STATUS_MAP(KC__STATUS_MSG)
#undef KC__STATUS_MSG
  default:
    return "unknown status";
  }
}

/* ------------------------------------------------------------ allocation */

/* Test builds count every allocation here (src/fault.c) and fail the one
 * a test armed; kc__calloc goes through kc__alloc. */
#ifdef KC_FAULT_INJECTION
#define KC__ALLOC_FAULT() KC__UNLIKELY(kc__fault_hit(KC__FAULT_ALLOC))
#else
#define KC__ALLOC_FAULT() false
#endif

void *kc__alloc(kc_runtime *rt, size_t size) {
  if (KC__ALLOC_FAULT()) return NULL;
  if (size == 0) size = 1;
  return rt->alloc(rt->alloc_ud, NULL, size);
}

void *kc__calloc(kc_runtime *rt, size_t size) {
  void *p = kc__alloc(rt, size);
  if (p) memset(p, 0, size);
  return p;
}

void *kc__realloc(kc_runtime *rt, void *p, size_t size) {
  if (KC__ALLOC_FAULT()) return NULL;
  if (size == 0) size = 1;
  return rt->alloc(rt->alloc_ud, p, size);
}

void kc__free(kc_runtime *rt, void *p) {
  if (p) rt->alloc(rt->alloc_ud, p, 0);
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

/* ----------------------------------------------------------------- errors */

/* One message per thread: concurrent failures never clobber each other.
 * Compiler logs can be long, so the message lives in a malloc'd block (not
 * the runtime's allocator: it may outlive the runtime) that a thread-exit
 * destructor frees. */
typedef struct kc__errbuf {
  uint64_t rt_id;
  size_t cap;
  char msg[];
} kc__errbuf;

static pthread_key_t kc__err_key;
static kc__once kc__err_once = KC__ONCE_INIT;
static bool kc__err_key_ok;

static void kc__err_key_init(void) { kc__err_key_ok = pthread_key_create(&kc__err_key, free) == 0; }

kc_status kc__verr(const kc_runtime *rt, kc_status st, const char *fmt, va_list ap) {
  kc__call_once(&kc__err_once, kc__err_key_init);
  if (!kc__err_key_ok) return st;
  /* Format into a new block: the arguments may point into the old message
   * (re-raising kc_errmsg(rt) with more context is common). */
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  size_t need = (size_t)(n < 0 ? 0 : n) + 1;
  kc__errbuf *old = pthread_getspecific(kc__err_key);
  kc__errbuf *e = malloc(sizeof *e + need);
  if (!e) { /* out of memory: keep the old message, better than none */
    return st;
  }
  e->cap = need;
  vsnprintf(e->msg, e->cap, fmt, ap);
  e->rt_id = rt ? rt->id : 0;
  pthread_setspecific(kc__err_key, e);
  free(old);
  return st;
}

kc_status kc__err(const kc_runtime *rt, kc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc__verr(rt, st, fmt, ap);
  va_end(ap);
  return st;
}

const char *kc_errmsg(const kc_runtime *rt) {
  kc__call_once(&kc__err_once, kc__err_key_init);
  if (!kc__err_key_ok) return "";
  const kc__errbuf *e = pthread_getspecific(kc__err_key);
  /* a message about another runtime (or none) is not this runtime's error */
  if (!e || e->rt_id != (rt ? rt->id : 0)) return "";
  return e->msg;
}

/* ------------------------------------------------------------- strings */

void kc__sb_init(kc__sb *sb, kc_runtime *rt) {
  memset(sb, 0, sizeof *sb);
  sb->rt = rt;
}

void kc__sb_append(kc__sb *sb, const char *s, size_t n) {
  if (sb->failed) return;
  if (sb->len + n + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + n + 1) cap *= 2;
    char *b = kc__realloc(sb->rt, sb->buf, cap);
    if (!b) {
      sb->failed = true;
      return;
    }
    sb->buf = b;
    sb->cap = cap;
  }
  memcpy(sb->buf + sb->len, s, n);
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
  char *big = kc__alloc(sb->rt, (size_t)n + 1);
  if (!big) {
    sb->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  kc__sb_append(sb, big, (size_t)n);
  kc__free(sb->rt, big);
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
  kc__free(sb->rt, sb->buf);
  sb->buf = NULL;
  sb->len = sb->cap = 0;
}

/* ------------------------------------------------------------ hashing */

uint64_t kc__hash(const void *data, size_t len) { return XXH3_64bits(data, len); }

uint64_t kc__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t kc__next_id(void) {
  static _Atomic uint64_t next = 1;
  return kc__fetch_add_relaxed(&next, 1);
}

/* ------------------------------------------------- hex, runtime-less memory */

void kc__hex(const uint8_t *b, size_t n, char *out) {
  static const char d[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = d[b[i] >> 4];
    out[2 * i + 1] = d[b[i] & 15];
  }
  out[2 * n] = 0;
}

int kc__hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void *kc__xalloc(kc_runtime *rt, size_t n) { return rt ? kc__alloc(rt, n) : malloc(n ? n : 1); }
void *kc__xcalloc(kc_runtime *rt, size_t n) { return rt ? kc__calloc(rt, n) : calloc(1, n ? n : 1); }
void *kc__xrealloc(kc_runtime *rt, void *p, size_t n) {
  return rt ? kc__realloc(rt, p, n) : realloc(p, n ? n : 1);
}
void kc__xfree(kc_runtime *rt, void *p) {
  if (rt) kc__free(rt, p);
  else free(p);
}
