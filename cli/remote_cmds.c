/* SPDX-License-Identifier: MIT */
/*
 * cli/remote_cmds.c -- owns `kcache remote ping|ls|clear` (the shared Redis
 * tier, through the remote client of src/remote/: configuration, one
 * connection, one command) and the remote tier's part of `kcache stats`.
 * Whether a value holds a well-formed entry is the codec's question
 * (kc__entry_peek_mem, kc__entry_image_size); its MAC is kc__remote_unwrap's.
 */
#include "cli.h"
#include "out.h"

#include "remote/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_help_remote[] =
    "usage: kcache remote ping|ls|clear [--url URL] [--prefix P] [--timeout MS] [--json]\n"
    "\n"
    "Looks at the remote tier: the Redis server that machines share behind\n"
    "their disk caches (see \"remote tier\" in kcache.h).\n"
    "\n"
    "  ping    connects, measures the round trip, and shows the server's version,\n"
    "          memory policy, and the entries and locks under the prefix; for a\n"
    "          cluster each node (address, role, slots, round trip) first\n"
    "  ls      every entry under the prefix (any secret's namespace): key,\n"
    "          namespace, backend, entry, params, size, age, and whether its\n"
    "          MAC verifies with $KC_REMOTE_KEY; then the locks held now (for a\n"
    "          cluster: on every primary)\n"
    "  clear   removes every entry and lock under the prefix (on every primary)\n"
    "\n"
    "options:\n"
    "  --url URL     redis[s]://[[user]:password@]host[:port][/db] (default $KC_REMOTE;\n"
    "                rediss:// is TLS: $KC_REMOTE_TLS_CA, _CERT, _KEY, _SERVER_NAME), or\n"
    "                redis[s]+cluster://[[user]:password@]host:port[,host:port...]\n"
    "                for a Redis Cluster (seed nodes)\n"
    "  --prefix P    the key prefix (default $KC_REMOTE_PREFIX, else \"kcache:\")\n"
    "  --timeout MS  for each command (default 2000)\n";

/* ------------------------------------------------------- stats' part */

void cli_stats_remote(const cli *c) {
  kc__remote_counters r;
  kc__remote_counters_read(c->vdir, &r);
  kc__remote_config cfg;
  char why[1024];
  kc_status st = kc__remote_config_load(&c->conf, &cfg, why, sizeof why);
  if (!r.valid && st == KC_ENOTFOUND) {
    if (c->json) printf(", \"remote\": null");
    return;
  }
  double per = r.lookups ? (double)r.lookup_ns / (double)r.lookups / 1e6 : 0;
  if (c->json) {
    printf(",\n \"remote\": {\"url\": ");
    if (st == KC_OK) json_str(cfg.url);
    else printf("null");
    printf(", \"lookups\": %llu, \"hits\": %llu, \"misses\": %llu, \"rejects\": %llu, \"errors\": %llu, "
           "\"skips\": %llu, \"lookup_errors\": %llu, \"lookup_skips\": %llu, \"lookups_asked\": %llu, "
           "\"uploads\": %llu, "
           "\"lock_waits\": %llu, \"lookup_ns\": %llu, \"ms_per_lookup\": %.3f}",
           (unsigned long long)r.lookups, (unsigned long long)r.hits, (unsigned long long)r.misses,
           (unsigned long long)r.rejects, (unsigned long long)r.errors, (unsigned long long)r.skips,
           (unsigned long long)r.lookup_errors, (unsigned long long)r.lookup_skips,
           (unsigned long long)(r.lookups + r.lookup_skips), (unsigned long long)r.uploads,
           (unsigned long long)r.lock_waits, (unsigned long long)r.lookup_ns, per);
    return;
  }
  if (st == KC_OK) printf("remote      %s, prefix %s%s (KC_REMOTE)\n", cfg.url, cfg.prefix, cfg.ns);
  else if (st != KC_ENOTFOUND) printf("remote      KC_REMOTE is set but unusable: %s\n", why);
  /* each lookup asked is one of: a hit, a miss, an error, skipped (lookups = hits + misses + errors) */
  printf("remote use  %llu lookups asked: %llu to the server (%llu hits, %llu misses (%llu values rejected), "
         "%llu failed), %llu skipped (breaker open); %llu uploads (%llu failed or skipped); %llu waits for "
         "another machine; %.2f ms per lookup\n",
         (unsigned long long)(r.lookups + r.lookup_skips), (unsigned long long)r.lookups,
         (unsigned long long)r.hits, (unsigned long long)r.misses, (unsigned long long)r.rejects,
         (unsigned long long)r.lookup_errors, (unsigned long long)r.lookup_skips,
         (unsigned long long)r.uploads,
         (unsigned long long)(r.errors - r.lookup_errors + r.skips - r.lookup_skips),
         (unsigned long long)r.lock_waits, per);
}

