/* SPDX-License-Identifier: MIT */
/*
 * stream.c -- the host backend's streams (kc_stream_create): in-order
 * queues whose launches run asynchronously, each stream on a thread of its
 * own, as a CUDA stream or an OpenCL in-order queue runs them beside the
 * caller. The context's own queue (kc_launch, and kc_launch_ex without a
 * stream) and the wrapped implicit stream (kc_stream_wrap(ctx, NULL)) stay
 * synchronous: a launch there returns when its last group has run.
 *
 * A stream's thread whose queue ran empty, and a sync (as well as a
 * stream's destroy, and a kc_stream_wait run on the caller) first watch
 * the stream's counts, without the lock, for up to host_streams.spin_ns
 * (KC_HOST_STREAM_SPIN_US, 20 us by default) before they sleep on a
 * condition variable: a launch that
 * follows the last one closely, or a short launch's sync, then meets a
 * thread that is awake, where waking a sleeping one costs a few
 * microseconds on each side. Past its first microsecond the watch calls
 * sched_yield between looks: the scheduler tends to put the thread that
 * was woken on the core of the one that woke it, so the thread watched for
 * may be waiting for this very core (a watch that only paused made the
 * round trip 5x slower: doc/benchmarks.md).
 *
 * A launch on a stream is checked where it is made (its grid and block,
 * its scratch area; the core checked its arguments) and queued with a
 * copy of its arguments' values (a buffer's pointer, a scalar's bytes), as
 * clSetKernelArg captures them: a later kc_args_set or a changed scalar
 * does not reach it. The stream's thread runs the queued launches in
 * order (a launch's groups on the pool, exec.c, like any other launch);
 * kc_stream_wait queues a wait for what the other stream had queued.
 *
 * What a queued launch needs stays until it has run:
 *   - its loaded object: host_image.queued counts its queued launches, and
 *     unlinking the object (kc_collect, a relink after kc_define, a reset
 *     or destroyed context) waits until they have run;
 *   - the buffers kcache made: kc_buffer_destroy waits for the launches
 *     queued on every stream before it (host_streams_drain). Memory the
 *     caller owns (kc_buffer_wrap, kc_buffer_host) must outlive them, as on
 *     the other backends.
 * A launch that fails on its stream (items that disagree at a barrier, out
 * of memory for a fiber or a copy) keeps its status and message for the
 * stream's next kc_stream_sync (or kc_context_finish), which returns it;
 * the launches queued after it still run.
 *
 * A stream's thread starts at its first launch, with the signal mask of
 * the thread that made it (as the pool's workers keep the application's:
 * a kernel's fault is the process's), and ends when it has waited
 * host_streams.idle_ns for a launch (KC_HOST_STREAM_IDLE, 5 s by default;
 * 0: never), so that only the streams in use hold running threads; the
 * stream's next launch (or a kc_stream_wait that needs it) joins the one
 * that ended and starts another, with that caller's signal mask. Until
 * then the ended thread's stack stays mapped. What the stream keeps (a
 * failure not yet synced, its counts) is the stream's, not the thread's.
 * Where no thread can start (out of resources; a ThreadSanitizer build
 * in a child of fork(); no fork hook, pthread_atfork having run out of
 * memory), the stream runs its launches in the caller, in order: its
 * queue is empty whenever it has no thread. A child of fork() has no
 * stream thread and does not run what its parent had queued (the parent
 * does): its streams start empty, and their threads start again at their
 * next launch. Sync the streams before
 * fork() for a defined state.
 *
 * Locks: host_streams.lock (held to queue, to take a launch off a queue
 * and to count its end, and around fork(); released for the watch before
 * a sleep, as for the sleep; no group runs under it, and no
 * lock of kcache's is taken under it; the allocator is called outside it,
 * pthread_create under it when a stream's thread starts, as is the join
 * of a thread that ended idle: that thread released it, and what it does
 * as it ends (its thread-local destructors: the grace registry's leaf
 * lock, its scratch area freed) never waits for it).
 */
#include "backends/host/host.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct host_stream host_stream;

/* A queued launch (l set) or wait (l NULL: until `other` has finished
 * `target` launches; other NULL once it is destroyed, after draining). */
