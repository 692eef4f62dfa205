/* SPDX-License-Identifier: MIT */
/*
 * test_clhelp.c -- the OpenCL backend's compile helpers (kcache-clc,
 * src/backends/opencl/helpers.c): kernels prepared on two threads through
 * helpers launch with the right results, as a build in this process does; a build error comes back as
 * KC_ECOMPILE with the same message and compiler log; a helper killed with SIGKILL (between builds and during
 * them) is replaced and the kernels still work; a helper that does not answer in time is killed, the compile
 * fails with KC_EBACKEND and is not remembered; a helper that cannot be found makes the runtime build in its
 * own process, warning once in the log; without $KC_OPENCL_HELPER the library finds the helper beside itself
 * in a build tree; and kc_runtime_destroy leaves no child process behind; a SETUP of the wrong form is
 * refused with a reason. CTest gives the helper's path ($KC_OPENCL_HELPER). OpenCL backend only (PoCL here).
 */
#include "kc_test.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 32
#define MAXKIDS 16

/* The pids of this process's children (every thread's), into kids. */
static int children(pid_t *kids) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%.255s/children", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    long pid;
    while (n < MAXKIDS && fscanf(f, "%ld", &pid) == 1) kids[n++] = (pid_t)pid;
    fclose(f);
  }
  closedir(d);
  return n;
}

/* A runtime whose compiles go through helpers (mode: KC_OPENCL_HELPERS),
 * on two compile threads; log: where its log goes (NULL: stderr). */
static kc_runtime *helper_runtime(const char *mode, kc_log_fn log, void *ud) {
  setenv("KC_OPENCL_HELPERS", mode, 1);
  kc_options o;
  kc_options_init(&o);
  o.compile_threads = 2;
  o.log = log;
  o.log_ud = ud;
  kc_runtime *rt = kct_runtime(&o);
  unsetenv("KC_OPENCL_HELPERS");
  return rt;
}

/* Whether the OpenCL platform is PoCL. */
static bool on_pocl(void) {
  char devices[4096] = "";
  kc_list_devices(KC_BACKEND_OPENCL, devices, sizeof devices);
  return strstr(devices, "Portable Computing Language") != NULL;
}

/* Kernels tag_<base>..tag_<base+n-1>: y[j] = j * (i + 1) + i. */
static void define_kernels(kc_runtime *rt, int base, int n, kc_kernel **ks) {
  for (int i = base; i < base + n; i++) {
    char name[32], src[256];
    snprintf(name, sizeof name, "tag_%d", i);
    snprintf(src, sizeof src,
             "KC_KERNEL void tag_%d(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * "
             "%d.0f + %d.0f; }",
             i, i + 1, i);
    kct_define(rt, name, src);
    ks[i - base] = kct_kernel(rt, name, NULL);
  }
}

/* helper_runtime(mode, log, ud), a context of it (*ctx) and its kernels
 * tag_<base>..tag_<base+n-1> (define_kernels, into ks). */
static kc_runtime *helper_kernels(const char *mode, kc_log_fn log, void *ud, kc_context **ctx, int base,
                                  int n, kc_kernel **ks) {
  kc_runtime *rt = helper_runtime(mode, log, ud);
  *ctx = kct_context(rt);
  define_kernels(rt, base, n, ks);
  return rt;
}

static void check_kernels(kc_runtime *rt, kc_context *ctx, int base, int n, kc_kernel **ks) {
  kc_buffer *b = kct_buffer(rt, ctx, N);
  float out[N];
  for (int i = base; i < base + n; i++) {
    kct_run_ok(rt, ks[i - base], ctx, b, N, out);
    kct_expect_linear(out, N, (float)(i + 1), (float)i);
  }
  kc_buffer_destroy(b);
}

/* kc_prepare of ks (kernels tag_<base>.., n of them) in ctx: built in at
 * most one helper per compile thread, and each kernel right. */
