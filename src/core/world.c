/* SPDX-License-Identifier: MIT */
/*
 * world.c -- owns worlds and pins: the caller's world (a thread's pin or
 * the latest world), kc_pin/kc_unpin and the multiset of pinned worlds
 * that decides fast_world, and kc_collect, which frees the code, linked
 * objects and definitions that no live world can reach.
 */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ worlds, pins */

/* The calling thread's pin. Read on every launch: in the shared library it
 * is built with the initial-exec TLS model, so this is one %fs load. */
KC__HIDDEN _Thread_local kc__pin_state kc__pin;

/* Whether this thread's pin is on rt. The fast path compares the pointer
 * only; a match (rare: pinned threads) is confirmed here against the id, so
 * a pin left on a destroyed runtime never applies to a new one at the same
 * address. */
KC__NOINLINE bool kc__pinned_on(const kc_runtime *rt) {
  if (kc__pin.rt != rt) return false;
  if (kc__pin.rt_id == rt->id) return true;
  kc__pin.rt = NULL; /* stale: the runtime it pinned is gone */
  kc__pin.depth = 0;
  return false;
}

void kc__drop_own_pin(const kc_runtime *rt) {
  if (kc__pin.rt == rt) {
    kc__pin.rt = NULL;
    kc__pin.depth = 0;
  }
}

/* The live runtimes: each from the end of its kc_runtime_create to the
 * start of its kc_runtime_destroy, in a list under live_lock (a leaf,
 * process-wide, held around fork()). Read only where a thread that holds a
 * pin asks to pin another runtime: a pin whose runtime another thread
 * destroyed is then dropped (no thread can unpin it), where one whose
 * runtime lives is refused. */
static kc__mutex live_lock = PTHREAD_MUTEX_INITIALIZER;
static kc_runtime *live;
static kc__once live_once = KC__ONCE_INIT;

static void live_lock_take(void *ud) {
  (void)ud;
  kc__lock(&live_lock);
}
static void live_lock_give(void *ud) {
  (void)ud;
  kc__unlock(&live_lock);
}
/* the child keeps the list: the parent's runtimes are its memory too */
static kc__fork_hook live_fork = {
    .level = KC__FORK_LIVE, .prepare = live_lock_take, .parent = live_lock_give, .child = live_lock_give};
static void live_fork_register(void) { kc__fork_register(&live_fork); }

void kc__runtime_list(kc_runtime *rt) {
  kc__call_once(&live_once, live_fork_register);
  kc__lock(&live_lock);
  rt->live_prev = NULL;
  rt->live_next = live;
  if (live) live->live_prev = rt;
  live = rt;
  kc__unlock(&live_lock);
}

void kc__runtime_unlist(kc_runtime *rt) {
  kc__lock(&live_lock);
  if (rt->live_prev || live == rt) { /* listed (a create that failed never was) */
    if (rt->live_prev) rt->live_prev->live_next = rt->live_next;
    else live = rt->live_next;
    if (rt->live_next) rt->live_next->live_prev = rt->live_prev;
  }
  rt->live_prev = rt->live_next = NULL;
  kc__unlock(&live_lock);
}

/* Whether the runtime at rt with this id is live; rt itself is read only
 * once it is found in the list. */
static bool runtime_lives(const kc_runtime *rt, uint64_t id) {
  kc__lock(&live_lock);
  const kc_runtime *r = live;
  while (r && r != rt) r = r->live_next;
  bool yes = r && r->id == id;
  kc__unlock(&live_lock);
  return yes;
}

kc_world kc_world_latest(const kc_runtime *rt) { return rt ? kc__load_acquire(&rt->world) : 0; }

kc_world kc_world_current(const kc_runtime *rt) { return rt ? kc__caller_world(rt) : 0; }

/* The multiset of pinned worlds, for kc_collect, under world_lock: a
 * collect that snapshots the pins never misses a world that is being
 * pinned, and the first pin turns the launch fast path's world check off
 * (fast_world) before this thread can launch pinned, with no definition
 * publishing a new world in between. */
static kc_status pins_add(kc_runtime *rt, kc_world *world) {
  kc__lock(&rt->world_lock);
  kc_world w = kc__load_acquire(&rt->world);
  size_t i = 0;
  while (i < rt->npins && rt->pins[i].world != w) i++;
  if (i == rt->npins) {
    bool ok;
    KC__GROW(&rt->heap, rt->pins, rt->cappins, rt->npins + 1, 8, &ok);
    if (!ok) {
      kc__unlock(&rt->world_lock);
      return kc__err(rt, KC_ENOMEM, "kc_pin: out of memory");
    }
    rt->pins[rt->npins++] = (struct kc__pinned){w, 0};
  }
  rt->pins[i].count++;
  kc__store_relaxed(&rt->fast_world, KC__WORLD_PINNED);
  kc__unlock(&rt->world_lock);
  *world = w;
  return KC_OK;
}

