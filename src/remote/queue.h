/* SPDX-License-Identifier: MIT */
/*
 * remote/queue.h -- a job queue with one background thread (queue.c): jobs
 * leave the thread that made them, bounded in jobs and bytes (checked under
 * the queue's lock, so concurrent producers cannot pass it), run at a lower
 * priority, and are run (or dropped) when the queue stops. It knows nothing
 * of what a job does: its owner (the remote tier's uploads and deferred
 * work, remote/tier.c) embeds a kc__job at the start of its own job and
 * hands the queue a callback that runs one and one that frees one, with
 * opaque data for both.
 *
 * Around fork() the owner calls the three kc__jobq_fork_* from its fork
 * hook (base/fork.h): the parent keeps its queue and its thread; the child,
 * which has no thread, drops its copy of the parent's jobs (the parent runs
 * them: nothing runs twice) and starts a thread of its own for the jobs it
 * queues (under ThreadSanitizer, which cannot start threads after a
 * threaded fork, it runs them on the caller's thread: KC__JOBQ_NO_THREAD).
 *
 * Lock: kc__jobq.queue_lock (+ queue_cond), a leaf (doc/locks.md): run is
 * called outside it; drop outside it too, except on the thread, which
 * frees the job it ran under the lock (so that a fork never copies a job
 * half freed): drop must take no lock and only free memory.
 */
#ifndef KC_REMOTE_QUEUE_H
#define KC_REMOTE_QUEUE_H

#include "base/base.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The queue's part of a job, first in the owner's job. */
typedef struct kc__job {
  struct kc__job *next;
  bool bounded; /* counts against max_jobs and max_bytes; else always queued */
  size_t bytes; /* counted against max_bytes */
} kc__job;

typedef struct kc__jobq {
  void (*run)(void *ud, kc__job *j); /* does a job (on the queue's thread, or the caller's) */
  void (*drop)(void *ud, kc__job *j); /* frees a job, run or not */
  void *ud;
  size_t max_jobs; /* bounded jobs queued at most */
  uint64_t max_bytes; /* their bytes at most */
  kc__mutex queue_lock; /* leaf */
  pthread_cond_t queue_cond;
  kc__job *head, *tail;
  kc__job *running; /* the job the thread runs now, outside the lock */
  size_t qlen, qwork; /* jobs; bounded ones */
  uint64_t qbytes;
  size_t qwork_peak; /* the most qwork and qbytes ever were (tests) */
  uint64_t qbytes_peak;
  bool stop, started;
  bool no_thread; /* run on the caller's thread (a child under TSan) */
  pid_t pid; /* whose thread it is (a child's is its own) */
  pthread_t thread;
} kc__jobq;

/* Makes q's lock and condition variable; false if it cannot (nothing to
 * destroy then). */
bool kc__jobq_init(kc__jobq *q, void (*run)(void *, kc__job *), void (*drop)(void *, kc__job *), void *ud,
                   size_t max_jobs, uint64_t max_bytes);

typedef enum { KC__JOBQ_QUEUED, KC__JOBQ_FULL, KC__JOBQ_NO_THREAD } kc__jobq_put;

/* Queues j for the thread (started on the first job). KC__JOBQ_FULL: j is
 * bounded and the queue holds max_jobs of those or would pass max_bytes with
 * it. KC__JOBQ_NO_THREAD: no thread can be made, or the queue is stopping.
 * Unless queued, j is still the caller's. */
kc__jobq_put kc__jobq_push(kc__jobq *q, kc__job *j);
/* The most bounded jobs and bytes ever queued at once. */
void kc__jobq_peak(kc__jobq *q, size_t *jobs, uint64_t *bytes);
/* Stops the thread once it has run every job queued, and drops what is
 * left; then kc__jobq_destroy. */
void kc__jobq_stop(kc__jobq *q);
void kc__jobq_destroy(kc__jobq *q);

/* From the owner's fork hook: prepare takes the queue's lock, parent gives
 * it back, child resets the queue, gives the lock back and drops its copies
 * of the parent's jobs. */
void kc__jobq_fork_prepare(kc__jobq *q);
void kc__jobq_fork_parent(kc__jobq *q);
void kc__jobq_fork_child(kc__jobq *q);

#endif /* KC_REMOTE_QUEUE_H */