typedef struct host_item {
  struct host_item *next;
  uint64_t ticket; /* host_streams.ticket when it was queued */
  kc__blinked *l;
  host_image *im;
  host_stream *other;
  uint64_t target;
  kc_dim3 grid, block;
  uint32_t shared_bytes;
  size_t cap; /* bytes of vals */
  void *argv[KC_MAX_ARGS]; /* into vals, each value at a multiple of its alignment */
  unsigned char vals[];
} host_item;

struct host_stream {
  host_state *s;
  host_stream *prev, *next; /* host_streams.list */
  host_item *head, *tail; /* queued, not yet taken */
  host_item *running; /* taken by the thread, not yet finished */
  host_item *spare; /* finished items, kept for the next launches */
  unsigned nspare;
  /* items queued and finished, ever: changed under the lock, and read
   * without it only by host_spin, as a hint */
  _Atomic uint64_t queued, done;
  pthread_cond_t wake; /* the thread waits here for an item */
  pthread_t thread;
  bool started; /* the thread runs (in this process) */
  bool ended; /* the thread ended, idle, and is still to be joined */
  _Atomic bool stop; /* set under the lock; read without it only by host_spin */
  kc_status err; /* the first failure not yet reported by a sync, and its message */
  char msg[1024];
};

struct host_streams {
  kc__mutex lock;
  bool no_threads; /* no fork hook: a child would inherit queues without threads */
  pthread_cond_t idle; /* an item finished (broadcast when waiters) */
  unsigned waiters;
  host_stream *list;
  uint64_t ticket; /* items queued ever, on every stream */
  uint64_t idle_ns; /* a stream's thread ends after waiting this long for a launch (0: never) */
  uint64_t spin_ns; /* host_spin's watch before a sleep (0: none) */
  kc__fork_hook fork;
};

#define HOST_SPARE_MAX 32 /* finished items a stream keeps */

/* ------------------------------------------------------------ waiting */

/* Waits on idle for the next finished item (lock held). */
static void host_idle_wait(host_streams *q) {
  q->waiters++;
  pthread_cond_wait(&q->idle, &q->lock);
  q->waiters--;
}

/* Before a sleep on a condition variable (lock held on entry and on
 * return): watches *count, the lock released, until it reaches want or
 * *stop (where given) is set, for at most q->spin_ns
 * (KC_HOST_STREAM_SPIN_US). Only a hint: the caller tests what it waits
 * for again under the lock. Where the wait is short (a launch that
 * follows the last one, a sync of a short launch), this saves the sleep
 * and the wake-up on each side, a few microseconds each. */
static void host_spin(host_streams *q, _Atomic uint64_t *count, uint64_t want, _Atomic bool *stop) {
  if (!q->spin_ns || kc__load_relaxed(count) >= want) return;
  kc__unlock(&q->lock);
  uint64_t start = kc__now_ns(), now = start;
  do {
    /* past the first microsecond, the core is offered to other threads:
     * on a machine with more threads than cores, the one this waits for
     * may need it */
    if (now - start < 1000) kc__cpu_relax();
    else sched_yield();
    now = kc__now_ns();
  } while (kc__load_relaxed(count) < want && !(stop && kc__load_relaxed(stop)) && now - start < q->spin_ns);
  kc__lock(&q->lock);
}

/* Bumps one of a stream's counts (lock held: the only writer). */
static void host_count(_Atomic uint64_t *count) { kc__store_relaxed(count, kc__load_relaxed(count) + 1); }

/* Waits until t has an item or is stopped (lock held), watching for
 * either first (host_spin: kc_stream_destroy's join does not wait out the
 * watch). False when it waited q->idle_ns for neither: the thread then
 * ends. */
static bool host_stream_sleep(host_streams *q, host_stream *t) {
  if (!t->head && !t->stop) host_spin(q, &t->queued, kc__load_relaxed(&t->queued) + 1, &t->stop);
  if (!q->idle_ns) {
    while (!t->head && !t->stop) pthread_cond_wait(&t->wake, &q->lock);
    return true;
  }
  uint64_t until = kc__now_ns() + q->idle_ns;
  while (!t->head && !t->stop)
    if (!kc__cond_wait_until(&t->wake, &q->lock, until) && !t->head && !t->stop) return false;
  return true;
}

/* The ticket of the oldest item of t not finished (UINT64_MAX: none). */
static uint64_t host_oldest(const host_stream *t) {
  if (t->running) return t->running->ticket;
  return t->head ? t->head->ticket : UINT64_MAX;
}