/* ------------------------------------------------------------ a client */

/* A cluster's node, from CLUSTER NODES. */
typedef struct rnode {
  char host[256];
  int port;
  char role[16]; /* "master", "replica" */
  char flags[128]; /* as CLUSTER NODES says them: "master,fail", ... */
  long slots; /* slots it serves (a primary) */
  kc__rconn *conn; /* primaries: a connection (ls, clear) */
  /* ping: whether it answered, the connect and the best of 3 PINGs, or why not */
  bool up;
  double connect_ms, rtt_ms;
  char why[256];
} rnode;

enum { RCLI_NODES = 64 };

typedef struct rcli {
  kc__remote_config cfg;
  kc__rconn *conn; /* the server; for a cluster, the primary that commands go to now */
  char why[1024];
  rnode node[RCLI_NODES]; /* a cluster's */
  int nnodes;
  const char *what; /* the command ("ls", "clear"...), for its messages */
} rcli;

CLI_NORETURN static void rcli_die(rcli *r, const char *what) {
  cli_fail("remote %s: %s: %s", what, r->cfg.url[0] ? r->cfg.url : "(no URL)", r->why);
}

/* The slots of a CLUSTER NODES line's slot fields ("0-5460", "42", or a
 * migration "[42->-id]", not counted). */
static long slot_count(char *fields) {
  long n = 0;
  for (char *t = strtok(fields, " "); t; t = strtok(NULL, " ")) {
    if (*t == '[') continue;
    long a = strtol(t, &t, 10), b = a;
    if (*t == '-') b = strtol(t + 1, NULL, 10);
    if (b >= a) n += b - a + 1;
  }
  return n;
}

/* A cluster's nodes, from CLUSTER NODES on the first seed that answers. */
static void cluster_nodes(rcli *r, const char *what) {
  kc__rconn *c = NULL;
  char seed[256] = "";
  for (int i = 0; i < r->cfg.nseeds && !c; i++) {
    snprintf(seed, sizeof seed, "%s", r->cfg.seed_host[i]);
    if (kc__rconn_open_at(NULL, &r->cfg, r->cfg.seed_host[i], r->cfg.seed_port[i], &c, r->why, sizeof r->why))
      c = NULL;
  }
  if (!c) rcli_die(r, what); /* why: the last seed's */
  kc__rreply rep;
  if (kc__rconn_cmdv(c, &rep, r->why, sizeof r->why, "CLUSTER", "NODES", (char *)NULL)) rcli_die(r, what);
  if (rep.type != KC__R_STRING) {
    snprintf(r->why, sizeof r->why, "CLUSTER NODES: %s", rep.str ? rep.str : "not a cluster's answer");
    rcli_die(r, what);
  }
  for (char *l = rep.str, *next; l && *l && r->nnodes < RCLI_NODES; l = next) {
    next = strchr(l, '\n');
    if (next) *next++ = 0;
    char id[64], addr[300], flags[128], master[64];
    int off = 0;
    if (sscanf(l, "%63s %299s %127s %63s %*s %*s %*s %*s%n", id, addr, flags, master, &off) < 4) continue;
    rnode *n = &r->node[r->nnodes];
    char *at = strchr(addr, '@'), *colon;
    if (at) *at = 0;
    if (!(colon = strrchr(addr, ':'))) continue;
    *colon = 0;
    snprintf(n->host, sizeof n->host, "%.255s", addr[0] ? addr : seed); /* "": the node that answered */
    n->port = atoi(colon + 1);
    snprintf(n->flags, sizeof n->flags, "%s", flags);
    snprintf(n->role, sizeof n->role, "%s", strstr(flags, "master") ? "master" : "replica");
    n->slots = off > 0 && strstr(flags, "master") ? slot_count(l + off) : 0;
    if (n->port > 0) r->nnodes++;
  }
  kc__rreply_free(NULL, &rep);
  kc__rconn_close(c);
}

