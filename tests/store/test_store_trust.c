/* SPDX-License-Identifier: MIT */
/*
 * test_store_trust -- the disk cache trusts only what its user (or, in a
 * shared store, its group, or with KC_CACHE_KEY, the holders of the key)
 * could have written (src/cache/trust.c), with real files on the host
 * backend: what kcache creates is private (or group-shared) whatever the
 * umask; a store whose directory is group- or world-writable or owned by
 * another user is refused (memory only, one warning that says how to fix
 * it); a planted entry that is group-writable, in a foreign bucket, owned
 * by another user, unauthenticated or forged is never loaded: the launch
 * computes the right result (an entry that would compute a wrong one is
 * planted, and shown to be loaded when it is trusted) and kc_stats counts
 * the rejection. The check that `kcache verify` reports with
 * (kc__store_check_file) says the same. Tests that chown need root and
 * skip with a reason otherwise.
 */
#include "st.h"
#include "kct_conf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A user and group that own nothing here (nobody/nogroup on Debian); they
 * need not exist. */
#define OTHER_UID 65534
#define OTHER_GID 65534

typedef struct fx {
  char root[512];
  mode_t umask;
} fx;

static void clear_env(void) {
  unsetenv("KC_CACHE_SHARED");
  unsetenv("KC_CACHE_KEY");
  unsetenv("KC_CACHE_DISABLE");
}

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  st_mkdtemp(f->root, sizeof f->root, "trust");
  f->umask = umask(022);
  umask(f->umask);
  clear_env();
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  umask(f->umask);
  clear_env();
  st_rmrf(f->root);
  free(f);
  return 0;
}

static bool need_root(const char *what) {
  if (geteuid() == 0) return true;
  print_message("SKIPPED: %s needs root (to chown files to uid %d)\n", what, OTHER_UID);
  return false;
}

static unsigned mode_of(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) fail_msg("stat %s: %s", path, strerror(errno));
  return (unsigned)(st.st_mode & 07777);
}

static void vdir_of(const char *root, char *out, size_t len) { kc__store_vdir(root, out, len); }

/* The directory that holds the file at path. */
static void dir_of(const char *path, char *out, size_t len) {
  snprintf(out, len, "%s", path);
  char *s = strrchr(out, '/');
  assert_non_null(s);
  *s = 0;
}

/* A runtime on root that defines h and k and runs k, checking the result. */
static kc_stats run_k(const char *root, const kc_options *opt) {
  kc_runtime *rt = st_runtime(root, opt);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  kc_runtime_destroy(rt);
  return s;
}

/* Runs k on root, which must not be used: memory only, one warning, which
 * must contain each of the needles (NULL-terminated). */
static void expect_refused(const char *root, const kc_options *opt, const char *const *needles) {
  st_capture_begin();
  kc_runtime *rt = st_runtime(root, opt);
  const char *dir = kc_cache_dir(rt);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  st_run_ok(rt, "kv", "V=1", 1);
  kc_stats s = kct_stats(rt);
  kc_runtime_destroy(rt);
  char *err = st_capture_end();
  if (dir) fail_msg("%s was used as the disk cache", root);
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.disk_hits + s.disk_misses + s.disk_writes, 0);
  assert_int_equal(st_count(err, "kcache: warning:"), 1);
  KCT_CONTAINS(err, "refusing to use");
  for (size_t i = 0; needles[i]; i++) KCT_CONTAINS(err, needles[i]);
  free(err);
}

/* -------------------------------------------------------- created modes */

/* Every directory and file that a run makes under root: dirs and files
 * must have exactly these modes. */
static void expect_modes(const char *top, const char *root, unsigned dmode, unsigned fmode) {
  char vdir[700], entry[900], bucket[900], stats[800], locks[800], tmp[800];
  vdir_of(root, vdir, sizeof vdir);
  st_entry_of(root, "k", NULL, entry, sizeof entry);
  dir_of(entry, bucket, sizeof bucket);
  snprintf(stats, sizeof stats, "%s/stats", vdir);
  snprintf(locks, sizeof locks, "%s/locks", vdir); /* made by the miss (its lock), */
  snprintf(tmp, sizeof tmp, "%s/tmp", vdir); /* and by the write (its temp file) */
  const char *dirs[] = {top, root, vdir, bucket, locks, tmp};
  for (size_t i = 0; i < 6; i++)
    if (mode_of(dirs[i]) != dmode) fail_msg("%s has mode %04o, not %04o", dirs[i], mode_of(dirs[i]), dmode);
  const char *files[] = {entry, stats};
  for (size_t i = 0; i < 2; i++)
    if (mode_of(files[i]) != fmode)
      fail_msg("%s has mode %04o, not %04o", files[i], mode_of(files[i]), fmode);
}

