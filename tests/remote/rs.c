/* SPDX-License-Identifier: MIT */
/* rs.c -- the helpers declared in rs.h. */
#include "rs.h"
#include "kct_conf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

void rs_require_server(void) {
  const char *why = NULL;
  if (!kct_in_path("redis-server"))
    why = "redis-server is not installed (Debian: apt-get install redis-server)";
  else why = kc__hiredis_unavailable(kc__config_str(kct_conf(NULL), KC__SET_HIREDIS_LIB));
  if (why) {
    printf("SKIPPED: remote tier tests need a Redis server and hiredis: %s\n", why);
    fflush(stdout);
    exit(77);
  }
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    fail_msg("no free loopback port: %s", strerror(errno));
  close(fd);
  return ntohs(a.sin_port);
}

int rs_free_port(void) { return free_port(); }

const char *rs_tls_ca;

/* cfg for a raw connection to url (rediss://: trusting rs_tls_ca). */
static bool raw_config(const char *url, kc__remote_config *cfg, char *why, size_t wl) {
  memset(cfg, 0, sizeof *cfg);
  if (kc__remote_parse_url(url, cfg, why, wl)) return false;
  if (cfg->tls && rs_tls_ca) snprintf(cfg->tls_ca, sizeof cfg->tls_ca, "%s", rs_tls_ca);
  return true;
}

static bool answers(const char *url) {
  kc__remote_config cfg;
  char why[512];
  if (!raw_config(url, &cfg, why, sizeof why)) return false;
  cfg.timeout_ms = 500;
  kc__rconn *c;
  if (kc__rconn_open(NULL, &cfg, &c, why, sizeof why)) return false;
  kc__rreply r;
  bool ok = kc__rconn_cmdv(c, &r, why, sizeof why, "PING", (char *)NULL) == KC_OK && r.type == KC__R_STATUS;
  kc__rreply_free(NULL, &r);
  kc__rconn_close(c);
  return ok;
}

static bool accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

void rs_start(rs_server *s, const char *password, const char *extra) {
  rs_start_tls(s, password, NULL, extra);
}

void rs_start_tls(rs_server *s, const char *password, const char *tls, const char *extra) {
  memset(s, 0, sizeof *s);
  st_mkdtemp(s->dir, sizeof s->dir, "redis");
  for (int attempt = 0; attempt < 5; attempt++) { /* the port may be taken between the probe and the bind */
    s->port = free_port();
    const char *scheme = tls ? "rediss" : "redis";
    if (password) snprintf(s->url, sizeof s->url, "%s://:%s@127.0.0.1:%d", scheme, password, s->port);
    else snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%d", scheme, s->port);
    char cmd[4096], ports[64];
    if (tls) snprintf(ports, sizeof ports, "--port 0 --tls-port %d", s->port);
    else snprintf(ports, sizeof ports, "--port %d", s->port);
    snprintf(cmd, sizeof cmd,
             "exec redis-server %s --bind 127.0.0.1 --save '' --appendonly no --dir '%s' "
             "--logfile '%s/redis.log' --daemonize no %s%s %s %s",
             ports, s->dir, s->dir, password ? "--requirepass " : "", password ? password : "",
             tls ? tls : "", extra ? extra : "");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that dies takes its server along */
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
      _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 200; i++) {
      /* TLS: listening is enough (the tests start servers that clients must refuse) */
      if (tls ? accepts(s->port) : answers(s->url)) return;
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) break; /* it exited: try another port */
      usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
  }
  fail_msg("redis-server did not start (see %s/redis.log)", s->dir);
}

void rs_stop(rs_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
  }
  if (s->dir[0]) kct_rmrf(s->dir);
  s->dir[0] = 0;
}

