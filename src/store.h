/*
 * store.h -- the disk cache (store.c): the engine's hooks, content keys,
 * the entry file format, and the directory walks that the `kcache` command
 * and the tests share.
 *
 * On disk (ROOT is kc_options.cache_dir, $KC_CACHE_DIR, $XDG_CACHE_HOME/kcache
 * or ~/.cache/kcache):
 *
 *   ROOT/v1/                     one directory per store format version
 *   ROOT/v1/stats                shared counters (bytes, entries, hits...),
 *                                read-modify-written under flock; a hint
 *                                that a scan of the directory corrects
 *   ROOT/v1/gc.lock              one evictor at a time (flock)
 *   ROOT/v1/ab/<32 hex>.kce      the entry of key ab...: header + payload
 *   ROOT/v1/ab/<32 hex>.lock     exists while a process compiles that key
 *   ROOT/v1/ab/.tmp-<key>-<pid>-<tid>-<n>   an entry being written
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
 *
 * Locks (see kc_internal.h for the engine's): the per-key flock is taken
 * while holding kc__spec.lock and held across the compile; kc__store.probe_lock
 * is taken while holding kc__spec.lock (never a context's lock) and is a
 * leaf; the flocks on stats and gc.lock are held for a few system calls and
 * nothing is taken while holding them. After a local miss the remote tier
 * (remote.h) is asked while the per-key flock is held; its locks are leaves.
 */
#ifndef KC_STORE_H
#define KC_STORE_H

#include "kc_internal.h"

#define KC__STORE_FORMAT 1u
#define KC__STORE_HEADER 64u
#define KC__STORE_MAGIC "KCACHE\x1a\n"
#define KC__STORE_DEFAULT_MAX (1ull << 30)
#define KC__STORE_DEFAULT_LOCK_MS 60000u

enum { KC__SEC_META = 1, KC__SEC_DEFS = 2, KC__SEC_LOG = 3, KC__SEC_SIG = 4, KC__SEC_ARTIFACT = 5 };

typedef struct kc__store kc__store;

/* ------------------------------------------------------- engine hooks */

/* Opens rt's store from rt->opt and the environment. Never fails: without a
 * usable directory, rt->store stays NULL (memory only, one warning). */
void kc__store_open(kc_runtime *rt);
/* Frees the store (and its probe context). Before the backend closes. */
void kc__store_close(kc_runtime *rt);

/* One disk lookup of ci_get: a key, and possibly the cross-process lock. */
typedef struct kc__store_txn {
  uint8_t key[16];
  bool active;   /* the key is computed: kc__store_finish may write the entry */
  int lock_fd;   /* the per-key lock, or -1 */
  void *defs;    /* the closure, encoded (a DEFS section) for the entry */
  size_t defs_len;
  uint64_t remote_lock; /* nonzero: this lookup holds the key's lock in the remote tier */
} kc__store_txn;

/* Called by ci_get with the code instance prepared (spec, source, params,
 * nparams, sig prefilled) before compiling. True on a hit: ci->artifact,
 * ci->artifact_size and ci->sig[] come from the store, the backend accepted
 * the artifact, and nothing is held. False on a miss: the caller compiles
 * and must then call kc__store_finish (the txn may hold the key's lock). */
bool kc__store_fetch(kc_runtime *rt, kc__ci *ci, const kc__closure *c, kc__store_txn *txn);
/* After the compile of a miss: writes the entry if st is KC_OK, releases the
 * lock, and evicts if the store went past its bound. */
void kc__store_finish(kc_runtime *rt, kc__store_txn *txn, kc_status st, const kc__ci *ci,
                      const kc__sb *log);
/* Adds the disk counters to *out. */
void kc__store_stats(const kc_runtime *rt, kc_stats *out);

/* --------------------------------------------------------------- keys */

typedef struct kc__key_def {
  const char *name;
  const char *text;
  size_t len;
} kc__key_def;

/* Everything that changes what a backend makes of a kernel. */
typedef struct kc__key_parts {
  uint32_t format;      /* KC__STORE_FORMAT */
  const char *library;  /* KC_VERSION_STRING: backends' fixed flags live in the code */
  const char *backend;  /* "host", "opencl", "cuda" */
  const char *identity; /* compiler and device: path, --version, driver, arch */
  const char *options;  /* compile options, "" for none */
  const char *params;   /* canonical specialization parameters */
  const char *entry;    /* the kernel's name */
  const char *tu;       /* the translation unit (prelude, trampoline), may be NULL */
  size_t tu_len;
  const kc__key_def *defs; /* the closure in any order; hashed sorted by name */
  uint32_t ndefs;
} kc__key_parts;

/* XXH3-128 over every part, each length-prefixed; worlds never enter it. */
void kc__store_key(const kc__key_parts *p, uint8_t key[16]);
void kc__store_hex(const uint8_t key[16], char hex[33]);
/* Parses 32 hex digits; false if s is not exactly that. */
bool kc__store_unhex(const char *s, uint8_t key[16]);
/* XXH3-128 of one text, for metadata ("which definition changed"). */
void kc__store_text_hash(const char *text, size_t len, uint8_t out[16]);

/* ------------------------------------------------------------- entries */

