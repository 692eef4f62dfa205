/* SPDX-License-Identifier: MIT */
/*
 * cache/planted.c -- owns finding what is not the store's own where the
 * store keeps its files: a FIFO, a socket, a device, a directory or a
 * symbolic link at the path of an entry, an index, a lock, a temp file or
 * one of the counters, or anything but a directory where a directory of the
 * store should be (a bucket swapped for a link). kcache itself never makes
 * any of these; a neighbour sharing the store can. The library opens every
 * such path so that it cannot block or follow (base/safeopen.h) and treats
 * what it finds as damage; `kcache verify` lists it here, and with --repair
 * removes it (kc__store_planted_remove).
 */
#include "cache/dir.h"
#include "cache/format.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
  return S_ISFIFO(m)   ? "a FIFO"
         : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISDIR(m)  ? "a directory"
         : S_ISLNK(m)  ? "a symbolic link"
         : S_ISREG(m)  ? "a regular file"
                       : "something of an unknown type";
}

typedef struct walk {
  const kc__heap *mem;
  kc__store_planted *out;
  size_t n, cap;
  bool nomem;
} walk;

static void push(walk *w, const char *path, mode_t mode, const char *where) {
  if (w->nomem) return;
  if (w->n == w->cap) {
    size_t nc = w->cap ? w->cap * 2 : 16;
    kc__store_planted *np = kc__heap_realloc(w->mem, w->out, nc * sizeof *np);
    if (!np) {
      w->nomem = true;
      return;
    }
    w->out = np;
    w->cap = nc;
  }
  kc__store_planted *p = &w->out[w->n];
  if (snprintf(p->path, sizeof p->path, "%s", path) >= (int)sizeof p->path) return; /* not ours: too long */
  p->is_dir = S_ISDIR(mode);
  snprintf(p->why, sizeof p->why, "%s where %s should be", kind_of(mode), where);
  w->n++;
}

/* path must be a regular file if it is there. */
static void want_file(walk *w, const char *path, const char *where) {
  struct stat st;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) push(w, path, st.st_mode, where);
}

/* path must be a directory (not a link to one) if it is there; true when
 * it is one, to look inside. */
static bool want_dir(walk *w, const char *path, const char *where) {
  struct stat st;
  if (lstat(path, &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) return true;
  push(w, path, st.st_mode, where);
  return false;
}

/* Everything in dir must be a regular file: the store makes nothing else there. */
static void want_files_in(walk *w, const char *dir, const char *where) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *de; (de = readdir(d));) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path) continue;
    want_file(w, path, where);
  }
  closedir(d);
}

kc_status kc__store_planted_list(const kc__heap *mem, const char *vdir, kc__store_planted **out, size_t *n) {
  walk w = {mem, NULL, 0, 0, false};
  static const struct {
    const char *name, *where;
  } files[] = {{"stats", "the store's counters"},
               {"remote-stats", "the remote tier's counters"},
               {"remote-compile", "the remote tier's compile-time estimate"},
               {"gc.lock", "the eviction lock"}};
  static const struct {
    const char *name, *where, *inside;
  } dirs[] = {{"index", "the index directory", "an index"},
              {KC__STORE_LOCKS_DIR, "the lock directory", "a lock file"},
              {KC__STORE_TMP_DIR, "the temp directory", "a temp file"}};
  char path[PATH_MAX];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s", vdir, files[i].name);
    want_file(&w, path, files[i].where);
  }
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    snprintf(path, sizeof path, "%s/%s", vdir, dirs[i].name);
    if (want_dir(&w, path, dirs[i].where)) want_files_in(&w, path, dirs[i].inside);
  }
  for (int b = 0; b < 256; b++) {
    snprintf(path, sizeof path, "%s/%02x", vdir, b);
    if (want_dir(&w, path, "a bucket directory")) want_files_in(&w, path, "an entry");
  }
  if (w.nomem) {
    kc__heap_free(mem, w.out);
    *out = NULL;
    *n = 0;
    return kc__err_owner(0, KC_ENOMEM, "out of memory looking for planted files in %s", vdir);
  }
  *out = w.out;
  *n = w.n;
  return KC_OK;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

bool kc__store_planted_remove(const kc__store_planted *p) {
  if (!p->is_dir) return unlink(p->path) == 0 || errno == ENOENT;
  /* a directory's tree, depth first, links removed and never followed */
  return nftw(p->path, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}