/* Whether node n is a primary that serves slots and is not marked failed. */
static bool live_primary(const rnode *n) {
  return !strcmp(n->role, "master") && n->slots > 0 && !strstr(n->flags, "fail");
}

/* Connects: to the server, or to every primary of a cluster. every: ls and
 * clear, which need every primary (one that cannot be reached, or one the
 * cluster marks failed while it still holds slots, is an error that names
 * it: its keys would be missed); else (ping) those that answer, the others
 * shown DOWN by ping_nodes. */
static void rcli_open(rcli *r, const char *what, bool every) {
  r->what = what;
  if (!r->cfg.cluster) {
    if (kc__rconn_open(NULL, &r->cfg, &r->conn, r->why, sizeof r->why)) rcli_die(r, what);
    return;
  }
  cluster_nodes(r, what);
  for (int i = 0; i < r->nnodes; i++) {
    rnode *n = &r->node[i];
    bool failed = !strcmp(n->role, "master") && n->slots > 0 && strstr(n->flags, "fail");
    if (failed && every) {
      snprintf(r->why, sizeof r->why,
               "primary %s:%d is marked failed and still holds %ld slots: its keys cannot be %s until a "
               "replica takes over (kcache remote ping shows the nodes)",
               n->host, n->port, n->slots, !strcmp(what, "clear") ? "removed" : "listed");
      rcli_die(r, what);
    }
    if (!live_primary(n)) continue;
    if (kc__rconn_open_at(NULL, &r->cfg, n->host, n->port, &n->conn, r->why, sizeof r->why)) {
      if (every) rcli_die(r, what);
      continue;
    }
    if (!r->conn) r->conn = n->conn;
  }
  if (!r->conn) {
    snprintf(r->why, sizeof r->why, "the cluster has no primary that serves slots");
    rcli_die(r, what);
  }
}

static void rcli_close(rcli *r) {
  if (!r->cfg.cluster) kc__rconn_close(r->conn);
  for (int i = 0; i < r->nnodes; i++) kc__rconn_close(r->node[i].conn);
  r->conn = NULL;
}

/* One command whose connection must work; an error reply (WRONGTYPE at a
 * neighbour's key of the same name) is the caller's. The reply is the
 * caller's to free. */
static kc__rreply rcli_try(rcli *r, const char *what, int argc, const char *const *argv) {
  size_t lens[16];
  for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
  kc__rreply rep;
  if (kc__rconn_cmd(r->conn, argc, argv, lens, &rep, r->why, sizeof r->why)) rcli_die(r, what);
  return rep;
}

/* One command that must work; the reply is the caller's to free. */
static kc__rreply rcli_cmd(rcli *r, const char *what, int argc, const char *const *argv) {
  kc__rreply rep = rcli_try(r, what, argc, argv);
  if (rep.type == KC__R_ERROR) {
    snprintf(r->why, sizeof r->why, "%s: %s", argv[0], rep.str);
    rcli_die(r, what);
  }
  return rep;
}

/* The prefix as a SCAN pattern that matches it literally. */
static void scan_pattern(const char *prefix, char *out, size_t len) {
  size_t o = 0;
  for (const char *p = prefix; *p && o + 3 < len; p++) {
    if (strchr("*?[]\\", *p)) out[o++] = '\\';
    out[o++] = *p;
  }
  out[o++] = '*';
  out[o] = 0;
}

/* Every key under the prefix on r->conn, appended to keys (*n, *cap;
 * malloc), each with its connection in conns. */
static char **rcli_keys_on(rcli *r, char **keys, kc__rconn ***conns, size_t *n, size_t *cap) {
  char pattern[300], cursor[32] = "0";
  scan_pattern(r->cfg.prefix, pattern, sizeof pattern);
  do {
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    kc__rreply rep = rcli_cmd(r, r->what, 6, argv);
    if (rep.type != KC__R_ARRAY || rep.n != 2 || rep.elem[1].type != KC__R_ARRAY) {
      snprintf(r->why, sizeof r->why, "unexpected reply to SCAN");
      rcli_die(r, r->what);
    }
    snprintf(cursor, sizeof cursor, "%s", rep.elem[0].str ? rep.elem[0].str : "0");
    for (size_t i = 0; i < rep.elem[1].n; i++) {
      if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        keys = realloc(keys, *cap * sizeof *keys);
        *conns = realloc(*conns, *cap * sizeof **conns);
        if (!keys || !*conns) cli_fail("out of memory");
      }
      (*conns)[*n] = r->conn;
      keys[*n] = strdup(rep.elem[1].elem[i].str ? rep.elem[1].elem[i].str : "");
      if (!keys[(*n)++]) cli_fail("out of memory");
    }
    kc__rreply_free(NULL, &rep);
  } while (strcmp(cursor, "0") != 0);
  return keys;
}

