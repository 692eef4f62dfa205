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
 *
 * A child whose runtime's backend is not fork_safe (OpenCL, CUDA) also
 * gets the refusing table below, before the locks are given back.
 */
#include "core/cache_glue.h"
#include "core/core.h"

#include <unistd.h>

/* ------------------------------------------------ a child that refuses
 *
 * A child of fork() whose runtime's backend is not fork_safe (backend.h;
 * OpenCL and CUDA: their drivers' threads, queues and device state stay in
 * the parent, and a child that calls into them may hang or crash): the
 * child's hook calls forked_begin, which puts a table of its own in place
 * of the backend's. Every call that would reach the device refuses with
 * KC_EBUSY and one message ("... created before fork() in process P; the
 * opencl backend cannot be used in a child process: create a new runtime
 * in the child"), and every release (unlink, buffer and context destroy,
 * close) does nothing, so kc_runtime_destroy frees kcache's own memory and
 * leaves the backend's native state to the process's end, on purpose.
 *
 * Nothing is added to the parent's fast path: the child's contexts get new
 * link keys and their linked objects are recycled (link key 0), so every
 * cached handle slot and bound argument set misses, and the slow path's
 * link (refused) answers. The backend states the table receives (the
 * runtime's, each context's, the store's trial-load context) all become
 * &rt->forked, where a refusal finds its runtime.
 */

#define KC__FORKED(p) ((struct kc__forked *)(p))

static kc_status refuse(const struct kc__forked *f, const char *what) {
  return kc__err(f->rt, KC_EBUSY,
                 "%s refused: this runtime was created before fork() in process %ld; the %s backend cannot "
                 "be used in a child process: create a new runtime in the child",
                 what, f->pid, f->real_name);
}

static void f_close(void *state) { (void)state; /* the backend's state is left as it is */ }
static int f_device_count(void *state) { return KC__FORKED(state)->ndev; }
static const char *f_device_name(void *state, int index) {
  (void)state, (void)index;
  return NULL;
}
static const char *f_identity(void *state) {
  (void)state;
  return NULL; /* nothing is keyed with it */
}
static kc_status f_epilogue(void *state, const kc__tu *tu, kc__sb *out) {
  (void)tu, (void)out;
  return refuse(state, "compile");
}
static kc_status f_compile(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                           kc__sb *log) {
  (void)tu, (void)artifact, (void)size, (void)sig, (void)log;
  return refuse(state, "compile");
}
static kc_status f_ctx_create(void *state, int device, void **bctx) {
  (void)device, (void)bctx;
  return refuse(state, "context create");
}
static void f_ctx_destroy(void *bctx) { (void)bctx; }
static kc_status f_ctx_reset(void *bctx) { return refuse(bctx, "context reset"); }
static kc_status f_ctx_finish(void *bctx) { return refuse(bctx, "context finish"); }
static kc_status f_link(void *bctx, const kc__artifact *a, kc__blinked *b) {
  (void)a, (void)b;
  return refuse(bctx, "launch");
}
static void f_unlink(kc__blinked *b) { (void)b; }
static kc_status f_buf_create(void *bctx, size_t size, kc__bufh *h) {
  (void)size, (void)h;
  return refuse(bctx, "buffer create");
}
static void f_buf_destroy(void *bctx, kc__bufh *h) { (void)bctx, (void)h; }
static kc_status f_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  (void)h, (void)off, (void)src, (void)n;
  return refuse(bctx, "buffer write");
}
static kc_status f_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  (void)h, (void)off, (void)dst, (void)n;
  return refuse(bctx, "buffer read");
}
static kc_status f_buf_view(void *bctx, const kc__bufh *whole, size_t off, size_t size, kc__bufh *view) {
  (void)whole, (void)off, (void)size, (void)view;
  return refuse(bctx, "buffer view");
}
static void f_buf_view_destroy(void *bctx, kc__bufh *view) { (void)bctx, (void)view; }
static kc_status f_launch_ex(kc__blinked *b, void **argv, const kc__lcfg *cfg) {
  (void)argv, (void)cfg; /* not reached (no link succeeds), but refused too */
  return refuse(&kc__linked_of(b)->rt->forked, "launch");
}
static kc_status f_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx) {
  (void)native_ctx, (void)native_dev, (void)bctx;
  return refuse(state, "context wrap");
}
static void *f_ctx_native(void *bctx) {
  (void)bctx;
  return NULL;
}
static kc_status f_stream_create(void *bctx, void **native) {
  (void)native;
  return refuse(bctx, "stream create");
}
static kc_status f_stream_wrap(void *bctx, void *native) {
  (void)native;
  return refuse(bctx, "stream wrap");
}
static void f_stream_release(void *bctx, void *native, bool owned) { (void)bctx, (void)native, (void)owned; }
static kc_status f_stream_sync(void *bctx, void *native) {
  (void)native;
  return refuse(bctx, "stream sync");
}
static kc_status f_stream_wait(void *bctx, void *native, void *other) {
  (void)native, (void)other;
  return refuse(bctx, "stream wait");
}
static bool f_stream_capturing(void *bctx, void *native) {
  (void)bctx, (void)native;
  return false;
}
static kc_status f_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h) {
  (void)native, (void)size, (void)h;
  return refuse(bctx, "buffer wrap");
}
static void f_buf_unwrap(void *bctx, kc__bufh *h) { (void)bctx, (void)h; }
static kc_status f_buf_host(void *bctx, void *ptr, size_t size, kc__bufh *h) {
  (void)ptr, (void)size, (void)h;
  return refuse(bctx, "buffer host");
}
static kc_status f_entry_prologue(void *state, const kc__tu *tu, kc__sb *out) {
  (void)tu, (void)out;
  return refuse(state, "compile");
}
static uint64_t f_builds(void *state) { return ((const struct kc__forked *)state)->builds; }