static void test_what_kcache_creates_is_private_whatever_the_umask(void **state) {
  fx *f = *state;
  const mode_t masks[] = {0, 022, 077};
  for (size_t i = 0; i < 3; i++) {
    char top[600], root[700];
    snprintf(top, sizeof top, "%s/private-%zu", f->root, i);
    snprintf(root, sizeof root, "%s/made/store", top);
    umask(masks[i]);
    run_k(root, NULL);
    umask(f->umask);
    expect_modes(top, root, 0700, 0600);
    /* and it is used again */
    kc_stats s = run_k(root, NULL);
    assert_int_equal(s.disk_hits, 1);
    assert_int_equal(s.compiles, 0);
  }
}

static void test_a_shared_store_is_made_for_its_group(void **state) {
  fx *f = *state;
  kc_options o;
  kc_options_init(&o);
  o.cache_shared = 1;
  const mode_t masks[] = {0, 077};
  for (size_t i = 0; i < 2; i++) {
    char top[600], root[700];
    snprintf(top, sizeof top, "%s/shared-%zu", f->root, i);
    snprintf(root, sizeof root, "%s/made/store", top);
    umask(masks[i]);
    st_capture_begin();
    run_k(root, &o);
    free(st_capture_end());
    umask(f->umask);
    expect_modes(top, root, 02770, 0660);
  }
}

/* ----------------------------------------------------- refused stores */

static void test_a_group_or_world_writable_store_is_refused(void **state) {
  fx *f = *state;
  char root[600], fix[700];
  snprintf(root, sizeof root, "%s/store", f->root);
  snprintf(fix, sizeof fix, "chmod 700 %s", root);
  run_k(root, NULL);
  assert_int_equal(chmod(root, 0770), 0);
  expect_refused(root, NULL, (const char *const[]){"writable by group", fix, "KC_CACHE_SHARED=1", NULL});
  assert_int_equal(chmod(root, 0777), 0);
  expect_refused(root, NULL, (const char *const[]){"writable by everyone", fix, NULL});

  /* the version directory that kcache made is checked too */
  char vdir[700], vfix[800];
  vdir_of(root, vdir, sizeof vdir);
  snprintf(vfix, sizeof vfix, "chmod 700 %s", vdir);
  assert_int_equal(chmod(root, 0700), 0);
  assert_int_equal(chmod(vdir, 0775), 0);
  expect_refused(root, NULL, (const char *const[]){"writable by group", vfix, NULL});

  /* and so are the directories of its lock and temp files: whoever can
   * write there can hold a key's lock or swap a temp file */
  assert_int_equal(chmod(vdir, 0700), 0);
  const char *aux[] = {"locks", "tmp"};
  for (size_t i = 0; i < 2; i++) {
    char dir[800], dfix[900];
    snprintf(dir, sizeof dir, "%s/%s", vdir, aux[i]);
    snprintf(dfix, sizeof dfix, "chmod 700 %s", dir);
    assert_int_equal(chmod(dir, 0777), 0);
    expect_refused(root, NULL, (const char *const[]){"writable by everyone", dfix, NULL});
    assert_int_equal(chmod(dir, 0700), 0);
  }

  /* fixed as the warning says: used again */
  kc_stats s = run_k(root, NULL);
  assert_int_equal(s.disk_hits, 1);

  /* a new store is not even made in a directory that is not trusted */
  char fresh[600], fresh_v[700];
  snprintf(fresh, sizeof fresh, "%s/open", f->root);
  assert_int_equal(mkdir(fresh, 0700), 0);
  assert_int_equal(chmod(fresh, 0777), 0);
  expect_refused(fresh, NULL, (const char *const[]){"writable by everyone", NULL});
  vdir_of(fresh, fresh_v, sizeof fresh_v);
  assert_int_equal(access(fresh_v, F_OK), -1);

  /* a sticky directory (like /tmp) is fine as a root: others cannot
   * touch the version directory that kcache makes in it */
  assert_int_equal(chmod(fresh, 01777), 0);
  s = run_k(fresh, NULL);
  assert_int_equal(s.disk_writes, 1);
}

