/* SPDX-License-Identifier: MIT */
/*
 * exec.c -- how the host backend runs the groups of a launch (the model is
 * codegen.c's): the thread's slot that objects read their work item and
 * scratch area from; the pool of worker threads that takes the groups of
 * a launch with more than one (kc__par); the fibers that run one group's
 * items when its kernel has barriers (kc__fibers, kc__barrier_fn); and the
 * copies of an object, one for each thread that runs its groups at once,
 * for kernels with KC_LOCAL arrays.
 *
 * A launch still returns when its last group has run (the host's one
 * in-order stream): the calling thread runs groups too, and waits for the
 * workers it woke. A grid that one thread finishes sooner than the pool
 * wakes up never wakes it: the caller times its first group and goes on
 * alone when the rest would take less than HOST_PAR_MIN_NS. One launch
 * has the pool at a time; a second thread that launches meanwhile runs its
 * own groups itself.
 *
 * Locks: pool.lock (a leaf: held to hand a job over, to wait for one and
 * to count its end; no other lock is taken under it, no group runs under
 * it); host_image.copy_lock (a leaf: the free copies of an object).
 */
#include "backends/host/host.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOST_ASAN 1
#endif
#endif
#ifdef HOST_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif
#ifdef KC__TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

/* ----------------------------------------------------- the thread's slot */

/* What an object reads at %fs:0 + kc__it_off (the prelude's struct
 * kc__tls): the item the thread runs and its launch's scratch area; then
 * what only this file reads. In the static TLS block, so that its offset
 * from the thread pointer is the same in every thread. */
static __thread struct host_tls {
  const void *item;
  void *scratch;
  size_t scratch_bytes; /* the launch's shared_bytes (interop.c) */
  struct host_fibers *fibers; /* the fibers of the group this thread runs, or NULL */
} host_tls __attribute__((tls_model("initial-exec")));

_Static_assert(offsetof(struct host_tls, scratch) == sizeof(void *), "the prelude's struct kc__tls");

long host_tls_offset(void) {
  char *tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  return (long)((char *)&host_tls - tp);
}

void host_set_scratch(void *p, size_t bytes) {
  host_tls.scratch = p;
  host_tls.scratch_bytes = p ? bytes : 0;
}

/* ------------------------------------------------------------- fibers */

/* Switches stacks: saves the callee-saved registers and the stack pointer
 * in *save, and resumes the context whose stack pointer is to. A new
 * context starts at host_fiber_entry. The floating-point environment
 * (rounding, exceptions) is the thread's: a group's items share it. */
void host_fiber_switch(void **save, void *to);
void host_fiber_entry(void);
__asm__(".text\n"
        ".globl host_fiber_switch\n"
        ".hidden host_fiber_switch\n"
        ".type host_fiber_switch, @function\n"
        "host_fiber_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size host_fiber_switch, .-host_fiber_switch\n"
        ".globl host_fiber_entry\n"
        ".hidden host_fiber_entry\n"
        ".type host_fiber_entry, @function\n"
        "host_fiber_entry:\n"
        "  movq %r12, %rdi\n"
        "  movq %r13, %rsi\n"
        "  movl %r14d, %edx\n"
        "  callq host_fiber_start\n"
        "  ud2\n"
        ".size host_fiber_entry, .-host_fiber_entry\n");

#define HOST_FIBER_STACK (128u << 10) /* a work item's stack */
#define HOST_FIBER_GUARD 4096u
#define HOST_FIBERS_MAX 4096u /* items in a group that has barriers */

typedef struct host_fiber {
  void *sp; /* saved while it waits */
  char *stack; /* its stack (below: a guard page), or NULL: not made yet */
  unsigned state; /* 0 ready to start, 1 waiting at a barrier, 2 done */
#ifdef HOST_ASAN
  void *fake; /* its fake stack while it waits */
#endif
#ifdef KC__TSAN
  void *tsan;
#endif
} host_fiber;

/* A thread's fibers: made once, at the largest group it ran, kept for the
 * thread's life (host_fibers_key's destructor unmaps them). */
typedef struct host_fibers {
  host_fiber *f;
  unsigned n, cap;
  void *sched_sp; /* the scheduler's context while a fiber runs */
  unsigned cur; /* the fiber that runs */
  void (*fn)(void *, unsigned);
  void *ud;
#ifdef HOST_ASAN
  void *sched_fake; /* the scheduler's fake stack while a fiber runs */
#endif
  const void *sched_bottom; /* the calling thread's stack (sanitizers) */
  size_t sched_size;
#ifdef KC__TSAN
  void *sched_tsan;
  pid_t tsan_pid; /* the process its TSan fibers were made in */
#endif
} host_fibers;

