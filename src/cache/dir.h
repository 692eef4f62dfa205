/* SPDX-License-Identifier: MIT */
/*
 * cache/dir.h -- the store's directory (dir.c): where it is, the names of
 * its files, making it, listing it; reading entry files (entry_file.c); and
 * the store's configuration file. Garbage collection, which scans it, is in
 * index.h (evict.c).
 */
#ifndef KC_CACHE_DIR_H
#define KC_CACHE_DIR_H

#include "cache/codec.h"
#include "cache/counters.h"
#include "base/config.h"
#include "cache/trust.h"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>

/* The cache reads no environment variable and no option: its settings
 * come resolved, in a kc__config (base/config.h): KC_CACHE_DIR (with its
 * default from XDG_CACHE_HOME or HOME), KC_CACHE_DISABLE and
 * KC_CACHE_LOCK_TIMEOUT (store.c), KC_CACHE_MAXSIZE (conf.c),
 * KC_CACHE_SHARED and KC_CACHE_KEY (trust.c). */
/* The longest store root (bytes, less the NUL) whose every file's path
 * (ROOT/v1/locks/<32 hex digits>.lock, a temporary file's name beside an
 * entry) fits in PATH_MAX: the library keeps no disk cache at a longer
 * one, and the command refuses it. */
#define KC__STORE_ROOT_MAX (PATH_MAX - 160)
/* ROOT/v1 */
void kc__store_vdir(const char *root, char *out, size_t outlen);
/* vdir/ab/<hex><suffix> */
void kc__store_path(const char *vdir, const uint8_t key[16], const char *suffix, char *out, size_t outlen);
/* vdir/locks/<hex>.lock: the key's lock file (format.h) */
void kc__store_lock_path(const char *vdir, const uint8_t key[16], char *out, size_t outlen);
/* The store's configuration file (conf.c), in its root. */
#define KC__STORE_CONF "kcache.conf"
/* ROOT/kcache.conf's value of key into val (trimmed); 0, or errno (ENOENT:
 * no file or no such key; EPERM: a file t does not trust, which is not
 * read: kc__store_trust_file). */
int kc__store_conf_get(const char *root, const kc__store_trust *t, const char *key, char *val, size_t vlen);
/* Sets key to val in ROOT/kcache.conf (made if missing, with t's file mode;
 * the other lines kept; written whole and renamed into place); 0 or errno
 * (EPERM: the file is there and t does not trust it: left as it is). */
int kc__store_conf_set(const char *root, const kc__store_trust *t, const char *key, const char *val);

/* Where the store's size bound came from: the configuration (an option
 * or $KC_CACHE_MAXSIZE), the store's kcache.conf, or the default. */
typedef enum kc__max_from { KC__MAX_DEFAULT, KC__MAX_ENV, KC__MAX_FILE } kc__max_from;
/* The size bound of the store at root (trusted as t says; NULL: its
 * kcache.conf is not read): conf's KC_CACHE_MAXSIZE when an option or the
 * variable set it, else max_size in ROOT/kcache.conf (`kcache -M`), else
 * the default (1 GiB); unset, empty or 0 counts as not given, as everywhere
 * in kcache. *from (may be NULL): the one that counts. False if that one is
 * not a size, or is a kcache.conf t does not trust: then *out is the
 * default and why (may be NULL) says what is wrong (the caller says what it
 * does instead). The library and the command read it through this one
 * function, so "0" can never mean "evict everything" in one of them. */
bool kc__store_max_size(const kc__config *conf, const char *root, const kc__store_trust *t, uint64_t *out,
                        kc__max_from *from, char *why, size_t wl);
/* The store's part of a configuration being resolved (core/config.c): when
 * neither an option nor the variable set KC_CACHE_MAXSIZE, and the store
 * at conf's KC_CACHE_DIR is trusted, the max_size its kcache.conf gives
 * (a size, not 0) goes into the row, from the file. Says nothing: what is
 * wrong with the file is said where the bound is used. */
