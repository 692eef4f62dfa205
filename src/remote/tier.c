/* SPDX-License-Identifier: MIT */
/*
 * remote/tier.c -- owns the tier's state and protocol: opening and closing
 * it (the nodes, their pools and breakers, and where a command goes:
 * cluster.c), the lookup (GET
 * within max_entry, single flight with SET NX PX, polling for another
 * machine's upload), the uploads and deferred work (jobs on the tier's job
 * queue, queue.h: bounded, run by its thread, finished or freed when the
 * tier closes; one upload job is a SET, then a compare-and-delete of the
 * lock), what the tier does around fork(), and the counters (this
 * runtime's and the shared vdir/remote-stats).
 */
#include "remote/internal.h"
#include "base/hmac.h"
#include "base/safeopen.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>

/* ----------------------------------------------------------- counters */

/* The store's remote-stats file: a magic, then the counters in the order
 * of KC__REMOTE_COUNTERS. KCRSTAT1 (kcache 0.2) held the first 9; a file
 * of that layout is read, its later counters 0, and written back as
 * KCRSTAT2. */
#define KC__RCOUNTERS_MAGIC "KCRSTAT2"
#define KC__RCOUNTERS_MAGIC_V1 "KCRSTAT1"
#define KC__NRC_V1 9

static void rcounters_get(const uint8_t *b, ssize_t n, uint64_t v[KC__NRC], bool *valid) {
  memset(v, 0, KC__NRC * sizeof *v);
  int have = 0;
  if (n == 8 + 8 * KC__NRC && !memcmp(b, KC__RCOUNTERS_MAGIC, 8)) have = KC__NRC;
  else if (n == 8 + 8 * KC__NRC_V1 && !memcmp(b, KC__RCOUNTERS_MAGIC_V1, 8)) have = KC__NRC_V1;
  *valid = have > 0;
  for (int i = 0; i < have; i++) v[i] = kc__rd64(b + 8 + 8 * i);
}

void kc__remote_counters_read(const char *vdir, kc__remote_counters *out) {
  memset(out, 0, sizeof *out);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/remote-stats", vdir);
  int fd = kc__open_safe(path, O_RDONLY, 0, false);
  if (fd < 0) return;
  uint8_t b[8 + 8 * KC__NRC];
  flock(fd, LOCK_SH);
  ssize_t n = pread(fd, b, sizeof b, 0);
  flock(fd, LOCK_UN);
  close(fd);
  uint64_t v[KC__NRC];
  rcounters_get(b, n, v, &out->valid);
#define KC__X(ID, name) out->name = v[RC_##ID];
  KC__REMOTE_COUNTERS(KC__X)
#undef KC__X
}

/* Adds d[] (the order of kc__remote_counters) under the file's lock. */
static void rcounters_add(const char *vdir, const uint64_t d[KC__NRC]) {
  if (!vdir) return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/remote-stats", vdir);
  int fd = kc__open_safe(path, O_RDWR | O_CREAT, 0644, false);
  if (fd < 0) return; /* a read-only store: the counters are a hint */
  uint8_t b[8 + 8 * KC__NRC];
  flock(fd, LOCK_EX);
  uint64_t v[KC__NRC];
  bool valid;
  rcounters_get(b, pread(fd, b, sizeof b, 0), v, &valid);
  memcpy(b, KC__RCOUNTERS_MAGIC, 8);
  for (int i = 0; i < KC__NRC; i++) {
    kc__le64(b + 8 + 8 * i, v[i] + d[i]);
  }
  if (pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b) {
    /* a hint only */
  }
  flock(fd, LOCK_UN);
  close(fd);
}

static void kc__remote_count(kc__remote *r, int which, uint64_t n) { kc__fetch_add_relaxed(&r->c[which], n); }

static void kc__remote_count_shared(kc__remote *r, int which, uint64_t n) {
  uint64_t d[KC__NRC] = {0};
  d[which] += n;
  rcounters_add(r->vdir, d);
}

