/* SPDX-License-Identifier: MIT */
/*
 * cache/evict.c -- owns the incremental eviction that a write past the size
 * bound runs (kc__store_evict, index.h): the least recently used entries as
 * the index knows them, in a heap by last use; each candidate's mtime is
 * checked before it goes (a hit touches the file, not the index), and one
 * used since goes back in line with its new time, which the index then
 * records. At most a given number of entries per call, so that the write
 * that crosses the bound pays for a few unlinks, not for the whole store.
 * And the full eviction of the commands (kc__store_gc, index.h): a scan of
 * every bucket directory, LRU by last use, stale temp files and abandoned
 * lock files, with the rewrite of the shared counters and of every bucket's
 * index that the scan makes exact. Both under gc.lock: one evictor at a
 * time per store.
 */
#include "cache/index.h"
#include "base/kit.h"
#include "cache/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* Temp files older than this belong to writers that died. */
#define KC__STALE_TEMP_NS (3600ull * 1000000000ull)
/* Lock files untouched this long belong to compiles that died. */
#define KC__STALE_LOCK_NS (600ull * 1000000000ull)

/* A candidate: record i of the loaded set, or (b >= 0) bucket b, not yet
 * loaded, whose oldest recorded last use is t. */
typedef struct cand {
  int64_t t;
  uint32_t i;
  int32_t b;
} cand;

/* A min-heap of candidates by last use. */
typedef struct lru_heap {
  const kc__heap *mem;
  cand *a;
  size_t n, cap;
} lru_heap;

static bool before(const lru_heap *h, size_t x, size_t y) { return h->a[x].t < h->a[y].t; }

static void swap_at(lru_heap *h, size_t x, size_t y) {
  cand t = h->a[x];
  h->a[x] = h->a[y];
  h->a[y] = t;
}

static void sift_down(lru_heap *h, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < h->n && before(h, l, m)) m = l;
    if (l + 1 < h->n && before(h, l + 1, m)) m = l + 1;
    if (m == i) return;
    swap_at(h, i, m);
    i = m;
  }
}