static void prepare_in_helpers(kc_runtime *rt, kc_context *ctx, int base, int n, kc_kernel **ks) {
  KCT_OK(rt, kc_prepare(ks, (uint32_t)n, ctx));
  pid_t kids[MAXKIDS];
  int helpers = children(kids);
  assert_true(helpers >= 1 && helpers <= 2); /* one helper per compile thread at most */
  check_kernels(rt, ctx, base, n, ks);
}

/* Destroys rt and checks that no child process is left, zombies included. */
static void destroy_and_check(kc_runtime *rt) {
  kct_destroy(rt);
  pid_t kids[MAXKIDS];
  assert_int_equal(children(kids), 0);
}

/* kc_prepare on two threads through helpers; a helper's build runs as an
 * in-process one does. */
static void test_prepare_through_helpers(void **state) {
  (void)state;
  kc_context *ctx;
  kc_kernel *ks[6];
  kc_runtime *rt = helper_kernels("1", NULL, NULL, &ctx, 0, 6, ks);
  prepare_in_helpers(rt, ctx, 0, 6, ks);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 6);
  /* each kernel: its build in a helper, and the binary's build at the link */
  assert_int_equal(s.backend_builds, 12);

  /* The same kernel built here and in a helper: both run right. (Their
   * bytes need not be the same: a build's bitcode may depend on what the
   * process built before it; a helper's binary is loaded by its bytes,
   * never compared with another build's.) */
  kc_runtime *here = helper_runtime("0", NULL, NULL);
  kc_context *ctx_here = kct_context(here);
  kc_kernel *k1, *k2;
  define_kernels(here, 40, 1, &k1);
  define_kernels(rt, 40, 1, &k2);
  kc_code_info a, b;
  KCT_OK(here, kc_kernel_code(k1, &a));
  KCT_OK(rt, kc_kernel_code(k2, &b));
  assert_int_equal(kct_stats(here).backend_builds, 1); /* built here */
  assert_int_equal(kct_stats(rt).backend_builds, 13); /* built in a helper */
  assert_true(a.artifact_size > 0 && b.artifact_size > 0);
  check_kernels(here, ctx_here, 40, 1, &k1);
  check_kernels(rt, ctx, 40, 1, &k2);
  kct_destroy(here);
  destroy_and_check(rt);
}

/* auto, on PoCL with two compile threads: every build in a helper (the
 * link builds the binary here), at most one helper per thread. */
static void test_auto_uses_helpers(void **state) {
  (void)state;
  if (!on_pocl()) skip(); /* auto uses helpers on PoCL only */
  kc_context *ctx;
  kc_kernel *ks[6];
  kc_runtime *rt = helper_kernels("auto", NULL, NULL, &ctx, 50, 6, ks);
  prepare_in_helpers(rt, ctx, 50, 6, ks);
  assert_int_equal(kct_stats(rt).backend_builds, 12);
  destroy_and_check(rt);

  kc_options o; /* one compile thread (KC_OPENCL_HELPERS unset: auto): every build here */
  kc_options_init(&o);
  o.compile_threads = 1;
  rt = kct_runtime(&o);
  define_kernels(rt, 50, 2, ks);
  KCT_OK(rt, kc_prepare(ks, 2, NULL));
  pid_t kids[MAXKIDS];
  assert_int_equal(children(kids), 0);
  assert_int_equal(kct_stats(rt).backend_builds, 2);
  destroy_and_check(rt);
}

/* A build error: KC_ECOMPILE with the message and log of an in-process build. */
static void test_compile_error(void **state) {
  (void)state;
  static const char bad[] = "KC_KERNEL void bad(KC_GLOBAL float *y) { y[0] = undeclared_thing + ; }";
  char *msg[2];
  for (int i = 0; i < 2; i++) {
    kc_runtime *rt = helper_runtime(i ? "0" : "1", NULL, NULL);
    kct_define(rt, "bad", bad);
    kc_kernel *k = kct_kernel(rt, "bad", NULL);
    KCT_STATUS(rt, KC_ECOMPILE, kc_kernel_prepare(k, NULL));
    KCT_CONTAINS(kc_errmsg(rt), "OpenCL build of kernel 'bad' failed");
    KCT_CONTAINS(kc_errmsg(rt), "undeclared_thing");
    msg[i] = strdup(kc_errmsg(rt));
    pid_t kids[MAXKIDS];
    assert_int_equal(children(kids), i ? 0 : 1); /* the build ran in a helper, or here */
    KCT_STATUS(rt, KC_ECOMPILE, kc_kernel_prepare(k, NULL)); /* remembered: no second compile */
    assert_int_equal(kct_stats(rt).compiles, 0);
    assert_int_equal(kct_stats(rt).backend_builds, 1);
    kct_destroy(rt);
  }
  assert_string_equal(msg[0], msg[1]);
  free(msg[0]);
  free(msg[1]);
}