void host_streams_drain(host_state *s) {
  host_streams *q = s->streams;
  if (!q) return;
  kc__lock(&q->lock);
  uint64_t before = q->ticket;
  for (;;) {
    bool busy = false;
    for (const host_stream *t = q->list; t && !busy; t = t->next) busy = host_oldest(t) <= before;
    if (!busy) break;
    host_idle_wait(q);
  }
  kc__unlock(&q->lock);
}

void host_streams_forget(host_state *s, host_image *im) {
  host_streams *q = s->streams;
  if (!q) return;
  kc__lock(&q->lock);
  while (im->queued) host_idle_wait(q);
  kc__unlock(&q->lock);
}

/* ------------------------------------------------------ running items */

/* Runs a queued launch on the calling thread, as a launch on the
 * context's own queue runs (host_launch_now: its scratch area is the
 * thread's, freed when the thread exits): its status, its message on this
 * thread. */
static int host_item_run(host_item *it) {
  kc__lcfg cfg = {.grid = &it->grid, .block = &it->block, .shared_bytes = it->shared_bytes};
  return host_launch_now(it->l, it->argv, &cfg);
}

/* Keeps it as a spare of t for the next launches (lock held), or returns
 * it to be freed (outside the lock: the allocator may be the
 * application's). */
static host_item *host_item_keep(host_stream *t, host_item *it) {
  if (t->nspare >= HOST_SPARE_MAX) return it;
  it->next = t->spare;
  t->spare = it;
  t->nspare++;
  return NULL;
}

/* Counts the end of it (lock held): its object may go, its waiters wake;
 * host_item_keep's result. */
static host_item *host_item_end(host_streams *q, host_stream *t, host_item *it) {
  if (it->im) it->im->queued--;
  host_count(&t->done);
  if (q->waiters) pthread_cond_broadcast(&q->idle);
  return host_item_keep(t, it);
}

static void *host_stream_thread(void *arg) {
  host_stream *t = arg;
  host_state *s = t->s;
  host_streams *q = s->streams;
  kc__lock(&q->lock);
  for (;;) {
    if (!host_stream_sleep(q, t)) { /* idle: the next launch starts a thread again */
      t->started = false;
      t->ended = true;
      break;
    }
    host_item *it = t->head;
    if (!it) break; /* stopped, and nothing is left */
    t->head = it->next;
    if (!t->head) t->tail = NULL;
    t->running = it;
    if (!it->l) { /* a wait */
      while (it->other && kc__load_relaxed(&it->other->done) < it->target) host_idle_wait(q);
    } else {
      kc__unlock(&q->lock);
      int r = host_item_run(it);
      char msg[sizeof t->msg];
      if (r) {
        const kc__bsvc *sv = host_sv(it->l);
        snprintf(msg, sizeof msg, "kernel '%s', launched on a stream, failed: %s", sv->name_of(it->l),
                 kc__errmsg_owner(sv->owner));
      }
      kc__lock(&q->lock);
      if (r && !t->err) {
        t->err = (kc_status)r;
        memcpy(t->msg, msg, sizeof msg);
      }
    }
    t->running = NULL;
    host_item *spent = host_item_end(q, t, it);
    if (spent) {
      kc__unlock(&q->lock);
      kc__bs_free(s->sv, spent);
      kc__lock(&q->lock);
    }
  }
  kc__unlock(&q->lock);
  return NULL;
}

/* Whether t has its thread, started now if need be (lock held). */
static bool host_stream_thread_ready(host_stream *t) {
  if (t->started) return true;
  if (t->s->streams->no_threads || !kc__fork_threads_allowed()) return false;
  if (t->ended) { /* the one that ended idle (it released the lock) */
    pthread_join(t->thread, NULL);
    t->ended = false;
  }
  /* the launching thread's signal mask (not all blocked, unlike kc__thread_start: a kernel's fault
   * must stay the process's, as on the pool's workers) */
  t->started = pthread_create(&t->thread, NULL, host_stream_thread, t) == 0;
  return t->started;
}

/* Whether t's next launch runs on the caller (lock held): nothing queued
 * and no thread to be had. */
static bool host_stream_inline(host_stream *t) {
  return !t->head && !t->running && !host_stream_thread_ready(t);
}

/* ------------------------------------------------------------ queueing */