static bool push(lru_heap *h, cand v) {
  bool ok;
  KC__GROW(h->mem, h->a, h->cap, h->n + 1, 1024, &ok);
  if (!ok) return false;
  size_t i = h->n++;
  h->a[i] = v;
  while (i && before(h, i, (i - 1) / 2)) {
    swap_at(h, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  return true;
}

static cand pop(lru_heap *h) {
  cand v = h->a[0];
  h->a[0] = h->a[--h->n];
  sift_down(h, 0);
  return v;
}

/* Reads bucket b's records into s and its candidates into h; their bytes
 * into *bytes. False when out of memory. */
static bool load(const kc__heap *mem, const char *vdir, int b, kc__index_set *s, lru_heap *h,
                 uint64_t *bytes) {
  size_t n0 = s->n;
  if (!kc__index_get(mem, vdir, b, true, s, NULL)) return false;
  for (size_t i = n0; i < s->n; i++) {
    if (bytes) *bytes += s->rec[i].size;
    if (!push(h, (cand){s->rec[i].mtime_ns, (uint32_t)i, -1})) return false;
  }
  return true;
}

/* What the pass decided about one record. */
typedef enum change_kind { CH_EVICT, CH_TOUCH, CH_GONE } change_kind;
typedef struct change {
  kc__index_rec r; /* with the last use seen */
  change_kind kind;
  uint32_t seq; /* the order of the decisions: a record touched, then evicted, ends evicted */
} change;

static int by_bucket(const void *a, const void *b) {
  const change *x = a, *y = b;
  if (x->r.key[0] != y->r.key[0]) return (int)x->r.key[0] - (int)y->r.key[0];
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Picks the victims into ch[0..*nch): from h, loading the buckets whose
 * turn comes into s. False when out of memory: ch holds the decisions made
 * until then, each sound on its own. */
static bool choose(const kc__heap *mem, const char *vdir, kc__index_set *s, lru_heap *h, uint64_t target,
                   size_t max_victims, uint64_t *total, change *ch, size_t *nch) {
  size_t victims = 0, looked = 0;
  while (*total > target && victims < max_victims && h->n && looked < 4 * max_victims) {
    cand top = pop(h);
    if (top.b >= 0) {
      if (!load(mem, vdir, top.b, s, h, NULL)) return false;
      continue;
    }
    looked++;
    kc__index_rec *r = &s->rec[top.i];
    char path[PATH_MAX];
    kc__store_path(vdir, r->key, ".kce", path, sizeof path);
    struct stat st;
    change *c = &ch[*nch];
    c->seq = (uint32_t)(*nch)++;
    c->r = *r;
    if (lstat(path, &st) != 0) {
      c->kind = CH_GONE; /* removed meanwhile (its remover counted it) */
    } else if (kc__stat_mtime_ns(&st) > r->mtime_ns) {
      r->mtime_ns = c->r.mtime_ns = kc__stat_mtime_ns(&st); /* used since: back in line */
      c->kind = CH_TOUCH;
      if (!push(h, (cand){r->mtime_ns, top.i, -1})) return false;
    } else {
      c->kind = CH_EVICT; /* removed below only if its file is still as seen now */
      c->r.size = (uint64_t)st.st_size;
      c->r.mtime_ns = kc__stat_mtime_ns(&st);
      *total -= *total < c->r.size ? *total : c->r.size;
      victims++;
    }
  }
  return true;
}

/* The store's totals from the summary, every bucket a candidate at its
 * oldest; a bucket whose slot does not count is loaded at once, up to
 * KC__EVICT_REBUILDS of them (its index may need a rebuild: a store from
 * before the index, or a foreign change); the others wait for the next
 * pass, their bytes estimated from the rest. */
static bool start(const kc__heap *mem, const char *vdir, kc__index_set *s, lru_heap *h, kc__gc_result *r) {
  kc__index_summary *slots = kc__heap_alloc(mem, 256 * sizeof *slots);
  bool valid[256], ok = slots != NULL;
  if (ok) kc__summary_read(vdir, slots, valid);
  unsigned loaded = 0, known = 0, skipped = 0;
  for (int b = 0; ok && b < 256; b++) {
    if (!valid[b] && loaded++ >= KC__EVICT_REBUILDS) {
      skipped++;
      continue;
    }
    known++;
    if (!valid[b]) {
      size_t n0 = s->n;
      ok = load(mem, vdir, b, s, h, &r->bytes_before);
      r->entries_before += s->n - n0;
    } else if (slots[b].count) {
      r->bytes_before += slots[b].bytes;
      r->entries_before += slots[b].count;
      ok = push(h, (cand){slots[b].oldest, 0, b});
    }
  }
  if (skipped && known) {
    r->bytes_before += r->bytes_before / known * skipped;
    r->entries_before += r->entries_before / known * skipped;
  }
  kc__heap_free(mem, slots);
  return ok;
}

/* Applies ch[0..n) (sorted by bucket), one index transaction per bucket. */
static void apply(const kc__heap *mem, const char *vdir, change *ch, size_t n, kc__gc_result *r) {
  for (size_t i = 0; i < n;) {
    int b = ch[i].r.key[0];
    kc__index_txn t;
    kc__index_begin(mem, vdir, b, &t);
    for (; i < n && ch[i].r.key[0] == b; i++) {
      change *c = &ch[i];
      char path[PATH_MAX];
      kc__store_path(vdir, c->r.key, ".kce", path, sizeof path);
      struct stat st;
      if (c->kind == CH_EVICT && lstat(path, &st) == 0 && kc__stat_mtime_ns(&st) == c->r.mtime_ns &&
          unlink(path) == 0) { /* not used since it was chosen */
        r->evicted++;
        r->evicted_bytes += (uint64_t)st.st_size;
        kc__index_del(&t, c->r.key);
      } else if (c->kind == CH_GONE) {
        kc__index_del(&t, c->r.key);
      } else if (c->kind == CH_TOUCH) {
        kc__index_put(mem, &t, &c->r);
      }
    }
    kc__index_commit(mem, vdir, &t);
  }
}

kc_status kc__store_evict(const kc__heap *mem, const char *vdir, uint64_t target, size_t max_victims,
                          kc__gc_result *out) {
  kc__gc_result r;
  memset(&r, 0, sizeof r);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/gc.lock", vdir);
  int lfd = kc__store_open_create(KC__IO_OPEN, path, O_RDWR | O_CLOEXEC);
  if (lfd < 0) return kc__err_owner(0, KC_EIO, "cannot open %s: %s", path, strerror(errno));
  if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
    close(lfd);
    return KC_EBUSY; /* another evictor is at work (or no flock here) */
  }
  kc__index_set s = {0};
  lru_heap h = {mem, NULL, 0, 0};
  change *ch = NULL;
  kc_status st = KC_OK;
  if (!(ch = kc__heap_alloc(mem, (4 * max_victims + 1) * sizeof *ch)) || !start(mem, vdir, &s, &h, &r)) {
    st = kc__err_owner(0, KC_ENOMEM, "out of memory evicting from %s", vdir);
  } else {
    uint64_t total = r.bytes_before;
    size_t nch = 0;
    if (!choose(mem, vdir, &s, &h, target, max_victims, &total, ch, &nch)) /* what was chosen still goes */
      st = kc__err_owner(0, KC_ENOMEM, "out of memory evicting from %s (%zu decided)", vdir, nch);
    qsort(ch, nch, sizeof *ch, by_bucket);
    apply(mem, vdir, ch, nch, &r);
    r.entries_after = r.entries_before - r.evicted;
    r.bytes_after = r.bytes_before - r.evicted_bytes;
    kc__store_counters k;
    kc__store_counters_read(vdir, &k);
    /* Others may be writing: deltas, not a snapshot, unless the counters
     * were unknown or wrong (they called for eviction where none was due). */
    if (k.sized && r.bytes_before > target)
      kc__store_counters_add(vdir, -(int64_t)r.evicted_bytes, -(int64_t)r.evicted, 0, 0, 0, r.evicted, 0,
                             false, NULL);
    else
      kc__store_counters_add(vdir, (int64_t)r.bytes_after, (int64_t)r.entries_after, 0, 0, 0, r.evicted, 0,
                             true, NULL);
  }
  kc__heap_free(mem, ch);
  kc__heap_free(mem, h.a);
  kc__index_set_free(mem, &s);
  flock(lfd, LOCK_UN);
  close(lfd);
  if (out) *out = r;
  return st;
}

/* ------------------------------------------ the full eviction (kc__store_gc) */

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
 * are left; fills r's counts. An entry that cannot be removed (its bucket
 * directory not writable here) stays, counted in r->failed with the first
 * failure's path and errno, and the next goes instead; one that vanished
 * meanwhile (another process removed it, and counted it) is gone, not a
 * failure. */
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
    bool removed = unlink(files[i].path) == 0;
    if (!removed && errno != ENOENT) {
      if (!r->failed++) {
        r->fail_errno = errno;
        snprintf(r->fail_path, sizeof r->fail_path, "%s", files[i].path);
      }
      continue;
    }
    total -= files[i].size;
    left--;
    if (removed) {
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
  kc__store_list_free(mem, files, n);
  kc__store_counters_add(vdir, (int64_t)r.bytes_after, (int64_t)r.entries_after, 0, 0, 0, r.evicted, 0, true,
                         NULL);
  kc__index_rebuild_all(mem, vdir); /* after a scan, the index says what it found */
  flock(lfd, LOCK_UN);
  close(lfd);
  if (out) *out = r;
  return KC_OK;
}
