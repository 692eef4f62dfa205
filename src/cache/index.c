/* SPDX-License-Identifier: MIT */
/*
 * cache/index.c -- owns the store's per-bucket index files (see index.h):
 * their format, reading them with the checks that decide whether one may be
 * believed, rebuilding a bucket's from its directory, the transactions in
 * which kcache changes a bucket, and the store's totals from the summary
 * (summary.c, below it) with the index of each bucket whose slot does not
 * count. The evictions that use them are evict.c's.
 */
#include "cache/index.h"
#include "base/hash.h"
#include "base/kit.h"
#include "cache/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define KC__IDX_MAGIC "KCINDEX2" /* KCINDEX1 (no names) reads as damaged: rebuilt */
#define KC__IDX_HEAD 48u
#define KC__IDX_REC 48u
/* An index longer than this is damage (a bucket of 1.6 million entries). */
#define KC__IDX_MAX (64u << 20)

void kc__index_set_free(const kc__heap *mem, kc__index_set *s) {
  kc__heap_free(mem, s->rec);
  memset(s, 0, sizeof *s);
}

static bool set_push(const kc__heap *mem, kc__index_set *s, const kc__index_rec *r) {
  bool ok;
  KC__GROW(mem, s->rec, s->cap, s->n + 1, 64, &ok);
  if (ok) s->rec[s->n++] = *r;
  return ok;
}

static void idx_path(const char *vdir, int b, char *out, size_t n) {
  snprintf(out, n, "%s/index/%02x", vdir, b);
}
static void bucket_dir(const char *vdir, int b, char *out, size_t n) { snprintf(out, n, "%s/%02x", vdir, b); }

static uint64_t idx_sum(const uint8_t *head, const uint8_t *recs, size_t len) {
  uint8_t h[40];
  memcpy(h, head, sizeof h);
  memset(h + 12, 0, 4); /* the dirty mark */
  uint64_t v[2] = {kc__hash(h, sizeof h), kc__hash(recs, len)};
  return kc__hash(v, sizeof v);
}

static void rec_decode(const uint8_t *p, kc__index_rec *r) {
  memcpy(r->key, p, 16);
  r->size = kc__rd64(p + 16);
  r->mtime_ns = (int64_t)kc__rd64(p + 24);
  memcpy(r->backend, p + 32, 8);
  r->name = kc__rd64(p + 40);
}

static void rec_encode(const kc__index_rec *r, uint8_t *p) {
  memcpy(p, r->key, 16);
  kc__le64(p + 16, r->size);
  kc__le64(p + 24, (uint64_t)r->mtime_ns);
  memcpy(p + 32, r->backend, 8);
  kc__le64(p + 40, r->name);
}

/* Appends the records of an index image of bucket b to out when it is
 * sound: 1 (clean) or 2 (dirty: its backends may still be reused); 0 if it
 * is not (out unchanged); -1 out of memory. */
static int idx_parse(const kc__heap *mem, const uint8_t *buf, size_t len, int b, int64_t *mt, uint64_t *ino,
                     kc__index_set *out) {
  if (len < KC__IDX_HEAD || memcmp(buf, KC__IDX_MAGIC, 8) || kc__rd32(buf + 8) != (uint32_t)b) return 0;
  uint64_t count = kc__rd64(buf + 16);
  if (count > (len - KC__IDX_HEAD) / KC__IDX_REC || KC__IDX_HEAD + count * KC__IDX_REC != len) return 0;
  if (idx_sum(buf, buf + KC__IDX_HEAD, len - KC__IDX_HEAD) != kc__rd64(buf + 40)) return 0;
  *mt = (int64_t)kc__rd64(buf + 24);
  *ino = kc__rd64(buf + 32);
  size_t n0 = out->n;
  for (uint64_t i = 0; i < count; i++) {
    kc__index_rec r;
    rec_decode(buf + KC__IDX_HEAD + i * KC__IDX_REC, &r);
    if (!set_push(mem, out, &r)) {
      out->n = n0;
      return -1;
    }
  }
  return kc__rd32(buf + 12) ? 2 : 1;
}

