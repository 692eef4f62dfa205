/* SPDX-License-Identifier: MIT */
/*
 * test_remote_cli -- `kcache remote ping|ls|clear` against a real server
 * that nodes populated (entries with and without a secret, a lock held),
 * `kcache stats` with the remote tier's counters, and the errors: no
 * server, a refused connection, rediss://, an unknown subcommand.
 */
#include "rs.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef KC_CLI
#error "KC_CLI must name the kcache executable"
#endif

static rs_server server;
static char root[512];

static int group_setup(void **state) {
  (void)state;
  rs_start(&server, NULL, NULL);
  st_mkdtemp(root, sizeof root, "rcli");
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  rs_stop(&server);
  st_rmrf(root);
  return 0;
}

/* Runs `env ENV kcache ARGS`; returns its exit status, output in *out. */
static int cli(char **out, const char *env, const char *fmt, ...) KCT_PRINTF(3, 4);
static int cli(char **out, const char *env, const char *fmt, ...) {
  char args[1024], cmd[2600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "env -u KC_REMOTE -u KC_REMOTE_KEY KC_REMOTE_PREFIX=kctest: %s '%s' %s 2>&1",
           env ? env : "", KC_CLI, args);
  char *buf;
  int rc = kct_capture(cmd, &buf);
  print_message("$ kcache %s\n%s", args, buf);
  if (out) *out = buf;
  else free(buf);
  return rc;
}

static void test_ping_ls_stats_clear(void **state) {
  (void)state;
  char cache[700], env[800];
  snprintf(cache, sizeof cache, "%s/node", root);
  rs_node_opts o;
  memset(&o, 0, sizeof o);
  o.url = server.url;
  rs_report r = rs_node_run(cache, &o, 7);
  rs_check(&r, "node");
  char name[300];
  assert_true(rs_name_of(server.url, "kctest:", "k2", name, sizeof name));
  char lock[320];
  snprintf(lock, sizeof lock, "%s:lock", name);
  kc__rreply x = rs_cmd(server.url, "SET", lock, "somehost:42:00ff", "PX", "60000", (char *)NULL);
  rs_free(&x);

  char *out;
  assert_int_equal(cli(&out, NULL, "remote ping --url %s", server.url), 0);
  KCT_CONTAINS(out, "PONG");
  KCT_CONTAINS(out, "3 under kctest: (3 in this namespace), 1 lock held");
  KCT_CONTAINS(out, "not authenticated");
  free(out);
  assert_int_equal(cli(&out, NULL, "--json remote ping --url %s", server.url), 0);
  KCT_CONTAINS(out, "\"entries\": 3");
  KCT_CONTAINS(out, "\"locks\": 1");
  free(out);

  snprintf(env, sizeof env, "KC_REMOTE=%s", server.url);
  assert_int_equal(cli(&out, env, "remote ls"), 0);
  for (int i = 1; i <= 3; i++) {
    char k[8];
    snprintf(k, sizeof k, " k%d ", i);
    KCT_CONTAINS(out, k);
  }
  KCT_CONTAINS(out, "V=0");
  KCT_CONTAINS(out, "lock held by somehost:42:00ff");
  free(out);
  assert_int_equal(cli(&out, env, "--json remote ls"), 0);
  KCT_CONTAINS(out, "\"entry\": \"k1\"");
  KCT_CONTAINS(out, "\"holder\": \"somehost:42:00ff\"");
  free(out);

  /* the node's counters, through its disk cache */
  assert_int_equal(cli(&out, env, "--dir '%s' stats", cache), 0);
  KCT_CONTAINS(out, "remote      redis://127.0.0.1:");
  KCT_CONTAINS(out, "3 lookups: 0 hits, 3 misses");
  KCT_CONTAINS(out, "3 uploads");
  free(out);
  assert_int_equal(cli(&out, NULL, "--json --dir '%s' stats", cache), 0);
  KCT_CONTAINS(out, "\"remote\": {\"url\": null, \"lookups\": 3");
  free(out);
  char other[700];
  snprintf(other, sizeof other, "%s/never-used", root);
  /* --dir must name a directory (a typo is not an empty store) */
  assert_int_equal(cli(&out, NULL, "--json --dir '%s' stats", other), 2);
  KCT_CONTAINS(out, "No such file or directory");
  free(out);
  assert_int_equal(mkdir(other, 0755), 0);
  assert_int_equal(cli(&out, NULL, "--json --dir '%s' stats", other), 0);
  KCT_CONTAINS(out, "\"remote\": null");
  free(out);

  assert_int_equal(cli(&out, env, "remote clear"), 0);
  KCT_CONTAINS(out, "removed 3 entries and 1 locks");
  free(out);
  assert_int_equal(cli(&out, env, "remote ls"), 0);
  KCT_CONTAINS(out, "(no entries under kctest:");
  free(out);
}

