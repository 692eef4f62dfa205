/* SPDX-License-Identifier: MIT */
/*
 * pool.c -- owns preparing kernels without launching them:
 * kc_kernel_prepare (one kernel, on the calling thread) and kc_prepare (a
 * batch, compiled in parallel on the runtime's compile pool).
 *
 * The pool is made on the first kc_prepare that needs it (its size:
 * kc_options.compile_threads, else $KC_COMPILE_THREADS, else one per core,
 * counting the caller) and joined by kc_runtime_destroy. A batch is a queue
 * entry; workers and the calling thread take its kernels one at a time. A
 * kernel is prepared with kc__ci_get, as a launch would, so single flight
 * (the specialization's lock, the disk store's file lock) holds across the
 * pool, the caller's other threads and other processes, and a launch of one
 * kernel of the batch waits only for that kernel's compile. The pool's lock
 * is a leaf: nothing is taken while holding it, and no compile runs under it.
 */
#include "core/core.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One kc_prepare call: its kernels, taken by index. */
typedef struct kc__batch {
  kc_kernel *const *ks;
  uint32_t n;
  kc_world world; /* the caller's pinned world; 0 unpinned: the latest as each kernel starts */
  kc_context *ctx; /* NULL: compile only */
  uint32_t next; /* the next index to take; under the pool's lock */
  uint32_t done; /* how many are finished; under the pool's lock */
  uint32_t nfailed;
  uint32_t first_failed; /* the lowest index that failed */
  kc_status st; /* its status, and its message (NULL: out of memory) */
  char *msg;
  struct kc__batch *next_batch; /* the pool's queue */
} kc__batch;

struct kc__pool {
  kc_runtime *rt;
  pthread_mutex_t lock; /* a leaf */
  pthread_cond_t work; /* a batch was queued, or stop */
  pthread_cond_t done; /* a kernel of some batch finished */
  kc__batch *head, *tail; /* batches with kernels not yet taken */
  pthread_t *threads;
  uint32_t nthreads, started;
  bool stop;
};

/* --------------------------------------------------------------- one kernel */

/* Compiles k for world w (0: the latest now), then links it into ctx (unless NULL) and leaves
 * the linked object in the handle's slot for ctx, so that the first launch
 * takes the fast path. */
static kc_status prepare_in(kc_kernel *k, kc_world w, kc_context *ctx) {
  kc_runtime *rt = k->rt;
  if (!w) w = kc__load_acquire(&rt->world);
  kc__ci *ci;
  kc_status st = kc__ci_get(rt, k->spec, w, &ci);
  if (st || !ctx) return st;
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc__linked *l = NULL;
  st = kc__ctx_link(ctx, ci, w, &l);
  if (st) return st;
  kc__store_release(kc__slot_of(k, key), l);
  return KC_OK;
}

/* prepare_in, inside a grace section (the code and the linked object it
 * holds are kc_collect's to free only once it is out). */
static kc_status prepare_one(kc_kernel *k, kc_world w, kc_context *ctx) {
  kc_status st = kc__enter(k->rt, "kc_prepare");
  if (st) return st;
  st = prepare_in(k, w, ctx);
  kc__leave();
  return st;
}

/* What kc_kernel_prepare and kc_prepare check of a context. */
static kc_status check_ctx(kc_runtime *rt, const char *fn, const kc_context *ctx) {
  if (!ctx) return KC_OK;
  if (ctx->rt != rt) return kc__err(rt, KC_EINVAL, "%s: the context belongs to another runtime", fn);
  if (!kc__load_relaxed(&ctx->alive))
    return kc__err(rt, KC_EDESTROYED, "%s: the context has been destroyed", fn);
  return KC_OK;
}

kc_status kc_kernel_prepare(kc_kernel *k, kc_context *ctx) {
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_kernel_prepare: kernel is NULL");
  kc_status st = check_ctx(k->rt, "kc_kernel_prepare", ctx);
  if (st) return st;
  /* a pin's world (live while pinned), else the latest as read inside the
   * section: a world read before it may be collected before it begins */
  return prepare_one(k, kc__pin_world(k->rt), ctx);
}

