/* SPDX-License-Identifier: MIT */
/*
 * cache/store.c -- owns a cache's life and its lookups (see cache.h):
 * opening from the resolved configuration, the per-key flocks (single
 * flight across processes), reads that heal the store when an entry is
 * damaged, writes (temp file, fsync, rename), the eviction trigger, the fall
 * back to memory only when the directory cannot be written or is not
 * trusted (trust.c), and driving the tier behind it. Nothing here fails
 * the caller: a store that does not work is a store that misses.
 */
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct kc__cache {
  const kc__heap *mem;
  char *root; /* the directory the user named */
  char *vdir; /* root/v1 */
  uint64_t max_size;
  uint32_t lock_ms;
  void (*warn)(void *ud, const char *msg);
  void *warn_ud;
  _Atomic int writable; /* 0 after the first write that failed */
  _Atomic int warned; /* one warning per cache (1), and one of planted paths (2) */
  kc__disk_counters n;
  kc__cache_tier tier; /* self NULL: none */
  kc__store_trust trust; /* whom its files must come from; its MAC key */
};

/* c NULL (while opening): always; else once per cache. */
static void KC__PRINTF(4, 5)
    warn_once(kc__cache *c, void (*fn)(void *, const char *), void *ud, const char *fmt, ...) {
  if (c && (atomic_fetch_or(&c->warned, 1) & 1)) return;
  va_list ap;
  va_start(ap, fmt);
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (fn) fn(ud, msg);
  else fprintf(stderr, "kcache: warning: %s\n", msg);
}

/* ---------------------------------------------------------------- open */

/* The bound and the lock timeout from the resolved configuration (the
 * bound: else the store's kcache.conf, trusted as t says). */
static void open_limits(const kc__cache_config *cfg, const char *root, const kc__store_trust *t,
                        uint64_t *max, uint32_t *lock_ms) {
  char why[PATH_MAX + 128];
  if (!kc__store_max_size(cfg->conf, root, t, max, NULL, why, sizeof why))
    warn_once(NULL, cfg->warn, cfg->warn_ud, "%s; using 1G", why);
  *lock_ms = KC__STORE_DEFAULT_LOCK_MS;
  double secs;
  kc__setting_state st = kc__config_seconds(cfg->conf, KC__SET_CACHE_LOCK_TIMEOUT, &secs);
  if (st == KC__SETTING_SET && secs < 4e6) *lock_ms = (uint32_t)(secs * 1000);
  else if (st != KC__SETTING_UNSET)
    warn_once(NULL, cfg->warn, cfg->warn_ud, "%s is not a number of seconds; using 60",
              kc__config_what(cfg->conf, KC__SET_CACHE_LOCK_TIMEOUT, why, sizeof why));
}

/* Makes the store's directories and checks that they may be trusted
 * (trust.c), after the root and before what it holds; fills *t. False
 * (warned) when the store must not be used. */
static bool open_dirs(const kc__cache_config *cfg, const char *root, const char *vdir, kc__store_trust *t) {
  char why[1024];
  int err = 0;
  if (!kc__store_trust_conf(t, cfg->conf, false, why, sizeof why)) {
    warn_once(NULL, cfg->warn, cfg->warn_ud,
              "not using the disk cache in %s: %s; compiled kernels are kept in "
              "memory only",
              root, why);
    return false;
  }
  mode_t mode = kc__store_dir_mode(t);
  bool made = kc__store_make_dirs(root, mode, &err);
  /* the root before anything is made in it, then vdir as it is now */
  bool trusted = !made || kc__store_trust_root(t, root, vdir, why, sizeof why);
  made = made && trusted && kc__store_make_dirs(vdir, mode, &err);
  trusted = trusted && (!made || kc__store_trust_root(t, root, vdir, why, sizeof why));
  if (!trusted)
    warn_once(NULL, cfg->warn, cfg->warn_ud,
              "refusing to use %s as the disk cache: %s; compiled kernels are "
              "kept in memory only",
              root, why);
  else if (!made)
    warn_once(NULL, cfg->warn, cfg->warn_ud,
              "cannot use %s as the disk cache (%s); compiled kernels are kept in memory only", root,
              strerror(err));
  if (!made || !trusted) {
    kc__store_trust_wipe(t);
    return false;
  }
  if (kc__store_trust_note(t, root, why, sizeof why)) warn_once(NULL, cfg->warn, cfg->warn_ud, "%s", why);
  return true;
}