/* An item of t with room for need bytes of values (lock held on entry and
 * on return; released to allocate); NULL when out of memory. Whether t
 * runs its launches on the caller (host_stream_inline) is decided after
 * it, under the same hold of the lock as the queueing: t's thread may
 * end, idle, while the lock is released here. */
static host_item *host_item_take(host_streams *q, host_stream *t, size_t need) {
  for (host_item **p = &t->spare; *p; p = &(*p)->next)
    if ((*p)->cap >= need) {
      host_item *it = *p;
      *p = it->next;
      t->nspare--;
      return it;
    }
  kc__unlock(&q->lock);
  size_t cap = need < 256 ? 256 : need;
  host_item *it = kc__bs_alloc(t->s->sv, sizeof *it + cap);
  kc__lock(&q->lock);
  if (it) it->cap = cap;
  return it;
}

/* An item of t for a launch or a wait with need bytes of values (lock
 * held on entry and on return), or NULL: where t runs on the caller
 * (*here set; the item taken goes back to the spares, or in *spent, to be
 * freed once the lock is released) or out of memory. */
static host_item *host_item_for(host_streams *q, host_stream *t, size_t need, bool *here, host_item **spent) {
  host_item *it = host_item_take(q, t, need);
  *here = host_stream_inline(t);
  *spent = *here && it ? host_item_keep(t, it) : NULL;
  return *here ? NULL : it;
}

/* Queues it on t (lock held). */
static void host_item_queue(host_streams *q, host_stream *t, host_item *it) {
  it->next = NULL;
  it->ticket = ++q->ticket;
  if (t->tail) t->tail->next = it;
  else t->head = it;
  t->tail = it;
  host_count(&t->queued);
  if (it->im) it->im->queued++;
  pthread_cond_signal(&t->wake);
}

/* The bytes of argument i of a launch (cfg->args: the kinds), and the
 * alignment of its copy: the power of two that holds its size, up to
 * HOST_VAL_ALIGN (a type's alignment divides its size). */
#define HOST_VAL_ALIGN 4096
static size_t host_arg_size(const kc__lcfg *cfg, uint32_t i) {
  const kc_arg *a = &cfg->args[i];
  return a->kind == KC_ARG_SCALAR ? a->size : sizeof(void *);
}
static size_t host_val_align(size_t size) {
  size_t align = 1;
  while (align < size && align < HOST_VAL_ALIGN) align *= 2;
  return align;
}
static size_t host_val_at(size_t at, size_t size) {
  size_t align = host_val_align(size);
  return (at + align - 1) & ~(align - 1);
}

/* Queues a launch on cfg->stream (its arguments' values copied), or runs
 * it now where the stream has no thread. */
static kc_status host_stream_launch(kc__blinked *l, void **argv, const kc__lcfg *cfg) {
  host_state *s = l->bctx;
  host_streams *q = s->streams;
  host_stream *t = cfg->stream;
  host_image *im = l->module;
  const kc_dim3 *g = cfg->grid, *b = cfg->block;
  if (!g || !b || !g->x || !g->y || !g->z || !b->x || !b->y || !b->z) return host_sv(l)->bad_dims(l, g, b);
  uint32_t n = im->nargs;
  size_t need = 0, align = 1; /* the values laid out from an aligned start; the largest alignment */
  for (uint32_t i = 0; i < n; i++) {
    if (KC__UNLIKELY(cfg->args[i].kind == KC_ARG_LOCAL)) /* no host parameter takes one: never checked in */
      return kc__bs_err(s->sv, KC_EARGS,
                        "kernel '%s': argument %u is local memory, which the host backend has none of",
                        host_sv(l)->name_of(l), i);
    size_t sz = host_arg_size(cfg, i);
    need = host_val_at(need, sz) + sz;
    if (host_val_align(sz) > align) align = host_val_align(sz);
  }
  need += align - 1; /* room to align the start */
  kc__lock(&q->lock);
  bool here;
  host_item *spent, *it = host_item_for(q, t, need, &here, &spent);
  if (here) { /* no thread: in order on the caller (nothing is queued) */
    kc__unlock(&q->lock);
    if (spent) kc__bs_free(s->sv, spent);
    return host_launch_now(l, argv, cfg);
  }
  if (!it) {
    kc__unlock(&q->lock);
    return kc__bs_err(s->sv, KC_ENOMEM, "out of memory queueing a launch of '%s' on a stream",
                      host_sv(l)->name_of(l));
  }
  it->l = l;
  it->im = im;
  it->other = NULL;
  it->grid = *g;
  it->block = *b;
  it->shared_bytes = cfg->shared_bytes;
  uintptr_t base = ((uintptr_t)it->vals + align - 1) & ~(uintptr_t)(align - 1);
  size_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    size_t sz = host_arg_size(cfg, i);
    at = host_val_at(at, sz);
    unsigned char *v = (unsigned char *)base + at;
    /* a scalar's bytes; a buffer's handle's pointer, a raw pointer's value */
    memcpy(v, argv[i], cfg->args[i].kind == KC_ARG_SCALAR ? sz : sizeof(void *));
    it->argv[i] = v;
    at += sz;
  }
  host_item_queue(q, t, it);
  kc__unlock(&q->lock);
  return KC_OK;
}

