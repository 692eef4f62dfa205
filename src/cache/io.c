/* SPDX-License-Identifier: MIT */
/*
 * cache/io.c -- owns the disk cache's file-operation wrappers and the one
 * hook through which tests fail them (see io.h), and, on top of them, the
 * open that creates a file of the store with the mode of its directory and
 * the mode and group a directory gets once made. It calls nothing else of
 * the cache.
 */
#include "cache/io.h"
#include "base/base.h"
#include "base/safeopen.h"
#include "kcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef KC_FAULT_INJECTION
#include "testing/fault.h"

/* The Nth file operation fails with EIO, as a failing disk would (not the
 * creation of bucket directories: those were never counted). */
static int file_fault(kc__cache_op op) {
  if (op == KC__IO_MKDIR || KC__LIKELY(!kc__fault_hit(KC__FAULT_FILE))) return 0;
  return EIO;
}
#define KC__DEFAULT_FAULT file_fault
static _Atomic(kc__cache_fault_fn) kc__fault_hook = file_fault;
#else
#define KC__DEFAULT_FAULT ((kc__cache_fault_fn)0)
static _Atomic(kc__cache_fault_fn) kc__fault_hook; /* none */
#endif

void kc__cache_set_fault(kc__cache_fault_fn fn) {
  atomic_store(&kc__fault_hook, fn ? fn : KC__DEFAULT_FAULT);
}

/* True (errno set) when op must fail. */
static bool faulted(kc__cache_op op) {
  kc__cache_fault_fn fn = kc__load_relaxed(&kc__fault_hook);
  if (KC__LIKELY(!fn)) return false;
  int err = fn(op);
  if (!err) return false;
  errno = err;
  return true;
}

int kc__fo_open(kc__cache_op op, const char *path, int flags, mode_t mode) {
  return faulted(op) ? -1 : kc__open_safe(path, flags, mode, false);
}
int kc__fo_mkdir(const char *path, mode_t mode) { return faulted(KC__IO_MKDIR) ? -1 : mkdir(path, mode); }
ssize_t kc__fo_pread(int fd, void *buf, size_t n, off_t off) {
  return faulted(KC__IO_READ) ? -1 : pread(fd, buf, n, off);
}
ssize_t kc__fo_pwrite(int fd, const void *buf, size_t n, off_t off) {
  return faulted(KC__IO_PWRITE) ? -1 : pwrite(fd, buf, n, off);
}
ssize_t kc__fo_write(int fd, const void *buf, size_t n) {
  return faulted(KC__IO_WRITE) ? -1 : write(fd, buf, n);
}
int kc__fo_fsync(int fd) { return faulted(KC__IO_FSYNC) ? -1 : fsync(fd); }
int kc__fo_rename(const char *from, const char *to) { return faulted(KC__IO_RENAME) ? -1 : rename(from, to); }

int kc__fo_write_all(int fd, const void *buf, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t w = kc__fo_write(fd, (const char *)buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    done += (size_t)w;
  }
  return 0;
}

uint8_t *kc__fo_read_all(const kc__heap *mem, int fd, size_t size, size_t *got_out, char *why, size_t wl) {
  uint8_t *buf = kc__heap_alloc(mem, size + 1);
  if (!buf) {
    snprintf(why, wl, "out of memory");
    return NULL;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = kc__fo_pread(fd, buf + got, size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      snprintf(why, wl, "read error: %s", strerror(errno));
      kc__heap_free(mem, buf);
      return NULL;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  buf[got] = 0;
  *got_out = got;
  return buf;
}

/* ------------------------------------------- creating the store's files */

/* The directory that holds path, in out (path itself if it has no slash). */
void kc__store_parent_of(const char *path, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  char *slash = strrchr(out, '/');
  if (slash && slash != out) *slash = 0;
  else if (slash) slash[1] = 0;
}

void kc__store_made_dir(const char *path, mode_t mode) {
  if (mode & S_ISGID) {
    /* the group of the directory it is made in, as a setgid parent would
     * give it; chown before chmod (chown may clear the setgid bit) */
    char parent[PATH_MAX];
    struct stat ps;
    kc__store_parent_of(path, parent, sizeof parent);
    if (stat(parent, &ps) == 0 && chown(path, (uid_t)-1, ps.st_gid) != 0) {
      /* not a member of that group: it keeps ours */
    }
  }
  chmod(path, mode); /* mkdir applied the umask; a failure leaves it stricter, never looser */
}

int kc__store_open_create(kc__cache_op op, const char *path, int flags) {
  int fd = kc__fo_open(op, path, flags, 0);
  for (int tries = 0; fd < 0 && errno == ENOENT && tries < 8; tries++) {
    char parent[PATH_MAX];
    struct stat ps;
    kc__store_parent_of(path, parent, sizeof parent);
    mode_t mode = stat(parent, &ps) == 0 && (ps.st_mode & S_ISGID) && (ps.st_mode & S_IWGRP) ? 0660 : 0600;
    fd = open(path, flags | O_CREAT | O_EXCL, mode);
    if (fd >= 0) {
      fchmod(fd, mode); /* the umask ignored */
      return fd;
    }
    if (errno == EEXIST) fd = kc__fo_open(op, path, flags, 0); /* another process made it meanwhile */
  }
  return fd;
}
