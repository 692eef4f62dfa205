/* SPDX-License-Identifier: MIT */
/*
 * test_remote_tls -- the remote tier over TLS (rediss://) against real
 * redis-servers started with --tls-port only, with a CA and certificates
 * made here with the openssl command: two nodes share compiles; the
 * server's name is verified (an address against the certificate's IP
 * entries, a name against its DNS names, KC_REMOTE_TLS_SERVER_NAME);
 * eight nodes cold-starting compile each kernel once (single flight); a
 * server with an expired certificate, one for another name and one from a
 * CA the client does not trust are each refused with the reason, and the
 * launches compile; client certificates (--tls-auth-clients yes); a CA
 * file that cannot be used; a password and a secret over TLS; the
 * deadlines: a handshake nobody answers, a server stopped mid-run;
 * `kcache remote ping` over rediss://.
 */
#include "rs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#ifndef KC_CLI
#error "KC_CLI must name the kcache executable"
#endif

static char pki[512]; /* the certificates */
static char ca[600]; /* pki/ca.crt */
static rs_server server; /* the good one, clients not authenticated */

/* The server arguments for certificate `name` (pki/NAME.crt, .key) and
 * client authentication `auth` (no, yes). */
static const char *tls_args(const char *name, const char *auth) {
  static char buf[2048];
  snprintf(buf, sizeof buf,
           "--tls-cert-file '%s/%s.crt' --tls-key-file '%s/%s.key' --tls-ca-cert-file '%s' "
           "--tls-auth-clients %s",
           pki, name, pki, name, ca, auth);
  return buf;
}

static void sh(const char *cmd) {
  int rc = system(cmd);
  if (rc != 0) fail_msg("exit status %d: %s", rc, cmd);
}

static int group_setup(void **state) {
  (void)state;
  if (!kct_in_path("openssl")) {
    printf("SKIPPED: the TLS tests make their certificates with the openssl command, which is missing\n");
    exit(77);
  }
  st_mkdtemp(pki, sizeof pki, "pki");
  snprintf(ca, sizeof ca, "%s/ca.crt", pki);
  /* EC keys: fast handshakes. `-days -1`: a certificate that expired a day ago. */
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "set -e; cd '%s'; exec 2>openssl.log\n"
           "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key; }\n"
           "ca() { key $1; openssl req -x509 -new -key $1.key -out $1.crt -days 30 -subj \"/CN=$2\"; }\n"
           "cert() { key $1; openssl req -new -key $1.key -out $1.csr -subj \"/CN=$1\";"
           "  printf 'subjectAltName=%%s\\n' \"$4\" > $1.ext;"
           "  openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -out $1.crt -days $3"
           " -extfile $1.ext; }\n"
           "ca ca 'kcache test CA'\n"
           "ca stranger-ca 'a CA nobody trusts'\n"
           "cert good ca 30 IP:127.0.0.1,DNS:localhost\n"
           "cert expired ca -1 IP:127.0.0.1,DNS:localhost\n"
           "cert other-name ca 30 DNS:cache.example\n"
           "cert stranger stranger-ca 30 IP:127.0.0.1,DNS:localhost\n"
           "cert client ca 30 DNS:kcache-client\n",
           pki);
  sh(cmd);
  rs_tls_ca = ca;
  rs_start_tls(&server, NULL, tls_args("good", "no"), NULL);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  rs_stop(&server);
  st_rmrf(pki);
  return 0;
}

typedef struct fx {
  char root[512];
  char count[600];
  char wrapper[600];
  int n;
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  st_mkdtemp(f->root, sizeof f->root, "rtls");
  snprintf(f->count, sizeof f->count, "%s/compiles", f->root);
  st_wrapper(f->root, f->wrapper, sizeof f->wrapper);
  kc__rreply r = rs_cmd(server.url, "FLUSHALL", (char *)NULL);
  assert_int_equal(r.type, KC__R_STATUS);
  rs_free(&r);
  setenv("KC_REMOTE_TLS_CA", ca, 1);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  st_rmrf(f->root);
  free(f);
  unsetenv("KC_REMOTE_TLS_CA");
  unsetenv("KC_REMOTE_TLS_CERT");
  unsetenv("KC_REMOTE_TLS_KEY");
  unsetenv("KC_REMOTE_TLS_SERVER_NAME");
  unsetenv("KC_TEST_COUNT");
  unsetenv("KC_TEST_SLEEP");
  return kct_teardown(state);
}