void rs_cluster_start(rs_cluster *c, int primaries, int node_timeout_ms) {
  if (!kct_in_path("redis-cli")) {
    printf("SKIPPED: the Redis Cluster tests need redis-cli (Debian: apt-get install redis-tools)\n");
    fflush(stdout);
    exit(77);
  }
  memset(c, 0, sizeof *c);
  c->n = 2 * primaries;
  assert_true(c->n <= RS_CLUSTER_MAX);
  char create[4096];
  size_t o = (size_t)snprintf(create, sizeof create, "redis-cli --cluster create");
  for (int i = 0; i < c->n; i++) {
    char extra[512];
    /* the bus port named (its default, port + 10000, may not exist for an ephemeral port) */
    snprintf(extra, sizeof extra,
             "--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout %d "
             "--cluster-port %d --cluster-replica-validity-factor 0 --repl-ping-replica-period 1",
             node_timeout_ms, free_port());
    rs_start(&c->node[i], NULL, extra);
    o += (size_t)snprintf(create + o, sizeof create - o, " 127.0.0.1:%d", c->node[i].port);
  }
  snprintf(create + o, sizeof create - o, " --cluster-replicas 1 --cluster-yes >'%s/create.log' 2>&1",
           c->node[0].dir);
  if (system(create) != 0) fail_msg("redis-cli --cluster create failed (see %s/create.log)", c->node[0].dir);
  if (!rs_cluster_wait_ok(c, 20)) fail_msg("the cluster did not reach cluster_state:ok in 20 s");
  snprintf(c->url, sizeof c->url, "redis+cluster://127.0.0.1:%d", c->node[0].port);
  o = (size_t)snprintf(c->seeds, sizeof c->seeds, "redis+cluster://");
  for (int i = 0; i < c->n; i++)
    o += (size_t)snprintf(c->seeds + o, sizeof c->seeds - o, "%s127.0.0.1:%d", i ? "," : "", c->node[i].port);
}

void rs_cluster_stop(rs_cluster *c) {
  for (int i = 0; i < c->n; i++) rs_stop(&c->node[i]);
}