/* Every key under the prefix (malloc), on the server or on every primary
 * of a cluster; with conns, the connection each is on (malloc). */
static char **rcli_keys_at(rcli *r, size_t *n, kc__rconn ***conns) {
  char **keys = NULL;
  kc__rconn **cs = NULL;
  size_t cap = 0;
  *n = 0;
  if (!r->cfg.cluster) {
    keys = rcli_keys_on(r, keys, &cs, n, &cap);
  } else {
    kc__rconn *keep = r->conn;
    for (int i = 0; i < r->nnodes; i++)
      if (r->node[i].conn) {
        r->conn = r->node[i].conn;
        keys = rcli_keys_on(r, keys, &cs, n, &cap);
      }
    r->conn = keep;
  }
  if (conns) *conns = cs;
  else free(cs);
  return keys;
}

static char **rcli_keys(rcli *r, size_t *n) { return rcli_keys_at(r, n, NULL); }

static void keys_free(char **keys, size_t n) {
  for (size_t i = 0; i < n; i++) free(keys[i]);
  free(keys);
}

/* A key's parts after the prefix: namespace ("" or "hmac-xxxxxxxx"), the
 * 32 hex digits, and whether it is a lock. False for anything else. */
static bool key_parts(const rcli *r, const char *name, char ns[24], uint8_t key[16], bool *lock) {
  const char *p = name + strlen(r->cfg.prefix);
  ns[0] = 0;
  if (!strncmp(p, "hmac-", 5) && strlen(p) > 14 && p[13] == ':') {
    snprintf(ns, 24, "%.13s", p);
    p += 14;
  }
  bool tag = r->cfg.cluster && *p == '{'; /* a cluster's PREFIX{KEY} */
  p += tag;
  char h[33];
  snprintf(h, sizeof h, "%.32s", p);
  if (strlen(h) != 32 || !kc__store_unhex(h, key)) return false;
  p += 32;
  if (tag && *p++ != '}') return false;
  *lock = !strcmp(p, ":lock");
  return *lock || *p == 0;
}

/* ----------------------------------------------------------------- ping */

typedef struct server_info {
  char version[64], policy[64], used[64];
  unsigned long long maxmem;
  double connect_ms, best_ms, avg_ms;
  size_t entries, locks, mine;
} server_info;

enum { PINGS = 10 };

static void ping_info(rcli *r, server_info *s) {
  const char *info_argv[] = {"INFO"};
  kc__rreply info = rcli_cmd(r, "ping", 1, info_argv);
  for (const char *l = info.str; l && *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
    if (!strncmp(l, "redis_version:", 14)) sscanf(l + 14, "%63[^\r\n]", s->version);
    else if (!strncmp(l, "maxmemory_policy:", 17)) sscanf(l + 17, "%63[^\r\n]", s->policy);
    else if (!strncmp(l, "used_memory_human:", 18)) sscanf(l + 18, "%63[^\r\n]", s->used);
    else if (!strncmp(l, "maxmemory:", 10)) s->maxmem = strtoull(l + 10, NULL, 10);
  }
  kc__rreply_free(NULL, &info);
}

static void ping_count(rcli *r, server_info *s) {
  size_t n;
  char **keys = rcli_keys(r, &n), want[24];
  snprintf(want, sizeof want, "%.*s", r->cfg.ns[0] ? (int)strlen(r->cfg.ns) - 1 : 0, r->cfg.ns);
  for (size_t i = 0; i < n; i++) {
    char ns[24];
    uint8_t key[16];
    bool lock;
    if (!key_parts(r, keys[i], ns, key, &lock)) continue;
    if (lock) {
      s->locks++;
    } else {
      s->entries++;
      s->mine += !strcmp(ns, want);
    }
  }
  keys_free(keys, n);
}

