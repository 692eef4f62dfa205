/* SPDX-License-Identifier: MIT */
/*
 * serve.c -- the compile helper's side (the kcache-clc executable,
 * clc/main.c, calls kc__ocl_helper_main): a process that helpers.c starts
 * with its end of a socket as descriptor 0. It opens the platform and
 * device the parent names (SETUP), checks that it is the library's version
 * and sees the same compiler
 * (the identity the disk key holds), answers HELLO, then builds each unit
 * with ocl_build_unit, the function the parent runs itself, and sends back
 * the status, the message, the build log, the binary and the probe's
 * values (wire.c has the frames). It exits on QUIT, when the socket
 * closes, or when its parent is gone.
 */
#include "backends/opencl/opencl.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int serve_fd = 0; /* the socket (moved off descriptor 0 at start) */

/* Field f as a NUL-terminated string (malloc; NULL: no memory). */
static char *serve_str(const ocl_field *f) {
  char *s = malloc(f->n + 1);
  if (s) {
    memcpy(s, f->p, f->n);
    s[f->n] = '\0';
  }
  return s;
}

static void serve_hello(kc_status st, const char *msg) {
  uint8_t s4[4];
  kc__le32(s4, (uint32_t)st);
  ocl_field f[2] = {{s4, 4}, {msg, strlen(msg)}};
  (void)ocl_wire_send(serve_fd, OCL_MSG_HELLO, f, 2, 0);
}

/* SETUP's checks, in turn, then the device it names: KC_OK with *st, or
 * the status with msg saying why. f: its fields as strings (NULL: no
 * memory for one). */
static kc_status setup_open(const kc__bsvc *sv, const ocl_msg *m, char *const *f, ocl_state **st, char *msg,
                            size_t n) {
  if (m->type != OCL_MSG_SETUP || m->n != 5) {
    snprintf(msg, n, "the first message was not SETUP");
    return KC_EINVAL;
  }
  if (!f[0] || !f[1] || !f[4]) {
    snprintf(msg, n, "out of memory");
    return KC_ENOMEM;
  }
  if (strcmp(f[4], KC_VERSION_STRING) != 0) { /* the protocol is the library's own */
    snprintf(msg, n, "the helper is kcache %s, the library %.100s", KC_VERSION_STRING, f[4]);
    return KC_EUNAVAILABLE;
  }
  if (m->f[2].n != 4 || m->f[3].n != 4) {
    snprintf(msg, n, "SETUP's platform and device indices are not 4 bytes each");
    return KC_EINVAL;
  }
  kc_status s = ocl_open_at(sv, (int)kc__rd32(m->f[2].p), (int)kc__rd32(m->f[3].p), f[1], st);
  if (s) {
    snprintf(msg, n, "%s", kc__errmsg_owner(sv->owner));
    return s;
  }
  if (strcmp((*st)->identity, f[0]) != 0) {
    snprintf(msg, n, "the helper sees the OpenCL compiler \"%s\", not \"%s\"", (*st)->identity, f[0]);
    ocl_close(*st);
    *st = NULL;
    return KC_EUNAVAILABLE;
  }
  msg[0] = '\0';
  return KC_OK;
}

/* SETUP: the state for the parent's device, or NULL (HELLO says why). */
static ocl_state *serve_setup(const kc__bsvc *sv, pid_t parent) {
  ocl_msg m;
  if (ocl_wire_recv(serve_fd, &m, 0, parent)) return NULL;
  char *f[5] = {NULL, NULL, NULL, NULL, NULL};
  for (uint32_t i = 0; i < 5 && i < m.n; i++) f[i] = serve_str(&m.f[i]);
  ocl_state *st = NULL;
  char msg[1024];
  serve_hello(setup_open(sv, &m, f, &st, msg, sizeof msg), msg);
  for (int i = 0; i < 5; i++) free(f[i]);
  free(m.buf);
  return st;
}

/* BUILD: builds the unit and sends RESULT. False when the reply could not
 * be sent or the request is malformed (the helper then exits). */