static void pins_remove(kc_runtime *rt, kc_world w) {
  kc__lock(&rt->world_lock);
  for (size_t i = 0; i < rt->npins; i++)
    if (rt->pins[i].world == w) {
      if (--rt->pins[i].count == 0) rt->pins[i] = rt->pins[--rt->npins];
      break;
    }
  /* the last pin gone: launches may check the latest world alone again */
  if (!rt->npins) kc__store_release(&rt->fast_world, kc__load_relaxed(&rt->world));
  kc__unlock(&rt->world_lock);
}

kc_status kc_pin(kc_runtime *rt, kc_world *pinned) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_pin: runtime is NULL");
  if (kc__pin.depth && !kc__pinned_on(rt) && kc__pin.depth) {
    if (runtime_lives(kc__pin.rt, kc__pin.rt_id))
      return kc__err(rt, KC_EBUSY, "kc_pin: this thread already pinned another runtime");
    kc__pin.rt = NULL; /* stale: another thread destroyed the runtime it pinned */
    kc__pin.depth = 0;
  }
  if (kc__pin.depth == UINT32_MAX) return kc__err(rt, KC_EBUSY, "kc_pin: nested too deeply");
  if (!kc__pin.depth) {
    kc_status st = pins_add(rt, &kc__pin.world);
    if (st) return st;
    kc__pin.rt = rt;
    kc__pin.rt_id = rt->id;
  }
  kc__pin.depth++;
  if (pinned) *pinned = kc__pin.world;
  return KC_OK;
}

kc_status kc_unpin(kc_runtime *rt) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_unpin: runtime is NULL");
  if (!kc__pin.depth || !kc__pinned_on(rt))
    return kc__err(rt, KC_EBUSY, "kc_unpin: this thread holds no pin on this runtime");
  if (--kc__pin.depth == 0) {
    kc__pin.rt = NULL;
    pins_remove(rt, kc__pin.world);
  }
  return KC_OK;
}

/* ---------------------------------------------------------------- collect
 *
 * kc_collect runs while other threads compile, define, pin and launch.
 * What it reclaims goes through three steps:
 *  1. choose (under world_lock, so no define or pin slips in between): the
 *     code instances of rt->clipped and the definitions of
 *     rt->retired_defs whose range holds no live world: the latest and
 *     every pinned one. Nothing can ask for them again: a world read from
 *     now on is the latest or newer, or a pin of one.
 *  2. unlist: the code instances leave their specializations' lists, and
 *     their linked objects leave their contexts' tables for the contexts'
 *     limbo with link key 0 (launch caches that still point at them miss),
 *     so nothing that starts from now on can reach them; a thread that
 *     already holds one of them is not allowed to link it again (ci->dead,
 *     kc__ctx_link). (The definitions stay in their bindings' lists: a
 *     lookup made at an old world is still valid there, and they are
 *     visible in no world anyone can ask for.)
 *  3. after a grace period (base/grace.h): threads that were inside a
 *     kcache call when the batch was made may still hold them (a compile at
 *     an old world, a slow-path launch running their code), so the batch
 *     waits until each of those threads has left that call; then its
 *     linked objects are unloaded, its definitions leave their lists, and
 *     all of it is freed. A batch whose threads are still inside waits for
 *     a later kc_collect (or the runtime's end).
 * Cached launches take no section unless the runtime guards them
 * (kc_options.guard_launches, launch.c): without it, a cached launch must
 * not be running code that a kc_collect frees (kcache.h, kc_collect). */

kc_status kc__enter_failed(const kc_runtime *rt, const char *fn) {
  return kc__err(rt, KC_ENOMEM, "%s: out of memory", fn);
}

typedef struct {
  kc_world latest;
  struct kc__pinned *pins;
  size_t npins;
} live_worlds;

static bool world_live(const live_worlds *lw, kc_world min, kc_world max) {
  if (min <= lw->latest && lw->latest <= max) return true;
  for (size_t i = 0; i < lw->npins; i++)
    if (min <= lw->pins[i].world && lw->pins[i].world <= max) return true;
  return false;
}

