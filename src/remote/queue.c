/* SPDX-License-Identifier: MIT */
/*
 * remote/queue.c -- owns the upload queue and its thread: uploads and
 * deferred work leave the launch that compiled, bounded in jobs and bytes
 * (checked under the queue's lock, so concurrent uploads cannot pass it),
 * run at a lower priority, are finished (or freed) when the tier closes,
 * and survive fork() (base/fork.h): the parent keeps its queue and its
 * thread; the child, which has no thread, drops its copy of the parent's
 * jobs (the parent sends them: nothing is sent twice) and starts a thread
 * of its own for the jobs it queues (under ThreadSanitizer, which cannot
 * start threads after a threaded fork, it uploads synchronously).
 */
#include "remote/internal.h"

#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>

static void job_free(kc__remote *r, upjob *j) {
  kc__heap_free(&r->heap, j->image);
  kc__heap_free(&r->heap, j);
}

static bool job_has_work(const upjob *j) { return j->image || j->fn; }

static void *uploader(void *arg) {
  kc__remote *r = arg;
  /* Background work: on a machine whose cores are all busy, the launches
   * that the application waits for go first (Linux: nice is per thread). */
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) != 0) {
    /* not allowed: run at the application's priority */
  }
  kc__lock(&r->queue_lock);
  for (;;) {
    while (!r->head && !r->stop) pthread_cond_wait(&r->queue_cond, &r->queue_lock);
    upjob *j = r->head;
    if (!j) break; /* stopped, and nothing is left */
    r->head = j->next;
    if (!r->head) r->tail = NULL;
    r->qlen--;
    r->qwork -= job_has_work(j);
    r->qbytes -= j->size;
    r->running = j; /* the parent's, if the process forks now */
    kc__unlock(&r->queue_lock);
    kc__remote_run_job(r, j);
    kc__lock(&r->queue_lock);
    r->running = NULL;
    job_free(r, j);
  }
  kc__unlock(&r->queue_lock);
  return NULL;
}

typedef enum { Q_QUEUED, Q_FULL, Q_NO_THREAD } queued;

/* Queues j for the uploader thread (started on the first job). Q_FULL: j
 * carries an image or deferred work, and the queue holds KC__QUEUE_JOBS of
 * those or would pass KC__QUEUE_BYTES with it (a lock's release alone is
 * always queued). Q_NO_THREAD: no thread can be made, or the tier is
 * closing. */
static queued enqueue(kc__remote *r, upjob *j) {
  queued q = Q_NO_THREAD;
  kc__lock(&r->queue_lock);
  if (job_has_work(j) && (r->qwork >= KC__QUEUE_JOBS || r->qbytes + j->size > KC__QUEUE_BYTES)) {
    q = Q_FULL;
  } else if (!r->stop) {
    if (!r->started && !r->no_thread) {
      /* the uploader takes no signals meant for the application's threads */
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      r->started = pthread_create(&r->thread, NULL, uploader, r) == 0;
      pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (r->started) {
      if (r->tail) r->tail->next = j;
      else r->head = j;
      r->tail = j;
      r->qlen++;
      r->qwork += job_has_work(j);
      r->qbytes += j->size;
      if (r->qwork > r->qwork_peak) r->qwork_peak = r->qwork;
      if (r->qbytes > r->qbytes_peak) r->qbytes_peak = r->qbytes;
      pthread_cond_signal(&r->queue_cond);
      q = Q_QUEUED;
    }
  }
  kc__unlock(&r->queue_lock);
  return q;
}

void kc__remote_upload(kc__remote *r, const uint8_t key[16], void *image, size_t size, uint64_t lock) {
  if (!r || (!image && !lock)) {
    if (r) kc__heap_free(&r->heap, image);
    return;
  }
  if (image && lock) kc__remote_observe(r, lock);
  upjob *j = kc__heap_calloc(&r->heap, sizeof *j);
  if (!j) {
    kc__heap_free(&r->heap, image);
    return; /* the lock expires by itself */
  }
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = image ? size : 0;
  j->lock = lock;
  queued q = enqueue(r, j);
  if (q == Q_FULL) {
    kc__remote_count(r, RC_SKIPS, 1); /* a backlog: the server is slower than the compilers */
    kc__remote_count_shared(r, RC_SKIPS, 1);
    kc__heap_free(&r->heap, j->image);
    j->image = NULL;
    j->size = 0;
    if (!lock) {
      kc__heap_free(&r->heap, j);
      return;
    }
    q = enqueue(r, j); /* the release alone */
  }
  if (q == Q_NO_THREAD) { /* upload here rather than lose it */
    kc__remote_run_job(r, j);
    job_free(r, j);
  }
}

bool kc__remote_defer(kc__remote *r, kc__remote_defer_fn fn, void *ud, const uint8_t key[16], void *image,
                      size_t size) {
  if (!r) return false;
  upjob *j = kc__heap_calloc(&r->heap, sizeof *j);
  if (!j) return false;
  j->fn = fn;
  j->ud = ud;
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = size;
  if (enqueue(r, j) == Q_QUEUED) return true;
  kc__heap_free(&r->heap, j);
  return false;
}

void kc__remote_queue_peak(kc__remote *r, size_t *jobs, uint64_t *bytes) {
  kc__lock(&r->queue_lock);
  *jobs = r->qwork_peak;
  *bytes = r->qbytes_peak;
  kc__unlock(&r->queue_lock);
}

void kc__remote_queue_stop(kc__remote *r) {
  kc__fork_unregister(&r->fork);
  kc__lock(&r->queue_lock);
  r->stop = true;
  bool join = r->started && r->pid == getpid(); /* a child's thread is its own (fork_child) */
  pthread_cond_signal(&r->queue_cond);
  kc__unlock(&r->queue_lock);
  if (join) pthread_join(r->thread, NULL);
  for (upjob *j = r->head, *next; j; j = next) { /* none: the thread ran them all */
    next = j->next;
    job_free(r, j);
  }
  r->head = r->tail = NULL;
}

/* -------------------------------------------------------------- fork */

static void fork_prepare(void *ud) {
  kc__remote *r = ud;
  kc__lock(&r->queue_lock);
  kc__lock(&r->pool_lock);
}

static void fork_parent(void *ud) {
  kc__remote *r = ud;
  kc__unlock(&r->pool_lock);
  kc__unlock(&r->queue_lock);
}

/* The child: the queued jobs and the one the parent's thread runs are the
 * parent's to send; pooled connections are the parent's sockets (pool_get
 * drops them by their pid). The condition variable may count the parent's
 * waiting thread: a new one. */
static void fork_child(void *ud) {
  kc__remote *r = ud;
  for (upjob *j = r->head, *next; j; j = next) {
    next = j->next;
    job_free(r, j);
  }
  if (r->running) job_free(r, r->running);
  r->head = r->tail = r->running = NULL;
  r->qlen = r->qwork = 0;
  r->qbytes = 0;
  r->started = false;
#ifdef KC__TSAN
  /* ThreadSanitizer cannot start threads in the child of a threaded
   * process ("dup thread"): there, the child uploads synchronously */
  r->no_thread = true;
#endif
  pthread_cond_init(&r->queue_cond, NULL);
  kc__remote_set_ident(r);
  kc__unlock(&r->pool_lock);
  kc__unlock(&r->queue_lock);
}

void kc__remote_fork_register(kc__remote *r) {
  r->fork = (kc__fork_hook){
      .level = KC__FORK_REMOTE, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child, .ud = r};
  kc__fork_register(&r->fork); /* false: no fork handling (pthread_atfork out of memory) */
}
