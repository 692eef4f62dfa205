/* SPDX-License-Identifier: MIT */
/*
 * programs.c -- building each kernel once: the contexts kcache makes on a
 * device share one cl_context per device (device 0's is the compile
 * context), and the programs the compile built are kept, so that a link
 * into such a context makes its kernel from the program the compile
 * built instead of building the binary again.
 *
 * A kept program is found by its binary's bytes (a copy is kept with it),
 * so a link uses it only for exactly the artifact it was built from; each
 * link retains it (ocl_unlink releases), and the table keeps the
 * OCL_KEEP most recent ones. A program a link built from a binary in the
 * compile context (a disk or remote hit's trial load) is kept the same way,
 * so the link that follows the hit does not build it again. An adopted
 * context (kc_context_wrap), another device's context, or a program that
 * left the table builds from the binary as before. Each kcache context still has
 * its own queue, buffers and kernel objects; st->lock guards the table and
 * the shared contexts.
 *
 * Late binaries (PoCL with its own kernel cache off; st->late_binaries,
 * only where ocl_links): PoCL serializes a program's
 * binary once, at its first fetch, with the machine code made by then; a
 * launch makes a work-group function specialized for its local size (LLVM's
 * work-group passes, code generation, ld: 40-140 ms), which a binary fetched
 * before any launch lacks, so a new process that loads it makes it again at
 * its first launch. A binary fetched after the first launch holds it. So a
 * compile here links its compiled program twice (the second link costs
 * 2-3 ms): the first link's binary is fetched at once and is the artifact,
 * stored as before (single flight and other processes see nothing new);
 * the second link is the program kept for launches (OCL_LATE_WAIT). Its
 * first launch is enqueued with an event (OCL_LATE_RAN) and handed to the
 * late worker, a thread of the state started at the first such launch:
 * once the event has completed, it fetches the program's binary (PoCL's
 * serialization: 40-100 ms of code generation, once per kernel, off the
 * caller's thread) and hands it to the core (kc__bsvc.better), which
 * writes the entry again with it. The backend's quiesce (ocl_late_stop,
 * before the core closes its store) lets it finish the launches it was
 * handed that have completed, for at most OCL_LATE_STOP_NS (a short-lived
 * process that compiles, runs and ends still leaves the late binaries; a
 * runtime that launched many kernels just before its end does not wait
 * for every fetch), and joins it. A process that exits without
 * destroying its runtime must not have the worker inside PoCL while PoCL
 * and LLVM are torn down (it crashed so): an exit handler, registered when
 * the first worker starts (after the platform's libraries, so it runs
 * before their destructors), stops every worker of this process, starting
 * no new fetch, and waits for each at most OCL_LATE_EXIT_S. In this process
 * nothing changes: the artifact stays the first binary, which links find
 * the kept program by. A compile helper's binary (helpers.c) is stored as
 * it came: its program is not here to launch.
 */
#include "backends/opencl/opencl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OCL_LATE_STOP_NS 1000000000ull /* quiesce: fetches start for 1 s at most */
#define OCL_LATE_EXIT_S 2 /* exit: the wait for each worker's fetch under way */

cl_int ocl_build(ocl_state *st, cl_program p, cl_device_id dev) {
  kc__fetch_add_relaxed(&st->builds, 1);
  return ocl.clBuildProgram(p, 1, &dev, st->build_options, NULL, NULL);
}

uint64_t ocl_builds(void *state) { return kc__load_relaxed(&((ocl_state *)state)->builds); }

kc_status ocl_shared_ctx(ocl_state *st, int device, cl_context *out) {
  cl_int e = CL_SUCCESS;
  kc__lock(&st->lock);
  cl_context c = st->shared[device];
  if (!c) c = st->shared[device] = ocl.clCreateContext(NULL, 1, &st->devices[device], NULL, NULL, &e);
  if (c && (e = ocl.clRetainContext(c)) != CL_SUCCESS) c = NULL;
  kc__unlock(&st->lock);
  *out = c;
  return c ? KC_OK : ocl_fail(st->sv, KC_EBACKEND, "clCreateContext", e);
}

/* Drops a slot's late state (under st->lock); its event to release in *ev. */
static void ocl_late_drop(ocl_kept *k, cl_event *ev) {
  *ev = k->late == OCL_LATE_RAN ? k->ev : NULL;
  k->late = OCL_LATE_NONE;
  k->ev = NULL;
}

