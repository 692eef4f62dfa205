/* SPDX-License-Identifier: MIT */
/* misc.c -- the small leaves of src/base: hashing (hash.h), clocks
 * (clock.h) and timed waits on them (mutex.h), ids (id.h) and hex digits
 * (bytes.h). */
#include "base/atomics.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/id.h"
#include "base/mutex.h"

#include <errno.h>
#include <time.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t kc__hash(const void *data, size_t len) { return XXH3_64bits(data, len); }

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t kc__now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
uint64_t kc__realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }

void kc__nap_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

void kc__nap_us(uint64_t us) { kc__nap_ns(us * 1000); }

bool kc__cond_init_monotonic(pthread_cond_t *c) {
  pthread_condattr_t a;
  if (pthread_condattr_init(&a) != 0) return false;
  bool ok = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0 && pthread_cond_init(c, &a) == 0;
  pthread_condattr_destroy(&a);
  return ok;
}

bool kc__cond_wait_until(pthread_cond_t *c, kc__mutex *m, uint64_t deadline_ns) {
  if (kc__now_ns() >= deadline_ns) return false;
  struct timespec until = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
  return pthread_cond_timedwait(c, m, &until) != ETIMEDOUT || kc__now_ns() < deadline_ns;
}

uint64_t kc__next_id(void) {
  static _Atomic uint64_t next = 1;
  return kc__fetch_add_relaxed(&next, 1);
}

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