/* Each node of a cluster: connect, 3 PINGs. */
static void ping_nodes(rcli *r) {
  for (int i = 0; i < r->nnodes; i++) {
    rnode *n = &r->node[i];
    kc__rconn *c = NULL;
    double t0 = mono_ns();
    if (kc__rconn_open_at(NULL, &r->cfg, n->host, n->port, &c, n->why, sizeof n->why)) continue;
    n->connect_ms = (mono_ns() - t0) / 1e6;
    n->rtt_ms = 1e30;
    n->up = true;
    for (int k = 0; k < 3 && n->up; k++) {
      kc__rreply rep;
      double p0 = mono_ns();
      if (kc__rconn_cmdv(c, &rep, n->why, sizeof n->why, "PING", (char *)NULL) || rep.type != KC__R_STATUS) {
        if (rep.str) snprintf(n->why, sizeof n->why, "PING: %s", rep.str);
        n->up = false;
      }
      double dt = (mono_ns() - p0) / 1e6;
      if (dt < n->rtt_ms) n->rtt_ms = dt;
      kc__rreply_free(NULL, &rep);
    }
    kc__rconn_close(c);
  }
}

static void nodes_json(const rcli *r) {
  printf(", \"cluster\": %s", r->cfg.cluster ? "true" : "false");
  if (!r->cfg.cluster) return;
  printf(", \"nodes\": [");
  for (int i = 0; i < r->nnodes; i++) {
    const rnode *n = &r->node[i];
    printf("%s{\"host\": ", i ? ", " : "");
    json_str(n->host);
    printf(", \"port\": %d, \"role\": \"%s\", \"flags\": ", n->port, n->role);
    json_str(n->flags);
    printf(", \"slots\": %ld, \"up\": %s", n->slots, n->up ? "true" : "false");
    if (n->up) printf(", \"connect_ms\": %.3f, \"rtt_min_ms\": %.3f}", n->connect_ms, n->rtt_ms);
    else {
      printf(", \"error\": ");
      json_str(n->why);
      printf("}");
    }
  }
  printf("]");
}

static void nodes_text(const rcli *r) {
  for (int i = 0; i < r->nnodes; i++) {
    const rnode *n = &r->node[i];
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", n->host, n->port);
    printf("node        %-21s  %-7s  %5ld slots  ", addr, n->role, n->slots);
    if (n->up) printf("connect %.2f ms, round trip %.3f ms", n->connect_ms, n->rtt_ms);
    else printf("DOWN: %s", n->why);
    if (strstr(n->flags, "fail")) printf(" (the cluster marks it %s)", n->flags);
    printf("\n");
  }
}

static void ping_json(const rcli *r, const server_info *s) {
  printf("{\"url\": ");
  json_str(r->cfg.url);
  nodes_json(r);
  printf(", \"redis_version\": ");
  json_str(s->version);
  printf(", \"hiredis\": ");
  json_str(kc__hiredis_name());
  printf(", \"tls\": %s", r->cfg.tls ? "true" : "false");
  printf(", \"connect_ms\": %.3f, \"rtt_min_ms\": %.3f, \"rtt_avg_ms\": %.3f, \"prefix\": ", s->connect_ms,
         s->best_ms, s->avg_ms);
  json_str(r->cfg.prefix);
  printf(", \"namespace\": ");
  json_str(r->cfg.ns);
  printf(", \"entries\": %zu, \"entries_in_namespace\": %zu, \"locks\": %zu, \"maxmemory\": %llu, "
         "\"maxmemory_policy\": ",
         s->entries, s->mine, s->locks, s->maxmem);
  json_str(s->policy);
  printf("}\n");
}

