/* SPDX-License-Identifier: MIT */
/*
 * test_compiler_faults.c -- compilers that misbehave, beyond what
 * tests/scenario/test_errors.c covers (a compiler that fails, a silent one that
 * crashes, one that hangs). Here the host compiler is a wrapper around the
 * real one that misbehaves only when the translation unit carries a marker,
 * so every case ends with the user fixing the definition (dropping the
 * marker) and the next launch working:
 *
 *   crash      the compiler writes to stderr and dies of SIGSEGV
 *   hang       it never ends: bounded by kc_options.compile_timeout_ms
 *   orphan     it hangs in a child of its own, as gcc's cc1 would
 *   garbage    exit 0 with text instead of an object (and a log)
 *   random     exit 0 with random bytes, silently
 *   nothing    exit 0 without writing the object
 *   truncated  a real object cut short
 *   no entry   a valid relocatable object without kcache's trampoline
 *   flood      a megabyte of log, then failure
 *
 * Every case: an error status with a message that carries the compiler's
 * log, no crash, nothing written to the disk cache; then the fixed
 * definition compiles, runs right, and is the store's only entry.
 * With --backend opencl: a build failure in PoCL, then the fix, with the
 * disk cache on.
 */
#include "rel.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 8

static const char SRC_K[] =
    "KC_KERNEL void k(KC_GLOBAL int *y) { size_t i = kc_global_id(0); y[i] = h((int)i); }";
static const char SRC_H_FIXED[] = "KC_DEVICE int h(int x) { return 7 * x + 3; }";

static char wrapper_dir[512];
static char wrapper[600];

static void write_wrapper(void) {
  rel_mkdtemp(wrapper_dir, sizeof wrapper_dir, "cc");
  snprintf(wrapper, sizeof wrapper, "%s/fault-cc", wrapper_dir);
  kct_write_script(
      wrapper,
      "#!/bin/sh\n"
      "# a C compiler that misbehaves when the source asks it to\n"
      "real='%s'\n"
      "dir='%s'\n"
      "src= out= prev=\n"
      "for a in \"$@\"; do\n"
      "  case $a in *.c) src=$a ;; esac\n"
      "  [ \"$prev\" = -o ] && out=$a\n"
      "  prev=$a\n"
      "done\n"
      "has() { [ -n \"$src\" ] && grep -q \"$1\" \"$src\"; }\n"
      "if has KC_FAULT_CRASH; then echo 'fault-cc: about to crash' >&2; kill -SEGV $$; fi\n"
      "if has KC_FAULT_HANG; then echo $$ >\"$dir/hang.pid\"; echo 'fault-cc: hanging' >&2; exec sleep "
      "60; fi\n"
      "if has KC_FAULT_ORPHAN; then sleep 60 & echo $! >\"$dir/orphan.pid\"; wait; exit 0; fi\n"
      "if has KC_FAULT_GARBAGE; then echo 'fault-cc: wrote garbage' >&2; echo 'not an ELF file' "
      ">\"$out\"; exit 0; fi\n"
      "if has KC_FAULT_RANDOM; then head -c 4096 /dev/urandom >\"$out\"; exit 0; fi\n"
      "if has KC_FAULT_NOTHING; then exit 0; fi\n"
      "if has KC_FAULT_TRUNCATED; then $real \"$@\" || exit $?; head -c 700 \"$out\" >\"$out.cut\"; mv "
      "\"$out.cut\" \"$out\"; exit 0; fi\n"
      "if has KC_FAULT_NO_ENTRY; then echo 'int kc_fault_nothing;' >\"$out.c\"; $real -c -fPIC -o "
      "\"$out\" \"$out.c\"; rc=$?; rm -f \"$out.c\"; exit $rc; fi\n"
      "if has KC_FAULT_FLOOD; then yes 'fault-cc: noise noise noise noise' | head -c 1048576 >&2; exit "
      "1; fi\n"
      "if has KC_FAULT_TORRENT; then yes 'fault-cc: torrent' | head -c 67108864 >&2; exit 1; fi\n"
      "if has KC_FAULT_FIFO; then rm -f \"$out\"; mkfifo \"$out\"; exit 0; fi\n"
      "if has KC_FAULT_HUGE; then rm -f \"$out\"; truncate -s 8G \"$out\" || { echo 'fault-cc: no sparse "
      "file of 8 GiB here' >&2; exit 1; }; exit 0; fi\n"
      "exec $real \"$@\"\n",
      rel_cc(), wrapper_dir);
}

