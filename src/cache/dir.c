/* SPDX-License-Identifier: MIT */
/*
 * cache/dir.c -- owns the store's directory: its root and file names, its
 * creation, the walk that lists entry files, and garbage collection (LRU by
 * last use, stale temp files, abandoned lock files) with the rewrite of the
 * shared counters that a scan makes exact. The default root comes from the
 * environment (dir.h says which variables the cache reads, and where).
 */
#include "cache/dir.h"
#include "cache/index.h"
#include "cache/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* Temp files older than this belong to writers that died. */
#define KC__STALE_TEMP_NS (3600ull * 1000000000ull)
/* Lock files untouched this long belong to compiles that died. */
#define KC__STALE_LOCK_NS (600ull * 1000000000ull)

bool kc__store_default_root(char *out, size_t outlen) {
  const char *dir = kc__setting_str(KC__SET_CACHE_DIR);
  int n = -1;
  if (dir && *dir) {
    n = snprintf(out, outlen, "%s", dir);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/') n = snprintf(out, outlen, "%s/kcache", xdg); /* relative: ignored (XDG) */
    else if (home && *home) n = snprintf(out, outlen, "%s/.cache/kcache", home);
  }
  return n > 0 && (size_t)n < outlen;
}

void kc__store_vdir(const char *root, char *out, size_t outlen) {
  /* A root too long for out gives an empty path, which no directory
   * function accepts, rather than a cut-short one. */
  int n = snprintf(out, outlen, "%s/v%u", root, KC__STORE_FORMAT);
  if (n < 0 || (size_t)n >= outlen) out[0] = 0;
}

void kc__store_path(const char *vdir, const uint8_t key[16], const char *suffix, char *out, size_t outlen) {
  char hex[33];
  kc__store_hex(key, hex);
  snprintf(out, outlen, "%s/%.2s/%s%s", vdir, hex, hex, suffix);
}

void kc__store_lock_path(const char *vdir, const uint8_t key[16], char *out, size_t outlen) {
  char hex[33];
  kc__store_hex(key, hex);
  snprintf(out, outlen, "%s/" KC__STORE_LOCKS_DIR "/%s.lock", vdir, hex);
}

bool kc__store_make_dirs(const char *path, mode_t mode, int *err) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
    *err = ENAMETOOLONG;
    return false;
  }
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, mode) == 0) kc__store_made_dir(tmp, mode);
    *p = '/';
  }
  if (mkdir(tmp, mode) == 0) {
    kc__store_made_dir(tmp, mode);
  } else if (errno != EEXIST) {
    *err = errno;
    struct stat st;
    return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode);
  }
  struct stat st;
  if (stat(tmp, &st) != 0) {
    *err = errno;
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *err = ENOTDIR;
    return false;
  }
  return true;
}

bool kc__store_remove_if_same(const char *path, const struct stat *seen) {
  struct stat now;
  if (stat(path, &now) != 0 || now.st_ino != seen->st_ino || now.st_dev != seen->st_dev) return false;
  return unlink(path) == 0;
}

/* ------------------------------------------------------------ listing */

DIR *kc__store_opendir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return NULL;
  DIR *d = fdopendir(fd);
  if (!d) close(fd);
  return d;
}

static bool entry_name(const char *name, uint8_t key[16]) {
  return strlen(name) == 36 && !strcmp(name + 32, ".kce") && kc__store_unhex_n(name, key);
}

/* Appends f to (*out)[0..*n); false when out of memory (the list is freed). */
static bool list_push(const kc__heap *mem, kc__store_file **out, size_t *n, size_t *cap,
                      const kc__store_file *f) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 256;
    kc__store_file *nf = kc__heap_realloc(mem, *out, nc * sizeof *nf);
    if (!nf) {
      kc__heap_free(mem, *out);
      *out = NULL;
      *n = 0;
      return false;
    }
    *out = nf;
    *cap = nc;
  }
  (*out)[(*n)++] = *f;
  return true;
}

kc_status kc__store_list(const kc__heap *mem, const char *vdir, kc__store_file **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t cap = 0;
  for (int bucket = 0; bucket < 256; bucket++) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    DIR *d = kc__store_opendir(dir);
    if (!d) continue;
    for (struct dirent *de; (de = readdir(d));) {
      uint8_t key[16];
      if (!entry_name(de->d_name, key)) continue;
      kc__store_file f;
      memset(&f, 0, sizeof f);
      if (snprintf(f.path, sizeof f.path, "%s/%s", dir, de->d_name) >= (int)sizeof f.path) continue;
      struct stat st;
      if (lstat(f.path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      memcpy(f.key, key, 16);
      f.size = (uint64_t)st.st_size;
      f.mtime_ns = kc__stat_mtime_ns(&st);
      f.misplaced = key[0] != bucket;
      if (!list_push(mem, out, n, &cap, &f)) {
        closedir(d);
        return kc__err_owner(0, KC_ENOMEM, "out of memory listing %s", vdir);
      }
    }
    closedir(d);
  }
  return KC_OK;
}

void kc__store_list_free(const kc__heap *mem, kc__store_file *files) { kc__heap_free(mem, files); }

/* One temp or lock file of a sweep: removed if its owner is gone. */
static void sweep_one(const char *path, bool temp, int64_t now, kc__gc_result *r) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (temp) {
    if (now - kc__stat_mtime_ns(&st) > (int64_t)KC__STALE_TEMP_NS && unlink(path) == 0) r->temps_removed++;
    return;
  }
  if (now - kc__stat_mtime_ns(&st) <= (int64_t)KC__STALE_LOCK_NS) return;
  /* Unlinked while held, like a finishing holder does: a waiter that
   * gets this inode sees that it is gone and locks a new file. */
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    if (kc__store_remove_if_same(path, &st)) r->locks_removed++;
    flock(fd, LOCK_UN);
  }
  close(fd);
}