static void test_a_store_owned_by_another_user_is_refused(void **state) {
  fx *f = *state;
  if (!need_root("a store owned by another user")) skip();
  char root[600], vdir[700];
  snprintf(root, sizeof root, "%s/store", f->root);
  run_k(root, NULL);
  assert_int_equal(chown(root, OTHER_UID, OTHER_GID), 0);
  expect_refused(root, NULL, (const char *const[]){"owned by", "uid 65534", "chown", NULL});

  /* a version directory planted by another user, in a sticky root */
  assert_int_equal(chown(root, 0, 0), 0);
  assert_int_equal(chmod(root, 01777), 0);
  vdir_of(root, vdir, sizeof vdir);
  assert_int_equal(chown(vdir, OTHER_UID, OTHER_GID), 0);
  expect_refused(root, NULL, (const char *const[]){"owned by", vdir, NULL});

  /* shared mode trusts the group, not a stranger's directory */
  kc_options o;
  kc_options_init(&o);
  o.cache_shared = 1;
  assert_int_equal(chown(root, OTHER_UID, getegid()), 0);
  assert_int_equal(chmod(root, 02770), 0);
  expect_refused(root, &o, (const char *const[]){"owned by", "not a member of its group", NULL});
}

/* ------------------------------------------------------ planted entries */

/* The entry image of another kernel k (h is 5x + 1, so k computes 5i + 1)
 * under key: what an attacker who can write to the store would plant.
 * Made in a store of its own under dir. */
static void *planted_image(const char *dir, const uint8_t key[16], size_t *size) {
  char other[700], path[900];
  snprintf(other, sizeof other, "%s/attacker", dir);
  kc_runtime *rt = st_runtime(other, NULL);
  kct_define(rt, "h", "KC_DEVICE float h(float x) { return 5.0f * x + 1.0f; }");
  kct_define(rt, "k", st_k_src);
  assert_int_equal(st_run(rt, "k", NULL, 16, 0), KC_EBACKEND); /* not 3i + 1 */
  kc_runtime_destroy(rt);
  st_entry_of(other, "k", NULL, path, sizeof path);
  kc__entry e;
  char why[256];
  if (kc__entry_read(NULL, path, NULL, &e, why, sizeof why) != KC_OK) fail_msg("reading %s: %s", path, why);
  memcpy(e.key, key, 16);
  void *img = NULL;
  assert_int_equal(kc__entry_encode(NULL, &e, &img, size), KC_OK);
  kc__entry_free(NULL, &e);
  st_rmrf(other);
  return img;
}

/* The path and key of k's entry in root (made by a run if needed). */
static void entry_and_key(const char *root, char *path, size_t len, uint8_t key[16]) {
  if (!st_has(root, "k", NULL)) run_k(root, NULL);
  st_entry_of(root, "k", NULL, path, len);
  kc__entry e;
  assert_int_equal(kc__entry_read(NULL, path, NULL, &e, NULL, 0), KC_OK);
  memcpy(key, e.key, 16);
  kc__entry_free(NULL, &e);
}

/* A run of k on root that must use the planted entry: a disk hit with the
 * wrong result. Shows that what the next run rejects would have run. */
static void expect_planted_runs(const char *root, const kc_options *opt) {
  kc_runtime *rt = st_runtime(root, opt);
  KCT_OK(rt, st_define(rt));
  assert_int_equal(st_run(rt, "k", NULL, 16, 0), KC_EBACKEND);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.compiles, 0);
  kc_runtime_destroy(rt);
}

/* A run of k on root that must reject the planted entry: compiled, the
 * right result, the rejection counted as damage; the entry is then ours. */
static void expect_rejected(const char *root, const kc_options *opt, const char *path) {
  kc_runtime *rt = st_runtime(root, opt);
  assert_non_null(kc_cache_dir(rt));
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  kc_runtime_destroy(rt);
  assert_int_equal(s.disk_hits, 0);
  assert_int_equal(s.compiles, 1);
  assert_true(s.disk_repairs >= 1);
  assert_int_equal(s.disk_writes, 1);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_uid, geteuid());
  s = run_k(root, opt); /* and what replaced it is used */
  assert_int_equal(s.disk_hits, 1);
}

