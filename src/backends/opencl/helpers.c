/* SPDX-License-Identifier: MIT */
/*
 * helpers.c -- compiling in helper processes, where the platform builds one
 * program at a time per process (PoCL 3.1 does): the compile pool's threads
 * then wait for each other inside clBuildProgram. A helper is the
 * kcache-clc executable (clc/main.c, serve.c), started with posix_spawn
 * (never fork: this process has threads) on first need and kept for the
 * runtime's life, since a process's first build costs PoCL about a
 * second. Each has one Unix socket (wire.c); one compile at a time owns it.
 *
 * Where a build runs ($KC_OPENCL_HELPERS): auto (the default) builds every
 * unit in a helper, up to one per compile thread, on a platform that
 * serializes builds and with more than one compile thread, and here
 * otherwise; 1 uses helpers on any platform, 0 never. Every build, not only
 * the second of two at once: the link builds a helper's binary here, and
 * that build waits for any source build running here (about 300 ms on
 * PoCL), which made a pool that also built here barely faster than one
 * thread. A build finding every helper busy runs here. Single flight is
 * the core's (the specialization's lock and the disk store's lock around
 * compile), so it holds wherever the build runs.
 *
 * The artifact is the same: the helper runs ocl_build_unit for the same
 * device (it checks the parent's identity, which is part of the disk key)
 * with the same build options, and its failures come back with the same
 * status, message and build log. The parent builds a helper's binary at
 * the link (it has no program of its own to keep).
 *
 * When a helper cannot be started (not found, it exits, it sees another
 * compiler), every build of this runtime runs here from then on, and the
 * log says so once. A helper that dies during a build is reaped and
 * replaced, and the build is sent once more; a second death, or no answer
 * within $KC_OPENCL_HELPER_TIMEOUT seconds (the helper is killed), fails
 * the compile with KC_EBACKEND, which the core does not remember (the next
 * launch compiles again). kc_runtime_destroy asks each helper to quit and
 * reaps it. A child of fork() never reaches them: its runtime's backend is
 * replaced by the refusing table (core/fork.c), and a helper exits when its
 * parent is gone.
 */
#include "backends/opencl/opencl.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef KC_CLC_PATH /* the installed helper (sources.cmake sets both) */
#define KC_CLC_PATH "/usr/local/libexec/kcache/kcache-clc"
#endif
#ifndef KC_CLC_RELDIR /* the same, from the library's folder */
#define KC_CLC_RELDIR "../libexec/kcache"
#endif
#define OCL_HELPERS_MAX 64

/* ------------------------------------------------------------- settings */

/* The helper to run: the configured one ($KC_OPENCL_HELPER), else the one
 * installed next to the library (found from where this code was loaded:
 * KC_CLC_RELDIR from its folder; "." in a Python wheel, which carries it
 * beside the extension module the library is linked into), else one in
 * the library's own folder (a build tree, where CMake puts both in the
 * build folder), else the configured install path. A helper of another
 * version refuses the runtime's SETUP, so a stray one is never used. */
static void ocl_helper_path(const char *set, char *buf, size_t n) {
  static const char anchor = 0;
  if (set) {
    snprintf(buf, n, "%s", set);
    return;
  }
  Dl_info di;
  if (dladdr(&anchor, &di) && di.dli_fname && strrchr(di.dli_fname, '/')) {
    int dir = (int)(strrchr(di.dli_fname, '/') - di.dli_fname);
    snprintf(buf, n, "%.*s/%s/kcache-clc", dir, di.dli_fname, KC_CLC_RELDIR);
    if (access(buf, X_OK) == 0) return;
    snprintf(buf, n, "%.*s/kcache-clc", dir, di.dli_fname);
    if (access(buf, X_OK) == 0) return;
  }
  snprintf(buf, n, "%s", KC_CLC_PATH);
}

