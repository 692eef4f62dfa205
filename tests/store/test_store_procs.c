/* SPDX-License-Identifier: MIT */
/*
 * test_store_procs -- the disk cache across processes: eight processes that
 * cold-start the same kernel against one directory compile it once and all
 * compute the right result; a compile holder killed with SIGKILL releases
 * its waiters at once (the lock dies with it); a holder that hangs holds
 * them only up to the bound, after which they compile themselves.
 *
 * The compiler is a wrapper script (st_wrapper) that counts compiles and can
 * pause, steered by environment variables that do not enter the cache key.
 */
#include "st.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fx {
  char root[KCT_DIR_LEN]; /* first: kct_dir_setup makes it */
  char cache[600];
  char wrapper[600];
  char count[600];
  char mark[600];
} fx;

static int setup(void **state) {
  kct_dir_setup(state, sizeof(fx), "store-p");
  fx *f = *state;
  snprintf(f->cache, sizeof f->cache, "%s/cache", f->root);
  snprintf(f->count, sizeof f->count, "%s/compiles", f->root);
  snprintf(f->mark, sizeof f->mark, "%s/started", f->root);
  st_wrapper(f->root, f->wrapper, sizeof f->wrapper);
  return 0;
}

/* What a child reports through its pipe. */
typedef struct report {
  int status; /* kc_status of the run */
  uint64_t compiles, disk_hits, lock_timeouts;
  double seconds; /* from the start signal to the result */
} report;

/* How long the parent waits for a child's report before it kills the child
 * and fails the test (the slowest, a waiter bound by 60 s, ends sooner). */
#define COLLECT_SECONDS 120

/* A child: waits for the pipe `go` to close (go[0] -1: starts at once),
 * runs k on the shared store with the wrapper compiler, writes its report,
 * exits. lock_ms 0: the default. */
static kct_child spawn(const fx *f, const int go[2], uint32_t lock_ms, const char *sleep_secs) {
  kct_child c;
  if (!kct_fork(&c, false)) return c;
  if (go[1] >= 0) close(go[1]);
  setpgid(0, 0); /* its compiler (and the wrapper's sleep) in its group */
  if (sleep_secs) {
    setenv("KC_TEST_SLEEP", sleep_secs, 1);
    setenv("KC_TEST_MARK", f->mark, 1);
  }
  setenv("KC_TEST_COUNT", f->count, 1);
  setenv("TMPDIR", f->root, 1); /* a killed child's work directory goes with the test's */
  char byte;
  if (go[0] >= 0) {
    while (read(go[0], &byte, 1) < 0 && errno == EINTR) {}
  }
  double t0 = st_now();
  report r = {KC_EBACKEND, 0, 0, 0, 0};
  kc_options o;
  kc_options_init(&o);
  o.host_cc = f->wrapper;
  o.cache_lock_timeout_ms = lock_ms;
  kc_runtime *rt = st_runtime_nofail(f->cache, &o);
  if (rt) {
    r.status = st_define(rt);
    if (!r.status) r.status = st_run(rt, "k", NULL, 16, 0);
    kc_stats s;
    kc_stats_get(rt, &s);
    r.compiles = s.compiles;
    r.disk_hits = s.disk_hits;
    r.lock_timeouts = s.disk_lock_timeouts;
    kc_runtime_destroy(rt);
  }
  r.seconds = st_now() - t0;
  if (!kct_child_send(&c, &r, sizeof r)) _exit(3);
  _exit(0);
}

/* The child's report; fails the test if it sends none within the bound. */
static report collect(kct_child *c) {
  report r;
  memset(&r, 0, sizeof r);
  r.status = -1;
  pid_t pid = c->pid;
  size_t n = kct_child_wait(c, &r, sizeof r, COLLECT_SECONDS);
  if (c->timed_out) fail_msg("child %d sent no report within %d s (killed)", (int)pid, COLLECT_SECONDS);
  if (n != sizeof r) fail_msg("child %d sent no report (exit status %d)", (int)pid, c->status);
  return r;
}

