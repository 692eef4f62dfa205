/* SPDX-License-Identifier: MIT */
/*
 * arena.c -- the memory that the host backend's loader (loader.c) puts
 * linked objects into: a few large regions per runtime instead of mappings
 * per object, so that the number of linked objects is bounded by memory,
 * not by the kernel's limit on mappings (vm.max_map_count), and a link or
 * an unlink costs the same however many objects are loaded.
 *
 * A region is one reservation of address space, split in two halves that
 * lie within 2 GiB of each other (so that the code of an object reaches
 * its data PC-relatively):
 *   code half  a memfd mapped twice: read+execute where the code runs, and
 *              read+write at another address where the loader writes it
 *              (no page is ever writable and executable at once, and code
 *              that is running is never made unexecutable to add more);
 *   data half  anonymous read+write memory (an object's writable data).
 * Three mappings a region. Blocks are carved in 64-byte units; a freed
 * block goes to its region's free list for its size (exact sizes up to
 * HOST_BINS units, one first-fit list above), where the next object of
 * that size finds it. Regions grow in size, 4 MiB to 256 MiB a half, and
 * are unmapped when the runtime closes.
 *
 * fork: a child shares the code halves (the memfd) with its parent, so a
 * block one of them frees may still run in the other. Every region made
 * before a fork is frozen in both processes (the fork generation, counted
 * by a pthread_atfork handler, has moved past the region's): nothing is
 * carved from it or returned to it any more, its objects keep running, and
 * new links go to new regions. posix_spawn, which runs the compilers, is
 * not a fork here (it runs no atfork handler).
 */
#include "backends/host/host.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HOST_BINS 256 /* exact-size free lists: blocks of 1..255 units; [0]: bigger ones */
#define HOST_HALF_MIN ((size_t)4 << 20)
#define HOST_HALF_MAX ((size_t)256 << 20)

typedef struct host_half {
  char *run; /* where its bytes are used (executed, for code) */
  char *wr; /* where the loader writes them (== run for data) */
  size_t size, top; /* bytes, bytes handed out from the start */
  void *bins[HOST_BINS]; /* free blocks (write addresses): next pointer, then (in [0]) units */
} host_half;

struct host_region {
  struct host_region *next;
  unsigned gen; /* the fork generation it was made in: usable while it is current */
  void *base; /* the reservation: code half, then data half */
  size_t half;
  host_half code, data;
};

static _Atomic unsigned fork_gen;
static kc__once fork_once = KC__ONCE_INIT;
static void on_fork(void) { kc__fetch_add_relaxed(&fork_gen, 1); }
static void watch_forks(void) { pthread_atfork(on_fork, NULL, NULL); }

/* A block of `units` from h, as its write address, or NULL. *fresh: it was
 * never handed out before (still zero). */
static char *half_take(host_half *h, size_t units, bool *fresh) {
  *fresh = false;
  if (!units) return h->wr; /* nothing to hold: any address in the half */
  if (units < HOST_BINS && h->bins[units]) {
    char *p = h->bins[units];
    memcpy(&h->bins[units], p, sizeof(void *));
    return p;
  }
  if (units >= HOST_BINS)
    for (void **pp = &h->bins[0]; *pp; pp = (void **)*pp) {
      size_t have;
      memcpy(&have, (char *)*pp + sizeof(void *), sizeof have);
      if (have == units) { /* exact only: a split would need a size per block */
        char *p = *pp;
        memcpy(pp, p, sizeof(void *));
        return p;
      }
    }
  size_t n = units * HOST_UNIT;
  if (n > h->size - h->top) return NULL;
  char *p = h->wr + h->top;
  h->top += n;
  *fresh = true;
  return p;
}

static void half_give(host_half *h, char *p, size_t units) {
  if (!units) return;
  size_t bin = units < HOST_BINS ? units : 0;
  memcpy(p, &h->bins[bin], sizeof(void *));
  if (!bin) memcpy(p + sizeof(void *), &units, sizeof units);
  h->bins[bin] = p;
}

static void region_unmap(struct host_region *r, char *wview) {
  if (wview && wview != MAP_FAILED) munmap(wview, r->half);
  munmap(r->base, 2 * r->half);
}