static void ping_text(const rcli *r, const server_info *s) {
  if (r->cfg.cluster) {
    int primaries = 0;
    for (int i = 0; i < r->nnodes; i++) primaries += live_primary(&r->node[i]);
    printf("cluster     %s: %d nodes, %d primaries serving slots (redis %s)\n", r->cfg.url, r->nnodes,
           primaries, s->version);
    nodes_text(r);
  } else {
    printf("server      %s: PONG (redis %s)\n", r->cfg.url, s->version);
  }
  if (r->cfg.tls)
    printf("client      %s; TLS (libssl), the certificate verified for %s\n", kc__hiredis_name(),
           r->cfg.tls_name[0] ? r->cfg.tls_name : r->cfg.host);
  else printf("client      %s; no TLS\n", kc__hiredis_name());
  printf("connect     %.2f ms%s\n", s->connect_ms,
         r->cfg.cluster ? " (the seed, the map, every primary)" : "");
  printf("round trip  %.3f ms (min of %d), %.3f ms on average%s\n", s->best_ms, PINGS, s->avg_ms,
         r->cfg.cluster ? " (the first primary)" : "");
  printf("namespace   %s%s (%s)\n", r->cfg.prefix, r->cfg.ns,
         r->cfg.has_secret ? "KC_REMOTE_KEY set: entries are authenticated"
                           : "no KC_REMOTE_KEY: entries are not authenticated");
  printf("entries     %zu under %s (%zu in this namespace), %zu lock%s held%s\n", s->entries, r->cfg.prefix,
         s->mine, s->locks, s->locks == 1 ? "" : "s", r->cfg.cluster ? ", on all primaries" : "");
  printf("memory      %s used, maxmemory %llu, policy %s%s\n", s->used, s->maxmem, s->policy,
         r->cfg.cluster ? " (the first primary)" : "");
  if (!s->maxmem || strncmp(s->policy, "allkeys-", 8))
    printf("            (as a cache, Redis wants a maxmemory and the allkeys-lru policy: kcache sets no "
           "expiry)\n");
}

static int remote_ping(cli *c, rcli *r) {
  server_info s;
  memset(&s, 0, sizeof s);
  snprintf(s.version, sizeof s.version, "?");
  snprintf(s.policy, sizeof s.policy, "?");
  snprintf(s.used, sizeof s.used, "?");
  double t0 = mono_ns(), sum = 0;
  rcli_open(r, "ping", false);
  s.connect_ms = (mono_ns() - t0) / 1e6;
  s.best_ms = 1e30;
  for (int i = 0; i < PINGS; i++) {
    const char *argv[] = {"PING"};
    double p0 = mono_ns();
    kc__rreply rep = rcli_cmd(r, "ping", 1, argv);
    double dt = (mono_ns() - p0) / 1e6;
    kc__rreply_free(NULL, &rep);
    sum += dt;
    if (dt < s.best_ms) s.best_ms = dt;
  }
  s.avg_ms = sum / PINGS;
  if (r->cfg.cluster) ping_nodes(r);
  ping_info(r, &s);
  ping_count(r, &s);
  if (c->json) ping_json(r, &s);
  else ping_text(r, &s);
  return 0;
}

/* ------------------------------------------------------------------- ls */

static char **sort_keys; /* by_name's: the names that the indexes sorted point into */

static int by_name(const void *a, const void *b) {
  return strcmp(sort_keys[*(const size_t *)a], sort_keys[*(const size_t *)b]);
}

static void ls_lock(const cli *c, rcli *r, const char *name, const char *hexk, const char *ns,
                    size_t *shown) {
  const char *argv[] = {"GET", name}, *pargv[] = {"PTTL", name};
  /* (a neighbour's key of another type there: shown as such, not as a holder) */
  kc__rreply v = rcli_try(r, "ls", 2, argv), t = rcli_cmd(r, "ls", 2, pargv);
  const char *holder = v.type == KC__R_ERROR ? "(not a string value: another client's key)" : v.str;
  if (c->json) {
    printf("%s\n {\"key\": \"%s\", \"namespace\": ", (*shown)++ ? "," : "", hexk);
    json_str(ns);
    printf(", \"lock\": true, \"holder\": ");
    json_str(holder);
    printf(", \"ttl_ms\": %lld}", t.integer);
  } else {
    printf("%.12s  %-13s  lock held by %s (%lld ms left)\n", hexk, ns[0] ? ns : "-", holder ? holder : "?",
           t.integer);
  }
  kc__rreply_free(NULL, &v);
  kc__rreply_free(NULL, &t);
}