static void plant(const char *path, const void *img, size_t size, const void *tail, size_t tail_len) {
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, img, size), (ssize_t)size);
  if (tail_len) assert_int_equal(write(fd, tail, tail_len), (ssize_t)tail_len);
  close(fd);
}

static void test_a_writable_entry_or_bucket_is_never_loaded(void **state) {
  fx *f = *state;
  char root[600], path[900], bucket[900];
  uint8_t key[16];
  snprintf(root, sizeof root, "%s/store", f->root);
  entry_and_key(root, path, sizeof path, key);
  size_t size;
  void *img = planted_image(f->root, key, &size);
  plant(path, img, size, NULL, 0);
  expect_planted_runs(root, NULL); /* trusted, it runs */

  plant(path, img, size, NULL, 0);
  assert_int_equal(chmod(path, 0664), 0);
  expect_rejected(root, NULL, path);
  assert_int_equal(mode_of(path), 0600);

  plant(path, img, size, NULL, 0);
  dir_of(path, bucket, sizeof bucket);
  assert_int_equal(chmod(bucket, 0777), 0);
  kc_runtime *rt = st_runtime(root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  kc_runtime_destroy(rt);
  assert_int_equal(s.disk_hits, 0);
  assert_true(s.disk_repairs >= 1);
  free(img);
}

static void test_an_entry_owned_by_another_user_is_never_loaded(void **state) {
  fx *f = *state;
  if (!need_root("an entry owned by another user")) skip();
  char root[600], path[900];
  uint8_t key[16];
  snprintf(root, sizeof root, "%s/store", f->root);
  entry_and_key(root, path, sizeof path, key);
  size_t size;
  void *img = planted_image(f->root, key, &size);
  plant(path, img, size, NULL, 0);
  expect_planted_runs(root, NULL); /* owned by us, it runs */
  assert_int_equal(chown(path, OTHER_UID, OTHER_GID), 0);
  expect_rejected(root, NULL, path);

  /* the same in a shared store: a stranger is not the group */
  kc_options o;
  kc_options_init(&o);
  o.cache_shared = 1;
  plant(path, img, size, NULL, 0);
  assert_int_equal(chown(path, OTHER_UID, OTHER_GID), 0);
  st_capture_begin();
  expect_rejected(root, &o, path);
  free(st_capture_end());
  free(img);
}

/* ----------------------------------------------------------- shared mode */

static void test_a_shared_store_without_a_key_warns_once(void **state) {
  fx *f = *state;
  char root[600];
  snprintf(root, sizeof root, "%s/store", f->root);
  for (int by_env = 0; by_env < 2; by_env++) {
    kc_options o;
    kc_options_init(&o);
    if (by_env) setenv("KC_CACHE_SHARED", "1", 1);
    else o.cache_shared = 1;
    st_capture_begin();
    kc_runtime *rt = st_runtime(root, &o);
    assert_non_null(kc_cache_dir(rt));
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    st_run_ok(rt, "kv", "V=1", 1);
    kc_runtime_destroy(rt);
    char *err = st_capture_end();
    assert_int_equal(st_count(err, "kcache: warning:"), 1);
    KCT_CONTAINS(err, "every member of its group");
    KCT_CONTAINS(err, "KC_CACHE_KEY");
    free(err);
    unsetenv("KC_CACHE_SHARED");
  }
  /* with a key, and in private mode, nothing to say */
  setenv("KC_CACHE_KEY", "s3cret", 1);
  kc_options o;
  kc_options_init(&o);
  o.cache_shared = 1;
  st_capture_begin();
  run_k(root, &o);
  char *err = st_capture_end();
  assert_int_equal(st_count(err, "kcache: warning:"), 0);
  free(err);
}

static bool ends_with_trailer(const char *path) {
  size_t n;
  uint8_t *b = st_read_file(path, &n);
  bool yes = n > KC__MAC_TRAILER && !memcmp(b + n - KC__MAC_TRAILER, KC__MAC_MAGIC, 8);
  free(b);
  return yes;
}

static void test_a_shared_store_with_a_key_loads_only_authenticated_entries(void **state) {
  fx *f = *state;
  const char *no = kc__hmac_unavailable();
  if (no) {
    print_message("SKIPPED: %s\n", no);
    skip();
  }
  char root[600], path[900];
  uint8_t key[16];
  snprintf(root, sizeof root, "%s/store", f->root);
  setenv("KC_CACHE_SHARED", "1", 1);
  st_capture_begin(); /* the keyless run's warning */
  entry_and_key(root, path, sizeof path, key);
  free(st_capture_end());
  assert_false(ends_with_trailer(path));

  /* written without the key: rejected, and replaced by one with a MAC */
  setenv("KC_CACHE_KEY", "alpha", 1);
  expect_rejected(root, NULL, path);
  assert_true(ends_with_trailer(path));
  kc__entry e;
  assert_int_equal(kc__entry_peek(path, &e, NULL, 0), KC_OK); /* listings still read it */
  kc__entry_free(NULL, &e);

  /* another key: rejected too */
  setenv("KC_CACHE_KEY", "beta", 1);
  expect_rejected(root, NULL, path);

  /* tampered with: another kernel under the MAC of the real one */
  size_t n, size;
  uint8_t *file = st_read_file(path, &n);
  void *img = planted_image(f->root, key, &size);
  plant(path, img, size, file + n - KC__MAC_TRAILER, KC__MAC_TRAILER);
  unsetenv("KC_CACHE_KEY");
  st_capture_begin();
  expect_planted_runs(root, NULL); /* without a key the group is trusted: it runs */
  free(st_capture_end());
  kc__store_trust t;
  char why[1024];
  setenv("KC_CACHE_KEY", "beta", 1);
  assert_true(kc__store_trust_load(&t, root, kct_conf(NULL), NULL, why, sizeof why));
  assert_false(kc__store_check_file(&t, path, why, sizeof why));
  KCT_CONTAINS(why, "MAC does not verify");
  expect_rejected(root, NULL, path);
  assert_true(kc__store_check_file(&t, path, why, sizeof why));
  kc__store_trust_wipe(&t);

  /* the key's entries are used */
  kc_stats s = run_k(root, NULL);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.compiles, 0);
  free(file);
  free(img);
}

