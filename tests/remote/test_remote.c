/* SPDX-License-Identifier: MIT */
/*
 * test_remote -- the remote tier against a real redis-server on loopback
 * (started here, killed at the end; skipped when redis-server or hiredis is
 * missing): a second node loads what the first compiled; eight processes
 * with their own local stores cold-start three kernels and compile three
 * times in total; a server that is stopped and then killed delays no launch
 * past the timeout, and not at all once the breaker is open; values damaged
 * in Redis are detected, compiled again and replaced; a wrong password;
 * secrets (none, right, wrong, forged entries); a lock whose holder died;
 * the size limit; threads sharing one runtime.
 *
 * Nodes use the host backend with tcc when installed, the key prefix
 * "kctest:", and generous timeouts unless a test is about timeouts: the
 * machine running the tests may be loaded.
 */
#include "rs.h"
#include "kct_conf.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static rs_server server; /* the group's; tests that kill a server start their own */

typedef struct fx {
  char root[512];
  char count[600];
  char wrapper[600];
  int n; /* caches made */
} fx;

static int group_setup(void **state) {
  (void)state;
  rs_start(&server, NULL, NULL);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  rs_stop(&server);
  return 0;
}

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  st_mkdtemp(f->root, sizeof f->root, "remote");
  snprintf(f->count, sizeof f->count, "%s/compiles", f->root);
  st_wrapper(f->root, f->wrapper, sizeof f->wrapper);
  kc__rreply r = rs_cmd(server.url, "FLUSHALL", (char *)NULL);
  rs_free(&r);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  st_rmrf(f->root);
  free(f);
  unsetenv("KC_TEST_COUNT");
  unsetenv("KC_TEST_SLEEP");
  return kct_teardown(state);
}

/* A new, empty local store: a new node. */
static const char *cache(fx *f) {
  static char path[8][700];
  char *p = path[f->n++ % 8];
  snprintf(p, 700, "%s/node%d", f->root, f->n);
  return p;
}

static size_t entries_in(const char *url, const char *prefix) {
  char **keys;
  size_t n = rs_keys(url, prefix, &keys), e = 0;
  for (size_t i = 0; i < n; i++) e += !strstr(keys[i], ":lock");
  rs_keys_free(keys, n);
  return e;
}

/* The value in Redis verifies as an entry (framing, MAC with cfg's secret,
 * checksums, key) and holds kernel `entry`. */
static void assert_sound(const char *name, const char *secret, const char *entry) {
  kc__rreply v = rs_cmd(server.url, "GET", name, (char *)NULL);
  if (v.type != KC__R_STRING) fail_msg("%s: no value", name);
  kc__remote_config cfg;
  char why[512];
  kc_options o;
  kc_options_init(&o);
  o.remote_url = server.url;
  o.remote_key = secret ? secret : "";
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &cfg, why, sizeof why), KC_OK);
  size_t img;
  if (kc__remote_unwrap(&cfg, v.str, v.len, &img, why, sizeof why)) fail_msg("%s: %s", name, why);
  void *copy = malloc(img);
  memcpy(copy, v.str, img);
  kc__entry e;
  if (kc__entry_decode(NULL, copy, img, &e, why, sizeof why)) fail_msg("%s: %s", name, why);
  char hex[33];
  kc__store_hex(e.key, hex);
  KCT_CONTAINS(name, hex);
  assert_string_equal(e.entry, entry);
  kc__entry_free(NULL, &e);
  rs_free(&v);
}

/* ------------------------------------------------------------------ tests */

static void test_second_node_loads_the_first_nodes_compile(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  const char *a = cache(f);
  rs_report r = rs_node_run(a, &o, 7);
  rs_check(&r, "node A");
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_misses, 3);
  assert_int_equal(r.stats.remote_hits, 0);
  assert_int_equal(r.stats.remote_errors, 0);
  /* uploads finish at kc_runtime_destroy at the latest */
  assert_int_equal(entries_in(server.url, "kctest:"), 3);

  /* the same bytes as the local entry file, under the same key */
  char name[300], path[4096];
  assert_true(rs_name_of(server.url, "kctest:", "k1", name, sizeof name));
  st_entry_of(a, "k1", "V=0", path, sizeof path);
  size_t fsize;
  void *file = st_read_file(path, &fsize);
  kc__rreply v = rs_cmd(server.url, "GET", name, (char *)NULL);
  assert_int_equal(v.len, fsize);
  assert_memory_equal(v.str, file, fsize);
  const char *base = strrchr(path, '/') + 1;
  assert_memory_equal(name + strlen("kctest:"), base, 32);
  rs_free(&v);
  free(file);

  const char *b = cache(f);
  r = rs_node_run(b, &o, 7);
  rs_check(&r, "node B");
  assert_int_equal(r.stats.compiles, 0);
  assert_int_equal(r.stats.remote_hits, 3);
  assert_int_equal(r.stats.disk_misses, 3);
  assert_int_equal(r.stats.remote_uploads, 0);
  assert_int_equal(st_entries(b, NULL), 3); /* written to B's disk */

  r = rs_node_run(b, &o, 7); /* B again: its disk, not the network */
  rs_check(&r, "node B again");
  assert_int_equal(r.stats.disk_hits, 3);
  assert_int_equal(r.stats.remote_lookups, 0);
}

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
  uint64_t compiles = 0, hits = 0, waits = 0;
  double slowest = 0;
  for (int i = 0; i < N; i++) {
    const rs_report r = rep[i];
    compiles += r.stats.compiles;
    hits += r.stats.remote_hits;
    waits += r.stats.remote_lock_waits;
    if (r.seconds > slowest) slowest = r.seconds;
  }
  print_message(
      "8 nodes x 3 kernels: %llu compiles (the compiler ran %zu times), %llu remote hits, %llu lock waits, "
      "slowest node %.2f s\n",
      (unsigned long long)compiles, st_lines(f->count), (unsigned long long)hits, (unsigned long long)waits,
      slowest);
  assert_int_equal(compiles, 3);
  assert_int_equal(st_lines(f->count), 3);
  assert_int_equal(hits, 3 * N - 3);
  assert_int_equal(entries_in(server.url, "kctest:"), 3); /* what the 3 compiling nodes uploaded */
}