static void ocl_keep_as(ocl_state *st, cl_program prog, const void *bin, size_t size, int late) {
  unsigned char *copy = kc__bs_alloc(st->sv, size);
  if (!copy) { /* not kept: links build from the binary */
    ocl.clReleaseProgram(prog);
    return;
  }
  memcpy(copy, bin, size);
  kc__lock(&st->lock);
  ocl_kept *k = &st->kept[st->kept_next];
  st->kept_next = (st->kept_next + 1) % OCL_KEEP;
  cl_event ev;
  ocl_late_drop(k, &ev);
  ocl_kept old = *k;
  *k = (ocl_kept){prog, copy, size, late, NULL};
  kc__unlock(&st->lock);
  if (ev) ocl.clReleaseEvent(ev);
  if (old.prog) ocl.clReleaseProgram(old.prog); /* links that use it hold their own reference */
  kc__bs_free(st->sv, old.bin);
}

void ocl_keep(ocl_state *st, cl_program prog, const void *bin, size_t size) {
  ocl_keep_as(st, prog, bin, size, OCL_LATE_NONE);
}

void ocl_keep_late(ocl_state *st, cl_program prog, const void *bin, size_t size) {
  ocl_keep_as(st, prog, bin, size, OCL_LATE_WAIT);
}

cl_program ocl_kept_find(ocl_state *st, cl_context ctx, const void *bin, size_t size, bool *late) {
  *late = false;
  if (ctx != st->compile_ctx || !bin || !size) return NULL;
  cl_program p = NULL;
  kc__lock(&st->lock);
  for (int i = 0; i < OCL_KEEP && !p; i++) {
    ocl_kept *k = &st->kept[i];
    if (k->prog && k->size == size && memcmp(k->bin, bin, size) == 0 &&
        ocl.clRetainProgram(k->prog) == CL_SUCCESS) {
      p = k->prog;
      *late = k->late == OCL_LATE_WAIT;
    }
  }
  kc__unlock(&st->lock);
  return p;
}

/* One program's binary (it was built for one device), or NULL. */
static unsigned char *ocl_fetch(const kc__bsvc *sv, cl_program prog, size_t *size) {
  size_t n = 0;
  if (ocl.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n)
    return NULL;
  unsigned char *bin = kc__bs_alloc(sv, n);
  if (bin && ocl.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
    kc__bs_free(sv, bin);
    bin = NULL;
  }
  *size = n;
  return bin;
}

/* What ocl_late_wait and ev's completion callback share, freed by the
 * last of the two to let go: the callback may come after the wait has
 * given up (ocl_late_stop), even after the runtime is gone (so it is
 * malloc's, not the runtime's allocator's), or never where the command
 * never completes (the waiter, a few dozen bytes, then stays allocated).
 * ocl_late_signal wakes it too (ocl_state.late_waiter). */
struct ocl_late_waiter {
  kc__mutex lock;
  pthread_cond_t cond;
  bool told; /* the callback came */
  _Atomic int refs;
};
typedef struct ocl_late_waiter ocl_late_waiter;

static void ocl_late_waiter_drop(ocl_late_waiter *w) {
  if (kc__fetch_sub_acq_rel(&w->refs, 1) != 1) return;
  pthread_cond_destroy(&w->cond);
  kc__mutex_destroy(&w->lock);
  free(w);
}

static void CL_CALLBACK ocl_late_done(cl_event ev, cl_int status, void *ud) {
  (void)ev, (void)status; /* the event says how it ended (PoCL may pass CL_COMPLETE for a failure) */
  ocl_late_waiter *w = ud;
  kc__lock(&w->lock);
  w->told = true;
  pthread_cond_signal(&w->cond);
  kc__unlock(&w->lock);
  ocl_late_waiter_drop(w);
}

/* Waits for ev's callback, or for ocl_late_signal (lock not held): false
 * where there is no waiter to be had (out of memory, or the callback
 * cannot be set), and the caller asks instead. */
