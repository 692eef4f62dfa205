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
 * Late binaries (PoCL; st->late_binaries): PoCL serializes a program's
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
 * handed that have completed, and joins it. In this process
 * nothing changes: the artifact stays the first binary, which links find
 * the kept program by. A compile helper's binary (helpers.c) is stored as
 * it came: its program is not here to launch.
 */
#include "backends/opencl/opencl.h"

#include <signal.h>
#include <string.h>

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

/* Whether ev has completed, asking every 0.1 to 5 ms; false if it failed,
 * cannot be asked, or ocl_late_stop came while it had not completed (a
 * launch waiting for something that may never come). */
static bool ocl_late_wait(ocl_state *st, cl_event ev) {
  for (uint64_t nap = 100;;) {
    cl_int status = CL_QUEUED;
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
    if (!k) {
      if (kc__load_relaxed(&st->late_stop)) break;
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
    /* the thread takes no signals meant for the application's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    st->late_started = pthread_create(&st->late_thread, NULL, ocl_late_worker, st) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  if (!ev) pthread_cond_signal(&st->late_cond);
  kc__unlock(&st->lock);
  if (ev) ocl.clReleaseEvent(ev); /* another context launched it first, or it left the table */
}

void ocl_late_stop(void *state) {
  ocl_state *st = state;
  if (!st || !st->late_cond_ok) return;
  kc__lock(&st->lock);
  kc__store_relaxed(&st->late_stop, 1);
  pthread_cond_signal(&st->late_cond);
  bool started = st->late_started;
  st->late_started = false;
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