/* A remote lookup that timed out or was skipped never costs more than the
 * timeout, plus the single-flight deadline (KC_REMOTE_LOCK_DEADLINE_MS,
 * 250 ms by default) when its first read missed the timeout on a
 * connection that worked (it goes on with the lock's deadline rather than
 * compile without the lock), plus scheduling slack on a loaded machine. */
static void test_stopped_then_killed_server_delays_no_launch(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start(&s, NULL, NULL);
  rs_node_opts o = rs_opts(s.url);
  o.timeout_ms = 100;
  o.retry_ms = 400;
  kc_runtime *rt = rs_node(cache(f), &o);
  assert_non_null(rt);
  KCT_OK(rt, rs_define(rt));
  KCT_OK(rt, rs_run_v(rt, 0, 0)); /* warm: a pooled connection, an upload */
  usleep(300000);
  kc_stats s0 = kct_stats(rt);
  assert_int_equal(s0.remote_errors, 0);

  kill(s.pid, SIGSTOP);
  double slack = 0.06, worst_lookup = 0, worst_launch = 0;
  int networked = 0;
  for (int v = 1; v <= 8; v++) {
    kc_stats a = kct_stats(rt);
    double t0 = st_now();
    KCT_OK(rt, rs_run_v(rt, 0, v));
    double dt = st_now() - t0;
    kc_stats b = kct_stats(rt);
    double lookup = (double)(b.remote_lookup_ns - a.remote_lookup_ns) / 1e9;
    networked += b.remote_lookups > a.remote_lookups;
    if (lookup > worst_lookup) worst_lookup = lookup;
    if (dt > worst_launch) worst_launch = dt;
  }
  kc_stats s1 = kct_stats(rt);
  print_message("server stopped: 8 launches, %d asked the server (worst lookup %.0f ms, timeout 100 ms, lock "
                "deadline 250 ms), "
                "%llu skipped by the breaker; worst launch %.0f ms\n",
                networked, worst_lookup * 1e3, (unsigned long long)(s1.remote_skips - s0.remote_skips),
                worst_launch * 1e3);
  assert_true(worst_lookup <= 0.1 + KC__REMOTE_DEFAULT_LOCK_DEADLINE_MS / 1e3 + slack);
  assert_true(networked <= 3);
  assert_true(s1.remote_skips - s0.remote_skips >= 5);

  kill(s.pid, SIGKILL); /* also ends a stopped process */
  waitpid(s.pid, NULL, 0);
  s.pid = 0;
  usleep(450000); /* past retry_ms: one lookup tries again, is refused at once */
  worst_lookup = 0;
  for (int v = 9; v <= 12; v++) {
    kc_stats a = kct_stats(rt);
    KCT_OK(rt, rs_run_v(rt, 1, v));
    kc_stats b = kct_stats(rt);
    double lookup = (double)(b.remote_lookup_ns - a.remote_lookup_ns) / 1e9;
    if (lookup > worst_lookup) worst_lookup = lookup;
  }
  print_message("server killed: worst lookup %.1f ms\n", worst_lookup * 1e3);
  assert_true(worst_lookup <= 0.1 + slack);
  double t0 = st_now();
  kc_runtime_destroy(rt); /* queued uploads are skipped or time out, bounded */
  double dt = st_now() - t0;
  print_message("kc_runtime_destroy with the server gone: %.0f ms\n", dt * 1e3);
  assert_true(dt < 1.0);
  rs_stop(&s);
}

static void test_no_server_at_all(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start(&s, NULL, NULL);
  char url[600];
  snprintf(url, sizeof url, "%s", s.url);
  rs_stop(&s); /* nobody listens on the port now */
  rs_node_opts o = rs_opts(url);
  o.timeout_ms = 50;
  kc_runtime *rt = rs_node(cache(f), &o);
  assert_non_null(rt);
  KCT_OK(rt, rs_define(rt));
  st_capture_begin();
  for (int v = 0; v < 6; v++) KCT_OK(rt, rs_run_v(rt, 2, v));
  char *err = st_capture_end();
  kc_stats st = kct_stats(rt);
  assert_int_equal(st.compiles, 6);
  assert_true(st.remote_errors >= 1 && st.remote_errors <= 4); /* failures in flight at once may pass 3 */
  assert_true(st.remote_skips >= 3);
  assert_true(st.remote_lookup_ns < 6 * 50000000ull);
  assert_int_equal(st_count(err, "kcache: warning: remote tier"), 1); /* one warning, not one per launch */
  KCT_CONTAINS(err, "connecting to 127.0.0.1");
  free(err);
  kc_runtime_destroy(rt);
}

/* Every line of the log, kept for test_counters_add_up. */
typedef struct loglines {
  pthread_mutex_t lock;
  char *lines[4096];
  int n;
} loglines;

static void keep_line(void *ud, kc_log_level level, const char *msg) {
  (void)level;
  loglines *l = ud;
  pthread_mutex_lock(&l->lock);
  if (l->n < 4096) l->lines[l->n++] = strdup(msg);
  pthread_mutex_unlock(&l->lock);
}