void ocl_helpers_open(ocl_state *st, const kc__bconfig *cfg) {
  st->helper_timeout_s = cfg && cfg->opencl_helper_timeout_s > 0 ? cfg->opencl_helper_timeout_s : 120;
  ocl_helper_path(cfg ? cfg->opencl_helper : NULL, st->helper_path, sizeof st->helper_path);
  /* as PoCL reads it (pocl_get_bool_option): set and not starting with
   * "1" is off ("0", "off", empty); unset is PoCL's default, on */
  const char *pocl_cache = getenv("POCL_KERNEL_CACHE");
  st->pocl_cache_off = st->pocl && pocl_cache && pocl_cache[0] != '1';
  kc__auto_mode mode = cfg ? cfg->opencl_helpers : KC__MODE_AUTO;
  uint32_t n = cfg && cfg->compile_threads ? cfg->compile_threads : 1;
  bool on = mode == KC__MODE_ALWAYS || (mode == KC__MODE_AUTO && st->serializes && n > 1);
  if (!on) return;
  /* PoCL with its own kernel cache off aborts the process that launches a
   * binary a helper built ("Generic WG function binary does not exist", PoCL
   * 3.1: test_clhelp), whatever the helpers are set to: build here */
  if (st->pocl_cache_off) {
    kc__log_to(st->sv->log, KC_LOG_WARN,
               "OpenCL: no compile helpers with PoCL's kernel cache off ($POCL_KERNEL_CACHE=\"%s\": PoCL "
               "then aborts a process that launches a binary a compile helper built); this runtime builds "
               "in its own process, one program at a time",
               pocl_cache);
    return;
  }
  st->nhelpers = (int)(n > OCL_HELPERS_MAX ? OCL_HELPERS_MAX : n);
  st->helpers = kc__bs_calloc(st->sv, (size_t)st->nhelpers * sizeof *st->helpers);
  if (!st->helpers) { /* out of memory: every build here, as without helpers */
    st->nhelpers = 0;
    return;
  }
  for (int i = 0; i < st->nhelpers; i++) st->helpers[i].fd = st->helpers[i].pidfd = -1;
}

/* -------------------------------------------------------- one helper */

/* "killed by signal 9", "exited with code 1" */
static void ocl_describe_exit(int status, char *buf, size_t n) {
  if (status < 0) snprintf(buf, n, "its exit was not seen");
  else if (WIFSIGNALED(status))
    snprintf(buf, n, "killed by signal %d, %s", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else snprintf(buf, n, "exited with code %d", WEXITSTATUS(status));
}

/* Asks h's helper to exit (QUIT); false if it cannot be told. */
static bool ocl_helper_quit(ocl_helper *h) {
  return h->fd >= 0 &&
         ocl_wire_send(h->fd, OCL_MSG_QUIT, NULL, 0, kc__now_ns() + 1000000000ull) == OCL_WIRE_OK;
}

/* Stops h's process and reaps it; returns its wait status (-1: not seen).
 * quitting: it was asked to exit, and has 2 s to close its socket; else
 * it is gone or must go now. */
static int ocl_helper_stop(ocl_helper *h, bool quitting) {
  int status = -1;
  if (quitting && h->fd >= 0) {
    ocl_msg m; /* nothing comes back: this waits for the end of the socket */
    if (ocl_wire_recv(h->fd, &m, kc__now_ns() + 2000000000ull, 0) == OCL_WIRE_OK) free(m.buf);
  }
  if (h->fd >= 0) close(h->fd);
  h->fd = -1;
  /* a helper that closed its socket is exiting: 200 ms to see how, then it
   * goes with its process group (never a pid another waiter of this
   * process reaped, which costs its status: -1) */
  if (h->pid > 0) {
    kc__child_end end = kc__child_wait(h->pid, h->pidfd, kc__now_ns() + 200000000ull, true, &status);
    if (end != KC__CHILD_EXITED && end != KC__CHILD_KILLED) status = -1;
  }
  if (h->pidfd >= 0) close(h->pidfd);
  h->pidfd = -1;
  h->pid = 0;
  return status;
}

/* SETUP and its HELLO: the helper opens our device and checks it sees the
 * same compiler. False (why says why) when it does not answer so. */
static bool ocl_helper_hello(ocl_state *st, ocl_helper *h, char *why, size_t nwhy) {
  uint8_t pl[4], dv[4];
  kc__le32(pl, (uint32_t)st->plat_index);
  kc__le32(dv, (uint32_t)st->dev_index);
  ocl_field f[5] = {{st->identity, strlen(st->identity)},
                    {st->build_options, strlen(st->build_options)},
                    {pl, sizeof pl},
                    {dv, sizeof dv},
                    {KC_VERSION_STRING, strlen(KC_VERSION_STRING)}};
  double t = st->helper_timeout_s;
  uint64_t deadline = kc__now_ns() + (uint64_t)(t * 1e9);
  ocl_msg m = {0};
  int w = ocl_wire_send(h->fd, OCL_MSG_SETUP, f, 5, deadline);
  if (!w) w = ocl_wire_recv(h->fd, &m, deadline, 0);
  bool ok = !w && m.type == OCL_MSG_HELLO && m.n == 2 && m.f[0].n == 4 && kc__rd32(m.f[0].p) == KC_OK;
  if (!ok && !w && m.type == OCL_MSG_HELLO && m.n == 2)
    snprintf(why, nwhy, "it refused: %.*s", (int)(m.f[1].n > 400 ? 400 : m.f[1].n), (const char *)m.f[1].p);
  else if (!ok && w == OCL_WIRE_TIMEOUT) snprintf(why, nwhy, "it did not answer within %g s", t);
  else if (!ok) snprintf(why, nwhy, "it did not answer");
  free(m.buf);
  return ok;
}

/* Starts the helper in slot h. False (why says why) if it cannot; then
 * *lasting says whether it never will (no such program, one that refuses)
 * rather than for want of a resource now (descriptors, processes, memory). */
static bool ocl_helper_start(ocl_state *st, ocl_helper *h, char *why, size_t nwhy, bool *lasting) {
  *lasting = false;
  char *path = st->helper_path;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
    snprintf(why, nwhy, "socketpair: %s", strerror(errno));
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0); /* the helper's end is its descriptor 0 */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* none of ours, nor the caller's */
#endif
  posix_spawnattr_init(&at);
  sigset_t none, dflt;
  sigemptyset(&none);
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGPIPE);
  sigaddset(&dflt, SIGCHLD);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dflt);
  /* a process group of its own, so that a helper killed at its timeout
   * takes what its compiler started with it (PoCL runs the linker) */
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  char *argv[] = {path, NULL};
  pid_t pid = 0;
  int e = posix_spawn(&pid, path, &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (e) {
    close(sv[0]);
    snprintf(why, nwhy, "cannot run %.300s: %s", path, strerror(e));
    *lasting = e != EAGAIN && e != ENOMEM && e != EMFILE && e != ENFILE;
    return false;
  }
  h->pid = pid;
  h->pidfd = kc__child_pidfd(pid);
  h->fd = sv[0];
  char how[160];
  if (ocl_helper_hello(st, h, how, sizeof how)) return true;
  int status = ocl_helper_stop(h, false);
  char ex[96];
  ocl_describe_exit(status, ex, sizeof ex);
  snprintf(why, nwhy, "%.300s (process %ld): %s; %s", path, (long)pid, how, ex);
  *lasting = true;
  return false;
}

