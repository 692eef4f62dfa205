/* SPDX-License-Identifier: MIT */
/*
 * kc_test.h -- the tests' support library (tests/support/), what the kcache
 * test executables share: choosing the backend (from `--backend KIND` or
 * $KC_TEST_BACKEND), skipping when it cannot run here, creating runtimes and
 * contexts on it, checking statuses with the library's message, statistics
 * deltas, launching the one-buffer kernels most tests use, the scenario
 * fixture, the interop suites' kernel and configuration (kc_test.c);
 * capturing a command's output, forked children, a test's private
 * directory (proc.c); taking every memory mapping (maps.c).
 *
 * cmocka's assertions longjmp into the test: call them from the test's own
 * thread only. Worker threads record what they saw and the test checks it
 * after joining them.
 */
#ifndef KC_TEST_H
#define KC_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "kcache.h"

#define KCT_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* The backend the executable tests, set by kct_main_init. */
extern kc_backend_kind kct_backend;
extern const char *kct_backend_name;

/* Parses `--backend host|opencl|cuda` (or $KC_TEST_BACKEND; default host).
 * Returns -1 to go on, or the exit code main must return at once: 77 when the
 * backend is not available here (after printing "SKIPPED: ..." with the
 * reason), 2 on a usage error. */
int kct_main_init(int argc, char **argv);

/* main()'s start for a suite of one backend's: kct_main_init, then 77
 * ("SKIPPED: <name> backend only") unless the tested backend is be, then
 * kct_memory_only. Returns -1 to go on, or the exit code main must return. */
int kct_main_only(int argc, char **argv, kc_backend_kind be, const char *name);

/* Turns the persistent artifact store off for this process (through
 * $KC_CACHE_DISABLE: options win over variables, but cache_disable is a
 * flag, and a flag option that is off leaves the variable's value, so no
 * option turns the store back on): the counters the scenario
 * suites check (compiles, links) are about one process, and entries left
 * by an earlier run would turn compiles into disk hits. */
void kct_memory_only(void);

/* main()'s start for a suite whose tests share one runtime on the tested
 * backend and that needs something this machine may lack: kct_main_init,
 * kct_memory_only, then, if unavailable (may be NULL) says why `what`
 * cannot be used, "SKIPPED: <what> unavailable: <why>" and 77; then the
 * runtime into *rt (kct_main_runtime), 1 if it cannot be made. Returns -1
 * to go on (main destroys *rt), or the exit code main must return. */
int kct_main_shared(int argc, char **argv, const char *what, const char *(*unavailable)(void),
                    kc_runtime **rt);

/* Skips the test ("host backend only") unless the tested backend is the
 * host's. */
void kct_host_only(void);

/* Runs a cmocka group under a name that says the backend. */
#define KCT_RUN(tests) cmocka_run_group_tests_name(kct_group_name(#tests), tests, NULL, NULL)

/* The whole main() of a suite whose tests need nothing more of it than
 * kct_main_init and kct_memory_only: KCT_MAIN(KCT_TEST(a), KCT_FX_TEST(b),
 * ...) runs the tests given as one group (KCT_RUN). KCT_MAIN_INIT_ONLY is
 * the same without kct_memory_only (the disk cache as the environment
 * says). */
#define KCT_MAIN_(memory_only, ...) \
  int main(int argc, char **argv) { \
    const struct CMUnitTest tests[] = {__VA_ARGS__}; \
    int rc = kct_main_init(argc, argv); \
    if (rc >= 0) return rc; \
    if (memory_only) kct_memory_only(); \
    return KCT_RUN(tests); \
  }
#define KCT_MAIN(...) KCT_MAIN_(true, __VA_ARGS__)
#define KCT_MAIN_INIT_ONLY(...) KCT_MAIN_(false, __VA_ARGS__)
const char *kct_group_name(const char *what);

