/* SPDX-License-Identifier: MIT */
/*
 * test_store_index -- the store's index (src/cache/index.h) says what the
 * directory holds, whatever happened to it: it follows writes, repairs and
 * evictions; an index file that is truncated, corrupted, marked dirty,
 * replaced or deleted is rebuilt with the right counts (and `kcache stats`
 * reports them); a writer killed with SIGKILL in the middle of an update
 * leaves a bucket that readers rebuild; a child forked while a bucket was
 * locked does not inherit the lock; a change made behind its back (an
 * older kcache, a user's rm) is seen; processes that write and evict in one
 * store at once leave an index equal to the directory, and the store within
 * its bound; eviction takes the least recently used although hits do not
 * write the index. A real runtime's entries are indexed with their backend.
 *
 * Entries are written through the store's own functions (kc__cache_fetch
 * and kc__cache_finish, with a synthetic artifact: the store keeps bytes),
 * so that hundreds of them cost no compiles.
 */
#include "st.h"

#include "kc_test_parts.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fx {
  char root[KCT_DIR_LEN]; /* first: kct_dir_setup makes it */
  char vdir[KCT_DIR_LEN + 8];
} fx;

static int setup(void **state) {
  kct_dir_setup(state, sizeof(fx), "store-i");
  fx *f = *state;
  kc__store_vdir(f->root, f->vdir, sizeof f->vdir);
  return 0;
}

static int teardown(void **state) { return kct_dir_teardown(state); }

static kc__cache *open_cache(const fx *f, uint64_t max) { return kct_store_open(f->root, max); }

/* The parts of entry i (its key is made from them, as the glue would). */
static void parts_of(size_t i, char *params, size_t len, kc__key_parts *p) {
  kct_entry_parts(i, "test_store_index", params, len, p);
}

static kc__verdict good(void *ud, const kc__entry *e) {
  (void)ud;
  (void)e;
  return KC__ENTRY_GOOD;
}

/* Looks up entry i and, on a miss, writes it. True on a hit. No cmocka. */
static bool put(kc__cache *c, size_t i) {
  char params[32];
  kc__key_parts p;
  parts_of(i, params, sizeof params, &p);
  static uint8_t artifact[700];
  static const uint64_t sig[1] = {0};
  memset(artifact, (int)(i & 0xff), sizeof artifact);
  kc__cache_result res = {1000, NULL, 0, 1, sig, artifact, sizeof artifact, "", 0};
  kc__cache_txn txn;
  if (kc__cache_fetch(c, &p, good, NULL, &txn)) return true;
  kc__cache_finish(c, &txn, &p, &res);
  return false;
}

static void key_of(size_t i, uint8_t key[16]) {
  char params[32];
  kc__key_parts p;
  parts_of(i, params, sizeof params, &p);
  kc__store_key(&p, key);
}

static void put_all(const fx *f, size_t from, size_t to) {
  kc__cache *c = open_cache(f, 0);
  assert_non_null(c);
  for (size_t i = from; i < to; i++) assert_false(put(c, i));
  kc__cache_close(c);
}

/* The index equals the directory: the same keys with the same sizes.
 * Returns the number of entries. */
static size_t check_index(const fx *f) {
  kc__index_set s;
  assert_true(kc__index_get_all(NULL, f->vdir, true, &s));
  kc__store_file *files;
  size_t n;
  assert_int_equal(kc__store_list(NULL, f->vdir, &files, &n), KC_OK);
  if (s.n != n) fail_msg("the index holds %zu entries, the directory %zu", s.n, n);
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < s.n && memcmp(s.rec[j].key, files[i].key, 16)) j++;
    if (j == s.n) fail_msg("%s is not in the index", files[i].path);
    assert_int_equal(s.rec[j].size, files[i].size);
  }
  kc__store_list_free(NULL, files, n);
  kc__index_set_free(NULL, &s);
  return n;
}

