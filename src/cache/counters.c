/* SPDX-License-Identifier: MIT */
/*
 * cache/counters.c -- owns the shared counters file of a store (vdir/stats):
 * its layout, reads under a shared flock and read-modify-writes under an
 * exclusive one; and the copy of a runtime's disk counters into kc_stats.
 * The file is a hint that a scan of the directory (kc__store_gc, evict.c)
 * corrects.
 */
#include "cache/counters.h"
#include "cache/io.h"
#include "cache/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define KC__COUNTERS_MAGIC "KCSTATS1"
#define KC__X(name) +1
enum { KC__NFILE = 0 KC__STORE_FILE_COUNTERS(KC__X) };
#undef KC__X
/* magic, the counters, flags (bit 0: bytes and entries are known) */
#define KC__COUNTERS_SIZE (8 + 8 * KC__NFILE + 8)

void kc__disk_counters_copy(const kc__disk_counters *c, kc_stats *out) {
#define KC__X(name) out->disk_##name = kc__load_relaxed(&c->name);
  KC__DISK_COUNTERS(KC__X)
#undef KC__X
}

static void counters_parse(const uint8_t *b, ssize_t n, kc__store_counters *c) {
  memset(c, 0, sizeof *c);
  if (n != KC__COUNTERS_SIZE || memcmp(b, KC__COUNTERS_MAGIC, 8)) return;
  int i = 0;
#define KC__X(name) c->name = kc__rd64(b + 8 + 8 * i++);
  KC__STORE_FILE_COUNTERS(KC__X)
#undef KC__X
  c->valid = true;
  c->sized = kc__rd64(b + 8 + 8 * KC__NFILE) & 1;
}

static void counters_format(const kc__store_counters *c, uint8_t *b) {
  memcpy(b, KC__COUNTERS_MAGIC, 8);
  int i = 0;
#define KC__X(name) kc__le64(b + 8 + 8 * i++, c->name);
  KC__STORE_FILE_COUNTERS(KC__X)
#undef KC__X
  kc__le64(b + 8 + 8 * KC__NFILE, c->sized ? 1 : 0);
}

void kc__store_counters_read(const char *vdir, kc__store_counters *out) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stats", vdir);
  memset(out, 0, sizeof *out);
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return;
  uint8_t b[KC__COUNTERS_SIZE];
  flock(fd, LOCK_SH);
  ssize_t n = kc__fo_pread(fd, b, sizeof b, 0);
  flock(fd, LOCK_UN);
  close(fd);
  counters_parse(b, n, out);
}

static uint64_t add_clamped(uint64_t v, int64_t d) {
  if (d < 0 && (uint64_t)(-d) > v) return 0;
  return v + (uint64_t)d;
}

bool kc__store_counters_add(const char *vdir, int64_t bytes, int64_t entries, uint64_t hits, uint64_t misses,
                            uint64_t writes, uint64_t evictions, uint64_t repairs, bool set,
                            kc__store_counters *now) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stats", vdir);
  kc__store_counters c;
  memset(&c, 0, sizeof c);
  int fd = kc__store_open_create(KC__IO_OPEN, path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (now) *now = c;
    return false;
  }
  uint8_t b[KC__COUNTERS_SIZE];
  flock(fd, LOCK_EX);
  counters_parse(b, kc__fo_pread(fd, b, sizeof b, 0), &c);
  if (set) {
    c.bytes = (uint64_t)bytes;
    c.entries = (uint64_t)entries;
  } else {
    c.bytes = add_clamped(c.bytes, bytes);
    c.entries = add_clamped(c.entries, entries);
  }
  c.hits += hits;
  c.misses += misses;
  c.writes += writes;
  c.evictions += evictions;
  c.repairs += repairs;
  /* bytes and entries are known only if they were (or a scan sets them) */
  c.sized = c.sized || set;
  counters_format(&c, b);
  bool ok = kc__fo_pwrite(fd, b, sizeof b, 0) == (ssize_t)sizeof b;
  flock(fd, LOCK_UN);
  close(fd);
  c.valid = ok;
  if (now) *now = c;
  return ok;
}

bool kc__store_counters_zero(const char *vdir) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stats", vdir);
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return errno == ENOENT; /* nothing counted yet */
  uint8_t b[KC__COUNTERS_SIZE];
  kc__store_counters c;
  flock(fd, LOCK_EX);
  counters_parse(b, kc__fo_pread(fd, b, sizeof b, 0), &c);
  uint64_t bytes = c.bytes, entries = c.entries;
#define KC__X(name) c.name = 0;
  KC__STORE_FILE_COUNTERS(KC__X)
#undef KC__X
  c.bytes = bytes; /* what the store holds is not a counter of use */
  c.entries = entries;
  counters_format(&c, b);
  bool ok = kc__fo_pwrite(fd, b, sizeof b, 0) == (ssize_t)sizeof b;
  int err = errno;
  flock(fd, LOCK_UN);
  close(fd);
  errno = err;
  return ok;
}