/* A decoded entry. Strings point into buf and are NUL-terminated. */
typedef struct kc__entry {
  uint8_t key[16];
  uint32_t format;
  const char *backend, *identity, *options, *params, *entry, *library;
  uint64_t created_ns; /* CLOCK_REALTIME */
  uint64_t compile_ns;
  uint8_t tu_hash[16];
  uint32_t ndefs;
  kc__key_def *defs; /* allocated */
  uint32_t nsig;
  uint64_t *sig; /* allocated */
  const void *artifact;
  size_t artifact_size;
  const char *log;
  size_t log_len;
  void *buf; /* the whole file, owned */
  size_t size;
} kc__entry;

/* Memory comes from rt's allocator, or malloc when rt is NULL (the CLI). */

/* Decodes an entry file held in buf (taken over, freed on failure too). On
 * failure returns KC_EIO with why (a short reason) filled, or KC_ENOMEM
 * when memory ran out (the entry may be sound). */
kc_status kc__entry_decode(kc_runtime *rt, void *buf, size_t size, kc__entry *out, char *why,
                           size_t whylen);
/* Reads and decodes path. want_key (may be NULL) must equal the header's
 * key. KC_ENOTFOUND if there is no file; KC_EIO with why if it is bad. */
kc_status kc__entry_read(kc_runtime *rt, const char *path, const uint8_t *want_key, kc__entry *out,
                         char *why, size_t whylen);
/* Reads only the header and the metadata section of path (malloc): enough
 * to list a store quickly. The payload is not verified: defs, sig, log and
 * artifact stay empty. Same statuses as kc__entry_read. */
kc_status kc__entry_peek(const char *path, kc__entry *out, char *why, size_t whylen);
void kc__entry_free(kc_runtime *rt, kc__entry *e);
/* kc__entry_peek on the first n bytes of an entry image of `total` bytes
 * held in memory (the remote tier reads a value's head with GETRANGE). */
kc_status kc__entry_peek_mem(const void *buf, size_t n, size_t total, kc__entry *out, char *why, size_t wl);
/* Encodes e (buf, size, format ignored; key, strings, defs, sig, artifact,
 * log used) into a new file image. */
kc_status kc__entry_encode(kc_runtime *rt, const kc__entry *e, void **out, size_t *size);

/* ----------------------------------------------------------- directory */

/* The root that a runtime without cache_dir uses ($KC_CACHE_DIR, else
 * $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache). False if none. */
bool kc__store_default_root(char *out, size_t outlen);
/* ROOT/v1 */
void kc__store_vdir(const char *root, char *out, size_t outlen);
/* vdir/ab/<hex><suffix> */
void kc__store_path(const char *vdir, const uint8_t key[16], const char *suffix, char *out,
                    size_t outlen);
/* "1G", "512M", "100k", "12345", "1.5G" (powers of 1024). */
bool kc__store_parse_size(const char *s, uint64_t *out);
/* The size bound that $KC_CACHE_MAXSIZE asks for: unset, empty or 0 is the
 * default (1 GiB), as everywhere in kcache. False (and the default in *out)
 * if it is not a size. The library and the command read it through this one
 * function, so "0" can never mean "evict everything" in one of them. */
bool kc__store_env_max_size(uint64_t *out);

/* One file of the store, from a walk. */
typedef struct kc__store_file {
  char path[512];
  uint8_t key[16]; /* from the name */
  uint64_t size;
  int64_t mtime_ns; /* last use */
  bool misplaced;   /* the bucket directory does not match the name */
} kc__store_file;

/* Lists every entry file (*.kce) under vdir (rt's allocator, or malloc
 * when rt is NULL). Free *out with kc__store_list_free. */
kc_status kc__store_list(kc_runtime *rt, const char *vdir, kc__store_file **out, size_t *n);
void kc__store_list_free(kc_runtime *rt, kc__store_file *files);

typedef void (*kc__progress_fn)(void *ud, size_t done, size_t total);

typedef struct kc__gc_result {
  uint64_t entries_before, bytes_before, entries_after, bytes_after;
  uint64_t evicted, evicted_bytes, temps_removed, locks_removed;
} kc__gc_result;

/* Removes least recently used entries until the store holds at most
 * `target` bytes, stale temp files (older than an hour) and abandoned lock
 * files, and rewrites the shared counters with exact values. wait: block
 * on another evictor, else return KC_EBUSY at once. */
kc_status kc__store_gc(kc_runtime *rt, const char *vdir, uint64_t target, bool wait,
                       kc__progress_fn progress, void *ud, kc__gc_result *out);

/* The shared counters in vdir/stats. */
typedef struct kc__store_counters {
  uint64_t bytes, entries, hits, misses, writes, evictions, repairs;
  bool valid; /* the file existed and was well formed */
  bool sized; /* bytes and entries are known (a scan set them; writes kept them) */
} kc__store_counters;
void kc__store_counters_read(const char *vdir, kc__store_counters *out);
/* Adds the deltas (bytes and entries may be negative) under the file's lock.
 * Sets exact values for bytes/entries instead when `set` is true (a scan).
 * *now (may be NULL) gets the values written. False if the file could not
 * be written. */
bool kc__store_counters_add(const char *vdir, int64_t bytes, int64_t entries, uint64_t hits,
                            uint64_t misses, uint64_t writes, uint64_t evictions, uint64_t repairs,
                            bool set, kc__store_counters *now);

/* ---------------------------------------------------------- test hooks */

/* Of the next writes to any store (creating a bucket directory, a lock
 * file or a temp file, writing data), `skip` succeed and then n fail with
 * errno err, as a full or read-only disk would. (0, 0, 0) turns it off. */
void kc__store_test_fail_writes(int skip, int n, int err);

#endif /* KC_STORE_H */