static bool serve_build(ocl_state *st, const ocl_msg *m) {
  if (m->n != 3 || m->f[2].n > KC_MAX_ARGS) return false;
  char *entry = serve_str(&m->f[1]);
  if (!entry) return false;
  ocl_unit u = {.text = m->f[0].p, .len = m->f[0].n, .entry = entry, .nparams = (uint32_t)m->f[2].n};
  for (uint32_t i = 0; i < u.nparams; i++) u.is_buffer[i] = ((const uint8_t *)m->f[2].p)[i] != 0;
  kc__sb log;
  kc__sb_init(&log, &st->sv->heap);
  uint64_t before = kc__load_relaxed(&st->builds);
  ocl_result r;
  kc_status s = ocl_build_unit(st, &u, &r, &log);
  const char *msg = s ? kc__errmsg_owner(st->sv->owner) : "";
  uint8_t s4[4], nb[8], vals[8 * (1 + 2 * KC_MAX_ARGS)];
  kc__le32(s4, (uint32_t)s);
  kc__le64(nb, kc__load_relaxed(&st->builds) - before);
  for (uint32_t i = 0; i < r.nvals; i++) kc__le64(vals + 8 * i, r.vals[i]);
  ocl_field f[7] = {{s4, 4},
                    {msg, strlen(msg)},
                    {log.buf, log.failed ? 0 : log.len},
                    {r.bin, s ? 0 : r.size},
                    {vals, s ? 0 : 8 * (size_t)r.nvals},
                    {r.local, s ? 0 : u.nparams},
                    {nb, 8}};
  bool sent = ocl_wire_send(serve_fd, OCL_MSG_RESULT, f, 7, 0) == OCL_WIRE_OK;
  if (r.prog) ocl.clReleaseProgram(r.prog);
  kc__bs_free(st->sv, r.bin);
  kc__sb_free(&log);
  free(entry);
  return sent;
}

/* Closes every descriptor from 3 up: whatever the parent's process had
 * open without FD_CLOEXEC (a caller's pipe, a lock) must not live on in a
 * helper for the runtime's life. posix_spawn's closefrom does it on glibc
 * 2.34 and later; this covers the others. */
static void serve_close_inherited(void) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = 3; fd < (int)max; fd++) close(fd);
}

/* The services that say what the core linked: the helper compiles and
 * links nothing, so nothing calls them; set all the same, as kc__bsvc
 * promises, with an answer that says where they were called. */
static kc_status serve_bad_dims(const kc__blinked *b, const kc_dim3 *grid, const kc_dim3 *block) {
  (void)b, (void)grid, (void)block;
  return kc__err_owner(0, KC_EINVAL, "the OpenCL compile helper launches no kernel");
}

static kc_status serve_bad_args(const kc__blinked *b, const kc_context *ctx, const kc_arg *args,
                                uint32_t nargs) {
  (void)b, (void)ctx, (void)args, (void)nargs;
  return kc__err_owner(0, KC_EINVAL, "the OpenCL compile helper launches no kernel");
}

static const char *serve_name_of(const kc__blinked *b) {
  (void)b;
  return "(a kernel of the compile helper)";
}

int kc__ocl_helper_main(int argc, char **argv) {
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  serve_close_inherited();
  pid_t parent = getppid();
  /* the socket on a descriptor the compiler's own children (PoCL runs the
   * linker) do not inherit, and /dev/null as their input */
  int fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
  int null = open("/dev/null", O_RDONLY);
  if (fd < 0 || null < 0 || dup2(null, 0) < 0) return 1;
  if (null > 0) close(null);
  serve_fd = fd;
  kc__bsvc sv = {.heap = {kc__libc_alloc, NULL},
                 .owner = kc__next_id(),
                 .bad_dims = serve_bad_dims,
                 .bad_args = serve_bad_args,
                 .name_of = serve_name_of};
  ocl_state *st = serve_setup(&sv, parent);
  if (!st) return 1;
  for (;;) {
    ocl_msg m;
    if (ocl_wire_recv(serve_fd, &m, 0, parent)) break; /* the parent closed the socket, or is gone */
    bool go_on = m.type == OCL_MSG_BUILD && serve_build(st, &m);
    free(m.buf);
    if (!go_on) break; /* QUIT, or a request it cannot serve */
  }
  ocl_close(st);
  return 0;
}