/* Bucket b's index: its count; *rebuilt whether it had to be rebuilt. */
static size_t bucket(const fx *f, int b, bool *rebuilt) {
  kc__index_set s = {0};
  assert_true(kc__index_get(NULL, f->vdir, b, true, &s, rebuilt));
  size_t n = s.n;
  kc__index_set_free(NULL, &s);
  return n;
}

static void index_file(const fx *f, int b, char *path, size_t len) {
  snprintf(path, len, "%s/index/%02x", f->vdir, b);
}

/* --------------------------------------------------------------- tests */

static void test_index_follows_writes_and_repairs(void **state) {
  fx *f = *state;
  put_all(f, 0, 150);
  assert_int_equal(check_index(f), 150);
  for (int b = 0; b < 256; b++) {
    bool rebuilt;
    bucket(f, b, &rebuilt);
    if (rebuilt) fail_msg("bucket %02x was rebuilt: the writes left its index stale", b);
  }
  /* a damaged entry: the lookup removes it, in the index too */
  uint8_t key[16];
  key_of(7, key);
  char path[1024];
  kc__store_path(f->vdir, key, ".kce", path, sizeof path);
  size_t n;
  char *b = st_read_file(path, &n);
  b[n - 3] ^= 0x40;
  st_write_file(path, b, n);
  free(b);
  kc__cache *c = open_cache(f, 0);
  char params[32];
  kc__key_parts p;
  parts_of(7, params, sizeof params, &p);
  kc__cache_txn txn;
  assert_false(kc__cache_fetch(c, &p, good, NULL, &txn));
  kc__cache_finish(c, &txn, NULL, NULL); /* the compile failed: nothing written */
  kc__cache_close(c);
  assert_int_equal(check_index(f), 149);
  bool rebuilt;
  bucket(f, key[0], &rebuilt);
  assert_false(rebuilt);
}

/* Bucket b's record of key (fails the test if there is none). */
static kc__index_rec record_of(const fx *f, const uint8_t key[16], bool *rebuilt) {
  kc__index_set s = {0};
  assert_true(kc__index_get(NULL, f->vdir, key[0], true, &s, rebuilt));
  size_t j = 0;
  while (j < s.n && memcmp(s.rec[j].key, key, 16)) j++;
  if (j == s.n) fail_msg("the key is not in the index of its bucket");
  kc__index_rec r = s.rec[j];
  kc__index_set_free(NULL, &s);
  return r;
}

/* A miss and its write change the bucket's index by one record: the lock
 * and temp files are not in the bucket directory, so the write's index
 * transaction finds the index fresh and does not list the bucket again.
 * Seen through a neighbour whose file's mtime is changed behind the
 * index's back (as a hit does): a rebuild would take the new mtime. */
static void test_a_write_updates_the_index_without_a_rebuild(void **state) {
  fx *f = *state;
  uint8_t a[16], b[16];
  key_of(0, a);
  size_t j = 1;
  for (key_of(j, b); b[0] != a[0]; key_of(++j, b)) {}
  kc__cache *c = open_cache(f, 0);
  assert_false(put(c, 0));
  bool rebuilt;
  kc__index_rec before = record_of(f, a, &rebuilt);
  assert_false(rebuilt);
  char path[1024];
  kc__store_path(f->vdir, a, ".kce", path, sizeof path);
  struct timespec t[2] = {{1000000000, 0}, {1000000000, 0}}; /* 2001: no write makes that */
  assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
  usleep(20000); /* the bucket directory's mtime moves in clock ticks: a change now is a new mtime */
  assert_false(put(c, j)); /* the miss (its lock), then the write of the same bucket */
  kc__cache_close(c);
  kc__index_rec after = record_of(f, a, &rebuilt);
  assert_false(rebuilt);
  if (after.mtime_ns == 1000000000ll * 1000000000ll)
    fail_msg("the write rebuilt the index of bucket %02x (it took the neighbour's new mtime)", a[0]);
  assert_int_equal(after.mtime_ns, before.mtime_ns);
  record_of(f, b, &rebuilt); /* it is there (check_index: with its size) */
  assert_int_equal(check_index(f), 2);
}