static bool ocl_late_wait_told(ocl_state *st, cl_event ev) {
  ocl_late_waiter *w = malloc(sizeof *w);
  if (!w) return false;
  if (!kc__mutex_init(&w->lock)) {
    free(w);
    return false;
  }
  if (pthread_cond_init(&w->cond, NULL) != 0) {
    kc__mutex_destroy(&w->lock);
    free(w);
    return false;
  }
  w->told = false;
  kc__store_relaxed(&w->refs, 2);
  if (ocl.clSetEventCallback(ev, CL_COMPLETE, ocl_late_done, w) != CL_SUCCESS) {
    kc__store_relaxed(&w->refs, 1);
    ocl_late_waiter_drop(w);
    return false;
  }
  kc__lock(&st->lock);
  st->late_waiter = w; /* late_stop may be set already: the wait below tests it under w->lock */
  kc__unlock(&st->lock);
  kc__lock(&w->lock);
  while (!w->told && !kc__load_relaxed(&st->late_stop)) pthread_cond_wait(&w->cond, &w->lock);
  kc__unlock(&w->lock);
  kc__lock(&st->lock);
  st->late_waiter = NULL;
  kc__unlock(&st->lock);
  ocl_late_waiter_drop(w);
  return true;
}

/* Whether ev has completed: waited for through its callback, then
 * asked once (or, where no callback can be set, asked every 0.1 to 5 ms);
 * false if it failed, cannot be asked, or ocl_late_stop came while it had
 * not completed (a launch waiting for something that may never come). */
static bool ocl_late_wait(ocl_state *st, cl_event ev) {
  cl_int status = CL_QUEUED;
  if (ocl_late_wait_told(st, ev))
    return ocl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) ==
               CL_SUCCESS &&
           status == CL_COMPLETE;
  for (uint64_t nap = 100;;) {
    if (ocl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
      return false;
    if (status <= CL_COMPLETE) return status == CL_COMPLETE;
    if (kc__load_relaxed(&st->late_stop)) return false;
    kc__nap_us(nap);
    if (nap < 5000) nap *= 2;
  }
}

/* The late worker: for each kept program at OCL_LATE_RAN, taken out of
 * the table's late state (its program retained, its first binary copied,
 * its event), once the launch has completed: the binary the program gives
 * now, handed to the core if it is not the first one (the platform keeps
 * no more after a launch), where the core wants one. No lock is held while
 * it waits or fetches. */
static void *ocl_late_worker(void *arg) {
  ocl_state *st = arg;
  const kc__bsvc *sv = st->sv;
  kc__lock(&st->lock);
  for (;;) {
    ocl_kept *k = NULL;
    for (int i = 0; i < OCL_KEEP && !k; i++)
      if (st->kept[i].late == OCL_LATE_RAN) k = &st->kept[i];
    if (!k || (kc__load_relaxed(&st->late_stop) && kc__now_ns() >= st->late_deadline)) {
      if (kc__load_relaxed(&st->late_stop)) break; /* what is left keeps its first binary */
      pthread_cond_wait(&st->late_cond, &st->lock);
      continue;
    }
    cl_program p = NULL;
    size_t old_size = k->size;
    unsigned char *old = kc__bs_alloc(sv, old_size);
    if (old && ocl.clRetainProgram(k->prog) == CL_SUCCESS) {
      memcpy(old, k->bin, old_size);
      p = k->prog;
    }
    cl_event ev;
    ocl_late_drop(k, &ev);
    kc__unlock(&st->lock);
    /* only for an entry the core would write (a runtime with a store it can
     * write, whose entry this compile wrote): PoCL's serialization is costly */
    bool wanted = p && sv->better && sv->better(sv, old, old_size, NULL, 0);
    size_t size = 0;
    unsigned char *bin = wanted && ocl_late_wait(st, ev) ? ocl_fetch(sv, p, &size) : NULL;
    if (bin && sv->better && (size != old_size || memcmp(bin, old, size) != 0))
      sv->better(sv, old, old_size, bin, size);
    kc__bs_free(sv, bin);
    kc__bs_free(sv, old);
    if (p) ocl.clReleaseProgram(p);
    ocl.clReleaseEvent(ev);
    kc__lock(&st->lock);
  }
  kc__unlock(&st->lock);
  return NULL;
}

/* The states whose late worker runs (ocl_late_list, under
 * ocl_late_list_lock: taken alone, under st->lock, or before a try of
 * st->lock), for the
 * exit handler. */
static pthread_mutex_t ocl_late_list_lock = PTHREAD_MUTEX_INITIALIZER;
static ocl_state *ocl_late_list;
static pthread_once_t ocl_late_exit_once = PTHREAD_ONCE_INIT;

/* Stops st's worker (under st->lock): no fetch starts after deadline.
 * True if this call is the one to join it. */
