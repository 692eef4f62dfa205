/* SPDX-License-Identifier: MIT */
/*
 * proc.c -- the processes and directories tests start and clean up, declared
 * in kc_test.h: a command's output through popen, forked children with a
 * pipe back to the parent and a time limit on waiting for them, and a test's
 * private directory as a cmocka setup/teardown pair.
 */
#include "kc_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int kct_capture(const char *cmd, char **out) {
  fflush(NULL);
  FILE *p = popen(cmd, "r");
  if (!p) fail_msg("popen %s: %s", cmd, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  for (size_t r; (r = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
    n += r;
    if (cap - n < 2) {
      char *more = realloc(buf, cap *= 2);
      if (!more) {
        free(buf);
        pclose(p);
        fail_msg("kct_capture: out of memory after %zu bytes of %s", n, cmd);
      }
      buf = more;
    }
  }
  buf[n] = 0;
  int st = pclose(p);
  if (out) *out = buf;
  else free(buf);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void kct_write_script(const char *path, const char *fmt, ...) {
  FILE *f = fopen(path, "w");
  if (!f) fail_msg("cannot write %s: %s", path, strerror(errno));
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  if (fclose(f) != 0 || chmod(path, 0755) != 0) fail_msg("cannot write %s: %s", path, strerror(errno));
}

const char kct_says_end[] = "(the end of KCT_SAYS's wants)";

/* Says why what failed, with what it said, frees that, and fails the test. */
static void says_fail(char *said, const char *fmt, ...) KCT_PRINTF(2, 3);
static void says_fail(char *said, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  print_error("%s; it said:\n%s\n", why, said ? said : "(null)");
  free(said);
  fail_msg("%s", why);
}

void kct_says(const char *what, int got, char **out, int rc, ...) {
  char *said = *out;
  *out = NULL;
  if (got != rc) says_fail(said, "%s returned %d, expected %d", what, got, rc);
  va_list ap;
  va_start(ap, rc);
  for (int i = 1;; i++) {
    const char *want = va_arg(ap, const char *);
    if (want == kct_says_end) break;
    if (!want) {
      va_end(ap);
      says_fail(said, "%s: want %d is NULL", what, i);
    }
    if (!said || !strstr(said, want)) {
      va_end(ap);
      says_fail(said, "%s: expected \"%s\" in what it said", what, want);
    }
  }
  va_end(ap);
  free(said);
}

bool kct_fork(kct_child *c, bool cloexec) {
  memset(c, 0, sizeof *c);
  int p[2];
  if (pipe2(p, cloexec ? O_CLOEXEC : 0) != 0) fail_msg("pipe: %s", strerror(errno));
  fflush(NULL); /* what stdio holds is written once, not once per process */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    fail_msg("fork: %s", strerror(e));
  }
  if (pid == 0) {
    close(p[0]);
    c->fd = p[1];
    return true;
  }
  close(p[1]);
  c->pid = pid;
  c->fd = p[0];
  return false;
}

bool kct_child_send(const kct_child *c, const void *data, size_t len) {
  const char *s = data;
  while (len) {
    ssize_t w = write(c->fd, s, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    s += w;
    len -= (size_t)w;
  }
  return true;
}

/* Milliseconds left until deadline (a kct_now() time), at least 0; -1 for
 * no deadline. */
static int ms_left(double deadline) {
  if (deadline <= 0) return -1;
  double left = deadline - kct_now();
  return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* Reads from c->fd until the end or the deadline: the first len bytes into
 * buf, the rest discarded. */
static size_t read_report(kct_child *c, char *buf, size_t len, double deadline) {
  size_t got = 0;
  for (;;) {
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int ready = ms_left(deadline) == 0 ? 0 : poll(&pfd, 1, ms_left(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) { /* the time ran out (also for a child that writes without end) */
      c->timed_out = true;
      return got;
    }
    char sink[256];
    char *to = got < len ? buf + got : sink;
    size_t room = got < len ? len - got : sizeof sink;
    ssize_t r = read(c->fd, to, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return got;
    if (to != sink) got += (size_t)r;
  }
}

size_t kct_child_wait(kct_child *c, void *buf, size_t len, double timeout_s) {
  double deadline = timeout_s > 0 ? kct_now() + timeout_s : 0;
  c->timed_out = false;
  size_t got = 0;
  if (c->fd >= 0) {
    got = read_report(c, buf, len, deadline);
    close(c->fd);
    c->fd = -1;
  }
  if (c->timed_out) kill(c->pid, SIGKILL); /* it did not finish its report in time */
  for (;;) {
    pid_t w = waitpid(c->pid, &c->status, deadline && !c->timed_out ? WNOHANG : 0);
    if (w == c->pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) { /* not our child (any more): nothing to wait for */
      c->status = -1;
      break;
    }
    if (ms_left(deadline) == 0) {
      c->timed_out = true;
      kill(c->pid, SIGKILL);
      continue;
    }
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  c->pid = 0;
  return got;
}

int kct_dir_setup(void **state, size_t fixture_size, const char *tag) {
  if (fixture_size < KCT_DIR_LEN) fail_msg("kct_dir_setup: a fixture of %zu bytes has no root", fixture_size);
  char *f = calloc(1, fixture_size);
  assert_non_null(f);
  *state = f;
  kct_mkdtemp(f, KCT_DIR_LEN, tag); /* the fixture's first member */
  return 0;
}

int kct_dir_teardown(void **state) {
  char *f = *state;
  if (f) kct_rmrf(f);
  free(f);
  *state = NULL;
  return 0;
}