/* Reads a RESULT into r (the binary copied to st's heap) and *s (with its
 * message, as the helper set it). GONE for a malformed answer. */
static int ocl_helper_result(ocl_state *st, const ocl_unit *u, const ocl_msg *m, ocl_result *r, kc__sb *log,
                             kc_status *s) {
  const ocl_field *f = m->f;
  if (m->type != OCL_MSG_RESULT || m->n != 7 || f[0].n != 4 || f[6].n != 8 || f[4].n % 8 ||
      f[4].n > sizeof r->vals || (f[5].n && f[5].n != u->nparams))
    return OCL_WIRE_GONE;
  kc_status code = (kc_status)kc__rd32(f[0].p);
  if (!code && !f[3].n) return OCL_WIRE_GONE; /* success without a binary */
  kc__fetch_add_relaxed(&st->builds, kc__rd64(f[6].p));
  if (f[2].n) kc__sb_append(log, f[2].p, f[2].n);
  if (code) {
    *s = kc__bs_err(st->sv, code, "%.*s", (int)f[1].n, (const char *)f[1].p);
    return OCL_WIRE_OK;
  }
  if (!(r->bin = kc__bs_alloc(st->sv, f[3].n))) {
    *s = kc__bs_err(st->sv, KC_ENOMEM, "out of memory for a %zu-byte program binary", f[3].n);
    return OCL_WIRE_OK;
  }
  memcpy(r->bin, f[3].p, f[3].n);
  r->size = f[3].n;
  r->nvals = (uint32_t)(f[4].n / 8);
  for (uint32_t i = 0; i < r->nvals; i++) r->vals[i] = kc__rd64((const uint8_t *)f[4].p + 8 * i);
  if (f[5].n) memcpy(r->local, f[5].p, f[5].n);
  *s = KC_OK;
  return OCL_WIRE_OK;
}

/* One BUILD and its RESULT. OK (*s is the build's status), GONE or TIMEOUT. */
static int ocl_helper_call(ocl_state *st, ocl_helper *h, const ocl_unit *u, ocl_result *r, kc__sb *log,
                           kc_status *s, double timeout) {
  memset(r, 0, sizeof *r);
  ocl_field f[3] = {{u->text, u->len}, {u->entry, strlen(u->entry)}, {u->is_buffer, u->nparams}};
  uint64_t deadline = kc__now_ns() + (uint64_t)(timeout * 1e9);
  ocl_msg m = {0};
  int w = ocl_wire_send(h->fd, OCL_MSG_BUILD, f, 3, deadline);
  if (!w) w = ocl_wire_recv(h->fd, &m, deadline, 0);
  if (!w) w = ocl_helper_result(st, u, &m, r, log, s);
  free(m.buf);
  return w;
}

