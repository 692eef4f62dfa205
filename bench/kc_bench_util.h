/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_util.h -- what the benchmarks share, so that their figures are
 * taken the same way and their set-ups are the same: the clock and the
 * median; dying on a failed call; the options of a runtime that measures
 * compiles, and a host runtime with fast compiles; an allocator that counts
 * what the runtime holds; timing a redefinition
 * (kc_bench, kc_bench_scale); and, for kc_bench_store, kc_bench_remote and kc_bench_fleet, the
 * typical kernel in a session of its own, runtimes on a disk store, temporary
 * directories and child processes; and a redis-server of a benchmark's own
 * on a loopback port (kc_bench_fleet).
 *
 * Header-only: static inline functions. A program defines KCB_PROG, its name
 * in messages, before it includes this header.
 */
#ifndef KC_BENCH_UTIL_H
#define KC_BENCH_UTIL_H

#ifndef KCB_PROG
#error "define KCB_PROG (the program's name, for messages) before including kc_bench_util.h"
#endif

#include <kcache.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------ the clock, the median */

/* Monotonic time in nanoseconds. */
static inline double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int kcb_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v in place); the mean of the middle two for
 * an even n. */
static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kcb_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---------------------------------------------------------------- memory */

/* Bytes the runtime holds through kcb_sized_alloc (kc_options.alloc): a
 * size header per block, so it is what kcache asks for, not what malloc
 * rounds it to. */
static inline _Atomic long long *kcb_live_bytes(void) {
  static _Atomic long long live;
  return &live;
}

static inline void *kcb_sized_alloc(void *ud, void *p, size_t n) {
  (void)ud;
  size_t old = 0;
  unsigned char *b = p ? (unsigned char *)p - 16 : NULL;
  if (b) memcpy(&old, b, sizeof old);
  if (n == 0) {
    *kcb_live_bytes() -= (long long)old;
    free(b);
    return NULL;
  }
  unsigned char *q = realloc(b, n + 16);
  if (!q) return NULL;
  memcpy(q, &n, sizeof n);
  *kcb_live_bytes() += (long long)n - (long long)old;
  return q + 16;
}

/* ------------------------------------------------------------ failed calls */

/* The runtime whose message kcb_die prints (kcb_main_runtime sets it).
 * NULL: the calling thread's message for a failure that had no runtime
 * (kc_runtime_create's, say). */
static kc_runtime *kcb_rt;

/* "KCB_PROG: WHAT failed (STATUS): kc_errmsg(kcb_rt)" on stderr, and exit
 * status 1. status: a kc_status, or the error code of a backend's own call. */
_Noreturn static inline void kcb_die(const char *what, int status) {
  fprintf(stderr, "%s: %s failed (%d): %s\n", KCB_PROG, what, status, kc_errmsg(kcb_rt));
  exit(1);
}

/* Dies unless call (a kcache call, or a backend call that returns 0 for
 * success) returns 0. */