static bool alive(const char *pidfile) {
  FILE *f = fopen(pidfile, "r");
  if (!f) return false;
  long pid = 0;
  bool ok = fscanf(f, "%ld", &pid) == 1;
  fclose(f);
  if (!ok || pid <= 0 || kill((pid_t)pid, 0) != 0) return false;
  /* a killed process whose parent died too stays a zombie until init reaps
   * it: that is not running */
  char path[64], stat[256] = "";
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *st = fopen(path, "r");
  if (!st) return false;
  bool got = fgets(stat, sizeof stat, st) != NULL;
  fclose(st);
  const char *paren = got ? strrchr(stat, ')') : NULL;
  return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

static void kill_pidfile(const char *pidfile) {
  FILE *f = fopen(pidfile, "r");
  if (!f) return;
  long pid = 0;
  if (fscanf(f, "%ld", &pid) == 1 && pid > 0) kill((pid_t)pid, SIGKILL);
  fclose(f);
  unlink(pidfile);
}

typedef struct fault_case {
  const char *marker;
  kc_status want; /* KC_OK: any error */
  const char *in_msg; /* the log or the reason, in kc_errmsg */
  uint32_t timeout_ms; /* 0: the default */
  double min_s, max_s; /* bounds on the failing launch's time (0: none) */
} fault_case;

#define CASE_FAIL(...) \
  do { \
    snprintf(why, whylen, __VA_ARGS__); \
    goto out; \
  } while (0)

/* h carries the marker; k fails; h fixed; k runs; the store holds only
 * that. No cmocka here (it runs in a child): false with why. */
static bool case_body(const fault_case *c, const char *store, char *why, size_t whylen) {
  bool ok = false;
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = KC_BACKEND_HOST;
  opt.host_cc = wrapper;
  opt.cache_dir = store;
  opt.compile_timeout_ms = c->timeout_ms;
  kc_runtime *rt = NULL;
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  kc_status st = kc_runtime_create(&opt, &rt);
  if (st) CASE_FAIL("kc_runtime_create: %s", kc_errmsg(NULL));
  char src[256];
  snprintf(src, sizeof src, "KC_DEVICE int h(int x) { return 7 * x + 3; } /* %s */", c->marker);
  if ((st = kc_context_create(rt, 0, &ctx)) || (st = kc_buffer_create(ctx, N * sizeof(int32_t), &b)) ||
      (st = kc_define(rt, "h", src, NULL)) || (st = kc_define(rt, "k", SRC_K, NULL)) ||
      (st = kc_kernel_create(rt, "k", NULL, &k)))
    CASE_FAIL("setting up: %s: %s", kc_status_name(st), kc_errmsg(rt));
  int32_t out[N];
  double t0 = rel_now();
  st = rel_run(k, ctx, b, N, out);
  double took = rel_now() - t0;
  const char *msg = kc_errmsg(rt);
  if (st == KC_OK) CASE_FAIL("the launch succeeded");
  if (c->want != KC_OK && st != c->want)
    CASE_FAIL("%s, expected %s: %s", kc_status_name(st), kc_status_name(c->want), msg);
  if (!strstr(msg, "'k'")) CASE_FAIL("the message does not name the kernel: %s", msg);
  if (c->in_msg && !strstr(msg, c->in_msg)) CASE_FAIL("expected \"%s\" in: %s", c->in_msg, msg);
  if (c->max_s && took > c->max_s) CASE_FAIL("the failing launch took %.2f s (at most %.2f)", took, c->max_s);
  if (c->min_s && took < c->min_s)
    CASE_FAIL("the failing launch took only %.3f s (at least %.2f)", took, c->min_s);
  kc_stats s;
  kc_stats_get(rt, &s);
  if (s.compiles || s.compile_failures != 1 || s.disk_writes)
    CASE_FAIL("after the failure: %llu compiles, %llu failures, %llu disk writes",
              (unsigned long long)s.compiles, (unsigned long long)s.compile_failures,
              (unsigned long long)s.disk_writes);
  rel_store_check chk;
  rel_store_check_dir(store, &chk);
  if (chk.entries || chk.temps || chk.locks) CASE_FAIL("the store is not empty: %s", chk.first_problem);

  if ((st = kc_define(rt, "h", SRC_H_FIXED, NULL))) CASE_FAIL("kc_define: %s", kc_errmsg(rt));
  if ((st = rel_run(k, ctx, b, N, out)))
    CASE_FAIL("the fixed definition: %s: %s", kc_status_name(st), kc_errmsg(rt));
  for (int i = 0; i < N; i++)
    if (out[i] != 7 * i + 3) CASE_FAIL("the fixed definition: element %d is %d", i, out[i]);
  kc_stats_get(rt, &s);
  if (s.compiles != 1 || s.disk_writes != 1)
    CASE_FAIL("after the fix: %llu compiles, %llu disk writes", (unsigned long long)s.compiles,
              (unsigned long long)s.disk_writes);
  kc_runtime_destroy(rt);
  rt = NULL;
  rel_store_check_dir(store, &chk);
  if (chk.entries != 1 || chk.damaged || chk.temps || chk.locks)
    CASE_FAIL("after the fix the store holds %zu entries: %s", chk.entries, chk.first_problem);
  ok = true;
out:
  kc_runtime_destroy(rt);
  return ok;
}

/* LeakSanitizer's check, when it is linked in: nonzero if something leaked. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* Library bugs that these cases found and that are not fixed yet: such a case prints KNOWN and passes,
 * unless KC_TEST_STRICT=1. Delete the line with the fix. */
static const struct {
  const char *marker, *text, *bug;
} known_bugs[] = {
    /* none at the moment: bugs 3, 4 and 5 were fixed (explain_failure keeps
     * the reason, host.c checks objects before dlopen and kills the
     * compiler's process group) */
    {NULL, NULL, NULL},
};

static void known_or_fail(const fault_case *c, const char *what) {
  if (!rel_env_u64("KC_TEST_STRICT", 0))
    for (size_t i = 0; i < sizeof known_bugs / sizeof *known_bugs; i++)
      if (known_bugs[i].marker && !strcmp(c->marker, known_bugs[i].marker) &&
          strstr(what, known_bugs[i].text)) {
        print_message("KNOWN (%s): %s: %s\n", known_bugs[i].bug, c->marker, what);
        rel_summary("compiler faults: known library bug still seen: %s", known_bugs[i].bug);
        return;
      }
  fail_msg("%s: %s", c->marker, what);
}

/* Runs the case in a child process: a compiler's output that kills the
 * process loading it must show up as a failure, not end the test run. */
static void run_case(const fault_case *c) {
  char store[512];
  rel_mkdtemp(store, sizeof store, "ccstore");
  kct_child child;
  if (kct_fork(&child, true)) { /* cloexec: the pipe is not inherited by the compilers */
    /* cmocka catches these to go on with the next test: here they must kill */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
    char why[1024] = "";
    int code = case_body(c, store, why, sizeof why) ? 0 : 1;
    if (!code && __lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check()) {
      snprintf(why, sizeof why, "memory leaked (LeakSanitizer's report is above)");
      code = 1;
    }
    if (!kct_child_send(&child, why, strlen(why))) code = 2;
    _exit(code);
  }
  char why[1024] = "";
  why[kct_child_wait(&child, why, sizeof why - 1, 0)] = 0;
  int status = child.status;
  rel_rmrf(store);
  char what[1200];
  if (WIFSIGNALED(status)) {
    snprintf(what, sizeof what, "the process died of signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
    known_or_fail(c, what);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    known_or_fail(c, why[0] ? why : "the child failed");
  }
}

/* A test of one case on the host backend (run_case). */
#define HOST_CASE(name, ...) \
  static void name(void **state) { \
    (void)state; \
    kct_host_only(); \
    run_case(&(fault_case){__VA_ARGS__}); \
  }

/* the compiler's last words, and that it crashed */
HOST_CASE(test_crash_with_log, "KC_FAULT_CRASH", KC_EBACKEND, "fault-cc: about to crash", 0)

HOST_CASE(test_crash_reason_survives_the_log, "KC_FAULT_CRASH", KC_EBACKEND, "crashed", 0)

static void test_hang_bounded_by_the_user_timeout(void **state) {
  (void)state;
  kct_host_only();
  char pidfile[700];
  snprintf(pidfile, sizeof pidfile, "%s/hang.pid", wrapper_dir);
  run_case(&(fault_case){"KC_FAULT_HANG", KC_EBACKEND, "fault-cc: hanging", 1000, 0.95, 10.0});
  if (alive(pidfile)) {
    kill_pidfile(pidfile);
    fail_msg("the hanging compiler still runs after the timeout");
  }
  unlink(pidfile);
}

static void test_hang_reason_survives_the_log(void **state) {
  (void)state;
  kct_host_only();
  char pidfile[700];
  snprintf(pidfile, sizeof pidfile, "%s/hang.pid", wrapper_dir);
  run_case(&(fault_case){"KC_FAULT_HANG", KC_EBACKEND, "1000 ms", 1000});
  kill_pidfile(pidfile);
}

/* gcc runs cc1, as and ld as children: a hang is in one of them, and
 * killing the driver alone leaves it running. */
static void test_hang_in_a_child_of_the_compiler(void **state) {
  (void)state;
  kct_host_only();
  char pidfile[700];
  snprintf(pidfile, sizeof pidfile, "%s/orphan.pid", wrapper_dir);
  run_case(&(fault_case){"KC_FAULT_ORPHAN", KC_EBACKEND, "1000 ms", 1000, 0.95, 10.0});
  usleep(100000);
  bool left = alive(pidfile);
  kill_pidfile(pidfile);
  if (left)
    known_or_fail(&(fault_case){"KC_FAULT_ORPHAN"},
                  "the compiler's child still runs after the timeout killed the compiler");
}

HOST_CASE(test_garbage_with_log, "KC_FAULT_GARBAGE", KC_ECOMPILE, "fault-cc: wrote garbage", 0)

HOST_CASE(test_garbage_reason_survives_the_log, "KC_FAULT_GARBAGE", KC_ECOMPILE,
          "produced an unusable object", 0)

HOST_CASE(test_random_bytes, "KC_FAULT_RANDOM", KC_ECOMPILE, "produced an unusable object", 0)

HOST_CASE(test_no_object, "KC_FAULT_NOTHING", KC_OK, ".o", 0)

HOST_CASE(test_truncated_object, "KC_FAULT_TRUNCATED", KC_ECOMPILE, "produced an unusable object: truncated",
          0)

HOST_CASE(test_object_without_entry, "KC_FAULT_NO_ENTRY", KC_ECOMPILE, "trampoline", 0)

HOST_CASE(test_log_flood, "KC_FAULT_FLOOD", KC_ECOMPILE, "fault-cc: noise", 0)

/* 64 MiB of log: the first MiB is kept, the rest cut (before, the whole
 * log was read into memory and into the message) */
HOST_CASE(test_log_torrent, "KC_FAULT_TORRENT", KC_ECOMPILE, "[... the rest cut]", 0, 0, 30.0)

/* a FIFO where the object should be: refused at once (before, the read
 * blocked for good); an 8 GiB sparse object: refused by its size, unread */
HOST_CASE(test_object_is_a_fifo, "KC_FAULT_FIFO", KC_EIO, "is not a regular file", 0, 0, 30.0)

HOST_CASE(test_object_is_huge, "KC_FAULT_HUGE", KC_EIO, "is larger than", 0, 0, 30.0)

/* OpenCL (PoCL here): a build failure with the compiler's log, then the fix,
 * with the disk cache on: nothing of the failure reaches the disk. */
static void test_opencl_build_failure_then_fix(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_OPENCL && kct_backend != KC_BACKEND_CUDA) {
    print_message("OpenCL and CUDA only\n");
    skip();
  }
  char store[512];
  rel_mkdtemp(store, sizeof store, "clstore");
  kc_options opt;
  kc_options_init(&opt);
  opt.cache_dir = store;
  kc_runtime *rt = kct_runtime(&opt);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = NULL;
  KCT_OK(rt, kc_buffer_create(ctx, N * sizeof(int32_t), &b));
  kct_define(rt, "h", "KC_DEVICE int h(int x) {\n  return 7 * x + ;\n}\n");
  kct_define(rt, "k", SRC_K);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  int32_t out[N];
  KCT_STATUS(rt, KC_ECOMPILE, rel_run(k, ctx, b, N, out));
  KCT_CONTAINS(kc_errmsg(rt), kct_backend == KC_BACKEND_CUDA ? "h(2)" : "h:2:");
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compile_failures, 1);
  assert_int_equal(s.disk_writes, 0);
  kct_define(rt, "h", SRC_H_FIXED);
  KCT_OK(rt, rel_run(k, ctx, b, N, out));
  for (int i = 0; i < N; i++)
    if (out[i] != 7 * i + 3) fail_msg("fixed: element %d is %d", i, out[i]);
  assert_int_equal(kct_stats(rt).disk_writes, 1);
  kct_destroy(rt);
  rel_store_check chk;
  rel_store_check_dir(store, &chk);
  if (chk.entries != 1 || chk.damaged || chk.temps || chk.locks)
    fail_msg("the store holds %zu entries: %s", chk.entries, chk.first_problem);
  rel_rmrf(store);
}

static int setup(void **state) {
  (void)state;
  if (kct_backend == KC_BACKEND_HOST) write_wrapper();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (wrapper_dir[0]) rel_rmrf(wrapper_dir);
  return 0;
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_CACHE_DISABLE"); /* every case checks what reaches the disk cache */
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_crash_with_log),
      KCT_TEST(test_crash_reason_survives_the_log),
      KCT_TEST(test_hang_bounded_by_the_user_timeout),
      KCT_TEST(test_hang_reason_survives_the_log),
      KCT_TEST(test_hang_in_a_child_of_the_compiler),
      KCT_TEST(test_garbage_with_log),
      KCT_TEST(test_garbage_reason_survives_the_log),
      KCT_TEST(test_random_bytes),
      KCT_TEST(test_no_object),
      KCT_TEST(test_truncated_object),
      KCT_TEST(test_object_without_entry),
      KCT_TEST(test_log_flood),
      KCT_TEST(test_log_torrent),
      KCT_TEST(test_object_is_a_fifo),
      KCT_TEST(test_object_is_huge),
      KCT_TEST(test_opencl_build_failure_then_fix),
  };
  return cmocka_run_group_tests_name(kct_group_name("compiler faults"), tests, setup, teardown);
}