kc__cache *kc__cache_open(const kc__cache_config *cfg) {
  bool off = false;
  kc__config_bool(cfg->conf, KC__SET_CACHE_DISABLE, &off);
  if (off) return NULL;
  char root[PATH_MAX], vdir[PATH_MAX];
  const char *dir = kc__config_text(cfg->conf, KC__SET_CACHE_DIR);
  if (dir && *dir && strlen(dir) <= KC__STORE_ROOT_MAX) {
    snprintf(root, sizeof root, "%s", dir);
  } else if (dir && *dir) {
    warn_once(NULL, cfg->warn, cfg->warn_ud,
              "the disk cache directory's path is %zu bytes long, more than %d (so that the paths of its "
              "files fit in PATH_MAX); compiled kernels are kept in memory only",
              strlen(dir), KC__STORE_ROOT_MAX);
    return NULL;
  } else {
    warn_once(NULL, cfg->warn, cfg->warn_ud,
              "no directory for the disk cache (set KC_CACHE_DIR, XDG_CACHE_HOME or HOME); "
              "compiled kernels are kept in memory only");
    return NULL;
  }
  kc__store_vdir(root, vdir, sizeof vdir);
  kc__store_trust trust;
  if (!open_dirs(cfg, root, vdir, &trust)) return NULL;
  uint64_t max; /* (the store's kcache.conf is read once its root is trusted) */
  uint32_t lock_ms;
  open_limits(cfg, root, &trust, &max, &lock_ms);
  const kc__heap *mem = cfg->mem;
  kc__cache *c = kc__heap_calloc(mem, sizeof *c);
  if (!c || !(c->root = kc__heap_alloc(mem, strlen(root) + 1)) ||
      !(c->vdir = kc__heap_alloc(mem, strlen(vdir) + 1))) {
    if (c) {
      kc__heap_free(mem, c->root);
      kc__heap_free(mem, c);
    }
    kc__store_trust_wipe(&trust);
    warn_once(NULL, cfg->warn, cfg->warn_ud,
              "out of memory opening the disk cache; compiled kernels are kept in memory only");
    return NULL;
  }
  c->trust = trust;
  kc__store_trust_wipe(&trust);
  strcpy(c->root, root);
  strcpy(c->vdir, vdir);
  c->mem = mem;
  c->max_size = max;
  c->lock_ms = lock_ms;
  c->warn = cfg->warn;
  c->warn_ud = cfg->warn_ud;
  atomic_init(&c->writable, 1);
  return c;
}

void kc__cache_close(kc__cache *c) {
  if (!c) return;
  const kc__heap *mem = c->mem;
  kc__store_trust_wipe(&c->trust);
  kc__heap_free(mem, c->root);
  kc__heap_free(mem, c->vdir);
  kc__heap_free(mem, c);
}

void kc__cache_set_tier(kc__cache *c, const kc__cache_tier *tier) {
  if (c) c->tier = tier ? *tier : (kc__cache_tier){0};
}

const char *kc__cache_root(const kc__cache *c) { return c ? c->root : NULL; }
const char *kc__cache_vdir(const kc__cache *c) { return c ? c->vdir : NULL; }
bool kc__cache_writable(const kc__cache *c) { return c && kc__load_relaxed(&c->writable); }

void kc__cache_stats(const kc__cache *c, kc_stats *out) {
  if (c) kc__disk_counters_copy(&c->n, out);
}

/* -------------------------------------------------------------- writes */

/* A write failed: say so once. What someone planted at one of the store's
 * paths (a directory, a link, a FIFO, a file where a bucket belongs) fails
 * that entry only (said once too); anything else (a full or read-only
 * disk) stops writing, reads go on. */