#define KCB_CHECK(call) \
  do { \
    int kcb_st_ = (int)(call); \
    if (kcb_st_) kcb_die(#call, kcb_st_); \
  } while (0)

/* ---------------------------------------------------------------- runtimes */

/* Exits with 77 (CTest's "skipped") after a line that says why when the
 * backend cannot be used on this machine. */
static inline void kcb_require_backend(kc_backend_kind backend) {
  const char *why;
  if (!kc_backend_available(backend, &why)) {
    printf("%s: skipped: %s\n", KCB_PROG, why);
    exit(77);
  }
}

/* Options for a runtime that measures compiles, not the disk cache. */
static inline void kcb_options_uncached(kc_options *o, kc_backend_kind backend) {
  kc_options_init(o);
  o->cache_disable = 1;
  o->backend = backend;
}

/* Creates the program's runtime with the options o, as kcb_rt (so that
 * kcb_die prints its messages), and a context on its first device; dies if
 * either fails. Returns the runtime. */
static inline kc_runtime *kcb_main_runtime(const kc_options *o, kc_context **ctx) {
  KCB_CHECK(kc_runtime_create(o, &kcb_rt));
  KCB_CHECK(kc_context_create(kcb_rt, 0, ctx));
  return kcb_rt;
}

/* A runtime on the host backend without a disk cache whose compiles are
 * fast, for measuring the core as its cache fills: tcc where
 * /usr/bin/tcc is installed, else the default compiler. Dies if it cannot
 * be made; kcb_rt stays as it was. */
static inline kc_runtime *kcb_host_runtime_fast(void) {
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  o.host_cc = access("/usr/bin/tcc", X_OK) == 0 ? "tcc" : NULL;
  kc_runtime *r;
  KCB_CHECK(kc_runtime_create(&o, &r));
  return r;
}

/* Options for a runtime of the backend (and, for the host backend, the
 * compiler cc; NULL: the default) with its disk store in dir. */
static inline void kcb_options_store(kc_options *o, kc_backend_kind backend, const char *cc,
                                     const char *dir) {
  kc_options_init(o);
  o->backend = backend;
  o->host_cc = cc;
  o->cache_dir = dir;
}

/* A runtime with the options o; NULL after a line on stderr that says why
 * (label: the backend measured). */
static inline kc_runtime *kcb_runtime(const kc_options *o, const char *label) {
  kc_runtime *rt = NULL;
  kc_status st = kc_runtime_create(o, &rt);
  if (st) fprintf(stderr, "%s: %s runtime: %s: %s\n", KCB_PROG, label, kc_status_name(st), kc_errmsg(NULL));
  return rt;
}

/* Whether `command -v prog` finds prog. */
static inline bool kcb_in_path(const char *prog) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
  return system(cmd) == 0;
}

/* Whether a measurement of the backend (with the host compiler cc; NULL for
 * the other backends) cannot run here; then why says so. */
static inline bool kcb_backend_missing(kc_backend_kind backend, const char *cc, char *why, size_t len) {
  const char *w = NULL;
  if (!kc_backend_available(backend, &w)) {
    snprintf(why, len, "%s", w ? w : "unavailable");
    return true;
  }
  if (cc && !kcb_in_path(cc)) {
    snprintf(why, len, "%s is not installed", cc);
    return true;
  }
  return false;
}

/* JSON: the head of backend row i of a "backends" list ({"backend": ...,
 * "compiler": ...), closed with "skipped" when the backend did not run.
 * Whether it ran: then the caller adds its figures and the closing brace. */
static inline bool kcb_json_backend(int i, const char *label, const char *compiler, bool ran,
                                    const char *why) {
  printf("%s\n {\"backend\": \"%s\", \"compiler\": \"%s\"", i ? "," : "", label, compiler);
  if (!ran) printf(", \"skipped\": \"%s\"}", why);
  return ran;
}

/* ------------------------------------------------------------ redefinition */

/* In r: defines h and kh, a kernel that calls it, then `reps` times (at
 * most 64) compiles kh and times the kc_define of a new h (which clips kh's
 * code instance): the median into *define_ns. With collect_ns, each
 * redefinition is followed by a timed kc_collect, which must free exactly
 * the clipped code instance (else the program dies): its median into
 * *collect_ns. */
static inline void kcb_time_redefine(kc_runtime *r, int reps, double *define_ns, double *collect_ns) {
  double td[64], tc[64];
  if (reps > 64) reps = 64;
  KCB_CHECK(kc_define(r, "h", "KC_DEVICE int h(int x) { return x; }", NULL));
  KCB_CHECK(kc_define(r, "kh", "KC_KERNEL void kh(KC_GLOBAL int *y) { y[0] = h(1); }", NULL));
  kc_kernel *k;
  KCB_CHECK(kc_kernel_create(r, "kh", NULL, &k));
  char src[96];
  for (int i = 0; i < reps; i++) {
    KCB_CHECK(kc_kernel_compile(k)); /* one live dependent to clip */
    snprintf(src, sizeof src, "KC_DEVICE int h(int x) { return x + %d; }", i + 1);
    double t0 = now_ns();
    KCB_CHECK(kc_define(r, "h", src, NULL));
    td[i] = now_ns() - t0;
    if (!collect_ns) continue;
    kc_collect_info ci;
    t0 = now_ns();
    KCB_CHECK(kc_collect(r, &ci));
    tc[i] = now_ns() - t0;
    if (ci.code_instances != 1) {
      fprintf(stderr, "%s: the collect freed %llu code instances, expected 1\n", KCB_PROG,
              (unsigned long long)ci.code_instances);
      exit(1);
    }
  }
  kc_kernel_destroy(k);
  *define_ns = median(td, reps);
  if (collect_ns) *collect_ns = median(tc, reps);
}

