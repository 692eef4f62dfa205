/* SPDX-License-Identifier: MIT */
/*
 * remote/queue.c -- owns the upload queue and its thread: uploads and
 * deferred work leave the launch that compiled, bounded in jobs and bytes,
 * run at a lower priority, and are finished (or freed) when the tier closes.
 */
#include "remote/internal.h"

#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>

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
    r->qbytes -= j->size;
    kc__unlock(&r->queue_lock);
    kc__remote_run_job(r, j);
    kc__heap_free(&r->heap, j->image);
    kc__heap_free(&r->heap, j);
    kc__lock(&r->queue_lock);
  }
  kc__unlock(&r->queue_lock);
  return NULL;
}

/* Queues j for the uploader thread (started on the first job). False when
 * no thread can be made (or the tier is closing). */
static bool enqueue(kc__remote *r, upjob *j) {
  bool queued = false;
  kc__lock(&r->queue_lock);
  if (!r->stop) {
    if (!r->started) {
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
      r->qbytes += j->size;
      pthread_cond_signal(&r->queue_cond);
      queued = true;
    }
  }
  kc__unlock(&r->queue_lock);
  return queued;
}

void kc__remote_upload(kc__remote *r, const uint8_t key[16], void *image, size_t size, uint64_t lock) {
  if (!r || (!image && !lock)) {
    if (r) kc__heap_free(&r->heap, image);
    return;
  }
  kc__lock(&r->queue_lock);
  bool full = r->qlen >= KC__QUEUE_JOBS || r->qbytes + size > KC__QUEUE_BYTES;
  kc__unlock(&r->queue_lock);
  if (image && full) {
    kc__remote_count(r, RC_SKIPS, 1); /* a backlog: the server is slower than the compilers */
    kc__remote_count_shared(r, RC_SKIPS, 1);
    kc__heap_free(&r->heap, image);
    image = NULL;
    size = 0;
    if (!lock) return;
  }
  upjob *j = kc__heap_calloc(&r->heap, sizeof *j);
  if (!j) {
    kc__heap_free(&r->heap, image);
    return; /* the lock expires by itself */
  }
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = size;
  j->lock = lock;
  if (!enqueue(r, j)) { /* upload here rather than lose it */
    kc__remote_run_job(r, j);
    kc__heap_free(&r->heap, j->image);
    kc__heap_free(&r->heap, j);
  }
}

bool kc__remote_defer(kc__remote *r, kc__remote_defer_fn fn, void *ud, const uint8_t key[16], void *image,
                      size_t size) {
  if (!r) return false;
  kc__lock(&r->queue_lock);
  bool full = r->qlen >= KC__QUEUE_JOBS || r->qbytes + size > KC__QUEUE_BYTES;
  kc__unlock(&r->queue_lock);
  upjob *j = full ? NULL : kc__heap_calloc(&r->heap, sizeof *j);
  if (!j) return false;
  j->fn = fn;
  j->ud = ud;
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = size;
  if (enqueue(r, j)) return true;
  kc__heap_free(&r->heap, j);
  return false;
}

void kc__remote_queue_stop(kc__remote *r) {
  kc__lock(&r->queue_lock);
  r->stop = true;
  bool join = r->started && r->pid == getpid(); /* after fork, the thread was the parent's */
  pthread_cond_signal(&r->queue_cond);
  kc__unlock(&r->queue_lock);
  if (join) pthread_join(r->thread, NULL);
  for (upjob *j = r->head, *next; j; j = next) { /* only left by a thread of another process */
    next = j->next;
    kc__heap_free(&r->heap, j->image);
    kc__heap_free(&r->heap, j);
  }
  r->head = r->tail = NULL;
}
