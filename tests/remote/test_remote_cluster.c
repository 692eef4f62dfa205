/* SPDX-License-Identifier: MIT */
/*
 * test_remote_cluster -- the remote tier on a real Redis Cluster that the
 * test starts on loopback ports (3 primaries, 3 replicas, made by
 * redis-cli --cluster create, cluster-node-timeout 1000 ms), reached
 * through one seed node (redis+cluster://):
 *
 *   routing        entries land on every primary, each on the node that owns
 *                  its slot (CLUSTER KEYSLOT agrees with kcache's CRC16), an
 *                  entry and its lock in one slot; a second node loads them
 *   single flight  8 processes cold-start the same 6 kernels at once: 6
 *                  compiles in total
 *   a secret       entries in its namespace, shared with its holders only
 *   the CLI        kcache remote ping (every node, its role), ls and clear
 *                  (every primary)
 *   MOVED and ASK  a slot migrated under a tier that already read the map:
 *                  while it migrates (ASK) and after (MOVED) the entry is
 *                  still found
 *   failover       a primary SIGKILLed while 4 processes launch: no wrong
 *                  result, no launch held past the deadlines; once a replica
 *                  is promoted, a tier opened before the kill uploads again
 *                  and a new node loads all of it (the URL names every node
 *                  as a seed, as an operator would: a new node whose only
 *                  seed is dead finds no map)
 *
 * Skipped (exit 77, with the reason) without redis-server, redis-cli or
 * libhiredis.
 */
#include "kc_internal.h"
#include "kct_conf.h"
#include "rs.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef KC_CLI
#error "KC_CLI must name the kcache executable"
#endif

static rs_cluster cl;
/* run_vs writes a byte here after its PROGRESS_AT-th launch (-1: none) */
static int progress_fd = -1;
enum { PROGRESS_AT = 8 };
static char root[512];
static int ncache;

/* A new, empty local store. */
static const char *cache(void) {
  static char dirs[64][600];
  int i = ncache++ % 64;
  snprintf(dirs[i], sizeof dirs[i], "%s/c%d", root, ncache);
  return dirs[i];
}

static bool is_primary(int i) {
  if (cl.node[i].pid <= 0) return false;
  char role[32];
  rs_cluster_role(&cl, i, role, sizeof role);
  return !strcmp(role, "master");
}

static void flush_primaries(void) {
  for (int i = 0; i < cl.n; i++)
    if (is_primary(i)) {
      kc__rreply r = rs_cmd(cl.node[i].url, "FLUSHALL", (char *)NULL);
      rs_free(&r);
    }
}

/* Keys under kctest: on node i (its own, not the cluster's). */
static size_t keys_on(int i, char ***keys) { return rs_keys(cl.node[i].url, "kctest:", keys); }

static rs_node_opts opts(void) {
  rs_node_opts o = rs_opts(cl.url);
  o.timeout_ms = 2000; /* this machine's two cores run every node, compiler and server */
  return o;
}

/* Runs kernel v % 3 with V=v for v in [v0, v0 + n) on rt: the report's
 * status, wrong results and slowest launch. */
static void run_vs(kc_runtime *rt, int v0, int n, rs_report *r) {
  for (int v = v0; v < v0 + n && !r->status; v++) {
    double t0 = kct_now();
    kc_status st = rs_run_v(rt, v % 3, v);
    double dt = kct_now() - t0;
    if (dt > r->max_launch) r->max_launch = dt;
    if (st == KC_EBACKEND) r->wrong++;
    else if (st) r->status = st;
    if (v - v0 + 1 == PROGRESS_AT && progress_fd >= 0 && write(progress_fd, "+", 1) != 1) r->status = KC_EIO;
  }
}

static rs_report node_vs(const char *dir, const rs_node_opts *o, int v0, int n) {
  rs_report r;
  memset(&r, 0, sizeof r);
  double t0 = kct_now();
  kc_runtime *rt = rs_node(dir, o);
  if (!rt) {
    r.status = KC_EUNAVAILABLE;
    return r;
  }
  r.status = rs_define(rt);
  run_vs(rt, v0, n, &r);
  r.seconds = kct_now() - t0;
  kc_stats_get(rt, &r.stats);
  kc_runtime_destroy(rt);
  return r;
}

