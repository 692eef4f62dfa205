/* SPDX-License-Identifier: MIT */
/*
 * test_child.c -- kc__child_wait (src/base/child.h), the one wait for the
 * child processes kcache starts (host compilers, OpenCL compile helpers):
 * an exit and its status; a child still running at the deadline killed
 * and reaped, its process group too when asked; a child that another
 * waiter of the process reaped first is reported lost and never
 * signalled; each with and without a pidfd.
 */
#include "kc_test.h"

#include "base/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child that runs sh -c script in a process group of its own. */
static pid_t spawn(const char *script) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    _exit(127);
  }
  setpgid(pid, pid); /* either side may get there first */
  return pid;
}

/* A child (spawn) that starts a grandchild, `sleep 30`, writes its pid to
 * the file pidfile (64 bytes) in the new directory dir (mkdtemp's
 * template), then runs `then`. */
static pid_t spawn_grandparent(char *dir, char *pidfile, const char *then) {
  char script[400];
  assert_non_null(mkdtemp(dir));
  snprintf(pidfile, 64, "%s/grandchild", dir);
  snprintf(script, sizeof script, "sleep 30 & echo $! > %s%s", pidfile, then);
  return spawn(script);
}

static int fd_for(pid_t pid, bool with_pidfd) { return with_pidfd ? kc__child_pidfd(pid) : -1; }

static void exits(bool with_pidfd) {
  pid_t pid = spawn("exit 3");
  int fd = fd_for(pid, with_pidfd), status = 0;
  assert_int_equal(kc__child_wait(pid, fd, kc__now_ns() + 10000000000ull, false, &status), KC__CHILD_EXITED);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
  if (fd >= 0) close(fd);
  pid = spawn("kill -TERM $$");
  fd = fd_for(pid, with_pidfd);
  assert_int_equal(kc__child_wait(pid, fd, 0, false, &status), KC__CHILD_EXITED);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGTERM);
  if (fd >= 0) close(fd);
}

/* At the deadline: killed and reaped; with group, its own child too (a
 * compiler driver's cc1), which is seen gone by its pid file. */
static void killed(bool with_pidfd, bool group) {
  char dir[] = "/tmp/kc-child-XXXXXX", pidfile[64];
  pid_t pid = spawn_grandparent(dir, pidfile, "; wait");
  int fd = fd_for(pid, with_pidfd), status = 0;
  uint64_t t0 = kc__now_ns();
  kc__child_end end = kc__child_wait(pid, fd, t0 + 300000000ull, group, &status);
  uint64_t took = kc__now_ns() - t0;
  assert_int_equal(end, KC__CHILD_KILLED);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  assert_true(took >= 300000000ull && took < 5000000000ull);
  assert_int_equal(kill(pid, 0), -1); /* reaped: no such process */
  FILE *f = fopen(pidfile, "r");
  long g = 0;
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%ld", &g), 1);
  fclose(f);
  int alive = 1;
  for (int i = 0; i < 200 && alive; i++) { /* the grandchild is reparented: killed, reaped by init */
    alive = kill((pid_t)g, 0) == 0;
    if (alive && group) kc__nap_us(10000);
    if (!group) break;
  }
  assert_int_equal(alive, group ? 0 : 1);
  if (!group) kill((pid_t)g, SIGKILL);
  if (fd >= 0) close(fd);
  unlink(pidfile);
  rmdir(dir);
}

/* Reaped by someone else first (a program's waitpid(-1)): lost, and never
 * signalled. The child leads a process group with a grandchild in it and
 * exits; after the reap, a wait with group and a deadline already past
 * must not kill the group (the grandchild lives). */
static void lost(bool with_pidfd) {
  char dir[] = "/tmp/kc-child-XXXXXX", pidfile[64];
  pid_t pid = spawn_grandparent(dir, pidfile, "");
  int fd = fd_for(pid, with_pidfd), status = 0;
  assert_int_equal(waitpid(-1, &status, 0), pid);
  status = 12345;
  assert_int_equal(kc__child_wait(pid, fd, 1, true, &status), KC__CHILD_LOST);
  assert_int_equal(status, 12345);
  FILE *f = fopen(pidfile, "r");
  long g = 0;
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%ld", &g), 1);
  fclose(f);
  kc__nap_us(20000);
  assert_int_equal(kill((pid_t)g, 0), 0); /* its group was not signalled */
  kill((pid_t)g, SIGKILL);
  if (fd >= 0) close(fd);
  unlink(pidfile);
  rmdir(dir);
}

static void test_exit_and_status(void **state) {
  (void)state;
  exits(true);
  exits(false);
}

static void test_killed_at_the_deadline(void **state) {
  (void)state;
  killed(true, true);
  killed(false, true);
  killed(true, false);
}

static void test_reaped_by_another_waiter(void **state) {
  (void)state;
  lost(true);
  lost(false);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  if (kc__child_pidfd(getpid()) < 0)
    printf("note: no pidfd here (Linux before 5.3): both cases wait by pid\n");
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_exit_and_status),
      KCT_TEST(test_killed_at_the_deadline),
      KCT_TEST(test_reaped_by_another_waiter),
  };
  return KCT_RUN(tests);
}
