/* SPDX-License-Identifier: MIT */
/* filedep.c -- records of files that compiles read (filedep.h). */
#include "base/filedep.h"
#include "base/safeopen.h"
#include "base/clock.h"
#include "base/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static uint64_t ns_of(struct timespec t) { return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec; }

uint64_t kc__filedep_clock_ns(void) {
  struct timespec fine, coarse;
  clock_gettime(CLOCK_REALTIME, &fine);
  if (clock_gettime(CLOCK_REALTIME_COARSE, &coarse) != 0) return ns_of(fine);
  uint64_t f = ns_of(fine), c = ns_of(coarse);
  return c < f ? c : f;
}

char *kc__abspath(const kc__heap *heap, const char *path) {
  if (path[0] == '/') return kc__heap_strdup(heap, path);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return NULL;
  size_t a = strlen(cwd), b = strlen(path);
  char *out = kc__heap_alloc(heap, a + b + 2);
  if (!out) return NULL;
  memcpy(out, cwd, a);
  out[a] = '/';
  memcpy(out + a + 1, path, b + 1);
  return out;
}

/* The file at path opened for reading, without blocking (a FIFO does not
 * hang the open), if it is a regular file of a size kcache tracks: its
 * descriptor and stat; -1 with errno ENOENT (missing: also ENOTDIR) or
 * another errno (untrackable). */
static int open_regular(const char *path, struct stat *st) {
  int fd = kc__open_safe(path, O_RDONLY, 0, true); /* a header may be a link */
  if (fd < 0) {
    if (errno == ENOTDIR) errno = ENOENT;
    return -1;
  }
  if (fstat(fd, st) != 0 || (uint64_t)st->st_size > KC__FILEDEP_MAX) {
    close(fd);
    errno = EFBIG;
    return -1;
  }
  return fd;
}

/* Hashes the rest of fd (n bytes expected), keeping the bytes in keep
 * (room for n + 1, or NULL); false on a read error or a size that is not n. */
static bool hash_fd(int fd, uint64_t n, uint64_t *h, char *keep) {
  XXH3_state_t s;
  XXH3_64bits_reset(&s);
  char buf[16384];
  uint64_t got = 0;
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    if (got + (uint64_t)r > n) return false;
    if (keep) memcpy(keep + got, buf, (size_t)r);
    got += (uint64_t)r;
    XXH3_64bits_update(&s, buf, (size_t)r);
  }
  *h = XXH3_64bits_digest(&s);
  if (keep) keep[got] = 0;
  return got == n;
}

/* The latest change (ctime or mtime, nanoseconds) of a symbolic link among
 * the components of path as written (a header, or a directory on its way,
 * that is a link): 0 if none. Switching a link to another file changes the
 * content read through it but none of the new target's own stamps, so the
 * link's stamps count as the file's changes too. */
static uint64_t links_changed(const char *path) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n >= sizeof buf) return 0;
  memcpy(buf, path, n + 1);
  uint64_t latest = 0;
  for (size_t i = 1; i <= n; i++) {
    if (i < n && buf[i] != '/') continue;
    char keep = buf[i];
    buf[i] = '\0';
    struct stat st;
    if (lstat(buf, &st) == 0 && S_ISLNK(st.st_mode)) {
      uint64_t c = ns_of(st.st_ctim), m = ns_of(st.st_mtim);
      if (c > latest) latest = c;
      if (m > latest) latest = m;
    }
    buf[i] = keep;
  }
  return latest;
}

kc__filedep_status kc__filedep_read(const kc__heap *heap, const char *path, uint64_t since_ns,
                                    kc__filedep *out, char **content, size_t *clen) {
  memset(out, 0, sizeof *out);
  out->read_begin_ns = kc__now_ns();
  if (content) *content = NULL;
  if (clen) *clen = 0;
  out->path = kc__abspath(heap, path);
  if (!out->path) return KC__FILEDEP_NOMEM;
  struct stat st;
  int fd = open_regular(out->path, &st);
  if (fd < 0) {
    if (errno == ENOENT) {
      out->flags = KC__FILEDEP_ABSENT;
      out->read_end_ns = kc__now_ns();
      return KC__FILEDEP_OK;
    }
    int e = errno;
    kc__filedep_free(heap, out);
    errno = e;
    return KC__FILEDEP_UNTRACKABLE;
  }
  uint64_t h = 0;
  char *keep = content ? kc__heap_alloc(heap, (size_t)st.st_size + 1) : NULL;
  if (content && !keep) {
    close(fd);
    kc__filedep_free(heap, out);
    return KC__FILEDEP_NOMEM;
  }
  bool ok = hash_fd(fd, (uint64_t)st.st_size, &h, keep);
  struct stat after;
  bool moved = fstat(fd, &after) != 0 || ns_of(after.st_mtim) != ns_of(st.st_mtim) ||
               ns_of(after.st_ctim) != ns_of(st.st_ctim) || after.st_size != st.st_size;
  close(fd);
  if (!ok) {
    kc__heap_free(heap, keep);
    kc__filedep_free(heap, out);
    return KC__FILEDEP_UNTRACKABLE;
  }
  if (content) {
    *content = keep;
    *clen = (size_t)st.st_size;
  }
  out->size = (uint64_t)st.st_size;
  out->hash = h;
  out->mtime_ns = ns_of(st.st_mtim);
  out->ctime_ns = ns_of(st.st_ctim);
  out->dev = (uint64_t)st.st_dev;
  out->ino = (uint64_t)st.st_ino;
  uint64_t changed = out->mtime_ns > out->ctime_ns ? out->mtime_ns : out->ctime_ns;
  uint64_t linked = links_changed(out->path);
  if (linked > changed) changed = linked;
  if (moved || (since_ns && changed + KC__FILEDEP_GRAIN_NS >= since_ns)) out->flags |= KC__FILEDEP_UNKNOWN;
  if (changed + KC__FILEDEP_RACY_NS >= kc__filedep_clock_ns()) out->flags |= KC__FILEDEP_RACY;
  out->read_end_ns = kc__now_ns();
  return KC__FILEDEP_OK;
}

bool kc__filedep_same(const kc__filedep *d) {
  if (d->flags & KC__FILEDEP_UNKNOWN) return false;
  struct stat st;
  int fd = open_regular(d->path, &st);
  if (fd < 0) return errno == ENOENT && (d->flags & KC__FILEDEP_ABSENT);
  bool same = false;
  if (d->flags & KC__FILEDEP_ABSENT) {
    same = false;
  } else if ((uint64_t)st.st_size != d->size) {
    same = false;
  } else if (!(d->flags & KC__FILEDEP_RACY) && ns_of(st.st_mtim) == d->mtime_ns &&
             ns_of(st.st_ctim) == d->ctime_ns && (uint64_t)st.st_ino == d->ino &&
             (uint64_t)st.st_dev == d->dev) {
    same = true; /* stat unchanged, and it was not new when read */
  } else {
    uint64_t h;
    same = hash_fd(fd, d->size, &h, NULL) && h == d->hash;
  }
  close(fd);
  return same;
}

void kc__filedep_free(const kc__heap *heap, kc__filedep *d) {
  kc__heap_free(heap, d->path);
  d->path = NULL;
}
