/* SPDX-License-Identifier: MIT */
/*
 * test_transient.c -- a failure for want of a resource is reported and not
 * remembered: the next launch tries again and works once the resource is
 * back. The resource here is the process's memory mappings: the test fills
 * them (vm.max_map_count) with mappings of its own, launches, then frees
 * them and launches again.
 *
 *   link     a compiled kernel's first launch cannot load its object
 *            (KC_ENOMEM), then can
 *   compile  a kernel's first compile cannot run the compiler, then can
 *   store    a disk-store entry whose trial load fails for want of mappings
 *            stays in the store, and is the next launch's hit
 *   tmpdir   a process that exits without kc_runtime_destroy leaves
 *            nothing in $TMPDIR
 *
 * Host backend only. Skipped under sanitizers (their allocators map memory
 * of their own at any call, which the full table refuses) and where the
 * limit is too high to fill quickly (kc_test.h: kct_maps).
 */
#include "rel.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 8

static const char SRC_K[] =
    "KC_KERNEL void k(KC_GLOBAL int *y) { size_t i = kc_global_id(0); y[i] = 5 * (int)i; }";
static const char SRC_J[] =
    "KC_KERNEL void j(KC_GLOBAL int *y) { size_t i = kc_global_id(0); y[i] = 9 + (int)i; }";

/* ---------------------------------------------------------------- cases */

static kc_runtime *runtime(const char *store) {
  kc_options opt;
  kc_options_init(&opt);
  opt.host_cc = rel_cc();
  if (store) opt.cache_dir = store;
  else opt.cache_disable = 1;
  return kct_runtime(&opt);
}

static void expect_values(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b, int mul, int add) {
  int32_t out[N];
  KCT_STATUS(rt, KC_OK, rel_run(k, ctx, b, N, out));
  for (int i = 0; i < N; i++) assert_int_equal(out[i], mul * i + add);
}

/* A failure that must not be the remembered kind. */
static void expect_transient(kc_runtime *rt, kc_status st) {
  if (st == KC_OK || st == KC_ECOMPILE || st == KC_ENOTFOUND)
    fail_msg("a launch with no mappings left returned %s (%s): expected a resource failure",
             kc_status_name(st), kc_errmsg(rt));
}

static void test_link_then_compile_without_mappings(void **state) {
  (void)state;
  kct_host_only();
  kc_runtime *rt = runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  kct_define(rt, "k", SRC_K);
  kct_define(rt, "j", SRC_J);
  kc_kernel *k = kct_kernel(rt, "k", ""), *j = kct_kernel(rt, "j", "");
  KCT_STATUS(rt, KC_OK, kc_kernel_compile(k)); /* compiled, never loaded */
  kct_maps f;
  kct_maps_fill(&f);
  kct_maps_fill_singles(&f);
  kc_status link_st = rel_run(k, ctx, b, N, NULL); /* the load needs mappings */
  kc_status compile_st = rel_run(j, ctx, b, N, NULL); /* so does running the compiler */
  char link_msg[512];
  snprintf(link_msg, sizeof link_msg, "%s", kc_errmsg(rt));
  kct_maps_free(&f);
  KCT_STATUS(rt, KC_ENOMEM, link_st);
  expect_transient(rt, compile_st);
  /* the resources are back: both work, and k was not compiled again */
  expect_values(rt, k, ctx, b, 5, 0);
  expect_values(rt, j, ctx, b, 1, 9);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 2);
  kct_destroy(rt);
}

static void test_store_entry_survives_a_failed_trial_load(void **state) {
  (void)state;
  kct_host_only();
  char store[512];
  rel_mkdtemp(store, sizeof store, "transient");
  kc_runtime *rt = runtime(store);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  kct_define(rt, "k", SRC_K);
  expect_values(rt, kct_kernel(rt, "k", ""), ctx, b, 5, 0); /* compiled into the store */
  kct_destroy(rt);

  rt = runtime(store);
  ctx = kct_context(rt);
  b = kct_buffer(rt, ctx, N);
  kct_define(rt, "k", SRC_K);
  /* a kernel that does not compile asks for the compiler's identity (the
   * store's key) without loading anything */
  kct_define(rt, "bad", "KC_KERNEL void bad(KC_GLOBAL int *y) { y[0] = ; }");
  KCT_STATUS(rt, KC_ECOMPILE, kc_kernel_compile(kct_kernel(rt, "bad", "")));
  kc_kernel *k = kct_kernel(rt, "k", "");
  kct_maps f;
  kct_maps_fill(&f);
  kct_maps_fill_singles(&f);
  kc_status st = rel_run(k, ctx, b, N, NULL);
  kct_maps_free(&f);
  expect_transient(rt, st);
  expect_values(rt, k, ctx, b, 5, 0);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 0); /* the entry was kept, and loaded */
  assert_int_equal(s.disk_hits, 1);
  kct_destroy(rt);
  rel_rmrf(store);
}

/* The host backend's compiles leave no directory behind in $TMPDIR, also
 * when the process exits without kc_runtime_destroy. */
static void test_exit_without_destroy_leaves_no_directory(void **state) {
  (void)state;
  kct_host_only();
  char tmp[512];
  rel_mkdtemp(tmp, sizeof tmp, "tmpdir");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("TMPDIR", tmp, 1);
    kc_options opt;
    kc_options_init(&opt);
    opt.backend = KC_BACKEND_HOST;
    opt.host_cc = rel_cc();
    opt.cache_disable = 1;
    kc_runtime *rt;
    kc_kernel *k;
    kc_status st = kc_runtime_create(&opt, &rt);
    if (!st) st = kc_define(rt, "k", SRC_K, NULL);
    if (!st) st = kc_kernel_create(rt, "k", "", &k);
    if (!st) st = kc_kernel_compile(k);
    _exit(st ? 2 : 0); /* no kc_runtime_destroy */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  DIR *d = opendir(tmp);
  assert_non_null(d);
  int left = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      print_message("left in TMPDIR: %s\n", e->d_name);
      left++;
    }
  closedir(d);
  rel_rmrf(tmp);
  assert_int_equal(left, 0);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_CACHE_DISABLE");
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_link_then_compile_without_mappings),
      KCT_TEST(test_store_entry_survives_a_failed_trial_load),
      KCT_TEST(test_exit_without_destroy_leaves_no_directory),
  };
  return KCT_RUN(tests);
}
