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
 * removes it (kc__store_planted_remove: relative to an open directory,
 * never through a link).
 */
#include "cache/dir.h"
#include "cache/format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
  snprintf(p->path, sizeof p->path, "%s", path); /* walk paths are PATH_MAX too */
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
  DIR *d = kc__store_opendir(dir);
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

/* How deep a planted tree is removed (deeper: left, and said so). */
#define KC__PLANTED_DEPTH 64

/* Removes the directory `name` in the directory dfd with everything in it,
 * never following a link: each level is opened with O_NOFOLLOW relative to
 * the one above and emptied with unlinkat, depth first, with a stack of
 * open directories rather than recursion (the depth is the neighbour's). */
static bool remove_tree_at(int dfd, const char *name) {
  struct level {
    DIR *d;
    char name[256];
  } st[KC__PLANTED_DEPTH];
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  st[0].d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!st[0].d) {
    if (fd >= 0) close(fd);
    return errno == ENOENT;
  }
  snprintf(st[0].name, sizeof st[0].name, "%s", name);
  int n = 1;
  bool ok = true;
  while (n > 0) {
    struct level *top = &st[n - 1];
    struct dirent *de = readdir(top->d);
    if (de) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      int here = dirfd(top->d);
      if (unlinkat(here, de->d_name, 0) == 0 || errno == ENOENT) continue; /* a file, link, FIFO... */
      int cfd = n < KC__PLANTED_DEPTH && strlen(de->d_name) < sizeof st[0].name
                    ? openat(here, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    : -1;
      DIR *cd = cfd >= 0 ? fdopendir(cfd) : NULL;
      if (!cd) {
        if (cfd >= 0) close(cfd);
        ok = false; /* too deep, or not removable: its parents stay too */
        continue;
      }
      st[n].d = cd;
      snprintf(st[n].name, sizeof st[n].name, "%s", de->d_name);
      n++;
      continue;
    }
    char done[256];
    snprintf(done, sizeof done, "%s", top->name);
    closedir(top->d);
    n--;
    if (unlinkat(n ? dirfd(st[n - 1].d) : dfd, done, AT_REMOVEDIR) != 0 && errno != ENOENT) ok = false;
  }
  return ok;
}

bool kc__store_planted_remove(const kc__store_planted *p) {
  /* relative to its directory, opened without following a link: a
   * neighbour who swaps that directory for a link meanwhile gets an error,
   * not a removal elsewhere */
  const char *slash = strrchr(p->path, '/');
  if (!slash || slash == p->path) return false;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%.*s", (int)(slash - p->path), p->path);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return false;
  bool ok;
  if (p->is_dir) ok = remove_tree_at(dfd, slash + 1);
  else ok = unlinkat(dfd, slash + 1, 0) == 0 || errno == ENOENT;
  close(dfd);
  return ok;
}