static void write_failed(kc__cache *c, const char *what, const char *path, int err) {
  kc__fetch_add_relaxed(&c->n.write_failures, 1);
  if (err == KC__ENOTREG || err == ELOOP || err == EISDIR || err == ENOTDIR || err == ENOTEMPTY ||
      err == EEXIST) {
    if (!(atomic_fetch_or(&c->warned, 2) & 2))
      warn_once(NULL, c->warn, c->warn_ud,
                "cannot write an entry of the disk cache in %s (%s %s: %s: kcache did not put that "
                "there); that kernel is kept in memory only, the others are still written",
                c->root, what, path, kc__open_strerror(err));
    return;
  }
  kc__store_relaxed(&c->writable, 0);
  warn_once(c, c->warn, c->warn_ud,
            "cannot write to the disk cache in %s (%s %s: %s); compiled kernels are kept in memory "
            "only from now on (entries already there are still used)",
            c->root, what, path, strerror(err));
}

/* Makes dir (a directory of the store) when it is missing, with the
 * store's mode and group (trust.h). False with errno if it cannot be. */
static bool make_dir(kc__cache *c, const char *dir) {
  mode_t mode = kc__store_dir_mode(&c->trust);
  if (kc__fo_mkdir(dir, mode) == 0) {
    kc__store_made_dir(dir, mode);
    return true;
  }
  return errno == EEXIST;
}

static bool ensure_bucket(kc__cache *c, const uint8_t key[16]) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/%02x", c->vdir, key[0]);
  if (!make_dir(c, dir)) {
    write_failed(c, "creating", dir, errno);
    return false;
  }
  struct stat st;
  if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return true;
  write_failed(c, "using", dir, KC__ENOTREG); /* a link or a file where the bucket belongs */
  return false;
}

/* Makes vdir/name (locks, tmp: format.h) after a create in it found it
 * missing: made once per store, not at every miss. */
static bool make_aux_dir(kc__cache *c, const char *name) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/%s", c->vdir, name);
  return make_dir(c, dir);
}

/* After a rename into place: the directory's fsync and the counters. True
 * if the store is now past its bound (or its size is unknown): then
 * *target is what eviction should bring it down to. */