static pthread_key_t host_fibers_key;
static pthread_once_t host_fibers_once = PTHREAD_ONCE_INIT;
static bool host_fibers_keyed;

static void host_fibers_free(void *p) {
  host_fibers *fs = p;
  if (!fs) return;
  for (unsigned i = 0; i < fs->cap; i++) {
    if (fs->f[i].stack) munmap(fs->f[i].stack - HOST_FIBER_GUARD, HOST_FIBER_STACK + HOST_FIBER_GUARD);
#ifdef KC__TSAN
    if (fs->f[i].tsan) __tsan_destroy_fiber(fs->f[i].tsan);
#endif
  }
  free(fs->f);
  free(fs);
}

static void host_fibers_make_key(void) {
  host_fibers_keyed = pthread_key_create(&host_fibers_key, host_fibers_free) == 0;
}

/* The thread's fibers, grown to n. NULL out of memory. */
static host_fibers *host_fibers_get(unsigned n) {
  pthread_once(&host_fibers_once, host_fibers_make_key);
  if (!host_fibers_keyed) return NULL;
  host_fibers *fs = pthread_getspecific(host_fibers_key);
  if (!fs) {
    fs = calloc(1, sizeof *fs);
    if (!fs || pthread_setspecific(host_fibers_key, fs) != 0) {
      free(fs);
      return NULL;
    }
  }
  if (fs->cap < n) {
    host_fiber *f = realloc(fs->f, n * sizeof *f);
    if (!f) return NULL;
    memset(f + fs->cap, 0, (n - fs->cap) * sizeof *f);
    fs->f = f;
    fs->cap = n;
  }
  for (unsigned i = 0; i < n; i++) {
    if (fs->f[i].stack) continue;
    char *m = mmap(NULL, HOST_FIBER_STACK + HOST_FIBER_GUARD, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (mprotect(m, HOST_FIBER_GUARD, PROT_NONE) != 0) { /* overflow faults, never writes a neighbour */
      munmap(m, HOST_FIBER_STACK + HOST_FIBER_GUARD);
      return NULL;
    }
    fs->f[i].stack = m + HOST_FIBER_GUARD;
  }
  return fs;
}

/* Fiber j's first frame: what host_fiber_switch pops, then
 * host_fiber_entry. Each fiber's stack starts at another offset in its
 * page: stacks a multiple of 4 KiB apart would put every fiber's top of
 * stack in the same sets of the L1 cache. */
static void host_fiber_prepare(host_fibers *fs, unsigned j) {
  host_fiber *f = &fs->f[j];
#ifdef HOST_ASAN
  /* a fiber left at a barrier (a group whose other items ended) never
   * returned from its frames: their redzones are still poisoned */
  __asan_unpoison_memory_region(f->stack, HOST_FIBER_STACK);
#endif
  uintptr_t top = ((uintptr_t)(f->stack + HOST_FIBER_STACK) & ~(uintptr_t)15) - 16 - (uintptr_t)(j % 61) * 64;
  uint64_t *sp = (uint64_t *)(top - 56); /* after its ret: top, 16-aligned, as a call would leave it */
  sp[0] = 0; /* r15 */
  sp[1] = j; /* r14: the item */
  sp[2] = (uint64_t)(uintptr_t)fs->ud; /* r13 */
  sp[3] = (uint64_t)(uintptr_t)fs->fn; /* r12 */
  sp[4] = sp[5] = 0; /* rbx, rbp */
  sp[6] = (uint64_t)(uintptr_t)host_fiber_entry;
  f->sp = sp;
  f->state = 1;
#ifdef KC__TSAN
  if (!f->tsan) f->tsan = __tsan_create_fiber(0);
#endif
}

/* Switches from the running context (its stack pointer goes to *save; its
 * fake stack, ASan's, to *fake: NULL when it never runs again) to fiber j,
 * or to the scheduler when j is n. */
static void host_go(host_fibers *fs, void **save, void **fake, unsigned j) {
  void *to;
#if defined(HOST_ASAN) || defined(KC__TSAN)
  const void *bottom;
  size_t size;
#endif
#ifdef KC__TSAN
  void *tsan;
#endif
  if (j < fs->n) {
    host_fiber *f = &fs->f[j];
    if (f->state == 0) host_fiber_prepare(fs, j);
    fs->cur = j;
    to = f->sp;
#if defined(HOST_ASAN) || defined(KC__TSAN)
    bottom = f->stack, size = HOST_FIBER_STACK;
#endif
#ifdef KC__TSAN
    tsan = f->tsan;
#endif
  } else {
    to = fs->sched_sp;
#if defined(HOST_ASAN) || defined(KC__TSAN)
    bottom = fs->sched_bottom, size = fs->sched_size;
#endif
#ifdef KC__TSAN
    tsan = fs->sched_tsan;
#endif
  }
#ifdef HOST_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake;
#endif
#ifdef KC__TSAN
  (void)bottom, (void)size;
  __tsan_switch_to_fiber(tsan, 0);
#endif
  host_fiber_switch(save, to);
}

/* The next fiber of the round after the running one that has not ended,
 * or n: the round is over (the scheduler's turn). */
static unsigned host_next(const host_fibers *fs) {
  unsigned j = fs->cur + 1;
  while (j < fs->n && fs->f[j].state == 2) j++;
  return j;
}

/* A fiber's first frame (host_fiber_entry): the item, then its end. */
__attribute__((used, noreturn)) void host_fiber_start(void (*fn)(void *, unsigned), void *ud, unsigned i);
void host_fiber_start(void (*fn)(void *, unsigned), void *ud, unsigned i) {
  host_fibers *fs = host_tls.fibers;
#ifdef HOST_ASAN
  __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
  fn(ud, i);
  fs->f[fs->cur].state = 2;
  void *gone;
  host_go(fs, &gone, NULL, host_next(fs));
  __builtin_trap(); /* never resumed */
}

/* kc_barrier(): the next item runs; this one goes on in the next round,
 * once every item of the group has reached the barrier. Outside fibers (a
 * group of one item), nothing to wait for. */
void host_barrier(void) {
  host_fibers *fs = host_tls.fibers;
  if (!fs) return;
  host_fiber *f = &fs->f[fs->cur];
#ifdef HOST_ASAN
  host_go(fs, &f->sp, &f->fake, host_next(fs));
  __sanitizer_finish_switch_fiber(f->fake, NULL, NULL);
#else
  host_go(fs, &f->sp, NULL, host_next(fs));
#endif
}

/* The calling thread's stack, for ASan and TSan to switch back to. */
static void host_sched_stack(host_fibers *fs) {
#if defined(HOST_ASAN) || defined(KC__TSAN)
  if (fs->sched_size) return;
  pthread_attr_t at;
  void *base;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &at) == 0) {
    if (pthread_attr_getstack(&at, &base, &size) == 0) fs->sched_bottom = base, fs->sched_size = size;
    pthread_attr_destroy(&at);
  }