/* A line that says one thing twice: its clauses (split at "; ", ", "
 * and ": ", so "kernel NAME: " is one of its own) must differ. */
static bool repeats_a_phrase(const char *line) {
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", line);
  char *clauses[64];
  int n = 0;
  for (char *p = buf; p && n < 64;) {
    clauses[n++] = p;
    char *cut = NULL;
    for (const char *sep = "; \0, \0: \0"; *sep; sep += 3) { /* the first of "; ", ", ", ": " */
      char *at = strstr(p, sep);
      if (at && (!cut || at < cut)) cut = at;
    }
    if (cut) *cut = 0, cut += 2;
    p = cut;
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (*clauses[i] && !strcmp(clauses[i], clauses[j])) return true;
  return false;
}

/* The tier's counters add up through a run with the server up, stopped
 * (commands time out), back, and flapping: every disk miss asks the tier
 * once, and each lookup asked is exactly one of a hit, a miss, an error
 * or a skip; no log line repeats a phrase (the issue saw "remote hit, no
 * compile; remote hit" and more errors than lookups). */
static void test_counters_add_up(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start(&s, NULL, NULL);
  loglines log;
  memset(&log, 0, sizeof log);
  pthread_mutex_init(&log.lock, NULL);
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = kct_backend;
  opt.host_cc = kct_host_cc();
  opt.remote_url = s.url;
  opt.remote_prefix = "kctest:";
  opt.remote_timeout_ms = 60;
  opt.remote_retry_ms = 150;
  opt.log = keep_line;
  opt.log_ud = &log;
  opt.log_level = KC_LOG_DEBUG;
  /* two nodes: the second finds what the first uploaded (remote hits) */
  kc_runtime *rt[2];
  for (int i = 0; i < 2; i++) {
    opt.cache_dir = cache(f);
    KCT_OK(NULL, kc_runtime_create(&opt, &rt[i]));
    KCT_OK(rt[i], rs_define(rt[i]));
  }
  const char *phases[] = {"up", "stopped", "back", "flapping"};
  int v = 0;
  bool stopped = false;
  for (int ph = 0; ph < 4; ph++) {
    if (ph == 1) kill(s.pid, SIGSTOP), stopped = true;
    if (ph == 2) kill(s.pid, SIGCONT), stopped = false, usleep(200000); /* past retry_ms */
    for (int step = 0; step < 12; step++, v++) {
      if (ph == 3 && step % 3 == 0) {
        kill(s.pid, stopped ? SIGCONT : SIGSTOP);
        stopped = !stopped;
        usleep(stopped ? 0 : 160000);
      }
      for (int i = 0; i < 2; i++) KCT_OK(rt[i], rs_run_v(rt[i], v % 3, v)); /* a new spec: a disk miss */
      usleep(20000); /* uploads go out */
    }
    for (int i = 0; i < 2; i++) {
      kc_stats st = kct_stats(rt[i]);
      print_message("%s, node %d: %llu disk misses; %llu lookups = %llu hits + %llu misses + %llu errors; "
                    "%llu skipped; %llu errors and %llu skips in all (uploads too)\n",
                    phases[ph], i, (unsigned long long)st.disk_misses, (unsigned long long)st.remote_lookups,
                    (unsigned long long)st.remote_hits, (unsigned long long)st.remote_misses,
                    (unsigned long long)st.remote_lookup_errors, (unsigned long long)st.remote_lookup_skips,
                    (unsigned long long)st.remote_errors, (unsigned long long)st.remote_skips);
      assert_int_equal(st.remote_lookups, st.remote_hits + st.remote_misses + st.remote_lookup_errors);
      assert_int_equal(st.remote_lookups + st.remote_lookup_skips, st.disk_misses);
      assert_true(st.remote_lookup_errors <= st.remote_errors);
      assert_true(st.remote_lookup_skips <= st.remote_skips);
      if (ph == 0) assert_int_equal(st.remote_lookup_errors + st.remote_lookup_skips, 0);
      if (ph >= 1) assert_true(st.remote_lookup_errors + st.remote_lookup_skips > 0);
      if (ph == 0 && i == 1) assert_true(st.remote_hits > 0);
    }
  }
  if (stopped) kill(s.pid, SIGCONT);
  for (int i = 0; i < 2; i++) kc_runtime_destroy(rt[i]);
  int bad = 0;
  for (int i = 0; i < log.n; i++) {
    if (repeats_a_phrase(log.lines[i]) && bad++ < 5) print_message("repeats a phrase: %s\n", log.lines[i]);
    free(log.lines[i]);
  }
  print_message("%d log lines, %d repeating a phrase\n", log.n, bad);
  assert_true(log.n > 0);
  assert_int_equal(bad, 0);
  pthread_mutex_destroy(&log.lock);
  rs_stop(&s);
}

typedef enum damage { FLIP, TRUNCATE, FOREIGN, OTHER_KEY, WRONG_TYPE, EMPTY_TRAILER } damage;
static const char *const damage_names[] = {"a flipped byte",       "truncated",
                                           "foreign bytes",        "another key's entry",
                                           "a list, not a string", "unknown trailing bytes"};

static void damage_value(const char *name, const char *other, damage d) {
  kc__rreply v = rs_cmd(server.url, "GET", name, (char *)NULL);
  assert_int_equal(v.type, KC__R_STRING);
  kc__rreply r;
  switch (d) {
  case FLIP: {
    char off[32], byte[2] = {(char)(v.str[v.len / 2] ^ 0x5a), 0};
    snprintf(off, sizeof off, "%zu", v.len / 2);
    const char *argv[] = {"SETRANGE", name, off, byte};
    size_t lens[] = {8, strlen(name), strlen(off), 1};
    r = rs_cmdb(server.url, 4, argv, lens);
    break;
  }
  case TRUNCATE: {
    const char *argv[] = {"SET", name, v.str};
    size_t lens[] = {3, strlen(name), v.len / 2};
    r = rs_cmdb(server.url, 3, argv, lens);
    break;
  }
  case FOREIGN:
    r = rs_cmd(server.url, "SET", name,
               "this is not a kcache entry, but it is long enough to look like one at first"
               " glance: a header needs sixty-four bytes",
               (char *)NULL);
    break;
  case OTHER_KEY: {
    kc__rreply o = rs_cmd(server.url, "GET", other, (char *)NULL);
    const char *argv[] = {"SET", name, o.str};
    size_t lens[] = {3, strlen(name), o.len};
    r = rs_cmdb(server.url, 3, argv, lens);
    rs_free(&o);
    break;
  }
  case WRONG_TYPE:
    r = rs_cmd(server.url, "DEL", name, (char *)NULL);
    rs_free(&r);
    r = rs_cmd(server.url, "RPUSH", name, "x", (char *)NULL);
    break;
  case EMPTY_TRAILER: r = rs_cmd(server.url, "APPEND", name, "garbage", (char *)NULL); break;
  }
  rs_free(&r);
  rs_free(&v);
}

static void test_damaged_values_are_detected_and_replaced(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  rs_report r = rs_node_run(cache(f), &o, 3); /* k1, k2 */
  rs_check(&r, "uploader");
  char k1[300], k2[300];
  assert_true(rs_name_of(server.url, "kctest:", "k1", k1, sizeof k1));
  assert_true(rs_name_of(server.url, "kctest:", "k2", k2, sizeof k2));
  for (damage d = FLIP; d <= EMPTY_TRAILER; d++) {
    damage_value(k1, k2, d);
    st_capture_begin();
    r = rs_node_run(cache(f), &o, 1);
    char *err = st_capture_end();
    rs_check(&r, damage_names[d]);
    print_message("%s: rejected (%llu), compiled (%llu), replaced\n", damage_names[d],
                  (unsigned long long)r.stats.remote_rejects, (unsigned long long)r.stats.compiles);
    assert_int_equal(r.stats.remote_rejects, 1);
    assert_int_equal(r.stats.remote_hits, 0);
    assert_int_equal(r.stats.compiles, 1);
    KCT_CONTAINS(err, "is not trusted");
    free(err);
    assert_sound(k1, NULL, "k1"); /* the upload replaced it */
    r = rs_node_run(cache(f), &o, 1);
    rs_check(&r, "after the repair");
    assert_int_equal(r.stats.remote_hits, 1);
    assert_int_equal(r.stats.compiles, 0);
  }
}

static void test_wrong_password(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start(&s, "s3cret", NULL);
  char bad[600];
  snprintf(bad, sizeof bad, "redis://:wrong@127.0.0.1:%d", s.port);
  rs_node_opts o = rs_opts(bad);
  st_capture_begin();
  rs_report r = rs_node_run(cache(f), &o, 7);
  char *err = st_capture_end();
  rs_check(&r, "wrong password");
  assert_int_equal(r.stats.compiles, 3);
  assert_int_equal(r.stats.remote_hits, 0);
  assert_true(r.stats.remote_errors >= 1);
  KCT_CONTAINS(err, "authentication failed");
  free(err);

  o = rs_opts(s.url); /* the right one */
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "right password");
  assert_int_equal(r.stats.remote_errors, 0);
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "right password again");
  assert_int_equal(r.stats.remote_hits, 3);

  /* an ACL user (Redis 6+): redis://user:password@ */
  kc__rreply a = rs_cmd(s.url, "ACL", "SETUSER", "kc", "on", ">kc pw", "~kctest:*", "+@all", (char *)NULL);
  assert_int_equal(a.type, KC__R_STATUS);
  rs_free(&a);
  char user[600];
  snprintf(user, sizeof user, "redis://kc:kc%%20pw@127.0.0.1:%d/0", s.port);
  o = rs_opts(user);
  r = rs_node_run(cache(f), &o, 7);
  rs_check(&r, "ACL user");
  assert_int_equal(r.stats.remote_hits, 3);
  assert_int_equal(r.stats.remote_errors, 0);
  rs_stop(&s);
}