kc_status host_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg) {
  kc_status st = host_launch_check(l, cfg);
  if (KC__UNLIKELY(st)) return st;
  return cfg->stream ? host_stream_launch(l, argv, cfg) : host_launch_now(l, argv, cfg);
}

/* ------------------------------------------------------------ streams */

kc_status host_stream_create(void *bctx, void **native) {
  host_state *s = bctx;
  host_streams *q = s->streams;
  host_stream *t = kc__bs_calloc(s->sv, sizeof *t);
  if (!t) return kc__bs_err(s->sv, KC_ENOMEM, "kc_stream_create: out of memory");
  t->s = s;
  if (!kc__cond_init_monotonic(&t->wake)) {
    kc__bs_free(s->sv, t);
    return kc__bs_err(s->sv, KC_ENOMEM, "kc_stream_create: out of memory");
  }
  kc__lock(&q->lock);
  t->next = q->list;
  if (q->list) q->list->prev = t;
  q->list = t;
  kc__unlock(&q->lock);
  *native = t;
  return KC_OK;
}

kc_status host_stream_wrap(void *bctx, void *native) {
  host_state *s = bctx;
  if (native)
    return kc__bs_err(s->sv, KC_EINVAL,
                      "kc_stream_wrap: the host backend wraps only its implicit stream (NULL), the "
                      "context's own queue; kc_stream_create makes an asynchronous one");
  return KC_OK;
}

/* Waits until t has finished what was queued on it before (lock held),
 * watching for it first (host_spin). */
static void host_stream_wait_done(host_streams *q, host_stream *t) {
  uint64_t target = kc__load_relaxed(&t->queued);
  host_spin(q, &t->done, target, NULL);
  while (kc__load_relaxed(&t->done) < target) host_idle_wait(q);
}

kc_status host_stream_sync(void *bctx, void *native) {
  host_state *s = bctx;
  host_stream *t = native;
  if (!t) return KC_OK; /* the implicit stream: its launches have run */
  host_streams *q = s->streams;
  kc__lock(&q->lock);
  host_stream_wait_done(q, t);
  kc_status st = t->err;
  char msg[sizeof t->msg];
  if (st) memcpy(msg, t->msg, sizeof msg);
  t->err = KC_OK;
  kc__unlock(&q->lock);
  return st ? kc__bs_err(s->sv, st, "%s", msg) : KC_OK;
}

kc_status host_stream_wait(void *bctx, void *native, void *other_) {
  host_state *s = bctx;
  host_stream *t = native, *other = other_;
  if (!other || other == t) return KC_OK; /* the implicit stream has nothing queued; in order */
  host_streams *q = s->streams;
  kc__lock(&q->lock);
  if (kc__load_relaxed(&other->done) == kc__load_relaxed(&other->queued)) { /* nothing to wait for */
    kc__unlock(&q->lock);
    return KC_OK;
  }
  bool here = true;
  host_item *spent = NULL, *it = t ? host_item_for(q, t, 0, &here, &spent) : NULL;
  if (here) {
    /* the implicit stream, or one with no thread: its next launch runs on
     * the caller, so the caller waits now */
    host_stream_wait_done(q, other);
    kc__unlock(&q->lock);
    if (spent) kc__bs_free(s->sv, spent);
    return KC_OK;
  }
  if (!it) {
    kc__unlock(&q->lock);
    return kc__bs_err(s->sv, KC_ENOMEM, "kc_stream_wait: out of memory");
  }
  it->l = NULL;
  it->im = NULL;
  it->other = other;
  it->target = kc__load_relaxed(&other->queued);
  host_item_queue(q, t, it);
  kc__unlock(&q->lock);
  return KC_OK;
}