/* Opens bucket b's index to read, or (write) to read and write, made with
 * its directory when missing. -1 if it cannot be. */
static int idx_open(const char *vdir, int b, bool write) {
  char path[PATH_MAX];
  idx_path(vdir, b, path, sizeof path);
  if (!write) return kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  int fd = kc__store_open_create(KC__IO_CREATE, path, O_RDWR | O_CLOEXEC);
  if (fd >= 0 || errno != ENOENT) return fd;
  char dir[PATH_MAX];
  struct stat vst;
  snprintf(dir, sizeof dir, "%s/index", vdir);
  if (stat(vdir, &vst) != 0) return -1;
  if (kc__fo_mkdir(dir, vst.st_mode & 07777) == 0)
    kc__store_made_dir(dir, vst.st_mode & 07777); /* the store's own directory mode */
  return kc__store_open_create(KC__IO_CREATE, path, O_RDWR | O_CLOEXEC);
}

/* Reads the index open in fd (bucket b) into out: as idx_parse (0 also
 * when it cannot be read). */
static int idx_read(const kc__heap *mem, int fd, int b, int64_t *mt, uint64_t *ino, kc__index_set *out) {
  struct stat st;
  int r = 0;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)KC__IDX_HEAD &&
      st.st_size <= (off_t)KC__IDX_MAX) {
    size_t len = (size_t)st.st_size;
    uint8_t *buf = kc__heap_alloc(mem, len);
    if (!buf) r = -1;
    else if (kc__fo_pread(fd, buf, len, 0) == (ssize_t)len) r = idx_parse(mem, buf, len, b, mt, ino, out);
    kc__heap_free(mem, buf);
  }
  return r;
}

static int by_key(const void *a, const void *b) { return memcmp(a, b, 16); }

/* name into out: NUL-padded, cut at 8 bytes. */
static void copy_backend(char out[8], const char *name) {
  size_t n = strlen(name);
  memset(out, 0, 8);
  memcpy(out, name, n < 8 ? n : 8);
}

uint64_t kc__index_name_hash(const char *name) {
  uint64_t h = kc__hash(name, strlen(name));
  return h ? h : 1; /* 0: not known */
}

/* A decoded entry's backend and name into r. */
static void rec_of_entry(kc__index_rec *r, const kc__entry *e) {
  copy_backend(r->backend, e->backend);
  r->name = kc__index_name_hash(e->entry);
}

/* The backend and name of the entry image img (size bytes) into r
 * (backend "" and name 0 when it cannot be read). */
static void rec_of_image(kc__index_rec *r, const void *img, size_t size) {
  memset(r->backend, 0, 8);
  r->name = 0;
  kc__entry e;
  char why[64];
  if (!img || kc__entry_peek_mem(img, size, size, &e, why, sizeof why) != KC_OK) return;
  rec_of_entry(r, &e);
  kc__entry_free(NULL, &e);
}

void kc__index_rec_make(kc__index_rec *r, const uint8_t key[16], const struct stat *st, const void *img,
                        size_t size) {
  memcpy(r->key, key, 16);
  r->size = (uint64_t)st->st_size;
  r->mtime_ns = kc__stat_mtime_ns(st);
  rec_of_image(r, img, size);
}

/* Whether r's backend and name are known (read from the entry, or the
 * entry could not be read: backend ""). */
static bool rec_known(const kc__index_rec *r) {
  return r->backend[0] != KC__BACKEND_UNKNOWN && (!r->backend[0] || r->name);
}

/* The record of the file path (key from its name), its backend and name
 * from old (sorted by key) when old knew them, else peeked (peek), else
 * unknown. */
static void scan_one(const char *path, const uint8_t key[16], const struct stat *st, const kc__index_set *old,
                     bool peek, kc__index_rec *r) {
  kc__index_rec_make(r, key, st, NULL, 0);
  const kc__index_rec *was = old->n ? bsearch(key, old->rec, old->n, sizeof *old->rec, by_key) : NULL;
  if (was && was->backend[0] && rec_known(was)) {
    memcpy(r->backend, was->backend, 8); /* the key covers the backend and the name: they cannot change */
    r->name = was->name;
    return;
  }
  if (!peek) {
    r->backend[0] = KC__BACKEND_UNKNOWN;
    return;
  }
  kc__entry e;
  if (kc__entry_peek(path, &e, NULL, 0) != KC_OK) return;
  rec_of_entry(r, &e);
  kc__entry_free(NULL, &e);
}