/* Each way an index file is damaged: rebuilt, right, and then sound. */
static void test_damaged_index_is_rebuilt(void **state) {
  fx *f = *state;
  put_all(f, 0, 120);
  uint8_t key[16];
  key_of(3, key);
  int b = key[0];
  bool rebuilt;
  size_t want = bucket(f, b, &rebuilt);
  assert_true(want >= 1);
  char path[1100];
  index_file(f, b, path, sizeof path);
  for (int way = 0; way < 5; way++) {
    size_t n;
    char *img = st_read_file(path, &n);
    if (way == 0) st_write_file(path, img, 30); /* truncated */
    if (way == 1) img[n - 5] ^= 1; /* a record's byte */
    if (way == 2) img[12] = 1; /* the dirty mark of a writer that died */
    if (way == 3) memset(img, 0x5a, n); /* garbage of the right size */
    if (way == 1 || way == 2 || way == 3) st_write_file(path, img, n);
    if (way == 4) assert_int_equal(unlink(path), 0);
    free(img);
    assert_int_equal(bucket(f, b, &rebuilt), want);
    if (!rebuilt) fail_msg("damage %d was not noticed", way);
    assert_int_equal(bucket(f, b, &rebuilt), want);
    if (rebuilt) fail_msg("after damage %d, the rebuilt index was not written back", way);
  }
  assert_int_equal(check_index(f), 120);
  /* the summary truncated, then garbage, then every index file garbage
   * too: kcache stats still counts right each time */
  char cmd[2048], *out, sum[1100];
  snprintf(sum, sizeof sum, "%s/index/summary", f->vdir);
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' stats --json 2>&1", KC_CLI, f->root);
  for (int way = 0; way < 3; way++) {
    size_t n;
    char *img = st_read_file(sum, &n);
    assert_true(n >= 100 * 192);
    if (way == 0) st_write_file(sum, img, n / 3);
    if (way == 1) memset(img, 0x33, n);
    if (way == 1) st_write_file(sum, img, n);
    free(img);
    if (way == 2)
      for (int i = 0; i < 256; i++) {
        index_file(f, i, path, sizeof path);
        st_write_file(path, "garbage", 7);
      }
    KCT_SAYS(kct_capture(cmd, &out), out, 0, "\"entries\": 120,", "\"host\": {\"entries\": 120,");
  }
  kc__index_summary t;
  assert_true(kc__index_summarize(NULL, f->vdir, false, &t));
  assert_int_equal(t.count, 120);
  assert_int_equal(check_index(f), 120);
}

/* A writer killed between its dirty mark and its commit; writers killed
 * at random points of a stream of writes. */
static void test_writer_killed_mid_update(void **state) {
  fx *f = *state;
  put_all(f, 0, 100);
  uint8_t key[16];
  key_of(5, key);
  char path[1024];
  kc__store_path(f->vdir, key, ".kce", path, sizeof path);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    kc__index_txn t;
    kc__index_begin(NULL, f->vdir, key[0], &t);
    unlink(path); /* the change, then death before the commit */
    raise(SIGKILL);
    _exit(1);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  bool rebuilt;
  bucket(f, key[0], &rebuilt);
  assert_true(rebuilt);
  assert_int_equal(check_index(f), 99);
  for (int round = 0; round < 6; round++) {
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      kc__cache *c = open_cache(f, 60000); /* small: it evicts as it goes */
      for (size_t i = 1000 + 100000 * (size_t)round;; i++) put(c, i);
    }
    usleep(30000 + 25000 * (useconds_t)round);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    check_index(f);
  }
}

/* fork() while this process holds a bucket's lock (a thread mid-write in
 * a program that forks): the child's copy of the descriptor shares the
 * lock, so giving it back by closing the descriptor alone left it held in
 * the child, which then waited forever for its own copy the next time it
 * wrote that bucket (a hang first seen in the remote tier's fork test). */
