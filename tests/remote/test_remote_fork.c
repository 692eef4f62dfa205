/* SPDX-License-Identifier: MIT */
/*
 * test_remote_fork -- fork() in the middle of a launch loop with an active
 * uploader, against a real redis-server (kcache.h, "Fork"; doc/locks.md):
 *
 *   fork_mid_launch_loop  three threads compile a new specialization per
 *                         launch (each an upload) and launch cached ones;
 *                         the main thread forks eight times at random
 *                         moments. Each child, under a watchdog, uses the
 *                         inherited runtime: cached launches, new
 *                         compiles (uploaded by the child's own uploader),
 *                         a definition, kc_collect, kc_stats_get, then
 *                         kc_runtime_destroy. No child may hang (a lock
 *                         inherited held), no launch may be wrong, and in
 *                         the end Redis holds exactly one value per
 *                         specialization compiled by anyone (no upload
 *                         lost), and the uploads counted by every process
 *                         equal that number (none sent twice).
 *   queue_bound           twenty threads upload at once to a stopped
 *                         server: the queue never holds more than
 *                         KC__QUEUE_JOBS images, and every upload is
 *                         either queued or counted as skipped.
 *
 * The host backend shared its work directory and file counter between a
 * parent and a child when this was written, so while a child compiles the
 * parent's threads start no new work (KC_FORK_CONCURRENT=1 lets them), and
 * a file kept in the work directory stopped a child's kc_runtime_destroy
 * from removing the directory the parent still used. (Each host compile
 * now has a directory of its own, and keep_host_dir finds none.)
 *
 * ThreadSanitizer: a child of a threaded process starts its own uploader
 * thread, which TSan refuses by default; the test sets die_after_fork=0.
 * With gcc 12's TSan and ASan runtimes the fork case is skipped (see
 * SANITIZER_FORK_UNSAFE below); the default and clang suites run it.
 */
#include "rs.h"
#include "kct_conf.h"

#include "remote/internal.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static rs_server server;

/* ThreadSanitizer reads this before main (see the head comment); its
 * TSAN_OPTIONS from the environment still apply on top. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

enum { THREADS = 3, FORKS = 8, CHILD_COMPILES = 4, CHILD_SECONDS = 60 };

/* Sanitizer runtimes that do not lock their allocator around fork(): a
 * child forked while another thread holds one of the allocator's
 * size-class locks (a malloc or free that refills or drains its cache)
 * waits on that lock forever at its own next malloc or free of that size.
 * A hung child's only thread is then in the sanitizer's
 * SizeClassAllocator64 (GetFromAllocator or ReturnToAllocator), with no
 * lock of kcache's held (RELIABILITY.md, "Fork"). AddressSanitizer before
 * LLVM 18 (gcc before 15, clang before 18; llvm-project PR 75290 added its
 * pthread_atfork handler) and ThreadSanitizer before LLVM 19 (gcc before
 * 15, clang before 19; llvm-project PR 96600 locks its allocator around
 * fork). The fork-mid-launch case is skipped only with such a runtime;
 * KC_FORK_SANITIZER=1 runs it anyway (to see the hang). */
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) && __clang_major__ < 18
#define SANITIZER_FORK_UNSAFE "AddressSanitizer"
#elif __has_feature(thread_sanitizer) && __clang_major__ < 19
#define SANITIZER_FORK_UNSAFE "ThreadSanitizer"
#endif
#elif defined(__SANITIZE_ADDRESS__) && __GNUC__ < 15
#define SANITIZER_FORK_UNSAFE "AddressSanitizer"
#elif defined(__SANITIZE_THREAD__) && __GNUC__ < 15
#define SANITIZER_FORK_UNSAFE "ThreadSanitizer"
#endif

typedef struct loop {
  kc_runtime *rt;
  pthread_mutex_t m;
  pthread_cond_t cv;
  bool paused; /* a child is compiling: start no new work */
  int busy; /* threads inside an operation */
  atomic_int stop;
  atomic_int compiled; /* new specializations launched right by the threads */
  atomic_int wrong, errors;
  atomic_int launches;
  bool concurrent;
} loop;