/* Re-encodes the entry of a value with another log text: every checksum is
 * right again (they are not secret), only a MAC can tell. */
static void forge(const char *name) {
  kc__rreply v = rs_cmd(server.url, "GET", name, (char *)NULL);
  assert_int_equal(v.type, KC__R_STRING);
  kc__remote_config plain;
  memset(&plain, 0, sizeof plain);
  char why[512];
  size_t img;
  assert_int_equal(kc__remote_unwrap(&plain, v.str, v.len, &img, why, sizeof why), KC_OK);
  void *copy = malloc(img);
  memcpy(copy, v.str, img);
  kc__entry e;
  assert_int_equal(kc__entry_decode(NULL, copy, img, &e, why, sizeof why), KC_OK);
  e.log = "an attacker was here";
  e.log_len = strlen(e.log);
  void *out;
  size_t size;
  assert_int_equal(kc__entry_encode(NULL, &e, &out, &size), KC_OK);
  char *value = malloc(size + (v.len - img));
  memcpy(value, out, size);
  memcpy(value + size, v.str + img, v.len - img); /* the old MAC, if any */
  const char *argv[] = {"SET", name, value};
  size_t lens[] = {3, strlen(name), size + (v.len - img)};
  kc__rreply r = rs_cmdb(server.url, 3, argv, lens);
  rs_free(&r);
  free(value);
  free(out);
  kc__entry_free(NULL, &e);
  rs_free(&v);
}