#else
  (void)fs;
#endif
}

/* Runs items 0..n-1 of a group, fn(ud, i) each, as fibers on this thread:
 * round after round, each item up to its next barrier. 0, or a kc_status
 * with the message set (sv). */
static int host_fibers_run(const kc__bsvc *sv, unsigned n, void (*fn)(void *, unsigned), void *ud) {
  if (n == 1) { /* nothing to wait for: the item alone, barriers no-ops */
    host_fibers *saved = host_tls.fibers;
    host_tls.fibers = NULL;
    fn(ud, 0);
    host_tls.fibers = saved;
    return 0;
  }
  if (n == UINT_MAX) /* (the object passes 2^32 - 1 for that many or more) */
    return kc__bs_err(sv, KC_EINVAL,
                      "a group of %u or more work items with kc_barrier() is more than the host backend "
                      "takes (%u)",
                      n, HOST_FIBERS_MAX);
  if (n > HOST_FIBERS_MAX)
    return kc__bs_err(sv, KC_EINVAL,
                      "a group of %u work items with kc_barrier() is more than the host backend takes (%u)",
                      n, HOST_FIBERS_MAX);
  if (host_tls.fibers)
    return kc__bs_err(sv, KC_EBUSY,
                      "a kernel with kc_barrier() launched from inside another one's work item");
  host_fibers *fs = host_fibers_get(n);
  if (!fs)
    return kc__bs_err(sv, KC_ENOMEM, "out of memory for the stacks of %u work items (kc_barrier())", n);
  fs->n = n;
  fs->fn = fn;
  fs->ud = ud;
  for (unsigned i = 0; i < n; i++) fs->f[i].state = 0;
  host_sched_stack(fs);
#ifdef KC__TSAN
  fs->sched_tsan = __tsan_get_current_fiber();
  if (fs->tsan_pid != getpid()) { /* made before a fork(): TSan forgot them in the child (its threads) */
    for (unsigned i = 0; i < fs->cap; i++) fs->f[i].tsan = NULL;
    fs->tsan_pid = getpid();
  }
#endif
  host_tls.fibers = fs;
  int st = 0;
  for (;;) { /* a round: every item that has not ended, up to its next barrier or its end */
    unsigned first = 0;
    while (first < n && fs->f[first].state == 2) first++;
#ifdef HOST_ASAN
    host_go(fs, &fs->sched_sp, &fs->sched_fake, first);
    __sanitizer_finish_switch_fiber(fs->sched_fake, NULL, NULL);
#else
    host_go(fs, &fs->sched_sp, NULL, first);
#endif
    unsigned done = 0;
    for (unsigned i = 0; i < n; i++) done += fs->f[i].state == 2;
    if (done == n) break;
    if (done) { /* some ended while others wait at a barrier: they would wait for ever */
      st = kc__bs_err(
          sv, KC_ELAUNCH,
          "%u of the %u work items of a group ended while the others waited at kc_barrier(): every "
          "item of a group must reach each barrier",
          done, n);
      break;
    }
  }
  host_tls.fibers = NULL;
  return st;
}