/* A new region with halves of `half` bytes; NULL with errno set. */
static struct host_region *region_new(host_state *s, size_t half) {
  struct host_region *r = kc__bs_calloc(s->sv, sizeof *r);
  if (!r) {
    errno = ENOMEM;
    return NULL;
  }
  int fd = memfd_create("kcache-host-code", MFD_CLOEXEC);
  int err = fd < 0 ? errno : ftruncate(fd, (off_t)half) ? errno : 0;
  char *base = MAP_FAILED, *wview = MAP_FAILED;
  if (!err) {
    base = mmap(NULL, 2 * half, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) err = errno;
  }
  if (!err && (mmap(base, half, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
               mmap(base + half, half, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED ||
               (wview = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED))
    err = errno;
  if (fd >= 0) close(fd);
  r->base = base;
  r->half = half;
  r->gen = kc__load_relaxed(&fork_gen);
  if (err) {
    if (base != MAP_FAILED) region_unmap(r, wview);
    kc__bs_free(s->sv, r);
    errno = err;
    return NULL;
  }
  r->code = (host_half){.run = base, .wr = wview, .size = half};
  r->data = (host_half){.run = base + half, .wr = base + half, .size = half};
  return r;
}

/* Both blocks of one object from region r, or false (r unchanged). */
static bool region_take(struct host_region *r, size_t cu, size_t du, host_block *b) {
  if (r->gen != kc__load_relaxed(&fork_gen)) return false; /* frozen by a fork */
  bool cfresh, dfresh;
  char *c = half_take(&r->code, cu, &cfresh);
  if (!c) return false;
  char *d = half_take(&r->data, du, &dfresh);
  if (!d) {
    half_give(&r->code, c, cu);
    return false;
  }
  *b = (host_block){r, c, r->code.run + (c - r->code.wr), d, cu, du, dfresh};
  return true;
}

kc_status host_arena_take(host_state *s, size_t code_bytes, size_t data_bytes, host_block *b) {
  size_t cu = (code_bytes + HOST_UNIT - 1) / HOST_UNIT, du = (data_bytes + HOST_UNIT - 1) / HOST_UNIT;
  kc__call_once(&fork_once, watch_forks);
  kc__lock(&s->arena_lock);
  for (struct host_region *r = s->regions; r; r = r->next)
    if (region_take(r, cu, du, b)) {
      kc__unlock(&s->arena_lock);
      return KC_OK;
    }
  /* a new region, twice the size of the last one (or what the object needs) */
  size_t half =
      s->regions && s->regions->gen == kc__load_relaxed(&fork_gen) ? 2 * s->regions->half : HOST_HALF_MIN;
  if (half > HOST_HALF_MAX) half = HOST_HALF_MAX;
  size_t need = (cu > du ? cu : du) * HOST_UNIT;
  while (half < need) half *= 2;
  struct host_region *r = region_new(s, half);
  if (!r) {
    int e = errno;
    kc__unlock(&s->arena_lock);
    /* a resource, not the object: the next link tries again */
    return kc__bs_err(s->sv, KC_ENOMEM, "no memory to load the object into (%zu MiB of address space: %s)",
                      2 * half >> 20, strerror(e));
  }
  r->next = s->regions;
  s->regions = r; /* first: it has room, the others did not */
  bool ok = region_take(r, cu, du, b);
  kc__unlock(&s->arena_lock);
  return ok ? KC_OK : kc__bs_err(s->sv, KC_ENOMEM, "no memory to load the object into");
}

void host_arena_give(host_state *s, const host_block *b) {
  kc__lock(&s->arena_lock);
  if (b->region->gen == kc__load_relaxed(&fork_gen)) { /* else frozen: the blocks stay as they are */
    half_give(&b->region->code, b->code_wr, b->code_units);
    half_give(&b->region->data, b->data, b->data_units);
  }
  kc__unlock(&s->arena_lock);
}

void host_arena_close(host_state *s) {
  for (struct host_region *r = s->regions, *next; r; r = next) {
    next = r->next;
    region_unmap(r, r->code.wr);
    kc__bs_free(s->sv, r);
  }
  s->regions = NULL;
}