/* INFO's field `name` on url, or "" (a node that does not answer). */
static void info_field(const char *url, const char *section, const char *name, char *out, size_t len) {
  out[0] = 0;
  kc__remote_config cfg;
  char why[512];
  if (!raw_config(url, &cfg, why, sizeof why)) return;
  cfg.timeout_ms = 1000;
  kc__rconn *conn;
  if (kc__rconn_open(NULL, &cfg, &conn, why, sizeof why)) return;
  kc__rreply r;
  const char *cmd = section && !strcmp(section, "cluster") ? "CLUSTER" : "INFO";
  const char *arg = section && !strcmp(section, "cluster") ? "INFO" : section;
  if (kc__rconn_cmdv(conn, &r, why, sizeof why, cmd, arg, (char *)NULL) == KC_OK && r.type == KC__R_STRING) {
    size_t nl = strlen(name);
    for (const char *l = r.str; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
      if (!strncmp(l, name, nl) && l[nl] == ':') {
        snprintf(out, len, "%.*s", (int)strcspn(l + nl + 1, "\r\n"), l + nl + 1);
        break;
      }
  }
  kc__rreply_free(NULL, &r);
  kc__rconn_close(conn);
}

bool rs_cluster_wait_ok(rs_cluster *c, double timeout_s) {
  double t0 = kct_now();
  while (kct_now() - t0 < timeout_s) {
    bool ok = true, any = false;
    for (int i = 0; i < c->n && ok; i++) {
      if (c->node[i].pid <= 0) continue;
      char state[32], slots[32];
      info_field(c->node[i].url, "cluster", "cluster_state", state, sizeof state);
      info_field(c->node[i].url, "cluster", "cluster_slots_ok", slots, sizeof slots);
      ok = !strcmp(state, "ok") && !strcmp(slots, "16384");
      any = true;
    }
    if (ok && any) return true;
    usleep(100000);
  }
  for (int i = 0; i < c->n; i++) { /* why not */
    if (c->node[i].pid <= 0) continue;
    char state[32], slots[32], role[32];
    info_field(c->node[i].url, "cluster", "cluster_state", state, sizeof state);
    info_field(c->node[i].url, "cluster", "cluster_slots_ok", slots, sizeof slots);
    rs_cluster_role(c, i, role, sizeof role);
    printf("# node 127.0.0.1:%d: %s, cluster_state %s, cluster_slots_ok %s\n", c->node[i].port, role, state,
           slots);
  }
  return false;
}

void rs_cluster_role(rs_cluster *c, int i, char *out, size_t len) {
  info_field(c->node[i].url, "replication", "role", out, len);
}

kc__rreply rs_cmdb(const char *url, int argc, const char *const *argv, const size_t *lens) {
  kc__remote_config cfg;
  char why[512];
  if (!raw_config(url, &cfg, why, sizeof why)) fail_msg("%s", why);
  cfg.timeout_ms = 5000;
  kc__rconn *c;
  if (kc__rconn_open(NULL, &cfg, &c, why, sizeof why)) fail_msg("connecting to %s: %s", url, why);
  kc__rreply r;
  if (kc__rconn_cmd(c, argc, argv, lens, &r, why, sizeof why)) fail_msg("%s on %s: %s", argv[0], url, why);
  kc__rconn_close(c);
  return r;
}

kc__rreply rs_cmd(const char *url, ...) {
  const char *argv[16];
  size_t lens[16];
  int argc = 0;
  va_list ap;
  va_start(ap, url);
  for (const char *a; argc < 16 && (a = va_arg(ap, const char *));) {
    argv[argc] = a;
    lens[argc++] = strlen(a);
  }
  va_end(ap);
  return rs_cmdb(url, argc, argv, lens);
}

void rs_free(kc__rreply *r) { kc__rreply_free(NULL, r); }

size_t rs_keys(const char *url, const char *prefix, char ***out) {
  char pattern[300];
  snprintf(pattern, sizeof pattern, "%s*", prefix);
  kc__rreply r = rs_cmd(url, "KEYS", pattern, (char *)NULL);
  assert_int_equal(r.type, KC__R_ARRAY);
  char **keys = calloc(r.n ? r.n : 1, sizeof *keys);
  for (size_t i = 0; i < r.n; i++) keys[i] = strdup(r.elem[i].str);
  size_t n = r.n;
  rs_free(&r);
  *out = keys;
  return n;
}

void rs_keys_free(char **keys, size_t n) {
  for (size_t i = 0; i < n; i++) free(keys[i]);
  free(keys);
}

const char *const rs_kernels[3] = {
    "KC_KERNEL void k1(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = scale(1.0f, (float)i) + V; }",
    "KC_KERNEL void k2(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = scale(2.0f, (float)i) + V; }",
    "KC_KERNEL void k3(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = scale(3.0f, (float)i) + V; }",
};
static const char *const names[3] = {"k1", "k2", "k3"};

kc_status rs_define(kc_runtime *rt) {
  kc_status st =
      kc_define(rt, "scale", "KC_DEVICE float scale(float n, float i) { return n * (i + 1.0f); }", NULL);
  for (int i = 0; i < 3 && !st; i++) st = kc_define(rt, names[i], rs_kernels[i], NULL);
  return st;
}

kc_status rs_run(kc_runtime *rt, int n) { return rs_run_v(rt, n, 0); }

kc_status rs_run_v(kc_runtime *rt, int n, int v) {
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  enum { N = 32 };
  float out[N];
  kc_status st = kc_context_create(rt, 0, &ctx);
  if (!st) st = kc_buffer_create(ctx, sizeof out, &b);
  char params[32];
  snprintf(params, sizeof params, "V=%d", v);
  if (!st) st = kc_kernel_create(rt, names[n], params, &k);
  if (!st) st = kct_run(k, ctx, b, N, out);
  for (int i = 0; !st && i < N; i++)
    if (out[i] != (float)(n + 1) * (float)(i + 1) + (float)v) st = KC_EBACKEND;
  kc_kernel_destroy(k);
  kc_buffer_destroy(b);
  kc_context_destroy(ctx);
  return st;
}

kc_runtime *rs_node(const char *cache_dir, const rs_node_opts *o) {
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = kct_backend;
  opt.host_cc = o->cc ? o->cc : kct_host_cc();
  opt.cache_dir = cache_dir;
  opt.remote_url = o->url ? o->url : "";
  opt.remote_key = o->secret ? o->secret : "";
  opt.remote_prefix = "kctest:";
  opt.remote_timeout_ms = o->timeout_ms ? o->timeout_ms : 2000;
  opt.remote_lock_timeout_ms = o->lock_ms;
  opt.remote_retry_ms = o->retry_ms;
  opt.remote_max_entry = o->max_entry;
  kc_runtime *rt = NULL;
  return kc_runtime_create(&opt, &rt) == KC_OK ? rt : NULL;
}

void rs_check(const rs_report *r, const char *what) {
  if (r->status) fail_msg("%s: %s", what, kc_status_name((kc_status)r->status));
  if (r->wrong) fail_msg("%s: %d kernel(s) computed a wrong result", what, r->wrong);
}

rs_report rs_node_run(const char *cache_dir, const rs_node_opts *o, unsigned kernels) {
  rs_report r;
  memset(&r, 0, sizeof r);
  double t0 = kct_now();
  kc_runtime *rt = rs_node(cache_dir, o);
  if (!rt) {
    r.status = KC_EUNAVAILABLE;
    return r;
  }
  r.status = rs_define(rt);
  for (int i = 0; i < 3 && !r.status; i++) {
    if (!(kernels & (1u << i))) continue;
    double l0 = kct_now();
    kc_status st = rs_run(rt, i);
    double dt = kct_now() - l0;
    if (dt > r.max_launch) r.max_launch = dt;
    if (st == KC_EBACKEND) r.wrong++;
    else if (st) r.status = st;
  }
  r.seconds = kct_now() - t0;
  kc_stats_get(rt, &r.stats);
  double d0 = kct_now();
  kc_runtime_destroy(rt);
  r.destroy_seconds = kct_now() - d0;
  return r;
}

pid_t rs_spawn(const char *cache_dir, const rs_node_opts *o, unsigned kernels, const int go[2],
               int *report_fd) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid) {
    close(p[1]);
    *report_fd = p[0];
    return pid;
  }
  close(p[0]);
  char c;
  if (go) {
    close(go[1]); /* the parent's: closing it is the start signal */
    while (read(go[0], &c, 1) < 0 && errno == EINTR) {}
  }
  rs_report r = rs_node_run(cache_dir, o, kernels);
  if (write(p[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
  _exit(0);
}

rs_report rs_collect(pid_t pid, int fd) {
  rs_report r;
  memset(&r, 0, sizeof r);
  ssize_t n = read(fd, &r, sizeof r);
  close(fd);
  int st = 0;
  waitpid(pid, &st, 0);
  if (n != (ssize_t)sizeof r) fail_msg("node %d sent no report (wait status %d)", (int)pid, st);
  return r;
}

bool rs_name_of(const char *url, const char *prefix, const char *entry, char *out, size_t len) {
  char **keys;
  size_t n = rs_keys(url, prefix, &keys);
  bool found = false;
  for (size_t i = 0; i < n && !found; i++) {
    size_t kl = strlen(keys[i]);
    if (kl > 5 && !strcmp(keys[i] + kl - 5, ":lock")) continue;
    kc__rreply v = rs_cmd(url, "GET", keys[i], (char *)NULL);
    kc__entry e;
    if (v.type == KC__R_STRING && kc__entry_peek_mem(v.str, v.len, v.len, &e, NULL, 0) == KC_OK) {
      if (!strcmp(e.entry, entry)) {
        snprintf(out, len, "%s", keys[i]);
        found = true;
      }
      kc__entry_free(NULL, &e);
    }
    rs_free(&v);
  }
  rs_keys_free(keys, n);
  return found;
}

/* LeakSanitizer, in the ASan build: PoCL (and the LLVM inside it) keep
 * allocations of a kernel build until the process exits. Third-party code
 * only: nothing of kcache's is suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libpocl.so\nleak:libLLVM\n"; }

/* ThreadSanitizer: host_link writes the empty-grid hook into a global of
 * the shared object it has just dlopen()ed; when an earlier object was
 * dlclose()d (the store's probe context unlinks what it test-loaded), the
 * new one is often mapped at the same address, and the unmapping happens
 * inside ld.so, which TSan does not see: the write looks like a race with
 * one into the old, gone mapping. Only that top frame is suppressed (as in
 * tests/reliability); the remote tier's threads and locks stay checked. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) { return "race_top:host_link\n"; }

void rs_fleet(const char *const *caches, int n, const rs_node_opts *o, unsigned kernels, rs_report *out) {
  assert_true(n > 0 && n <= 64);
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pid[64];
  int fd[64];
  for (int i = 0; i < n; i++) pid[i] = rs_spawn(caches[i], o, kernels, go, &fd[i]);
  close(go[0]);
  close(go[1]); /* all of them at once */
  for (int i = 0; i < n; i++) {
    out[i] = rs_collect(pid[i], fd[i]);
    rs_check(&out[i], "a node");
  }
}