static bool after_write(kc__cache *c, const char *dir, size_t size, bool replaced, const struct stat *old,
                        uint64_t *target, bool rewrite) {
  int dfd = kc__fo_open(KC__IO_OPEN, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (dfd >= 0) {
    kc__fo_fsync(dfd);
    close(dfd);
  }
  if (!rewrite) kc__fetch_add_relaxed(&c->n.writes, 1);
  kc__store_counters now;
  kc__store_counters_add(c->vdir, (int64_t)size - (replaced ? (int64_t)old->st_size : 0), replaced ? 0 : 1, 0,
                         0, rewrite ? 0 : 1, 0, 0, false, &now);
  /* Over the bound: evict towards 90% (at most KC__EVICT_BATCH entries
   * per write), so that the next writes do not evict again at once. Size
   * unknown: the eviction finds it out from the index. */
  *target = now.sized ? c->max_size / 10 * 9 : c->max_size;
  return !now.sized || now.bytes > c->max_size;
}

/* The rename of tmp over final in the bucket's index transaction (index.h).
 * Nothing else of kcache's changes the bucket directory (the temp file and
 * the lock file are elsewhere: format.h), so the transaction finds the
 * index fresh and adds the one record. st: the temp file. */
static int rename_indexed(kc__cache *c, const uint8_t key[16], const char *tmp, const char *final,
                          const struct stat *st, const uint8_t *img, size_t size, bool *replaced,
                          struct stat *old) {
  kc__index_txn it;
  kc__index_begin(c->mem, c->vdir, key[0], &it);
  *replaced = stat(final, old) == 0;
  int err = kc__fo_rename(tmp, final) == 0 ? 0 : errno;
  if (!err) {
    kc__index_rec r;
    kc__index_rec_make(&r, key, st, img, size);
    kc__index_put(c->mem, &it, &r);
  }
  kc__index_commit(c->mem, c->vdir, &it);
  return err;
}

/* Creates the temp file tmp (in vdir/tmp, made when missing); fd or -1. */
static int create_temp(kc__cache *c, const char *tmp, mode_t mode) {
  int fd = kc__fo_open(KC__IO_CREATE, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0 && errno == ENOENT && make_aux_dir(c, KC__STORE_TMP_DIR))
    fd = kc__fo_open(KC__IO_CREATE, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  return fd;
}

/* Writes image as the entry of key: temp file, fsync, rename into the
 * bucket, fsync of the bucket directory. True if eviction is due (see
 * after_write). written: NULL for an entry a compile (or the tier) made,
 * counted as a write; else the rewrite of an entry
 * (kc__cache_replace_artifact), counted in bytes only, and *written says
 * whether it is in place. */
static bool write_entry(kc__cache *c, const uint8_t key[16], const uint8_t *img, size_t size,
                        uint64_t *target, bool *written) {
  if (!ensure_bucket(c, key)) return false;
  static _Atomic uint64_t seq;
  char hex[33], dir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX];
  kc__store_hex(key, hex);
  snprintf(dir, sizeof dir, "%s/%.2s", c->vdir, hex);
  /* unique per process, thread and call, also in a child after fork */
  if (snprintf(tmp, sizeof tmp, "%s/" KC__STORE_TMP_DIR "/%s-%ld-%ld-%llu", c->vdir, hex, (long)getpid(),
               (long)syscall(SYS_gettid),
               (unsigned long long)kc__fetch_add_relaxed(&seq, 1)) >= (int)sizeof tmp ||
      snprintf(final, sizeof final, "%s/%s.kce", dir, hex) >= (int)sizeof final) {
    write_failed(c, "naming", dir, ENAMETOOLONG);
    return false;
  }
  mode_t mode = kc__store_file_mode(&c->trust);
  int fd = create_temp(c, tmp, mode);
  if (fd < 0) {
    write_failed(c, "creating", tmp, errno);
    return false;
  }
  fchmod(fd, mode); /* the umask ignored; a failure leaves it stricter, never looser */
  const char *what = "writing";
  uint8_t mac[KC__MAC_TRAILER];
  bool sealed = kc__store_seal(&c->trust, img, size, mac);
  int err = kc__fo_write_all(fd, img, size);
  if (!err && sealed) err = kc__fo_write_all(fd, mac, sizeof mac);
  if (err) goto fail;
  what = "flushing";
  struct stat st;
  if (kc__fo_fsync(fd) != 0 || fstat(fd, &st) != 0) {
    err = errno;
    goto fail;
  }
  int cfd = fd;
  fd = -1;
  if (close(cfd) != 0) {
    err = errno;
    goto fail;
  }
  struct stat old;
  bool replaced;
  what = "renaming";
  err = rename_indexed(c, key, tmp, final, &st, img, size, &replaced, &old);
  if (err && (err == EISDIR || err == ENOTEMPTY || err == EEXIST) && rmdir(final) == 0) /* an empty one */
    err = rename_indexed(c, key, tmp, final, &st, img, size, &replaced, &old);
  if (err) goto fail;
  if (written) *written = true;
  return after_write(c, dir, (size_t)st.st_size, replaced, &old, target, written != NULL);
fail:
  if (fd >= 0) close(fd);
  unlink(tmp);
  write_failed(c, what, strcmp(what, "renaming") ? tmp : final, err);
  return false;
}

/* The eviction a write called for, counted in the runtime's statistics:
 * KC_EBUSY, another thread or process is evicting and does the work;
 * KC_ENOMEM, what it had decided was still removed, and is counted.
 * "Does the work": a writer adds its bytes to the counters before it tries
 * the eviction lock, so once the lock is given back the counters hold
 * every write that found it taken; the evictor reads them then, and goes
 * again while the store is still past its bound (those writes came after
 * its target was computed). A writer that comes after that read finds the
 * lock free and evicts for itself. A few rounds at most. */
static void evict_counted(kc__cache *c, uint64_t target) {
  for (int round = 0; round < 4; round++) {
    kc__gc_result r = {0};
    kc_status st = kc__store_evict(c->mem, c->vdir, target, KC__EVICT_BATCH, &r);
    kc__fetch_add_relaxed(&c->n.evictions, r.evicted);
    if (st || !r.evicted) return;
    kc__store_counters k;
    kc__store_counters_read(c->vdir, &k);
    if (!k.sized || k.bytes <= c->max_size) return;
  }
}

/* write_entry, then the eviction it calls for. */
static void write_and_evict(kc__cache *c, const uint8_t key[16], const void *img, size_t size) {
  uint64_t target = 0;
  if (kc__load_relaxed(&c->writable) && write_entry(c, key, img, size, &target, NULL))
    evict_counted(c, target);
}

/* ----------------------------------------------------------- key locks */

/* Opens and flocks the key's lock file (in vdir/locks, made when missing);
 * the fd, or -1 (none, a failure, a timeout; wait false: held by another). */
static int key_lock_fd(kc__cache *c, const char *path, bool wait) {
  uint64_t deadline = kc__now_ns() + (uint64_t)c->lock_ms * 1000000u;
  for (;;) {
    int fd = kc__store_open_create(KC__IO_CREATE, path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && make_aux_dir(c, KC__STORE_LOCKS_DIR))
      fd = kc__store_open_create(KC__IO_CREATE, path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      write_failed(c, "creating", path, errno);
      return -1;
    }
    long nap = 200;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) { /* no flock here (some network file systems) */
        close(fd);
        return -1;
      }
      if (!wait) {
        close(fd);
        return -1;
      }
      if (kc__now_ns() >= deadline) { /* the holder is stuck: compile without it */
        kc__fetch_add_relaxed(&c->n.lock_timeouts, 1);
        close(fd);
        return -1;
      }
      kc__nap_us((uint64_t)nap);
      if (nap < 20000) nap *= 2;
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      return fd;
    close(fd); /* the holder removed it as it finished: lock the new one */
  }
}