/* Fails the test unless expr returns KC_OK, printing the library's message. */
#define KCT_OK(rt, expr) \
  do { \
    kc_status kct_st_ = (expr); \
    if (kct_st_ != KC_OK) fail_msg("%s returned %s: %s", #expr, kc_status_name(kct_st_), kc_errmsg(rt)); \
  } while (0)

/* Fails the test unless expr returns `want`. */
#define KCT_STATUS(rt, want, expr) \
  do { \
    kc_status kct_st_ = (expr); \
    if (kct_st_ != (want)) \
      fail_msg("%s returned %s, expected %s (message: %s)", #expr, kc_status_name(kct_st_), \
               kc_status_name(want), kc_errmsg(rt)); \
  } while (0)

/* Fails the test unless haystack contains needle. */
#define KCT_CONTAINS(haystack, needle) \
  do { \
    const char *kct_h_ = (haystack), *kct_n_ = (needle); \
    if (!kct_h_ || !strstr(kct_h_, kct_n_)) \
      fail_msg("expected \"%s\" in: %s", kct_n_, kct_h_ ? kct_h_ : "(null)"); \
  } while (0)

/* A runtime on the tested backend (opt may be NULL; its backend is
 * overridden). Fails the test if it cannot be created. Runtimes are tracked:
 * kct_teardown destroys the ones a failed test left behind, so a failure
 * does not show up as leaks under ASan too. */
kc_runtime *kct_runtime(kc_options *opt);
/* A runtime on the tested backend for main() to share among its tests,
 * made before cmocka runs: NULL, with the library's message on stderr, if
 * it cannot be made. Not tracked: main destroys it. */
kc_runtime *kct_main_runtime(void);
/* Destroys a runtime made by kct_runtime. */
void kct_destroy(kc_runtime *rt);
/* calloc that kct_teardown frees if the test did not (kct_free). */
void *kct_calloc(size_t size);
void kct_free(void *p);
/* Sets the environment variable name to value (NULL: unsets it) for the
 * rest of the test: kct_teardown puts back what it was, also when the test
 * failed before it could. */
void kct_setenv(const char *name, const char *value);
/* Every test runs with this teardown: see KCT_TEST. */
int kct_teardown(void **state);
#define KCT_TEST(f) cmocka_unit_test_teardown(f, kct_teardown)
/* A context on device 0. */
kc_context *kct_context(kc_runtime *rt);
/* A buffer of n floats, zeroed. */
kc_buffer *kct_buffer(kc_runtime *rt, kc_context *ctx, uint32_t n);
kc_kernel *kct_kernel(kc_runtime *rt, const char *name, const char *params);
/* kc_define that must succeed; returns the new world. */
kc_world kct_define(kc_runtime *rt, const char *name, const char *source);

kc_stats kct_stats(kc_runtime *rt);

/* Launches k with the single buffer argument b on n work items (grid n,
 * block 1), waits, and reads out_bytes from the start of b into out (if
 * out). Returns the first failing status; never calls cmocka (worker
 * threads and forked children use it). */
kc_status kct_run_bytes(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, void *out, size_t out_bytes);
/* kct_run_bytes reading n floats back into out (if out); never fails the
 * test itself, so it can be used from worker threads. */
kc_status kct_run(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, float *out);
/* The same with bound arguments (kc_launch_args), whose buffer is b. */
kc_status kct_run_args(kc_args *a, kc_context *ctx, kc_buffer *b, uint32_t n, float *out);
/* kct_run that must succeed; returns out[0]. */
float kct_run_ok(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, float *out);

/* Information about the code instance k resolves to in the caller's world. */
kc_code_info kct_code(kc_runtime *rt, kc_kernel *k);

/* The scenario suites' fixture: a runtime on the tested backend, a context
 * and a zeroed buffer of KCT_FX_N floats, with room to read them back. */
#define KCT_FX_N 16
typedef struct kct_fixture {
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *buf;
  float out[KCT_FX_N];
} kct_fixture;
/* Zeroes f and makes its runtime, context and buffer (fails the test if not). */
void kct_fx_open(kct_fixture *f);
/* Destroys f's runtime (and with it the context and the buffer). */
void kct_fx_close(kct_fixture *f);
/* A test that starts from the fixture: KCT_FX_TEST(fn) opens one (in
 * *state; the test begins `kct_fixture *f = *state;`) and kct_teardown
 * destroys it with whatever else the test left, unless the test destroyed
 * the runtime itself. */
int kct_fx_setup(void **state);
#define KCT_FX_TEST(f) cmocka_unit_test_setup_teardown(f, kct_fx_setup, kct_teardown)
/* Defines callee and then kernel (kct_define) and returns a handle on
 * kernel without parameters: the program most scenarios start from. */
kc_kernel *kct_define_kernel(kc_runtime *rt, const char *callee, const char *callee_src, const char *kernel,
                             const char *kernel_src);
/* Fails the test unless out[i] == i * scale + add for every i < n. */
void kct_expect_linear(const float *out, uint32_t n, float scale, float add);

/* The interop suites (tests/interop/): their kernel add(x, y, b), y[g] =
 * x[g] + b, and a launch configuration of `groups` groups of `block` work
 * items in x on stream s (NULL: the context's own). */
extern const char kct_src_add[];
kc_launch_config kct_config(uint32_t groups, uint32_t block, kc_stream *s);

/* Every memory mapping the process has left, taken (maps.c), to test what
 * kcache does when the table is full (vm.max_map_count): one reservation
 * of 2 * limit pages, PROT_NONE, of which every other page is made
 * readable (two mappings each), then single pages. */
typedef struct kct_maps {
  char *base;
  size_t len, page;
  size_t taken; /* pages of the reservation made readable */
  void *singles[64];
  int nsingles;
} kct_maps;
/* The process's mapping limit (vm.max_map_count; 65,530 if unreadable).
 * Skips the test under sanitizers (their allocators map memory of their
 * own at any call, which a full table refuses) and when the limit is too
 * high to fill quickly (above 300,000). */
long kct_maps_limit(void);
/* Takes the reservation's pages until the kernel refuses (ENOMEM), which
 * must happen before the reservation runs out (kct_maps_limit's skips
 * first). */
void kct_maps_fill(kct_maps *m);
/* After kct_maps_fill: single pages too, until the kernel refuses them
 * (at most 64). */
void kct_maps_fill_singles(kct_maps *m);
/* Gives the last n taken pages back (fails the test unless more than n
 * were taken). */
void kct_maps_give_back(kct_maps *m, size_t n);
/* Unmaps everything kct_maps_fill took. */
void kct_maps_free(kct_maps *m);

/* What a worker thread saw (workers never call cmocka): how many failures,
 * and the first one's message. Zero-initialize it. */
typedef struct kct_report {
  int failed;
  char what[1024];
} kct_report;
/* Counts a failure; the first one's message is kept. Returns whether this
 * was the first. Never calls cmocka. */
bool kct_report_fail(kct_report *r, const char *fmt, ...) KCT_PRINTF(2, 3);
bool kct_report_vfail(kct_report *r, const char *fmt, va_list ap) KCT_PRINTF(2, 0);
/* Fails the test if r holds a failure: "<who>: N failure(s), the first: ...". */
void kct_report_check(const char *who, const kct_report *r);

/* Process helpers for the store, remote and reliability suites. None of
 * them calls cmocka except kct_mkdtemp. */

/* Whether prog is an executable file in one of $PATH's directories. */
bool kct_in_path(const char *prog);
/* The host compiler for tests: $KC_HOST_CC if set, else tcc when in $PATH
 * (fast compiles), else cc; chosen once per process (thread-safe). */
const char *kct_host_cc(void);
/* Makes a fresh directory $TMPDIR/kc-<tag>-XXXXXX (/tmp without $TMPDIR)
 * into out; fails the test (fail_msg) if it cannot: test thread only. */
void kct_mkdtemp(char *out, size_t len, const char *tag);
/* rm -rf path, making directories writable first; errors are ignored. */
void kct_rmrf(const char *path);
/* PoCL's own kernel cache in a fresh directory ($TMPDIR/kc-pocl-XXXXXX,
 * written to out), and off if cache_off, set in the environment before
 * PoCL starts (first thing in main): a PoCL binary fetched before any
 * launch carries what PoCL finds in its cache for the program, the
 * work-group functions of other processes' launches included, so tests
 * that compare or count binaries would see the suites beside them. (With
 * the cache off, PoCL names each build's directory at random and the
 * binary holds the name: two builds of one program differ.) Returns false
 * (and says why on stderr) if the directory cannot be made. kct_rmrf(out)
 * at the end. */
bool kct_pocl_private(char *out, size_t len, bool cache_off);
/* An OpenCL function of the ICD loader (libOpenCL.so.1, opened once, its
 * symbols kept to itself), for the tests that make OpenCL calls of their
 * own beside kcache's; NULL if the loader or the function is missing. */
void *kct_opencl_sym(const char *name);
/* Sets *fn (a pointer to a function pointer) to kct_opencl_sym(#name);
 * false if it is missing. */
#define KCT_OPENCL_SYM(fn, name) kct_opencl_sym_into((void *)(fn), sizeof *(fn), #name)
bool kct_opencl_sym_into(void *fn, size_t size, const char *name);
/* Seconds on the monotonic clock. */
double kct_now(void);

/* A test's private directory as a cmocka setup/teardown pair: the fixture
 * (fixture_size bytes, zeroed, in *state) starts with
 * `char root[KCT_DIR_LEN]`, made as kct_mkdtemp(tag) does; the teardown
 * removes it (kct_rmrf) and frees the fixture. */
#define KCT_DIR_LEN 512
int kct_dir_setup(void **state, size_t fixture_size, const char *tag);
int kct_dir_teardown(void **state);

/* Runs cmd with /bin/sh (popen) and returns its exit status, -1 when it did
 * not exit; if out, *out gets everything it wrote to the pipe (malloc'd,
 * NUL-terminated: the caller frees it). Fails the test if the command
 * cannot be started: test thread only. */
int kct_capture(const char *cmd, char **out);

/* Writes an executable script (mode 0755) at path, its text as printf
 * makes it from fmt; fails the test if it cannot. */
void kct_write_script(const char *path, const char *fmt, ...) KCT_PRINTF(2, 3);

/* Checks what a command said: KCT_SAYS(run, out, rc, want...) evaluates
 * run (a call that returns an exit status and sets out to its output, such
 * as a test's own wrapper of kct_capture), fails the test unless it
 * returned rc and out holds every want (a want that is NULL fails it too:
 * the list ends at kct_says_end, which the macro adds), and frees out
 * (NULL after), whether it passes or fails. */
#define KCT_SAYS(run, out, ...) kct_says(#run, (run), &(out), __VA_ARGS__, kct_says_end)
extern const char kct_says_end[];
void kct_says(const char *what, int got, char **out, int rc, ...);

/* A forked child with a pipe back to its parent: in the parent, pid and the
 * pipe's read end; in the child, pid 0 and the write end. After
 * kct_child_wait: the wait status, and whether the time ran out. */
typedef struct kct_child {
  pid_t pid;
  int fd;
  int status; /* waitpid's status (-1: there was no child to wait for) */
  bool timed_out; /* the child was killed (SIGKILL) when the time ran out */
} kct_child;
/* Flushes stdio, makes the pipe (O_CLOEXEC if cloexec: programs the child
 * runs do not hold it open) and forks. Returns true in the child, which
 * reports with kct_child_send and ends with _exit; false in the parent.
 * Fails the test if the pipe or the fork cannot be made. */
bool kct_fork(kct_child *c, bool cloexec);
/* In the child: writes len bytes to the parent; false if it could not. */
bool kct_child_send(const kct_child *c, const void *data, size_t len);
/* In the parent: reads what the child sends (up to len bytes into buf; the
 * rest is discarded) until it closes its end, closes ours, and waits for it
 * to exit. With timeout_s > 0, a child that has not finished by then is
 * killed (SIGKILL; c->timed_out). Returns the bytes read; c->status gets
 * the wait status. Never calls cmocka. */
size_t kct_child_wait(kct_child *c, void *buf, size_t len, double timeout_s);

/* A log sink (kc_options.log, log_ud = the kct_hold) that, once armed,
 * holds the thread whose compile just finished (its "compiled" line comes
 * before the code is published) until released: how a test acts between a
 * compile and its publishing. */
typedef struct kct_hold {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool armed, inside, release;
} kct_hold;
void kct_hold_init(kct_hold *h, bool armed);
void kct_hold_log(void *ud, kc_log_level level, const char *msg);
void kct_hold_arm(kct_hold *h);
void kct_hold_wait_inside(kct_hold *h); /* until a compile is held */
void kct_hold_release(kct_hold *h);
void kct_hold_destroy(kct_hold *h);

#endif /* KC_TEST_H */
