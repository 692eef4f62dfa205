/* SPDX-License-Identifier: MIT */
/*
 * test_remote_backends -- the remote tier on each backend (registered as
 * remote_backend_host, _opencl, _cuda; skipped where the backend, a Redis
 * server or hiredis is missing): a node with an empty disk cache loads what
 * another node compiled, without compiling, and computes the right result.
 */
#include "rs.h"

#include <stdlib.h>

static void test_second_node(void **state) {
  (void)state;
  rs_server s;
  rs_start(&s, NULL, NULL);
  char root[512], a[600], b[600];
  st_mkdtemp(root, sizeof root, kct_backend_name);
  snprintf(a, sizeof a, "%s/a", root);
  snprintf(b, sizeof b, "%s/b", root);
  rs_node_opts o = rs_opts(s.url);
  rs_report r = rs_node_run(a, &o, 7);
  rs_check(&r, "node A");
  assert_int_equal(r.stats.compiles, 3);
  r = rs_node_run(b, &o, 7);
  rs_check(&r, "node B");
  assert_int_equal(r.stats.compiles, 0);
  assert_int_equal(r.stats.remote_hits, 3);
  print_message("%s: node B loaded 3 kernels from Redis in %.1f ms (slowest first launch %.1f ms)\n",
                kct_backend_name, r.seconds * 1e3, r.max_launch * 1e3);
  st_rmrf(root);
  rs_stop(&s);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  rs_require_server();
  unsetenv("KC_CACHE_DISABLE");
  const struct CMUnitTest tests[] = {KCT_TEST(test_second_node)};
  return KCT_RUN(tests);
}