typedef struct worker {
  loop *l;
  int t;
} worker;

static bool gate_enter(loop *l) {
  pthread_mutex_lock(&l->m);
  while (l->paused && !atomic_load(&l->stop)) pthread_cond_wait(&l->cv, &l->m);
  bool go = !atomic_load(&l->stop);
  if (go) l->busy++;
  pthread_mutex_unlock(&l->m);
  return go;
}

static void gate_leave(loop *l) {
  pthread_mutex_lock(&l->m);
  l->busy--;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->m);
}

static void tally(loop *l, kc_status st, bool fresh) {
  atomic_fetch_add(&l->launches, 1);
  if (st == KC_EBACKEND) atomic_fetch_add(&l->wrong, 1);
  else if (st) atomic_fetch_add(&l->errors, 1);
  else if (fresh) atomic_fetch_add(&l->compiled, 1);
}

static void *launcher(void *arg) {
  worker *w = arg;
  loop *l = w->l;
  for (int i = 0; gate_enter(l); i++) {
    int v = 1 + w->t * 100000 + i; /* new: a compile and an upload */
    tally(l, rs_run_v(l->rt, i % 3, v), true);
    tally(l, rs_run_v(l->rt, (i + w->t) % 3, 0), false); /* cached */
    gate_leave(l);
  }
  return NULL;
}

/* The child's work on the inherited runtime; its exit status: 0 good, 1
 * wrong result, 2 an error, and SIGALRM if it hung. */
static int child_work(kc_runtime *rt, int idx, int go_fd) {
  alarm(CHILD_SECONDS);
  char c;
  if (read(go_fd, &c, 1) != 1) return 2;
  int rc = 0;
  for (int n = 0; n < 3; n++) {
    kc_status st = rs_run_v(rt, n, 0); /* the parent's code, in memory */
    if (st) rc = st == KC_EBACKEND ? 1 : 2;
  }
  for (int j = 0; j < CHILD_COMPILES && !rc; j++) {
    kc_status st = rs_run_v(rt, j % 3, 900000 + idx * 100 + j);
    if (st) rc = st == KC_EBACKEND ? 1 : 2;
  }
  if (!rc &&
      kc_define(rt, "scale", "KC_DEVICE float scale(float n, float i) { return n * (i + 1.0f); }", NULL))
    rc = 2;
  if (kc_collect(rt, NULL)) rc = 2; /* one thread: a quiescent point */
  kc_stats s;
  if (kc_stats_get(rt, &s)) rc = 2;
  kc_runtime_destroy(rt); /* drains the child's uploads */
  return rc;
}

static void keep_host_dir(const char *tmp) {
  DIR *d = opendir(tmp);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "kcache-host-", 12)) continue;
    char p[1200];
    snprintf(p, sizeof p, "%s/%s/keep", tmp, e->d_name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
  }
  closedir(d);
}

static size_t values_in_redis(void) {
  char **keys;
  size_t n = rs_keys(server.url, "kctest:", &keys), e = 0;
  for (size_t i = 0; i < n; i++) e += !strstr(keys[i], ":lock");
  rs_keys_free(keys, n);
  return e;
}

/* Waits for a child. One that is still running a few seconds before its
 * watchdog fires is hung: its threads' stacks go to stderr (through gdb,
 * where it is installed) so that a rare deadlock seen once in CI says
 * where it waits, and the watchdog then ends it. */