static void key_lock(kc__cache *c, kc__cache_txn *txn) {
  char path[PATH_MAX];
  kc__store_lock_path(c->vdir, txn->key, path, sizeof path);
  txn->lock_fd = key_lock_fd(c, path, true);
}

/* Removes the lock file while it is held (see key_lock_fd), after the
 * entry's rename: a waiter that gets it next reads the entry. It is not in
 * a bucket directory, so no index transaction is needed. */
static void key_unlock(kc__cache *c, kc__cache_txn *txn) {
  if (txn->lock_fd < 0) return;
  char path[PATH_MAX];
  kc__store_lock_path(c->vdir, txn->key, path, sizeof path);
  unlink(path);
  flock(txn->lock_fd, LOCK_UN);
  close(txn->lock_fd);
  txn->lock_fd = -1;
}

/* ------------------------------------------------------------- lookups */

/* One look at the entry of key. True when verify took it; a damaged entry
 * (or one verify calls BAD) is removed and counted as a repair; *stale: one
 * verify called STALE was there. */
static bool lookup(kc__cache *c, const uint8_t key[16], kc__cache_verify_fn verify, void *ud, bool *stale) {
  char path[PATH_MAX], why[256];
  kc__store_path(c->vdir, key, ".kce", path, sizeof path);
  kc__entry e;
  struct stat st;
  int fd = -1;
  kc_status r = kc__entry_load(c->mem, path, key, &e, why, sizeof why, &st, &fd, &c->trust);
  if (r == KC_ENOTFOUND || r == KC_EUNAVAILABLE) return false;
  bool good = r == KC_OK;
  if (good) {
    kc__verdict v = verify(ud, &e);
    kc__entry_free(c->mem, &e);
    if (v == KC__ENTRY_GOOD) futimens(fd, NULL); /* last use, for eviction; fails harmlessly when read-only */
    close(fd);
    if (v == KC__ENTRY_UNSURE) return false; /* not the entry's fault */
    if (v == KC__ENTRY_STALE) {
      *stale = true;
      return false; /* sound, but compiled from files that changed: the compile writes over it */
    }
    good = v == KC__ENTRY_GOOD;
  }
  if (good) return true;
  /* Removed even when this runtime has stopped writing: that follows one failed write (a full disk,
   * most often), and unlink needs no room; a damaged entry left in place was read, found damaged and
   * compiled again at every lookup of every process, each one counted (a soak counted 13,275 repairs of
   * 76 damaged entries). Where the store is truly read-only, unlink fails and nothing changes. The
   * store's count is of entries removed: once per entry, by the process that removed it. */
  kc__fetch_add_relaxed(&c->n.repairs, 1);
  kc__index_txn it;
  kc__index_begin(c->mem, c->vdir, key[0], &it);
  bool removed = kc__store_remove_if_same(path, &st);
  if (removed) kc__index_del(&it, key);
  kc__index_commit(c->mem, c->vdir, &it);
  if (removed) kc__store_counters_add(c->vdir, -(int64_t)st.st_size, -1, 0, 0, 0, 0, 1, false, NULL);
  return false;
}