/* --------------------------------------------------------------- the pool */

/* The pool's size: the option, else $KC_COMPILE_THREADS, else the cores. */
static uint32_t pool_size(const kc_runtime *rt) {
  return kc__config_compile_threads(&rt->conf, true, &rt->log);
}

/* Takes the next kernel of the queue's first batch; pool lock held. NULL
 * when the queue is empty. */
static kc__batch *take(kc__pool *p, uint32_t *index) {
  kc__batch *b = p->head;
  if (!b) return NULL;
  *index = b->next++;
  if (b->next == b->n) { /* all taken: off the queue */
    p->head = b->next_batch;
    if (!p->head) p->tail = NULL;
  }
  return b;
}

/* Runs kernel i of b (no lock held), then records it; takes the pool lock. */
static void run(kc__pool *p, kc__batch *b, uint32_t i) {
  kc_status st = prepare_one(b->ks[i], b->world, b->ctx);
  char *msg = NULL;
  if (st) msg = kc__strdup(p->rt, kc_errmsg(p->rt)); /* this thread's message */
  pthread_mutex_lock(&p->lock);
  if (st) {
    b->nfailed++;
    if (!b->st || i < b->first_failed) {
      kc__free(p->rt, b->msg);
      b->st = st;
      b->first_failed = i;
      b->msg = msg;
      msg = NULL;
    }
  }
  b->done++;
  pthread_cond_broadcast(&p->done);
  pthread_mutex_unlock(&p->lock);
  kc__free(p->rt, msg);
}

