/* SPDX-License-Identifier: MIT */
/*
 * remote/cluster.c -- owns where a command goes: the tier's nodes (the one
 * server, or a Redis Cluster's), their pools of idle connections, and a
 * cluster's slot map (read with CLUSTER SLOTS from any node that answers,
 * again after a MOVED or a failure, at most every KC__MAP_REFRESH_NS),
 * key slots (CRC16, hash tags), and the MOVED / ASK redirections. No lock
 * is held while waiting for the network: one thread at a time reads the
 * map (map_busy) while the others go on with the old one.
 */
#include "remote/internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ------------------------------------------------------------- slots */

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster's
 * specification names it: CRC16("123456789") = 0x31C3. */
static unsigned crc16(const char *s, size_t n) {
  unsigned crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (unsigned)(unsigned char)s[i] << 8;
    for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1 ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

unsigned kc__keyslot(const char *key, size_t n) {
  const char *open = memchr(key, '{', n);
  if (open) {
    const char *close = memchr(open + 1, '}', n - (size_t)(open + 1 - key));
    if (close && close > open + 1) return crc16(open + 1, (size_t)(close - open - 1)) & (KC__SLOTS - 1);
  }
  return crc16(key, n) & (KC__SLOTS - 1);
}

bool kc__cluster_slots_each(const kc__rreply *rep, const char *asked_host, kc__slots_fn fn, void *ud) {
  if (rep->type != KC__R_ARRAY) return false;
  for (size_t i = 0; i < rep->n; i++) {
    const kc__rreply *e = &rep->elem[i];
    if (e->type != KC__R_ARRAY || e->n < 3 || e->elem[0].type != KC__R_INTEGER ||
        e->elem[1].type != KC__R_INTEGER || e->elem[2].type != KC__R_ARRAY || e->elem[2].n < 2 ||
        e->elem[2].elem[0].type != KC__R_STRING || e->elem[2].elem[1].type != KC__R_INTEGER)
      return false;
    long long lo = e->elem[0].integer, hi = e->elem[1].integer, port = e->elem[2].elem[1].integer;
    if (lo < 0 || hi < lo || hi >= KC__SLOTS || port < 1 || port > 65535) return false;
    const char *host = e->elem[2].elem[0].str;
    if (!host[0] || !strcmp(host, "?")) host = asked_host; /* a node that does not know its address */
    if (!fn(ud, (int)lo, (int)hi, host, (int)port)) return false;
  }
  return true;
}

bool kc__redirect_parse(const char *err, bool *ask, int *slot, char *host, size_t hl, int *port) {
  if (!strncmp(err, "MOVED ", 6)) *ask = false, err += 6;
  else if (!strncmp(err, "ASK ", 4)) *ask = true, err += 4;
  else return false;
  char *e;
  long s = strtol(err, &e, 10);
  if (e == err || *e != ' ' || s < 0 || s >= KC__SLOTS) return false;
  const char *addr = e + 1, *colon = strrchr(addr, ':');
  /* (an empty host or "?": cluster-preferred-endpoint-type unknown-endpoint, the node that answered) */
  if (!colon || (size_t)(colon - addr) >= hl) return false;
  long p = strtol(colon + 1, &e, 10);
  if (e == colon + 1 || (*e && *e != ' ') || p < 1 || p > 65535) return false;
  const char *h = addr;
  size_t len = (size_t)(colon - addr);
  if (h[0] == '[' && len >= 2 && h[len - 1] == ']') h++, len -= 2; /* [IPv6] */
  snprintf(host, hl, "%.*s", (int)len, h);
  *slot = (int)s;
  *port = (int)p;
  return true;
}

/* ------------------------------------------------------------- nodes */

bool kc__nodes_init(kc__remote *r) {
  int cap = r->cfg.cluster ? KC__MAX_NODES : 1;
  r->nodes = kc__heap_calloc(&r->heap, (size_t)cap * sizeof *r->nodes);
  r->brk = kc__heap_calloc(&r->heap, (size_t)(r->cfg.cluster ? cap + 1 : 1) * sizeof *r->brk);
  if (!r->nodes || !r->brk) {
    kc__heap_free(&r->heap, r->nodes);
    kc__heap_free(&r->heap, r->brk);
    r->nodes = NULL;
    r->brk = NULL;
    return false;
  }
  snprintf(r->nodes[0].host, sizeof r->nodes[0].host, "%s", r->cfg.host);
  r->nodes[0].port = r->cfg.port;
  r->nnodes = 1;
  if (r->cfg.cluster) {
    if (!(r->slot_node = kc__heap_alloc(&r->heap, KC__SLOTS))) {
      kc__heap_free(&r->heap, r->nodes);
      kc__heap_free(&r->heap, r->brk);
      r->nodes = NULL;
      r->brk = NULL;
      return false;
    }
    memset(r->slot_node, KC__NO_NODE, KC__SLOTS);
    r->map_stale = 1;
  }
  return true;
}

void kc__nodes_free(kc__remote *r) {
  for (int i = 0; r->nodes && i < r->nnodes; i++)
    for (kc__rconn *c = r->nodes[i].idle, *next; c; c = next) {
      next = c->next;
      kc__rconn_close(c);
    }
  kc__heap_free(&r->heap, r->nodes);
  kc__heap_free(&r->heap, r->slot_node);
  kc__heap_free(&r->heap, r->brk);
  r->nodes = NULL;
  r->slot_node = NULL;
  r->brk = NULL;
}

kc__rbreaker *kc__pool_breaker(kc__remote *r, unsigned slot) {
  if (!r->cfg.cluster) return &r->brk[0];
  kc__lock(&r->pool_lock);
  unsigned i = r->slot_node[slot & (KC__SLOTS - 1)];
  kc__unlock(&r->pool_lock);
  return &r->brk[i == KC__NO_NODE ? KC__MAX_NODES : i];
}

/* The index of host:port among r's nodes, added when new; -1 when the
 * table is full. Under pool_lock. */
static int node_index(kc__remote *r, const char *host, int port) {
  for (int i = 0; i < r->nnodes; i++)
    if (r->nodes[i].port == port && !strcmp(r->nodes[i].host, host)) return i;
  if (r->nnodes >= (r->cfg.cluster ? KC__MAX_NODES : 1) || strlen(host) >= sizeof r->nodes[0].host) return -1;
  kc__rnode *n = &r->nodes[r->nnodes];
  snprintf(n->host, sizeof n->host, "%s", host);
  n->port = port;
  n->idle = NULL;
  n->nidle = 0;
  return r->nnodes++;
}

/* Whether the server closed an idle connection since it was pooled (its
 * `timeout`, a proxy or NAT that drops quiet connections, a restart): its
 * socket then reads as ended or failed, or holds bytes no command asked
 * for (a TLS close_notify). One peek that does not wait. A connection that
 * dies between this look and its next command is caught by the caller's
 * retry (kc__rconn.reused). */
static bool idle_closed(const kc__rconn *c) {
  char b;
  ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* An idle connection to node i of this process, or NULL. Under pool_lock. */
static kc__rconn *idle_take(kc__remote *r, int i) {
  pid_t me = getpid();
  kc__rnode *n = &r->nodes[i];
  while (n->idle) {
    kc__rconn *c = n->idle;
    n->idle = c->next;
    n->nidle--;
    if (c->pid == me && !idle_closed(c)) {
      c->reused = true;
      return c;
    }
    kc__rconn_close(c); /* inherited across fork (the parent's socket: closed here, no I/O), or closed */
  }
  return NULL;
}

/* Closes node's idle connections. */
static void drop_idle(kc__remote *r, int node) {
  if (node < 0) return;
  kc__lock(&r->pool_lock);
  kc__rnode *n = &r->nodes[node];
  kc__rconn *list = n->idle;
  n->idle = NULL;
  n->nidle = 0;
  kc__unlock(&r->pool_lock);
  for (kc__rconn *c = list, *next; c; c = next) {
    next = c->next;
    kc__rconn_close(c); /* (a parent's socket in a child: closed, no I/O) */
  }
}

/* A connection to node i: idle, else new (slow: within lock_deadline_ms). */
static kc__rconn *node_conn(kc__remote *r, int i, bool slow, char *why, size_t wl, kc_status *st) {
  char host[256];
  int port;
  kc__lock(&r->pool_lock);
  kc__rconn *c = idle_take(r, i);
  snprintf(host, sizeof host, "%s", r->nodes[i].host);
  port = r->nodes[i].port;
  kc__unlock(&r->pool_lock);
  if (!c && slow) {
    kc__remote_config *cfg = kc__heap_alloc(&r->heap, sizeof *cfg);
    if (!cfg) {
      snprintf(why, wl, "out of memory");
      *st = KC_ENOMEM;
      return NULL;
    }
    *cfg = r->cfg;
    cfg->timeout_ms = cfg->lock_deadline_ms;
    *st = kc__rconn_open_at(&r->heap, cfg, host, port, &c, why, wl);
    kc__wipe(cfg, sizeof *cfg);
    kc__heap_free(&r->heap, cfg);
    if (c) c->timeout_ns = (uint64_t)r->cfg.timeout_ms * 1000000u;
  } else if (!c) {
    *st = kc__rconn_open_at(&r->heap, &r->cfg, host, port, &c, why, wl);
  }
  if (c) c->node = i;
  return c;
}

void kc__pool_put(kc__remote *r, kc__rconn *c) {
  if (!c) return;
  if (!c->broken && !c->asking && c->node >= 0) {
    c->redirect[0] = 0;
    kc__lock(&r->pool_lock);
    kc__rnode *n = &r->nodes[c->node];
    if (n->nidle < KC__POOL_IDLE) {
      c->next = n->idle;
      n->idle = c;
      n->nidle++;
      c = NULL;
    }
    kc__unlock(&r->pool_lock);
  }
  kc__rconn_close(c);
}

/* ---------------------------------------------------------- the map */

typedef struct map_fill {
  kc__remote *r;
  uint8_t *map;
} map_fill;

static bool map_range(void *ud, int first, int last, const char *host, int port) {
  map_fill *f = ud;
  kc__lock(&f->r->pool_lock);
  int i = node_index(f->r, host, port);
  kc__unlock(&f->r->pool_lock);
  if (i >= 0) memset(f->map + first, i, (size_t)(last - first + 1));
  return true;
}

/* Asks node i for the slot map: true when it answered one (then in map). */
static bool map_ask(kc__remote *r, int i, uint8_t *map, char *why, size_t wl) {
  kc_status st = KC_OK;
  kc__rconn *c = node_conn(r, i, false, why, wl, &st);
  if (!c) return false;
  char host[256];
  kc__lock(&r->pool_lock);
  snprintf(host, sizeof host, "%s", r->nodes[i].host);
  int port = r->nodes[i].port;
  kc__unlock(&r->pool_lock);
  kc__rreply rep;
  bool ok = false;
  if (kc__rconn_cmdv(c, &rep, why, wl, "CLUSTER", "SLOTS", (char *)NULL) == KC_OK) {
    memset(map, KC__NO_NODE, KC__SLOTS);
    map_fill f = {r, map};
    if (rep.type == KC__R_ERROR) snprintf(why, wl, "CLUSTER SLOTS on %s:%d: %s", host, port, rep.str);
    else if (!(ok = kc__cluster_slots_each(&rep, host, map_range, &f)))
      snprintf(why, wl, "CLUSTER SLOTS on %s:%d: a reply kcache does not understand", host, port);
    kc__rreply_free(&r->heap, &rep);
  }
  kc__pool_put(r, c);
  return ok;
}

/* Reads the slot map from the first node (known, then the seeds) that
 * answers, trying at most four. */
static void map_refresh(kc__remote *r, char *why, size_t wl) {
  uint8_t *map = kc__heap_alloc(&r->heap, KC__SLOTS);
  if (!map) {
    snprintf(why, wl, "out of memory reading the slot map");
    return;
  }
  for (int s = 0; s < r->cfg.nseeds; s++) { /* the seeds are nodes too */
    kc__lock(&r->pool_lock);
    node_index(r, r->cfg.seed_host[s], r->cfg.seed_port[s]);
    kc__unlock(&r->pool_lock);
  }
  kc__lock(&r->pool_lock);
  int n = r->nnodes;
  kc__unlock(&r->pool_lock);
  /* the reports of a stale map so far: those made while this reads it are
   * kept (the map read may predate what they saw) */
  int stale0 = atomic_load(&r->map_stale);
  uint32_t turn = atomic_fetch_add(&r->map_turn, 1);
  bool ok = false;
  int k = 0;
  for (; k < n && k < 4 && !ok; k++) ok = map_ask(r, (int)((turn + (uint32_t)k) % (uint32_t)n), map, why, wl);
  if (ok) {
    kc__lock(&r->pool_lock);
    memcpy(r->slot_node, map, KC__SLOTS);
    kc__unlock(&r->pool_lock);
    atomic_compare_exchange_strong(&r->map_stale, &stale0, 0);
    /* the next reading starts at the node that answered: a seed that is
     * down is not asked first every time */
    atomic_store(&r->map_turn, turn + (uint32_t)k - 1);
  }
  kc__heap_free(&r->heap, map);
}

static kc__rconn *pool_get(kc__remote *r, unsigned slot, bool slow, char *why, size_t wl, kc_status *st) {
  *st = KC_OK;
  if (wl) why[0] = 0;
  int i = 0;
  if (r->cfg.cluster) {
    uint64_t now = kc__now_ns();
    int busy = 0;
    if (atomic_load(&r->map_stale) && now >= atomic_load(&r->map_next) &&
        atomic_compare_exchange_strong(&r->map_busy, &busy, 1)) {
      atomic_store(&r->map_next, now + KC__MAP_REFRESH_NS);
      map_refresh(r, why, wl);
      atomic_store(&r->map_busy, 0);
    }
    /* a map being read for the first time: wait for it, within the timeout */
    uint64_t until = now + (uint64_t)r->cfg.timeout_ms * 1000000u;
    for (;;) {
      kc__lock(&r->pool_lock);
      i = r->slot_node[slot & (KC__SLOTS - 1)];
      kc__unlock(&r->pool_lock);
      if (i != (int)KC__NO_NODE || !atomic_load(&r->map_busy) || kc__now_ns() >= until) break;
      kc__nap_ns(100000);
    }
    if (i == (int)KC__NO_NODE) {
      char m[512];
      snprintf(m, sizeof m, "%s", why);
      snprintf(why, wl, "no node of the cluster is known to serve slot %u (%s)", slot,
               m[0] ? m : "the slot map is being read, or the slot is not served");
      *st = KC_EIO;
      return NULL;
    }
  }
  return node_conn(r, i, slow, why, wl, st);
}

kc__rconn *kc__pool_get(kc__remote *r, unsigned slot, char *why, size_t wl, kc_status *st) {
  return pool_get(r, slot, false, why, wl, st);
}

kc__rconn *kc__pool_get_slow(kc__remote *r, unsigned slot, char *why, size_t wl, kc_status *st) {
  return pool_get(r, slot, true, why, wl, st);
}

kc__rconn *kc__pool_renew(kc__remote *r, kc__rconn *c, unsigned slot, bool slow, char *why, size_t wl,
                          kc_status *st) {
  int node = c->node;
  kc__pool_put(r, c); /* broken: closed */
  drop_idle(r, node);
  return pool_get(r, slot, slow, why, wl, st);
}

kc__rconn *kc__pool_redirect(kc__remote *r, kc__rconn *c, unsigned slot, char *why, size_t wl) {
  bool ask;
  int s, port;
  char host[256];
  if (!r->cfg.cluster || !kc__redirect_parse(c->redirect, &ask, &s, host, sizeof host, &port)) {
    snprintf(why, wl, "a redirection kcache cannot follow: %s", c->redirect);
    kc__pool_put(r, c);
    return NULL;
  }
  if ((!host[0] || !strcmp(host, "?")) && c->node >= 0) { /* an unknown endpoint: the node that answered */
    kc__lock(&r->pool_lock);
    if (c->node < r->nnodes) snprintf(host, sizeof host, "%s", r->nodes[c->node].host);
    kc__unlock(&r->pool_lock);
  }
  kc__pool_put(r, c);
  kc_status st = KC_OK;
  if (ask) { /* the slot moves now: this key is on the importing node, asked with ASKING */
    kc__rconn *a = NULL;
    if (kc__rconn_open_at(&r->heap, &r->cfg, host, port, &a, why, wl)) return NULL;
    a->node = -1;
    a->asking = true;
    return a;
  }
  kc__lock(&r->pool_lock);
  int i = node_index(r, host, port);
  if (i >= 0) r->slot_node[s] = (uint8_t)i;
  kc__unlock(&r->pool_lock);
  atomic_fetch_add(&r->map_stale, 1); /* others moved too, likely */
  return kc__pool_get(r, slot, why, wl, &st);
}

void kc__pool_failed(kc__remote *r) {
  if (r->cfg.cluster) atomic_fetch_add(&r->map_stale, 1);
}