/* What the tier's accept sees: the lookup it serves. */
typedef struct tier_ctx {
  kc__cache *c;
  const uint8_t *key;
  kc__cache_verify_fn verify;
  void *ud;
} tier_ctx;

static void tier_write(void *ud, const uint8_t key[16], const void *image, size_t size) {
  write_and_evict(ud, key, image, size);
}

/* What comes from the tier is verified exactly like a file of the store,
 * then written to disk (on the tier's thread when it can). */
static bool tier_accept(void *ud, void *image, size_t size, char *why, size_t wl) {
  tier_ctx *x = ud;
  kc__cache *c = x->c;
  kc__entry e;
  if (kc__entry_decode(c->mem, image, size, &e, why, wl) != KC_OK) return false;
  if (memcmp(e.key, x->key, 16)) {
    snprintf(why, wl, "it holds the entry of another key");
    kc__entry_free(c->mem, &e);
    return false;
  }
  kc__verdict v = x->verify(x->ud, &e);
  bool good = v == KC__ENTRY_GOOD;
  if (v == KC__ENTRY_STALE) kc__fetch_add_relaxed(&c->n.stale, 1);
  if (!good)
    snprintf(why, wl, "%s",
             v == KC__ENTRY_UNSURE ? "out of memory"
             : v == KC__ENTRY_STALE
                 ? "a file it was compiled from is not the same here"
                 : "another kernel, backend or signature, or the backend refused its code");
  if (good && kc__load_relaxed(&c->writable)) {
    /* written to disk on the tier's thread: the launch that the tier served
     * waits neither for the fsyncs nor for an eviction */
    void *img = e.buf;
    size_t n = e.size;
    e.buf = NULL; /* the caller has its own copies of the artifact and signature */
    if (!c->tier.defer(c->tier.self, tier_write, c, x->key, img, n)) {
      tier_write(c, x->key, img, n);
      kc__heap_free(c->mem, img);
    }
  }
  kc__entry_free(c->mem, &e);
  return good;
}

/* The closure's text for the entry, copied now (while the caller's
 * definitions are certainly alive). */
static void txn_keep_defs(kc__cache *c, const kc__key_parts *p, kc__cache_txn *txn) {
  if (kc__entry_defs_encode(c->mem, p->defs, p->ndefs, &txn->defs, &txn->defs_len)) txn->active = true;
}

bool kc__cache_fetch(kc__cache *c, const kc__key_parts *p, kc__cache_verify_fn verify, void *ud,
                     kc__cache_txn *txn) {
  memset(txn, 0, sizeof *txn);
  txn->lock_fd = -1;
  if (!c) return false;
  kc__store_key(p, txn->key);
  bool stale = false;
  bool hit = lookup(c, txn->key, verify, ud, &stale);
  if (!hit && kc__load_relaxed(&c->writable)) {
    key_lock(c, txn);
    /* whoever held the lock may have written it meanwhile */
    hit = lookup(c, txn->key, verify, ud, &stale);
  }
  if (stale && !hit) kc__fetch_add_relaxed(&c->n.stale, 1);
  if (hit) {
    key_unlock(c, txn);
    kc__fetch_add_relaxed(&c->n.hits, 1);
    kc__store_counters_add(c->vdir, 0, 0, 1, 0, 0, 0, 0, false, NULL);
  } else {
    kc__fetch_add_relaxed(&c->n.misses, 1);
    kc__store_counters_add(c->vdir, 0, 0, 0, 1, 0, 0, 0, false, NULL);
  }
  /* Then the tier, still holding the key's lock: the other processes here
   * wait for what it brings (written to disk) instead of asking too. */
  bool tier_hit = false;
  if (!hit && c->tier.self) {
    tier_ctx x = {c, txn->key, verify, ud};
    tier_hit = c->tier.fetch(c->tier.self, txn->key, tier_accept, &x, &txn->remote_lock);
  }
  if (tier_hit) key_unlock(c, txn);
  if (!hit && !tier_hit && (kc__load_relaxed(&c->writable) || c->tier.self)) txn_keep_defs(c, p, txn);
  return hit || tier_hit;
}