/* ------------------------------------------------------------ copies */

/* A copy of im's object for one thread at a time (KC_LOCAL arrays are
 * its static storage): a free one, or one loaded now. */
static host_copy *host_copy_take(host_state *s, host_image *im) {
  kc__lock(&im->copy_lock);
  host_copy *c = im->free_copies;
  if (c) im->free_copies = c->next;
  kc__unlock(&im->copy_lock);
  if (c) return c;
  c = kc__bs_calloc(s->sv, sizeof *c);
  if (!c) return NULL;
  if (host_image_load(s, im->bytes, im->size, "loading a copy of a kernel failed: the object", &c->im) !=
      KC_OK) {
    kc__bs_free(s->sv, c);
    return NULL;
  }
  c->group = c->im.group;
  kc__lock(&im->copy_lock);
  c->all_next = im->copies;
  im->copies = c;
  kc__unlock(&im->copy_lock);
  return c;
}

static void host_copy_give(host_image *im, host_copy *c) {
  kc__lock(&im->copy_lock);
  c->next = im->free_copies;
  im->free_copies = c;
  kc__unlock(&im->copy_lock);
}

/* -------------------------------------------------------------- pool */

typedef int (*host_group_fn)(const void *args, const unsigned *gid, const unsigned *b, const unsigned *ng);

typedef struct host_job {
  host_state *s;
  host_image *im;
  const void *args;
  unsigned g[3], b[3];
  uint64_t total, chunk;
  _Atomic uint64_t next; /* the first group not handed out yet */
  _Atomic int err; /* the first failure (a kc_status) */
  char msg[1024]; /* its message, from the thread it happened on */
  size_t scratch_bytes;
} host_job;

struct host_pool {
  kc__mutex lock;
  pthread_cond_t wake, done;
  pthread_t *threads;
  unsigned nthreads, started; /* the pool's size (workers besides the caller), those running */
  pid_t pid; /* the process that started them (a child of fork() has none) */
  kc__mutex job_lock; /* held by the launch that has the pool */
  host_job *job;
  uint64_t gen; /* each job's number: a worker takes each once */
  unsigned want, joined, active; /* workers wanted for the job, those that took it, those not done */
  bool stop;
  kc__fork_hook fork; /* pool.lock around fork(); the child starts over (no workers) */
};

static uint64_t host_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Group index i of the job's grid (x fastest). */
static void host_gid(const host_job *j, uint64_t i, unsigned gid[3]) {
  gid[0] = (unsigned)(i % j->g[0]);
  gid[1] = (unsigned)(i / j->g[0] % j->g[1]);
  gid[2] = (unsigned)(i / j->g[0] / j->g[1]);
}

/* The thread's scratch area for the job (workers: their own, grown). */
static _Thread_local void *host_worker_scratch;
static _Thread_local size_t host_worker_scratch_size;

/* Records the first failure of j: its status, and the message the thread
 * it happened on has (for the caller to say again on its own thread). */
static void host_job_fail(host_job *j, int st) {
  int z = 0;
  if (atomic_compare_exchange_strong(&j->err, &z, st))
    snprintf(j->msg, sizeof j->msg, "%s", kc__errmsg_owner(j->s->sv->owner));
}