/* Appends the records of bucket b's directory to out, reusing what old
 * (sorted in place here) knew. False when out of memory. */
static bool bucket_scan(const kc__heap *mem, const char *vdir, int b, kc__index_set *old, bool peek,
                        kc__index_set *out) {
  char dir[PATH_MAX], path[PATH_MAX];
  bucket_dir(vdir, b, dir, sizeof dir);
  if (old->n) qsort(old->rec, old->n, sizeof *old->rec, by_key);
  DIR *d = kc__store_opendir(dir);
  if (!d) return true; /* no bucket (or a link in its place: not followed): nothing in it */
  bool ok = true;
  for (struct dirent *de; ok && (de = readdir(d));) {
    uint8_t key[16];
    if (strlen(de->d_name) != 36 || strcmp(de->d_name + 32, ".kce") || !kc__store_unhex_n(de->d_name, key) ||
        key[0] != b) /* a misplaced entry is never looked up: gc and verify deal with it */
      continue;
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path || lstat(path, &st) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    kc__index_rec r;
    scan_one(path, key, &st, old, peek, &r);
    ok = set_push(mem, out, &r);
  }
  closedir(d);
  return ok;
}

/* Writes s as bucket b's index (dir state mt, ino) into fd, in place
 * under the bucket's lock: the image with the dirty mark, its length, then
 * the mark cleared. A reader that sees a part of it sees the mark or a
 * wrong checksum; so does one after a crash in the middle. */
static void idx_write(const kc__heap *mem, const char *vdir, int fd, int b, const kc__index_set *s,
                      int64_t mt, uint64_t ino) {
  size_t len = KC__IDX_HEAD + s->n * KC__IDX_REC;
  uint8_t *buf = kc__heap_alloc(mem, len);
  if (!buf) return;
  memcpy(buf, KC__IDX_MAGIC, 8);
  kc__le32(buf + 8, (uint32_t)b);
  kc__le32(buf + 12, 1);
  kc__le64(buf + 16, s->n);
  kc__le64(buf + 24, (uint64_t)mt);
  kc__le64(buf + 32, ino);
  for (size_t i = 0; i < s->n; i++) rec_encode(&s->rec[i], buf + KC__IDX_HEAD + i * KC__IDX_REC);
  kc__le64(buf + 40, idx_sum(buf, buf + KC__IDX_HEAD, len - KC__IDX_HEAD));
  static const uint8_t clean[4];
  if (kc__fo_pwrite(fd, buf, len, 0) == (ssize_t)len && ftruncate(fd, (off_t)len) == 0 &&
      kc__fo_pwrite(fd, clean, 4, 12) == 4)
    kc__summary_put(vdir, b, s->rec, s->n, mt, ino);
  kc__heap_free(mem, buf);
}

/* Whether the index just read (state mt, ino) describes bucket b now. */
static bool fresh(const char *vdir, int b, int64_t mt, uint64_t ino) {
  int64_t dmt;
  uint64_t dino;
  if (!kc__index_dir_state(vdir, b, &dmt, &dino)) return false;
  return dmt == mt && dino == ino;
}

/* Under bucket b's lock (fd its index, -1: none): its records into out
 * (appended), rebuilt from the directory, reusing what cur knew; written
 * to fd when write. */
static bool rebuild(const kc__heap *mem, const char *vdir, int b, kc__index_set *cur, int fd, bool write,
                    bool peek, kc__index_set *out) {
  int64_t mt = 0;
  uint64_t ino = 0;
  bool have = kc__index_dir_state(vdir, b, &mt, &ino);
  size_t n0 = out->n;
  if (have && !bucket_scan(mem, vdir, b, cur, peek, out)) {
    out->n = n0;
    return false;
  }
  if (write && have && fd >= 0) {
    kc__index_set mine = {out->rec + n0, out->n - n0, out->n - n0};
    idx_write(mem, vdir, fd, b, &mine, mt, ino);
  }
  return true;
}