/* Whether a value's MAC verifies: "ok", "BAD", "none", "present", ... */
static void mac_state(const rcli *r, const kc__rreply *v, size_t total, bool ok, const char *ns, bool check,
                      char *auth, size_t len) {
  char why[256];
  size_t img = 0;
  /* a MAC follows the entry file exactly when 40 bytes are left over */
  uint64_t image = ok ? kc__entry_image_size(v->str) : 0; /* what the header says the entry holds */
  bool has_mac = ok && total == image + KC__REMOTE_TRAILER;
  if (!ns[0]) snprintf(auth, len, "%s", has_mac ? "present" : "none");
  else if (!check) snprintf(auth, len, "another secret");
  else if (total > r->cfg.max_entry) snprintf(auth, len, "too large to check");
  else
    snprintf(auth, len, "%s",
             kc__remote_unwrap(&r->cfg, v->str, v->len, &img, why, sizeof why) == KC_OK ? "ok" : "BAD");
}

static void ls_entry_out(const cli *c, const kc__entry *e, bool ok, const char *why, const char *name,
                         const char *hexk, const char *ns, size_t total, const char *auth, size_t *shown) {
  char sz[32], age[32];
  if (!c->json) {
    if (ok)
      printf("%.12s  %-13s  %-7s  %-20s  %-14s  %10s  %7s  %s\n", hexk, ns[0] ? ns : "-", e->backend,
             e->entry, *e->params ? e->params : "-", human_size(total, sz, sizeof sz),
             ago((int64_t)e->created_ns, age, sizeof age), auth);
    else
      printf("%.12s  %-13s  (damaged: %s)  %s\n", hexk, ns[0] ? ns : "-", why,
             human_size(total, sz, sizeof sz));
    (*shown)++;
    return;
  }
  printf("%s\n {\"key\": \"%s\", \"name\": ", (*shown)++ ? "," : "", hexk);
  json_str(name);
  printf(", \"namespace\": ");
  json_str(ns);
  printf(", \"size\": %zu, \"mac\": ", total);
  json_str(auth);
  if (ok) {
    printf(", \"backend\": ");
    json_str(e->backend);
    printf(", \"entry\": ");
    json_str(e->entry);
    printf(", \"params\": ");
    json_str(e->params);
    printf(", \"created_ns\": %llu}", (unsigned long long)e->created_ns);
  } else {
    printf(", \"damaged\": ");
    json_str(why);
    printf("}");
  }
}

static void ls_entry(const cli *c, rcli *r, const char *name, const char *hexk, const char *ns,
                     size_t *shown) {
  char maxs[32];
  snprintf(maxs, sizeof maxs, "%llu", (unsigned long long)r->cfg.max_entry);
  /* the head for the metadata; the whole value only to check a MAC */
  bool check = r->cfg.has_secret && ns[0] && !strncmp(r->cfg.ns, ns, strlen(ns));
  const char *argv[] = {"GETRANGE", name, "0", check ? maxs : "65535"}, *sargv[] = {"STRLEN", name};
  /* a key of another type under an entry's name (a neighbour's): listed
   * as damaged, with the server's WRONGTYPE, as the library replaces it */
  kc__rreply v = rcli_try(r, "ls", 4, argv), len = rcli_try(r, "ls", 2, sargv);
  size_t total = len.type == KC__R_INTEGER ? (size_t)len.integer : 0;
  kc__entry e;
  char why[256] = "", auth[40];
  bool ok = v.type == KC__R_STRING && kc__entry_peek_mem(v.str, v.len, total, &e, why, sizeof why) == KC_OK;
  if (v.type == KC__R_ERROR) snprintf(why, sizeof why, "not a string value (%s)", v.str ? v.str : "an error");
  mac_state(r, &v, total, ok, ns, check, auth, sizeof auth);
  ls_entry_out(c, ok ? &e : NULL, ok, why, name, hexk, ns, total, auth, shown);
  if (ok) kc__entry_free(NULL, &e);
  kc__rreply_free(NULL, &v);
  kc__rreply_free(NULL, &len);
}

