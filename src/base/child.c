/* SPDX-License-Identifier: MIT */
/* child.c -- kc__child_wait (child.h). */
#include "base/child.h"

#include "base/clock.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int kc__child_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

/* One look: 1 reaped (*status set), 0 still running, -1 reaped by
 * another waiter, -2 an error (errno). Through the pidfd when there is
 * one, so that exactly this process is reaped, never a later child that
 * got its pid. */
static int reap(pid_t pid, int pidfd, bool block, int *status) {
  for (;;) {
    if (pidfd >= 0) {
      siginfo_t si = {0};
      int r = waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | (block ? 0 : WNOHANG));
      if (r == 0 && si.si_pid == 0) return 0;
      if (r == 0) {
        *status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
        return 1;
      }
      if (errno == EINTR) continue;
      if (errno == ECHILD) return -1;
      if (errno != EINVAL) return -2;
      pidfd = -1; /* a kernel without waitid(P_PIDFD) (5.3): by pid */
    }
    pid_t r = waitpid(pid, status, block ? 0 : WNOHANG);
    if (r == pid) return 1;
    if (r == 0) return 0;
    if (errno == EINTR) continue;
    return errno == ECHILD ? -1 : -2;
  }
}

kc__child_end kc__child_wait(pid_t pid, int pidfd, uint64_t deadline, bool group, int *status) {
  long nap = 50000; /* without a pidfd: 0.05 ms, doubling to 1 ms */
  for (;;) {
    int r = reap(pid, pidfd, false, status);
    if (r == 1) return KC__CHILD_EXITED;
    if (r == -1) return KC__CHILD_LOST;
    if (r < -1) return KC__CHILD_ERROR;
    uint64_t now = kc__now_ns();
    if (deadline && now >= deadline) break;
    if (pidfd >= 0) {
      struct pollfd p = {.fd = pidfd, .events = POLLIN};
      uint64_t left_ms = deadline ? (deadline - now) / 1000000u + 1 : (uint64_t)INT_MAX;
      (void)poll(&p, 1, left_ms > INT_MAX ? INT_MAX : (int)left_ms); /* EINTR: look again */
    } else {
      kc__nap_ns((uint64_t)nap);
      if (nap < 1000000) nap *= 2;
    }
  }
  /* still ours (the look above found it unreaped): it goes now */
  if (group) kill(-pid, SIGKILL);
#ifdef SYS_pidfd_send_signal
  else if (pidfd >= 0) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
#endif
  else kill(pid, SIGKILL);
  int r = reap(pid, pidfd, true, status);
  return r == 1 ? KC__CHILD_KILLED : r == -1 ? KC__CHILD_LOST : KC__CHILD_ERROR;
}