static const char *cache(fx *f) {
  static char path[8][700];
  char *p = path[f->n++ % 8];
  snprintf(p, 700, "%s/node%d", f->root, f->n);
  return p;
}

static size_t entries_in(const char *url) {
  char **keys;
  size_t n = rs_keys(url, "kctest:", &keys), e = 0;
  for (size_t i = 0; i < n; i++) e += !strstr(keys[i], ":lock");
  rs_keys_free(keys, n);
  return e;
}

/* A node at url whose tier the server must refuse: every launch compiles,
 * and the log says why (want). */
static void refused(fx *f, const char *url, const char *want) {
  rs_node_opts o = rs_opts(url);
  st_capture_begin();
  rs_report r = rs_node_run(cache(f), &o, 7);
  char *err = st_capture_end();
  print_message("%s", err);
  rs_check(&r, url);
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_hits, 0);
  assert_int_equal(r.stats.remote_uploads, 0);
  assert_true(r.stats.remote_errors >= 1);
  KCT_CONTAINS(err, "TLS: the server's certificate was refused");
  KCT_CONTAINS(err, want);
  free(err);
}

static void test_two_nodes_share_compiles_over_tls(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  rs_report r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "node A");
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_misses, 3);
  assert_int_equal(r.stats.remote_errors, 0);
  assert_int_equal(entries_in(server.url), 3);

  const char *b = cache(f);
  r = rs_node_run(b, &o, 7);
  rs_check(&r, "node B");
  assert_int_equal(r.stats.compiles, 0);
  assert_int_equal(r.stats.remote_hits, 3);
  assert_int_equal(r.stats.remote_errors, 0);
  assert_int_equal(st_entries(b, NULL), 3);

  /* by name: localhost resolves (to ::1 first, where nothing listens, on
   * some machines: then to 127.0.0.1) and is one of the certificate's names */
  char url[600];
  snprintf(url, sizeof url, "rediss://localhost:%d", server.port);
  o = rs_opts(url);
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "node C by name");
  assert_int_equal(r.stats.compiles, 0);
  assert_int_equal(r.stats.remote_hits, 3);
  /* the name to verify given apart from the address */
  setenv("KC_REMOTE_TLS_SERVER_NAME", "localhost", 1);
  o = rs_opts(server.url);
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "node D, server name localhost");
  assert_int_equal(r.stats.remote_hits, 3);
  assert_int_equal(r.stats.remote_errors, 0);
}

/* Single flight over TLS: eight nodes (processes) cold-start the same
 * three kernels at once; three compiles in all. */
static void test_eight_nodes_cold_start_compile_three_times(void **state) {
  fx *f = *state;
  enum { N = 8 };
  rs_node_opts o = rs_opts(server.url);
  o.cc = f->wrapper;
  setenv("KC_TEST_COUNT", f->count, 1);
  setenv("KC_TEST_SLEEP", "0.3", 1); /* slow compiles: every node asks while the first compiles */
  const char *caches[N];
  for (int i = 0; i < N; i++) caches[i] = cache(f);
  rs_report rep[N];
  rs_fleet(caches, N, &o, 7, rep);
  uint64_t compiles = 0, hits = 0, errors = 0;
  for (int i = 0; i < N; i++) {
    const rs_report r = rep[i];
    compiles += r.stats.compiles;
    hits += r.stats.remote_hits;
    errors += r.stats.remote_errors;
  }
  print_message("8 nodes x 3 kernels over TLS: %llu compiles, %llu remote hits, %llu errors\n",
                (unsigned long long)compiles, (unsigned long long)hits, (unsigned long long)errors);
  assert_int_equal(compiles, 3);
  assert_int_equal(st_lines(f->count), 3);
  assert_int_equal(hits, 3 * N - 3);
  assert_int_equal(entries_in(server.url), 3);
}