/* What one kc_collect chose, waiting for its grace period. */
struct kc__limbo {
  struct kc__limbo *next; /* younger batches */
  uint64_t id; /* its linked objects' kc__linked.batch (never 0) */
  kc__grace grace; /* the threads inside a call when it was made */
  bool snapped; /* grace was taken (else a later collect takes it: out of memory) */
  kc__ci *cis; /* dead (ci->dead), unlisted, chained by next_clipped */
  kc__def *defs; /* visible in no live world, still in their bindings' lists, chained by next_retired */
  uint64_t ncis, ndefs, nlinked;
};

/* Step 1, under world_lock: the dead code instances and definitions, off
 * rt->clipped and rt->retired_defs, into b. */
static void choose(kc_runtime *rt, struct kc__limbo *b) {
  live_worlds lw = {kc__load_acquire(&rt->world), rt->pins, rt->npins};
  for (kc__ci **pc = &rt->clipped; *pc;) {
    kc__ci *ci = *pc;
    if (world_live(&lw, kc__load_relaxed(&ci->min_world), kc__load_relaxed(&ci->max_world))) {
      pc = &ci->next_clipped; /* a pin still sees it */
      continue;
    }
    *pc = ci->next_clipped;
    kc__store_relaxed(&ci->dead, true); /* before the contexts' locks are taken: kc__ctx_link */
    ci->next_clipped = b->cis;
    b->cis = ci;
    b->ncis++;
  }
  for (kc__def **pr = &rt->retired_defs; *pr;) {
    kc__def *d = *pr;
    /* a live code instance's edges only point at definitions that hold one
     * of its (live) worlds, so none of them goes */
    if (world_live(&lw, d->min_world, kc__load_relaxed(&d->max_world))) {
      pr = &d->next_retired;
      continue;
    }
    *pr = d->next_retired;
    d->next_retired = b->defs;
    b->defs = d;
    b->ndefs++;
  }
}

/* Step 2, under world_lock: the dead code instances off their
 * specializations' lists (publishing pushes under world_lock too), each
 * list once, at the cost of its length. */
static void unlist_dead(kc__ci *dead, uint64_t pass) {
  for (kc__ci *d = dead; d; d = d->next_clipped) {
    kc__spec *s = d->spec;
    if (s->swept == pass) continue;
    s->swept = pass;
    _Atomic(kc__ci *) keep;
    atomic_init(&keep, NULL);
    _Atomic(kc__ci *) *tail = &keep; /* the live ones linked past the dead, in place */
    for (kc__ci *ci = kc__load_relaxed(&s->head); ci; ci = kc__load_relaxed(&ci->next))
      if (!kc__load_relaxed(&ci->dead)) {
        kc__store_release(tail, ci);
        tail = &ci->next;
      }
    kc__store_release(tail, NULL);
    kc__store_release(&s->head, kc__load_relaxed(&keep));
  }
}

/* Step 2 in the contexts: the linked objects of b's code instances, out of
 * their tables into their limbo (link key 0): one lookup per code instance
 * in each context that has linked anything. */
static void retire_linked(kc_runtime *rt, struct kc__limbo *b) {
  kc__lock(&rt->ctx_lock);
  for (kc_context *ctx = rt->contexts; ctx && b->cis; ctx = ctx->next) {
    kc__lock(&ctx->lock);
    if (kc__load_relaxed(&ctx->alive))
      for (kc__ci *ci = b->cis; ci && ctx->linked.count; ci = ci->next_clipped) {
        kc__linked **pl = &ctx->linked.slots[kc__htab_bucket(ci->id, ctx->linked.cap)];
        while (*pl && (*pl)->ci != ci) pl = &(*pl)->next_in_bucket;
        kc__linked *l = *pl;
        if (!l) continue;
        *pl = l->next_in_bucket;
        ctx->linked.count--;
        kc__store_release(&l->link_key, 0);
        l->batch = b->id;
        l->next_in_bucket = ctx->limbo;
        ctx->limbo = l;
        b->nlinked++;
      }
    kc__unlock(&ctx->lock);
  }
  kc__unlock(&rt->ctx_lock);
}

/* Step 3 in the contexts: b's linked objects unloaded (a context reset or
 * destroyed since has unloaded its own already). */
static void drop_linked(kc_runtime *rt, struct kc__limbo *b) {
  kc__lock(&rt->ctx_lock);
  for (kc_context *ctx = rt->contexts; ctx; ctx = ctx->next) {
    kc__lock(&ctx->lock);
    kc__ctx_limbo_drop(ctx, b->id);
    kc__unlock(&ctx->lock);
  }
  kc__unlock(&rt->ctx_lock);
}

