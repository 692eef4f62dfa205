/* SPDX-License-Identifier: MIT */
/*
 * cache/cache.h -- the disk cache as the engine sees it (store.c): a
 * persistent, content-addressed store of bytes shared by the threads and
 * processes that use one directory, with single flight across processes (a
 * flock per key), a size bound (LRU eviction, a few entries per write, from
 * the store's index: index.h), and a further tier behind it (the remote
 * tier, driven through kc__cache_tier).
 *
 * The cache never sees a code instance, a linked object or a backend. Its
 * caller (src/core/cache_glue.c) asks with the identity fields of a key and
 * a verify callback that decides whether an entry's bytes and signature are
 * usable (the engine's trial load); it hands back what a compile made.
 *
 * Locks: the per-key flock is taken by kc__cache_fetch and held until
 * kc__cache_finish (the engine holds its kc__spec.lock across both, and
 * across the compile between them); the flocks on stats are held for a
 * few system calls and nothing is taken while holding them; a bucket's
 * index flock (index.h) is held across one change of the bucket, and is
 * taken under the per-key flock and under gc.lock, never the other way.
 * After a local miss the tier is asked while the per-key flock is held; its
 * locks are leaves.
 *
 * Including this header gives the whole cache API: the formats, keys,
 * the codec, the directory and the counters.
 */
#ifndef KC_CACHE_CACHE_H
#define KC_CACHE_CACHE_H

#include "cache/codec.h"
#include "cache/counters.h"
#include "cache/dir.h"
#include "cache/index.h"
#include "cache/io.h"
#include "cache/key.h"
#include "base/config.h"
#include "cache/trust.h"

/* The old name of the size parser, for the kcache command and the tests. */
#define kc__store_parse_size kc__parse_size

typedef struct kc__cache kc__cache;

typedef struct kc__cache_config {
  const kc__heap *mem; /* the allocator (and owner of error messages) only; never dereferenced here */
  /* The resolved configuration (base/config.h; NULL: the defaults), the
   * one source of the cache's KC_CACHE_* settings: KC_CACHE_DISABLE,
   * KC_CACHE_DIR (the root), KC_CACHE_SHARED and KC_CACHE_KEY (trust.h),
   * KC_CACHE_MAXSIZE (else ROOT/kcache.conf's max_size, else 1 GiB) and
   * KC_CACHE_LOCK_TIMEOUT (else 60 s). Read while opening only: tests and
   * benchmarks build one for a store of their own (kc__config_set). */
  const kc__config *conf;
  /* Where warnings go (NULL: stderr, "kcache: warning: MSG"). */
  void (*warn)(void *ud, const char *msg);
  void *warn_ud;
} kc__cache_config;

/* Opens a cache. NULL when there is none (disabled, no usable directory,
 * a directory that is not trusted (trust.h), a key that cannot be used:
 * then one warning says so); never fails otherwise. A shared store without
 * KC_CACHE_KEY is opened with one warning that its group is trusted. */
kc__cache *kc__cache_open(const kc__cache_config *cfg);
/* Frees c. A tier set on it must be closed first (it may write into c). */
void kc__cache_close(kc__cache *c);
const char *kc__cache_root(const kc__cache *c);
const char *kc__cache_vdir(const kc__cache *c);
bool kc__cache_writable(const kc__cache *c);
/* The cache's counters into out's disk_* fields. */
void kc__cache_stats(const kc__cache *c, kc_stats *out);

/* ------------------------------------------------------- a tier behind it */

/* Verifies an image (taken over: free it with mem's allocator). */
typedef bool (*kc__tier_accept_fn)(void *ud, void *image, size_t size, char *why, size_t wl);
/* Work run on the tier's own thread, after which it frees image. */
typedef void (*kc__tier_defer_fn)(void *ud, const uint8_t key[16], const void *image, size_t size);