/* Runs groups of j until none is left (or one failed), on this thread,
 * with its own copy if the object needs one. */
static void host_job_work(host_job *j, bool worker) {
  host_copy *c = NULL;
  host_group_fn fn = (host_group_fn)j->im->group;
  if (j->im->needs_copies) {
    if (!(c = host_copy_take(j->s, j->im))) {
      host_job_fail(j, kc__bs_err(j->s->sv, KC_ENOMEM, "out of memory loading a copy of a kernel"));
      return;
    }
    fn = (host_group_fn)c->group;
  }
  if (worker && j->scratch_bytes) {
    if (host_worker_scratch_size < j->scratch_bytes) {
      void *p = realloc(host_worker_scratch, j->scratch_bytes);
      if (!p) {
        host_job_fail(j, kc__bs_err(j->s->sv, KC_ENOMEM, "out of memory for a scratch area"));
        if (c) host_copy_give(j->im, c);
        return;
      }
      host_worker_scratch = p;
      host_worker_scratch_size = j->scratch_bytes;
    }
    host_set_scratch(host_worker_scratch, j->scratch_bytes);
  }
  for (;;) {
    if (atomic_load_explicit(&j->err, memory_order_relaxed)) break;
    uint64_t i = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
    if (i >= j->total) break;
    uint64_t end = i + j->chunk < j->total ? i + j->chunk : j->total;
    for (; i < end; i++) {
      unsigned gid[3];
      host_gid(j, i, gid);
      int r = fn(j->args, gid, j->b, j->g);
      if (r) {
        host_job_fail(j, r);
        break;
      }
    }
  }
  if (worker && j->scratch_bytes) host_set_scratch(NULL, 0);
  if (c) host_copy_give(j->im, c);
}

static void *host_worker(void *arg) {
  host_pool *p = arg;
  uint64_t seen = 0;
  kc__lock(&p->lock);
  for (;;) {
    while (!p->stop && (p->gen == seen || p->joined >= p->want)) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) break;
    seen = p->gen;
    host_job *j = p->job;
    p->joined++;
    p->active++;
    kc__unlock(&p->lock);
    host_job_work(j, true);
    kc__lock(&p->lock);
    if (--p->active == 0) pthread_cond_broadcast(&p->done);
  }
  kc__unlock(&p->lock);
  return NULL;
}

/* The workers, started on first need (none in a child of fork() that
 * inherited a started pool: started again there). */
static unsigned host_pool_ready(host_state *s) {
  host_pool *p = s->pool;
  if (!p || !p->nthreads) return 0;
  kc__lock(&p->lock);
  if (p->pid != getpid()) { /* a child of fork(): the parent's threads are not here */
    p->started = 0;
    p->active = p->joined = p->want = 0;
    p->job = NULL;
    p->pid = getpid();
  }
  while (p->started < p->nthreads && kc__fork_threads_allowed()) {
    if (pthread_create(&p->threads[p->started], NULL, host_worker, p) != 0) break;
    p->started++;
  }
  unsigned n = p->started;
  kc__unlock(&p->lock);
  return n;
}

/* kc__par: every group of a launch. The caller runs the first, timing it;
 * the pool takes the rest if they would take longer than waking it. */
#define HOST_PAR_MIN_NS 40000u