/* --------------------------------------------------------- the typical kernel */

/* A typical kernel: an entry and four helpers, a loop, branches. Its entry's
 * result plus `plus` (a string of C, "" for none). */
#define KCB_TYPICAL_ENTRY(plus) \
  "KC_KERNEL void typical(KC_GLOBAL float *out, KC_GLOBAL const float *in, float scale, int n) {\n" \
  "  size_t i = kc_global_id(0);\n" \
  "  if ((int)i < n) {\n" \
  "    float x = in[i] * scale;\n" \
  "    out[i] = shade(x, 1.0f - x)" plus ";\n" \
  "  }\n" \
  "}"

/* Work items of a launch; the input is in[i] = i / KCB_N, scale 1.5. */
enum { KCB_N = 1024 };

/* Defines the typical kernel in rt. variant: its result plus (float)VARIANT,
 * so that the parameter VARIANT makes specializations (kc_bench_remote). */
static inline kc_status kcb_define_typical(kc_runtime *rt, bool variant) {
  static const char *const helpers[][2] = {
      {"lerp3", "KC_DEVICE float lerp3(float a, float b, float t) { return a + (b - a) * t; }"},
      {"smooth", "KC_DEVICE float smooth(float x) {\n"
                 "  x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);\n"
                 "  return x * x * (3.0f - 2.0f * x);\n"
                 "}"},
      {"poly", "KC_DEVICE float poly(float x) {\n"
               "  float r = 0.0f;\n"
               "  for (int i = 0; i < 8; i++) r = r * x + (float)(i + 1) * 0.125f;\n"
               "  return r;\n"
               "}"},
      {"shade", "KC_DEVICE float shade(float x, float y) {\n"
                "  return lerp3(smooth(x), poly(y), 0.25f) + smooth(y) * poly(x);\n"
                "}"},
  };
  kc_status st = KC_OK;
  for (size_t i = 0; !st && i < sizeof helpers / sizeof *helpers; i++)
    st = kc_define(rt, helpers[i][0], helpers[i][1], NULL);
  if (!st)
    st = kc_define(rt, "typical", variant ? KCB_TYPICAL_ENTRY(" + (float)VARIANT") : KCB_TYPICAL_ENTRY(""),
                   NULL);
  return st;
}

/* The typical kernel's helpers on the host: the reference for its results. */
static inline float kcb_smooth_ref(float x) {
  x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
  return x * x * (3.0f - 2.0f * x);
}
static inline float kcb_poly_ref(float x) {
  float r = 0.0f;
  for (int i = 0; i < 8; i++) r = r * x + (float)(i + 1) * 0.125f;
  return r;
}
static inline float kcb_shade_ref(float x, float y) {
  float a = kcb_smooth_ref(x), b = kcb_poly_ref(y);
  return a + (b - a) * 0.25f + kcb_smooth_ref(y) * kcb_poly_ref(x); /* lerp3(a, b, 0.25f) + ... */
}

/* A context with the typical kernel's buffers, and the kernel defined. */
typedef struct kcb_session {
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *in, *out;
  kc_kernel *k; /* the kernel, without VARIANT; NULL with it */
} kcb_session;

/* Opens a session on rt (which the caller still owns; NULL fails): the
 * context, the buffers, the input written, the typical kernel defined (see
 * kcb_define_typical) and, without variant, its kernel made. false after a
 * line on stderr that says what failed. */
