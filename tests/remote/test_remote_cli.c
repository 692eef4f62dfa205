/* SPDX-License-Identifier: MIT */
/*
 * test_remote_cli -- `kcache remote ping|ls|clear` against a real server
 * that nodes populated (entries with and without a secret, a lock held),
 * `kcache stats` with the remote tier's counters, and the errors: no
 * server, a refused connection (also over rediss://), an unknown
 * subcommand. rediss:// against a TLS server: test_remote_tls.
 */
#include "rs.h"

#include <signal.h>
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
  rs_node_opts o = rs_opts(server.url);
  rs_report r = rs_node_run(cache, &o, 7);
  rs_check(&r, "node");
  char name[300];
  assert_true(rs_name_of(server.url, "kctest:", "k2", name, sizeof name));
  char lock[320];
  snprintf(lock, sizeof lock, "%s:lock", name);
  kc__rreply x = rs_cmd(server.url, "SET", lock, "somehost:42:00ff", "PX", "60000", (char *)NULL);
  rs_free(&x);

  char *out;
  KCT_SAYS(cli(&out, NULL, "remote ping --url %s", server.url), out, 0, "PONG",
           "3 under kctest: (3 in this namespace), 1 lock held", "not authenticated");
  KCT_SAYS(cli(&out, NULL, "--json remote ping --url %s", server.url), out, 0, "\"entries\": 3",
           "\"locks\": 1");

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
  KCT_SAYS(cli(&out, env, "--json remote ls"), out, 0, "\"entry\": \"k1\"",
           "\"holder\": \"somehost:42:00ff\"");

  /* the node's counters, through its disk cache */
  KCT_SAYS(cli(&out, env, "--dir '%s' stats", cache), out, 0, "remote      redis://127.0.0.1:",
           "3 lookups asked: 3 to the server (0 hits, 3 misses (0 values rejected), 0 failed), 0 skipped",
           "3 uploads (0 failed or skipped)");
  KCT_SAYS(cli(&out, NULL, "--json --dir '%s' stats", cache), out, 0,
           "\"remote\": {\"url\": null, \"lookups\": 3", "\"lookup_errors\": 0, \"lookup_skips\": 0");
  char other[700];
  snprintf(other, sizeof other, "%s/never-used", root);
  /* --dir must name a directory (a typo is not an empty store) */
  KCT_SAYS(cli(&out, NULL, "--json --dir '%s' stats", other), out, 2, "No such file or directory");
  assert_int_equal(mkdir(other, 0755), 0);
  KCT_SAYS(cli(&out, NULL, "--json --dir '%s' stats", other), out, 0, "\"remote\": null");

  KCT_SAYS(cli(&out, env, "remote clear"), out, 0, "removed 3 entries and 1 locks");
  KCT_SAYS(cli(&out, env, "remote ls"), out, 0, "(no entries under kctest:");
}

static void test_secrets_in_ls(void **state) {
  (void)state;
  if (kc__hmac_unavailable()) skip();
  char cache[700], env[900];
  snprintf(cache, sizeof cache, "%s/secret", root);
  rs_node_opts o = rs_opts(server.url);
  o.secret = "alpha";
  rs_report r = rs_node_run(cache, &o, 1);
  rs_check(&r, "node");
  char *out;
  snprintf(env, sizeof env, "KC_REMOTE=%s KC_REMOTE_KEY=alpha", server.url);
  KCT_SAYS(cli(&out, env, "remote ls"), out, 0, "hmac-", " ok\n");
  snprintf(env, sizeof env, "KC_REMOTE=%s KC_REMOTE_KEY=beta", server.url);
  KCT_SAYS(cli(&out, env, "remote ls"), out, 0, "another secret");
  char name[300];
  assert_true(rs_name_of(server.url, "kctest:hmac-", "k1", name, sizeof name));
  kc__rreply a = rs_cmd(server.url, "APPEND", name, "x", (char *)NULL); /* now 41 bytes follow: damaged */
  rs_free(&a);
  snprintf(env, sizeof env, "KC_REMOTE=%s KC_REMOTE_KEY=alpha", server.url);
  KCT_SAYS(cli(&out, env, "remote ls"), out, 0, "BAD");
  KCT_SAYS(cli(&out, env, "remote clear"), out, 0);
}

static void test_errors(void **state) {
  (void)state;
  char *out;
  KCT_SAYS(cli(&out, NULL, "remote ping"), out, 2, "no server");
  KCT_SAYS(cli(&out, NULL, "remote ping --url redis://127.0.0.1:1"), out, 1, "Connection refused");
  KCT_SAYS(cli(&out, NULL, "remote ls --url rediss://127.0.0.1:1"), out, 1, "Connection refused");
  KCT_SAYS(cli(&out, NULL, "remote frobnicate --url %s", server.url), out, 2, "no subcommand 'frobnicate'");
  KCT_SAYS(cli(&out, NULL, "remote"), out, 2);
  KCT_SAYS(cli(&out, NULL, "remote --help"), out, 0, "usage: kcache remote ping|ls|clear");
  KCT_SAYS(cli(&out, NULL, "--help"), out, 0, "remote ping|ls|clear");
  char url[700];
  snprintf(url, sizeof url, "redis://:nope@127.0.0.1:%d", server.port);
  KCT_SAYS(cli(&out, NULL, "remote ping --url %s", url), out, 1,
           "authentication failed"); /* the server has no password */
}

/* Keys of another type under kcache's names (a neighbour's): ls lists them
 * as damaged and goes on (it stopped at the first with WRONGTYPE); and a
 * failure of clear's own listing says "remote clear", not "remote ls". */
static void test_foreign_keys_in_ls(void **state) {
  (void)state;
  char *out, env[800];
  kc__rreply x =
      rs_cmd(server.url, "HSET", "kctest:00112233445566778899aabbccddeeff", "f", "v", (char *)NULL);
  rs_free(&x);
  x = rs_cmd(server.url, "RPUSH", "kctest:ffeeddccbbaa99887766554433221100:lock", "x", (char *)NULL);
  rs_free(&x);
  snprintf(env, sizeof env, "KC_REMOTE=%s", server.url);
  KCT_SAYS(cli(&out, env, "remote ls"), out, 0, "001122334455  -              (damaged: not a string value",
           "ffeeddccbbaa  -              lock held by (not a string value");
  KCT_SAYS(cli(&out, env, "--json remote ls"), out, 0, "\"damaged\": \"not a string value (WRONGTYPE");
  KCT_SAYS(cli(&out, env, "remote clear"), out, 0, "removed 1 entries and 1 locks");
  /* a server that answers nothing in time */
  kill(server.pid, SIGSTOP);
  KCT_SAYS(cli(&out, NULL, "remote clear --timeout 300 --url %s", server.url), out, 1,
           "remote clear: ", "timeout");
  kill(server.pid, SIGCONT);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ping_ls_stats_clear),
      cmocka_unit_test(test_secrets_in_ls),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_foreign_keys_in_ls),
  };
  return cmocka_run_group_tests_name(kct_group_name("kcache remote"), tests, group_setup, group_teardown);
}