static void *worker(void *arg) {
  kc__pool *p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    uint32_t i;
    kc__batch *b = take(p, &i);
    if (b) {
      pthread_mutex_unlock(&p->lock);
      run(p, b, i);
      pthread_mutex_lock(&p->lock);
      continue;
    }
    if (p->stop) break;
    pthread_cond_wait(&p->work, &p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* rt's pool, made on first use (a lost race frees its copy). NULL: out of
 * memory or no thread could start (the caller then compiles alone). */
static kc__pool *pool_get(kc_runtime *rt) {
  kc__pool *p = kc__load_acquire(&rt->pool);
  if (p) return p;
  uint32_t size = pool_size(rt);
  p = kc__calloc(rt, sizeof *p);
  if (!p) return NULL;
  p->rt = rt;
  p->nthreads = kc__fork_threads_allowed() ? size - 1 : 0; /* the caller is one */
  p->threads = p->nthreads ? kc__calloc(rt, p->nthreads * sizeof *p->threads) : NULL;
  if ((p->nthreads && !p->threads) || pthread_mutex_init(&p->lock, NULL)) goto fail_threads;
  if (pthread_cond_init(&p->work, NULL)) goto fail_lock;
  if (pthread_cond_init(&p->done, NULL)) goto fail_work;
  kc__pool *none = NULL;
  if (!atomic_compare_exchange_strong_explicit(&rt->pool, &none, p, memory_order_acq_rel,
                                               memory_order_acquire)) {
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    kc__free(rt, p->threads);
    kc__free(rt, p);
    return none;
  }
  pthread_mutex_lock(&p->lock); /* threads start once, whoever made the pool */
  for (; p->started < p->nthreads; p->started++)
    if (pthread_create(&p->threads[p->started], NULL, worker, p)) break;
  pthread_mutex_unlock(&p->lock);
  return p;
fail_work:
  pthread_cond_destroy(&p->work);
fail_lock:
  pthread_mutex_destroy(&p->lock);
fail_threads:
  kc__free(rt, p->threads);
  kc__free(rt, p);
  return NULL;
}

void kc__pool_destroy(kc_runtime *rt) {
  kc__pool *p = kc__load_relaxed(&rt->pool);
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->lock);
  kc__free(rt, p->threads);
  kc__free(rt, p);
  rt->pool = NULL;
}

void kc__pool_fork_prepare(kc_runtime *rt) {
  kc__pool *p = kc__load_acquire(&rt->pool);
  if (p) pthread_mutex_lock(&p->lock);
}

void kc__pool_fork_after(kc_runtime *rt, bool child) {
  kc__pool *p = kc__load_relaxed(&rt->pool);
  if (!p) return;
  if (child) { /* the workers, and the threads whose batches were queued, stayed in the parent */
    p->head = p->tail = NULL;
    p->started = p->nthreads = 0;
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
  }
  pthread_mutex_unlock(&p->lock);
}

/* --------------------------------------------------------------- batches */

/* Checks every handle before anything starts: a bad call changes nothing. */
static kc_status check_batch(kc_kernel *const *ks, uint32_t n, const kc_context *ctx, kc_runtime **rt) {
  if (!ks) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_prepare: ks is NULL");
  for (uint32_t i = 0; i < n; i++) {
    if (!ks[i]) return kc__err(*rt, KC_EINVAL, "kc_prepare: kernel %u of %u is NULL", i, n);
    if (!*rt) *rt = ks[i]->rt;
    if (ks[i]->rt != *rt)
      return kc__err(*rt, KC_EINVAL, "kc_prepare: kernel %u ('%s') belongs to another runtime", i,
                     ks[i]->spec->name);
  }
  return check_ctx(*rt, "kc_prepare", ctx);
}

/* The status of a finished batch, with the first failure's message. */
static kc_status batch_result(kc_runtime *rt, kc__batch *b) {
  kc_status st = b->st;
  if (st) {
    const char *name = b->ks[b->first_failed]->spec->name;
    if (b->nfailed == 1)
      kc__err(rt, st, "kc_prepare: kernel %u ('%s') failed: %s", b->first_failed, name,
              b->msg ? b->msg : "(out of memory for its message)");
    else
      kc__err(rt, st, "kc_prepare: %u of %u kernels failed; the first, %u ('%s'): %s", b->nfailed, b->n,
              b->first_failed, name, b->msg ? b->msg : "(out of memory for its message)");
  }
  kc__free(rt, b->msg);
  return st;
}

/* A batch on the calling thread alone. */
static kc_status prepare_alone(kc_runtime *rt, kc__batch *b) {
  for (uint32_t i = 0; i < b->n; i++) {
    kc_status s = prepare_one(b->ks[i], b->world, b->ctx);
    if (s && !b->st) {
      b->st = s;
      b->first_failed = i;
      b->msg = kc__strdup(rt, kc_errmsg(rt));
    }
    b->nfailed += s != KC_OK;
  }
  return batch_result(rt, b);
}

kc_status kc_prepare(kc_kernel *const *ks, uint32_t n, kc_context *ctx) {
  if (n == 0) return KC_OK;
  kc_runtime *rt = NULL;
  kc_status st = check_batch(ks, n, ctx, &rt);
  if (st) return st;
  /* a pinned caller's world for every kernel; else each the latest */
  kc__batch b = {.ks = ks, .n = n, .world = kc__pin_world(rt), .ctx = ctx};
  kc__pool *p = n > 1 ? pool_get(rt) : NULL;
  bool workers = false;
  if (p) {
    pthread_mutex_lock(&p->lock);
    workers = p->started > 0;
    if (!workers) pthread_mutex_unlock(&p->lock);
  }
  if (!workers) return prepare_alone(rt, &b); /* one kernel, one core, or no pool */
  if (p->tail) p->tail->next_batch = &b;
  else p->head = &b;
  p->tail = &b;
  pthread_cond_broadcast(&p->work);
  /* the caller works too, on its own batch, then waits for the rest */
  while (b.next < b.n) {
    uint32_t i = b.next++;
    if (b.next == b.n) { /* all taken: off the queue */
      kc__batch **pb = &p->head, *prev = NULL;
      while (*pb != &b) prev = *pb, pb = &(*pb)->next_batch;
      *pb = b.next_batch;
      if (p->tail == &b) p->tail = prev;
    }
    pthread_mutex_unlock(&p->lock);
    run(p, &b, i);
    pthread_mutex_lock(&p->lock);
  }
  while (b.done < b.n) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
  return batch_result(rt, &b);
}