static inline bool kcb_session_open(kcb_session *s, kc_runtime *rt, bool variant) {
  memset(s, 0, sizeof *s);
  if (!(s->rt = rt)) return false;
  float in[KCB_N];
  for (int i = 0; i < KCB_N; i++) in[i] = (float)i / KCB_N;
  kc_status st = kc_context_create(rt, 0, &s->ctx);
  if (!st) st = kc_buffer_create(s->ctx, sizeof in, &s->in);
  if (!st) st = kc_buffer_create(s->ctx, sizeof in, &s->out);
  if (!st) st = kc_buffer_write(s->in, 0, in, sizeof in);
  if (!st) st = kcb_define_typical(rt, variant);
  if (!st && !variant) st = kc_kernel_create(rt, "typical", NULL, &s->k);
  if (st) fprintf(stderr, "%s: setting up: %s: %s\n", KCB_PROG, kc_status_name(st), kc_errmsg(rt));
  return st == KC_OK;
}

/* Launches k (a typical kernel) over the session's buffers and waits for it. */
static inline kc_status kcb_session_launch(kcb_session *s, kc_kernel *k) {
  float scale = 1.5f;
  int n = KCB_N;
  kc_arg args[] = {KC_ARG_BUF(s->out), KC_ARG_BUF(s->in), KC_ARG_VAL(scale), KC_ARG_VAL(n)};
  kc_dim3 grid = {KCB_N / 64, 1, 1}, block = {64, 1, 1};
  kc_status st = kc_launch(k, s->ctx, &grid, &block, args, 4);
  return st ? st : kc_context_finish(s->ctx);
}

/* Reads the output and checks it against the reference plus `plus`: the
 * read's status, or KC_EBACKEND after a line on stderr at the first wrong
 * value. */
static inline kc_status kcb_session_check(kcb_session *s, float plus) {
  float out[KCB_N];
  kc_status st = kc_buffer_read(s->out, 0, out, sizeof out);
  for (int i = 0; !st && i < KCB_N; i++) {
    float x = (float)i / KCB_N * 1.5f, want = kcb_shade_ref(x, 1.0f - x) + plus;
    if (fabsf(out[i] - want) > 1e-3f * (1.0f + fabsf(want))) {
      fprintf(stderr, "%s: wrong result at %d: %g, expected %g\n", KCB_PROG, i, out[i], want);
      st = KC_EBACKEND;
    }
  }
  return st;
}

/* Destroys the session's kernel and its runtime (contexts and buffers with it). */
static inline void kcb_session_close(kcb_session *s) {
  kc_kernel_destroy(s->k);
  kc_runtime_destroy(s->rt);
}

/* ----------------------------------------------- directories, child processes */

/* Makes a new directory $TMPDIR/NAME-XXXXXX (/tmp when TMPDIR is unset or
 * empty), NAME-TAG-XXXXXX with a tag, into dir; false (errno set) if not. */
static inline bool kcb_mkdtemp(char *dir, size_t len, const char *name, const char *tag) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, len, "%s/%s%s%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name, tag ? "-" : "", tag ? tag : "");
  return mkdtemp(dir) != NULL;
}

/* rm -rf dir. */
static inline void kcb_rmrf(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) {}
}

/* This program's executable, to run itself as a child; false after a line
 * on stderr when it cannot be found. */
static inline bool kcb_self_path(char *path, size_t len) {
  ssize_t n = readlink("/proc/self/exe", path, len - 1);
  if (n <= 0) {
    fprintf(stderr, "%s: cannot find its own executable\n", KCB_PROG);
    return false;
  }
  path[n] = 0;
  return true;
}

/* Forks, after flushing stdio, a child whose stdout is a pipe; the parent
 * gets the pipe's end to read in *fd. Returns fork's result: the child's
 * pid, 0 in the child, -1 on failure. t_fork (if not NULL): now_ns() just
 * before the fork. */
