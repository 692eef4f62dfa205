/* SPDX-License-Identifier: MIT */
/* child.h -- waiting for a child process that kcache started (a host
 * compiler, an OpenCL compile helper) without touching anyone else's:
 * only that child is reaped, no signal handler is changed, and a child
 * that another waiter of the process reaped (waitpid(-1)) before the wait
 * looked is reported lost, never signalled. (Between the wait's last look
 * and its kill at a deadline, such a waiter can still reap it: the kill
 * then goes to a pid that is free or reused, as with any kill(2) of a pid;
 * through a pidfd, without group, it cannot.) */
#ifndef KC_BASE_CHILD_H
#define KC_BASE_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* How kc__child_wait ended. */
typedef enum kc__child_end {
  KC__CHILD_EXITED, /* it ended by itself: *status is waitpid's */
  KC__CHILD_KILLED, /* it was still running at the deadline: killed (SIGKILL) and reaped, *status set */
  KC__CHILD_LOST, /* another waiter of this process reaped it: no status */
  KC__CHILD_ERROR /* the wait failed (errno) */
} kc__child_end;

/* A pidfd of pid (Linux 5.3 and later), or -1. */
int kc__child_pidfd(pid_t pid);

/* Waits for child pid until deadline (kc__now_ns; 0: none), blocked in
 * poll on pidfd when there is one (readable once the child has exited),
 * else in naps of 0.05 ms doubling to 1 ms. At the deadline it kills the
 * child's process group (group: the child leads one) or the child, and
 * reaps it. The pidfd stays the caller's. */
kc__child_end kc__child_wait(pid_t pid, int pidfd, uint64_t deadline, bool group, int *status);

#endif /* KC_BASE_CHILD_H */