static void test_fork_while_a_bucket_is_locked(void **state) {
  fx *f = *state;
  put_all(f, 0, 20);
  uint8_t key[16];
  key_of(3, key);
  kc__index_txn t;
  kc__index_begin(NULL, f->vdir, key[0], &t);
  assert_true(t.fd >= 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(20); /* the hang, if the lock stays held */
    kc__index_txn mine;
    kc__index_begin(NULL, f->vdir, key[0], &mine);
    bool locked = mine.fd >= 0;
    kc__index_commit(NULL, f->vdir, &mine);
    _exit(locked ? 0 : 3);
  }
  kc__index_commit(NULL, f->vdir, &t); /* the parent's write ends after the fork */
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (WIFSIGNALED(st))
    fail_msg("the child died of signal %d (SIGALRM: it waited for the lock)", WTERMSIG(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(check_index(f), 20);
}

/* A change that kcache did not make (an older kcache, a user's rm): the
 * bucket directory's mtime says so. The clock of directory times moves in
 * ticks of a few milliseconds: the test waits one out first. */
static void test_change_behind_its_back(void **state) {
  fx *f = *state;
  put_all(f, 0, 50);
  assert_int_equal(check_index(f), 50);
  usleep(20000);
  uint8_t key[16];
  key_of(9, key);
  char path[1024], copy[1100];
  kc__store_path(f->vdir, key, ".kce", path, sizeof path);
  snprintf(copy, sizeof copy, "%s.kept", path);
  assert_int_equal(rename(path, copy), 0);
  assert_int_equal(check_index(f), 49);
  usleep(20000);
  assert_int_equal(rename(copy, path), 0); /* and back, as a foreign writer would add it */
  assert_int_equal(check_index(f), 50);
}

/* Four processes write, hit and evict in one store at once. */
static void test_concurrent_processes(void **state) {
  fx *f = *state;
  enum { P = 4, EACH = 80 };
  const uint64_t max = 80 * 1024;
  kct_child ch[P];
  for (int k = 0; k < P; k++) {
    if (!kct_fork(&ch[k], false)) continue;
    kc__cache *c = open_cache(f, max);
    int hits = 0;
    for (size_t i = 0; i < EACH; i++) {
      put(c, 10000 * (size_t)k + i);
      hits += put(c, 10000 * (size_t)k + i); /* a hit, unless evicted at once */
      hits += put(c, (size_t)((k + 1) % P) * 10000 + i / 2); /* another's, maybe */
    }
    kc_stats s;
    memset(&s, 0, sizeof s);
    kc__cache_stats(c, &s);
    kc__cache_close(c);
    uint64_t sent[2] = {s.disk_evictions, (uint64_t)hits};
    kct_child_send(&ch[k], sent, sizeof sent);
    _exit(0);
  }
  uint64_t evictions = 0, hits = 0;
  for (int k = 0; k < P; k++) {
    uint64_t got[2] = {0, 0};
    assert_int_equal(kct_child_wait(&ch[k], got, sizeof got, 120), sizeof got);
    assert_true(WIFEXITED(ch[k].status) && WEXITSTATUS(ch[k].status) == 0);
    evictions += got[0];
    hits += got[1];
  }
  assert_true(evictions > 0);
  assert_true(hits > 0);
  size_t n = check_index(f);
  uint64_t bytes;
  assert_int_equal(st_entries(f->root, &bytes), n);
  /* the bound, give or take what the writers that found another evicting
   * added meanwhile: the evictor goes again while the counters, which hold
   * those writes once its lock is free, are past the bound (store.c,
   * evict_counted; a CI run of 2026-12-07 ended 11 KB over before it did) */
  kc__store_counters kk;
  kc__store_counters_read(f->vdir, &kk);
  print_message("after the writers: %llu bytes (bound %llu), the counters say %llu (sized %d)\n",
                (unsigned long long)bytes, (unsigned long long)max, (unsigned long long)kk.bytes,
                (int)kk.sized);
  if (bytes > max + P * 1024)
    fail_msg("the store holds %llu bytes, bound %llu", (unsigned long long)bytes, (unsigned long long)max);
  /* and within it exactly after one more write that evicts alone */
  kc__cache *c = open_cache(f, max);
  put(c, 999999);
  kc__cache_close(c);
  n = check_index(f);
  assert_int_equal(st_entries(f->root, &bytes), n);
  if (bytes > max)
    fail_msg("after one more write the store holds %llu bytes, bound %llu", (unsigned long long)bytes,
             (unsigned long long)max);
}

static bool present(const fx *f, size_t i) {
  uint8_t key[16];
  char path[1024];
  key_of(i, key);
  kc__store_path(f->vdir, key, ".kce", path, sizeof path);
  return access(path, F_OK) == 0;
}

/* Hits touch the files, not the index: eviction still takes the least
 * recently used, checking each candidate's mtime. */
static void test_eviction_sees_hits_the_index_does_not(void **state) {
  fx *f = *state;
  put_all(f, 0, 40);
  usleep(20000);
  kc__cache *c = open_cache(f, 0);
  for (size_t i = 0; i < 5; i++) assert_true(put(c, i)); /* hits: the five oldest are now the newest */
  kc__cache_close(c);
  uint64_t bytes;
  st_entries(f->root, &bytes);
  c = open_cache(f, bytes); /* the next write takes the store past its bound */
  assert_false(put(c, 1000));
  kc_stats s;
  memset(&s, 0, sizeof s);
  kc__cache_stats(c, &s);
  kc__cache_close(c);
  assert_true(s.disk_evictions >= 4);
  for (size_t i = 0; i < 5; i++)
    if (!present(f, i)) fail_msg("entry %zu was evicted, though it was used last", i);
  for (size_t i = 5; i < 5 + s.disk_evictions; i++)
    if (present(f, i)) fail_msg("entry %zu was kept, though it was among the least recently used", i);
  assert_true(present(f, 1000));
  check_index(f);
}

/* The entries a runtime writes are indexed with their backend. */
static void test_runtime_entries_are_indexed(void **state) {
  fx *f = *state;
  kc_runtime *rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  st_run_ok(rt, "kv", "V=1", 1);
  kc_runtime_destroy(rt);
  kc__index_set s;
  assert_true(kc__index_get_all(NULL, f->vdir, false, &s));
  assert_int_equal(s.n, 2);
  uint64_t k = kc__index_name_hash("k"), kv = kc__index_name_hash("kv");
  assert_int_not_equal(k, kv);
  for (size_t i = 0; i < s.n; i++) {
    assert_memory_equal(s.rec[i].backend, "host\0\0\0\0", 8);
    assert_true(s.rec[i].name == k || s.rec[i].name == kv); /* the name, from the image written */
  }
  assert_int_not_equal(s.rec[0].name, s.rec[1].name);
  kc__index_set_free(NULL, &s);
  assert_int_equal(check_index(f), 2);
  /* an index of kcache 0.3 (KCINDEX1, 40-byte records without names) is
   * damage: the library rebuilds it without reading entries (names and
   * backends unknown), kc__index_get_known reads them */
  for (int b = 0; b < 256; b++) {
    char path[1024];
    index_file(f, b, path, sizeof path);
    int fd = open(path, O_WRONLY);
    if (fd < 0) continue;
    assert_int_equal(pwrite(fd, "KCINDEX1", 8, 0), 8);
    close(fd);
  }
  assert_true(kc__index_get_all(NULL, f->vdir, true, &s));
  assert_int_equal(s.n, 2);
  for (size_t i = 0; i < s.n; i++) assert_int_equal(s.rec[i].name, 0);
  kc__index_set_free(NULL, &s);
  size_t named = 0;
  for (int b = 0; b < 256; b++) {
    kc__index_set one = {0};
    assert_true(kc__index_get_known(NULL, f->vdir, b, true, &one));
    for (size_t i = 0; i < one.n; i++) named += one.rec[i].name == k || one.rec[i].name == kv;
    kc__index_set_free(NULL, &one);
  }
  assert_int_equal(named, 2);
}

/* What a lookup saw: the entry's artifact size and first byte. */
typedef struct seen {
  size_t size;
  int first;
} seen;

static kc__verdict see(void *ud, const kc__entry *e) {
  seen *w = ud;
  w->size = e->artifact_size;
  w->first = e->artifact_size ? ((const uint8_t *)e->artifact)[0] : -1;
  return KC__ENTRY_GOOD;
}

/* Entry i as a lookup finds it now (fails the test on a miss). */
static seen lookup(kc__cache *c, size_t i) {
  char params[32];
  kc__key_parts p;
  parts_of(i, params, sizeof params, &p);
  seen w = {0, -1};
  kc__cache_txn txn;
  if (!kc__cache_fetch(c, &p, see, &w, &txn)) {
    kc__cache_finish(c, &txn, NULL, NULL);
    fail_msg("entry %zu is not in the store", i);
  }
  return w;
}

/* kc__cache_replace_artifact (a backend's better artifact after the first
 * launch) writes the entry again only over the bytes it was given, never
 * while a compile holds the key's lock; each refusal leaves the entry as it was and the index equal to the
 * directory. */
static void test_an_artifact_is_replaced_only_over_its_own_bytes(void **state) {
  fx *f = *state;
  kc__cache *c = open_cache(f, 0);
  assert_non_null(c);
  assert_false(put(c, 3)); /* 700 bytes of 0x03 */
  uint8_t key[16], old[700], other[700], better[900];
  key_of(3, key);
  memset(old, 3, sizeof old);
  memset(other, 4, sizeof other);
  memset(better, 0x5a, sizeof better);

  /* bytes that are not the entry's (another compile wrote it since) */
  assert_false(kc__cache_replace_artifact(c, key, other, sizeof other, better, sizeof better));
  assert_false(kc__cache_replace_artifact(c, key, old, sizeof old - 1, better, sizeof better));
  seen w = lookup(c, 3);
  assert_int_equal(w.size, 700);
  assert_int_equal(w.first, 3);

  /* a compile of the key holds its lock (here, as another process would) */
  char path[1024];
  kc__store_lock_path(f->vdir, key, path, sizeof path);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  assert_false(kc__cache_replace_artifact(c, key, old, sizeof old, better, sizeof better));
  w = lookup(c, 3);
  assert_int_equal(w.size, 700);
  close(fd); /* the lock let go */

  /* no entry for the key at all */
  uint8_t absent[16];
  key_of(4, absent);
  assert_false(kc__cache_replace_artifact(c, absent, old, sizeof old, better, sizeof better));

  /* now it is written, all else kept, and not counted as a write */
  kc_stats before = {0}, after = {0};
  kc__cache_stats(c, &before);
  assert_true(kc__cache_replace_artifact(c, key, old, sizeof old, better, sizeof better));
  kc__cache_stats(c, &after);
  assert_int_equal(after.disk_writes, before.disk_writes);
  w = lookup(c, 3);
  assert_int_equal(w.size, 900);
  assert_int_equal(w.first, 0x5a);
  /* and not again over the old bytes, which it no longer holds */
  assert_false(kc__cache_replace_artifact(c, key, old, sizeof old, other, sizeof other));
  kc__cache_close(c);
  assert_int_equal(check_index(f), 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_CACHE_DISABLE");
  const struct CMUnitTest tests[] = {
      T(test_index_follows_writes_and_repairs),
      T(test_a_write_updates_the_index_without_a_rebuild),
      T(test_damaged_index_is_rebuilt),
      T(test_writer_killed_mid_update),
      T(test_fork_while_a_bucket_is_locked),
      T(test_change_behind_its_back),
      T(test_concurrent_processes),
      T(test_eviction_sees_hits_the_index_does_not),
      T(test_runtime_entries_are_indexed),
      T(test_an_artifact_is_replaced_only_over_its_own_bytes),
  };
  return KCT_RUN(tests);
}