static int remote_ls(cli *c, rcli *r) {
  rcli_open(r, "ls", true);
  size_t n, shown = 0;
  kc__rconn **conns;
  char **keys = rcli_keys_at(r, &n, &conns);
  size_t *order = malloc((n ? n : 1) * sizeof *order);
  if (!order) cli_fail("out of memory");
  for (size_t i = 0; i < n; i++) order[i] = i;
  sort_keys = keys;
  if (n) qsort(order, n, sizeof *order, by_name);
  if (c->json) printf("[");
  else if (n)
    printf("%-12s  %-13s  %-7s  %-20s  %-14s  %10s  %7s  %s\n", "KEY", "NAMESPACE", "BACKEND", "ENTRY",
           "PARAMS", "SIZE", "AGE", "MAC");
  for (int pass = 0; pass < 2; pass++) /* entries, then locks */
    for (size_t o = 0; o < n; o++) {
      size_t i = order[o];
      char ns[24], hexk[33];
      uint8_t key[16];
      bool lock;
      if (!key_parts(r, keys[i], ns, key, &lock) || lock != (pass == 1)) continue;
      kc__store_hex(key, hexk);
      r->conn = conns[i]; /* the node the key is on */
      if (lock) ls_lock(c, r, keys[i], hexk, ns, &shown);
      else ls_entry(c, r, keys[i], hexk, ns, &shown);
    }
  free(order);
  free(conns);
  if (c->json) printf("%s]\n", shown ? "\n" : "");
  else if (!shown) printf("(no entries under %s on %s)\n", r->cfg.prefix, r->cfg.url);
  keys_free(keys, n);
  return 0;
}

/* ---------------------------------------------------------------- clear */

static int remote_clear(cli *c, rcli *r) {
  rcli_open(r, "clear", true);
  size_t n, entries = 0, locks = 0;
  kc__rconn **conns;
  char **keys = rcli_keys_at(r, &n, &conns);
  bar b;
  bar_init(&b, "clear", c->progress);
  for (size_t i = 0; i < n; i++) {
    bar_draw(&b, i + 1, n);
    char ns[24];
    uint8_t key[16];
    bool lock;
    if (!key_parts(r, keys[i], ns, key, &lock)) continue; /* not kcache's, though under the prefix */
    r->conn = conns[i];
    const char *argv[] = {"DEL", keys[i]};
    kc__rreply rep = rcli_cmd(r, "clear", 2, argv);
    if (rep.integer == 1) {
      if (lock) locks++;
      else entries++;
    }
    kc__rreply_free(NULL, &rep);
  }
  keys_free(keys, n);
  free(conns);
  if (c->json) printf("{\"entries_removed\": %zu, \"locks_removed\": %zu}\n", entries, locks);
  else
    printf("removed %zu entries and %zu locks under %s on %s\n", entries, locks, r->cfg.prefix, r->cfg.url);
  return 0;
}

/* -------------------------------------------------------------- command */

int cmd_remote(cli *c) {
  const char *sub = NULL, *url = NULL, *prefix = NULL, *v;
  unsigned long timeout = 2000;
  for (int i = 0; i < c->argc; i++) {
    const char *a = c->argv[i];
    if (cli_opt(c, &i, "--url", &url) || cli_opt(c, &i, "--prefix", &prefix)) continue;
    if (cli_opt(c, &i, "--timeout", &v)) {
      char *end;
      timeout = strtoul(v, &end, 10);
      if (!*v || *end || !timeout || timeout > 600000)
        cli_usage("remote: --timeout takes milliseconds (1 to 600000)");
    } else if (!sub && a[0] != '-') {
      sub = a;
    } else {
      cli_unexpected(c, a);
    }
  }
  if (!sub) cli_usage("remote needs ping, ls or clear");
  int (*run)(cli *, rcli *) = !strcmp(sub, "ping")    ? remote_ping
                              : !strcmp(sub, "ls")    ? remote_ls
                              : !strcmp(sub, "clear") ? remote_clear
                                                      : NULL;
  if (!run) cli_usage("remote: no subcommand '%s' (ping, ls, clear)", sub);
  rcli r;
  memset(&r, 0, sizeof r);
  char ms[32];
  snprintf(ms, sizeof ms, "%lu", timeout);
  if (url) kc__config_set(&c->conf, KC__SET_REMOTE, url, KC__FROM_OPTION, "--url");
  if (prefix) kc__config_set(&c->conf, KC__SET_REMOTE_PREFIX, prefix, KC__FROM_OPTION, "--prefix");
  kc__config_set(&c->conf, KC__SET_REMOTE_TIMEOUT_MS, ms, KC__FROM_OPTION, "--timeout");
  kc_status st = kc__remote_config_load(&c->conf, &r.cfg, r.why, sizeof r.why);
  if (st == KC_ENOTFOUND) {
    cli_error("remote: no server: give --url redis://host:port, or set KC_REMOTE");
    return 2;
  }
  if (st) rcli_die(&r, sub);
  int rc = run(c, &r);
  rcli_close(&r);
  return rc;
}