static void test_secrets_in_ls(void **state) {
  (void)state;
  if (kc__hmac_unavailable()) skip();
  char cache[700], env[900];
  snprintf(cache, sizeof cache, "%s/secret", root);
  rs_node_opts o;
  memset(&o, 0, sizeof o);
  o.url = server.url;
  o.secret = "alpha";
  rs_report r = rs_node_run(cache, &o, 1);
  rs_check(&r, "node");
  char *out;
  snprintf(env, sizeof env, "KC_REMOTE=%s KC_REMOTE_KEY=alpha", server.url);
  assert_int_equal(cli(&out, env, "remote ls"), 0);
  KCT_CONTAINS(out, "hmac-");
  KCT_CONTAINS(out, " ok\n");
  free(out);
  snprintf(env, sizeof env, "KC_REMOTE=%s KC_REMOTE_KEY=beta", server.url);
  assert_int_equal(cli(&out, env, "remote ls"), 0);
  KCT_CONTAINS(out, "another secret");
  free(out);
  char name[300];
  assert_true(rs_name_of(server.url, "kctest:hmac-", "k1", name, sizeof name));
  kc__rreply a = rs_cmd(server.url, "APPEND", name, "x", (char *)NULL); /* now 41 bytes follow: damaged */
  rs_free(&a);
  snprintf(env, sizeof env, "KC_REMOTE=%s KC_REMOTE_KEY=alpha", server.url);
  assert_int_equal(cli(&out, env, "remote ls"), 0);
  KCT_CONTAINS(out, "BAD");
  free(out);
  assert_int_equal(cli(&out, env, "remote clear"), 0);
  free(out);
}

static void test_errors(void **state) {
  (void)state;
  char *out;
  assert_int_equal(cli(&out, NULL, "remote ping"), 2);
  KCT_CONTAINS(out, "no server");
  free(out);
  assert_int_equal(cli(&out, NULL, "remote ping --url redis://127.0.0.1:1"), 1);
  KCT_CONTAINS(out, "Connection refused");
  free(out);
  assert_int_equal(cli(&out, NULL, "remote ls --url rediss://127.0.0.1:1"), 1);
  KCT_CONTAINS(out, "TLS");
  free(out);
  assert_int_equal(cli(&out, NULL, "remote frobnicate --url %s", server.url), 2);
  KCT_CONTAINS(out, "no subcommand 'frobnicate'");
  free(out);
  assert_int_equal(cli(&out, NULL, "remote"), 2);
  free(out);
  assert_int_equal(cli(&out, NULL, "remote --help"), 0);
  KCT_CONTAINS(out, "usage: kcache remote ping|ls|clear");
  free(out);
  assert_int_equal(cli(&out, NULL, "--help"), 0);
  KCT_CONTAINS(out, "remote ping|ls|clear");
  free(out);
  char url[700];
  snprintf(url, sizeof url, "redis://:nope@127.0.0.1:%d", server.port);
  assert_int_equal(cli(&out, NULL, "remote ping --url %s", url), 1); /* the server has no password */
  KCT_CONTAINS(out, "authentication failed");
  free(out);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ping_ls_stats_clear),
      cmocka_unit_test(test_secrets_in_ls),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests_name(kct_group_name("kcache remote"), tests, group_setup, group_teardown);
}