static void wait_or_dump(pid_t pid, int *status) {
  /* by the clock, not by counting naps: on a loaded machine a nap runs long */
  uint64_t dump_at = kc__now_ns() + (uint64_t)(CHILD_SECONDS - 5) * 1000000000u;
  for (bool dumped = false;;) {
    pid_t got = waitpid(pid, status, WNOHANG);
    assert_true(got == pid || got == 0);
    if (got == pid) return;
    if (!dumped && kc__now_ns() >= dump_at) {
      dumped = true;
      char cmd[200];
      snprintf(cmd, sizeof cmd,
               "command -v gdb >/dev/null && gdb -p %d -batch -nx -ex 'thread apply all bt' 1>&2 2>/dev/null",
               (int)pid);
      fprintf(stderr, "child %d still runs after %d s; its stacks:\n", (int)pid, CHILD_SECONDS - 5);
      if (system(cmd) != 0) fprintf(stderr, "(no stacks: gdb is not installed or could not attach)\n");
    }
    kc__nap_us(10000);
  }
}

/* Forks a child at a random moment of the loop; waits for it. */
static void fork_one(loop *l, int idx, int *hung, int *bad) {
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(go[1]);
    _exit(child_work(l->rt, idx, go[0]));
  }
  close(go[0]);
  pthread_mutex_lock(&l->m);
  l->paused = !l->concurrent;
  while (l->busy && !l->concurrent) pthread_cond_wait(&l->cv, &l->m); /* see the head comment */
  pthread_mutex_unlock(&l->m);
  assert_int_equal(write(go[1], "g", 1), 1);
  close(go[1]);
  int status = 0;
  wait_or_dump(pid, &status);
  if (WIFSIGNALED(status)) {
    (*hung)++;
    print_message("child %d died of signal %d%s\n", idx, WTERMSIG(status),
                  WTERMSIG(status) == SIGALRM ? " (a deadlock: it ran past its watchdog)" : "");
  } else if (WEXITSTATUS(status)) {
    (*bad)++;
    print_message("child %d: %s\n", idx, WEXITSTATUS(status) == 1 ? "a wrong result" : "an error");
  }
  pthread_mutex_lock(&l->m);
  l->paused = false;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->m);
}

static void test_fork_mid_launch_loop(void **state) {
  (void)state;
#ifdef SANITIZER_FORK_UNSAFE
  if (!getenv("KC_FORK_SANITIZER")) { /* KC_FORK_SANITIZER=1 runs it anyway (to see the hang) */
    print_message("SKIPPED: this " SANITIZER_FORK_UNSAFE " runtime does not lock its allocator around "
                  "fork() (a child can hang in it); see RELIABILITY.md, \"Fork\"\n");
    skip();
  }
#endif
  char root[512], store[600], tmp[600];
  st_mkdtemp(root, sizeof root, "fork");
  snprintf(store, sizeof store, "%s/store", root);
  snprintf(tmp, sizeof tmp, "%s/tmp", root);
  assert_int_equal(mkdir(tmp, 0700), 0);
  char *old_tmp = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  setenv("TMPDIR", tmp, 1); /* the host backend's work directory, for keep_host_dir */
  loop l = {.concurrent = getenv("KC_FORK_CONCURRENT") && atoi(getenv("KC_FORK_CONCURRENT"))};
  pthread_mutex_init(&l.m, NULL);
  pthread_cond_init(&l.cv, NULL);
  l.rt = rs_node(store, &(rs_node_opts){.url = server.url, .timeout_ms = 5000, .lock_ms = 5000});
  assert_non_null(l.rt);
  assert_int_equal(rs_define(l.rt), KC_OK);
  keep_host_dir(tmp);
  pthread_t th[THREADS];
  worker w[THREADS];
  for (int t = 0; t < THREADS; t++) {
    w[t] = (worker){&l, t};
    assert_int_equal(pthread_create(&th[t], NULL, launcher, &w[t]), 0);
  }
  unsigned seed = (unsigned)getpid();
  int hung = 0, bad = 0;
  for (int i = 0; i < FORKS; i++) {
    kc__nap_us(20000 + (uint64_t)(rand_r(&seed) % 200000)); /* threads mid-compile, uploads queued */
    fork_one(&l, i, &hung, &bad);
  }
  atomic_store(&l.stop, 1);
  pthread_mutex_lock(&l.m);
  pthread_cond_broadcast(&l.cv);
  pthread_mutex_unlock(&l.m);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  kc_runtime_destroy(l.rt); /* drains the parent's uploads */
  if (old_tmp) setenv("TMPDIR", old_tmp, 1);
  else unsetenv("TMPDIR");
  free(old_tmp);
  char vdir[700];
  snprintf(vdir, sizeof vdir, "%s/v1", store);
  kc__remote_counters read;
  kc__remote_counters_read(vdir, &read);
  size_t expect = (size_t)atomic_load(&l.compiled) + 3 + (size_t)FORKS * CHILD_COMPILES;
  size_t values = values_in_redis();
  print_message("forks %d, parent launches %d (%d new specializations), uploads %llu, skipped %llu, "
                "errors %llu, values in Redis %zu (expected %zu)\n",
                FORKS, atomic_load(&l.launches), atomic_load(&l.compiled), (unsigned long long)read.uploads,
                (unsigned long long)read.skips, (unsigned long long)read.errors, values, expect);
  assert_int_equal(hung, 0);
  assert_int_equal(bad, 0);
  assert_int_equal(atomic_load(&l.wrong), 0);
  assert_int_equal(atomic_load(&l.errors), 0);
  assert_int_equal(read.skips, 0);
  assert_int_equal(values, expect); /* none lost */
  assert_int_equal(read.uploads, expect); /* none sent twice */
  st_rmrf(root);
}

