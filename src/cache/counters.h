/* SPDX-License-Identifier: MIT */
/*
 * cache/counters.h -- the disk cache's counters (counters.c): the shared
 * file vdir/stats that every process using one store read-modify-writes,
 * and the X-macro lists from which the per-runtime atomics, the kc_stats
 * copy and the file layout are all made.
 */
#ifndef KC_CACHE_COUNTERS_H
#define KC_CACHE_COUNTERS_H

#include "base/base.h"
#include "kcache.h"

/* A runtime's own counters: kc_stats.disk_NAME. */
#define KC__DISK_COUNTERS(X) \
  X(hits) \
  X(misses) \
  X(writes) \
  X(evictions) \
  X(repairs) \
  X(write_failures) \
  X(lock_timeouts) \
  X(stale)

/* The shared file's counters, in the file's order. */
#define KC__STORE_FILE_COUNTERS(X) \
  X(bytes) \
  X(entries) \
  X(hits) \
  X(misses) \
  X(writes) \
  X(evictions) \
  X(repairs)

typedef struct kc__disk_counters {
#define KC__X(name) _Atomic uint64_t name;
  KC__DISK_COUNTERS(KC__X)
#undef KC__X
} kc__disk_counters;

/* Copies c into out's disk_* fields. */
void kc__disk_counters_copy(const kc__disk_counters *c, kc_stats *out);

/* The shared counters in vdir/stats. */
typedef struct kc__store_counters {
#define KC__X(name) uint64_t name;
  KC__STORE_FILE_COUNTERS(KC__X)
#undef KC__X
  bool valid; /* the file existed and was well formed */
  bool sized; /* bytes and entries are known (a scan set them; writes kept them) */
} kc__store_counters;

void kc__store_counters_read(const char *vdir, kc__store_counters *out);
/* Adds the deltas (bytes and entries may be negative) under the file's lock.
 * Sets exact values for bytes/entries instead when `set` is true (a scan).
 * *now (may be NULL) gets the values written. False if the file could not
 * be written. */
bool kc__store_counters_add(const char *vdir, int64_t bytes, int64_t entries, uint64_t hits, uint64_t misses,
                            uint64_t writes, uint64_t evictions, uint64_t repairs, bool set,
                            kc__store_counters *now);
/* Zeroes the counters of use (every file counter but bytes and entries)
 * under the file's lock: `kcache stats --zero`. True if there was nothing
 * to zero (no file); false with errno if the file could not be written. */
bool kc__store_counters_zero(const char *vdir);

#endif /* KC_CACHE_COUNTERS_H */