/* Where a sweep looks: a bucket directory (the layout of an earlier kcache:
 * .tmp-* and *.lock files among the entries), vdir/locks or vdir/tmp. */
typedef enum sweep_where { SWEEP_BUCKET, SWEEP_LOCKS, SWEEP_TEMPS } sweep_where;

static void sweep_dir(const char *dir, sweep_where where, int64_t now, kc__gc_result *r) {
  DIR *d = kc__store_opendir(dir);
  if (!d) return;
  for (struct dirent *de; (de = readdir(d));) {
    const char *name = de->d_name;
    size_t nl = strlen(name);
    bool lock = where != SWEEP_TEMPS && nl > 5 && !strcmp(name + nl - 5, ".lock");
    bool temp = where == SWEEP_TEMPS ? strcmp(name, ".") && strcmp(name, "..")
                                     : where == SWEEP_BUCKET && !strncmp(name, ".tmp-", 5);
    char path[PATH_MAX];
    if ((!temp && !lock) || snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) continue;
    sweep_one(path, temp, now, r);
  }
  closedir(d);
}

/* Removes temp files of dead writers and lock files of dead compiles. */
static void sweep_aux(const char *vdir, kc__gc_result *r) {
  int64_t now = (int64_t)kc__realtime_ns();
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/" KC__STORE_LOCKS_DIR, vdir);
  sweep_dir(dir, SWEEP_LOCKS, now, r);
  snprintf(dir, sizeof dir, "%s/" KC__STORE_TMP_DIR, vdir);
  sweep_dir(dir, SWEEP_TEMPS, now, r);
  for (int bucket = 0; bucket < 256; bucket++) {
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    sweep_dir(dir, SWEEP_BUCKET, now, r);
  }
}

static int by_last_use(const void *a, const void *b) {
  const kc__store_file *x = a, *y = b;
  if (x->mtime_ns != y->mtime_ns) return x->mtime_ns < y->mtime_ns ? -1 : 1;
  return strcmp(x->path, y->path);
}

/* Evicts the least recently used of files[0..n) until at most target bytes
 * are left; fills r's counts. */
static void evict_lru(kc__store_file *files, size_t n, uint64_t target, kc__progress_fn progress, void *ud,
                      kc__gc_result *r) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += files[i].size;
  r->entries_before = n;
  r->bytes_before = total;
  qsort(files, n, sizeof *files, by_last_use);
  uint64_t left = n;
  for (size_t i = 0; i < n && total > target; i++) {
    if (progress) progress(ud, i + 1, n);
    if (unlink(files[i].path) == 0) {
      total -= files[i].size;
      left--;
      r->evicted++;
      r->evicted_bytes += files[i].size;
    }
  }
  if (progress && n) progress(ud, n, n);
  r->entries_after = left;
  r->bytes_after = total;
}

kc_status kc__store_gc(const kc__heap *mem, const char *vdir, uint64_t target, bool wait,
                       kc__progress_fn progress, void *ud, kc__gc_result *out) {
  kc__gc_result r;
  memset(&r, 0, sizeof r);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/gc.lock", vdir);
  int lfd = kc__store_open_create(KC__IO_OPEN, path, O_RDWR | O_CLOEXEC);
  if (lfd < 0) return kc__err_owner(0, KC_EIO, "cannot open %s: %s", path, strerror(errno));
  while (flock(lfd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    close(lfd);
    return errno == EWOULDBLOCK ? KC_EBUSY
                                : kc__err_owner(0, KC_EIO, "cannot lock %s: %s", path, strerror(errno));
  }
  sweep_aux(vdir, &r);
  kc__store_file *files;
  size_t n;
  kc_status st = kc__store_list(mem, vdir, &files, &n);
  if (st) {
    flock(lfd, LOCK_UN);
    close(lfd);
    return st;
  }
  evict_lru(files, n, target, progress, ud, &r);
  kc__store_list_free(mem, files);
  kc__store_counters_add(vdir, (int64_t)r.bytes_after, (int64_t)r.entries_after, 0, 0, 0, r.evicted, 0, true,
                         NULL);
  kc__index_rebuild_all(mem, vdir); /* after a scan, the index says what it found */
  flock(lfd, LOCK_UN);
  close(lfd);
  if (out) *out = r;
  return KC_OK;
}