void kc__store_conf_resolve(kc__config *conf);
/* mkdir -p, each directory it makes given exactly mode (kc__store_made_dir);
 * true if path is a directory afterwards (else *err). */
bool kc__store_make_dirs(const char *path, mode_t mode, int *err);
/* Removes path if it is still the file `seen` describes (a writer may have
 * renamed a good entry over it meanwhile). */
bool kc__store_remove_if_same(const char *path, const struct stat *seen);

/* opendir of one of the store's directories, never through a link (kcache
 * makes directories there; a link is planted): NULL with errno ELOOP or
 * ENOTDIR then, so nothing it points at is listed, read, swept or removed. */
DIR *kc__store_opendir(const char *dir);

/* One file of the store, from a walk. */
typedef struct kc__store_file {
  char *path; /* the list's (kc__store_list_free) */
  uint8_t key[16]; /* from the name */
  uint64_t size;
  int64_t mtime_ns; /* last use */
  bool misplaced; /* the bucket directory does not match the name */
} kc__store_file;

/* Lists every entry file (*.kce) under vdir (mem's allocator, or malloc
 * when mem is NULL). Free *out with kc__store_list_free(mem, *out, *n).
 * KC_EINVAL where a path under vdir would be longer than PATH_MAX (a root
 * longer than KC__STORE_ROOT_MAX): never a list that leaves entries out. */
kc_status kc__store_list(const kc__heap *mem, const char *vdir, kc__store_file **out, size_t *n);
void kc__store_list_free(const kc__heap *mem, kc__store_file *files, size_t n);

/* What is not the store's own where it keeps files (planted.c): a FIFO,
 * socket, device, directory or link at an entry's, index's, lock's, temp
 * file's or counter's path, or a non-directory where a directory of the
 * store should be. */
typedef struct kc__store_planted {
  char path[PATH_MAX];
  char why[160]; /* "a FIFO where an entry should be" */
  bool is_dir;
} kc__store_planted;
/* Lists them under vdir (mem's allocator, or malloc when mem is NULL; free
 * *out with kc__heap_free(mem, *out)). */
kc_status kc__store_planted_list(const kc__heap *mem, const char *vdir, kc__store_planted **out, size_t *n);
/* Removes one (a directory with its tree, at most 64 deep; no link
 * followed, its own directory included); true if it is gone. */
bool kc__store_planted_remove(const kc__store_planted *p);

/* ------------------------------------------------ entry files (entry_file.c) */

/* Opens and decodes path. On success *fd (if fd_out) stays open for the
 * caller; *st describes the file whenever it could be opened.
 * KC_ENOTFOUND: no file. KC_EUNAVAILABLE: it could not be read (left
 * alone). KC_EIO: it is damaged, or (trust given) not trusted: its owner,
 * mode, bucket directory or MAC (kc__store_trust_entry, kc__store_unseal);
 * why says how. trust NULL: no such checks, a MAC trailer is ignored. */
kc_status kc__entry_load(const kc__heap *mem, const char *path, const uint8_t *want_key, kc__entry *e,
                         char *why, size_t wl, struct stat *st, int *fd_out, const kc__store_trust *trust);
/* Reads and decodes path. want_key (may be NULL) must equal the header's
 * key. KC_ENOTFOUND if there is no file; KC_EIO with why if it is bad. A
 * MAC trailer is taken off unverified (kc__store_check_file verifies it). */
kc_status kc__entry_read(const kc__heap *mem, const char *path, const uint8_t *want_key, kc__entry *out,
                         char *why, size_t whylen);
/* Reads only the header and the metadata section of path (malloc): enough
 * to list a store quickly (a MAC trailer is allowed, not verified). The payload is not verified: defs, sig,
 * log and artifact stay empty. Same statuses as kc__entry_read. */
kc_status kc__entry_peek(const char *path, kc__entry *out, char *why, size_t whylen);

#endif /* KC_CACHE_DIR_H */
