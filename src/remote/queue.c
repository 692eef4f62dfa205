/* SPDX-License-Identifier: MIT */
/*
 * remote/queue.c -- owns a job queue and its thread (queue.h): what a job
 * does and how it is freed are its owner's callbacks; the queue keeps the
 * bound, the thread (at a lower priority, taking no signals), the stop,
 * and what becomes of the jobs around fork().
 */
#include "remote/queue.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

bool kc__jobq_init(kc__jobq *q, void (*run)(void *, kc__job *), void (*drop)(void *, kc__job *), void *ud,
                   size_t max_jobs, uint64_t max_bytes) {
  *q = (kc__jobq){.run = run, .drop = drop, .ud = ud, .max_jobs = max_jobs, .max_bytes = max_bytes};
  if (!kc__mutex_init(&q->queue_lock)) return false;
  if (pthread_cond_init(&q->queue_cond, NULL) != 0) {
    kc__mutex_destroy(&q->queue_lock);
    return false;
  }
  q->pid = getpid();
  return true;
}

static void *worker(void *arg) {
  kc__jobq *q = arg;
  /* Background work: on a machine whose cores are all busy, the launches
   * that the application waits for go first (Linux: nice is per thread). */
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) != 0) {
    /* not allowed: run at the application's priority */
  }
  kc__lock(&q->queue_lock);
  for (;;) {
    while (!q->head && !q->stop) pthread_cond_wait(&q->queue_cond, &q->queue_lock);
    kc__job *j = q->head;
    if (!j) break; /* stopped, and nothing is left */
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    q->qlen--;
    q->qwork -= j->bounded;
    q->qbytes -= j->bytes;
    q->running = j; /* the parent's, if the process forks now */
    kc__unlock(&q->queue_lock);
    q->run(q->ud, j);
    kc__lock(&q->queue_lock);
    /* freed under the lock: a fork (whose prepare takes it) sees the job
     * either running (the child drops its copy) or gone, never half freed */
    q->running = NULL;
    q->drop(q->ud, j);
  }
  kc__unlock(&q->queue_lock);
  return NULL;
}

kc__jobq_put kc__jobq_push(kc__jobq *q, kc__job *j) {
  kc__jobq_put put = KC__JOBQ_NO_THREAD;
  kc__lock(&q->queue_lock);
  if (j->bounded && (q->qwork >= q->max_jobs || q->qbytes + j->bytes > q->max_bytes)) {
    put = KC__JOBQ_FULL;
  } else if (!q->stop) {
    if (!q->started && !q->no_thread && kc__fork_threads_allowed()) {
      q->started = kc__thread_start(&q->thread, worker, q);
    }
    if (q->started) {
      j->next = NULL;
      if (q->tail) q->tail->next = j;
      else q->head = j;
      q->tail = j;
      q->qlen++;
      q->qwork += j->bounded;
      q->qbytes += j->bytes;
      if (q->qwork > q->qwork_peak) q->qwork_peak = q->qwork;
      if (q->qbytes > q->qbytes_peak) q->qbytes_peak = q->qbytes;
      pthread_cond_signal(&q->queue_cond);
      put = KC__JOBQ_QUEUED;
    }
  }
  kc__unlock(&q->queue_lock);
  return put;
}

void kc__jobq_peak(kc__jobq *q, size_t *jobs, uint64_t *bytes) {
  kc__lock(&q->queue_lock);
  *jobs = q->qwork_peak;
  *bytes = q->qbytes_peak;
  kc__unlock(&q->queue_lock);
}

void kc__jobq_stop(kc__jobq *q) {
  kc__lock(&q->queue_lock);
  q->stop = true;
  bool join = q->started && q->pid == getpid(); /* a child's thread is its own (kc__jobq_fork_child) */
  pthread_cond_signal(&q->queue_cond);
  kc__unlock(&q->queue_lock);
  if (join) pthread_join(q->thread, NULL);
  for (kc__job *j = q->head, *next; j; j = next) { /* none: the thread ran them all */
    next = j->next;
    q->drop(q->ud, j);
  }
  q->head = q->tail = NULL;
}

void kc__jobq_destroy(kc__jobq *q) {
  kc__mutex_destroy(&q->queue_lock);
  pthread_cond_destroy(&q->queue_cond);
}

/* -------------------------------------------------------------- fork */

void kc__jobq_fork_prepare(kc__jobq *q) { kc__lock(&q->queue_lock); }

void kc__jobq_fork_parent(kc__jobq *q) { kc__unlock(&q->queue_lock); }

/* The child: the queued jobs and the one the parent's thread runs are the
 * parent's to run. The condition variable may count the parent's waiting
 * thread: a new one. The child has one thread, so its copies are dropped
 * after the lock is given back. */
void kc__jobq_fork_child(kc__jobq *q) {
  kc__job *jobs = q->head, *running = q->running;
  q->head = q->tail = q->running = NULL;
  q->qlen = q->qwork = 0;
  q->qbytes = 0;
  q->started = false;
  q->pid = getpid();
  pthread_cond_init(&q->queue_cond, NULL);
  kc__unlock(&q->queue_lock);
  for (kc__job *j = jobs, *next; j; j = next) {
    next = j->next;
    q->drop(q->ud, j);
  }
  if (running) q->drop(q->ud, running);
}
