/* SPDX-License-Identifier: MIT */
/*
 * remote/internal.h -- what the files of src/remote/ share and nothing else
 * sees: the hiredis function table and its two ABIs' structures
 * (hiredis.c), a connection's layout (conn.c), the tier's state and its
 * upload jobs (tier.c), which run on a job queue (queue.h).
 */
#ifndef KC_REMOTE_INTERNAL_H
#define KC_REMOTE_INTERNAL_H

#include "remote/remote.h"
#include "remote/queue.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Uploads (and deferred work) queue at most this much; releases of a lock
 * alone are always queued. */
#define KC__QUEUE_JOBS 64u
#define KC__QUEUE_BYTES (256ull << 20)
/* Idle connections kept per runtime. */
#define KC__POOL_IDLE 4
/* Polls while another machine compiles: from 2 ms, doubling, up to 50 ms. */
#define KC__POLL_FIRST_NS 2000000ull
#define KC__POLL_MAX_NS 50000000ull
/* Time earned per byte moved: 20 ns, i.e. at least 50 MB/s. */
#define KC__NS_PER_BYTE 20ull
/* How often a lookup takes the lock again when it was gone right after SET
 * NX failed (expired in between) before it gives up on the server. */
#define KC__LOCK_GONE_MAX 8
/* What a reply may hold beyond the largest entry: a page of SCAN, a
 * cluster's map, an entry's framing (kc__rconn.max_reply). */
#define KC__REPLY_ROOM (1ull << 20)

/* ---------------------------------------------------------- utilities */

static inline void kc__wipe(void *p, size_t n) {
  volatile uint8_t *v = p;
  while (n--) *v++ = 0;
}

static inline uint64_t kc__random64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = kc__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&v;
  return v ? v : 1;
}

/* A lock's token: when it was taken (kc__now_ns in ms, the high 40 bits)
 * and 24 random bits, so that the upload that releases it knows how long
 * the compile under it took (kc__remote_observe). Only this process reads
 * the time back; to everyone else it is a unique value. */
static inline uint64_t kc__lock_token(void) {
  return (kc__now_ns() / 1000000u) << 24 | (kc__random64() & 0xffffffu);
}

/* ------------------------------------------------------------- hiredis */

/* The parts of hiredis' structures that kcache reads, for the two ABIs it
 * knows. 0.14 (Debian 12): the context starts with err; 1.x: with a
 * function table. 1.x replies carry dval and vtype. Only these prefixes are
 * declared; the library allocates the objects. */
typedef struct hr_ctx0 {
  int err;
  char errstr[128];
  int fd;
  int flags;
} hr_ctx0;
typedef struct hr_ctx1 {
  const void *funcs;
  int err;
  char errstr[128];
  int fd;
  int flags;
} hr_ctx1;
typedef struct hr_reply0 {
  int type;
  long long integer;
  size_t len;
  char *str;
  size_t elements;
  struct hr_reply0 **element;
} hr_reply0;
typedef struct hr_reply1 {
  int type;
  long long integer;
  double dval;
  size_t len;
  char *str;
  char vtype[4];
  size_t elements;
  struct hr_reply1 **element;
} hr_reply1;

/* The library's functions, loaded once (kc__hiredis_unavailable). */
typedef struct kc__hr_table {
  void *(*connect_nb)(const char *ip, int port);
  void *(*connect_fd)(int fd);
  void (*free_ctx)(void *c);
  int (*append_argv)(void *c, int argc, const char **argv, const size_t *lens);
  int (*buffer_write)(void *c, int *done);
  int (*buffer_read)(void *c);
  int (*get_reply)(void *c, void **reply);
  void (*free_reply)(void *r);
  void *(*reader_create)(void);
  int (*reader_feed)(void *r, const char *buf, size_t len);
  int (*reader_get_reply)(void *r, void **reply);
  void (*reader_free)(void *r);
  int abi; /* 0: 0.14, 1: 1.x */
  char name[300];
  const char *why;
  char whybuf[600];
} kc__hr_table;
extern kc__hr_table kc__hr;

#define HR_CTX(c, f) (kc__hr.abi ? ((hr_ctx1 *)(c))->f : ((hr_ctx0 *)(c))->f)

typedef struct hr_view {
  int type;
  long long integer;
  size_t len;
  const char *str;
  size_t elements;
  void **element;
} hr_view;

static inline hr_view hr_reply(const void *p) {
  hr_view v;
  if (kc__hr.abi) {
    const hr_reply1 *r = p;
    v = (hr_view){r->type, r->integer, r->len, r->str, r->elements, (void **)r->element};
  } else {
    const hr_reply0 *r = p;
    v = (hr_view){r->type, r->integer, r->len, r->str, r->elements, (void **)r->element};
  }
  return v;
}

