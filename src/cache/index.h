/* SPDX-License-Identifier: MIT */
/*
 * cache/index.h -- the store's index (index.c), its summary (summary.c,
 * below the index) and the evictions that use them (evict.c: a write's,
 * and the full one of the commands, kc__store_gc). For each of the 256 bucket
 * directories a small file says what entry files the bucket holds (key,
 * size, last use as far as the index knows, backend), and one summary file
 * holds each bucket's totals, so that the eviction a write triggers and
 * `kcache stats` read one file (and stat the bucket directories) instead
 * of listing and opening every entry.
 *
 *   ROOT/v1/index/ab        the index of bucket ROOT/v1/ab, and its lock
 *   ROOT/v1/index/summary   256 slots of 192 bytes, slot b for bucket b
 *
 * Index file, little-endian:
 *
 *    0  magic "KCINDEX2"            8 (an index of kcache 0.3, "KCINDEX1",
 *                                   reads as damaged: rebuilt)
 *    8  bucket                      u32
 *   12  dirty                       u32 (nonzero: a change is under way, or
 *                                   its writer died; not in the checksum)
 *   16  count                       u64
 *   24  the bucket directory's mtime (ns) when it was written   i64
 *   32  the bucket directory's inode                           u64
 *   40  checksum                    u64 (XXH3-64 over bytes 0..11, 16..39
 *                                   and the records)
 *   48  count records of 48 bytes: key (16), file size (u64), last use
 *       (mtime, ns, i64), backend (8 bytes, NUL-padded; all zero: the
 *       entry could not be read when it was indexed), the entry name's
 *       hash (u64, kc__index_name_hash; 0: not known)
 *
 * Summary slot: checksum u64 (XXH3-64 of bytes 8..191), bucket u32, number
 * of backends u32, the bucket directory's mtime i64 and inode u64 as its
 * index recorded them, count, bytes, damaged u64, oldest and newest last
 * use i64, then 5 x (backend 8 bytes, count u64, bytes u64).
 *
 * Both are derived data, never trusted over the directory. An index that
 * is missing, damaged (size, magic, checksum), dirty, or stale (the bucket
 * directory's mtime or inode is not what it recorded: someone changed the
 * bucket without the index; kcache's own lock and temp files are elsewhere,
 * format.h, so a write finds the index fresh) is rebuilt from that bucket's directory by
 * whoever reads it (a readdir and an lstat per file; the backend of a key
 * it knew is kept, a new key's is peeked at by the kcache command, and left
 * unknown by the library), and written back when the store is writable. A slot counts only when its checksum
 * is right and its directory state is the bucket directory's now; else that bucket's index is read instead
 * (and the slot written again). Last use is the entry's mtime when it was indexed: hits touch the file only,
 * and eviction checks each candidate's mtime before it removes it.
 *
 * Every change kcache makes to a bucket's entries (an entry renamed into
 * place, a damaged one removed, an eviction) happens inside an index transaction (kc__index_begin ..
 * _commit): a flock on the bucket's index file (one writer per bucket, across threads and processes), the
 * dirty mark, the change, then the new index written in place (image with the mark, length, mark cleared; no
 * fsync) and its slot. Readers take no lock: a reader that sees part of a rewrite sees the mark or a wrong
 * checksum, and takes the lock to read again. A writer killed in the middle leaves the mark (or a changed
 * directory): readers rebuild.
 *
 * Limits: the directory's mtime moves in the kernel's clock ticks (a few
 * ms), so a change made behind kcache's back in the same tick as kcache's
 * last change of that bucket is seen only at the bucket's next change, or
 * by `kcache gc` (which rebuilds every bucket's index). Entries in the
 * wrong bucket directory are not indexed (never looked up; gc evicts them).
 */
#ifndef KC_CACHE_INDEX_H
#define KC_CACHE_INDEX_H

#include "cache/dir.h"

typedef struct kc__index_rec {
  uint8_t key[16];
  uint64_t size; /* of the file */
  int64_t mtime_ns; /* last use, as far as the index knows */
  char backend[8]; /* NUL-padded (not terminated when 8 long); "": unreadable when indexed;
                    * KC__BACKEND_UNKNOWN first: not read yet */
  uint64_t name; /* kc__index_name_hash of the entry's name; 0: not known (with backend "" or unknown,
                  * or from a rebuild that kept a backend but read no name) */
} kc__index_rec;
/* What an index record keeps of an entry name (XXH3-64, never 0): `kcache
 * show NAME` and `explain` read only the entries whose record has it. */
uint64_t kc__index_name_hash(const char *name);