static void copy_value(const char *from, const char *to) {
  kc__rreply v = rs_cmd(server.url, "GET", from, (char *)NULL);
  assert_int_equal(v.type, KC__R_STRING);
  const char *argv[] = {"SET", to, v.str};
  size_t lens[] = {3, strlen(to), v.len};
  kc__rreply r = rs_cmdb(server.url, 3, argv, lens);
  rs_free(&r);
  rs_free(&v);
}

static void test_secrets(void **state) {
  fx *f = *state;
  if (kc__hmac_unavailable()) skip();
  rs_node_opts alpha = rs_opts(server.url), beta = rs_opts(server.url), none = rs_opts(server.url);
  alpha.secret = "alpha";
  beta.secret = "beta";

  rs_report r = rs_node_run(cache(f), &alpha, 1);
  rs_check(&r, "alpha uploads");
  assert_int_equal(r.stats.compiles, 1);
  char a1[300];
  assert_true(rs_name_of(server.url, "kctest:hmac-", "k1", a1, sizeof a1));
  assert_sound(a1, "alpha", "k1");
  r = rs_node_run(cache(f), &alpha, 1);
  rs_check(&r, "alpha again");
  assert_int_equal(r.stats.remote_hits, 1); /* alpha shares with alpha */

  /* no secret, and a wrong secret: other namespaces, nothing shared */
  r = rs_node_run(cache(f), &none, 1);
  rs_check(&r, "no secret");
  assert_int_equal(r.stats.remote_hits, 0);
  assert_int_equal(r.stats.compiles, 1);
  r = rs_node_run(cache(f), &beta, 1);
  rs_check(&r, "wrong secret");
  assert_int_equal(r.stats.remote_hits, 0);
  assert_int_equal(r.stats.compiles, 1);
  assert_int_equal(entries_in(server.url, "kctest:"), 3); /* alpha's, none's, beta's */
  char plain[300], b1[300], hex[33];
  snprintf(hex, sizeof hex, "%s", a1 + strlen(a1) - 32);
  snprintf(plain, sizeof plain, "kctest:%s", hex);
  assert_sound(plain, NULL, "k1");

  /* poisoning alpha's entry: with an unsigned entry (a client without the
   * secret), with beta's MAC, with a forged one whose checksums are right */
  char **keys;
  size_t n = rs_keys(server.url, "kctest:hmac-", &keys);
  b1[0] = 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(keys[i], a1) && !strstr(keys[i], ":lock")) snprintf(b1, sizeof b1, "%s", keys[i]);
  rs_keys_free(keys, n);
  assert_true(b1[0]);
  struct {
    const char *what, *from, *why;
  } poison[] = {{"unsigned", plain, "not authenticated"},
                {"beta's MAC", b1, "does not verify"},
                {"forged", NULL, "does not verify"}};
  for (size_t i = 0; i < 3; i++) {
    if (poison[i].from) copy_value(poison[i].from, a1);
    else forge(a1);
    st_capture_begin();
    r = rs_node_run(cache(f), &alpha, 1);
    char *err = st_capture_end();
    rs_check(&r, poison[i].what);
    print_message("alpha's entry replaced by %s: rejected (%llu), compiled (%llu)\n", poison[i].what,
                  (unsigned long long)r.stats.remote_rejects, (unsigned long long)r.stats.compiles);
    assert_int_equal(r.stats.remote_rejects, 1);
    assert_int_equal(r.stats.compiles, 1);
    KCT_CONTAINS(err, poison[i].why);
    free(err);
    assert_sound(a1, "alpha", "k1"); /* repaired by the upload */
  }
}

/* A node runs k1 (uploaded), then its value is deleted: k1's name and its
 * lock's, for a lock planted before the next node's cold start. */
static void k1_gone(fx *f, const rs_node_opts *o, char name[300], char lock[320]) {
  rs_report r = rs_node_run(cache(f), o, 1);
  rs_check(&r, "first");
  assert_true(rs_name_of(server.url, "kctest:", "k1", name, 300));
  snprintf(lock, 320, "%s:lock", name);
  kc__rreply x = rs_cmd(server.url, "DEL", name, (char *)NULL);
  rs_free(&x);
}

static void test_lock_of_a_dead_holder_expires(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  char name[300], lock[320];
  k1_gone(f, &o, name, lock);

  /* a holder that died 1 s before its lock expires */
  kc__rreply x = rs_cmd(server.url, "SET", lock, "dead-host:1:00000000000000d1", "PX", "1000", (char *)NULL);
  rs_free(&x);
  o.lock_ms = 10000;
  rs_report r = rs_node_run(cache(f), &o, 1);
  rs_check(&r, "waiter");
  print_message("waited %.2f s for a lock that expired after 1 s\n", r.seconds);
  assert_int_equal(r.stats.remote_lock_waits, 1);
  assert_int_equal(r.stats.compiles, 1);
  assert_true(r.seconds > 0.8 && r.seconds < 3.0);
  assert_sound(name, NULL, "k1");

  /* a lock that outlives the waiter's patience: it compiles without it */
  x = rs_cmd(server.url, "DEL", name, (char *)NULL);
  rs_free(&x);
  x = rs_cmd(server.url, "SET", lock, "stuck-host:1:00000000000000e1", "PX", "400", (char *)NULL);
  rs_free(&x);
  o.lock_ms = 500;
  r = rs_node_run(cache(f), &o, 1);
  rs_check(&r, "impatient waiter");
  print_message("waited %.2f s for a lock within the bound (0.5 s)\n", r.seconds);
  assert_int_equal(r.stats.compiles, 1);
  assert_int_equal(r.stats.remote_lock_waits, 1);
  assert_true(r.seconds > 0.3 && r.seconds < 2.0);
}