/* Step 3: a batch whose grace period is over, unloaded and freed. */
static void batch_free(kc_runtime *rt, struct kc__limbo *b, kc_collect_info *info) {
  if (b->nlinked) drop_linked(rt, b);
  info->linked += b->nlinked;
  kc__lock(&rt->world_lock);
  uint64_t user = 0; /* kc_stats.definitions counts the caller's, not files' versions */
  for (kc__def *d = b->defs, *next; d; d = next) {
    next = d->next_retired;
    user += d->source != NULL;
    if (d->newer) d->newer->older = d->older;
    else d->binding->defs = d->older;
    if (d->older) d->older->newer = d->newer;
    kc__free(rt, d->source);
    kc__free(rt, d);
  }
  kc__unlock(&rt->world_lock);
  for (kc__ci *ci = b->cis, *next; ci; ci = next) {
    next = ci->next_clipped;
    kc__ci_free(rt, ci);
  }
  atomic_fetch_sub_explicit(&rt->n_defs, user, memory_order_relaxed);
  atomic_fetch_sub_explicit(&rt->n_cis, b->ncis, memory_order_relaxed);
  kc__fetch_add_relaxed(&rt->n_collected, b->ncis);
  info->code_instances += b->ncis;
  info->definitions += user;
  kc__grace_free(&b->grace, kc__rt_heap(rt));
  kc__free(rt, b);
}

/* The batches whose grace period is over (oldest first), freed;
 * collect_lock held. */
static void limbo_drain(kc_runtime *rt, kc_collect_info *info) {
  for (struct kc__limbo **pb = &rt->limbo; *pb;) {
    struct kc__limbo *b = *pb;
    /* a snapshot taken later than the batch is only more cautious */
    if (!b->snapped) b->snapped = kc__grace_snap(&b->grace, kc__rt_heap(rt));
    if (!b->snapped || !kc__grace_passed(&b->grace)) {
      pb = &b->next;
      continue;
    }
    *pb = b->next;
    batch_free(rt, b, info);
  }
}

/* The cost is what it frees plus what pins keep (the code instances with
 * a finite range and the ended definitions that a pinned world still
 * sees), times the contexts for the linked objects: not the size of the
 * cache. */
kc_status kc_collect(kc_runtime *rt, kc_collect_info *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_collect: runtime is NULL");
  kc_collect_info info = {0};
  /* no memory for a new batch: the older ones are still freed */
  struct kc__limbo *b = kc__calloc(rt, sizeof *b);
  kc__lock(&rt->collect_lock);
  if (b) {
    kc__lock(&rt->world_lock);
    choose(rt, b);
    static _Atomic uint64_t passes;
    b->id = kc__fetch_add_relaxed(&passes, 1) + 1;
    unlist_dead(b->cis, b->id);
    kc__unlock(&rt->world_lock);
    if (!b->cis && !b->defs) { /* nothing chosen: nothing to wait for */
      kc__free(rt, b);
    } else {
      retire_linked(rt, b);
      /* after the unlisting: who may still hold what was chosen (out of
       * memory: nobody knows, and the batch waits for a collect that can tell) */
      b->snapped = kc__grace_snap(&b->grace, kc__rt_heap(rt));
      struct kc__limbo **tail = &rt->limbo;
      while (*tail) tail = &(*tail)->next;
      *tail = b;
    }
  }
  limbo_drain(rt, &info);
  kc__unlock(&rt->collect_lock);
  if (out) *out = info;
  return b ? KC_OK
           : kc__err(rt, KC_ENOMEM, "kc_collect: out of memory (what earlier collects chose is freed)");
}

/* kc_runtime_destroy: every batch, whatever its grace (no other thread is
 * in a call on rt), after the contexts are gone (their linked objects'
 * code instances are freed here). */
void kc__limbo_free(kc_runtime *rt) {
  for (struct kc__limbo *b = rt->limbo, *next; b; b = next) {
    next = b->next;
    for (kc__ci *ci = b->cis, *nci; ci; ci = nci) {
      nci = ci->next_clipped;
      kc__ci_free(rt, ci);
    }
    /* its definitions are still in their bindings' lists: kc__table_free's */
    kc__grace_free(&b->grace, kc__rt_heap(rt));
    kc__free(rt, b);
  }
  rt->limbo = NULL;
}