/* The library rebuilds a bucket's index without opening its entries (a
 * readdir and an lstat per file): an entry it did not know gets this
 * backend, until `kcache stats` (kc__index_get_slot) or gc reads it. */
#define KC__BACKEND_UNKNOWN '\x01'

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
/* The same, always under the bucket's lock, writing its summary slot too,
 * and reading the entries whose backend the index does not know. */
bool kc__index_get_slot(const kc__heap *mem, const char *vdir, int b, bool write, kc__index_set *out);
/* kc__index_get, then, when some record's backend or name is not known,
 * kc__index_get_slot (which reads those entries): every record known,
 * save entries that cannot be read (backend ""). */
bool kc__index_get_known(const kc__heap *mem, const char *vdir, int b, bool write, kc__index_set *out);
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

/* Rebuilds every bucket's index from its directory (kc__store_gc's end). */
void kc__index_rebuild_all(const kc__heap *mem, const char *vdir);

/* ------------------------------------------------- the summary (summary.c) */

/* Below the index: the index writes a bucket's slot, and asks for the
 * summary's totals (kc__index_summarize, index.c); the summary knows no
 * index but its records. */

/* The bucket directory's mtime (ns) and inode, as an index and its slot
 * record them; false if it is not there. */
bool kc__index_dir_state(const char *vdir, int b, int64_t *mt, uint64_t *ino);

#define KC__SUMMARY_BACKENDS 5

typedef struct kc__index_tally {
  char backend[8]; /* as in kc__index_rec */
  uint64_t count, bytes;
} kc__index_tally;

/* What a bucket (a slot of the summary), or the store, holds. */
typedef struct kc__index_summary {
  uint64_t count, bytes, damaged;
  int64_t oldest, newest; /* last uses as the index records them; 0: none */
  kc__index_tally be[KC__SUMMARY_BACKENDS];
  int nbe;
  bool overflow; /* more backends than be holds: the tally is partial */
} kc__index_summary;

void kc__summary_add_recs(kc__index_summary *s, const kc__index_rec *r, size_t n);
void kc__summary_merge(kc__index_summary *into, const kc__index_summary *s);
/* Writes bucket b's slot: the totals of r[0..n), dir state mt, ino. */
void kc__summary_put(const char *vdir, int b, const kc__index_rec *r, size_t n, int64_t mt, uint64_t ino);
/* Every slot into slots; valid[b] when slot b is sound and matches its
 * bucket directory (a bucket that does not exist is valid and empty).
 * False if there is no summary file. */
bool kc__summary_read(const char *vdir, kc__index_summary slots[256], bool valid[256]);
/* (index.c) The whole store's totals: the valid slots, and for each other bucket its
 * index (under its lock; rebuilt, and its slot written, when write). False
 * when out of memory. */
bool kc__index_summarize(const kc__heap *mem, const char *vdir, bool write, kc__index_summary *total);

/* ------------------------------------------------- eviction (evict.c) */

typedef void (*kc__progress_fn)(void *ud, size_t done, size_t total);

typedef struct kc__gc_result {
  uint64_t entries_before, bytes_before, entries_after, bytes_after;
  uint64_t evicted, evicted_bytes, temps_removed, locks_removed;
  /* kc__store_gc: the entries it chose and could not remove (an unlink that
   * failed; one that vanished meanwhile is not counted), and the first's
   * path and errno, for the command to say why */
  uint64_t failed;
  int fail_errno;
  char fail_path[PATH_MAX];
} kc__gc_result;

/* Removes least recently used entries until the store holds at most
 * `target` bytes, stale temp files (older than an hour) and abandoned lock
 * files (in vdir/tmp and vdir/locks, and those an earlier kcache left in
 * the bucket directories), rewrites the shared counters with exact values and rebuilds every
 * bucket's index (kc__index_rebuild_all). A whole-store scan: for `kcache gc`, `clear`
 * and `verify --repair`; a write's eviction is kc__store_evict. wait:
 * block on another evictor, else return KC_EBUSY at once. */
kc_status kc__store_gc(const kc__heap *mem, const char *vdir, uint64_t target, bool wait,
                       kc__progress_fn progress, void *ud, kc__gc_result *out);

/* The incremental eviction of a write: the least recently used entries
 * (from the index; each candidate's mtime checked first, and a candidate
 * used since goes back in line) are removed until the store holds at most
 * target bytes or max_victims were removed. One evictor at a time
 * (gc.lock): KC_EBUSY at once if another is at work. The shared counters'
 * bytes and entries are set from the index when they were unknown. */
kc_status kc__store_evict(const kc__heap *mem, const char *vdir, uint64_t target, size_t max_victims,
                          kc__gc_result *out);

#endif /* KC_CACHE_INDEX_H */