/* Builds u in helper h (started if need be). *here: no helper can start,
 * the caller builds here (the log said why, once). */
static kc_status ocl_helper_build(ocl_state *st, ocl_helper *h, const ocl_unit *u, ocl_result *r, kc__sb *log,
                                  bool *here) {
  char why[600], ex[96];
  bool lasting;
  for (int attempt = 0;; attempt++) {
    if (!h->pid && !ocl_helper_start(st, h, why, sizeof why, &lasting) && !lasting) {
      kc__log_to(st->sv->log, KC_LOG_INFO,
                 "OpenCL: no compile helper for now (%s); building kernel '%s' here", why, u->entry);
      *here = true; /* the next build tries again */
      return KC_OK;
    }
    if (!h->pid) {
      kc__lock(&st->hlock);
      bool first = !st->helpers_off;
      st->helpers_off = true;
      kc__unlock(&st->hlock);
      if (first) /* helpers are on: compiles were to run in parallel, and now cannot */
        kc__log_to(st->sv->log, KC_LOG_WARN,
                   "OpenCL: no compile helper (%s); this runtime builds in its own process, one program "
                   "at a time (the platform builds no two at once in one process): install kcache-clc "
                   "beside the library or name it in $KC_OPENCL_HELPER",
                   why);
      *here = true;
      return KC_OK;
    }
    kc_status s = KC_OK;
    long pid = (long)h->pid;
    double t = st->helper_timeout_s;
    int w = ocl_helper_call(st, h, u, r, log, &s, t);
    if (w == OCL_WIRE_OK) return s;
    ocl_describe_exit(ocl_helper_stop(h, false), ex, sizeof ex); /* killed now if it is still there */
    if (w == OCL_WIRE_TIMEOUT)
      return kc__bs_err(st->sv, KC_EBACKEND,
                        "the OpenCL compile helper (process %ld) did not answer within %g s building kernel "
                        "'%s' and was killed ($KC_OPENCL_HELPER_TIMEOUT)",
                        pid, t, u->entry);
    if (attempt)
      return kc__bs_err(st->sv, KC_EBACKEND,
                        "the OpenCL compile helper died twice building kernel '%s' (process %ld: %s)",
                        u->entry, pid, ex);
    kc__log_to(st->sv->log, KC_LOG_WARN,
               "OpenCL: the compile helper (process %ld) died building kernel '%s' (%s); starting another",
               pid, u->entry, ex);
  }
}

/* A helper slot for the next build, or NULL: build here. */
static ocl_helper *ocl_helper_take(ocl_state *st) {
  ocl_helper *h = NULL;
  kc__lock(&st->hlock);
  for (int i = 0; i < st->nhelpers && !h && !st->helpers_off; i++) /* a running one first */
    if (!st->helpers[i].busy && st->helpers[i].pid) h = &st->helpers[i];
  for (int i = 0; i < st->nhelpers && !h && !st->helpers_off; i++)
    if (!st->helpers[i].busy) h = &st->helpers[i];
  if (h) h->busy = true;
  kc__unlock(&st->hlock);
  return h;
}

kc_status ocl_build_routed(ocl_state *st, const ocl_unit *u, ocl_result *r, kc__sb *log) {
  ocl_helper *h = st->nhelpers ? ocl_helper_take(st) : NULL;
  if (h) {
    bool here = false;
    kc_status s = ocl_helper_build(st, h, u, r, log, &here);
    kc__lock(&st->hlock);
    h->busy = false;
    kc__unlock(&st->hlock);
    if (!here) return s;
  }
  return ocl_build_unit(st, u, r, log);
}

void ocl_helpers_close(ocl_state *st) {
  if (!st->helpers) return;
  bool told[OCL_HELPERS_MAX];
  for (int i = 0; i < st->nhelpers; i++) /* all at once: they exit in parallel */
    told[i] = st->helpers[i].pid && ocl_helper_quit(&st->helpers[i]);
  for (int i = 0; i < st->nhelpers; i++)
    if (st->helpers[i].pid) (void)ocl_helper_stop(&st->helpers[i], told[i]);
  kc__bs_free(st->sv, st->helpers);
  st->helpers = NULL;
}
