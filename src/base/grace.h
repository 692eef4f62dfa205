/* SPDX-License-Identifier: MIT */
/* grace.h -- grace periods, for reclaiming what other threads may still
 * hold (the code instances, linked objects and definitions kc_collect
 * frees).
 *
 * A thread marks each section in which it may hold pointers to shared
 * objects that another thread may unlink (kc__grace_enter/_exit, nested
 * freely: only the outermost pair counts). A thread that unlinked objects
 * (so that no thread entering a section from now on can reach them) takes
 * a snapshot of the threads inside a section at that moment
 * (kc__grace_snap); the objects may be freed once each of those threads
 * has left the section it was in (kc__grace_passed). Nothing waits: the
 * owner of a snapshot asks again later.
 *
 * Each thread has a record: a sequence number that is odd while it is
 * inside, written by the thread alone. Records are made on a thread's
 * first section and never freed: a thread that exits leaves its record
 * (outside) for the next new thread, so a snapshot can always read the
 * records it names. Entering is a sequentially consistent increment and
 * the snapshot's reads follow a sequentially consistent fence: either the
 * snapshot sees a thread inside, or that thread's section sees everything
 * unlinked before the snapshot. */
#ifndef KC_BASE_GRACE_H
#define KC_BASE_GRACE_H

#include "base/atomics.h"
#include "base/compiler.h"
#include "base/mem.h"

#include <stdbool.h>
#include <stdint.h>

/* A thread's record (grace.c keeps the registry of them). */
typedef struct kc__grace_thr {
  _Atomic uint64_t seq; /* odd while its thread is inside a section; written by that thread only */
  uint32_t depth; /* the thread's nesting (its own) */
  bool taken; /* a live thread owns it (registry lock) */
  struct kc__grace_thr *next; /* the registry, newest first (never unlinked) */
} kc__grace_thr;

/* The calling thread's record, NULL until its first section (initial-exec
 * TLS: one %fs load). */
extern __attribute__((visibility("hidden"),
                      tls_model("initial-exec"))) _Thread_local kc__grace_thr *kc__grace_self;
/* A thread's first section: its record (false: no memory for it). */
bool kc__grace_join(void) KC__NOINLINE KC__COLD;

/* The threads that were inside a section when it was taken. */
typedef struct kc__grace {
  struct kc__grace_seen {
    kc__grace_thr *t;
    uint64_t seq; /* odd: the section it was in */
  } * v;
  size_t n;
} kc__grace;

/* Enters a section (the calling thread's first one makes its record:
 * false if there is no memory for it, and then nothing is entered). */
static inline bool kc__grace_enter(void) {
  kc__grace_thr *t = kc__grace_self;
  if (KC__UNLIKELY(!t)) {
    if (!kc__grace_join()) return false;
    t = kc__grace_self;
  }
  if (t->depth++ == 0) atomic_fetch_add_explicit(&t->seq, 1, memory_order_seq_cst);
  return true;
}
/* Leaves the section kc__grace_enter entered (a release store: only this
 * thread writes its record). */
static inline void kc__grace_exit(void) {
  kc__grace_thr *t = kc__grace_self;
  if (--t->depth == 0) kc__store_release(&t->seq, kc__load_relaxed(&t->seq) + 1);
}
/* Whether the calling thread is inside a section. */
bool kc__grace_inside(void);
/* Takes the snapshot into *g (heap: for its array). False if out of
 * memory (*g is then empty and must not be trusted: the caller frees
 * nothing yet). */
bool kc__grace_snap(kc__grace *g, const kc__heap *heap);
/* Whether every thread of the snapshot has left the section it was in. */
bool kc__grace_passed(const kc__grace *g);
void kc__grace_free(kc__grace *g, const kc__heap *heap);

#endif /* KC_BASE_GRACE_H */
