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

#include "base/mem.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kc__grace_thr kc__grace_thr;

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
bool kc__grace_enter(void);
/* Leaves the section kc__grace_enter entered. */
void kc__grace_exit(void);
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
