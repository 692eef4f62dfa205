/* SPDX-License-Identifier: MIT */
/*
 * remote/conn.c -- owns one connection to the server: connecting,
 * authenticating and selecting the database within the timeout, and one
 * binary-safe command driven without blocking (every wait has a deadline,
 * SIGPIPE is contained), its reply copied out of hiredis. Over TLS
 * (rediss://) the socket is kcache's own, its session tls.c's, and
 * hiredis only parses the replies.
 */
#include "remote/internal.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* ------------------------------------------------------------ connection */

/* Writing to a socket the server closed raises SIGPIPE, whose default
 * action ends the process; hiredis writes with write(2). Blocked around the
 * write, and a SIGPIPE that the write raised is consumed. */
typedef struct pipe_guard {
  sigset_t old;
  bool was_pending;
} pipe_guard;

static void pipe_block(pipe_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void pipe_restore(pipe_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigpending(&pending);
  if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {}
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* 1: fd is ready; 0: the deadline passed; -1: poll failed. Past the
 * deadline it still looks once: a thread that was not scheduled in time
 * must not call an answer that did arrive a timeout. */
static int wait_fd(int fd, short events, uint64_t deadline) {
  for (;;) {
    uint64_t now = kc__now_ns();
    uint64_t left = now < deadline ? deadline - now : 0;
    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    struct pollfd p = {fd, events, 0};
    int r = ppoll(&p, 1, &ts, NULL);
    if (r > 0) return 1;
    if (r == 0 && kc__now_ns() >= deadline) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static const char *ctx_why(void *ctx, const char *what, char *why, size_t wl) {
  const char *s = ctx ? HR_CTX(ctx, errstr) : "";
  snprintf(why, wl, "%s: %s", what, s && *s ? s : "connection error");
  return why;
}

static bool copy_reply(const kc__heap *heap, const void *p, kc__rreply *out, int depth) {
  memset(out, 0, sizeof *out);
  hr_view v = hr_reply(p);
  out->type = v.type;
  out->integer = v.integer;
  if (v.type == KC__R_STRING || v.type == KC__R_STATUS || v.type == KC__R_ERROR) {
    out->str = kc__heap_alloc(heap, v.len + 1);
    if (!out->str) return false;
    if (v.len) memcpy(out->str, v.str, v.len);
    out->str[v.len] = 0;
    out->len = v.len;
  } else if (v.type == KC__R_ARRAY) {
    if (depth > 4) return false;
    out->elem = kc__heap_calloc(heap, (v.elements ? v.elements : 1) * sizeof *out->elem);
    if (!out->elem) return false;
    out->n = v.elements;
    for (size_t i = 0; i < v.elements; i++)
      if (!copy_reply(heap, v.element[i], &out->elem[i], depth + 1)) return false;
  } else if (v.type != KC__R_INTEGER && v.type != KC__R_NIL) {
    out->type = KC__R_ERROR; /* a RESP3 type nobody asked for */
    out->str = kc__heap_alloc(heap, 32);
    if (!out->str) return false;
    out->len = (size_t)snprintf(out->str, 32, "unexpected reply type %d", v.type);
  }
  return true;
}

void kc__rreply_free(const kc__heap *heap, kc__rreply *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) kc__rreply_free(heap, &r->elem[i]);
  kc__heap_free(heap, r->elem);
  kc__heap_free(heap, r->str);
  memset(r, 0, sizeof *r);
}

/* A reply of hiredis' into out (KC_OK), or KC_ENOMEM with the connection broken. */
static kc_status take_reply(kc__rconn *c, void *reply, kc__rreply *out, char *why, size_t wl) {
  bool ok = copy_reply(c->heap, reply, out, 0);
  kc__hr.free_reply(reply);
  if (ok && out->type == KC__R_ERROR && (!strncmp(out->str, "MOVED ", 6) || !strncmp(out->str, "ASK ", 4)))
    snprintf(c->redirect, sizeof c->redirect, "%s", out->str); /* a cluster's: the tier follows it */
  if (ok) return KC_OK;
  kc__rreply_free(c->heap, out);
  c->broken = true; /* the reply is lost: the next one would answer this command */
  snprintf(why, wl, "out of memory copying a reply");
  return KC_ENOMEM;
}

/* kc__rconn_cmd over TLS: the command in RESP, written through the
 * session, and what it reads fed to hiredis' reader, with the same
 * deadlines as hiredis' own connection below. */
static kc_status tls_cmd(kc__rconn *c, int argc, const char *const *argv, const size_t *lens, kc__rreply *out,
                         char *why, size_t wl) {
  size_t n = 24;
  for (int i = 0; i < argc; i++) n += lens[i] + 24;
  char *buf = kc__heap_alloc(c->heap, n);
  if (!buf) {
    snprintf(why, wl, "out of memory formatting a command");
    return KC_ENOMEM;
  }
  size_t o = (size_t)snprintf(buf, n, "*%d\r\n", argc);
  for (int i = 0; i < argc; i++) {
    o += (size_t)snprintf(buf + o, n - o, "$%zu\r\n", lens[i]);
    if (lens[i]) memcpy(buf + o, argv[i], lens[i]);
    o += lens[i];
    buf[o++] = '\r';
    buf[o++] = '\n';
  }
  uint64_t now = kc__now_ns(), last = now;
  uint64_t base = now + c->timeout_ns;
  if (c->cap && c->cap < base) base = c->cap;
  uint64_t budget = base + o * KC__NS_PER_BYTE;
  const char *what = "sending";
  short want = 0;
  for (size_t sent = 0; sent < o;) {
    pipe_guard g;
    pipe_block(&g);
    long r = kc__tls_io(c->ssl, true, buf + sent, o - sent, &want, why, wl);
    pipe_restore(&g);
    if (r < 0) {
      kc__heap_free(c->heap, buf);
      goto io;
    }
    if (r > 0) {
      sent += (size_t)r;
      last = kc__now_ns();
      continue;
    }
    uint64_t dl = last + c->timeout_ns < budget ? last + c->timeout_ns : budget;
    if (wait_fd(c->fd, want, dl) <= 0) {
      kc__heap_free(c->heap, buf);
      goto timeout;
    }
  }
  kc__heap_free(c->heap, buf);
  what = "receiving";
  last = kc__now_ns();
  uint64_t got = 0; /* bytes of this reply */
  for (;;) {
    void *reply = NULL;
    if (kc__hr.reader_get_reply(c->reader, &reply) != 0) {
      snprintf(why, wl, "receiving: a malformed reply");
      c->broken = true;
      return KC_EIO;
    }
    if (reply) return take_reply(c, reply, out, why, wl);
    char in[16384];
    pipe_guard g;
    pipe_block(&g);
    long r = kc__tls_io(c->ssl, false, in, sizeof in, &want, why, wl);
    pipe_restore(&g);
    if (r < 0) goto io;
    if (r > 0) {
      got += (uint64_t)r;
      if (c->max_reply && got > c->max_reply) {
        snprintf(why, wl, "receiving: a reply longer than %llu bytes (the largest entry, %s, and room)",
                 (unsigned long long)c->max_reply, "KC_REMOTE_MAX_ENTRY");
        c->broken = true;
        return KC_EIO;
      }
      if (kc__hr.reader_feed(c->reader, in, (size_t)r) != 0) {
        snprintf(why, wl, "receiving: out of memory");
        c->broken = true;
        return KC_EIO;
      }
      budget += (uint64_t)r * KC__NS_PER_BYTE;
      last = kc__now_ns();
      continue;
    }
    uint64_t dl = last + c->timeout_ns < budget ? last + c->timeout_ns : budget;
    if (wait_fd(c->fd, want, dl) <= 0) goto timeout;
  }
io:
  c->broken = true;
  {
    char m[512];
    snprintf(m, sizeof m, "%s", why);
    snprintf(why, wl, "%s: %s", what, m);
  }
  return KC_EIO;
timeout:
  c->broken = true;
  c->timed_out = true;
  snprintf(why, wl, "no answer within %g ms while %s (timeout)", (double)c->timeout_ns / 1e6, what);
  return KC_EIO;
}

kc_status kc__rconn_cmd(kc__rconn *c, int argc, const char *const *argv, const size_t *lens, kc__rreply *out,
                        char *why, size_t wl) {
  memset(out, 0, sizeof *out);
  c->redirect[0] = 0;
  if (c->broken) {
    snprintf(why, wl, "connection already failed");
    return KC_EIO;
  }
  if (c->asking) { /* a cluster's ASK redirection: ASKING before each command */
    kc__rreply a;
    static const char asking[] = "ASKING";
    const char *aargv[] = {asking};
    const size_t alens[] = {sizeof asking - 1};
    c->asking = false;
    kc_status st = kc__rconn_cmd(c, 1, aargv, alens, &a, why, wl);
    c->asking = true;
    if (st) return st;
    kc__rreply_free(c->heap, &a);
  }
  if (c->ssl) return tls_cmd(c, argc, argv, lens, out, why, wl);
  uint64_t bytes = 0;
  for (int i = 0; i < argc; i++) bytes += lens[i] + 16;
  if (kc__hr.append_argv(c->ctx, argc, (const char **)argv, lens) != 0) {
    c->broken = true;
    ctx_why(c->ctx, "formatting a command", why, wl);
    return KC_EIO;
  }
  uint64_t now = kc__now_ns(), last = now;
  uint64_t base = now + c->timeout_ns;
  if (c->cap && c->cap < base) base = c->cap;
  uint64_t budget = base + bytes * KC__NS_PER_BYTE;
  const char *what = "sending";
  for (int done = 0; !done;) {
    pipe_guard g;
    pipe_block(&g);
    int r = kc__hr.buffer_write(c->ctx, &done);
    pipe_restore(&g);
    if (r != 0) goto io;
    if (done) break;
    last = kc__now_ns();
    uint64_t dl = last + c->timeout_ns < budget ? last + c->timeout_ns : budget;
    int w = wait_fd(c->fd, POLLOUT, dl);
    if (w <= 0) goto timeout;
  }
  what = "receiving";
  last = kc__now_ns();
  uint64_t got = 0; /* bytes of this reply */
  for (;;) {
    void *reply = NULL;
    if (kc__hr.get_reply(c->ctx, &reply) != 0) goto io;
    if (reply) return take_reply(c, reply, out, why, wl);
    int avail = 0;
    if (ioctl(c->fd, FIONREAD, &avail) != 0 || avail <= 0) {
      uint64_t dl = last + c->timeout_ns < budget ? last + c->timeout_ns : budget;
      int w = wait_fd(c->fd, POLLIN, dl);
      if (w <= 0) goto timeout;
      if (ioctl(c->fd, FIONREAD, &avail) != 0) avail = 0;
    }
    if (avail > 0) {
      budget += (uint64_t)avail * KC__NS_PER_BYTE;
      last = kc__now_ns();
      got += (uint64_t)avail;
      if (c->max_reply && got > c->max_reply) {
        c->broken = true;
        snprintf(why, wl, "receiving: a reply longer than %llu bytes (the largest entry, %s, and room)",
                 (unsigned long long)c->max_reply, "KC_REMOTE_MAX_ENTRY");
        return KC_EIO;
      }
    }
    if (kc__hr.buffer_read(c->ctx) != 0) goto io;
  }
io:
  c->broken = true;
  ctx_why(c->ctx, what, why, wl);
  return KC_EIO;
timeout:
  c->broken = true;
  c->timed_out = true;
  snprintf(why, wl, "no answer within %g ms while %s (timeout)", (double)c->timeout_ns / 1e6, what);
  return KC_EIO;
}

kc_status kc__rconn_cmdv(kc__rconn *c, kc__rreply *out, char *why, size_t wl, ...) {
  const char *argv[16];
  size_t lens[16];
  int argc = 0;
  va_list ap;
  va_start(ap, wl);
  for (const char *a; argc < 16 && (a = va_arg(ap, const char *));) {
    argv[argc] = a;
    lens[argc++] = strlen(a);
  }
  va_end(ap);
  return kc__rconn_cmd(c, argc, argv, lens, out, why, wl);
}

void kc__rconn_close(kc__rconn *c) {
  if (!c) return;
  if (c->ctx) kc__hr.free_ctx(c->ctx);
  kc__tls_free(c->ssl);
  if (!c->ctx && c->fd >= 0) close(c->fd);
  if (c->reader) kc__hr.reader_free(c->reader);
  kc__tls_ctx_free(c->own_tls);
  kc__heap_free(c->heap, c);
}

/* A TCP connection to host:port by the deadline (every address the name
 * resolves to, in turn), non-blocking, into *fd. */
static kc_status tcp_connect(const kc__remote_config *cfg, const char *host, int portn, uint64_t deadline,
                             int *fd, char *why, size_t wl) {
  char port[16];
  snprintf(port, sizeof port, "%d", portn);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int g = getaddrinfo(host, port, &hints, &ai);
  if (g) {
    snprintf(why, wl, "connecting to %s:%d: %s", host, portn, gai_strerror(g));
    return KC_EIO;
  }
  int err = 0;
  bool timed_out = false;
  *fd = -1;
  for (struct addrinfo *a = ai; a && *fd < 0; a = a->ai_next) {
    int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(s, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      err = errno;
      close(s);
      continue;
    }
    int w = wait_fd(s, POLLOUT, deadline), e = 0;
    socklen_t el = sizeof e;
    if (w <= 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e) {
      if (w == 0) timed_out = true;
      err = e ? e : errno;
      close(s);
      if (timed_out) break;
      continue;
    }
    *fd = s;
  }
  freeaddrinfo(ai);
  if (*fd >= 0) return KC_OK;
  if (timed_out)
    snprintf(why, wl, "connecting to %s:%d: no answer within %u ms (timeout)", host, portn, cfg->timeout_ms);
  else snprintf(why, wl, "connecting to %s:%d: %s", host, portn, strerror(err ? err : ECONNREFUSED));
  return KC_EIO;
}

/* Connects c over TLS (rediss://) by the deadline: the socket, the
 * session and its handshake, which verifies the server. */
static kc_status tls_open(kc__rconn *c, const kc__remote_config *cfg, const char *host, int port,
                          uint64_t deadline, char *why, size_t wl) {
  const char *no = kc__tls_unavailable();
  if (no) {
    snprintf(why, wl, "%s", no);
    return KC_EUNAVAILABLE;
  }
  void *ctx = cfg->tls_ctx ? cfg->tls_ctx : c->own_tls; /* made by kc__rconn_open */
  kc_status st;
  if (!(c->reader = kc__hr.reader_create())) {
    snprintf(why, wl, "out of memory");
    return KC_ENOMEM;
  }
  if ((st = tcp_connect(cfg, host, port, deadline, &c->fd, why, wl))) return st;
  const char *name = cfg->tls_name[0] ? cfg->tls_name : host;
  char m[512];
  if ((st = kc__tls_new(ctx, c->fd, name, &c->ssl, m, sizeof m))) {
    snprintf(why, wl, "connecting to %s:%d: %s", host, port, m);
    return st;
  }
  for (;;) {
    short want = 0;
    pipe_guard g;
    pipe_block(&g);
    int r = kc__tls_handshake(c->ssl, name, &want, m, sizeof m);
    pipe_restore(&g);
    if (r > 0) return KC_OK;
    if (r < 0) {
      snprintf(why, wl, "connecting to %s:%d: %s", host, port, m);
      return KC_EIO;
    }
    int w = wait_fd(c->fd, want, deadline);
    if (w <= 0) {
      if (w == 0)
        snprintf(why, wl, "connecting to %s:%d: no TLS handshake within %u ms (timeout)", host, port,
                 cfg->timeout_ms);
      else snprintf(why, wl, "connecting to %s:%d: %s", host, port, strerror(errno));
      return KC_EIO;
    }
  }
}

/* Connects c through hiredis (redis://) by the deadline. */
static kc_status plain_open(kc__rconn *c, const kc__remote_config *cfg, const char *host, int port,
                            uint64_t deadline, char *why, size_t wl) {
  c->ctx = kc__hr.connect_nb(host, port);
  if (!c->ctx) {
    snprintf(why, wl, "out of memory connecting");
    return KC_ENOMEM;
  }
  char what[400];
  snprintf(what, sizeof what, "connecting to %s:%d", host, port);
  if (HR_CTX(c->ctx, err)) {
    ctx_why(c->ctx, what, why, wl);
    return KC_EIO;
  }
  c->fd = HR_CTX(c->ctx, fd);
  int w = wait_fd(c->fd, POLLOUT, deadline), err = 0;
  socklen_t el = sizeof err;
  if (w <= 0 || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
    if (w == 0) snprintf(why, wl, "%s: no answer within %u ms (timeout)", what, cfg->timeout_ms);
    else snprintf(why, wl, "%s: %s", what, strerror(err ? err : errno));
    return KC_EIO;
  }
  return KC_OK;
}

kc_status kc__rconn_open(const kc__heap *heap, const kc__remote_config *cfg, kc__rconn **out, char *why,
                         size_t wl) {
  return kc__rconn_open_at(heap, cfg, cfg->host, cfg->port, out, why, wl);
}

kc_status kc__rconn_open_at(const kc__heap *heap, const kc__remote_config *cfg, const char *host, int port,
                            kc__rconn **out, char *why, size_t wl) {
  *out = NULL;
  const char *no = kc__hiredis_unavailable(cfg->hiredis_lib);
  if (no) {
    snprintf(why, wl, "%s", no);
    return KC_EUNAVAILABLE;
  }
  kc__rconn *c = kc__heap_calloc(heap, sizeof *c);
  if (!c) {
    snprintf(why, wl, "out of memory");
    return KC_ENOMEM;
  }
  c->heap = heap;
  c->pid = getpid();
  c->timeout_ns = (uint64_t)cfg->timeout_ms * 1000000u;
  /* no reply a client of kcache's asks for is longer than an entry (GETRANGE
   * bounds it on the server) and a page of SCAN or a cluster's map: one
   * that is (a server that is not Redis, or a spoofed one) is not read on
   * into memory */
  c->max_reply = cfg->max_entry ? cfg->max_entry + KC__REPLY_ROOM : 0;
  c->fd = -1;
  if (cfg->tls && !cfg->tls_ctx &&
      !kc__tls_unavailable()) { /* its own client context, before the clock starts */
    kc_status st = kc__tls_ctx_new(cfg, &c->own_tls, why, wl);
    if (st) {
      kc__rconn_close(c);
      return st;
    }
  }
  uint64_t deadline = kc__now_ns() + c->timeout_ns;
  kc_status cs = cfg->tls ? tls_open(c, cfg, host, port, deadline, why, wl)
                          : plain_open(c, cfg, host, port, deadline, why, wl);
  if (cs) {
    kc__rconn_close(c);
    return cs;
  }
  kc__rreply r;
  kc_status st = KC_OK;
  c->cap = deadline; /* connect, AUTH and SELECT: one timeout in all */
  if (cfg->has_password) {
    st = cfg->user[0] ? kc__rconn_cmdv(c, &r, why, wl, "AUTH", cfg->user, cfg->password, (char *)NULL)
                      : kc__rconn_cmdv(c, &r, why, wl, "AUTH", cfg->password, (char *)NULL);
    if (!st && r.type == KC__R_ERROR) {
      snprintf(why, wl, "authentication failed (check the user and password in the URL): %s", r.str);
      st = KC_EINVAL;
    }
    if (st != KC_EIO) kc__rreply_free(heap, &r);
  }
  if (!st && cfg->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", cfg->db);
    st = kc__rconn_cmdv(c, &r, why, wl, "SELECT", db, (char *)NULL);
    if (!st && r.type == KC__R_ERROR) {
      snprintf(why, wl, "SELECT %d failed: %s", cfg->db, r.str);
      st = KC_EINVAL;
    }
    if (st != KC_EIO) kc__rreply_free(heap, &r);
  }
  if (st) {
    kc__rconn_close(c);
    return st;
  }
  c->cap = 0;
  *out = c;
  return KC_OK;
}