/* Locks no kcache client holds (anyone who reaches the server can SET one):
 * no expiry, an expiry far above the lock timeout, a value that is not a
 * lock's, and with KC_REMOTE_KEY one that is not authenticated. None makes
 * a cold start wait: each is replaced (and released after the upload). */
static void test_planted_locks_are_not_waited_for(void **state) {
  fx *f = *state;
  static const struct {
    const char *what, *value, *px; /* px NULL: no expiry */
    bool secret;
  } planted[] = {
      {"no expiry", "host:1:00000000000000a1", NULL, false},
      {"an expiry of 10 minutes", "host:1:00000000000000a2", "600000", false},
      {"not a lock value", "x", "20000", false},
      {"not authenticated", "host:1:00000000000000a3:0000000000000000", "20000", true},
  };
  for (size_t i = 0; i < sizeof planted / sizeof *planted; i++) {
    rs_node_opts o = rs_opts(server.url);
    o.secret = planted[i].secret ? "correct horse battery staple" : NULL;
    o.lock_ms = 30000;
    char name[300], lock[320];
    k1_gone(f, &o, name, lock);
    kc__rreply x = planted[i].px
                       ? rs_cmd(server.url, "SET", lock, planted[i].value, "PX", planted[i].px, (char *)NULL)
                       : rs_cmd(server.url, "SET", lock, planted[i].value, (char *)NULL);
    rs_free(&x);
    st_capture_begin();
    rs_report r = rs_node_run(cache(f), &o, 1);
    char *err = st_capture_end();
    rs_check(&r, planted[i].what);
    print_message("a lock with %s: cold start %.2f s, %llu compiles\n", planted[i].what, r.seconds,
                  (unsigned long long)r.stats.compiles);
    assert_true(r.seconds < 5.0); /* the lock timeout is 30 s */
    assert_int_equal(r.stats.compiles, 1);
    KCT_CONTAINS(err, "held no kcache client's value");
    free(err);
    assert_sound(name, NULL, "k1"); /* uploaded */
    x = rs_cmd(server.url, "EXISTS", lock, (char *)NULL);
    assert_int_equal(x.integer, 0); /* replaced by ours, then released */
    rs_free(&x);
    x = rs_cmd(server.url, "FLUSHALL", (char *)NULL);
    rs_free(&x);
  }
}

/* A lock that looks real (a well-formed value and an expiry within the lock
 * timeout: without KC_REMOTE_KEY anyone can SET one) is waited for, but
 * only about as long as compiles here have taken (4 times, at least 0.5 s),
 * not the whole lock timeout; where nothing was compiled yet, the lock
 * timeout bounds it (test_lock_of_a_dead_holder_expires). */
static void test_wait_bounded_by_compile_time(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  o.lock_ms = 30000;
  char name[300], lock[320];
  k1_gone(f, &o, name, lock);
  const char *here = cache(f);
  rs_report r = rs_node_run(here, &o, 2); /* k2 compiled under its lock: an estimate here */
  rs_check(&r, "k2");
  assert_int_equal(r.stats.compiles, 1);
  kc__rreply x = rs_cmd(server.url, "SET", lock, "host:1:00000000000000c1", "PX", "25000", (char *)NULL);
  rs_free(&x);
  st_capture_begin();
  r = rs_node_run(here, &o, 1); /* k1: not on this disk, not in Redis, its lock held */
  char *err = st_capture_end();
  rs_check(&r, "waiter");
  print_message("a lock that looks real, 25 s to go: cold start %.2f s (lock timeout 30 s)\n", r.seconds);
  assert_int_equal(r.stats.remote_lock_waits, 1);
  assert_int_equal(r.stats.compiles, 1);
  KCT_CONTAINS(err, "as long as compiles here lately allow (4 times the longest");
  KCT_CONTAINS(err, "lock timeout (30000 ms)");
  const char *after = strstr(err, "was still held after ");
  assert_non_null(after);
  unsigned bound = (unsigned)strtoul(after + strlen("was still held after "), NULL, 10);
  print_message("the wait's bound: %u ms\n", bound);
  /* the bound from the compile seen (a slow machine's k2 may make it more
   * than the floor), far below the lock's 25 s left; the cold start is the
   * wait and k1's compile */
  assert_true(bound >= 500 && bound < 20000);
  assert_true(r.seconds >= 0.5 && r.seconds < bound / 1000.0 + 5.0);
  free(err);
  assert_sound(name, NULL, "k1"); /* uploaded; the planted lock was not ours to release */
  x = rs_cmd(server.url, "FLUSHALL", (char *)NULL);
  rs_free(&x);
}

/* Another machine compiles k1 slowly (2 s) while this one, whose compiles
 * were quick, waits for its lock. With KC_REMOTE_KEY the lock verifies, so
 * it is a real holder's: the wait lasts until the upload (a remote hit, no
 * compile). Without, anyone could have planted it: the wait ends at the
 * bound from the compiles seen here, and k1 is compiled on both machines
 * (kcache.h says so). */
