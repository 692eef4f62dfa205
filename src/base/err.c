/* SPDX-License-Identifier: MIT */
/* err.c -- per-thread error messages keyed by an owner id (err.h); the
 * log sinks are log.c's.
 *
 * Compiler logs can be long, so the message lives in a malloc'd block (not
 * a runtime's allocator: it may outlive the runtime) that a thread-exit
 * destructor frees. */
#include "base/err.h"
#include "base/mutex.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kc__errbuf {
  uint64_t owner;
  size_t cap;
  char msg[];
} kc__errbuf;

static pthread_key_t kc__err_key;
static kc__once kc__err_once = KC__ONCE_INIT;
static bool kc__err_key_ok;

static void kc__err_key_init(void) { kc__err_key_ok = pthread_key_create(&kc__err_key, free) == 0; }

kc_status kc__verr_owner(uint64_t owner, kc_status st, const char *fmt, va_list ap) {
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
  if (!e) return st; /* out of memory: keep the old message, better than none */
  e->cap = need;
  vsnprintf(e->msg, e->cap, fmt, ap);
  e->owner = owner;
  pthread_setspecific(kc__err_key, e);
  free(old);
  return st;
}

kc_status kc__err_owner(uint64_t owner, kc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc__verr_owner(owner, st, fmt, ap);
  va_end(ap);
  return st;
}

const char *kc__errmsg_owner(uint64_t owner) {
  kc__call_once(&kc__err_once, kc__err_key_init);
  if (!kc__err_key_ok) return "";
  const kc__errbuf *e = pthread_getspecific(kc__err_key);
  return e && e->owner == owner ? e->msg : "";
}