/* Opens bucket b's index (to write if it may, else to read) and flocks it:
 * the bucket's lock. -1 if it cannot be; *rw whether it may be written. */
static int lock_bucket(const char *vdir, int b, bool write, bool *rw) {
  int fd = write ? idx_open(vdir, b, true) : -1;
  *rw = fd >= 0;
  if (fd < 0) fd = idx_open(vdir, b, false);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    close(fd);
    return -1;
  }
  return fd;
}

/* Gives back lock_bucket's lock and fd. Explicitly: a child forked while
 * the lock was held has the same open file, and closing this descriptor
 * alone would leave the lock held by the child's copy (the child then
 * waits for it forever the next time it opens the bucket). */
static void unlock_bucket(int fd) {
  flock(fd, LOCK_UN);
  close(fd);
}

static bool has_unknown(const kc__index_rec *r, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!rec_known(&r[i])) return true;
  return false;
}

/* kc__index_get; locked (kc__index_get_slot): straight to the locked path,
 * which writes the bucket's summary slot (when it may) from a fresh index,
 * and peeks at the entries whose backend the index does not know. */
static bool get_bucket(const kc__heap *mem, const char *vdir, int b, bool write, bool locked,
                       kc__index_set *out, bool *rebuilt) {
  int64_t mt;
  uint64_t ino;
  if (rebuilt) *rebuilt = false;
  size_t n0 = out->n;
  if (!locked) {
    int fd = idx_open(vdir, b, false);
    int r = idx_read(mem, fd, b, &mt, &ino, out);
    if (fd >= 0) close(fd);
    if (r < 0) return false;
    if (r == 1 && fresh(vdir, b, mt, ino)) return true;
    out->n = n0;
  }
  bool peek = locked;
  if (!kc__index_dir_state(vdir, b, &mt, &ino)) return true; /* no bucket, no entries */
  /* Under the lock: a writer may be at work (dirty), or have just finished. */
  bool rw;
  int fd = lock_bucket(vdir, b, write, &rw);
  kc__index_set cur = {0};
  int r = idx_read(mem, fd, b, &mt, &ino, &cur);
  bool ok = r >= 0;
  if (r == 1 && fresh(vdir, b, mt, ino) && !(peek && has_unknown(cur.rec, cur.n))) {
    for (size_t i = 0; ok && i < cur.n; i++) ok = set_push(mem, out, &cur.rec[i]);
    if (locked && rw) kc__summary_put(vdir, b, cur.rec, cur.n, mt, ino);
  } else if (ok) {
    if (rebuilt) *rebuilt = true;
    ok = rebuild(mem, vdir, b, &cur, fd, rw, peek, out);
  }
  kc__index_set_free(mem, &cur);
  if (fd >= 0) unlock_bucket(fd);
  return ok;
}

bool kc__index_get(const kc__heap *mem, const char *vdir, int b, bool write, kc__index_set *out,
                   bool *rebuilt) {
  return get_bucket(mem, vdir, b, write, false, out, rebuilt);
}

bool kc__index_get_slot(const kc__heap *mem, const char *vdir, int b, bool write, kc__index_set *out) {
  return get_bucket(mem, vdir, b, write, true, out, NULL);
}

bool kc__index_get_known(const kc__heap *mem, const char *vdir, int b, bool write, kc__index_set *out) {
  size_t n0 = out->n;
  if (!kc__index_get(mem, vdir, b, write, out, NULL)) return false;
  if (!has_unknown(out->rec + n0, out->n - n0)) return true;
  out->n = n0;
  return kc__index_get_slot(mem, vdir, b, write, out);
}

bool kc__index_get_all(const kc__heap *mem, const char *vdir, bool write, kc__index_set *out) {
  memset(out, 0, sizeof *out);
  for (int b = 0; b < 256; b++) {
    if (!kc__index_get(mem, vdir, b, write, out, NULL)) {
      kc__index_set_free(mem, out);
      return false;
    }
  }
  return true;
}

