/* SPDX-License-Identifier: MIT */
/*
 * remote/hiredis.c -- owns loading hiredis with dlopen: which library (a
 * forced path, known sonames, a search of the system's library
 * directories), which of the two ABIs it has, and the check of that ABI on
 * a parsed reply and a socket pair before anything else uses it.
 */
#include "remote/internal.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

kc__hr_table kc__hr;
static kc__once hr_once = KC__ONCE_INIT;
/* The caller's lib, for hr_load: pthread_once runs it on the calling
 * thread, and takes no argument. */
static _Thread_local const char *hr_lib;
static _Atomic bool hr_loaded; /* hr_load has run (for kc__hiredis_name) */

/* Checks that the structures above match the library: a reply parsed by
 * its own reader, and a context made on a socket pair. */
static bool hr_abi_ok(void) {
  void *rd = kc__hr.reader_create();
  if (!rd) return false;
  static const char wire[] = "*2\r\n$3\r\nabc\r\n:42\r\n";
  void *reply = NULL;
  bool ok =
      kc__hr.reader_feed(rd, wire, sizeof wire - 1) == 0 && kc__hr.reader_get_reply(rd, &reply) == 0 && reply;
  if (ok) {
    hr_view a = hr_reply(reply);
    ok = a.type == KC__R_ARRAY && a.elements == 2 && a.element;
    if (ok) {
      hr_view s = hr_reply(a.element[0]), i = hr_reply(a.element[1]);
      ok = s.type == KC__R_STRING && s.len == 3 && s.str && !memcmp(s.str, "abc", 4) &&
           i.type == KC__R_INTEGER && i.integer == 42;
    }
  }
  if (reply) kc__hr.free_reply(reply);
  kc__hr.reader_free(rd);
  if (!ok) return false;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return true; /* cannot tell: trust the reply */
  void *c = kc__hr.connect_fd(sv[0]);
  ok = c && HR_CTX(c, err) == 0 && HR_CTX(c, fd) == sv[0];
  if (c) kc__hr.free_ctx(c); /* closes sv[0] */
  else close(sv[0]);
  close(sv[1]);
  return ok;
}

static bool hr_try(const char *path) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return false;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  /* only the ABIs declared above: 0.14 and 1.x (the soname says which) */
  int abi = !strncmp(base, "libhiredis.so.0.14", 18) ? 0 : !strncmp(base, "libhiredis.so.1.", 16) ? 1 : -1;
  if (abi < 0) {
    /* an unversioned name: 1.x has redisConnectWithOptions, 0.14 does not */
    abi = dlsym(dl, "redisConnectWithOptions") ? 1 : 0;
    if (strcmp(base, "libhiredis.so") != 0) {
      snprintf(kc__hr.whybuf, sizeof kc__hr.whybuf,
               "%s is a hiredis version whose ABI kcache does not know (0.14 and 1.x are)", path);
      dlclose(dl);
      return false;
    }
  }
#define HR_SYM(field, sym) \
  *(void **)&kc__hr.field = dlsym(dl, sym); \
  if (!kc__hr.field) { \
    snprintf(kc__hr.whybuf, sizeof kc__hr.whybuf, "%s lacks %s", path, sym); \
    dlclose(dl); \
    return false; \
  }
  HR_SYM(connect_nb, "redisConnectNonBlock")
  HR_SYM(connect_fd, "redisConnectFd")
  HR_SYM(free_ctx, "redisFree")
  HR_SYM(append_argv, "redisAppendCommandArgv")
  HR_SYM(buffer_write, "redisBufferWrite")
  HR_SYM(buffer_read, "redisBufferRead")
  HR_SYM(get_reply, "redisGetReply")
  HR_SYM(free_reply, "freeReplyObject")
  HR_SYM(reader_create, "redisReaderCreate")
  HR_SYM(reader_feed, "redisReaderFeed")
  HR_SYM(reader_get_reply, "redisReaderGetReply")
  HR_SYM(reader_free, "redisReaderFree")
#undef HR_SYM
  kc__hr.abi = abi;
  if (!hr_abi_ok()) {
    snprintf(kc__hr.whybuf, sizeof kc__hr.whybuf, "%s does not have the hiredis %s ABI that its name says",
             path, abi ? "1.x" : "0.14");
    dlclose(dl);
    return false;
  }
  snprintf(kc__hr.name, sizeof kc__hr.name, "%s (ABI %s)", base, abi ? "1.x" : "0.14");
  return true; /* stays loaded for the life of the process */
}

static void hr_load(void) {
  /* where libhiredis is: a process-wide choice, the first caller's, made
   * when the library is first loaded (as the CUDA toolkit's directories are) */
  const char *forced = hr_lib;
  snprintf(kc__hr.whybuf, sizeof kc__hr.whybuf,
           "libhiredis is not installed (Debian: apt-get install libhiredis0.14, or libhiredis1.1.0)");
  kc__hr.why = kc__hr.whybuf;
  if (forced && *forced) {
    if (hr_try(forced)) {
      kc__hr.why = NULL;
    } else if (!strstr(kc__hr.whybuf, forced)) {
      const char *e = dlerror();
      snprintf(kc__hr.whybuf, sizeof kc__hr.whybuf, "KC_HIREDIS_LIB=%s cannot be used: %s", forced,
               e ? e : "not a hiredis library");
    }
    return;
  }
  static const char *const names[] = {"libhiredis.so.0.14", "libhiredis.so.1.1.0", "libhiredis.so.1.0.0"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (hr_try(names[i])) {
      kc__hr.why = NULL;
      return;
    }
  /* other builds of the same ABIs, wherever the system keeps libraries */
  static const char *const patterns[] = {"/usr/lib/*/libhiredis.so.*", "/usr/lib/libhiredis.so.*",
                                         "/usr/lib64/libhiredis.so.*", "/usr/local/lib/libhiredis.so.*",
                                         "/usr/local/lib64/libhiredis.so.*"};
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
    glob_t g;
    if (glob(patterns[i], 0, NULL, &g) != 0) continue;
    bool found = false;
    for (size_t j = 0; j < g.gl_pathc && !found; j++)
      if (!strstr(g.gl_pathv[j], "_ssl")) found = hr_try(g.gl_pathv[j]);
    globfree(&g);
    if (found) {
      kc__hr.why = NULL;
      return;
    }
  }
  if (hr_try("libhiredis.so")) kc__hr.why = NULL;
}

static void hr_first(void) {
  hr_load();
  hr_loaded = true;
}

const char *kc__hiredis_unavailable(const char *lib) {
  hr_lib = lib;
  kc__call_once(&hr_once, hr_first);
  hr_lib = NULL;
  return kc__hr.why;
}

const char *kc__hiredis_name(void) { return hr_loaded && !kc__hr.why ? kc__hr.name : NULL; }