/* The image of the entry of p and res; NULL when out of memory. */
static void *finish_encode(kc__cache *c, const kc__cache_txn *txn, const kc__key_parts *p,
                           const kc__cache_result *res, size_t *size) {
  kc__entry e;
  memset(&e, 0, sizeof e);
  memcpy(e.key, txn->key, 16);
#define KC__X(name, tag, first) e.name = p->name;
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  e.created_ns = kc__realtime_ns();
  e.compile_ns = res->compile_ns;
  kc__store_text_hash(res->tu, res->tu_len, e.tu_hash);
  e.nsig = res->nsig;
  e.sig = (uint64_t *)res->sig; /* only read */
  e.artifact = res->artifact;
  e.artifact_size = res->artifact_size;
  e.log = res->log;
  e.log_len = res->log_len;
  e.files = (kc__filedep *)(uintptr_t)res->files; /* only read */
  e.nfiles = res->nfiles;
  void *img = NULL;
  if (kc__entry_encode_defs(c->mem, &e, txn->defs, txn->defs_len, &img, size) != KC_OK) return NULL;
  return img;
}

void kc__cache_finish(kc__cache *c, kc__cache_txn *txn, const kc__key_parts *p, const kc__cache_result *res) {
  if (!c) return;
  bool evict = false;
  uint64_t target = 0;
  void *img = NULL;
  size_t size = 0;
  if (txn->active && p && (kc__load_relaxed(&c->writable) || c->tier.self)) {
    img = finish_encode(c, txn, p, res, &size);
    if (img && kc__load_relaxed(&c->writable)) evict = write_entry(c, txn->key, img, size, &target, NULL);
  }
  key_unlock(c, txn); /* first: waiters read the entry while we evict */
  if (c->tier.self) c->tier.upload(c->tier.self, txn->key, img, size, txn->remote_lock); /* takes img */
  else kc__heap_free(c->mem, img);
  txn->remote_lock = 0;
  kc__heap_free(c->mem, txn->defs);
  txn->defs = NULL;
  txn->active = false;
  if (evict) evict_counted(c, target);
}

bool kc__cache_replace_artifact(kc__cache *c, const uint8_t key[16], const void *old, size_t old_size,
                                const void *bytes, size_t size) {
  if (!c || !kc__load_relaxed(&c->writable) || !old || !bytes || !size) return false;
  /* not while a compile of the key runs (here or in another process): it
   * writes its own entry, which this must not overwrite */
  kc__cache_txn txn = {.lock_fd = -1};
  memcpy(txn.key, key, 16);
  char path[PATH_MAX], why[256];
  kc__store_lock_path(c->vdir, key, path, sizeof path);
  txn.lock_fd = key_lock_fd(c, path, false);
  if (txn.lock_fd < 0) return false;
  kc__store_path(c->vdir, key, ".kce", path, sizeof path);
  kc__entry e;
  struct stat st;
  bool done = false;
  if (kc__entry_load(c->mem, path, key, &e, why, sizeof why, &st, NULL, &c->trust) == KC_OK) {
    /* only the entry this process wrote: another compile's (a file it read
     * changed since) stays */
    if (e.artifact_size == old_size && memcmp(e.artifact, old, old_size) == 0) {
      e.artifact = bytes;
      e.artifact_size = size;
      void *img = NULL;
      size_t n = 0;
      uint64_t target = 0;
      if (kc__entry_encode(c->mem, &e, &img, &n) == KC_OK) {
        bool evict = write_entry(c, key, img, n, &target, &done);
        kc__heap_free(c->mem, img);
        key_unlock(c, &txn); /* first, as kc__cache_finish does */
        if (evict) evict_counted(c, target);
      }
    }
    kc__entry_free(c->mem, &e);
  }
  key_unlock(c, &txn);
  return done;
}