void kc__index_begin(const kc__heap *mem, const char *vdir, int b, kc__index_txn *t) {
  memset(t, 0, sizeof *t);
  t->bucket = b;
  bool rw;
  t->fd = lock_bucket(vdir, b, true, &rw);
  if (t->fd >= 0 && !rw) { /* a store this process cannot write: nothing to record */
    unlock_bucket(t->fd);
    t->fd = -1;
  }
  if (t->fd < 0) return;
  int64_t mt;
  uint64_t ino;
  t->sound = idx_read(mem, t->fd, b, &mt, &ino, &t->cur) == 1 && fresh(vdir, b, mt, ino);
  /* the mark: if we die before the commit, readers rebuild this bucket */
  static const uint8_t one[4] = {1, 0, 0, 0};
  if (t->sound && kc__fo_pwrite(t->fd, one, 4, 12) != 4) t->sound = false; /* then commit rebuilds */
}

void kc__index_del(kc__index_txn *t, const uint8_t key[16]) {
  for (size_t i = 0; i < t->cur.n; i++)
    if (!memcmp(t->cur.rec[i].key, key, 16)) {
      t->cur.rec[i] = t->cur.rec[--t->cur.n];
      return;
    }
}

void kc__index_put(const kc__heap *mem, kc__index_txn *t, const kc__index_rec *r) {
  kc__index_del(t, r->key); /* kept when not sound too: a rebuild reuses its backend */
  if (!set_push(mem, &t->cur, r)) t->sound = false;
}

void kc__index_commit(const kc__heap *mem, const char *vdir, kc__index_txn *t) {
  if (t->fd >= 0) {
    int64_t mt;
    uint64_t ino;
    if (t->sound && kc__index_dir_state(vdir, t->bucket, &mt, &ino)) {
      idx_write(mem, vdir, t->fd, t->bucket, &t->cur, mt, ino);
    } else {
      kc__index_set out = {0};
      rebuild(mem, vdir, t->bucket, &t->cur, t->fd, true, false, &out);
      kc__index_set_free(mem, &out);
    }
    unlock_bucket(t->fd);
  }
  kc__index_set_free(mem, &t->cur);
  t->fd = -1;
}

void kc__index_rebuild_all(const kc__heap *mem, const char *vdir) {
  for (int b = 0; b < 256; b++) {
    int64_t mt;
    uint64_t ino;
    bool rw;
    if (!kc__index_dir_state(vdir, b, &mt, &ino)) continue;
    int fd = lock_bucket(vdir, b, true, &rw);
    if (fd < 0) continue;
    kc__index_set cur = {0}, out = {0};
    idx_read(mem, fd, b, &mt, &ino, &cur); /* for the backends it knows, sound or not */
    rebuild(mem, vdir, b, &cur, fd, rw, true, &out);
    kc__index_set_free(mem, &cur);
    kc__index_set_free(mem, &out);
    unlock_bucket(fd);
  }
}

/* ------------------------------------------------ the store's totals */

bool kc__index_summarize(const kc__heap *mem, const char *vdir, bool write, kc__index_summary *total) {
  kc__index_summary *slots = kc__heap_alloc(mem, 256 * sizeof *slots);
  bool valid[256];
  memset(total, 0, sizeof *total);
  if (!slots) return false;
  kc__summary_read(vdir, slots, valid);
  bool ok = true;
  for (int b = 0; ok && b < 256; b++) {
    bool unknown = false;
    for (int j = 0; valid[b] && j < slots[b].nbe; j++) /* an invalid slot's bytes are not a summary */
      unknown = unknown || slots[b].be[j].backend[0] == KC__BACKEND_UNKNOWN;
    if (valid[b] && !unknown) {
      kc__summary_merge(total, &slots[b]);
      continue;
    }
    /* under the bucket's lock, which writes its slot again when it may */
    kc__index_set s = {0};
    ok = kc__index_get_slot(mem, vdir, b, write, &s);
    kc__summary_add_recs(total, s.rec, s.n);
    kc__index_set_free(mem, &s);
  }
  kc__heap_free(mem, slots);
  return ok;
}