/* A child that waits for go to close, then node_vs, and reports. */
static pid_t spawn_vs(const char *dir, const rs_node_opts *o, int v0, int n, const int go[2], int *fd,
                      int progress) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid) {
    close(p[1]);
    *fd = p[0];
    return pid;
  }
  close(p[0]);
  close(go[1]);
  progress_fd = progress;
  char c;
  while (read(go[0], &c, 1) < 0 && errno == EINTR) {}
  rs_report r = node_vs(dir, o, v0, n);
  if (write(p[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
  _exit(0);
}

/* ---------------------------------------------------------------- tests */

enum { SPREAD = 24 };

static void test_routing(void **state) {
  (void)state;
  flush_primaries();
  rs_node_opts o = opts();
  rs_report a = node_vs(cache(), &o, 0, SPREAD);
  rs_check(&a, "node A");
  assert_int_equal(a.stats.compiles, SPREAD);
  assert_int_equal(a.stats.remote_errors, 0);
  /* (its uploads end at kc_runtime_destroy: the keys below count them) */
  /* every primary holds some, each in a slot it owns, named with a hash tag */
  size_t total = 0;
  int holders = 0;
  for (int i = 0; i < cl.n; i++) {
    if (!is_primary(i)) continue;
    char **keys;
    size_t n = keys_on(i, &keys);
    holders += n > 0;
    total += n;
    for (size_t k = 0; k < n; k++) {
      const char *open = strchr(keys[k], '{'), *close = strchr(keys[k], '}');
      if (!open || close != open + 33 || close[1]) fail_msg("%s: not PREFIX{KEY}", keys[k]);
      kc__rreply s = rs_cmd(cl.node[i].url, "CLUSTER", "KEYSLOT", keys[k], (char *)NULL);
      assert_int_equal(s.type, KC__R_INTEGER);
      assert_int_equal(s.integer, kc__keyslot(keys[k], strlen(keys[k])));
      char lock[400];
      snprintf(lock, sizeof lock, "%s:lock", keys[k]);
      assert_int_equal(kc__keyslot(lock, strlen(lock)), s.integer);
      rs_free(&s);
      /* the node owns the slot: a GET there is answered, not redirected */
      kc__rreply g = rs_cmd(cl.node[i].url, "GET", keys[k], (char *)NULL);
      if (g.type != KC__R_STRING) fail_msg("%s on node %d: %s", keys[k], i, g.str ? g.str : "no value");
      rs_free(&g);
    }
    kc__rreply d = rs_cmd(cl.node[i].url, "DBSIZE", (char *)NULL);
    print_message("primary 127.0.0.1:%d holds %zu entries (DBSIZE %lld)\n", cl.node[i].port, n, d.integer);
    assert_int_equal((size_t)d.integer, n);
    rs_free(&d);
    rs_keys_free(keys, n);
  }
  assert_int_equal(total, SPREAD); /* no lock left behind */
  assert_int_equal(holders, 3);
  /* a second node loads every one of them */
  rs_report b = node_vs(cache(), &o, 0, SPREAD);
  rs_check(&b, "node B");
  assert_int_equal(b.stats.compiles, 0);
  assert_int_equal(b.stats.remote_hits, SPREAD);
  assert_int_equal(b.stats.remote_errors, 0);
}

/* Runs `kcache ARGS` (prefix kctest:); its exit status, output in *out (free). */
static int cli(char **out, const char *fmt, ...) KCT_PRINTF(2, 3);
static int cli(char **out, const char *fmt, ...) {
  char args[1024], cmd[2600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "env -u KC_REMOTE -u KC_REMOTE_KEY KC_REMOTE_PREFIX=kctest: '%s' %s 2>&1", KC_CLI,
           args);
  char *buf;
  int rc = kct_capture(cmd, &buf);
  print_message("$ kcache %s\n%s", args, buf);
  *out = buf;
  return rc;
}

static size_t count_of(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* `kcache remote ping|ls|clear` on the cluster that test_routing filled:
 * every node with its role, every primary's entries, all of them removed. */
static void test_cli(void **state) {
  (void)state;
  char *out;
  assert_int_equal(cli(&out, "remote ping --url %s", cl.url), 0);
  KCT_CONTAINS(out, "6 nodes, 3 primaries serving slots");
  assert_int_equal(count_of(out, "\nnode "), 6);
  assert_int_equal(count_of(out, " master "), 3);
  assert_int_equal(count_of(out, " replica "), 3);
  KCT_CONTAINS(out, "entries     24 under kctest:");
  free(out);
  assert_int_equal(cli(&out, "remote ping --json --url %s", cl.url), 0);
  KCT_CONTAINS(out, "\"cluster\": true");
  assert_int_equal(count_of(out, "\"role\": \"master\""), 3);
  KCT_CONTAINS(out, "\"entries\": 24");
  free(out);
  assert_int_equal(cli(&out, "remote ls --url %s", cl.url), 0);
  assert_int_equal(count_of(out, "  host  "), SPREAD);
  free(out);
  assert_int_equal(cli(&out, "remote clear --url %s", cl.url), 0);
  KCT_CONTAINS(out, "removed 24 entries and 0 locks");
  free(out);
  for (int i = 0; i < cl.n; i++)
    if (is_primary(i)) {
      kc__rreply d = rs_cmd(cl.node[i].url, "DBSIZE", (char *)NULL);
      assert_int_equal(d.integer, 0);
      rs_free(&d);
    }
}

enum { FLEET = 8, FLIGHT = 6 };

static void test_single_flight(void **state) {
  (void)state;
  flush_primaries();
  rs_node_opts o = opts();
  int go[2], fd[FLEET];
  pid_t pid[FLEET];
  assert_int_equal(pipe(go), 0);
  for (int i = 0; i < FLEET; i++) pid[i] = spawn_vs(cache(), &o, 100, FLIGHT, go, &fd[i], -1);
  close(go[0]);
  close(go[1]);
  uint64_t compiles = 0, hits = 0, errors = 0;
  for (int i = 0; i < FLEET; i++) {
    rs_report r = rs_collect(pid[i], fd[i]);
    rs_check(&r, "a node");
    compiles += r.stats.compiles;
    hits += r.stats.remote_hits;
    errors += r.stats.remote_errors;
  }
  print_message("%d nodes, %d kernels: %llu compiles, %llu remote hits, %llu errors\n", FLEET, FLIGHT,
                (unsigned long long)compiles, (unsigned long long)hits, (unsigned long long)errors);
  assert_int_equal(errors, 0);
  assert_int_equal(compiles, FLIGHT);
  assert_int_equal(hits, (FLEET - 1) * FLIGHT);
}

/* KC_REMOTE_KEY on a cluster: entries in the secret's namespace with the
 * key as hash tag, shared by nodes with the secret, unseen by one without;
 * the CLI sees them as entries of that namespace. */
static void test_secret_namespace(void **state) {
  (void)state;
  flush_primaries();
  rs_node_opts o = opts();
  o.secret = "cluster secret";
  rs_report a = node_vs(cache(), &o, 0, 3);
  rs_check(&a, "node A (secret)");
  assert_int_equal(a.stats.compiles, 3);
  rs_report b = node_vs(cache(), &o, 0, 3);
  rs_check(&b, "node B (secret)");
  assert_int_equal(b.stats.remote_hits, 3);
  assert_int_equal(b.stats.compiles, 0);
  rs_node_opts plain = opts();
  rs_report c = node_vs(cache(), &plain, 0, 3);
  rs_check(&c, "node C (no secret)");
  assert_int_equal(c.stats.remote_hits, 0);
  assert_int_equal(c.stats.compiles, 3);
  size_t tagged = 0;
  for (int i = 0; i < cl.n; i++) {
    if (!is_primary(i)) continue;
    char **keys;
    size_t n = keys_on(i, &keys);
    for (size_t k = 0; k < n; k++)
      tagged += !strncmp(keys[k], "kctest:hmac-", 12) && keys[k][20] == ':' && keys[k][21] == '{';
    rs_keys_free(keys, n);
  }
  assert_int_equal(tagged, 3);
  char *out;
  assert_int_equal(cli(&out, "remote ls --url %s", cl.url), 0);
  assert_int_equal(count_of(out, "  hmac-"), 3);
  free(out);
}

static bool take(void *ud, void *image, size_t size, char *why, size_t wl) {
  (void)size, (void)why, (void)wl;
  free(image); /* the tier's heap is libc's (opened with NULL) */
  (*(int *)ud)++;
  return true;
}

static void node_id(int i, char *out, size_t len) {
  kc__rreply r = rs_cmd(cl.node[i].url, "CLUSTER", "MYID", (char *)NULL);
  assert_int_equal(r.type, KC__R_STRING);
  snprintf(out, len, "%s", r.str);
  rs_free(&r);
}

static void ok_cmd(const char *url, const char *a, const char *b, const char *c, const char *d,
                   const char *e) {
  kc__rreply r = rs_cmd(url, a, b, c, d, e, (char *)NULL);
  if (r.type == KC__R_ERROR) fail_msg("%s %s %s %s %s: %s", a, b, c, d ? d : "", e ? e : "", r.str);
  rs_free(&r);
}

static void test_moved_and_ask(void **state) {
  (void)state;
  flush_primaries();
  rs_node_opts o = opts();
  rs_report a = node_vs(cache(), &o, 0, 1);
  rs_check(&a, "node A");
  /* the entry, where it is */
  int src = -1;
  char name[300] = "";
  for (int i = 0; i < cl.n && src < 0; i++) {
    if (!is_primary(i)) continue;
    char **keys;
    size_t n = keys_on(i, &keys);
    if (n == 1) src = i, snprintf(name, sizeof name, "%s", keys[0]);
    rs_keys_free(keys, n);
  }
  assert_true(src >= 0);
  int dst = -1;
  for (int i = 0; i < cl.n && dst < 0; i++)
    if (i != src && is_primary(i)) dst = i;
  uint8_t key[16];
  char hex[33];
  snprintf(hex, sizeof hex, "%.32s", strchr(name, '{') + 1);
  assert_true(kc__store_unhex(hex, key));
  char slot[16], sid[64], did[64], dport[16];
  snprintf(slot, sizeof slot, "%u", kc__keyslot(name, strlen(name)));
  snprintf(dport, sizeof dport, "%d", cl.node[dst].port);
  node_id(src, sid, sizeof sid);
  node_id(dst, did, sizeof did);

  /* a tier that reads the map now, before the slot moves */
  kc_options opt;
  kc_options_init(&opt);
  opt.remote_url = cl.url;
  opt.remote_prefix = "kctest:";
  opt.remote_timeout_ms = 2000;
  char vdir[600];
  snprintf(vdir, sizeof vdir, "%s/vdir", root);
  assert_int_equal(mkdir(vdir, 0700), 0);
  kc__remote *r = kc__remote_open(NULL, NULL, kct_conf(&opt), vdir);
  assert_non_null(r);
  int hits = 0;
  uint64_t lock = 0;
  assert_true(kc__remote_fetch(r, key, take, &hits, &lock));
  assert_int_equal(lock, 0);

  /* migrating: the key moves to dst; src answers ASK for it */
  ok_cmd(cl.node[dst].url, "CLUSTER", "SETSLOT", slot, "IMPORTING", sid);
  ok_cmd(cl.node[src].url, "CLUSTER", "SETSLOT", slot, "MIGRATING", did);
  kc__rreply m = rs_cmd(cl.node[src].url, "MIGRATE", "127.0.0.1", dport, name, "0", "5000", (char *)NULL);
  if (m.type == KC__R_ERROR) fail_msg("MIGRATE: %s", m.str);
  rs_free(&m);
  kc__rreply g = rs_cmd(cl.node[src].url, "GET", name, (char *)NULL);
  assert_int_equal(g.type, KC__R_ERROR);
  KCT_CONTAINS(g.str, "ASK");
  rs_free(&g);
  assert_true(kc__remote_fetch(r, key, take, &hits, &lock));
  assert_int_equal(lock, 0);

  /* moved: the slot is dst's; src answers MOVED */
  for (int i = 0; i < cl.n; i++)
    if (is_primary(i)) ok_cmd(cl.node[i].url, "CLUSTER", "SETSLOT", slot, "NODE", did);
  g = rs_cmd(cl.node[src].url, "GET", name, (char *)NULL);
  assert_int_equal(g.type, KC__R_ERROR);
  KCT_CONTAINS(g.str, "MOVED");
  rs_free(&g);
  assert_true(kc__remote_fetch(r, key, take, &hits, &lock));
  assert_int_equal(lock, 0);
  assert_int_equal(hits, 3);
  kc_stats st;
  memset(&st, 0, sizeof st);
  kc__remote_stats(r, &st);
  assert_int_equal(st.remote_errors, 0);
  assert_int_equal(st.remote_hits, 3);
  kc__remote_close(r);
  /* and a new node finds it where it is now */
  rs_report b = node_vs(cache(), &o, 0, 1);
  rs_check(&b, "node B");
  assert_int_equal(b.stats.remote_hits, 1);
  assert_int_equal(b.stats.compiles, 0);
}

enum { RUNNERS = 4, RUN = 120, AFTER = 24 };

static void test_failover(void **state) {
  (void)state;
  flush_primaries();
  rs_node_opts o = opts();
  o.url = cl.seeds;
  o.timeout_ms = 100;
  o.retry_ms = 300;
  o.lock_ms = 3000;
  int go[2], fd[RUNNERS], progress[2];
  pid_t pid[RUNNERS];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(progress), 0);
  for (int i = 0; i < RUNNERS; i++) pid[i] = spawn_vs(cache(), &o, 200, RUN, go, &fd[i], progress[1]);
  close(progress[1]);
  /* a tier in use before the kill, which must resume by itself (made after
   * the forks: a process with threads is not forked under ThreadSanitizer) */
  kc_runtime *keep = rs_node(cache(), &o);
  assert_non_null(keep);
  assert_int_equal(rs_define(keep), KC_OK);
  rs_report k;
  memset(&k, 0, sizeof k);
  run_vs(keep, 300, 3, &k);
  rs_check(&k, "the lasting node, before");
  close(go[0]);
  close(go[1]);
  double t0 = kct_now();
  char c; /* the kill: once a node has done PROGRESS_AT launches */
  while (read(progress[0], &c, 1) < 0 && errno == EINTR) {}
  int victim = -1;
  for (int i = 0; i < cl.n && victim < 0; i++)
    if (is_primary(i)) victim = i;
  assert_true(victim >= 0);
  print_message("SIGKILL to primary 127.0.0.1:%d at %.2f s\n", cl.node[victim].port, kct_now() - t0);
  int victim_port = cl.node[victim].port;
  rs_stop(&cl.node[victim]); /* SIGKILL */
  uint64_t compiles = 0, errors = 0, skips = 0;
  double worst = 0, last = 0;
  for (int i = 0; i < RUNNERS; i++) {
    rs_report r = rs_collect(pid[i], fd[i]);
    rs_check(&r, "a node during the failover"); /* every result right */
    compiles += r.stats.compiles;
    errors += r.stats.remote_lookup_errors;
    skips += r.stats.remote_lookup_skips;
    if (r.max_launch > worst) worst = r.max_launch;
    if (r.seconds > last) last = r.seconds;
  }
  close(progress[0]); /* (open until every node wrote its byte) */
  print_message("%d nodes x %d kernels through the kill: %llu compiles, %llu lookups failed, %llu skipped "
                "(breaker), slowest launch %.3f s, last node done at %.2f s\n",
                RUNNERS, RUN, (unsigned long long)compiles, (unsigned long long)errors,
                (unsigned long long)skips, worst, last);
  assert_true(errors + skips > 0); /* the kill came in the middle of the run */
  assert_true(worst < 5.0); /* a compile, plus deadlines: never the lock timeout's waits and more */

  /* until a replica is promoted: nodes that have not yet marked the dead
   * primary failed (cluster-node-timeout) still report cluster_state ok */
  double f0 = kct_now();
  int promoted = 0;
  while (kct_now() - f0 < 20) {
    assert_true(rs_cluster_wait_ok(&cl, 20 - (kct_now() - f0)));
    promoted = 0;
    for (int i = 0; i < cl.n; i++) promoted += is_primary(i);
    if (promoted == 3) break;
    usleep(100000);
  }
  assert_int_equal(promoted, 3);
  print_message("the cluster is ok again %.2f s after the run (3 primaries)\n", kct_now() - f0);

  /* the tier opened before the kill resumes: after its breaker's retry, it
   * finds the new primary (the map read again) and uploads */
  rs_report warm;
  memset(&warm, 0, sizeof warm);
  run_vs(keep, 400, 6, &warm);
  rs_check(&warm, "the lasting node, first launches after the failover");
  usleep(400000); /* past the breaker's retry */
  kc_stats s0, s1;
  kc_stats_get(keep, &s0);
  rs_report after;
  memset(&after, 0, sizeof after);
  run_vs(keep, 500, AFTER, &after);
  rs_check(&after, "the lasting node, after the failover");
  kc_stats_get(keep, &s1);
  kc_runtime_destroy(keep); /* drains its uploads */
  print_message("after: %llu lookups, %llu errors, %llu skipped\n",
                (unsigned long long)(s1.remote_lookups - s0.remote_lookups),
                (unsigned long long)(s1.remote_errors - s0.remote_errors),
                (unsigned long long)(s1.remote_lookup_skips - s0.remote_lookup_skips));
  assert_int_equal(s1.remote_errors - s0.remote_errors, 0);
  assert_int_equal(s1.remote_lookup_skips - s0.remote_lookup_skips, 0);
  assert_int_equal(s1.remote_lookups - s0.remote_lookups, AFTER);
  /* a new node loads every one of them: the promoted replica's slots too */
  rs_report b = node_vs(cache(), &o, 500, AFTER);
  rs_check(&b, "a new node after the failover");
  print_message(
      "a new node: %llu lookups, %llu hits, %llu misses, %llu errors, %llu skipped; %llu compiles\n",
      (unsigned long long)b.stats.remote_lookups, (unsigned long long)b.stats.remote_hits,
      (unsigned long long)b.stats.remote_misses, (unsigned long long)b.stats.remote_errors,
      (unsigned long long)b.stats.remote_lookup_skips, (unsigned long long)b.stats.compiles);
  assert_int_equal(b.stats.remote_hits, AFTER);
  assert_int_equal(b.stats.compiles, 0);
  /* ping shows the dead node as down, the promoted replica as a primary */
  char *out;
  assert_int_equal(cli(&out, "remote ping --url %s", cl.seeds), 0);
  KCT_CONTAINS(out, "3 primaries serving slots");
  char dead[64];
  snprintf(dead, sizeof dead, "127.0.0.1:%d", victim_port);
  KCT_CONTAINS(out, dead);
  KCT_CONTAINS(out, "DOWN");
  free(out);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
  unsetenv("KC_REMOTE");
  unsetenv("KC_CACHE_DISABLE");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routing),       cmocka_unit_test(test_cli), /* after test_routing: its entries */
      cmocka_unit_test(test_single_flight), cmocka_unit_test(test_secret_namespace),
      cmocka_unit_test(test_moved_and_ask), cmocka_unit_test(test_failover), /* last: it kills a primary */
  };
  double t0 = kct_now();
  rs_cluster_start(&cl, 3, 1000);
  print_message("a cluster of 3 primaries and 3 replicas in %.2f s: %s\n", kct_now() - t0, cl.url);
  st_mkdtemp(root, sizeof root, "cluster");
  rc = cmocka_run_group_tests_name(kct_group_name("Redis Cluster"), tests, NULL, NULL);
  rs_cluster_stop(&cl);
  kct_rmrf(root);
  return rc;
}