/* ------------------------------------------------------------ the bound */

enum { UPLOADERS = 20, PER_UPLOADER = 40 };

static void *upload_many(void *arg) {
  kc__remote *r = arg;
  for (int i = 0; i < PER_UPLOADER; i++) {
    uint8_t key[16] = {0};
    key[0] = (uint8_t)i;
    void *img = calloc(1, 1000); /* the tier's heap is libc (opened with NULL) */
    kc__remote_upload(r, key, img, 1000, 0);
  }
  return NULL;
}

static void test_queue_bound(void **state) {
  (void)state;
  rs_server s;
  rs_start(&s, NULL, NULL);
  char root[512];
  st_mkdtemp(root, sizeof root, "bound");
  kc_options opt;
  kc_options_init(&opt);
  opt.remote_url = s.url;
  opt.remote_timeout_ms = 200; /* each upload waits for the stopped server */
  opt.remote_retry_ms = 1;
  kc__remote *r = kc__remote_open(NULL, NULL, kct_conf(&opt), root);
  assert_non_null(r);
  kill(s.pid, SIGSTOP);
  pthread_t th[UPLOADERS];
  for (int t = 0; t < UPLOADERS; t++) assert_int_equal(pthread_create(&th[t], NULL, upload_many, r), 0);
  for (int t = 0; t < UPLOADERS; t++) pthread_join(th[t], NULL);
  size_t jobs;
  uint64_t bytes;
  kc__remote_queue_peak(r, &jobs, &bytes);
  kc_stats st;
  memset(&st, 0, sizeof st);
  kc__remote_stats(r, &st);
  print_message("peak %zu jobs, %llu bytes (bound %u jobs); skipped at the queue %llu of %d\n", jobs,
                (unsigned long long)bytes, KC__QUEUE_JOBS, (unsigned long long)st.remote_skips,
                UPLOADERS * PER_UPLOADER);
  assert_true(jobs <= KC__QUEUE_JOBS);
  assert_true(bytes <= (uint64_t)KC__QUEUE_JOBS * 1000);
  assert_true(jobs == KC__QUEUE_JOBS); /* the stopped server did fill it */
  kill(s.pid, SIGCONT);
  kc__remote_close(r);
  rs_stop(&s);
  st_rmrf(root);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
  unsetenv("KC_REMOTE");
  unsetenv("KC_CACHE_DISABLE");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_mid_launch_loop),
      cmocka_unit_test(test_queue_bound),
  };
  rs_start(&server, NULL, NULL);
  rc = cmocka_run_group_tests_name(kct_group_name("fork and the upload queue"), tests, NULL, NULL);
  rs_stop(&server);
  return rc;
}