static bool ocl_late_signal(ocl_state *st, uint64_t deadline) {
  kc__store_relaxed(&st->late_stop, 1);
  if (!st->late_deadline || deadline < st->late_deadline) st->late_deadline = deadline;
  pthread_cond_signal(&st->late_cond);
  ocl_late_waiter *w = st->late_waiter; /* the worker waiting for a launch */
  if (w) {
    kc__lock(&w->lock);
    pthread_cond_signal(&w->cond);
    kc__unlock(&w->lock);
  }
  bool started = st->late_started;
  st->late_started = false;
  return started;
}

static void ocl_late_unlist(ocl_state *st) {
  pthread_mutex_lock(&ocl_late_list_lock);
  for (ocl_state **p = &ocl_late_list; *p; p = &(*p)->late_next)
    if (*p == st) {
      *p = st->late_next;
      break;
    }
  pthread_mutex_unlock(&ocl_late_list_lock);
}

/* At exit: every worker of this process stopped, no fetch started, each
 * waited for at most OCL_LATE_EXIT_S. Never waits for a lock another
 * thread may hold for long (a fork child whose parent held the list's, a
 * thread inside kcache as the process exits): those workers are left as
 * they are. (The one lock it takes without a try is a worker's waiter's,
 * through ocl_late_signal: held for a few instructions at a time, and
 * only by this process's threads, since a fork child's states are never
 * on its list.) */
static void ocl_late_exit(void) {
  if (pthread_mutex_trylock(&ocl_late_list_lock) != 0) return;
  pthread_t join[64];
  int n = 0;
  for (ocl_state **p = &ocl_late_list; *p && n < 64;) {
    ocl_state *st = *p;
    if (st->late_pid != getpid() || pthread_mutex_trylock(&st->lock) != 0) {
      p = &st->late_next;
      continue;
    }
    if (ocl_late_signal(st, 1)) join[n++] = st->late_thread;
    pthread_mutex_unlock(&st->lock);
    *p = st->late_next; /* unlisted: ocl_late_stop finds it stopped */
  }
  pthread_mutex_unlock(&ocl_late_list_lock);
  for (int i = 0; i < n; i++) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += OCL_LATE_EXIT_S;
    if (pthread_timedjoin_np(join[i], NULL, &t) != 0) pthread_detach(join[i]);
  }
}

static void ocl_late_exit_register(void) { (void)atexit(ocl_late_exit); }

void ocl_late_launched(ocl_state *st, cl_program prog, cl_event ev) {
  kc__lock(&st->lock);
  for (int i = 0; i < OCL_KEEP && ev; i++) {
    ocl_kept *k = &st->kept[i];
    if (k->prog == prog && k->late == OCL_LATE_WAIT) {
      k->late = OCL_LATE_RAN;
      k->ev = ev;
      ev = NULL;
    }
  }
  if (!ev && !st->late_started && !kc__load_relaxed(&st->late_stop) && kc__fork_threads_allowed()) {
    st->late_started = kc__thread_start(&st->late_thread, ocl_late_worker, st);
    if (st->late_started) {
      pthread_once(&ocl_late_exit_once, ocl_late_exit_register);
      st->late_pid = getpid();
      pthread_mutex_lock(&ocl_late_list_lock);
      st->late_next = ocl_late_list;
      ocl_late_list = st;
      pthread_mutex_unlock(&ocl_late_list_lock);
    }
  }
  if (!ev) pthread_cond_signal(&st->late_cond);
  kc__unlock(&st->lock);
  if (ev) ocl.clReleaseEvent(ev); /* another context launched it first, or it left the table */
}

void ocl_late_stop(void *state) {
  ocl_state *st = state;
  if (!st || !st->late_cond_ok) return;
  ocl_late_unlist(st);
  kc__lock(&st->lock);
  bool started = ocl_late_signal(st, kc__now_ns() + OCL_LATE_STOP_NS);
  kc__unlock(&st->lock);
  if (started) pthread_join(st->late_thread, NULL);
}

void ocl_programs_free(ocl_state *st) {
  for (int i = 0; i < OCL_KEEP; i++) {
    if (st->kept[i].prog) ocl.clReleaseProgram(st->kept[i].prog);
    if (st->kept[i].ev) ocl.clReleaseEvent(st->kept[i].ev);
    kc__bs_free(st->sv, st->kept[i].bin);
    st->kept[i] = (ocl_kept){0};
  }
  if (st->shared)
    for (int i = 1; i < st->ndevices; i++) /* shared[0] is compile_ctx: the caller's */
      if (st->shared[i]) ocl.clReleaseContext(st->shared[i]);
  /* the array is platform.c's (ocl_state_free) */
}
