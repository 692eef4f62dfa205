/* SPDX-License-Identifier: MIT */
/*
 * cache/io.h -- the disk cache's file operations (io.c), and its ONE fault
 * mechanism: every open, read, write, fsync, rename and bucket mkdir of the
 * cache goes through these wrappers, which ask a single hook whether to
 * fail. Test builds (KC_FAULT_INJECTION) install a hook that fails the Nth
 * file operation (src/testing/fault.c, KC__FAULT_FILE); a test may install its own
 * (tests/store: a full or read-only disk). Without a hook nothing is asked
 * but one relaxed load. Below every other file of the cache, with the open
 * that creates a store's file and what follows a mkdir of its directories.
 */
#ifndef KC_CACHE_IO_H
#define KC_CACHE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/mem.h"
#include "base/safeopen.h"

/* A file's mtime in nanoseconds (last use of an entry, age of a lock). */
static inline int64_t kc__stat_mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

typedef enum kc__cache_op {
  KC__IO_OPEN, /* opening a file to read, or the counters, gc.lock, a directory */
  KC__IO_CREATE, /* creating store content: a per-key lock file or an entry's temp file */
  KC__IO_MKDIR, /* creating a bucket directory */
  KC__IO_READ,
  KC__IO_WRITE, /* writing an entry's bytes */
  KC__IO_PWRITE, /* rewriting the counters */
  KC__IO_FSYNC,
  KC__IO_RENAME,
} kc__cache_op;

/* 0: let op run; else the errno that op fails with. */
typedef int (*kc__cache_fault_fn)(kc__cache_op op);
/* Installs fn (NULL: the build's default: none, or KC__FAULT_FILE's in a
 * fault-injection build). For tests. */
void kc__cache_set_fault(kc__cache_fault_fn fn);

/* kc__open_safe (base/safeopen.h): no block, no link at the last step
 * (but for O_DIRECTORY), a regular file or KC__ENOTREG. What a neighbour
 * sharing the store plants can then neither hang an open nor be read. */
int kc__fo_open(kc__cache_op op, const char *path, int flags, mode_t mode);
int kc__fo_mkdir(const char *path, mode_t mode);
ssize_t kc__fo_pread(int fd, void *buf, size_t n, off_t off);
ssize_t kc__fo_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t kc__fo_write(int fd, const void *buf, size_t n);
int kc__fo_fsync(int fd);
int kc__fo_rename(const char *from, const char *to);

/* All n bytes of buf to fd (kc__fo_write, EINTR retried); 0 or errno
 * (ENOSPC when a write takes nothing). */
int kc__fo_write_all(int fd, const void *buf, size_t n);
/* size bytes of fd from offset 0 (kc__fo_pread) into a new buffer of mem's
 * with a NUL after them; *got: the bytes read (fewer at an early end of
 * file). NULL with why on failure. */
uint8_t *kc__fo_read_all(const kc__heap *mem, int fd, size_t size, size_t *got, char *why, size_t wl);

/* The directory that holds path, in out (path itself if it has no slash). */
void kc__store_parent_of(const char *path, char *out, size_t n);
/* After a mkdir of path that succeeded: gives it exactly mode (the umask
 * ignored) and, when mode has the setgid bit, its parent's group. */
void kc__store_made_dir(const char *path, mode_t mode);
/* Opens path with flags (no O_CREAT), creating it when missing with the
 * mode of what its directory holds (0660 in a setgid, group-writable
 * directory, else 0600; the umask ignored). One operation of the fault
 * hook, as a plain open would be. The fd or -1 with errno. */
int kc__store_open_create(kc__cache_op op, const char *path, int flags);

#endif /* KC_CACHE_IO_H */