static bool wait_for(const char *path, double seconds) {
  double end = st_now() + seconds;
  while (st_now() < end) {
    if (access(path, F_OK) == 0) return true;
    usleep(10000);
  }
  return false;
}

static void test_eight_processes_compile_once(void **state) {
  fx *f = *state;
  enum { N = 8 };
  int go[2];
  assert_int_equal(pipe(go), 0);
  kct_child child[N];
  /* a slow compile, so that all eight are waiting while the first compiles */
  setenv("KC_TEST_SLEEP", "0.5", 1);
  for (int i = 0; i < N; i++) child[i] = spawn(f, go, 0, NULL);
  unsetenv("KC_TEST_SLEEP");
  close(go[0]);
  close(go[1]); /* all start together */
  uint64_t compiles = 0, hits = 0;
  for (int i = 0; i < N; i++) {
    report r = collect(&child[i]);
    if (r.status) fail_msg("process %d: %s", i, kc_status_name((kc_status)r.status));
    compiles += r.compiles;
    hits += r.disk_hits;
  }
  print_message("8 processes: %llu compile(s), %llu disk hits, the wrapper ran %zu compile(s)\n",
                (unsigned long long)compiles, (unsigned long long)hits, st_lines(f->count));
  assert_int_equal(compiles, 1);
  assert_int_equal(hits, N - 1);
  assert_int_equal(st_lines(f->count), 1);
  assert_int_equal(st_entries(f->cache, NULL), 1);
  assert_int_equal(st_leftovers(f->cache, true, true), 0);
}

static void test_killed_holder_releases_its_waiters(void **state) {
  fx *f = *state;
  static const int now[2] = {-1, -1};
  kct_child a = spawn(f, now, 0, "60"); /* holds the lock, compiling for a minute */
  if (!wait_for(f->mark, 20)) {
    kill(-a.pid, SIGKILL);
    fail_msg("the holder never started compiling");
  }
  kct_child b = spawn(f, now, 60000, NULL); /* would wait up to a minute */
  usleep(300000);
  double killed = st_now();
  kill(a.pid, SIGKILL); /* the holder only: its compiler must not keep the lock */
  report r = collect(&b);
  double after = st_now() - killed;
  kill(-a.pid, SIGKILL); /* now the orphaned wrapper too */
  close(a.fd);
  waitpid(a.pid, NULL, 0);
  print_message("waiter finished %.2f s after the holder was killed (bound 60 s): %llu compile(s)\n", after,
                (unsigned long long)r.compiles);
  assert_int_equal(r.status, KC_OK);
  assert_int_equal(r.compiles, 1);
  assert_int_equal(r.lock_timeouts, 0);
  assert_true(after < 20);
  assert_int_equal(st_entries(f->cache, NULL), 1);
}

static void test_stuck_holder_delays_waiters_only_up_to_the_bound(void **state) {
  fx *f = *state;
  static const int now[2] = {-1, -1};
  kct_child a = spawn(f, now, 0, "60");
  if (!wait_for(f->mark, 20)) {
    kill(-a.pid, SIGKILL);
    fail_msg("the holder never started compiling");
  }
  kct_child b = spawn(f, now, 1000, NULL); /* gives up after 1 s */
  report r = collect(&b);
  kill(-a.pid, SIGKILL);
  close(a.fd);
  waitpid(a.pid, NULL, 0);
  print_message("waiter with a 1 s bound finished in %.2f s: %llu compile(s), %llu lock timeout(s)\n",
                r.seconds, (unsigned long long)r.compiles, (unsigned long long)r.lock_timeouts);
  assert_int_equal(r.status, KC_OK);
  assert_int_equal(r.compiles, 1);
  assert_int_equal(r.lock_timeouts, 1);
  assert_true(r.seconds >= 0.9 && r.seconds < 15);
  assert_int_equal(st_entries(f->cache, NULL), 1); /* the waiter wrote it */
}

ST_MAIN(ST_DIR_TEST(test_eight_processes_compile_once), ST_DIR_TEST(test_killed_holder_releases_its_waiters),
        ST_DIR_TEST(test_stuck_holder_delays_waiters_only_up_to_the_bound))
