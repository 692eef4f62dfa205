/* SPDX-License-Identifier: MIT */
/*
 * remote/estimate.c -- owns how long compiles under a Redis lock take here:
 * the estimate that bounds a lookup's wait for another machine's lock when
 * no KC_REMOTE_KEY authenticates it (kcache.h, the lock protocol). Each
 * upload of a compile done under a lock token (or after giving up on one)
 * measures it from the token's time; the estimate is the longest lately,
 * decaying by an eighth at each new one, kept in this runtime and in
 * ROOT/v1/remote-compile for this machine's processes (flock(LOCK_NB): a
 * hint that nobody can make a lookup wait for).
 */
#include "remote/internal.h"
#include "base/safeopen.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* vdir/remote-compile: magic, then the estimate in ms (little-endian). */
#define KC__RCOMPILE_MAGIC "KCRCOMP1"

static uint64_t est_get(const uint8_t *b, ssize_t n) {
  return n == 16 && !memcmp(b, KC__RCOMPILE_MAGIC, 8) ? kc__rd64(b + 8) : 0;
}

/* The estimate stored by this machine's processes (0: none, or unreadable). */
static uint64_t est_read(const char *vdir) {
  char path[PATH_MAX];
  if (!vdir || snprintf(path, sizeof path, "%s/remote-compile", vdir) >= (int)sizeof path) return 0;
  int fd = kc__open_safe(path, O_RDONLY, 0, false);
  if (fd < 0) return 0;
  uint8_t b[16];
  ssize_t n = 0;
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) { /* a hint: never wait for whoever holds it */
    n = pread(fd, b, sizeof b, 0);
    flock(fd, LOCK_UN);
  }
  close(fd);
  return est_get(b, n);
}

/* The longest compile seen, decaying by an eighth at each new one: a slow
 * kernel raises it at once, and quick ones bring it down in a few. */
static uint64_t est_next(uint64_t old, uint64_t ms) {
  uint64_t decayed = old - old / 8;
  return ms > decayed ? ms : decayed;
}

void kc__remote_observe(kc__remote *r, uint64_t token) {
  uint64_t now = kc__now_ns() / 1000000u, at = token >> 24;
  if (!at || now < at || now - at > 3600000u) return; /* not a token of ours, or older than any bound */
  uint64_t ms = now - at ? now - at : 1;
  uint64_t old = kc__load_relaxed(&r->est_ms);
  while (!atomic_compare_exchange_weak(&r->est_ms, &old, est_next(old, ms))) {}
  char path[PATH_MAX];
  if (!r->vdir || snprintf(path, sizeof path, "%s/remote-compile", r->vdir) >= (int)sizeof path) return;
  int fd = kc__open_safe(path, O_RDWR | O_CREAT, 0644, false);
  if (fd < 0) return; /* a read-only store: this runtime's estimate only */
  uint8_t b[16];
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* a hint: this runtime's estimate then */
    close(fd);
    return;
  }
  uint64_t next = est_next(est_get(b, pread(fd, b, sizeof b, 0)), ms);
  memcpy(b, KC__RCOMPILE_MAGIC, 8);
  kc__le64(b + 8, next);
  if (pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b) {
    /* a hint only */
  }
  flock(fd, LOCK_UN);
  close(fd);
}

uint32_t kc__remote_wait_bound_ms(kc__remote *r, uint64_t *est) {
  uint64_t mine = kc__load_relaxed(&r->est_ms), stored = est_read(r->vdir);
  *est = mine > stored ? mine : stored;
  if (!*est) return r->cfg.lock_ms;
  uint64_t b = *est > UINT32_MAX / 4 ? UINT32_MAX : *est * 4;
  if (b < KC__WAIT_FLOOR_MS) b = KC__WAIT_FLOOR_MS;
  return b < r->cfg.lock_ms ? (uint32_t)b : r->cfg.lock_ms;
}
