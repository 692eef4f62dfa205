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
  if (kc__pin.depth && !kc__pinned_on(rt) && kc__pin.depth)
    return kc__err(rt, KC_EBUSY, "kc_pin: this thread already pinned another runtime");
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

/* ---------------------------------------------------------------- collect */

typedef struct {
  kc_world latest;
  struct kc__pinned *pins;
  size_t npins;
} live_worlds;

static bool world_live(void *ud, kc_world min, kc_world max) {
  const live_worlds *lw = ud;
  if (min <= lw->latest && lw->latest <= max) return true;
  for (size_t i = 0; i < lw->npins; i++)
    if (min <= lw->pins[i].world && lw->pins[i].world <= max) return true;
  return false;
}

/* Takes the dead code instances off their specializations' lists: each
 * list once (swept: this collect's number), at the cost of its length. */
static void unlist_dead(kc__ci *dead, uint64_t pass) {
  for (kc__ci *d = dead; d; d = d->next_clipped) {
    kc__spec *s = d->spec;
    if (s->swept == pass) continue;
    s->swept = pass;
    kc__ci *keep = NULL, **tail = &keep;
    for (kc__ci *ci = kc__load_relaxed(&s->head); ci; ci = ci->next)
      if (!ci->dead) {
        *tail = ci;
        tail = &ci->next;
      }
    *tail = NULL;
    kc__store_release(&s->head, keep);
  }
}

/* Unloads the linked objects of the dead code instances: one lookup per
 * code instance in each context that has linked anything. */
static uint64_t unlink_dead(kc_runtime *rt, kc__ci *dead) {
  uint64_t n = 0;
  kc__lock(&rt->ctx_lock);
  for (kc_context *ctx = rt->contexts; ctx && dead; ctx = ctx->next) {
    kc__lock(&ctx->lock);
    if (kc__load_relaxed(&ctx->alive))
      for (kc__ci *ci = dead; ci && ctx->linked.count; ci = ci->next_clipped) {
        kc__linked **pl = &ctx->linked.slots[kc__htab_bucket(ci->id, ctx->linked.cap)];
        while (*pl && (*pl)->ci != ci) pl = &(*pl)->next_in_bucket;
        kc__linked *l = *pl;
        if (!l) continue;
        *pl = l->next_in_bucket;
        ctx->linked.count--;
        kc__linked_recycle(rt, l);
        n++;
      }
    kc__unlock(&ctx->lock);
  }
  kc__unlock(&rt->ctx_lock);
  return n;
}

/* kc_collect's part in the table, under world_lock. The code instances of
 * rt->clipped whose range holds no live world, taken off that list, marked
 * dead and chained by next_clipped (they are on no backedge list: a clipped
 * code instance left them when it was clipped); *n gets their number. */

static kc__ci *collect_code(kc_runtime *rt, bool (*live)(void *, kc_world, kc_world), void *ud, uint64_t *n) {
  kc__ci *dead = NULL;
  *n = 0;
  kc__lock(&rt->world_lock);
  for (kc__ci **pc = &rt->clipped; *pc;) {
    kc__ci *ci = *pc;
    if (live(ud, kc__load_relaxed(&ci->min_world), kc__load_relaxed(&ci->max_world))) {
      pc = &ci->next_clipped; /* a pin still sees it */
      continue;
    }
    *pc = ci->next_clipped;
    ci->dead = true;
    ci->next_clipped = dead;
    dead = ci;
    ++*n;
  }
  kc__unlock(&rt->world_lock);
  return dead;
}

/* Frees the retired definitions (kc__def_replace) visible in no live world;
 * returns their number. */
static uint64_t collect_defs(kc_runtime *rt, bool (*live)(void *, kc_world, kc_world), void *ud) {
  uint64_t freed = 0;
  kc__lock(&rt->world_lock);
  for (kc__def **pr = &rt->retired_defs; *pr;) {
    kc__def *d = *pr;
    /* A definition no live world sees can serve no lookup again; a live
     * code instance's edges only point at definitions that hold one of
     * its (live) worlds, so none of them goes. */
    if (live(ud, d->min_world, kc__load_relaxed(&d->max_world))) {
      pr = &d->next_retired;
      continue;
    }
    *pr = d->next_retired;
    if (d->newer) d->newer->older = d->older;
    else d->binding->defs = d->older;
    if (d->older) d->older->newer = d->newer;
    kc__free(rt, d->source);
    kc__free(rt, d);
    freed++;
  }
  kc__unlock(&rt->world_lock);
  atomic_fetch_sub_explicit(&rt->n_defs, freed, memory_order_relaxed);
  return freed;
}

/* The cost is what it frees plus what pins keep (the code instances with
 * a finite range and the ended definitions that a pinned world still sees),
 * times the contexts for the linked objects: not the size of the cache. */
kc_status kc_collect(kc_runtime *rt, kc_collect_info *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_collect: runtime is NULL");
  live_worlds lw = {0};
  kc__lock(&rt->world_lock);
  if (rt->npins) {
    lw.pins = kc__alloc(rt, rt->npins * sizeof *lw.pins);
    if (!lw.pins) {
      kc__unlock(&rt->world_lock);
      return kc__err(rt, KC_ENOMEM, "kc_collect: out of memory");
    }
    memcpy(lw.pins, rt->pins, rt->npins * sizeof *lw.pins);
    lw.npins = rt->npins;
  }
  lw.latest = kc__load_acquire(&rt->world);
  kc__unlock(&rt->world_lock);

  /* 1. The dead code instances, off their specializations' lists. */
  uint64_t ndead = 0;
  kc__ci *dead = collect_code(rt, world_live, &lw, &ndead);
  static _Atomic uint64_t passes;
  unlist_dead(dead, kc__fetch_add_relaxed(&passes, 1) + 1);
  /* 2. Their linked objects, in every context. */
  uint64_t nlinked = dead ? unlink_dead(rt, dead) : 0;
  /* 3. The definitions no live world sees. */
  uint64_t ndefs = collect_defs(rt, world_live, &lw);
  /* 4. Free them. */
  for (kc__ci *ci = dead, *next; ci; ci = next) {
    next = ci->next_clipped;
    kc__ci_free(rt, ci);
  }
  atomic_fetch_sub_explicit(&rt->n_cis, ndead, memory_order_relaxed);
  kc__fetch_add_relaxed(&rt->n_collected, ndead);
  kc__free(rt, lw.pins);
  if (out) *out = (kc_collect_info){ndead, nlinked, ndefs};
  return KC_OK;
}