/* The refusing table for real: its name, prelude and constants, its NULLs
 * (a call the backend lacks stays one: KC_EUNAVAILABLE as before), and
 * refusals or nothing for the rest. Every function of the table is
 * replaced or checked here: a field added to kc__backend must be too (the
 * size check below fails until it is; buf_host once reached OpenCL from a
 * child, which crashed in clCreateBuffer). */
#define KC__BACKEND_SIZE_SEEN 320 /* x86-64 */
_Static_assert(sizeof(void *) != 8 || sizeof(kc__backend) == KC__BACKEND_SIZE_SEEN,
               "kc__backend changed: decide what a child of fork() does with each new field (forked_table), "
               "then update KC__BACKEND_SIZE_SEEN");
static void forked_table(kc__backend *t, const kc__backend *real) {
  *t = *real;
#define KC__F(field) t->field = real->field ? f_##field : NULL;
  KC__F(epilogue)
  KC__F(launch_ex)
  KC__F(ctx_wrap)
  KC__F(ctx_native)
  KC__F(stream_create)
  KC__F(stream_wrap)
  KC__F(stream_release)
  KC__F(stream_sync)
  KC__F(stream_wait)
  KC__F(stream_capturing)
  KC__F(buf_wrap)
  KC__F(buf_unwrap)
  KC__F(buf_host)
  KC__F(entry_prologue)
  KC__F(builds)
#undef KC__F
  t->quiesce = NULL; /* the parent's threads are not the child's */
  t->close = f_close, t->device_count = f_device_count, t->device_name = f_device_name;
  t->identity = f_identity, t->compile = f_compile;
  t->ctx_create = f_ctx_create, t->ctx_destroy = f_ctx_destroy;
  t->ctx_reset = f_ctx_reset, t->ctx_finish = f_ctx_finish;
  t->link = f_link, t->unlink = f_unlink;
  t->buf_create = f_buf_create, t->buf_destroy = f_buf_destroy;
  t->buf_write = f_buf_write, t->buf_read = f_buf_read;
  /* always a view of its own: never the address arithmetic of a backend
   * without one (which would make a view in the child) */
  t->buf_view = f_buf_view, t->buf_view_destroy = f_buf_view_destroy;
}

static void forked_note(kc_runtime *rt) {
  if (!rt->be->fork_safe) rt->forked.ndev = rt->be->device_count(rt->bstate);
}

static bool forked_begin(kc_runtime *rt) {
  struct kc__forked *f = &rt->forked;
  if (rt->be->fork_safe || rt->be == &f->table) return false; /* usable, or done in an older fork */
  f->rt = rt;
  f->pid = (long)getppid(); /* the forking process: this child's parent */
  f->real_name = rt->be->name;
  f->builds = rt->be->builds ? rt->be->builds(rt->bstate) : 0; /* an atomic load: safe here */
  forked_table(&f->table, rt->be);
  rt->be = &f->table;
  rt->bstate = f;
  for (kc_context *c = rt->contexts; c; c = c->next) {
    if (!kc__load_relaxed(&c->alive)) continue;
    /* the linked objects go (their unlink does nothing): handles that
     * point at them miss, and the slow path's link refuses */
    KC__HTAB_DROP_IF(&c->linked, kc__linked, l, next_in_bucket, true, kc__linked_recycle(rt, l));
    c->bctx = f;
    uint64_t key = kc__next_id();
    kc__store_relaxed(&c->slot_off, KC__SLOT_OFF(key));
    kc__store_relaxed(&c->link_key, key);
  }
  return true;
}

/* ------------------------------------------------------------ the hooks */

static void fork_prepare(void *ud) {
  kc_runtime *rt = ud;
  kc__lock(&rt->collect_lock);
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
  if (child) forked_begin(rt); /* a backend that is not fork_safe refuses from now on */
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
  kc__unlock(&rt->collect_lock);
}

static void fork_parent(void *ud) { unlock_all(ud, false); }
static void fork_child(void *ud) { unlock_all(ud, true); }

void kc__runtime_fork_register(kc_runtime *rt) {
  forked_note(rt);
  rt->fork = (kc__fork_hook){.level = KC__FORK_RUNTIME,
                             .prepare = fork_prepare,
                             .parent = fork_parent,
                             .child = fork_child,
                             .ud = rt};
  kc__fork_register(&rt->fork); /* false: no fork handling (pthread_atfork out of memory) */
}

void kc__runtime_fork_unregister(kc_runtime *rt) { kc__fork_unregister(&rt->fork); }