int host_par(void *l_, const void *args, const unsigned *g, const unsigned *b) {
  kc__blinked *l = l_;
  host_state *s = l->bctx;
  host_image *im = l->module;
  host_job j = {.s = s, .im = im, .args = args, .g = {g[0], g[1], g[2]}, .b = {b[0], b[1], b[2]}};
  j.total = (uint64_t)g[0] * g[1] * g[2];
  j.chunk = 1;
  j.scratch_bytes = host_tls.scratch_bytes;
  atomic_init(&j.next, 0);
  atomic_init(&j.err, 0);
  host_copy *c = NULL;
  host_group_fn fn = (host_group_fn)im->group;
  if (im->needs_copies) {
    if (!(c = host_copy_take(s, im)))
      return kc__bs_err(s->sv, KC_ENOMEM, "out of memory loading a copy of a kernel");
    fn = (host_group_fn)c->group;
  }
  /* the first group here, timed */
  uint64_t t0 = j.total > 1 ? host_now_ns() : 0;
  unsigned gid[3] = {0, 0, 0};
  int r = fn(args, gid, j.b, j.g);
  if (r || j.total == 1) {
    if (c) host_copy_give(im, c);
    return r;
  }
  uint64_t one = host_now_ns() - t0, rest = one * (j.total - 1);
  host_pool *p = s->pool;
  unsigned workers = 0;
  if (rest >= HOST_PAR_MIN_NS && p && p->nthreads && pthread_mutex_trylock(&p->job_lock) == 0) {
    workers = host_pool_ready(s);
    uint64_t useful = rest / (HOST_PAR_MIN_NS / 2); /* no more workers than have work worth waking them */
    if (workers > useful) workers = (unsigned)useful;
    if (workers > j.total - 1) workers = (unsigned)(j.total - 1);
    if (!workers) kc__unlock(&p->job_lock);
  }
  atomic_store_explicit(&j.next, 1, memory_order_relaxed);
  if (!workers) { /* the rest here */
    if (c) host_copy_give(im, c);
    j.chunk = j.total;
    host_job_work(&j, false);
    return atomic_load(&j.err); /* on this thread: its message is set */
  }
  uint64_t per = (j.total - 1) / ((uint64_t)(workers + 1) * 8);
  j.chunk = per ? per : 1;
  kc__lock(&p->lock);
  p->job = &j;
  p->gen++;
  p->want = workers;
  p->joined = 0;
  pthread_cond_broadcast(&p->wake);
  kc__unlock(&p->lock);
  if (c) host_copy_give(im, c); /* the caller takes one again in host_job_work */
  host_job_work(&j, false);
  kc__lock(&p->lock);
  p->want = 0; /* no worker joins after this */
  while (p->active) pthread_cond_wait(&p->done, &p->lock);
  p->job = NULL;
  kc__unlock(&p->lock);
  kc__unlock(&p->job_lock);
  int err = atomic_load(&j.err);
  return err ? kc__bs_err(s->sv, (kc_status)err, "%s", j.msg) : 0; /* said on the caller's thread */
}

/* kc__fibers, as the objects call it: kc__hs is the state the loader gave
 * the object. */
int host_fibers_hook(void *hs, unsigned n, void (*fn)(void *, unsigned), void *ud) {
  host_state *s = hs;
  return host_fibers_run(s->sv, n, fn, ud);
}

static void host_pool_fork_prepare(void *ud) { kc__lock(&((host_pool *)ud)->lock); }
static void host_pool_fork_parent(void *ud) { kc__unlock(&((host_pool *)ud)->lock); }
/* In the child: no worker is there, and a launch that had the pool is not
 * either (its job_lock, held by a thread that did not come along, is made
 * anew). */
static void host_pool_fork_child(void *ud) {
  host_pool *p = ud;
  pthread_mutex_init(&p->job_lock, NULL);
  p->started = p->active = p->joined = p->want = 0;
  p->job = NULL;
  p->pid = getpid();
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  kc__unlock(&p->lock);
}

kc_status host_pool_open(host_state *s, uint32_t threads) {
  s->pool = NULL;
  if (threads <= 1) return KC_OK; /* the caller alone */
  host_pool *p = kc__bs_calloc(s->sv, sizeof *p);
  if (!p) return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
  p->nthreads = threads - 1;
  p->threads = kc__bs_calloc(s->sv, p->nthreads * sizeof *p->threads);
  if (!p->threads || !kc__mutex_init(&p->lock) || !kc__mutex_init(&p->job_lock)) goto fail;
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->pid = getpid();
  p->fork = (kc__fork_hook){.level = KC__FORK_HOST,
                            .prepare = host_pool_fork_prepare,
                            .parent = host_pool_fork_parent,
                            .child = host_pool_fork_child,
                            .ud = p};
  kc__fork_register(&p->fork); /* (without it, a child finds the pid changed: host_pool_ready) */
  s->pool = p;
  return KC_OK;
fail:
  kc__bs_free(s->sv, p->threads);
  kc__bs_free(s->sv, p);
  return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
}

void host_pool_close(host_state *s) {
  host_pool *p = s->pool;
  if (!p) return;
  kc__fork_unregister(&p->fork);
  kc__lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  unsigned n = p->pid == getpid() ? p->started : 0;
  kc__unlock(&p->lock);
  for (unsigned i = 0; i < n; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  kc__mutex_destroy(&p->lock);
  kc__mutex_destroy(&p->job_lock);
  kc__bs_free(s->sv, p->threads);
  kc__bs_free(s->sv, p);
  s->pool = NULL;
}