static void test_bad_certificates_are_refused(void **state) {
  fx *f = *state;
  static const struct {
    const char *cert, *why;
  } cases[] = {
      {"expired", "certificate has expired"},
      {"other-name", "IP address mismatch (it is not for \"127.0.0.1\""},
      {"stranger", "unable to get local issuer certificate (no trusted CA issued it; KC_REMOTE_TLS_CA"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rs_server s;
    rs_start_tls(&s, NULL, tls_args(cases[i].cert, "no"), NULL);
    print_message("-- %s\n", cases[i].cert);
    refused(f, s.url, cases[i].why);
    if (!strcmp(cases[i].cert, "other-name")) { /* by name: a host name mismatch */
      setenv("KC_REMOTE_TLS_SERVER_NAME", "localhost", 1);
      refused(f, s.url, "hostname mismatch (it is not for \"localhost\"");
      setenv("KC_REMOTE_TLS_SERVER_NAME", "cache.example", 1); /* the certificate's name: accepted */
      rs_node_opts o = rs_opts(s.url);
      rs_report r = rs_node_run(cache(f), &o, 7);
      rs_check(&r, "server name cache.example");
      assert_int_equal(r.stats.remote_errors, 0);
      assert_int_equal(r.stats.remote_misses, 3);
      unsetenv("KC_REMOTE_TLS_SERVER_NAME");
    }
    rs_stop(&s);
  }
  /* the system's CAs do not know the test CA */
  unsetenv("KC_REMOTE_TLS_CA");
  refused(f, server.url, "no trusted CA issued it");
  assert_int_equal(entries_in(server.url), 0); /* nothing went through */
}

static void test_client_certificates(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start_tls(&s, NULL, tls_args("good", "yes"), NULL);
  rs_node_opts o = rs_opts(s.url);
  /* without one: the server ends the session (TLS 1.3: after the
   * handshake, so the first command fails) */
  st_capture_begin();
  rs_report r = rs_node_run(cache(f), &o, 7);
  char *err = st_capture_end();
  print_message("%s", err);
  rs_check(&r, "no client certificate");
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_hits + r.stats.remote_uploads, 0);
  assert_true(r.stats.remote_errors >= 1);
  KCT_CONTAINS(err,
               "TLS: the server requires a client certificate (KC_REMOTE_TLS_CERT and KC_REMOTE_TLS_KEY)");
  free(err);

  char cert[700], key[700];
  snprintf(cert, sizeof cert, "%s/client.crt", pki);
  snprintf(key, sizeof key, "%s/client.key", pki);
  setenv("KC_REMOTE_TLS_CERT", cert, 1);
  setenv("KC_REMOTE_TLS_KEY", key, 1);
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "client certificate A");
  assert_int_equal(r.stats.remote_errors, 0);
  assert_int_equal(r.stats.remote_misses, 3); /* uploaded by kc_runtime_destroy at the latest */
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "client certificate B");
  assert_int_equal(r.stats.compiles, 0);
  assert_int_equal(r.stats.remote_hits, 3);

  /* a key that is not the certificate's: the tier is off, with the reason */
  snprintf(key, sizeof key, "%s/good.key", pki);
  setenv("KC_REMOTE_TLS_KEY", key, 1);
  st_capture_begin();
  r = rs_node_run(cache(f), &o, 7);
  err = st_capture_end();
  rs_check(&r, "wrong client key");
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_lookups, 0);
  KCT_CONTAINS(err, "the remote tier is off");
  KCT_CONTAINS(err, "(KC_REMOTE_TLS_KEY) cannot be used: ");
  KCT_CONTAINS(err, "key values mismatch");
  free(err);
  rs_stop(&s);
}

