/* SPDX-License-Identifier: MIT */
/*
 * cache/summary.c -- owns the store's summary (ROOT/v1/index/summary, see
 * index.h): one checksummed slot per bucket with what its index says in
 * total, so that `kcache stats` and the eviction of a write read one file
 * and stat the bucket directories instead of reading 256 indexes. A slot
 * counts only while it matches its bucket directory's mtime and inode
 * (kc__index_dir_state, here: what an index and its slot both record);
 * otherwise that bucket's index is read (and rebuilt if need be) instead,
 * by the index (kc__index_summarize, index.c). Below the index: the index
 * writes the slots, and nothing here calls it.
 */
#include "cache/index.h"
#include "base/hash.h"
#include "cache/io.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define KC__SLOT 192u
#define KC__SLOT_OVERFLOW 0x80000000u

static void summary_path(const char *vdir, char *out, size_t n) {
  snprintf(out, n, "%s/index/summary", vdir);
}

/* The bucket directory's mtime and inode; false if it is not a directory. */
bool kc__index_dir_state(const char *vdir, int b, int64_t *mt, uint64_t *ino) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/%02x", vdir, b);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  *mt = kc__stat_mtime_ns(&st);
  *ino = (uint64_t)st.st_ino;
  return true;
}

/* Adds (backend, size) to s; false when s has no room for a new backend. */
static bool tally(kc__index_summary *s, const char backend[8], uint64_t count, uint64_t bytes) {
  int j = 0;
  while (j < s->nbe && memcmp(s->be[j].backend, backend, 8)) j++;
  if (j == s->nbe) {
    if (s->nbe == KC__SUMMARY_BACKENDS) return false;
    memcpy(s->be[j].backend, backend, 8);
    s->be[j].count = s->be[j].bytes = 0;
    s->nbe++;
  }
  s->be[j].count += count;
  s->be[j].bytes += bytes;
  return true;
}

void kc__summary_add_recs(kc__index_summary *s, const kc__index_rec *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    s->count++;
    s->bytes += r[i].size;
    if (!r[i].backend[0]) s->damaged++;
    if (!s->oldest || r[i].mtime_ns < s->oldest) s->oldest = r[i].mtime_ns;
    if (r[i].mtime_ns > s->newest) s->newest = r[i].mtime_ns;
    if (!tally(s, r[i].backend, 1, r[i].size)) s->overflow = true;
  }
}

void kc__summary_merge(kc__index_summary *into, const kc__index_summary *s) {
  into->count += s->count;
  into->bytes += s->bytes;
  into->damaged += s->damaged;
  if (s->count && (!into->oldest || s->oldest < into->oldest)) into->oldest = s->oldest;
  if (s->newest > into->newest) into->newest = s->newest;
  for (int j = 0; j < s->nbe; j++)
    if (!tally(into, s->be[j].backend, s->be[j].count, s->be[j].bytes)) into->overflow = true;
  into->overflow = into->overflow || s->overflow;
}

static void slot_encode(int b, const kc__index_summary *s, int64_t mt, uint64_t ino, uint8_t *p) {
  memset(p, 0, KC__SLOT);
  kc__le32(p + 8, (uint32_t)b);
  kc__le32(p + 12, (uint32_t)s->nbe | (s->overflow ? KC__SLOT_OVERFLOW : 0));
  kc__le64(p + 16, (uint64_t)mt);
  kc__le64(p + 24, ino);
  kc__le64(p + 32, s->count);
  kc__le64(p + 40, s->bytes);
  kc__le64(p + 48, s->damaged);
  kc__le64(p + 56, (uint64_t)s->oldest);
  kc__le64(p + 64, (uint64_t)s->newest);
  for (int j = 0; j < s->nbe; j++) {
    memcpy(p + 72 + 24 * j, s->be[j].backend, 8);
    kc__le64(p + 80 + 24 * j, s->be[j].count);
    kc__le64(p + 88 + 24 * j, s->be[j].bytes);
  }
  kc__le64(p, kc__hash(p + 8, KC__SLOT - 8));
}

/* Slot p of bucket b into s when it is sound: its dir state in mt, ino. */
static bool slot_decode(const uint8_t *p, int b, kc__index_summary *s, int64_t *mt, uint64_t *ino) {
  uint32_t nbe = kc__rd32(p + 12);
  if (kc__rd64(p) != kc__hash(p + 8, KC__SLOT - 8) || kc__rd32(p + 8) != (uint32_t)b ||
      (nbe & ~KC__SLOT_OVERFLOW) > KC__SUMMARY_BACKENDS || (nbe & KC__SLOT_OVERFLOW))
    return false;
  memset(s, 0, sizeof *s);
  *mt = (int64_t)kc__rd64(p + 16);
  *ino = kc__rd64(p + 24);
  s->count = kc__rd64(p + 32);
  s->bytes = kc__rd64(p + 40);
  s->damaged = kc__rd64(p + 48);
  s->oldest = (int64_t)kc__rd64(p + 56);
  s->newest = (int64_t)kc__rd64(p + 64);
  s->nbe = (int)nbe;
  for (int j = 0; j < s->nbe; j++) {
    memcpy(s->be[j].backend, p + 72 + 24 * j, 8);
    s->be[j].count = kc__rd64(p + 80 + 24 * j);
    s->be[j].bytes = kc__rd64(p + 88 + 24 * j);
  }
  return true;
}

void kc__summary_put(const char *vdir, int b, const kc__index_rec *r, size_t n, int64_t mt, uint64_t ino) {
  kc__index_summary s;
  memset(&s, 0, sizeof s);
  kc__summary_add_recs(&s, r, n);
  uint8_t p[KC__SLOT];
  slot_encode(b, &s, mt, ino, p);
  char path[PATH_MAX];
  summary_path(vdir, path, sizeof path);
  int fd = kc__store_open_create(KC__IO_OPEN, path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  kc__fo_pwrite(fd, p, KC__SLOT, (off_t)b * KC__SLOT); /* a torn slot fails its checksum */
  close(fd);
}

bool kc__summary_read(const char *vdir, kc__index_summary slots[256], bool valid[256]) {
  uint8_t buf[256 * KC__SLOT];
  char path[PATH_MAX];
  summary_path(vdir, path, sizeof path);
  memset(valid, 0, 256 * sizeof *valid);
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  ssize_t got = fd >= 0 ? kc__fo_pread(fd, buf, sizeof buf, 0) : -1;
  if (fd >= 0) close(fd);
  for (int b = 0; b < 256; b++) {
    int64_t mt, dmt;
    uint64_t ino, dino;
    if (got < (ssize_t)((b + 1) * KC__SLOT)) {
      if (!kc__index_dir_state(vdir, b, &dmt, &dino)) { /* no bucket: nothing in it */
        memset(&slots[b], 0, sizeof slots[b]);
        valid[b] = true;
      }
      continue;
    }
    bool have = kc__index_dir_state(vdir, b, &dmt, &dino);
    if (!have) {
      memset(&slots[b], 0, sizeof slots[b]);
      valid[b] = true;
    } else {
      valid[b] = slot_decode(buf + b * KC__SLOT, b, &slots[b], &mt, &ino) && mt == dmt && ino == dino;
    }
  }
  return got >= 0;
}