/* ---------------------------------------------------------- connection */

struct kc__rconn {
  const kc__heap *heap; /* its allocator: the tier's, or NULL (libc: the CLI) */
  void *ctx; /* hiredis' context (redis://); NULL over TLS */
  int fd;
  void *ssl; /* rediss://: the TLS session on fd (tls.c), */
  void *reader; /* hiredis' reply reader that its bytes are fed to, */
  void *own_tls; /* and the client context, when cfg.tls_ctx had none */
  pid_t pid; /* a connection made before a fork is not the child's to use */
  uint64_t timeout_ns;
  uint64_t cap; /* nonzero: no command waits past this (one deadline for several commands) */
  bool broken;
  bool timed_out; /* it broke because an answer did not come in time */
  bool reused; /* taken from the idle pool (it may have been closed by the server since) */
  uint64_t max_reply; /* nonzero: a reply longer than this breaks it (cfg.max_entry plus room) */
  /* a cluster's: the node it is to (kc__remote.nodes), ASKING before each
   * command (a connection for one ASK redirection, never pooled), and the
   * last MOVED or ASK error it got ("": none) */
  int node;
  bool asking;
  char redirect[300];
  kc__rconn *next; /* the idle list */
};

/* ----------------------------------------------------------------- TLS */

/* tls.c: libssl, opened once. NULL when it can be used, else why not. */
const char *kc__tls_unavailable(void);
/* A client context (an SSL_CTX) for cfg's CA, client certificate and key;
 * verification of the server's certificate on. KC_EUNAVAILABLE, KC_EINVAL
 * or KC_ENOMEM with why. */
kc_status kc__tls_ctx_new(const kc__remote_config *cfg, void **out, char *why, size_t wl);
void kc__tls_ctx_free(void *ctx);
/* A session on the connected socket fd that verifies `name` (a host name:
 * also sent as SNI; an address: against the certificate's IP entries). */
kc_status kc__tls_new(void *ctx, int fd, const char *name, void **out, char *why, size_t wl);
void kc__tls_free(void *s);
/* One step of the handshake: 1 done; 0 not yet, wait for *want (POLLIN or
 * POLLOUT) on fd; -1 failed, with why naming the reason (a certificate
 * refused: unknown CA, expired, not for `name`). */
int kc__tls_handshake(void *s, const char *name, short *want, char *why, size_t wl);
/* Reads or writes at most n bytes: how many (> 0); 0: wait for *want; -1
 * failed, with why. Never blocks (fd is non-blocking). */
long kc__tls_io(void *s, bool write, void *buf, size_t n, short *want, char *why, size_t wl);

/* --------------------------------------------------------------- nodes */

/* Nodes a cluster may have (a node past them serves no lookups). */
#define KC__MAX_NODES 64
#define KC__NO_NODE 0xffu
/* The slot map is read again at most this often (a MOVED, a failure). */
#define KC__MAP_REFRESH_NS 100000000ull

/* A circuit breaker (tier.c's breaker_*). */
typedef struct kc__rbreaker {
  _Atomic uint32_t fails; /* consecutive failures */
  _Atomic uint64_t open_until; /* monotonic ns; 0: closed */
  _Atomic int trial; /* a half-open trial is under way */
} kc__rbreaker;

typedef struct kc__rnode {
  char host[256];
  int port;
  kc__rconn *idle; /* at most KC__POOL_IDLE */
  int nidle;
} kc__rnode;

/* ---------------------------------------------------------------- tier */

enum {
#define KC__X(ID, name) RC_##ID,
  KC__REMOTE_COUNTERS(KC__X)
#undef KC__X
      KC__NRC
};

typedef struct upjob {
  kc__job job; /* first: the queue's part (bounded: an image or deferred work) */
  uint8_t key[16];
  void *image; /* NULL: only the lock */
  size_t size;
  uint64_t lock;
  bool signed_; /* image carries its MAC trailer now (size counts it) */
  kc__remote_defer_fn fn; /* instead: work for the cache (kc__remote_defer) */
  void *ud;
} upjob;

