/* SPDX-License-Identifier: MIT */
/*
 * core/cache_glue.h -- the engine's hooks into the cache tiers, implemented in
 * src/core/cache_glue.c on top of the disk cache (cache/cache.h) and the
 * remote tier (remote/remote.h). The engine includes only this; the glue
 * is the one place that sees both a code instance and the cache.
 *
 * Locks (see core/core.h for the engine's): the per-key flock is taken
 * while holding kc__spec.lock and held across the compile; the glue's
 * probe lock is taken while holding kc__spec.lock (never a context's lock),
 * and the backend's link and unlink of a trial load run under it; the
 * cache's and the remote tier's locks are leaves (doc/locks.md).
 */
#ifndef KC_CORE_CACHE_GLUE_H
#define KC_CORE_CACHE_GLUE_H

#include "cache/cache.h"
#include "core/core.h"

/* One disk lookup of ci_get: a key, and possibly the cross-process lock. */
typedef kc__cache_txn kc__store_txn;

/* Opens rt's cache tiers from its resolved configuration (rt->conf). Never
 * fails: without a usable directory, rt->store stays NULL (memory only,
 * one warning). */
void kc__store_open(kc_runtime *rt);
/* The store's part of resolving a configuration (config.c): max_size from
 * the kcache.conf of the store conf names, where the store is trusted. */
void kc__store_config_file(kc__config *conf);
/* Frees them (and the probe context). Before the backend closes. */
void kc__store_close(kc_runtime *rt);

/* Called by ci_get with the code instance prepared (spec, source, params,
 * nparams, sig prefilled) before compiling. True on a hit: ci->artifact,
 * ci->artifact_size and ci->sig[] come from the cache, the backend accepted
 * the artifact, and nothing is held. False on a miss: the caller compiles
 * and must then call kc__store_finish (the txn may hold the key's lock). */
bool kc__store_fetch(kc_runtime *rt, kc__ci *ci, const kc__closure *c, kc__store_txn *txn);
/* After the compile of a miss: writes the entry if st is KC_OK, releases the
 * lock, and evicts if the store went past its bound. */
void kc__store_finish(kc_runtime *rt, kc__store_txn *txn, kc_status st, const kc__ci *ci, const kc__sb *log);
/* The backends' kc__bsvc.better (backend.h), for kc__bsvc_of. */
bool kc__store_better(const kc__bsvc *sv, const void *old, size_t old_size, const void *bytes, size_t size);
/* The backends' kc__bsvc.writable: kc_cache_writable of the services' runtime. */
bool kc__store_writable(const kc__bsvc *sv);
/* Around fork() (core/fork.c): takes the probe lock; gives it back (in the
 * parent, or in the child). The remote tier has its own fork hook. */
void kc__store_fork_lock(kc_runtime *rt);
void kc__store_fork_unlock(kc_runtime *rt, bool child);
/* Adds the disk and remote counters to *out. */
void kc__store_stats(const kc_runtime *rt, kc_stats *out);

#endif /* KC_CORE_CACHE_GLUE_H */