typedef struct kc__cache_tier {
  void *self;
  /* After a local miss: true when an image came and accept took it; else
   * *lock may be nonzero (this caller holds the key in the tier). */
  bool (*fetch)(void *self, const uint8_t key[16], kc__tier_accept_fn accept, void *ud, uint64_t *lock);
  /* After a compile: image (taken over; NULL: none) and the lock (0: none). */
  void (*upload)(void *self, const uint8_t key[16], void *image, size_t size, uint64_t lock);
  /* Runs fn later on the tier's thread; false if it was not queued (image
   * is then still the caller's). */
  bool (*defer)(void *self, kc__tier_defer_fn fn, void *ud, const uint8_t key[16], void *image, size_t size);
} kc__cache_tier;

/* Puts tier (copied; NULL: none) behind c. Before the first fetch. */
void kc__cache_set_tier(kc__cache *c, const kc__cache_tier *tier);

/* ------------------------------------------------------------- lookups */

/* Whether a decoded entry is one the caller can use. */
typedef enum kc__verdict {
  KC__ENTRY_GOOD, /* used: the caller copied what it needs */
  KC__ENTRY_BAD, /* another kernel, or bytes the backend refuses: damage */
  KC__ENTRY_UNSURE, /* out of memory: it could not tell (not the entry's fault) */
  /* sound, but a file it was compiled from is not the same any more: a
   * miss, and the compile that follows writes over it */
  KC__ENTRY_STALE,
} kc__verdict;
typedef kc__verdict (*kc__cache_verify_fn)(void *ud, const kc__entry *e);

/* One lookup: a key, and possibly the cross-process lock. */
typedef struct kc__cache_txn {
  uint8_t key[16];
  bool active; /* the key is computed: kc__cache_finish may write the entry */
  int lock_fd; /* the per-key lock, or -1 */
  void *defs; /* the closure, encoded (a DEFS section) for the entry */
  size_t defs_len;
  uint64_t remote_lock; /* nonzero: this lookup holds the key's lock in the tier */
} kc__cache_txn;

/* The key of p, then the disk and the tier. True on a hit: verify said
 * GOOD for an entry, and nothing is held. False on a miss: the caller
 * compiles and must then call kc__cache_finish (the txn may hold the key's
 * lock). c may be NULL (a miss that holds nothing). */
bool kc__cache_fetch(kc__cache *c, const kc__key_parts *p, kc__cache_verify_fn verify, void *ud,
                     kc__cache_txn *txn);

/* What a compile made, for its entry. */
typedef struct kc__cache_result {
  uint64_t compile_ns;
  const char *tu; /* hashed into the metadata */
  size_t tu_len;
  uint32_t nsig;
  const uint64_t *sig;
  const void *artifact;
  size_t artifact_size;
  const char *log;
  size_t log_len;
  const kc__filedep *files; /* nfiles: the files outside the table it read (none UNKNOWN) */
  uint32_t nfiles;
} kc__cache_result;

/* After the compile of a miss: writes the entry of p and res (p NULL: none:
 * the compile failed) to disk and the tier, releases the locks, and, if the
 * store went past its bound, evicts the least recently used entries
 * towards 90% of it, at most KC__EVICT_BATCH of them (kc__store_evict). */
void kc__cache_finish(kc__cache *c, kc__cache_txn *txn, const kc__key_parts *p, const kc__cache_result *res);

/* Writes the entry of key again with the artifact bytes (size bytes) in
 * place of old (old_size), all else kept, if the entry on disk still holds
 * exactly old and no compile of the key holds its lock now (it is not
 * waited for); the write replaces the file atomically, so a reader sees
 * one entry or the other, both sound. Not sent to the tier. True if it was
 * written. (A backend whose binary gets better after its first launch:
 * the OpenCL backend on PoCL, cache_glue.c.) */
bool kc__cache_replace_artifact(kc__cache *c, const uint8_t key[16], const void *old, size_t old_size,
                                const void *bytes, size_t size);

#endif /* KC_CACHE_CACHE_H */