typedef struct prep {
  kc_kernel **ks;
  int n;
  kc_status st;
} prep;

static void *prepare_thread(void *arg) {
  prep *p = arg;
  p->st = kc_prepare(p->ks, (uint32_t)p->n, NULL);
  return NULL;
}

typedef struct logged {
  pthread_mutex_t lock;
  int lines;
  char last[512];
  kc_log_level last_level;
} logged;

static void log_cb(void *ud, kc_log_level level, const char *msg) {
  logged *l = ud;
  pthread_mutex_lock(&l->lock);
  if (strstr(msg, "compile helper")) {
    l->lines++;
    snprintf(l->last, sizeof l->last, "%s", msg);
    l->last_level = level;
  }
  pthread_mutex_unlock(&l->lock);
}

/* Helpers killed between builds and during them: replaced, the kernels work. */
static void test_killed_helpers(void **state) {
  (void)state;
  logged l = {PTHREAD_MUTEX_INITIALIZER, 0, ""};
  kc_context *ctx;
  kc_kernel *ks[10];
  kc_runtime *rt = helper_kernels("1", log_cb, &l, &ctx, 0, 10, ks);
  KCT_OK(rt, kc_prepare(ks, 2, ctx));
  pid_t kids[MAXKIDS];
  int n = children(kids);
  assert_true(n >= 1);
  for (int i = 0; i < n; i++) assert_int_equal(kill(kids[i], SIGKILL), 0); /* idle */
  KCT_OK(rt, kc_prepare(ks + 2, 2, ctx));

  /* during a batch: the helpers are stopped first, so that the batch's
   * builds are surely sent to them and unanswered when they are killed
   * (a fixed sleep alone let a fast machine finish the batch first) */
  pthread_mutex_lock(&l.lock);
  l.lines = 0, l.last[0] = 0;
  pthread_mutex_unlock(&l.lock);
  n = children(kids);
  assert_true(n >= 1); /* the helpers restarted above */
  for (int i = 0; i < n; i++) assert_int_equal(kill(kids[i], SIGSTOP), 0);
  prep p = {ks + 4, 6, KC_OK};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, prepare_thread, &p), 0);
  usleep(150 * 1000);
  for (int i = 0; i < n; i++) assert_int_equal(kill(kids[i], SIGKILL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  if (p.st) fail_msg("kc_prepare after the kill: %s: %s", kc_status_name(p.st), kc_errmsg(rt));
  /* the deaths were seen during builds, and each build was sent again */
  pthread_mutex_lock(&l.lock);
  assert_true(l.lines >= 1);
  KCT_CONTAINS(l.last, "died building kernel");
  pthread_mutex_unlock(&l.lock);
  check_kernels(rt, ctx, 0, 10, ks);
  assert_int_equal(kct_stats(rt).compiles, 10);
  destroy_and_check(rt);
}

/* A helper that stops answering is killed after $KC_OPENCL_HELPER_TIMEOUT
 * (read when the runtime is made, as every setting): KC_EBACKEND, not
 * remembered, and the next try builds in a new helper. The limit leaves
 * the first build, a helper's cold start, room under load. */
static void test_helper_timeout(void **state) {
  (void)state;
  setenv("KC_OPENCL_HELPER_TIMEOUT", "6", 1);
  kc_context *ctx;
  kc_kernel *ks[2];
  kc_runtime *rt = helper_kernels("1", NULL, NULL, &ctx, 0, 2, ks);
  unsetenv("KC_OPENCL_HELPER_TIMEOUT");
  KCT_OK(rt, kc_kernel_prepare(ks[0], ctx)); /* a helper is running */
  pid_t kids[MAXKIDS];
  int n = children(kids);
  assert_int_equal(n, 1);
  assert_int_equal(kill(kids[0], SIGSTOP), 0);
  KCT_STATUS(rt, KC_EBACKEND, kc_kernel_prepare(ks[1], ctx));
  KCT_CONTAINS(kc_errmsg(rt), "did not answer within 6 s");
  assert_int_equal(children(kids), 0); /* killed and reaped */
  KCT_OK(rt, kc_kernel_prepare(ks[1], ctx)); /* compiled again */
  check_kernels(rt, ctx, 0, 2, ks);
  destroy_and_check(rt);
}

/* A child of fork() does not reach its parent's helpers (its runtime
 * refuses), and the parent's helpers go on serving after the child is gone. */
static void test_fork_leaves_helpers(void **state) {
  (void)state;
  kc_context *ctx;
  kc_kernel *ks[3];
  kc_runtime *rt = helper_kernels("1", NULL, NULL, &ctx, 0, 3, ks);
  KCT_OK(rt, kc_kernel_prepare(ks[0], ctx));
  pid_t before[MAXKIDS], after[MAXKIDS];
  assert_int_equal(children(before), 1);
  kct_child c;
  if (kct_fork(&c, true)) {
    kc_status st = kc_kernel_prepare(ks[1], NULL);
    char why[256];
    snprintf(why, sizeof why, "%s", st == KC_EBUSY ? "" : kc_status_name(st));
    kct_child_send(&c, why, strlen(why));
    _exit(st == KC_EBUSY ? 0 : 1);
  }
  char why[256] = "";
  why[kct_child_wait(&c, why, sizeof why - 1, 60)] = 0;
  if (!WIFEXITED(c.status) || WEXITSTATUS(c.status))
    fail_msg("the child's compile gave %s, not KC_EBUSY", why);
  KCT_OK(rt, kc_prepare(ks + 1, 2, ctx));
  check_kernels(rt, ctx, 0, 3, ks);
  int n = children(after), same = 0;
  for (int i = 0; i < n; i++) same += after[i] == before[0];
  assert_int_equal(same, 1); /* the helper from before the fork still serves */
  destroy_and_check(rt);
}

/* A helper that cannot be run: every build in the process, one warning
 * (compiles that were to run in parallel no longer can), whether helpers
 * were asked for (1) or chosen (auto, on PoCL with two compile threads). */
static void test_missing_helper(void **state) {
  (void)state;
  char *keep = getenv("KC_OPENCL_HELPER") ? strdup(getenv("KC_OPENCL_HELPER")) : NULL;
  setenv("KC_OPENCL_HELPER", "/nonexistent/kcache-clc", 1);
  bool pocl = on_pocl();
  for (int m = 0; m < (pocl ? 2 : 1); m++) {
    logged l = {PTHREAD_MUTEX_INITIALIZER, 0, "", KC_LOG_DEBUG};
    kc_context *ctx;
    kc_kernel *ks[4];
    kc_runtime *rt = helper_kernels(m ? "auto" : "1", log_cb, &l, &ctx, 10 * m, 4, ks);
    KCT_OK(rt, kc_prepare(ks, 4, ctx));
    check_kernels(rt, ctx, 10 * m, 4, ks);
    assert_int_equal(l.lines, 1);
    KCT_CONTAINS(l.last, "/nonexistent/kcache-clc");
    KCT_CONTAINS(l.last, "one program at a time");
    assert_int_equal(l.last_level, KC_LOG_WARN);
    assert_int_equal(kct_stats(rt).backend_builds, 4); /* built here: the links reuse the programs */
    destroy_and_check(rt);
  }
  if (keep) setenv("KC_OPENCL_HELPER", keep, 1);
  else unsetenv("KC_OPENCL_HELPER");
  free(keep);
}

/* $POCL_KERNEL_CACHE=value, PoCL's cache off: PoCL then aborts a process
 * that launches a binary a helper built, so on PoCL no helper starts, even
 * when asked for (1): every build here, said once in the log. (This
 * process's PoCL started with its cache on, so the builds here are safe
 * either way: only what kcache chose is checked.) */
static void no_helpers_with_pocl_cache(const char *value) {
  setenv("POCL_KERNEL_CACHE", value, 1);
  logged l = {PTHREAD_MUTEX_INITIALIZER, 0, "", KC_LOG_DEBUG};
  kc_context *ctx;
  kc_kernel *ks[4];
  kc_runtime *rt = helper_kernels("1", log_cb, &l, &ctx, 50, 4, ks);
  unsetenv("POCL_KERNEL_CACHE"); /* read when the runtime was made */
  KCT_OK(rt, kc_prepare(ks, 4, ctx));
  pid_t kids[MAXKIDS];
  assert_int_equal(children(kids), 0);
  check_kernels(rt, ctx, 50, 4, ks);
  assert_int_equal(l.lines, 1);
  char said[64];
  snprintf(said, sizeof said, "$POCL_KERNEL_CACHE=\"%s\"", value);
  KCT_CONTAINS(l.last, said);
  assert_int_equal(l.last_level, KC_LOG_WARN);
  assert_int_equal(kct_stats(rt).backend_builds, 4); /* built here */
  destroy_and_check(rt);
}

/* PoCL reads its setting so: set and not starting with 1 is off. */
static void test_no_helpers_without_pocl_cache(void **state) {
  (void)state;
  if (!on_pocl()) skip();
  no_helpers_with_pocl_cache("0");
  no_helpers_with_pocl_cache("off");
}

/* No $KC_OPENCL_HELPER: the library finds the helper beside itself, as in
 * a build tree (CTest names the helper it built, so that this test knows
 * which file the helpers must run; it skips where the library is not in
 * the helper's folder, as when the tests run against an installed copy). */
static void test_helper_found_beside_the_library(void **state) {
  (void)state;
  const char *named = getenv("KC_OPENCL_HELPER");
  if (!named) skip();
  char helper[4096], lib[4096];
  assert_non_null(realpath(named, helper));
  Dl_info di;
  assert_true(dladdr((void *)kc_runtime_create, &di) && di.dli_fname);
  assert_non_null(realpath(di.dli_fname, lib));
  size_t dir = (size_t)(strrchr(helper, '/') - helper);
  if (strncmp(lib, helper, dir + 1) || strchr(lib + dir + 1, '/')) {
    print_message("SKIPPED: the library (%s) is not in the helper's folder\n", lib);
    skip();
  }
  char *keep = strdup(named);
  unsetenv("KC_OPENCL_HELPER");
  logged l = {PTHREAD_MUTEX_INITIALIZER, 0, "", KC_LOG_DEBUG};
  kc_context *ctx;
  kc_kernel *ks[3];
  kc_runtime *rt = helper_kernels("1", log_cb, &l, &ctx, 20, 3, ks);
  KCT_OK(rt, kc_prepare(ks, 3, ctx));
  pid_t kids[MAXKIDS];
  int n = children(kids);
  assert_true(n >= 1);
  for (int i = 0; i < n; i++) {
    char exe[64], target[4096];
    snprintf(exe, sizeof exe, "/proc/%ld/exe", (long)kids[i]);
    assert_non_null(realpath(exe, target));
    assert_string_equal(target, helper);
  }
  assert_int_equal(l.lines, 0); /* no fallback */
  check_kernels(rt, ctx, 20, 3, ks);
  destroy_and_check(rt);
  setenv("KC_OPENCL_HELPER", keep, 1);
  free(keep);
}

/* ------------------------------------------------ the helper's protocol */

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* One frame (src/backends/opencl/wire.c): magic, type 1 (SETUP), n fields. */
static size_t setup_frame(unsigned char *out, uint32_t magic, const char *const *f, const size_t *len,
                          int n) {
  size_t at = 20, total = 0;
  for (int i = 0; i < n; i++) {
    put_le(out + at, len[i], 8);
    memcpy(out + at + 8, f[i], len[i]);
    at += 8 + len[i];
    total += 8 + len[i];
  }
  put_le(out, magic, 4);
  put_le(out + 4, 1, 4);
  put_le(out + 8, (uint64_t)n, 4);
  put_le(out + 12, total, 8);
  return at;
}

/* Starts the helper on one end of a socket pair, sends frame, and reads
 * what comes back until the helper closes it (into reply); the helper's
 * exit status. */
static int helper_exchange(const unsigned char *frame, size_t n, unsigned char *reply, size_t cap,
                           size_t *got) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(sv[1], 0);
    close(sv[0]);
    close(sv[1]);
    execl(getenv("KC_OPENCL_HELPER"), "kcache-clc", (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  struct timeval tv = {10, 0}; /* a helper that neither answers nor exits: killed, and the test fails */
  setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t w = write(sv[0], frame, n), r = 0;
  *got = 0;
  while (w == (ssize_t)n && *got < cap && (r = read(sv[0], reply + *got, cap - *got)) > 0) *got += (size_t)r;
  /* the end: EOF, or a reset (a helper that exits with our frame unread) */
  bool timed_out = w != (ssize_t)n || (r < 0 && errno != ECONNRESET);
  close(sv[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid); /* reaped before any assertion can leave */
  if (timed_out) fail_msg("the helper neither answered nor exited within 10 s");
  return status;
}

/* SETUP with the indices as text (the old form): refused with a HELLO
 * that says why, never read as platform 0; a frame of the old protocol
 * (magic KCL1): the helper exits without answering. */
static void test_malformed_setup(void **state) {
  (void)state;
  const char *f[5] = {"some compiler", "", "1", "0", KC_VERSION_STRING};
  size_t len[5] = {13, 0, 1, 1, strlen(KC_VERSION_STRING)};
  unsigned char frame[512], reply[2048];
  size_t n = setup_frame(frame, 0x324C434Bu /* KCL2 */, f, len, 5), got;
  int status = helper_exchange(frame, n, reply, sizeof reply - 1, &got);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  /* HELLO: header (20), status field (8 + 4), message field (8 + text) */
  assert_true(got > 40);
  assert_int_equal(reply[4], 2); /* OCL_MSG_HELLO */
  assert_int_equal(reply[28], KC_EINVAL);
  reply[got] = 0;
  KCT_CONTAINS((const char *)reply + 40, "platform and device indices are not 4 bytes each");
  n = setup_frame(frame, 0x314C434Bu /* KCL1 */, f, len, 5);
  status = helper_exchange(frame, n, reply, sizeof reply - 1, &got);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  assert_int_equal(got, 0);
}

int main(int argc, char **argv) {
  /* before PoCL starts, here and in the helpers (test_auto_uses_helpers
   * compares a binary built here with one built in a helper) */
  char pocl[4096];
  if (!kct_pocl_private(pocl, sizeof pocl, false)) return 1;
  int rc = kct_main_only(argc, argv, KC_BACKEND_OPENCL, "OpenCL");
  if (rc >= 0) {
    kct_rmrf(pocl);
    return rc;
  }
  if (!getenv("KC_OPENCL_HELPER")) {
    fprintf(stderr, "test_clhelp: set KC_OPENCL_HELPER to the kcache-clc of this build (CTest does)\n");
    kct_rmrf(pocl);
    return 2;
  }
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_prepare_through_helpers), KCT_TEST(test_auto_uses_helpers),
      KCT_TEST(test_compile_error),           KCT_TEST(test_killed_helpers),
      KCT_TEST(test_helper_timeout),          KCT_TEST(test_fork_leaves_helpers),
      KCT_TEST(test_missing_helper),          KCT_TEST(test_no_helpers_without_pocl_cache),
      KCT_TEST(test_malformed_setup),         KCT_TEST(test_helper_found_beside_the_library),
  };
  rc = KCT_RUN(tests);
  kct_rmrf(pocl);
  return rc;
}
