/* SPDX-License-Identifier: MIT */
/*
 * test_store_backends -- the disk cache on each backend (registered as
 * store_backend_host, _opencl, _cuda; a backend this machine cannot run is
 * skipped): a second runtime loads the stored artifact without compiling and
 * computes the right result; a damaged entry is repaired; an artifact the
 * device cannot load never gives a wrong result.
 */
#include "st.h"

#include <stdlib.h>

typedef struct fx {
  char root[KCT_DIR_LEN]; /* first: kct_dir_setup makes it */
} fx;

static int setup(void **state) {
  char tag[64];
  snprintf(tag, sizeof tag, "store-%s", kct_backend_name);
  return kct_dir_setup(state, sizeof(fx), tag);
}

static void fill(kc_runtime *rt) { KCT_OK(rt, st_define(rt)); }

/* Compiles k into f's store on a runtime of its own, then destroys it; path
 * gets the store's only entry. */
static void store_k(const fx *f, char *path, size_t len) {
  kc_runtime *rt = st_runtime(f->root, NULL);
  fill(rt);
  st_run_ok(rt, "k", NULL, 0);
  kc_runtime_destroy(rt);
  st_only_entry(f->root, path, len);
}

static void test_round_trip(void **state) {
  fx *f = *state;
  kc_runtime *rt = st_runtime(f->root, NULL);
  fill(rt);
  st_run_ok(rt, "k", NULL, 0);
  st_run_ok(rt, "kv", "V=5", 5);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.disk_writes, 2);
  kc_runtime_destroy(rt);

  rt = st_runtime(f->root, NULL);
  fill(rt);
  st_run_ok(rt, "k", NULL, 0);
  st_run_ok(rt, "kv", "V=5", 5);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 2);
  assert_int_equal(s.disk_repairs, 0);
  kc_runtime_destroy(rt);
}

static void test_damage_is_repaired(void **state) {
  fx *f = *state;
  char path[4096];
  store_k(f, path, sizeof path);
  size_t n;
  char *b = st_read_file(path, &n);
  b[n - 3] ^= 0x10; /* inside the artifact */
  st_write_file(path, b, n);
  free(b);
  kc_runtime *rt = st_runtime(f->root, NULL);
  fill(rt);
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_repairs, 1);
  kc_runtime_destroy(rt);
}

static void junk_artifact(kc__entry *e) {
  static char junk[2048];
  memset(junk, 0x5a, sizeof junk);
  e->artifact = junk;
  e->artifact_size = sizeof junk;
}

/* With valid checksums the store cannot see the damage: the backend must
 * refuse the artifact when the store test-loads it, and the entry is then
 * repaired. */
static void test_unloadable_artifact_never_runs(void **state) {
  fx *f = *state;
  char path[4096];
  store_k(f, path, sizeof path);
  size_t n;
  void *b = st_read_file(path, &n);
  kc__entry e;
  assert_int_equal(kc__entry_decode(NULL, b, n, &e, NULL, 0), KC_OK);
  junk_artifact(&e);
  void *img;
  size_t size;
  assert_int_equal(kc__entry_encode(NULL, &e, &img, &size), KC_OK);
  kc__entry_free(NULL, &e);
  st_write_file(path, img, size);
  free(img);

  kc_runtime *rt = st_runtime(f->root, NULL);
  fill(rt);
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  print_message("%s: an unloadable stored artifact gave %llu repair(s), %llu compile(s), %llu disk hit(s)\n",
                kct_backend_name, (unsigned long long)s.disk_repairs, (unsigned long long)s.compiles,
                (unsigned long long)s.disk_hits);
  assert_int_equal(s.disk_repairs, 1);
  assert_int_equal(s.compiles, 1);
  kc_runtime_destroy(rt);
}

ST_MAIN(ST_DIR_TEST(test_round_trip), ST_DIR_TEST(test_damage_is_repaired),
        ST_DIR_TEST(test_unloadable_artifact_never_runs))