/* ------------------------------------------------------- kcache verify */

static void test_the_check_for_kcache_verify(void **state) {
  fx *f = *state;
  char root[600], path[900], bucket[900], why[1024];
  uint8_t key[16];
  snprintf(root, sizeof root, "%s/store", f->root);
  entry_and_key(root, path, sizeof path, key);
  dir_of(path, bucket, sizeof bucket);
  kc__store_trust t;
  assert_true(kc__store_trust_load(&t, root, kct_conf(NULL), NULL, why, sizeof why));
  assert_true(kc__store_check_file(&t, path, why, sizeof why));
  assert_true(kc__store_check_file(&t, bucket, why, sizeof why));

  assert_int_equal(chmod(path, 0666), 0);
  assert_false(kc__store_check_file(&t, path, why, sizeof why));
  KCT_CONTAINS(why, "writable by everyone");
  KCT_CONTAINS(why, "chmod 600");
  assert_int_equal(chmod(path, 0600), 0);

  assert_int_equal(chmod(bucket, 0770), 0);
  assert_false(kc__store_check_file(&t, path, why, sizeof why)); /* its bucket */
  assert_false(kc__store_check_file(&t, bucket, why, sizeof why));
  KCT_CONTAINS(why, "chmod 700");
  assert_int_equal(chmod(bucket, 0700), 0);

  assert_int_equal(chmod(root, 0775), 0);
  assert_false(kc__store_trust_load(&t, root, kct_conf(NULL), NULL, why, sizeof why));
  KCT_CONTAINS(why, "writable by group");
  assert_int_equal(chmod(root, 0700), 0);

  if (geteuid() == 0) {
    assert_int_equal(chown(path, OTHER_UID, OTHER_GID), 0);
    assert_false(kc__store_check_file(&t, path, why, sizeof why));
    KCT_CONTAINS(why, "owned by");
  }
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_what_kcache_creates_is_private_whatever_the_umask),
      T(test_a_shared_store_is_made_for_its_group),
      T(test_a_group_or_world_writable_store_is_refused),
      T(test_a_store_owned_by_another_user_is_refused),
      T(test_a_writable_entry_or_bucket_is_never_loaded),
      T(test_an_entry_owned_by_another_user_is_never_loaded),
      T(test_a_shared_store_without_a_key_warns_once),
      T(test_a_shared_store_with_a_key_loads_only_authenticated_entries),
      T(test_the_check_for_kcache_verify),
  };
#undef T
  return KCT_RUN(tests);
}