struct kc__remote {
  kc__heap heap; /* its allocator (the runtime's), a copy */
  kc__log_sink log; /* where its warnings go (the runtime's log), a copy, if has_log */
  bool has_log; /* else: stderr at $KC_LOG's level */
  kc__remote_config cfg;
  char *vdir;
  char ident[128]; /* "host:pid": who holds a lock */
  pid_t pid;
  /* the circuit breakers: the server's, or one per node of a cluster (and
   * one more for slots whose owner is not known), cluster.c's
   * kc__pool_breaker */
  kc__rbreaker *brk;
  _Atomic int warned_error, warned_reject, warned_squat, warned_slow;
  /* the longest compile seen under a lock here, decaying (kc__remote_observe): ms, 0 none */
  _Atomic uint64_t est_ms;
  _Atomic uint64_t c[KC__NRC]; /* this runtime's counters (RC_*) */
  /* the nodes, their idle connections, and a cluster's slot map (cluster.c) */
  kc__mutex pool_lock; /* leaf: nodes, nnodes, each node's idle list, slot_node */
  kc__rnode *nodes; /* one (the server), or up to KC__MAX_NODES of a cluster */
  int nnodes;
  uint8_t *slot_node; /* a cluster's: each slot's node, KC__NO_NODE: not known */
  _Atomic int map_busy; /* a thread reads the slot map from the cluster now */
  _Atomic int map_stale; /* nonzero: read it again (reports of a MOVED, a failure; never read) */
  _Atomic uint64_t map_next; /* not before this time (monotonic ns) */
  _Atomic uint32_t map_turn; /* which known node is asked first */
  /* the uploader: upload jobs (upjob) on a job queue */
  kc__jobq queue;
  kc__fork_hook fork; /* the queue and the pool around fork() */
};

/* cluster.c: r's nodes (the server, or a cluster's seeds) and, for a
 * cluster, its empty slot map, read on first use. False: out of memory. */
bool kc__nodes_init(kc__remote *r);
/* Closes every idle connection and frees the nodes and the map. */
void kc__nodes_free(kc__remote *r);
/* A connection to the node that owns slot (the server's for one server):
 * an idle one, else a new one (c->node says which). For a cluster, the slot
 * map is read first when it is stale (at most every KC__MAP_REFRESH_NS).
 * NULL with *st and why when none can be had. */
kc__rconn *kc__pool_get(kc__remote *r, unsigned slot, char *why, size_t wl, kc_status *st);
/* The same, a new connection made within lock_deadline_ms rather than
 * timeout_ms (the single-flight commands' deadline). */
kc__rconn *kc__pool_get_slow(kc__remote *r, unsigned slot, char *why, size_t wl, kc_status *st);
/* The breaker of the node that owns slot (the server's for one server; for
 * a slot whose owner is not known, the cluster's unknown-owner one). */
kc__rbreaker *kc__pool_breaker(kc__remote *r, unsigned slot);
/* Gives c back to its node's idle list (closed if broken, an ASK
 * connection, or the list full). NULL: no-op. */
void kc__pool_put(kc__remote *r, kc__rconn *c);
/* A new connection for slot in place of c, a pooled one that the server
 * had closed (kc__rconn_stale): c is closed, and so are its node's other
 * idle connections, most likely closed by the server too. slow: within
 * lock_deadline_ms (kc__pool_get_slow). NULL with why and *st. */
kc__rconn *kc__pool_renew(kc__remote *r, kc__rconn *c, unsigned slot, bool slow, char *why, size_t wl,
                          kc_status *st);
/* Whether c's last command failed on a pooled connection that the server
 * had closed (an end or reset, not a timeout): the command never ran, and
 * may go again on a new connection. */
static inline bool kc__rconn_stale(const kc__rconn *c) { return c->reused && c->broken && !c->timed_out; }
/* c's last command was answered MOVED or ASK (c->redirect): for MOVED the
 * slot's new owner goes into the map (which is read again soon), for ASK a
 * connection to the node that imports the slot is made, with ASKING. c is
 * given back; the connection to retry on is returned, or NULL with why. */
kc__rconn *kc__pool_redirect(kc__remote *r, kc__rconn *c, unsigned slot, char *why, size_t wl);
/* A command on a cluster's node failed: read the slot map again (soon), a
 * replica may have taken over. No-op for one server. */
void kc__pool_failed(kc__remote *r);

/* estimate.c: a compile under the lock `token` ended (its upload begins): how
 * long it took goes into the estimate that bounds the waits for other
 * machines' locks, this runtime's and vdir/remote-compile (this machine's). */
void kc__remote_observe(kc__remote *r, uint64_t token);
/* estimate.c: how long a lookup waits for another machine's lock without
 * KC_REMOTE_KEY: 4 times the estimate (at least KC__WAIT_FLOOR_MS), never
 * more than the lock timeout; the lock timeout where nothing was seen yet.
 * *est: the estimate. */
#define KC__WAIT_FLOOR_MS 500u
uint32_t kc__remote_wait_bound_ms(kc__remote *r, uint64_t *est);

#endif /* KC_REMOTE_INTERNAL_H */