static inline pid_t kcb_fork_piped(int *fd, double *t_fork) {
  int p[2];
  if (pipe(p)) return -1;
  fflush(NULL);
  if (t_fork) *t_fork = now_ns();
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    return 0;
  }
  close(p[1]);
  *fd = p[0];
  return pid;
}

/* In a child node before it runs: the caches other than kcache's off, so
 * that cold is cold (PoCL's kernel cache, unless pocl_dir names a fresh one
 * for it; CUDA's JIT cache), and the disk cache not disabled. */
static inline void kcb_child_env(const char *pocl_dir) {
  if (pocl_dir) {
    setenv("POCL_KERNEL_CACHE", "1", 1);
    setenv("POCL_CACHE_DIR", pocl_dir, 1);
  } else {
    setenv("POCL_KERNEL_CACHE", "0", 1); /* cold must be cold */
  }
  setenv("CUDA_CACHE_DISABLE", "1", 1);
  unsetenv("KC_CACHE_DISABLE");
}

/* Reads a child's output from fd until it closes it (at most len - 1 bytes,
 * NUL-terminated in buf), closes fd and waits for the child: whether it
 * exited with status 0. */
static inline bool kcb_child_reap(pid_t pid, int fd, char *buf, size_t len) {
  size_t n = 0;
  for (ssize_t k; n < len - 1 && (k = read(fd, buf + n, len - 1 - n)) != 0;) {
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) break;
    n += (size_t)k;
  }
  close(fd);
  buf[n] = 0;
  int status;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && !WEXITSTATUS(status);
}

/* ------------------------------------------------------ a redis-server of one's own */

/* A redis-server this program started on 127.0.0.1:port (no persistence;
 * its working directory dir is removed with it), reachable at url. */
typedef struct kcb_redis {
  pid_t pid;
  int port;
  char dir[4096];
  char url[256];
} kcb_redis;

/* A TCP port on the loopback interface that nobody listened on a moment
 * ago; -1 if none could be had. */
static inline int kcb_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* Whether something accepts connections on 127.0.0.1:port. */
static inline bool kcb_port_open(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

/* Starts redis-server on a free loopback port (a few ports are tried), its
 * directory $TMPDIR/NAME-redis-XXXXXX; it dies with this process
 * (PR_SET_PDEATHSIG). false when it did not start (s->pid 0). */
static inline bool kcb_redis_start(kcb_redis *s, const char *name) {
  memset(s, 0, sizeof *s);
  if (!kcb_mkdtemp(s->dir, sizeof s->dir, name, "redis")) return false;
  for (int attempt = 0; attempt < 5; attempt++) {
    s->port = kcb_free_port();
    if (s->port <= 0) break;
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", s->dir, "--daemonize", "no", (char *)NULL);
      _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 200; i++) {
      if (kcb_port_open(s->port)) {
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
        usleep(20000);
        return true;
      }
      if (waitpid(pid, NULL, WNOHANG) == pid) break;
      usleep(25000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  s->pid = 0;
  kcb_rmrf(s->dir);
  return false;
}

/* Kills the server (if it runs) and removes its directory. */
static inline void kcb_redis_stop(kcb_redis *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  s->pid = 0;
  if (s->dir[0]) kcb_rmrf(s->dir);
  s->dir[0] = 0;
}

/* Whether a runtime (host backend, a throwaway disk store) can use the
 * remote tier at url here: hiredis found, the URL and settings usable.
 * When it cannot, the runtime's warning on stderr says why. */
static inline bool kcb_remote_usable(const char *url, const char *name) {
  char probe[4096];
  if (!kcb_mkdtemp(probe, sizeof probe, name, "probe")) return false;
  kc_options o;
  kcb_options_store(&o, KC_BACKEND_HOST, NULL, probe);
  o.remote_url = url;
  kc_runtime *rt = NULL;
  bool usable = kc_runtime_create(&o, &rt) == KC_OK && kc_remote_url(rt);
  kc_runtime_destroy(rt);
  kcb_rmrf(probe);
  return usable;
}

#endif
