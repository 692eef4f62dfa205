/* SPDX-License-Identifier: MIT */
/*
 * rs.h -- what the remote tier's tests share: a real redis-server started
 * on a free loopback port in a private directory (no persistence) and
 * killed at the end, a raw client on it (through the library's own
 * connection code), three kernels, and "nodes": runtimes with their own
 * local store on the shared server, runnable in this process or in forked
 * children that report back through a pipe.
 */
#ifndef KC_RS_H
#define KC_RS_H

#include "remote/remote.h"
#include "st.h"

#include <sys/types.h>

/* A loopback port that was free a moment ago. */
int rs_free_port(void);
/* Exits 77 with "SKIPPED: ..." when redis-server or libhiredis is missing. */
void rs_require_server(void);

typedef struct rs_server {
  pid_t pid;
  int port;
  char dir[512];
  char url[600]; /* redis://[:password@]127.0.0.1:port */
} rs_server;

/* Starts redis-server in a new directory under $TMPDIR with `extra`
 * arguments (e.g. "--requirepass pw"; may be NULL). Fails the test if it
 * does not answer PING within 10 s. */
void rs_start(rs_server *s, const char *password, const char *extra);
/* The same over TLS only (--port 0 --tls-port P): tls holds redis-server's
 * --tls-* arguments; url is rediss://. Ready once it listens (it is not
 * asked: the tests start servers whose certificates clients refuse). */
void rs_start_tls(rs_server *s, const char *password, const char *tls, const char *extra);
/* The CA file that raw commands on a rediss:// URL trust (NULL: the
 * system's). */
extern const char *rs_tls_ca;
/* Kills it (SIGKILL, also when stopped) and removes its directory. */
void rs_stop(rs_server *s);

/* A Redis Cluster on loopback ports: n primaries, each with one replica
 * (redis-cli --cluster create --cluster-replicas 1), cluster-node-timeout
 * node_timeout_ms; ready when every node says cluster_state:ok. url is
 * redis+cluster:// with the first node as the only seed, seeds with every
 * node. Exits 77 with
 * "SKIPPED: ..." when redis-cli is missing. */
enum { RS_CLUSTER_MAX = 8 };
typedef struct rs_cluster {
  int n; /* nodes: 2 * primaries */
  rs_server node[RS_CLUSTER_MAX];
  char url[600];
  char seeds[600];
} rs_cluster;
void rs_cluster_start(rs_cluster *c, int primaries, int node_timeout_ms);
void rs_cluster_stop(rs_cluster *c);
/* Waits (at most timeout_s) until a live node says cluster_state:ok and
 * every slot has a live primary; false if it never did. */
bool rs_cluster_wait_ok(rs_cluster *c, double timeout_s);
/* Node i's role now ("master", "slave"), from its own INFO replication. */
void rs_cluster_role(rs_cluster *c, int i, char *out, size_t len);

/* A raw command on url (NULL-terminated text arguments); fails the test on
 * a connection error. Free the reply with rs_free. */
kc__rreply rs_cmd(const char *url, ...);
/* The same with binary arguments. */
kc__rreply rs_cmdb(const char *url, int argc, const char *const *argv, const size_t *lens);
void rs_free(kc__rreply *r);
/* Every key under prefix (malloc'd array of malloc'd strings). */
size_t rs_keys(const char *url, const char *prefix, char ***out);
void rs_keys_free(char **keys, size_t n);

/* The three kernels: kN(y) writes y[i] = N * (i + 1) + V (V: 0 unless the
 * spec has the parameter V). All call the device function `scale`. */
extern const char *const rs_kernels[3];
kc_status rs_define(kc_runtime *rt);
/* Launches kernel n (0..2) with V=v and checks the result; no cmocka
 * calls. KC_EBACKEND: a wrong result. */
kc_status rs_run_v(kc_runtime *rt, int n, int v);
kc_status rs_run(kc_runtime *rt, int n); /* V=0 */
/* The Redis name of the entry of kernel `entry` under prefix (found by
 * reading every value's metadata); false if there is none. */
bool rs_name_of(const char *url, const char *prefix, const char *entry, char *out, size_t len);

/* A node: its own local store under root, the tier at url. */
typedef struct rs_node_opts {
  const char *url;
  const char *secret;
  uint32_t timeout_ms, lock_ms, retry_ms;
  uint64_t max_entry;
  const char *cc; /* NULL: kct_host_cc() */
} rs_node_opts;
/* The options of a node at url, every other field zero. */
static inline rs_node_opts rs_opts(const char *url) {
  rs_node_opts o;
  memset(&o, 0, sizeof o);
  o.url = url;
  return o;
}
kc_runtime *rs_node(const char *cache_dir, const rs_node_opts *o);

/* What a node did (also sent by forked children). */
typedef struct rs_report {
  int status; /* first failing kc_status, or KC_OK */
  int wrong; /* kernels that computed a wrong result */
  kc_stats stats; /* before kc_runtime_destroy */
  double seconds; /* from start to the results */
  double destroy_seconds; /* kc_runtime_destroy (drains uploads) */
  double max_launch; /* the slowest first launch */
} rs_report;

/* Fails the test unless the node's kernels all ran and computed the right
 * results (what: for the message). */
void rs_check(const rs_report *r, const char *what);

/* Runs kernels (bit mask of 0..2) on a new node and destroys it. */
rs_report rs_node_run(const char *cache_dir, const rs_node_opts *o, unsigned kernels);

/* Forks a child that waits until the pipe `go` is closed (go NULL: starts
 * at once), then rs_node_run, and reports through a pipe (environment:
 * KC_TEST_COUNT etc. are inherited). */
pid_t rs_spawn(const char *cache_dir, const rs_node_opts *o, unsigned kernels, const int go[2],
               int *report_fd);
rs_report rs_collect(pid_t pid, int report_fd);
/* n nodes (processes, at most 64; node i's local store caches[i]) started
 * together, each running kernels; their reports, each checked, in out. */
void rs_fleet(const char *const *caches, int n, const rs_node_opts *o, unsigned kernels, rs_report *out);

#endif
