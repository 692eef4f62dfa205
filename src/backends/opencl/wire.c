/* SPDX-License-Identifier: MIT */
/*
 * wire.c -- the compile helpers' protocol (helpers.c is the parent's side,
 * serve.c the helper's): over a Unix stream socket, each message is one
 * frame,
 *
 *   "KCL2" | type (u32) | field count (u32) | total field bytes (u64)
 *   then per field: its length (u64) and its bytes       (little-endian)
 *
 * SETUP (identity, build options, platform index and device index as a
 * u32 each, kcache's version) is
 * answered by HELLO (status, message); BUILD (source, entry, the
 * parameters as one byte each, 1 for a buffer) by RESULT (status, message,
 * build log, binary, probe values as u64s, local parameters as bytes,
 * builds as a u64); QUIT asks the helper to exit. Sends never raise
 * SIGPIPE (MSG_NOSIGNAL), every wait has a deadline or watches the parent,
 * and a frame is checked before it is read into memory.
 */
#include "backends/opencl/opencl.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define OCL_WIRE_MAGIC 0x324C434Bu /* "KCL2": 2 since SETUP's indices are u32 fields (they were text) */
#define OCL_WIRE_MAX ((uint64_t)1 << 31) /* the most a frame's fields carry */

/* Waits until fd is ready for ev. OK, GONE (an error, or the watched pid is
 * no longer our parent), or TIMEOUT. */
static int ocl_wire_wait(int fd, short ev, uint64_t deadline, pid_t watch) {
  for (;;) {
    int ms = 1000;
    if (deadline) {
      uint64_t now = kc__now_ns();
      if (now >= deadline) return OCL_WIRE_TIMEOUT;
      uint64_t left = (deadline - now) / 1000000 + 1;
      if (left < 1000) ms = (int)left;
    }
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, ms);
    if (r > 0) return OCL_WIRE_OK; /* ready, or hung up: the read or write says which */
    if (r < 0 && errno != EINTR) return OCL_WIRE_GONE;
    if (watch && getppid() != watch) return OCL_WIRE_GONE;
  }
}

static int ocl_wire_write(int fd, const void *p, size_t n, uint64_t deadline) {
  const unsigned char *b = p;
  while (n) {
    int w = ocl_wire_wait(fd, POLLOUT, deadline, 0);
    if (w) return w;
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return OCL_WIRE_GONE;
    b += k;
    n -= (size_t)k;
  }
  return OCL_WIRE_OK;
}

static int ocl_wire_read(int fd, void *p, size_t n, uint64_t deadline, pid_t watch) {
  unsigned char *b = p;
  while (n) {
    int w = ocl_wire_wait(fd, POLLIN, deadline, watch);
    if (w) return w;
    ssize_t k = recv(fd, b, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return OCL_WIRE_GONE; /* the peer closed its end, or an error */
    b += k;
    n -= (size_t)k;
  }
  return OCL_WIRE_OK;
}

int ocl_wire_send(int fd, uint32_t type, const ocl_field *f, uint32_t n, uint64_t deadline) {
  if (n > OCL_MSG_FIELDS) return OCL_WIRE_GONE;
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += 8 + f[i].n;
  if (total > OCL_WIRE_MAX) return OCL_WIRE_GONE;
  uint8_t h[20];
  kc__le32(h, OCL_WIRE_MAGIC);
  kc__le32(h + 4, type);
  kc__le32(h + 8, n);
  kc__le64(h + 12, total);
  int r = ocl_wire_write(fd, h, sizeof h, deadline);
  for (uint32_t i = 0; i < n && !r; i++) {
    uint8_t len[8];
    kc__le64(len, f[i].n);
    r = ocl_wire_write(fd, len, sizeof len, deadline);
    if (!r && f[i].n) r = ocl_wire_write(fd, f[i].p, f[i].n, deadline);
  }
  return r;
}

int ocl_wire_recv(int fd, ocl_msg *m, uint64_t deadline, pid_t watch) {
  memset(m, 0, sizeof *m);
  uint8_t h[20];
  int r = ocl_wire_read(fd, h, sizeof h, deadline, watch);
  if (r) return r;
  uint64_t total = kc__rd64(h + 12);
  m->type = kc__rd32(h + 4);
  m->n = kc__rd32(h + 8);
  if (kc__rd32(h) != OCL_WIRE_MAGIC || m->n > OCL_MSG_FIELDS || total > OCL_WIRE_MAX || total < 8ull * m->n)
    return OCL_WIRE_GONE;
  m->buf = malloc(total ? total : 1);
  if (!m->buf) return OCL_WIRE_GONE;
  if ((r = ocl_wire_read(fd, m->buf, total, deadline, watch))) {
    free(m->buf);
    m->buf = NULL;
    return r;
  }
  uint64_t at = 0;
  for (uint32_t i = 0; i < m->n; i++) {
    uint64_t len = total - at >= 8 ? kc__rd64(m->buf + at) : 0;
    if (total - at < 8 || len > total - at - 8) {
      free(m->buf);
      m->buf = NULL;
      return OCL_WIRE_GONE;
    }
    m->f[i] = (ocl_field){m->buf + at + 8, len};
    at += 8 + len;
  }
  return OCL_WIRE_OK;
}