static void test_authenticated_lock_waited_for(void **state) {
  fx *f = *state;
  if (kc__hmac_unavailable()) skip();
  for (int keyed = 1; keyed >= 0; keyed--) {
    rs_node_opts o = rs_opts(server.url);
    o.secret = keyed ? "correct horse battery staple" : NULL;
    o.lock_ms = 30000;
    o.cc = f->wrapper; /* the compiler is in the key: the same for both machines; it sleeps when asked */
    const char *here = cache(f);
    rs_report r = rs_node_run(here, &o, 2); /* k2: a quick compile, the estimate here */
    rs_check(&r, "k2");
    setenv("KC_TEST_SLEEP", "2", 1);
    int fd;
    pid_t holder = rs_spawn(cache(f), &o, 1, NULL, &fd);
    unsetenv("KC_TEST_SLEEP");
    char **keys = NULL;
    size_t n = 0;
    for (int i = 0; i < 1000 && !n; i++) { /* until it holds k1's lock */
      rs_keys_free(keys, n);
      n = rs_keys(server.url, keyed ? "kctest:hmac-*:lock" : "kctest:*:lock", &keys);
      if (!n) usleep(10000);
    }
    rs_keys_free(keys, n);
    assert_true(n > 0);
    r = rs_node_run(here, &o, 1);
    rs_check(&r, keyed ? "waiter, keyed" : "waiter, no key");
    rs_report h = rs_collect(holder, fd);
    rs_check(&h, "slow holder");
    print_message("%s: waited %.2f s, %llu compiles, %llu remote hits\n",
                  keyed ? "with KC_REMOTE_KEY" : "without", r.seconds, (unsigned long long)r.stats.compiles,
                  (unsigned long long)r.stats.remote_hits);
    assert_int_equal(r.stats.remote_lock_waits, 1);
    if (keyed) {
      assert_int_equal(r.stats.compiles, 0);
      assert_int_equal(r.stats.remote_hits, 1);
    } else {
      assert_int_equal(r.stats.compiles, 1);
      assert_int_equal(r.stats.remote_hits, 0);
    }
    kc__rreply x = rs_cmd(server.url, "FLUSHALL", (char *)NULL);
    rs_free(&x);
  }
}

static void test_size_limit(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  o.max_entry = 1024; /* smaller than any entry */
  rs_report r = rs_node_run(cache(f), &o, 1);
  rs_check(&r, "too large to upload");
  assert_int_equal(entries_in(server.url, "kctest:"), 0);

  o.max_entry = 0;
  r = rs_node_run(cache(f), &o, 1);
  rs_check(&r, "uploads again");
  char name[300];
  assert_true(rs_name_of(server.url, "kctest:", "k1", name, sizeof name));
  kc__rreply len = rs_cmd(server.url, "STRLEN", name, (char *)NULL);
  o.max_entry = (uint64_t)len.integer - 1; /* the stored entry is now one byte too large */
  rs_free(&len);
  st_capture_begin();
  r = rs_node_run(cache(f), &o, 1);
  char *err = st_capture_end();
  rs_check(&r, "too large to read");
  assert_int_equal(r.stats.remote_rejects, 1);
  assert_int_equal(r.stats.compiles, 1);
  KCT_CONTAINS(err, "larger than KC_REMOTE_MAX_ENTRY");
  free(err);
}

typedef struct worker {
  kc_runtime *rt;
  int n;
  kc_status st;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int v = 0; v < 4 && !w->st; v++) w->st = rs_run_v(w->rt, w->n % 3, 100 + w->n * 10 + v);
  return NULL;
}

static void test_threads_share_a_node(void **state) {
  fx *f = *state;
  rs_node_opts o = rs_opts(server.url);
  for (int round = 0; round < 2; round++) { /* cold, then warm from Redis */
    kc_runtime *rt = rs_node(cache(f), &o);
    assert_non_null(rt);
    KCT_OK(rt, rs_define(rt));
    enum { T = 6 };
    pthread_t t[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
      w[i] = (worker){rt, i, KC_OK};
      assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < T; i++)
      if (w[i].st) fail_msg("thread %d: %s", i, kc_status_name(w[i].st));
    kc_stats s = kct_stats(rt);
    print_message("round %d: %llu compiles, %llu remote hits\n", round, (unsigned long long)s.compiles,
                  (unsigned long long)s.remote_hits);
    if (round == 0) assert_int_equal(s.compiles, 4 * T);
    else assert_int_equal(s.remote_hits, 4 * T);
    kc_runtime_destroy(rt);
  }
}

/* A server that closes idle connections (redis-server --timeout 1, as a
 * proxy or a NAT may): a pooled connection it closed is not used for a
 * lookup or an upload. Before, the upload on it was lost and its lock kept
 * until it expired (another machine's launch waited 30 s for it), and
 * lookups on it failed (compiled again, counted as errors). */
static size_t locks_in(const char *url) {
  char **keys;
  size_t n = rs_keys(url, "kctest:", &keys), l = 0;
  for (size_t i = 0; i < n; i++) l += strstr(keys[i], ":lock") != NULL;
  rs_keys_free(keys, n);
  return l;
}

static void test_idle_connections_the_server_closed(void **state) {
  fx *f = *state;
  rs_server s;
  rs_start(&s, NULL, "--timeout 1");
  rs_node_opts o = rs_opts(s.url);
  o.lock_ms = 30000;
  kc_runtime *a = rs_node(cache(f), &o);
  assert_non_null(a);
  KCT_OK(a, rs_define(a));
  KCT_OK(a, rs_run(a, 0)); /* a lookup, a compile, an upload: the connections go back to the pool */
  kc__nap_us(2500000); /* the server closes them (its cron checks timeouts 10 times a second) */
  KCT_OK(a, rs_run(a, 1)); /* a lookup and an upload on what the pool has */
  kc_stats sa = kct_stats(a);
  kc_runtime_destroy(a); /* drains the uploads */
  print_message("node a: %llu lookups, %llu lookup errors, %llu uploads, %llu errors\n",
                (unsigned long long)sa.remote_lookups, (unsigned long long)sa.remote_lookup_errors,
                (unsigned long long)sa.remote_uploads, (unsigned long long)sa.remote_errors);
  assert_int_equal(sa.remote_lookup_errors, 0);
  assert_int_equal(entries_in(s.url, "kctest:"), 2); /* both uploaded */
  assert_int_equal(locks_in(s.url), 0); /* and both locks released */

  kc_runtime *b = rs_node(cache(f), &o);
  assert_non_null(b);
  KCT_OK(b, rs_define(b));
  KCT_OK(b, rs_run(b, 0));
  kc__nap_us(2500000);
  KCT_OK(b, rs_run(b, 1)); /* a hit, on a new connection */
  kc_stats sb = kct_stats(b);
  kc_runtime_destroy(b);
  assert_int_equal(sb.remote_hits, 2);
  assert_int_equal(sb.remote_lookup_errors, 0);
  assert_int_equal(sb.compiles, 0);
  rs_stop(&s);
}

