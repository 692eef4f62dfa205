/* SPDX-License-Identifier: MIT */
/*
 * cache/dir.c -- owns the store's directory: its root and file names, its
 * creation, opening its directories without following a link, and the walk
 * that lists entry files (which garbage collection, evict.c, scans). The
 * root comes resolved (dir.h).
 */
#include "cache/dir.h"
#include "cache/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void kc__store_list_free(const kc__heap *mem, kc__store_file *files, size_t n) {
  for (size_t i = 0; files && i < n; i++) kc__heap_free(mem, files[i].path);
  kc__heap_free(mem, files);
}

/* Appends f, with a copy of path, to (*out)[0..*n); false when out of
 * memory (the list is freed). */
static bool list_push(const kc__heap *mem, kc__store_file **out, size_t *n, size_t *cap, kc__store_file *f,
                      const char *path) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 256;
    kc__store_file *nf = kc__heap_realloc(mem, *out, nc * sizeof *nf);
    if (!nf) goto oom;
    *out = nf;
    *cap = nc;
  }
  size_t len = strlen(path) + 1;
  if (!(f->path = kc__heap_alloc(mem, len))) goto oom;
  memcpy(f->path, path, len);
  (*out)[(*n)++] = *f;
  return true;
oom:
  kc__store_list_free(mem, *out, *n);
  *out = NULL;
  *n = 0;
  return false;
}

kc_status kc__store_list(const kc__heap *mem, const char *vdir, kc__store_file **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t cap = 0;
  /* every entry's path fits (vdir/ab/<36-byte name>), or none is listed */
  if (!*vdir || strlen(vdir) + 4 + 36 >= PATH_MAX)
    return kc__err_owner(0, KC_EINVAL, "the store's path is too long to list its entries (%zu bytes)",
                         strlen(vdir));
  for (int bucket = 0; bucket < 256; bucket++) {
    char dir[PATH_MAX], path[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    DIR *d = kc__store_opendir(dir);
    if (!d) continue;
    for (struct dirent *de; (de = readdir(d));) {
      uint8_t key[16];
      if (!entry_name(de->d_name, key)) continue;
      kc__store_file f;
      memset(&f, 0, sizeof f);
      if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
        continue; /* (checked above) */
      struct stat st;
      if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      memcpy(f.key, key, 16);
      f.size = (uint64_t)st.st_size;
      f.mtime_ns = kc__stat_mtime_ns(&st);
      f.misplaced = key[0] != bucket;
      if (!list_push(mem, out, n, &cap, &f, path)) {
        closedir(d);
        return kc__err_owner(0, KC_ENOMEM, "out of memory listing %s", vdir);
      }
    }
    closedir(d);
  }
  return KC_OK;
}