static void KC__PRINTF(3, 4) warn(kc__remote *r, _Atomic int *once, const char *fmt, ...) {
  if (atomic_exchange(once, 1)) return;
  char msg[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  kc__log_to(r->has_log ? &r->log : NULL, KC_LOG_WARN, "remote tier %s: %s", r->cfg.url, msg);
}

/* The breakers: one for the server, one per node of a cluster (so that a
 * dead primary's slots are skipped while the others' are still asked).
 * 0: skip; 1: go on; 2: go on as the trial of a half-open breaker. */
static int breaker_allow(kc__rbreaker *b) {
  uint64_t until = kc__load_acquire(&b->open_until);
  if (KC__LIKELY(until == 0)) return 1;
  if (kc__now_ns() < until) return 0;
  int expect = 0;
  return atomic_compare_exchange_strong(&b->trial, &expect, 1) ? 2 : 0;
}

static void breaker_ok(kc__rbreaker *b, int how) {
  kc__store_relaxed(&b->fails, 0);
  if (how == 2 || kc__load_relaxed(&b->open_until)) {
    kc__store_release(&b->open_until, 0);
    kc__store_release(&b->trial, 0);
  }
}

static void breaker_fail(kc__remote *r, kc__rbreaker *b, int how, const char *why) {
  kc__remote_count(r, RC_ERRORS, 1);
  kc__remote_count_shared(r, RC_ERRORS, 1);
  uint32_t f = kc__fetch_add_relaxed(&b->fails, 1) + 1;
  warn(r, &r->warned_error,
       "%s; launches go on without it (after %u failures in a row it is skipped for %u ms%s)", why,
       KC__REMOTE_BREAKER_FAILURES, r->cfg.retry_ms, r->cfg.cluster ? ", each node on its own" : "");
  if (how == 2 || f >= KC__REMOTE_BREAKER_FAILURES) {
    kc__store_release(&b->open_until, kc__now_ns() + (uint64_t)r->cfg.retry_ms * 1000000u);
    kc__store_release(&b->trial, 0);
  }
}

/* ------------------------------------------------------------- locks */

/* The MAC of a lock value's body (host:pid:TOKEN) on lock name lname: the
 * first 8 bytes of HMAC-SHA256(mac key, "kcache lock|" lname "|" body), in
 * hex. False if it cannot be had. */
static bool lock_mac(const kc__remote *r, const char *lname, const char *body, size_t n, char hex[17]) {
  char msg[800];
  int m = snprintf(msg, sizeof msg, "kcache lock|%s|%.*s", lname, (int)n, body);
  uint8_t mac[32];
  if (m < 0 || (size_t)m >= sizeof msg ||
      !kc__hmac_sha256(r->cfg.mac_key, sizeof r->cfg.mac_key, msg, (size_t)m, mac))
    return false;
  kc__hex(mac, 8, hex);
  return true;
}

/* A lock's value: "host:pid:TOKEN" (TOKEN: 16 hex digits), and with a
 * secret ":MAC" (lock_mac), so that a client without it cannot forge one. */
static void lock_value(const kc__remote *r, const char *lname, uint64_t token, char *out, size_t len) {
  int n = snprintf(out, len, "%s:%016llx", r->ident, (unsigned long long)token);
  char mac[17];
  if (r->cfg.has_secret && n > 0 && (size_t)n + 18 <= len && lock_mac(r, lname, out, (size_t)n, mac))
    snprintf(out + n, len - (size_t)n, ":%s", mac);
}

static bool all_of(const char *s, size_t n, int (*is)(int)) {
  for (size_t i = 0; i < n; i++)
    if (!is((unsigned char)s[i])) return false;
  return n > 0;
}

/* Whether v (n bytes) is a value a kcache client holding lname's lock
 * writes (lock_value): host:pid:TOKEN, and with a secret its MAC right. */
static bool lock_well_formed(const kc__remote *r, const char *lname, const char *v, size_t n) {
  if (!v || n > 400 || memchr(v, '\0', n)) return false;
  size_t body = n;
  if (r->cfg.has_secret) {
    char want[17];
    if (n < 18 || v[n - 17] != ':' || !lock_mac(r, lname, v, n - 17, want) ||
        !kc__ct_equal(want, v + n - 16, 16))
      return false;
    body = n - 17;
  }
  if (body < 20 || v[body - 17] != ':' || !all_of(v + body - 16, 16, isxdigit)) return false;
  const char *colon = memrchr(v, ':', body - 17); /* before the pid */
  return colon && colon > v && all_of(colon + 1, (size_t)(v + body - 17 - colon - 1), isdigit);
}

/* The lock lname is held, by what? A value no kcache client writes (no
 * expiry, an expiry above our bound, not a lock value, or with a secret
 * not authenticated: planted, or left by a broken client) is replaced by
 * ours, tok: WATCH, then MULTI / SET / EXEC, so that a real holder that
 * took it meanwhile keeps it. 1: ours now; 0: a real holder's (wait); 2:
 * gone (try again); -1: a failure (why; the connection is dropped). */
static int lock_squatted(kc__remote *r, kc__rconn *c, const char *lname, const char *tok, const char *px,
                         char *why, size_t wl) {
  kc__rreply w, g = {0}, t = {0}, x;
  int out = -1;
  if (kc__rconn_cmdv(c, &w, why, wl, "WATCH", lname, (char *)NULL)) goto done;
  kc__rreply_free(&r->heap, &w);
  if (kc__rconn_cmdv(c, &g, why, wl, "GET", lname, (char *)NULL) ||
      kc__rconn_cmdv(c, &t, why, wl, "PTTL", lname, (char *)NULL))
    goto done;
  bool gone = g.type == KC__R_NIL || (t.type == KC__R_INTEGER && t.integer == -2);
  bool real = g.type == KC__R_STRING && lock_well_formed(r, lname, g.str, g.len) && t.type == KC__R_INTEGER &&
              t.integer > 0 && t.integer <= (long long)r->cfg.lock_ms;
  if (gone || real) {
    if (kc__rconn_cmdv(c, &x, why, wl, "UNWATCH", (char *)NULL)) goto done;
    kc__rreply_free(&r->heap, &x);
    out = gone ? 2 : 0;
    goto done;
  }
  char what[200];
  if (t.type == KC__R_INTEGER && t.integer == -1) snprintf(what, sizeof what, "with no expiry");
  else if (t.type == KC__R_INTEGER && t.integer > (long long)r->cfg.lock_ms)
    snprintf(what, sizeof what, "expiring in %lld ms, above the lock timeout of %u ms", t.integer,
             r->cfg.lock_ms);
  else snprintf(what, sizeof what, r->cfg.has_secret ? "not authenticated" : "not a lock value");
  if (kc__rconn_cmdv(c, &x, why, wl, "MULTI", (char *)NULL)) goto done;
  kc__rreply_free(&r->heap, &x);
  if (kc__rconn_cmdv(c, &x, why, wl, "SET", lname, tok, "PX", px, (char *)NULL)) goto done;
  kc__rreply_free(&r->heap, &x);
  if (kc__rconn_cmdv(c, &x, why, wl, "EXEC", (char *)NULL)) goto done;
  out = x.type == KC__R_ARRAY ? 1 : 0; /* nil: it changed meanwhile */
  kc__rreply_free(&r->heap, &x);
  if (out == 1)
    warn(r, &r->warned_squat, "the lock %s held no kcache client's value (%s): replaced, and not waited for",
         lname, what);
done:
  kc__rreply_free(&r->heap, &g);
  kc__rreply_free(&r->heap, &t);
  if (out < 0) c->broken = true; /* a WATCH or MULTI may be left on it */
  return out;
}

/* Takes the lock lname with token (SET NX PX), or one that no client
 * holds (lock_squatted): 1 ours, 0 another's, 2 gone, -1 a failure. */
static int lock_take(kc__remote *r, kc__rconn *c, const char *lname, uint64_t token, char *why, size_t wl) {
  char tok[200], px[24];
  lock_value(r, lname, token, tok, sizeof tok);
  snprintf(px, sizeof px, "%u", r->cfg.lock_ms);
  kc__rreply v;
  if (kc__rconn_cmdv(c, &v, why, wl, "SET", lname, tok, "NX", "PX", px, (char *)NULL)) return -1;
  int type = v.type;
  if (type == KC__R_ERROR) snprintf(why, wl, "SET %s NX: %s", lname, v.str);
  kc__rreply_free(&r->heap, &v);
  if (type == KC__R_ERROR) return -1;
  return type == KC__R_STATUS ? 1 : lock_squatted(r, c, lname, tok, px, why, wl);
}

typedef enum { GOT_NONE, GOT_HIT, GOT_FAIL } got;

/* Reads the value of name and offers it to accept. A value that is there but
 * not trusted is a miss (counted and warned about once per lookup). */
static got get_value(kc__remote *r, kc__rconn *c, const char *name, kc__remote_accept_fn accept, void *ud,
                     bool *rejected, char *why, size_t wl) {
  char maxs[32];
  snprintf(maxs, sizeof maxs, "%llu", (unsigned long long)r->cfg.max_entry);
  kc__rreply v;
  if (kc__rconn_cmdv(c, &v, why, wl, "GETRANGE", name, "0", maxs, (char *)NULL)) return GOT_FAIL;
  if (v.type == KC__R_ERROR && strncmp(v.str, "WRONGTYPE", 9) != 0) {
    snprintf(why, wl, "GETRANGE %s: %s", name, v.str);
    kc__rreply_free(&r->heap, &v);
    return GOT_FAIL;
  }
  if (v.type != KC__R_ERROR && (v.type != KC__R_STRING || v.len == 0)) { /* GETRANGE of no key: "" */
    kc__rreply_free(&r->heap, &v);
    return GOT_NONE;
  }
  char rwhy[300];
  size_t img = 0;
  bool good = false;
  if (v.type == KC__R_ERROR) {
    snprintf(rwhy, sizeof rwhy, "not a string value");
  } else if (v.len > r->cfg.max_entry) {
    snprintf(rwhy, sizeof rwhy, "larger than KC_REMOTE_MAX_ENTRY (%llu bytes)",
             (unsigned long long)r->cfg.max_entry);
  } else if (kc__remote_unwrap(&r->cfg, v.str, v.len, &img, rwhy, sizeof rwhy) == KC_OK) {
    /* the store verifies the entry file as it verifies its own */
    void *image = v.str;
    v.str = NULL;
    if (img != v.len) {
      void *shrunk = kc__heap_realloc(&r->heap, image, img);
      if (shrunk) image = shrunk;
    }
    good = accept(ud, image, img, rwhy, sizeof rwhy);
  }
  kc__rreply_free(&r->heap, &v);
  if (good) return GOT_HIT;
  if (!*rejected) {
    *rejected = true;
    kc__remote_count(r, RC_REJECTS, 1);
    warn(r, &r->warned_reject, "the entry %s is not trusted (%s): compiled again, and the upload replaces it",
         name, rwhy);
  }
  return GOT_NONE;
}

/* A lookup that waited `bound` ms for another machine's lock (est: the
 * estimate it came from) compiles without it: said once when the bound was
 * the estimate's, and a token that is not held, only its time, so that the
 * upload measures this compile too (a slow kernel raises the estimate); its
 * release matches no lock. */
static KC__COLD uint64_t gave_up(kc__remote *r, const char *lname, uint32_t bound, uint64_t est) {
  if (bound < r->cfg.lock_ms)
    warn(r, &r->warned_slow,
         "the lock %s was still held after %u ms, as long as compiles here lately allow (4 times the "
         "longest, %llu ms, and at least %u ms): compiled without it rather than wait up to the lock "
         "timeout (%u ms)",
         lname, bound, (unsigned long long)est, KC__WAIT_FLOOR_MS, r->cfg.lock_ms);
  return kc__lock_token();
}

/* What one lookup carries from node to node (a cluster's redirections). */
typedef struct lookup {
  const uint8_t *key;
  const char *name, *lname;
  kc__remote_accept_fn accept;
  void *ud;
  uint64_t t0, *lock, est;
  bool rejected, waited;
  bool read; /* the first read was answered */
  bool slow; /* the read too has lock_deadline_ms (its first try missed the timeout) */
  uint32_t bound;
  uint64_t wait_until;
} lookup;

/* The lookup on connection c: the value, else the lock, else the polls for
 * another machine's upload. The read has the lookup's deadline (t0 plus
 * the timeout); the single-flight commands (SET NX, the polls) have
 * lock_deadline_ms each, so that a node that missed the tight deadline
 * under load does not compile for itself what another one compiles. */
static got fetch_on(kc__remote *r, kc__rconn *c, lookup *l, char *why, size_t wl) {
  uint64_t timeout_ns = (uint64_t)r->cfg.timeout_ms * 1000000u;
  uint64_t lock_ns = (uint64_t)r->cfg.lock_deadline_ms * 1000000u, nap = KC__POLL_FIRST_NS;
  got outcome = GOT_NONE;
  int gone = 0; /* times the lock was gone right after SET NX failed */
  c->cap = l->t0 + timeout_ns; /* the lookup, not each command, waits at most the timeout */
  if (l->slow) {
    c->timeout_ns = lock_ns;
    c->cap = kc__now_ns() + lock_ns;
  }
  for (;;) {
    outcome = get_value(r, c, l->name, l->accept, l->ud, &l->rejected, why, wl);
    if (outcome != GOT_FAIL) l->read = true;
    if (outcome != GOT_NONE) break;
    /* nothing usable: compile, unless another machine already does */
    uint64_t token = kc__lock_token();
    c->timeout_ns = lock_ns;
    c->cap = kc__now_ns() + lock_ns;
    int squat = lock_take(r, c, l->lname, token, why, wl);
    if (squat < 0) {
      outcome = GOT_FAIL;
      break;
    }
    if (squat == 2) { /* it expired meanwhile: SET NX again, a few times */
      if (++gone < KC__LOCK_GONE_MAX && kc__now_ns() < l->t0 + (uint64_t)r->cfg.lock_ms * 1000000u) continue;
      /* a lock that is never there, yet never ours: not a server that
       * keeps SET NX's promise (a proxy, a look-alike): compile here */
      snprintf(why, wl,
               "the lock %s was neither free nor held, %d times in a row (SET NX refused, then GET "
               "found nothing): the server does not keep locks",
               l->lname, gone);
      outcome = GOT_FAIL;
      break;
    }
    if (squat == 1) {
      /* Ours. But the last holder may have uploaded and released between
       * our GET and our SET (it uploads first): look once more. */
      outcome = get_value(r, c, l->name, l->accept, l->ud, &l->rejected, why, wl);
      if (outcome == GOT_HIT) kc__remote_upload(r, l->key, NULL, 0, token); /* releases it */
      else *l->lock = token;
      break;
    }
    /* another machine holds the lock: poll for its upload, within bounds */
    uint64_t now = kc__now_ns();
    if (!l->waited) {
      l->waited = true;
      kc__remote_count(r, RC_LOCK_WAITS, 1);
      /* with a secret the lock is authenticated, so a real holder's: the
       * whole lock timeout; without, anyone may have planted it */
      l->bound = r->cfg.has_secret ? r->cfg.lock_ms : kc__remote_wait_bound_ms(r, &l->est);
      l->wait_until = l->t0 + (uint64_t)l->bound * 1000000u;
    }
    if (now >= l->wait_until) { /* it takes too long: compile without the lock */
      *l->lock = gave_up(r, l->lname, l->bound, l->est);
      break;
    }
    kc__nap_ns(nap < l->wait_until - now ? nap : l->wait_until - now);
    if (nap < KC__POLL_MAX_NS) nap *= 2;
    c->cap = kc__now_ns() + lock_ns;
  }
  c->cap = 0;
  c->timeout_ns = timeout_ns;
  return outcome;
}

bool kc__remote_fetch(kc__remote *r, const uint8_t key[16], kc__remote_accept_fn accept, void *ud,
                      uint64_t *lock) {
  *lock = 0;
  if (!r) return false;
  char why[512], name[256], lname[300];
  kc__remote_name(&r->cfg, key, false, name, sizeof name);
  unsigned slot = kc__keyslot(name, strlen(name));
  kc__rbreaker *b = kc__pool_breaker(r, slot);
  int how = breaker_allow(b);
  if (!how) {
    uint64_t d[KC__NRC] = {0};
    d[RC_SKIPS] = d[RC_LOOKUP_SKIPS] = 1;
    kc__remote_count(r, RC_SKIPS, 1);
    kc__remote_count(r, RC_LOOKUP_SKIPS, 1);
    rcounters_add(r->vdir, d);
    return false;
  }
  kc__remote_name(&r->cfg, key, true, lname, sizeof lname);
  lookup l = {.key = key,
              .name = name,
              .lname = lname,
              .accept = accept,
              .ud = ud,
              .t0 = kc__now_ns(),
              .lock = lock,
              .bound = r->cfg.lock_ms};
  kc_status st = KC_OK;
  kc__rconn *c = kc__pool_get(r, slot, why, sizeof why, &st);
  got outcome = GOT_NONE;
  for (int hop = 0; c; hop++) {
    outcome = fetch_on(r, c, &l, why, sizeof why);
    /* a cluster's slot that moved: follow it (twice at most) */
    if (outcome != GOT_FAIL || !c->redirect[0] || *lock || hop == 2) break;
    c = kc__pool_redirect(r, c, slot, why, sizeof why);
  }
  if (c && outcome == GOT_FAIL && kc__rconn_stale(c) && !l.read && !*lock) {
    /* The server had closed the pooled connection (its idle timeout, a
     * proxy, a restart): the first read never ran. Once more on a new
     * connection, within the lookup's deadline; the other idle ones most
     * likely went the same way. */
    c = kc__pool_renew(r, c, slot, false, why, sizeof why, &st);
    if (c) outcome = fetch_on(r, c, &l, why, sizeof why);
  }
  if (c && outcome == GOT_FAIL && c->timed_out && !l.read && !*lock &&
      r->cfg.lock_deadline_ms > r->cfg.timeout_ms) {
    /* The first read missed the lookup's deadline on a connection that
     * works (a loaded machine, a busy server): rather than compile without
     * the lock (and count a failure), go on with single flight's deadline,
     * the read again included, on a new connection. A server that is gone
     * fails as fast as before; one that stopped costs the lock deadline. */
    kc__pool_put(r, c);
    l.slow = true;
    c = kc__pool_get_slow(r, slot, why, sizeof why, &st);
    if (c) outcome = fetch_on(r, c, &l, why, sizeof why);
  }
  uint64_t dt = kc__now_ns() - l.t0;
  if (!c || outcome == GOT_FAIL) {
    kc__pool_failed(r);
    breaker_fail(r, b, how, why);
  } else {
    breaker_ok(b, how);
  }
  kc__pool_put(r, c);
  uint64_t d[KC__NRC] = {0};
  d[RC_LOOKUPS] = 1;
  d[RC_LOOKUP_NS] = dt;
  if (outcome == GOT_HIT) d[RC_HITS] = 1;
  else if (c && outcome == GOT_NONE) d[RC_MISSES] = 1;
  else d[RC_LOOKUP_ERRORS] = 1; /* (breaker_fail counted it in RC_ERRORS) */
  d[RC_REJECTS] = l.rejected;
  d[RC_LOCK_WAITS] = l.waited;
  for (int i = 0; i < KC__NRC; i++)
    if (i != RC_REJECTS && i != RC_LOCK_WAITS) kc__remote_count(r, i, d[i]);
  rcounters_add(r->vdir, d);
  return outcome == GOT_HIT;
}

/* ------------------------------------------------------------ uploads */

/* The upload of j on c (a SET of name, then the compare-and-delete of the
 * lock): false on a failure (why; c->redirect: a cluster's MOVED or ASK). */
static bool upload_on(kc__remote *r, kc__rconn *c, upjob *j, const char *name, char *why, size_t wl) {
  bool failed = false;
  if (j->image) {
    size_t size = j->size;
    if (r->cfg.has_secret && !j->signed_) {
      uint8_t *img = kc__heap_realloc(&r->heap, j->image, size + KC__REMOTE_TRAILER);
      if (img) {
        j->image = img;
        if (kc__remote_trailer(&r->cfg, img, size, img + size)) size += KC__REMOTE_TRAILER;
        else size = 0;
      } else {
        size = 0;
      }
      j->size = size;
      j->signed_ = true; /* a second try (a redirection) sends the same bytes */
    }
    if (size == 0 || size > r->cfg.max_entry) {
      kc__remote_count(r, RC_SKIPS, 1); /* too large to share, or no MAC (out of memory) */
      kc__remote_count_shared(r, RC_SKIPS, 1);
    } else {
      const char *argv[] = {"SET", name, j->image};
      size_t lens[] = {3, strlen(name), size};
      kc__rreply v;
      kc_status st = kc__rconn_cmd(c, 3, argv, lens, &v, why, wl);
      if (!st && v.type == KC__R_STATUS) {
        kc__remote_count(r, RC_UPLOADS, 1);
        kc__remote_count_shared(r, RC_UPLOADS, 1);
      } else {
        if (!st) snprintf(why, wl, "SET %s: %s", name, v.str ? v.str : "unexpected reply");
        failed = true;
      }
      kc__rreply_free(&r->heap, &v);
    }
  }
  if (!c->broken && j->lock) {
    /* compare-and-delete: a lock that expired and was taken by another
     * machine is not ours to release */
    static const char script[] =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    char tok[200], lname[300];
    kc__remote_name(&r->cfg, j->key, true, lname, sizeof lname);
    lock_value(r, lname, j->lock, tok, sizeof tok);
    kc__rreply v;
    char why2[512];
    if (kc__rconn_cmdv(c, &v, why2, sizeof why2, "EVAL", script, "1", lname, tok, (char *)NULL) == KC_OK)
      kc__rreply_free(&r->heap, &v); /* scripting off: the lock expires by itself */
  }
  return !failed;
}

/* One job, on the queue's thread (or the caller's: run_here): deferred
 * work, or an upload (the SET and the release of the lock). */
static void run_job(void *ud, kc__job *job) {
  kc__remote *r = ud;
  upjob *j = (upjob *)job;
  if (j->fn) {
    j->fn(j->ud, j->key, j->image, j->size);
    return;
  }
  char why[512], name[256];
  kc_status st = KC_OK;
  kc__remote_name(&r->cfg, j->key, false, name, sizeof name);
  unsigned slot = kc__keyslot(name, strlen(name)); /* the lock's too (a hash tag on a cluster) */
  kc__rbreaker *b = kc__pool_breaker(r, slot);
  int how = breaker_allow(b);
  if (!how) {
    if (j->image) {
      kc__remote_count(r, RC_SKIPS, 1);
      kc__remote_count_shared(r, RC_SKIPS, 1);
    }
    return; /* a lock we held expires by itself */
  }
  kc__rconn *c = kc__pool_get_slow(r, slot, why, sizeof why, &st);
  bool failed = !c, renewed = false;
  for (int hop = 0; c; hop++) {
    /* the upload and the release are single flight's: other machines wait
     * for them (and no launch does) */
    c->timeout_ns = (uint64_t)r->cfg.lock_deadline_ms * 1000000u;
    failed = !upload_on(r, c, j, name, why, sizeof why);
    c->timeout_ns = (uint64_t)r->cfg.timeout_ms * 1000000u;
    if (failed && !renewed && kc__rconn_stale(c)) {
      /* the server had closed the pooled connection (its idle timeout, a
       * restart): the SET never ran, and the lock we hold would stay until
       * it expires, with other machines waiting on it. Once more, on a new
       * connection (the SET and the release both may run twice) */
      renewed = true;
      c = kc__pool_renew(r, c, slot, true, why, sizeof why, &st);
      failed = !c;
      continue;
    }
    if (!failed || !c->redirect[0] || hop == 2) break;
    c = kc__pool_redirect(r, c, slot, why, sizeof why); /* a cluster's slot that moved */
    failed = !c;
  }
  if (failed) {
    kc__pool_failed(r);
    breaker_fail(r, b, how, why);
  } else {
    breaker_ok(b, how);
  }
  kc__pool_put(r, c);
}

static void job_free(void *ud, kc__job *job) {
  kc__remote *r = ud;
  upjob *j = (upjob *)job;
  kc__heap_free(&r->heap, j->image);
  kc__heap_free(&r->heap, j);
}

/* A job that the queue could not take runs here rather than be lost. */
static void run_here(kc__remote *r, upjob *j) {
  run_job(r, &j->job);
  job_free(r, &j->job);
}

void kc__remote_upload(kc__remote *r, const uint8_t key[16], void *image, size_t size, uint64_t lock) {
  if (!r || (!image && !lock)) {
    if (r) kc__heap_free(&r->heap, image);
    return;
  }
  if (image && lock) kc__remote_observe(r, lock);
  upjob *j = kc__heap_calloc(&r->heap, sizeof *j);
  if (!j) {
    kc__heap_free(&r->heap, image);
    return; /* the lock expires by itself */
  }
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = image ? size : 0;
  j->lock = lock;
  j->job.bounded = image != NULL;
  j->job.bytes = j->size;
  kc__jobq_put q = kc__jobq_push(&r->queue, &j->job);
  if (q == KC__JOBQ_FULL) {
    kc__remote_count(r, RC_SKIPS, 1); /* a backlog: the server is slower than the compilers */
    kc__remote_count_shared(r, RC_SKIPS, 1);
    kc__heap_free(&r->heap, j->image);
    j->image = NULL;
    j->size = 0;
    j->job.bounded = false;
    j->job.bytes = 0;
    if (!lock) {
      kc__heap_free(&r->heap, j);
      return;
    }
    q = kc__jobq_push(&r->queue, &j->job); /* the release alone */
  }
  if (q == KC__JOBQ_NO_THREAD) run_here(r, j); /* upload here rather than lose it */
}

bool kc__remote_defer(kc__remote *r, kc__remote_defer_fn fn, void *ud, const uint8_t key[16], void *image,
                      size_t size) {
  if (!r) return false;
  upjob *j = kc__heap_calloc(&r->heap, sizeof *j);
  if (!j) return false;
  j->fn = fn;
  j->ud = ud;
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = size;
  j->job.bounded = true;
  j->job.bytes = size;
  if (kc__jobq_push(&r->queue, &j->job) == KC__JOBQ_QUEUED) return true;
  kc__heap_free(&r->heap, j);
  return false;
}

void kc__remote_queue_peak(kc__remote *r, size_t *jobs, uint64_t *bytes) {
  kc__jobq_peak(&r->queue, jobs, bytes);
}

/* -------------------------------------------------------------- fork */

/* r->pid and r->ident from this process (at open, and in a child). */
static void set_ident(kc__remote *r) {
  r->pid = getpid();
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = 0;
  snprintf(r->ident, sizeof r->ident, "%s:%ld", host, (long)r->pid);
}

static void fork_prepare(void *ud) {
  kc__remote *r = ud;
  kc__jobq_fork_prepare(&r->queue);
  kc__lock(&r->pool_lock);
}

static void fork_parent(void *ud) {
  kc__remote *r = ud;
  kc__unlock(&r->pool_lock);
  kc__jobq_fork_parent(&r->queue);
}

/* The child: the queued jobs and the one the parent's thread runs are the
 * parent's to send (the queue drops them: nothing is sent twice, and the
 * child starts a thread of its own for the jobs it queues); pooled
 * connections are the parent's sockets (kc__pool_get drops them by their
 * pid), and a reading of the slot map that the parent had under way is
 * the parent's; a lock taken here is this process's (ident). */
static void fork_child(void *ud) {
  kc__remote *r = ud;
  set_ident(r);
  r->map_busy = 0;
  kc__unlock(&r->pool_lock);
  kc__jobq_fork_child(&r->queue);
}

/* ------------------------------------------------------------- the tier */

kc__remote *kc__remote_open(const kc__heap *heap, const kc__log_sink *log, const kc__config *conf,
                            const char *vdir) {
  kc__remote_config cfg;
  char why[1024];
  kc_status st = kc__remote_config_load(conf, &cfg, why, sizeof why);
  if (st == KC_ENOTFOUND) return NULL;
  const char *no = st ? NULL : kc__hiredis_unavailable(cfg.hiredis_lib);
  if (no) {
    snprintf(why, sizeof why, "%s", no);
    st = KC_EUNAVAILABLE;
  }
  if (!st) st = kc__remote_tls_setup(&cfg, why, sizeof why); /* rediss://: its CA, certificate and key */
  if (st) {
    kc__log_to(log, KC_LOG_WARN, "the remote tier is off: %s", why);
    kc__wipe(&cfg, sizeof cfg);
    return NULL;
  }
  kc__remote *r = kc__heap_calloc(heap, sizeof *r);
  if (!r || !(r->vdir = kc__heap_strdup(heap, vdir))) {
    kc__heap_free(heap, r);
    kc__remote_tls_release(&cfg);
    kc__wipe(&cfg, sizeof cfg);
    kc__log_to(log, KC_LOG_WARN, "the remote tier is off: out of memory");
    return NULL;
  }
  bool m1 = kc__mutex_init(&r->pool_lock);
  bool q = kc__jobq_init(&r->queue, run_job, job_free, r, KC__QUEUE_JOBS, KC__QUEUE_BYTES);
  if (!m1 || !q) {
    if (m1) kc__mutex_destroy(&r->pool_lock);
    if (q) kc__jobq_destroy(&r->queue);
    kc__heap_free(heap, r->vdir);
    kc__heap_free(heap, r);
    kc__remote_tls_release(&cfg);
    kc__wipe(&cfg, sizeof cfg);
    kc__log_to(log, KC_LOG_WARN, "the remote tier is off: cannot make its locks");
    return NULL;
  }
  r->heap = heap ? *heap : (kc__heap){kc__libc_alloc, NULL};
  if (log) r->log = *log, r->has_log = true;
  r->cfg = cfg;
  kc__wipe(&cfg, sizeof cfg);
  if (!kc__nodes_init(r)) {
    kc__mutex_destroy(&r->pool_lock);
    kc__jobq_destroy(&r->queue);
    kc__heap_free(&r->heap, r->vdir);
    kc__remote_tls_release(&r->cfg);
    kc__wipe(&r->cfg, sizeof r->cfg);
    kc__heap_free(&r->heap, r);
    kc__log_to(log, KC_LOG_WARN, "the remote tier is off: out of memory");
    return NULL;
  }
  set_ident(r);
  r->fork = (kc__fork_hook){
      .level = KC__FORK_REMOTE, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child, .ud = r};
  kc__fork_register(&r->fork); /* false: no fork handling (pthread_atfork out of memory) */
  return r;
}

void kc__remote_close(kc__remote *r) {
  if (!r) return;
  kc__fork_unregister(&r->fork);
  kc__jobq_stop(&r->queue);
  kc__nodes_free(r);
  kc__mutex_destroy(&r->pool_lock);
  kc__jobq_destroy(&r->queue);
  const kc__heap heap = r->heap;
  kc__heap_free(&heap, r->vdir);
  kc__remote_tls_release(&r->cfg);
  kc__wipe(&r->cfg, sizeof r->cfg);
  kc__heap_free(&heap, r);
}

void kc__remote_stats(const kc__remote *r, kc_stats *out) {
  if (!r) return;
#define KC__X(ID, name) out->remote_##name = kc__load_relaxed(&r->c[RC_##ID]);
  KC__REMOTE_COUNTERS(KC__X)
#undef KC__X
}

const char *kc__remote_url_of(const kc__remote *r) { return r ? r->cfg.url : NULL; }
