/* SPDX-License-Identifier: MIT */
/*
 * core/fork.c -- owns what a runtime does around fork() (base/fork.h): the
 * forking thread takes the runtime's locks in the order of doc/locks.md,
 * so that no other thread is inside the state they guard at the moment of
 * the fork; the parent gives them back; the child gives them back too,
 * frees the specialization locks that a thread of the parent held (their
 * compiles are the parent's: the child compiles again if it needs the
 * code), and keeps only the forking thread's pin.
 *
 * Not taken: each kc__spec.free_lock, which is only ever taken under a
 * context's lock (and so free while prepare holds them all); and
 * kc__spec.lock, held for whole compiles (seconds), so a fork
 * does not wait for them; the child finds each one either free or held by
 * a thread it does not have, and makes that one new. A code instance that
 * such a compile had not yet published is not in the child.
 */
#include "core/cache_glue.h"
#include "core/core.h"

static void fork_prepare(void *ud) {
  kc_runtime *rt = ud;
  kc__lock(&rt->ctx_lock);
  for (kc_context *c = rt->contexts; c; c = c->next) kc__lock(&c->lock);
  kc__lock(&rt->world_lock);
  kc__store_fork_lock(rt);
  kc__lock(&rt->spec_lock);
  kc__lock(&rt->kernels_lock);
  kc__pool_fork_prepare(rt);
}

/* child: whether this thread's pin is on rt (and so the only pin left) */
static void unlock_all(kc_runtime *rt, bool child) {
  kc__pool_fork_after(rt, child);
  kc__unlock(&rt->kernels_lock);
  if (child) {
    KC__HTAB_EACH(&rt->specs, kc__spec, s, next_in_bucket) {
      if (pthread_mutex_trylock(&s->lock) != 0) {
        /* held by a thread of the parent, which the child does not have */
        pthread_mutex_init(&s->lock, NULL);
      } else {
        kc__unlock(&s->lock);
      }
    }
  }
  kc__unlock(&rt->spec_lock);
  kc__store_fork_unlock(rt, child);
  if (child) {
    /* the other threads' pins stayed in the parent: keep this thread's */
    bool mine = kc__pin.depth && kc__pin.rt == rt && kc__pin.rt_id == rt->id;
    rt->npins = 0;
    if (mine && rt->cappins) rt->pins[rt->npins++] = (struct kc__pinned){kc__pin.world, 1};
    kc__store_release(&rt->fast_world, rt->npins ? KC__WORLD_PINNED : kc__load_relaxed(&rt->world));
  }
  kc__unlock(&rt->world_lock);
  for (kc_context *c = rt->contexts; c; c = c->next) kc__unlock(&c->lock);
  kc__unlock(&rt->ctx_lock);
}

static void fork_parent(void *ud) { unlock_all(ud, false); }
static void fork_child(void *ud) { unlock_all(ud, true); }

void kc__runtime_fork_register(kc_runtime *rt) {
  rt->fork = (kc__fork_hook){.level = KC__FORK_RUNTIME,
                             .prepare = fork_prepare,
                             .parent = fork_parent,
                             .child = fork_child,
                             .ud = rt};
  kc__fork_register(&rt->fork); /* false: no fork handling (pthread_atfork out of memory) */
}

void kc__runtime_fork_unregister(kc_runtime *rt) { kc__fork_unregister(&rt->fork); }
