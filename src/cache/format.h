/* SPDX-License-Identifier: MIT */
/*
 * cache/format.h -- the constants of the disk cache's formats: the entry
 * file, the directory layout, and the ONE list of identity fields from
 * which both the key (key.c) and an entry's metadata (codec.c) are made.
 *
 * On disk (ROOT is kc_options.cache_dir, $KC_CACHE_DIR, $XDG_CACHE_HOME/kcache
 * or ~/.cache/kcache):
 *
 *   ROOT/v1/                     one directory per store format version
 *   ROOT/v1/stats                shared counters (bytes, entries, hits...),
 *                                read-modify-written under flock; a hint
 *                                that a scan of the directory corrects
 *   ROOT/v1/gc.lock              one evictor at a time (flock)
 *   ROOT/v1/index/ab             the index of bucket ab (cache/index.h),
 *                                flocked while ab's entries change
 *   ROOT/v1/index/summary        each bucket's totals (cache/index.h)
 *   ROOT/v1/ab/<32 hex>.kce      the entry of key ab...: header + payload
 *   ROOT/v1/locks/<32 hex>.lock  exists while a process compiles that key
 *   ROOT/v1/tmp/<key>-<pid>-<tid>-<n>   an entry being written (renamed
 *                                into its bucket: the same file system)
 *
 * A bucket directory changes only when an entry is created, replaced or
 * removed (its index judges itself fresh by the directory's mtime, index.h);
 * lock and temp files, made at every miss and write, have directories of
 * their own. Both are flat: they hold only the compiles and writes in flight
 * (and what dead processes left, until `kcache gc`), not one file per entry.
 * A store written by an earlier kcache may hold ab/<key>.lock and
 * ab/.tmp-* files: the sweep of kc__store_gc removes those too.
 *
 * Entry file, little-endian:
 *
 *    0  magic "KCACHE\x1a\n"       8
 *    8  format version (1)         u32
 *   12  header size (64)           u32
 *   16  key                        16 bytes (XXH3-128, high half first)
 *   32  payload length             u64 (the file is exactly 64 + this)
 *   40  payload checksum           u64 (XXH3-64 of the payload)
 *   48  reserved (0)               u64
 *   56  header checksum            u64 (XXH3-64 of bytes 0..55)
 *   64  payload: sections, each u32 tag, u32 0, u64 length, bytes:
 *         META      (u32 klen, u32 vlen, key, value with its NUL)...
 *         DEFS      u32 n, then n x (u32 len, name+NUL, u64 len, text+NUL)
 *         LOG       the compiler's output
 *         SIG       u32 n, n x u64 (KC__SIG of each parameter)
 *         ARTIFACT  what the backend compiled
 *         FILES     (only if the compile read files outside kcache's
 *                   table) u32 n, then n x (u32 flags, u32 path length
 *                   with its NUL, u64 size, u64 content hash, u64 mtime,
 *                   u64 ctime (ns), u64 dev, u64 ino, absolute path+NUL):
 *                   base/filedep.h; a lookup whose files are not all the
 *                   same any more is a miss (KC__ENTRY_STALE)
 *
 * In a store with KC_CACHE_KEY the file is this image followed by a MAC
 * trailer, "KCMAC256" and HMAC-SHA256 (40 bytes: base/hmac.h, trust.h);
 * readers that do not verify it take it off (kc__entry_read, _peek).
 *
 * Only the codec (codec.c) reads or writes these bytes; everyone else (the
 * store, the remote tier, the kcache command) asks it.
 */
#ifndef KC_CACHE_FORMAT_H
#define KC_CACHE_FORMAT_H

#define KC__STORE_FORMAT 1u
#define KC__STORE_HEADER 64u
#define KC__STORE_MAGIC "KCACHE\x1a\n"
#define KC__STORE_DEFAULT_MAX (1ull << 30)
#define KC__STORE_DEFAULT_LOCK_MS 60000u
/* The directories of lock files and temp files, under ROOT/v1. */
#define KC__STORE_LOCKS_DIR "locks"
#define KC__STORE_TMP_DIR "tmp"
/* The most entries that the write which takes the store past its bound
 * evicts (index.h, kc__store_evict): the next one past it goes on. */
#define KC__EVICT_BATCH 32u
/* The most buckets without a usable summary slot that one such eviction
 * reads (and rebuilds) the index of; the others wait for the next. */
#define KC__EVICT_REBUILDS 16u
/* An entry larger than this is damage, not a kernel. */
#define KC__STORE_MAX_ENTRY (1ull << 30)

enum {
  KC__SEC_META = 1,
  KC__SEC_DEFS = 2,
  KC__SEC_LOG = 3,
  KC__SEC_SIG = 4,
  KC__SEC_ARTIFACT = 5,
  KC__SEC_FILES = 6
};
/* The most file records an entry holds (more: the compile is not stored). */
#define KC__STORE_MAX_FILES 4096u

/* The identity of a compile: the text fields that enter the key and that an
 * entry's metadata records, in the metadata's order. X(name, key tag,
 * hashed first): the library's version is hashed before the others (the
 * order of every key made so far), but written after them. */
#define KC__IDENTITY_FIELDS(X) \
  X(backend, 'B', 0) \
  X(identity, 'I', 0) \
  X(options, 'O', 0) \
  X(params, 'P', 0) \
  X(entry, 'E', 0) \
  X(library, 'L', 1)

#endif /* KC_CACHE_FORMAT_H */