void host_stream_release(void *bctx, void *native, bool owned) {
  host_state *s = bctx;
  host_stream *t = native;
  (void)owned; /* only kc_stream_create makes one: a wrapped stream is NULL */
  if (!t) return;
  host_streams *q = s->streams;
  kc__lock(&q->lock);
  host_stream_wait_done(q, t);
  kc__store_relaxed(&t->stop, true); /* seen by a watch too (host_spin) */
  pthread_cond_signal(&t->wake);
  if (t->prev) t->prev->next = t->next;
  else q->list = t->next;
  if (t->next) t->next->prev = t->prev;
  /* waits of other streams for t: t has finished what they wait for */
  for (host_stream *u = q->list; u; u = u->next) {
    if (u->running && u->running->other == t) u->running->other = NULL;
    for (host_item *it = u->head; it; it = it->next)
      if (it->other == t) it->other = NULL;
  }
  if (q->waiters) pthread_cond_broadcast(&q->idle);
  bool join = t->started || t->ended;
  kc_status lost = t->err;
  char msg[sizeof t->msg];
  if (lost) memcpy(msg, t->msg, sizeof msg);
  kc__unlock(&q->lock);
  if (lost) /* no sync will say it now */
    kc__log_to(s->sv->log, KC_LOG_WARN, "a stream destroyed before it was synced had a failure: %s", msg);
  if (join) pthread_join(t->thread, NULL);
  for (host_item *it = t->spare, *next; it; it = next) {
    next = it->next;
    kc__bs_free(s->sv, it);
  }
  pthread_cond_destroy(&t->wake);
  kc__bs_free(s->sv, t);
}

/* ---------------------------------------------------------------- fork */

static void host_streams_fork_prepare(void *ud) { kc__lock(&((host_streams *)ud)->lock); }
static void host_streams_fork_parent(void *ud) { kc__unlock(&((host_streams *)ud)->lock); }

/* In the child: no stream thread is there, and what the parent had queued
 * is the parent's to run: every stream starts empty. */
static void host_streams_fork_child(void *ud) {
  host_streams *q = ud;
  /* the condition variables first: their waiters were the parent's threads */
  q->waiters = 0;
  pthread_cond_init(&q->idle, NULL);
  for (host_stream *t = q->list; t; t = t->next) {
    (void)kc__cond_init_monotonic(&t->wake); /* (as at its creation; no allocation in glibc) */
    if (t->running) {
      host_item *it = t->running;
      t->running = NULL;
      it->next = t->head;
      t->head = it;
    }
    while (t->head) { /* counted as done, kept as spares (nothing freed here) */
      host_item *it = t->head;
      t->head = it->next;
      if (it->im) it->im->queued--;
      host_count(&t->done);
      it->next = t->spare;
      t->spare = it;
      t->nspare++;
    }
    t->tail = NULL;
    t->started = t->ended = false; /* the parent's thread, running or ended, is not here */
  }
  kc__unlock(&q->lock);
}

kc_status host_streams_open(host_state *s, uint64_t idle_ns, uint64_t spin_ns) {
  host_streams *q = kc__bs_calloc(s->sv, sizeof *q);
  if (!q) return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
  if (!kc__mutex_init(&q->lock)) {
    kc__bs_free(s->sv, q);
    return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
  }
  if (pthread_cond_init(&q->idle, NULL) != 0) {
    kc__mutex_destroy(&q->lock);
    kc__bs_free(s->sv, q);
    return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
  }
  q->fork = (kc__fork_hook){.level = KC__FORK_HOST,
                            .prepare = host_streams_fork_prepare,
                            .parent = host_streams_fork_parent,
                            .child = host_streams_fork_child,
                            .ud = q};
  q->idle_ns = idle_ns;
  q->spin_ns = spin_ns;
  q->no_threads = !kc__fork_register(&q->fork); /* then launches run on the caller */
  s->streams = q;
  return KC_OK;
}

/* Every stream was released with its context before the backend closes. */
void host_streams_close(host_state *s) {
  host_streams *q = s->streams;
  if (!q) return;
  kc__fork_unregister(&q->fork);
  while (q->list) host_stream_release(s, q->list, true);
  pthread_cond_destroy(&q->idle);
  kc__mutex_destroy(&q->lock);
  kc__bs_free(s->sv, q);
  s->streams = NULL;
}
