/* SPDX-License-Identifier: MIT */
/*
 * cache/entry_file.c -- owns reading entry files: the whole file decoded
 * (kc__entry_load / kc__entry_read, with the key of its name checked) and
 * the quick peek at header and metadata that listings use, and, for the
 * store's lookups, the trust checks before a byte is read (owner and mode,
 * trust.c) and the MAC trailer's after. The bytes are the codec's business
 * (codec.c); this file only reads them.
 */
#include "cache/dir.h"
#include "cache/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

kc_status kc__entry_load(const kc__heap *mem, const char *path, const uint8_t *want_key, kc__entry *e,
                         char *why, size_t wl, struct stat *st, int *fd_out, const kc__store_trust *trust) {
  memset(e, 0, sizeof *e);
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, wl, "cannot open: %s", kc__open_strerror(errno));
    return errno == ENOENT ? KC_ENOTFOUND : KC_EUNAVAILABLE;
  }
  if (fstat(fd, st) != 0) { /* (kc__fo_open gives regular files only) */
    snprintf(why, wl, "cannot stat: %s", strerror(errno));
    close(fd);
    return KC_EUNAVAILABLE;
  }
  if (trust && !kc__store_trust_entry(trust, path, st, why, wl)) {
    close(fd); /* never read: whoever could write it could make us run it */
    return KC_EIO;
  }
  if ((uint64_t)st->st_size > KC__STORE_MAX_ENTRY + KC__MAC_TRAILER) {
    snprintf(why, wl, "implausibly large (%lld bytes)", (long long)st->st_size);
    close(fd);
    return KC_EIO;
  }
  size_t got = 0, image = 0;
  uint8_t *buf = kc__fo_read_all(mem, fd, (size_t)st->st_size, &got, why, wl);
  if (!buf) {
    close(fd);
    return KC_EUNAVAILABLE;
  }
  kc_status s = kc__store_unseal(trust, buf, got, &image, why, wl);
  if (s) {
    kc__heap_free(mem, buf);
    close(fd);
    return s;
  }
  s = kc__entry_decode(mem, buf, image, e, why, wl);
  if (s == KC_ENOMEM) s = KC_EUNAVAILABLE; /* not the file's fault: left alone */
  if (!s && want_key && memcmp(e->key, want_key, 16)) {
    char hex[33];
    kc__store_hex(e->key, hex);
    snprintf(why, wl, "holds key %s, not the key of its name", hex);
    kc__entry_free(mem, e);
    s = KC_EIO;
  }
  if (s || !fd_out) close(fd);
  else *fd_out = fd;
  return s;
}

kc_status kc__entry_read(const kc__heap *mem, const char *path, const uint8_t *want_key, kc__entry *out,
                         char *why, size_t whylen) {
  char local[128];
  if (!why || !whylen) {
    why = local;
    whylen = sizeof local;
  }
  struct stat st;
  return kc__entry_load(mem, path, want_key, out, why, whylen, &st, NULL, NULL);
}

/* The metadata of len bytes after the header h of fd's file (st_size total). */
static kc_status peek_meta(int fd, const uint8_t *h, size_t hlen, int64_t len, size_t total, kc__entry *e,
                           char *why, size_t wl) {
  uint8_t *m = malloc(len ? (size_t)len : 1);
  if (!m) {
    snprintf(why, wl, "out of memory");
    return KC_EUNAVAILABLE;
  }
  if (kc__fo_pread(fd, m, (size_t)len, (off_t)hlen) != (ssize_t)len) {
    snprintf(why, wl, "truncated metadata");
    free(m);
    return KC_EIO;
  }
  return kc__entry_head_meta(h, m, (size_t)len, total, e, why, wl);
}

/* The size of the image in fd's file of size bytes whose header is h: size
 * less a MAC trailer when the header's length leaves room for one exactly
 * and it is there (a store with KC_CACHE_KEY). */
static uint64_t unsealed_size(int fd, const uint8_t *h, uint64_t size) {
  uint64_t img = kc__entry_image_size(h); /* the codec reads the header */
  char magic[8];
  if (size < KC__STORE_HEADER + KC__MAC_TRAILER || img != size - KC__MAC_TRAILER ||
      kc__fo_pread(fd, magic, 8, (off_t)(size - KC__MAC_TRAILER)) != 8 || memcmp(magic, KC__MAC_MAGIC, 8))
    return size;
  return size - KC__MAC_TRAILER;
}

kc_status kc__entry_peek(const char *path, kc__entry *e, char *why, size_t wl) {
  char local[128];
  if (!why || !wl) {
    why = local;
    wl = sizeof local;
  }
  memset(e, 0, sizeof *e);
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, wl, "cannot open: %s", kc__open_strerror(errno));
    return errno == ENOENT ? KC_ENOTFOUND : KC_EUNAVAILABLE;
  }
  struct stat st;
  uint8_t h[KC__STORE_HEADER + 16];
  kc_status s = KC_EIO;
  int64_t len = -1;
  ssize_t n = fstat(fd, &st) == 0 ? kc__fo_pread(fd, h, sizeof h, 0) : -1;
  uint64_t total = n >= (ssize_t)sizeof h ? unsealed_size(fd, h, (uint64_t)st.st_size) : 0;
  if (n < 0) {
    snprintf(why, wl, "cannot read: %s", strerror(errno));
    s = KC_EUNAVAILABLE;
  } else if (n == 0) {
    snprintf(why, wl, "empty file");
  } else if (n < (ssize_t)sizeof h) {
    snprintf(why, wl, "truncated (%zd bytes)", n);
  } else if (total > KC__STORE_MAX_ENTRY) {
    snprintf(why, wl, "larger than any entry (%llu bytes)", (unsigned long long)total);
  } else if ((len = kc__entry_head(h, total, true, why, wl)) >= 0) {
    s = peek_meta(fd, h, sizeof h, len, (size_t)total, e, why, wl);
  }
  close(fd);
  return s;
}
