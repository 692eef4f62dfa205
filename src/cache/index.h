/* SPDX-License-Identifier: MIT */
/*
 * cache/index.h -- the store's index (index.c): for each of the 256 bucket
 * directories, a small file that says what entry files the bucket holds
 * (key, size, last use as far as the index knows, backend), so that the
 * eviction a write triggers and `kcache stats` read 256 small files instead
 * of listing and opening every entry; and the eviction that uses it.
 *
 *   ROOT/v1/index/ab             the index of bucket ROOT/v1/ab
 *   ROOT/v1/index/.tmp-ab-<pid>-<tid>-<n>   an index being written
 *
 * Index file, little-endian:
 *
 *    0  magic "KCINDEX1"            8
 *    8  bucket                      u32
 *   12  dirty                       u32 (nonzero: a change is under way, or
 *                                   its writer died; not in the checksum)
 *   16  count                       u64
 *   24  the bucket directory's mtime (ns) when it was written   i64
 *   32  the bucket directory's inode                           u64
 *   40  checksum                    u64 (XXH3-64 over bytes 0..11, 16..39
 *                                   and the records)
 *   48  count records of 40 bytes: key (16), file size (u64), last use
 *       (mtime, ns, i64), backend (8 bytes, NUL-padded; all zero: the
 *       entry could not be read when it was indexed)
 *
 * It is derived data, never trusted over the directory: an index that is
 * missing, damaged (size, magic, checksum), dirty, or stale (the bucket
 * directory's mtime or inode is not what it recorded: someone changed the
 * bucket without the index) is rebuilt from that bucket's directory by
 * whoever reads it (a readdir and an lstat per file; an entry whose size
 * changed is peeked at for its backend), and written back when the store is
 * writable. Its last use is the entry's mtime when it was indexed: hits
 * touch the file only, and eviction checks each candidate's mtime before it
 * removes it.
 *
 * Every change kcache makes to a bucket's entries happens inside an index
 * transaction (kc__index_begin .. kc__index_commit): a flock on the bucket
 * directory (one writer per bucket, across threads and processes), the
 * dirty mark, the change, then the new index (temp file, rename; no fsync:
 * a torn index is damaged, and rebuilt). Readers take no lock: they see the
 * old file or the new one.
 */
#ifndef KC_CACHE_INDEX_H
#define KC_CACHE_INDEX_H

#include "cache/dir.h"

typedef struct kc__index_rec {
  uint8_t key[16];
  uint64_t size; /* of the file */
  int64_t mtime_ns; /* last use, as far as the index knows */
  char backend[8]; /* NUL-padded (not terminated when 8 long); "" : unreadable when indexed */
} kc__index_rec;

typedef struct kc__index_set {
  kc__index_rec *rec;
  size_t n, cap;
} kc__index_set;

void kc__index_set_free(const kc__heap *mem, kc__index_set *s);

/* Appends the records of bucket b (0..255) to *out, from its index when it
 * is sound and fresh, else rebuilt (and written back when write is true).
 * *rebuilt (may be NULL) is set when it had to be rebuilt. False only when
 * out of memory. */
bool kc__index_get(const kc__heap *mem, const char *vdir, int b, bool write, kc__index_set *out,
                   bool *rebuilt);
/* Every bucket's records: the whole store as the index knows it. */
bool kc__index_get_all(const kc__heap *mem, const char *vdir, bool write, kc__index_set *out);

/* A change to one bucket's entries. */
typedef struct kc__index_txn {
  int fd; /* the bucket directory, flocked; -1: no lock (the change goes unindexed: the index is then stale)
           */
  int bucket;
  bool sound; /* cur is the index as it was: changes apply to it, else commit rebuilds */
  kc__index_set cur;
} kc__index_txn;

/* Locks bucket b and marks its index dirty. */
void kc__index_begin(const kc__heap *mem, const char *vdir, int b, kc__index_txn *t);
/* Records that the entry r->key is now r (added or replaced). */
void kc__index_put(const kc__heap *mem, kc__index_txn *t, const kc__index_rec *r);
/* Records that the entry of key is gone. */
void kc__index_del(kc__index_txn *t, const uint8_t key[16]);
/* Writes the bucket's new index (rebuilt from the directory when it was not
 * sound), unlocks, frees t's records. */
void kc__index_commit(const kc__heap *mem, const char *vdir, kc__index_txn *t);

/* Fills r for the entry of key in the file described by st, its backend
 * read from the image img (size bytes; NULL: none). */
void kc__index_rec_make(kc__index_rec *r, const uint8_t key[16], const struct stat *st, const void *img,
                        size_t size);

/* The incremental eviction of a write: the least recently used entries
 * (from the index; each candidate's mtime checked first, and a candidate
 * used since goes back in line) are removed until the store holds at most
 * target bytes or max_victims were removed. One evictor at a time
 * (gc.lock): KC_EBUSY at once if another is at work. The shared counters'
 * bytes and entries are set from the index when they were unknown. */
kc_status kc__store_evict(const kc__heap *mem, const char *vdir, uint64_t target, size_t max_victims,
                          kc__gc_result *out);

/* Rebuilds every bucket's index from its directory (kc__store_gc's end). */
void kc__index_rebuild_all(const kc__heap *mem, const char *vdir);

#endif /* KC_CACHE_INDEX_H */