/* A server that does not keep SET NX's promise (a look-alike, a proxy):
 * every command answered nil, so the lock is never free and never there.
 * The lookup gives up on it and compiles here: before, it went round
 * SET NX and GET for ever. */
typedef struct fake {
  int ls;
  bool flood; /* answer each command with a 1 GiB value, sent until the client leaves */
} fake;

static void *fake_server(void *arg) {
  fake *fk = arg;
  for (;;) {
    int fd = accept(fk->ls, NULL, NULL);
    if (fd < 0) return NULL;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      if (fk->flood) {
        static const char head[] = "$1073741824\r\n";
        memset(buf, 'x', sizeof buf);
        bool ok = write(fd, head, sizeof head - 1) == (ssize_t)sizeof head - 1;
        for (size_t sent = 0; ok && sent < (1u << 30); sent += sizeof buf)
          ok = write(fd, buf, sizeof buf) == (ssize_t)sizeof buf;
        break;
      }
      /* one nil per command: count the commands (each starts with '*' at a line start) */
      for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '*' && (i == 0 || buf[i - 1] == '\n'))
          if (write(fd, "$-1\r\n", 5) != 5) break;
    }
    close(fd);
  }
}

/* A fake server on loopback (flood: see fake); its URL in url. */
static void fake_start(fake *fk, pthread_t *t, char *url, size_t len) {
  signal(SIGPIPE, SIG_IGN); /* the flood writes to clients that left */
  fk->ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fk->ls, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t al = sizeof a;
  assert_int_equal(getsockname(fk->ls, (struct sockaddr *)&a, &al), 0);
  assert_int_equal(listen(fk->ls, 8), 0);
  assert_int_equal(pthread_create(t, NULL, fake_server, fk), 0);
  snprintf(url, len, "redis://127.0.0.1:%d", ntohs(a.sin_port));
}

static void fake_stop(fake *fk, pthread_t t) {
  shutdown(fk->ls, SHUT_RDWR);
  close(fk->ls);
  pthread_join(t, NULL);
}

static void test_a_server_that_never_locks(void **state) {
  fx *f = *state;
  fake fk = {0};
  pthread_t t;
  char url[64];
  fake_start(&fk, &t, url, sizeof url);
  rs_node_opts o = rs_opts(url);
  o.lock_ms = 2000;
  rs_report r = rs_node_run(cache(f), &o, 1);
  rs_check(&r, "a node of a server that never locks");
  print_message("compiled here after %.2f s (lookup errors %llu)\n", r.seconds,
                (unsigned long long)r.stats.remote_lookup_errors);
  assert_int_equal(r.stats.compiles, 1);
  assert_int_equal(r.stats.remote_lookup_errors, 1);
  assert_true(r.seconds < 10.0);
  fake_stop(&fk, t);
}

/* A server (not Redis, or a spoofed one) that answers a lookup with a
 * value far above KC_REMOTE_MAX_ENTRY: not read on past the limit (it was
 * read whole, 1 GiB, and copied once more). */
static void test_a_reply_past_the_size_limit(void **state) {
  fx *f = *state;
  fake fk = {.flood = true};
  pthread_t t;
  char url[64];
  fake_start(&fk, &t, url, sizeof url);
  rs_node_opts o = rs_opts(url);
  o.max_entry = 1 << 20;
  o.timeout_ms = 5000; /* the limit stops the read, not a timeout */
  rs_report r = rs_node_run(cache(f), &o, 1);
  rs_check(&r, "a node of a server that floods");
  print_message("compiled here after %.2f s\n", r.seconds);
  assert_int_equal(r.stats.compiles, 1);
  assert_int_equal(r.stats.remote_lookup_errors, 1);
  assert_true(r.seconds < 4.0);
  fake_stop(&fk, t);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
  unsetenv("KC_REMOTE"); /* the nodes say everything through their options */
  unsetenv("KC_CACHE_DISABLE");
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_second_node_loads_the_first_nodes_compile),
      T(test_eight_nodes_cold_start_compile_three_times),
      T(test_stopped_then_killed_server_delays_no_launch),
      T(test_no_server_at_all),
      T(test_counters_add_up),
      T(test_damaged_values_are_detected_and_replaced),
      T(test_wrong_password),
      T(test_secrets),
      T(test_lock_of_a_dead_holder_expires),
      T(test_planted_locks_are_not_waited_for),
      T(test_wait_bounded_by_compile_time),
      T(test_authenticated_lock_waited_for),
      T(test_size_limit),
      T(test_threads_share_a_node),
      T(test_idle_connections_the_server_closed),
      T(test_a_server_that_never_locks),
      T(test_a_reply_past_the_size_limit),
  };
#undef T
  return cmocka_run_group_tests_name(kct_group_name("remote tier"), tests, group_setup, group_teardown);
}
