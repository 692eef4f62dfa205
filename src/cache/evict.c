/* SPDX-License-Identifier: MIT */
/*
 * cache/evict.c -- owns the incremental eviction that a write past the size
 * bound runs (kc__store_evict, index.h): the least recently used entries as
 * the index knows them, in a heap by last use; each candidate's mtime is
 * checked before it goes (a hit touches the file, not the index), and one
 * used since goes back in line with its new time, which the index then
 * records. At most a given number of entries per call, so that the write
 * that crosses the bound pays for a few unlinks, not for the whole store.
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