static void test_unusable_ca_turns_the_tier_off(void **state) {
  fx *f = *state;
  char bad[700];
  snprintf(bad, sizeof bad, "%s/good.key", pki); /* not a certificate */
  setenv("KC_REMOTE_TLS_CA", bad, 1);
  rs_node_opts o = rs_opts(server.url);
  st_capture_begin();
  rs_report r = rs_node_run(cache(f), &o, 7);
  char *err = st_capture_end();
  print_message("%s", err);
  rs_check(&r, "unusable CA");
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_lookups, 0);
  KCT_CONTAINS(err, "the remote tier is off: TLS: the CA file");
  KCT_CONTAINS(err, "(KC_REMOTE_TLS_CA) cannot be used");
  free(err);
}

/* AUTH and entries authenticated with KC_REMOTE_KEY, over TLS. */
static void test_password_and_secret_over_tls(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start_tls(&s, "pw3", tls_args("good", "no"), NULL);
  rs_node_opts o = rs_opts(s.url);
  o.secret = "fleet secret";
  rs_report r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "node A");
  assert_int_equal(r.stats.remote_errors, 0);
  assert_int_equal(r.stats.remote_misses, 3);
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "node B");
  assert_int_equal(r.stats.compiles, 0);
  assert_int_equal(r.stats.remote_hits, 3);
  char **keys;
  size_t n = rs_keys(s.url, "kctest:hmac-", &keys);
  assert_true(n >= 3); /* in the secret's namespace */
  rs_keys_free(keys, n);
  char bad[700];
  snprintf(bad, sizeof bad, "rediss://:wrong@127.0.0.1:%d", s.port);
  o = rs_opts(bad);
  st_capture_begin();
  r = rs_node_run(cache(f), &o, 7);
  char *err = st_capture_end();
  rs_check(&r, "wrong password");
  assert_int_equal(r.stats.compiles, 3);
  KCT_CONTAINS(err, "authentication failed");
  free(err);
  rs_stop(&s);
}

/* A listener that never answers: the TCP connection is made (the kernel's
 * backlog) but no TLS handshake comes back. The connect gives up at its
 * deadline, and a node's launches compile without waiting longer. */
