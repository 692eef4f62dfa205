/* SPDX-License-Identifier: MIT */
/*
 * test_remote_unit -- the remote tier without a server: URLs (what is
 * accepted, what is refused and why, the password masked in messages),
 * settings from options and the environment, the framing of values (an
 * entry file, optionally followed by a MAC), HMAC-SHA256 against RFC 4231,
 * and nodes in fresh processes for a missing hiredis and for rediss://
 * without a usable CA or server.
 */
#include "kc_internal.h"
#include "kct_conf.h"
#include "rs.h"

#include <stdlib.h>

#ifndef KC_REMOTE_NODE
#error "KC_REMOTE_NODE must name the kc_remote_node executable"
#endif

static void test_urls(void **state) {
  (void)state;
  static const struct {
    const char *url;
    const char *host, *user, *password;
    int port, db;
    const char *masked;
  } good[] = {
      {"redis://127.0.0.1", "127.0.0.1", "", "", 6379, 0, "redis://127.0.0.1:6379/0"},
      {"redis://cache.example:7000/3", "cache.example", "", "", 7000, 3, "redis://cache.example:7000/3"},
      {"redis://:pw@h:1/", "h", "", "pw", 1, 0, "redis://:***@h:1/0"},
      {"redis://alice:p%40ss%3Aw@h", "h", "alice", "p@ss:w", 6379, 0, "redis://alice:***@h:6379/0"},
      {"redis://[::1]:6380/2", "::1", "", "", 6380, 2, "redis://[::1]:6380/2"},
      {"redis://u:a@b@h:9", "h", "u", "a@b", 9, 0, "redis://u:***@h:9/0"},
      {"rediss://:pw@h:6380/1", "h", "", "pw", 6380, 1, "rediss://:***@h:6380/1"},
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    kc__remote_config c;
    char why[512] = "";
    memset(&c, 0, sizeof c);
    if (kc__remote_parse_url(good[i].url, &c, why, sizeof why)) fail_msg("%s: %s", good[i].url, why);
    assert_string_equal(c.host, good[i].host);
    assert_string_equal(c.user, good[i].user);
    assert_string_equal(c.password, good[i].password);
    assert_int_equal(c.port, good[i].port);
    assert_int_equal(c.db, good[i].db);
    assert_string_equal(c.url, good[i].masked);
    assert_null(strstr(c.url, "pw"));
    assert_int_equal(c.tls, !strncmp(good[i].url, "rediss:", 7));
  }
  static const struct {
    const char *url, *why;
  } bad[] = {
      {"rediss://", "no host"},    {"http://h", "not a redis[s]://"}, {"redis://", "no host"},
      {"redis://h:0", "bad port"}, {"redis://h:65536", "bad port"},   {"redis://h:12x", "bad port"},
      {"redis://h/x", "database"}, {"redis://user@h", "no password"}, {"redis://:%zz@h", "%-encoded"},
      {"redis://[::1", "IPv6"},    {"", "not a redis[s]://"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kc__remote_config c;
    char why[512] = "";
    memset(&c, 0, sizeof c);
    assert_int_equal(kc__remote_parse_url(bad[i].url, &c, why, sizeof why), KC_EINVAL);
    KCT_CONTAINS(why, bad[i].why);
  }
}

static void test_settings(void **state) {
  (void)state;
  kc__remote_config c;
  char why[1024];
  kc_options o;
  kc_options_init(&o);
  unsetenv("KC_REMOTE");
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_ENOTFOUND);
  setenv("KC_REMOTE", "off", 1);
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_ENOTFOUND);
  setenv("KC_REMOTE", "redis://10.0.0.1:7000", 1);
  o.remote_url = ""; /* the option wins: no tier */
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_ENOTFOUND);
  o.remote_url = NULL;
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  assert_string_equal(c.host, "10.0.0.1");
  assert_string_equal(c.prefix, "kcache:");
  assert_string_equal(c.ns, "");
  assert_int_equal(c.timeout_ms, KC__REMOTE_DEFAULT_TIMEOUT_MS);
  assert_int_equal(c.lock_ms, KC__REMOTE_DEFAULT_LOCK_MS);
  assert_int_equal(c.retry_ms, KC__REMOTE_DEFAULT_RETRY_MS);
  assert_int_equal(c.max_entry, KC__REMOTE_DEFAULT_MAX_ENTRY);

  setenv("KC_REMOTE_PREFIX", "team-a:", 1);
  setenv("KC_REMOTE_TIMEOUT_MS", "25", 1);
  setenv("KC_REMOTE_LOCK_TIMEOUT", "2.5", 1);
  setenv("KC_REMOTE_RETRY_MS", "1000", 1);
  setenv("KC_REMOTE_MAX_ENTRY", "8M", 1);
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  assert_string_equal(c.prefix, "team-a:");
  assert_int_equal(c.timeout_ms, 25);
  assert_int_equal(c.lock_ms, 2500);
  assert_int_equal(c.retry_ms, 1000);
  assert_int_equal(c.max_entry, 8u << 20);
  o.remote_timeout_ms = 7; /* options win over the environment */
  o.remote_prefix = "mine:";
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  assert_int_equal(c.timeout_ms, 7);
  assert_string_equal(c.prefix, "mine:");
  o.remote_timeout_ms = 0;
  o.remote_prefix = NULL;

  static const struct {
    const char *var, *value, *why;
  } bad[] = {
      {"KC_REMOTE_TIMEOUT_MS", "soon", "KC_REMOTE_TIMEOUT_MS"},
      {"KC_REMOTE_TIMEOUT_MS", "0", "from 1"},
      {"KC_REMOTE_LOCK_TIMEOUT", "-1", "seconds"},
      {"KC_REMOTE_MAX_ENTRY", "lots", "KC_REMOTE_MAX_ENTRY"},
      {"KC_REMOTE_PREFIX", "a b", "space"},
      {"KC_REMOTE_TLS_CA", "/etc/ssl/certs", "not rediss://"}, /* ignored would be a surprise */
      {"KC_REMOTE_TLS_SERVER_NAME", "cache.example", "not rediss://"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *old = getenv(bad[i].var) ? strdup(getenv(bad[i].var)) : NULL;
    setenv(bad[i].var, bad[i].value, 1);
    kc_status st = kc__remote_config_load(kct_conf(&o), &c, why, sizeof why);
    if (st != KC_EINVAL) fail_msg("%s=%s: %s", bad[i].var, bad[i].value, kc_status_name(st));
    KCT_CONTAINS(why, bad[i].why);
    if (old) setenv(bad[i].var, old, 1);
    else unsetenv(bad[i].var);
    free(old);
  }
  /* rediss:// and its settings */
  setenv("KC_REMOTE", "rediss://10.0.0.1:7000", 1);
  setenv("KC_REMOTE_TLS_CA", "/etc/ssl/certs", 1);
  setenv("KC_REMOTE_TLS_CERT", "/c.pem", 1);
  setenv("KC_REMOTE_TLS_KEY", "/k.pem", 1);
  setenv("KC_REMOTE_TLS_SERVER_NAME", "cache.example", 1);
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  assert_true(c.tls);
  assert_string_equal(c.tls_ca, "/etc/ssl/certs");
  assert_string_equal(c.tls_cert, "/c.pem");
  assert_string_equal(c.tls_key, "/k.pem");
  assert_string_equal(c.tls_name, "cache.example");
  assert_null(c.tls_ctx);
  o.remote_tls_ca = "/opt/ca.pem"; /* options win over the environment */
  o.remote_tls_server_name = "redis.internal";
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  assert_string_equal(c.tls_ca, "/opt/ca.pem");
  assert_string_equal(c.tls_name, "redis.internal");
  assert_string_equal(c.tls_cert, "/c.pem");
  o.remote_tls_ca = o.remote_tls_server_name = NULL;
  unsetenv("KC_REMOTE_TLS_CA");
  unsetenv("KC_REMOTE_TLS_CERT");
  unsetenv("KC_REMOTE_TLS_KEY");
  unsetenv("KC_REMOTE_TLS_SERVER_NAME");
  setenv("KC_REMOTE", "redis://10.0.0.1:7000", 1);

  if (!kc__hmac_unavailable()) {
    setenv("KC_REMOTE_KEY", "alpha", 1);
    assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
    assert_true(c.has_secret);
    assert_int_equal(strlen(c.ns), strlen("hmac-12345678:"));
    char ns_alpha[24];
    snprintf(ns_alpha, sizeof ns_alpha, "%s", c.ns);
    setenv("KC_REMOTE_KEY", "beta", 1);
    assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
    assert_string_not_equal(c.ns, ns_alpha); /* another secret, another namespace */
    uint8_t key[16] = {0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xcd};
    char name[300];
    kc__remote_name(&c, key, true, name, sizeof name);
    char want[300];
    snprintf(want, sizeof want, "team-a:%sab0102030405060708090a0b0c0d0ecd:lock", c.ns);
    assert_string_equal(name, want);
  }
  static const char *const vars[] = {
      "KC_REMOTE",          "KC_REMOTE_PREFIX",    "KC_REMOTE_TIMEOUT_MS", "KC_REMOTE_LOCK_TIMEOUT",
      "KC_REMOTE_RETRY_MS", "KC_REMOTE_MAX_ENTRY", "KC_REMOTE_KEY"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

static void test_hmac_rfc4231(void **state) {
  (void)state;
  const char *no = kc__hmac_unavailable();
  if (no) {
    print_message("skipped: %s\n", no);
    skip();
  }
  uint8_t k0b[20], kaa20[20], kaa131[131], k25[25], dd[50], cd[50];
  memset(k0b, 0x0b, sizeof k0b);
  memset(kaa20, 0xaa, sizeof kaa20);
  memset(kaa131, 0xaa, sizeof kaa131);
  for (int i = 0; i < 25; i++) k25[i] = (uint8_t)(i + 1);
  memset(dd, 0xdd, sizeof dd);
  memset(cd, 0xcd, sizeof cd);
  static const char t6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
  static const char t7[] =
      "This is a test using a larger than block-size key and a larger than block-size data. The "
      "key needs to be hashed before being used by the HMAC algorithm.";
  const struct {
    const void *key;
    size_t klen;
    const void *data;
    size_t dlen;
    const char *mac;
  } v[] = {
      {k0b, 20, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", 4, "what do ya want for nothing?", 28,
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {kaa20, 20, dd, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {k25, 25, cd, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {kaa131, 131, t6, sizeof t6 - 1, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {kaa131, 131, t7, sizeof t7 - 1, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    uint8_t mac[32];
    assert_true(kc__hmac_sha256(v[i].key, v[i].klen, v[i].data, v[i].dlen, mac));
    char hex[65];
    for (int j = 0; j < 32; j++) snprintf(hex + 2 * j, 3, "%02x", mac[j]);
    assert_string_equal(hex, v[i].mac);
  }
}

/* A small, well-formed entry file. */
static void *an_entry(size_t *size) {
  kc__entry e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < 16; i++) e.key[i] = (uint8_t)(i * 7);
  e.backend = "host";
  e.identity = "cc";
  e.options = "";
  e.params = "V=1";
  e.entry = "k";
  e.library = KC_VERSION_STRING;
  kc__key_def d = {"k", "KC_KERNEL void k(void) {}", 25};
  e.defs = &d;
  e.ndefs = 1;
  uint64_t sig = KC__SIG(KC_ARG_BUFFER, 0);
  e.sig = &sig;
  e.nsig = 1;
  e.artifact = "\x7f"
               "ELF...";
  e.artifact_size = 7;
  void *img;
  assert_int_equal(kc__entry_encode(NULL, &e, &img, size), KC_OK);
  return img;
}

static void test_value_framing(void **state) {
  (void)state;
  size_t n, img;
  uint8_t *e = an_entry(&n);
  char why[512];
  kc__remote_config plain, alpha, beta;
  memset(&plain, 0, sizeof plain);
  assert_int_equal(kc__remote_unwrap(&plain, e, n, &img, why, sizeof why), KC_OK);
  assert_int_equal(img, n);
  /* truncated anywhere, bad magic, unknown bytes after it */
  for (size_t cut = 0; cut < n; cut += 7) {
    assert_int_equal(kc__remote_unwrap(&plain, e, cut, &img, why, sizeof why), KC_EIO);
    KCT_CONTAINS(why, "truncated");
  }
  uint8_t *v = malloc(n + 64);
  memcpy(v, e, n);
  memcpy(v + n, "garbage", 7);
  assert_int_equal(kc__remote_unwrap(&plain, v, n + 7, &img, why, sizeof why), KC_EIO);
  KCT_CONTAINS(why, "unknown bytes");
  v[0] ^= 1;
  assert_int_equal(kc__remote_unwrap(&plain, v, n, &img, why, sizeof why), KC_EIO);
  KCT_CONTAINS(why, "bad magic");
  v[0] ^= 1;
  if (!kc__hmac_unavailable()) {
    kc_options o;
    kc_options_init(&o);
    o.remote_url = "redis://h";
    o.remote_key = "alpha";
    assert_int_equal(kc__remote_config_load(kct_conf(&o), &alpha, why, sizeof why), KC_OK);
    o.remote_key = "beta";
    assert_int_equal(kc__remote_config_load(kct_conf(&o), &beta, why, sizeof why), KC_OK);
    assert_true(kc__remote_trailer(&alpha, e, n, v + n));
    /* with the secret: only with its MAC */
    assert_int_equal(kc__remote_unwrap(&alpha, v, n + KC__REMOTE_TRAILER, &img, why, sizeof why), KC_OK);
    assert_int_equal(img, n);
    assert_int_equal(kc__remote_unwrap(&alpha, e, n, &img, why, sizeof why), KC_EIO);
    KCT_CONTAINS(why, "not authenticated");
    assert_int_equal(kc__remote_unwrap(&beta, v, n + KC__REMOTE_TRAILER, &img, why, sizeof why), KC_EIO);
    KCT_CONTAINS(why, "does not verify");
    for (size_t i = 0; i < n + KC__REMOTE_TRAILER; i += 5) { /* any flipped byte */
      if (i >= 32 && i < 40) continue; /* the payload length: framing, not the MAC, catches it */
      v[i] ^= 0x10;
      assert_int_equal(kc__remote_unwrap(&alpha, v, n + KC__REMOTE_TRAILER, &img, why, sizeof why), KC_EIO);
      v[i] ^= 0x10;
    }
    /* without a secret, the trailer is ignored */
    assert_int_equal(kc__remote_unwrap(&plain, v, n + KC__REMOTE_TRAILER, &img, why, sizeof why), KC_OK);
    assert_int_equal(img, n);
    assert_false(kc__remote_trailer(&plain, e, n, v + n));
  }
  /* the head of an entry is enough to list it */
  kc__entry m;
  assert_int_equal(kc__entry_peek_mem(e, n, n, &m, why, sizeof why), KC_OK);
  assert_string_equal(m.entry, "k");
  assert_string_equal(m.params, "V=1");
  kc__entry_free(NULL, &m);
  assert_int_equal(kc__entry_peek_mem(e, 70, n, &m, why, sizeof why), KC_EIO);
  free(v);
  free(e);
}

/* Runs kc_remote_node on a new directory with `env` prepended; returns its
 * stdout and stderr. */
static char *node(const char *env) {
  char dir[512], cmd[2048];
  st_mkdtemp(dir, sizeof dir, "node");
  snprintf(cmd, sizeof cmd, "env %s KC_HOST_CC=%s '%s' '%s' 2>&1", env, st_cc(), KC_REMOTE_NODE, dir);
  char *out = NULL;
  kct_capture(cmd, &out);
  st_rmrf(dir);
  return out;
}

static void test_missing_hiredis(void **state) {
  (void)state;
  char *out = node("KC_REMOTE=redis://127.0.0.1:9 KC_HIREDIS_LIB=/nonexistent/libhiredis.so.0.14");
  print_message("%s", out);
  KCT_CONTAINS(out, "the remote tier is off");
  KCT_CONTAINS(out, "KC_HIREDIS_LIB=/nonexistent/libhiredis.so.0.14 cannot be used");
  KCT_CONTAINS(out, "status=KC_OK wrong=0 compiles=3 remote=(none)");
  free(out);
}

/* rediss:// with a CA that cannot be used: the tier is off, with the
 * reason; with none listening: the tier fails, the launches compile. */
static void test_rediss_without_ca_or_server(void **state) {
  (void)state;
  if (kc__hiredis_unavailable(kc__config_str(kct_conf(NULL), KC__SET_HIREDIS_LIB))) skip();
  char *out = node("KC_REMOTE=rediss://127.0.0.1:9 KC_REMOTE_TLS_CA=/nonexistent/ca.pem");
  print_message("%s", out);
  KCT_CONTAINS(out, "the remote tier is off");
  KCT_CONTAINS(out, "the CA file /nonexistent/ca.pem (KC_REMOTE_TLS_CA) cannot be used");
  KCT_CONTAINS(out, "status=KC_OK wrong=0 compiles=3 remote=(none)");
  free(out);
  out = node("KC_REMOTE=rediss://127.0.0.1:9");
  print_message("%s", out);
  KCT_CONTAINS(out, "connecting to 127.0.0.1:9: Connection refused");
  KCT_CONTAINS(out, "status=KC_OK wrong=0 compiles=3 remote=rediss://127.0.0.1:9/0");
  free(out);
}

static void test_url_of_a_runtime(void **state) {
  (void)state;
  if (kc__hiredis_unavailable(kc__config_str(kct_conf(NULL), KC__SET_HIREDIS_LIB))) skip();
  char dir[512];
  st_mkdtemp(dir, sizeof dir, "url");
  kc_options o;
  kc_options_init(&o);
  char url[64];
  snprintf(url, sizeof url, "redis://:hunter2@127.0.0.1:9/4");
  o.remote_url = url;
  kc_runtime *rt = st_runtime(dir, &o);
  memset(url, 'x', sizeof url - 1); /* the caller's string is not kept */
  assert_string_equal(kc_remote_url(rt), "redis://:***@127.0.0.1:9/4");
  kc_runtime_destroy(rt);
  rt = st_runtime(NULL, &o); /* no disk cache: no remote tier either */
  assert_null(kc_remote_url(rt));
  kc_runtime_destroy(rt);
  assert_null(kc_remote_url(NULL));
  st_rmrf(dir);
}

/* The store's remote-stats file of kcache 0.2 (KCRSTAT1: 9 counters) is
 * read with its counters where they were, the later ones 0; a file of
 * another size or magic is not valid (zeros). */
static void test_counters_file_of_0_2(void **state) {
  (void)state;
  char dir[512], path[600];
  st_mkdtemp(dir, sizeof dir, "rstat");
  snprintf(path, sizeof path, "%s/remote-stats", dir);
  uint8_t b[8 + 8 * 9];
  memcpy(b, "KCRSTAT1", 8);
  for (int i = 0; i < 9; i++) kc__le64(b + 8 + 8 * i, (uint64_t)(i + 1) * 10);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, sizeof b, f), sizeof b);
  fclose(f);
  kc__remote_counters c;
  kc__remote_counters_read(dir, &c);
  assert_true(c.valid);
  assert_int_equal(c.lookups, 10);
  assert_int_equal(c.hits, 20);
  assert_int_equal(c.skips, 60);
  assert_int_equal(c.lookup_ns, 90);
  assert_int_equal(c.lookup_errors, 0);
  assert_int_equal(c.lookup_skips, 0);
  f = fopen(path, "wb"); /* cut short: not a counters file */
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, sizeof b - 8, f), sizeof b - 8);
  fclose(f);
  kc__remote_counters_read(dir, &c);
  assert_false(c.valid);
  assert_int_equal(c.lookups, 0);
  st_rmrf(dir);
}

/* Cluster URLs (seeds, TLS, no database but 0, the prefix without braces),
 * key slots against values Redis Cluster's specification and CLUSTER
 * KEYSLOT give, and the names: the key in braces on a cluster only. */
static void test_cluster_urls_and_slots(void **state) {
  (void)state;
  kc__remote_config c;
  char why[512] = "";
  memset(&c, 0, sizeof c);
  assert_int_equal(
      kc__remote_parse_url("redis+cluster://:pw@10.0.0.1:7000,[::1]:7001,h", &c, why, sizeof why), KC_OK);
  assert_true(c.cluster);
  assert_false(c.tls);
  assert_int_equal(c.nseeds, 3);
  assert_string_equal(c.seed_host[1], "::1");
  assert_int_equal(c.seed_port[1], 7001);
  assert_string_equal(c.seed_host[2], "h");
  assert_int_equal(c.seed_port[2], 6379);
  assert_string_equal(c.host, "10.0.0.1");
  assert_int_equal(c.port, 7000);
  assert_string_equal(c.url, "redis+cluster://:***@10.0.0.1:7000,[::1]:7001,h:6379/0");
  assert_int_equal(kc__remote_parse_url("rediss+cluster://h:1", &c, why, sizeof why), KC_OK);
  assert_true(c.cluster && c.tls);
  assert_int_equal(kc__remote_parse_url("redis+cluster://h:1/2", &c, why, sizeof why), KC_EINVAL);
  KCT_CONTAINS(why, "database 0 only");
  assert_int_equal(kc__remote_parse_url("redis+cluster://h:1,", &c, why, sizeof why), KC_EINVAL);
  KCT_CONTAINS(why, "no host");
  assert_int_equal(kc__remote_parse_url("redis+cluster://a,b,c,d,e,f,g,h,i", &c, why, sizeof why), KC_EINVAL);
  KCT_CONTAINS(why, "more than 8 seed");
  assert_int_equal(kc__remote_parse_url("redis://a,b", &c, why, sizeof why),
                   KC_EINVAL); /* one server: one host */
  /* slots: CRC16("123456789") is 0x31C3 */
  assert_int_equal(kc__keyslot("123456789", 9), 0x31C3);
  assert_int_equal(kc__keyslot("foo", 3), 12182);
  assert_int_equal(kc__keyslot("{foo}bar", 8), 12182);
  assert_int_equal(kc__keyslot("x{foo}:lock", 11), 12182);
  assert_int_equal(kc__keyslot("{}foo", 5), 9500); /* an empty tag: the whole key (CLUSTER KEYSLOT {}foo) */
  assert_int_not_equal(kc__keyslot("{}foo", 5), 12182);
  /* names */
  kc_options o;
  kc_options_init(&o);
  o.remote_url = "redis+cluster://127.0.0.1:7000";
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  uint8_t key[16];
  for (int i = 0; i < 16; i++) key[i] = (uint8_t)(i * 17);
  char name[256], lname[300];
  kc__remote_name(&c, key, false, name, sizeof name);
  kc__remote_name(&c, key, true, lname, sizeof lname);
  assert_string_equal(name, "kcache:{00112233445566778899aabbccddeeff}");
  assert_string_equal(lname, "kcache:{00112233445566778899aabbccddeeff}:lock");
  assert_int_equal(kc__keyslot(name, strlen(name)), kc__keyslot(lname, strlen(lname)));
  o.remote_url = "redis://127.0.0.1:7000";
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_OK);
  kc__remote_name(&c, key, false, name, sizeof name);
  assert_string_equal(name, "kcache:00112233445566778899aabbccddeeff"); /* one server: as before */
  o.remote_url = "redis+cluster://127.0.0.1:7000";
  o.remote_prefix = "app{x}:";
  assert_int_equal(kc__remote_config_load(kct_conf(&o), &c, why, sizeof why), KC_EINVAL);
  KCT_CONTAINS(why, "brace");
  /* redirections */
  bool ask;
  int slot, port;
  char host[64];
  assert_true(kc__redirect_parse("MOVED 3999 127.0.0.1:6381", &ask, &slot, host, sizeof host, &port));
  assert_false(ask);
  assert_int_equal(slot, 3999);
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 6381);
  assert_true(kc__redirect_parse("ASK 1 [::1]:7002", &ask, &slot, host, sizeof host, &port));
  assert_true(ask);
  assert_string_equal(host, "::1");
  /* an unknown endpoint: the host is empty or "?" (the replying node's, kc__pool_redirect) */
  assert_true(kc__redirect_parse("MOVED 7 :7003", &ask, &slot, host, sizeof host, &port));
  assert_string_equal(host, "");
  assert_int_equal(port, 7003);
  assert_true(kc__redirect_parse("MOVED 7 ?:7003", &ask, &slot, host, sizeof host, &port));
  assert_string_equal(host, "?");
  assert_false(kc__redirect_parse("MOVED x h:1", &ask, &slot, host, sizeof host, &port));
  assert_false(kc__redirect_parse("MOVED 16384 h:1", &ask, &slot, host, sizeof host, &port));
  assert_false(kc__redirect_parse("ERR MOVED 1 h:1", &ask, &slot, host, sizeof host, &port));
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_REMOTE");
  unsetenv("KC_REMOTE_KEY");
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_urls),
      KCT_TEST(test_settings),
      KCT_TEST(test_hmac_rfc4231),
      KCT_TEST(test_value_framing),
      KCT_TEST(test_missing_hiredis),
      KCT_TEST(test_rediss_without_ca_or_server),
      KCT_TEST(test_url_of_a_runtime),
      KCT_TEST(test_counters_file_of_0_2),
      KCT_TEST(test_cluster_urls_and_slots),
  };
  return KCT_RUN(tests);
}