static void test_deadlines(void **state) {
  fx *f = *state;
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(l, 16), 0);
  assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
  char url[100], why[512];
  snprintf(url, sizeof url, "rediss://127.0.0.1:%d", ntohs(a.sin_port));
  kc__remote_config cfg;
  memset(&cfg, 0, sizeof cfg);
  assert_int_equal(kc__remote_parse_url(url, &cfg, why, sizeof why), KC_OK);
  snprintf(cfg.tls_ca, sizeof cfg.tls_ca, "%s", ca);
  cfg.timeout_ms = 100;
  kc__rconn *c = NULL;
  double t0 = st_now();
  assert_int_equal(kc__rconn_open(NULL, &cfg, &c, why, sizeof why), KC_EIO);
  double dt = st_now() - t0;
  print_message("silent listener: %s after %.1f ms\n", why, dt * 1e3);
  KCT_CONTAINS(why, "no TLS handshake within 100 ms (timeout)");
  /* slack: scheduling on a loaded machine (a handshake that blocked would never end) */
  const double slack = 0.15;
  if (!(dt >= 0.095 && dt < 0.1 + slack))
    fail_msg("the connect gave up after %.1f ms (timeout 100 ms)", dt * 1e3);

  rs_node_opts o = rs_opts(url);
  o.timeout_ms = 100;
  st_capture_begin();
  rs_report r = rs_node_run(cache(f), &o, 7);
  char *err = st_capture_end();
  rs_check(&r, "silent listener");
  assert_int_equal(r.stats.compiles, 3);
  if (r.stats.remote_lookups > 3 || (double)r.stats.remote_lookup_ns / 1e9 > 3 * (0.1 + slack))
    fail_msg("%llu lookups took %.1f ms in all (timeout 100 ms each)",
             (unsigned long long)r.stats.remote_lookups, (double)r.stats.remote_lookup_ns / 1e6);
  KCT_CONTAINS(err, "no TLS handshake within 100 ms");
  free(err);
  close(l);

  /* a server stopped under a pooled TLS connection: each lookup ends at its deadline */
  rs_server s;
  rs_start_tls(&s, NULL, tls_args("good", "no"), NULL);
  o = rs_opts(s.url);
  o.timeout_ms = 100;
  o.retry_ms = 400;
  kc_runtime *rt = rs_node(cache(f), &o);
  assert_non_null(rt);
  KCT_OK(rt, rs_define(rt));
  KCT_OK(rt, rs_run_v(rt, 0, 0)); /* a pooled connection, an upload */
  usleep(300000);
  assert_int_equal(kct_stats(rt).remote_errors, 0);
  kill(s.pid, SIGSTOP);
  double worst = 0;
  for (int v = 1; v <= 4; v++) {
    kc_stats x = kct_stats(rt);
    KCT_OK(rt, rs_run_v(rt, 0, v));
    kc_stats y = kct_stats(rt);
    double lookup = (double)(y.remote_lookup_ns - x.remote_lookup_ns) / 1e9;
    if (lookup > worst) worst = lookup;
  }
  /* the timeout, and the lock deadline of the second try on a new
   * connection (its handshake) after a read that missed the timeout */
  double bound = 0.1 + KC__REMOTE_DEFAULT_LOCK_DEADLINE_MS / 1e3;
  print_message("server stopped: worst lookup %.1f ms (timeout 100 ms, lock deadline %u ms)\n", worst * 1e3,
                KC__REMOTE_DEFAULT_LOCK_DEADLINE_MS);
  if (worst > bound + slack) fail_msg("a lookup took %.1f ms (timeout 100 ms)", worst * 1e3);
  assert_true(kct_stats(rt).remote_errors >= 1);
  kc_runtime_destroy(rt);
  kill(s.pid, SIGCONT);
  rs_stop(&s);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median time of 50 connects (TCP, the handshake with a context made
 * beforehand, as the tier's pool does) and PINGs over url. */
static double median_connect_ms(const char *url, double *ping_ms) {
  kc__remote_config cfg;
  char why[512];
  memset(&cfg, 0, sizeof cfg);
  assert_int_equal(kc__remote_parse_url(url, &cfg, why, sizeof why), KC_OK);
  if (cfg.tls) snprintf(cfg.tls_ca, sizeof cfg.tls_ca, "%s", ca);
  cfg.timeout_ms = 2000;
  if (kc__remote_tls_setup(&cfg, why, sizeof why)) fail_msg("%s", why);
  enum { N = 50 };
  double t[N], p[N];
  for (int i = 0; i < N; i++) {
    kc__rconn *c = NULL;
    double t0 = st_now();
    if (kc__rconn_open(NULL, &cfg, &c, why, sizeof why)) fail_msg("%s: %s", url, why);
    double t1 = st_now();
    kc__rreply r;
    if (kc__rconn_cmdv(c, &r, why, sizeof why, "PING", (char *)NULL)) fail_msg("%s: %s", url, why);
    assert_int_equal(r.type, KC__R_STATUS);
    kc__rreply_free(NULL, &r);
    t[i] = (t1 - t0) * 1e3;
    p[i] = (st_now() - t1) * 1e3;
    kc__rconn_close(c);
  }
  kc__remote_tls_release(&cfg);
  qsort(t, N, sizeof *t, cmp_double);
  qsort(p, N, sizeof *p, cmp_double);
  *ping_ms = p[N / 2];
  return t[N / 2];
}

/* What TLS costs a connection (printed; the pool makes one per thread that
 * needs one, not one per command). */
static void test_connect_cost(void **state) {
  (void)state;
  rs_server plain;
  rs_start(&plain, NULL, NULL);
  double pp, tp;
  double p = median_connect_ms(plain.url, &pp), t = median_connect_ms(server.url, &tp);
  print_message("median of 50: connect %.3f ms plain, %.3f ms TLS (ECDSA P-256); then PING %.3f ms plain, "
                "%.3f ms TLS\n",
                p, t, pp, tp);
  rs_stop(&plain);
}

static void test_cli_ping_over_tls(void **state) {
  (void)state;
  char cmd[2048], *out = NULL;
  snprintf(cmd, sizeof cmd, "env -u KC_REMOTE KC_REMOTE_TLS_CA='%s' '%s' remote ping --url %s 2>&1", ca,
           KC_CLI, server.url);
  int rc = kct_capture(cmd, &out);
  print_message("%s", out);
  assert_int_equal(rc, 0);
  KCT_CONTAINS(out, "PONG");
  KCT_CONTAINS(out, "TLS (libssl), the certificate verified for 127.0.0.1");
  free(out);
  snprintf(cmd, sizeof cmd, "env -u KC_REMOTE -u KC_REMOTE_TLS_CA '%s' remote ping --url %s 2>&1", KC_CLI,
           server.url);
  rc = kct_capture(cmd, &out);
  print_message("%s", out);
  assert_int_equal(rc, 1);
  KCT_CONTAINS(out, "TLS: the server's certificate was refused");
  free(out);
}

/* rediss+cluster://: three primaries serving TLS only, their bus over TLS
 * too (tls-cluster yes), made with redis-cli --tls --cluster create: the
 * slot map is read over TLS, nodes share compiles through it, and the CLI
 * pings every node. */
static void test_cluster_over_tls(void **state) {
  fx *f = *state;
  if (!kct_in_path("redis-cli")) {
    print_message("SKIPPED (this test): redis-cli is missing\n");
    return;
  }
  rs_cluster c;
  memset(&c, 0, sizeof c);
  c.n = 3;
  char create[4096], url[600];
  size_t o = (size_t)snprintf(create, sizeof create, "redis-cli --tls --cacert '%s' --cluster create", ca);
  size_t u = (size_t)snprintf(url, sizeof url, "rediss+cluster://");
  for (int i = 0; i < c.n; i++) {
    char extra[512];
    snprintf(extra, sizeof extra,
             "--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 "
             "--cluster-port %d --tls-cluster yes",
             rs_free_port());
    rs_start_tls(&c.node[i], NULL, tls_args("good", "no"), extra);
    o += (size_t)snprintf(create + o, sizeof create - o, " 127.0.0.1:%d", c.node[i].port);
    u += (size_t)snprintf(url + u, sizeof url - u, "%s127.0.0.1:%d", i ? "," : "", c.node[i].port);
  }
  snprintf(create + o, sizeof create - o, " --cluster-replicas 0 --cluster-yes >'%s/create.log' 2>&1",
           c.node[0].dir);
  sh(create);
  assert_true(rs_cluster_wait_ok(&c, 20));
  rs_node_opts no = rs_opts(url);
  rs_report a = rs_node_run(cache(f), &no, 7);
  rs_check(&a, "node A");
  assert_int_equal(a.stats.compiles, 3);
  assert_int_equal(a.stats.remote_errors, 0);
  rs_report b = rs_node_run(cache(f), &no, 7);
  rs_check(&b, "node B");
  assert_int_equal(b.stats.compiles, 0);
  assert_int_equal(b.stats.remote_hits, 3);
  char cmd[2048], *out = NULL;
  snprintf(cmd, sizeof cmd,
           "env -u KC_REMOTE KC_REMOTE_PREFIX=kctest: KC_REMOTE_TLS_CA='%s' '%s' remote ping --url %s 2>&1",
           ca, KC_CLI, url);
  int rc = kct_capture(cmd, &out);
  print_message("%s", out);
  assert_int_equal(rc, 0);
  KCT_CONTAINS(out, "3 nodes, 3 primaries serving slots");
  KCT_CONTAINS(out, "TLS (libssl), the certificate verified for 127.0.0.1");
  KCT_CONTAINS(out, "entries     3 under kctest:");
  free(out);
  rs_cluster_stop(&c);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_two_nodes_share_compiles_over_tls),
      T(test_eight_nodes_cold_start_compile_three_times),
      T(test_bad_certificates_are_refused),
      T(test_client_certificates),
      T(test_unusable_ca_turns_the_tier_off),
      T(test_password_and_secret_over_tls),
      T(test_deadlines),
      T(test_connect_cost),
      T(test_cli_ping_over_tls),
      T(test_cluster_over_tls),
  };
#undef T
  return cmocka_run_group_tests_name(kct_group_name("remote tier over TLS"), tests, group_setup,
                                     group_teardown);
}
