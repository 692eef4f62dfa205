/* SPDX-License-Identifier: MIT */
/*
 * fuzz_store.c -- the disk cache's readers of files that anything could
 * have written or damaged: the entry decoder (kc__entry_decode), the entry
 * reader with its key check (kc__entry_read), the quick reader of listings
 * (kc__entry_peek), the shared counters (kc__store_counters_read) and key
 * names (kc__store_unhex). A bad file must be a miss: rejected with a
 * status, never a crash, a leak or a use of bytes that were not verified.
 *
 * The first byte of the input picks a mode (byte % 4):
 *   0  the rest is a whole entry file, decoded as it is. Random bytes
 *      rarely get past the checksums, so this mostly checks that nothing
 *      whose header or payload checksum, length, magic or version is wrong
 *      is accepted (each is recomputed here independently).
 *   1  the rest is a key (16 bytes) and a payload; the target writes a
 *      correct header around it, so the section parser sees arbitrary
 *      payloads. Accepted entries are checked: every pointer and length
 *      within the file, strings terminated, and encode(decode(x)) decodes
 *      to the same entry. Then one byte of the file is changed (chosen by
 *      the input's hash): that must be rejected.
 *   2  as 1, written to a file in memory and read by path with kc__entry_read, with
 *      the right key or a wrong one (bit 2 of the first byte), and with
 *      kc__entry_peek: a wrong key is rejected, the right key gives what
 *      decoding the bytes gives, and a listable entry lists the same.
 *   3  the rest is a counters file (vdir/stats) and a key name.
 */
#include "fuzz.h"
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* What the format says a valid file is, recomputed without store.c. */
static bool envelope_valid(const uint8_t *b, size_t size) {
  return size >= KC__STORE_HEADER && !memcmp(b, KC__STORE_MAGIC, 8) && rd64(b + 56) == XXH3_64bits(b, 56) &&
         rd32(b + 8) == KC__STORE_FORMAT && rd32(b + 12) == KC__STORE_HEADER &&
         rd64(b + 32) == size - KC__STORE_HEADER &&
         rd64(b + 40) == XXH3_64bits(b + KC__STORE_HEADER, size - KC__STORE_HEADER);
}

/* A correct header for key + payload. */
static uint8_t *wrap(const uint8_t *key, const uint8_t *payload, size_t plen, size_t *size) {
  uint8_t *b = calloc(1, KC__STORE_HEADER + plen);
  if (!b) abort();
  memcpy(b, KC__STORE_MAGIC, 8);
  wr32(b + 8, KC__STORE_FORMAT);
  wr32(b + 12, KC__STORE_HEADER);
  memcpy(b + 16, key, 16);
  wr64(b + 32, plen);
  if (plen) memcpy(b + KC__STORE_HEADER, payload, plen);
  wr64(b + 40, XXH3_64bits(b + KC__STORE_HEADER, plen));
  wr64(b + 56, XXH3_64bits(b, 56));
  *size = KC__STORE_HEADER + plen;
  return b;
}

static bool within(const kc__entry *e, const void *p, size_t n) {
  const uint8_t *b = e->buf, *q = p;
  return q >= b + KC__STORE_HEADER && q <= b + e->size && n <= (size_t)(b + e->size - q);
}

static void check_cstr(const kc__entry *e, const char *s, const char *what) {
  KCF_CHECK(s != NULL, "accepted entry without %s", what);
  KCF_CHECK(within(e, s, 1), "%s points outside the file", what);
  size_t room = (size_t)((const uint8_t *)e->buf + e->size - (const uint8_t *)s);
  KCF_CHECK(memchr(s, 0, room) != NULL, "%s runs past the end of the file", what);
}

/* An accepted entry uses only bytes of its file, all of them terminated. */
static void check_entry(const kc__entry *e) {
  KCF_CHECK(e->buf && envelope_valid(e->buf, e->size), "accepted a file whose envelope is bad");
  KCF_CHECK(e->format == KC__STORE_FORMAT, "format %u", e->format);
  KCF_CHECK(!memcmp(e->key, (const uint8_t *)e->buf + 16, 16), "key is not the header's key");
  check_cstr(e, e->backend, "backend");
  check_cstr(e, e->identity, "identity");
  check_cstr(e, e->options, "options");
  check_cstr(e, e->params, "params");
  check_cstr(e, e->entry, "entry");
  check_cstr(e, e->library, "library");
  KCF_CHECK(e->log && within(e, e->log, e->log_len + 1) && e->log[e->log_len] == 0,
            "log outside the file or not terminated");
  KCF_CHECK(e->artifact && within(e, e->artifact, e->artifact_size), "artifact outside the file");
  KCF_CHECK(e->sig && (size_t)e->nsig * 8 <= e->size, "%u signatures in %zu bytes", e->nsig, e->size);
  KCF_CHECK(e->ndefs == 0 || e->defs, "%u definitions without an array", e->ndefs);
  KCF_CHECK((size_t)e->ndefs * 14 <= e->size, "%u definitions in %zu bytes", e->ndefs, e->size);
  for (uint32_t i = 0; i < e->ndefs; i++) {
    check_cstr(e, e->defs[i].name, "a definition's name");
    KCF_CHECK(within(e, e->defs[i].text, e->defs[i].len + 1) && e->defs[i].text[e->defs[i].len] == 0,
              "definition %u's text outside the file or not terminated", i);
  }
}

static bool same_str(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* Two decodings of the same entry. */
static void check_same(const kc__entry *a, const kc__entry *b, const char *what) {
  KCF_CHECK(!memcmp(a->key, b->key, 16), "%s: key differs", what);
  KCF_CHECK(same_str(a->backend, b->backend) && same_str(a->identity, b->identity) &&
                same_str(a->options, b->options) && same_str(a->params, b->params) &&
                same_str(a->entry, b->entry) && same_str(a->library, b->library),
            "%s: metadata differs", what);
  KCF_CHECK(a->created_ns == b->created_ns && a->compile_ns == b->compile_ns &&
                !memcmp(a->tu_hash, b->tu_hash, 16),
            "%s: times or tu_hash differ", what);
  KCF_CHECK(a->ndefs == b->ndefs, "%s: %u and %u definitions", what, a->ndefs, b->ndefs);
  for (uint32_t i = 0; i < a->ndefs; i++)
    KCF_CHECK(same_str(a->defs[i].name, b->defs[i].name) && a->defs[i].len == b->defs[i].len &&
                  !memcmp(a->defs[i].text, b->defs[i].text, a->defs[i].len),
              "%s: definition %u differs", what, i);
  KCF_CHECK(a->nsig == b->nsig && (a->nsig == 0 || !memcmp(a->sig, b->sig, a->nsig * sizeof *a->sig)),
            "%s: signatures differ", what);
  KCF_CHECK(a->artifact_size == b->artifact_size &&
                (a->artifact_size == 0 || !memcmp(a->artifact, b->artifact, a->artifact_size)),
            "%s: artifacts differ", what);
  KCF_CHECK(a->log_len == b->log_len && !memcmp(a->log, b->log, a->log_len), "%s: logs differ", what);
}

/* Decodes a copy of file (decode takes the buffer over). */
static kc_status decode(const uint8_t *file, size_t size, kc__entry *e) {
  char why[128] = "";
  kc_status st = kc__entry_decode(NULL, kcf_dup(file, size), size, e, why, sizeof why);
  if (st == KC_OK) check_entry(e);
  else /* rejected as damaged, or out of memory while decoding */
    KCF_CHECK(((st == KC_EIO && why[0]) || st == KC_ENOMEM) && e->buf == NULL, "rejected with %s, why \"%s\"",
              kc_status_name(st), why);
  return st;
}

/* An accepted entry survives encode and decode unchanged. */
static void check_round_trip(const kc__entry *e) {
  void *img = NULL;
  size_t n = 0;
  KCF_CHECK(kc__entry_encode(NULL, e, &img, &n) == KC_OK, "cannot encode an accepted entry");
  kc__entry again;
  char why[128] = "";
  kc_status st = kc__entry_decode(NULL, img, n, &again, why, sizeof why);
  KCF_CHECK(st == KC_OK, "an accepted entry, encoded again, is rejected: %s", why);
  check_entry(&again);
  check_same(e, &again, "encode(decode(x))");
  kc__entry_free(NULL, &again);
}

static void check_damage_rejected(const uint8_t *file, size_t size, uint64_t seed) {
  uint8_t *bad = kcf_dup(file, size);
  size_t at = (size_t)(seed % size);
  bad[at] ^= (uint8_t)(1u << ((seed >> 32) % 8));
  kc__entry e;
  kc_status st = decode(bad, size, &e);
  KCF_CHECK(st != KC_OK, "accepted an entry with byte %zu of %zu changed", at, size);
  free(bad);
}

/* A regular file holding the bytes, in memory (/dev/shm, else $TMPDIR):
 * the store opens no link, so a memfd's /proc/self/fd path will not do.
 * One file per process, written over each time. */
static int file_with(const uint8_t *b, size_t n, char *path, size_t pathlen) {
  const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
  snprintf(path, pathlen, "%s/kc-fuzz-entry-%ld", dir && *dir ? dir : "/tmp", (long)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  KCF_CHECK(fd >= 0, "creating %s: %s", path, strerror(errno));
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, b + done, n - done);
    KCF_CHECK(w > 0, "write to %s: %s", path, strerror(errno));
    done += (size_t)w;
  }
  return fd;
}

static void mode_file(const uint8_t *file, size_t size, bool wrong_key) {
  char path[600];
  int fd = file_with(file, size, path, sizeof path);
  uint8_t key[16];
  memcpy(key, file + 16, 16);
  if (wrong_key) key[15] ^= 1;
  kc__entry direct, read, peek;
  kc_status want = decode(file, size, &direct);
  char why[128] = "";
  kc_status st = kc__entry_read(NULL, path, key, &read, why, sizeof why);
  if (wrong_key) {
    KCF_CHECK(st == KC_EIO, "read an entry under another key: %s", kc_status_name(st));
  } else {
    KCF_CHECK(st == want, "reading the file gave %s (%s), decoding its bytes %s", kc_status_name(st), why,
              kc_status_name(want));
    if (st == KC_OK) check_same(&direct, &read, "read and decode");
  }
  if (st == KC_OK) kc__entry_free(NULL, &read);

  st = kc__entry_peek(path, &peek, why, sizeof why);
  KCF_CHECK(st == KC_OK || st == KC_EIO, "peek returned %s", kc_status_name(st));
  if (st == KC_OK) {
    KCF_CHECK(!memcmp(peek.key, file + 16, 16) && peek.backend && peek.identity && peek.options &&
                  peek.params && peek.entry && peek.library && peek.ndefs == 0 && !peek.defs && !peek.sig &&
                  !peek.artifact,
              "peek accepted an entry but did not fill it as documented");
    kc__entry_free(NULL, &peek);
  }
  /* kcache writes the metadata first; an entry it wrote lists as it reads. */
  if (want == KC_OK && rd32(file + KC__STORE_HEADER) == KC__SEC_META)
    KCF_CHECK(st == KC_OK, "a valid entry cannot be listed: %s", why);
  if (want == KC_OK) kc__entry_free(NULL, &direct);
  close(fd);
  unlink(path);
}

static char stats_vdir[256];
static void remove_stats_dir(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/stats", stats_vdir);
  unlink(p);
  rmdir(stats_vdir);
}

static void mode_counters(const uint8_t *d, size_t n) {
  if (!stats_vdir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(stats_vdir, sizeof stats_vdir, "%s/kc-fuzz-stats-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    KCF_CHECK(mkdtemp(stats_vdir), "mkdtemp %s: %s", stats_vdir, strerror(errno));
    atexit(remove_stats_dir);
  }
  char path[300];
  snprintf(path, sizeof path, "%s/stats", stats_vdir);
  FILE *f = fopen(path, "wb");
  KCF_CHECK(f && fwrite(d, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
  kc__store_counters c;
  kc__store_counters_read(stats_vdir, &c);
  /* The file is written whole at offset 0; a longer one is read for its first 72 bytes. */
  bool valid = n >= 72 && !memcmp(d, "KCSTATS1", 8);
  KCF_CHECK(c.valid == valid, "a %zu-byte counters file read as %svalid", n, c.valid ? "" : "in");
  if (valid)
    KCF_CHECK(c.bytes == rd64(d + 8) && c.repairs == rd64(d + 56) && c.sized == ((rd64(d + 64) & 1) != 0),
              "counters read wrong");

  /* A key name: exactly 32 hex digits, and it prints back the same. */
  char name[40];
  size_t nl = n < 33 ? n : 33;
  memcpy(name, d, nl);
  name[nl] = 0;
  uint8_t key[16];
  bool hex = strlen(name) == 32 && strspn(name, "0123456789abcdefABCDEF") == 32;
  KCF_CHECK(kc__store_unhex(name, key) == hex, "kc__store_unhex(\"%s\") is wrong", name);
  if (hex) {
    char back[33];
    kc__store_hex(key, back);
    KCF_CHECK(!strncasecmp(back, name, 32), "key name \"%s\" prints back as \"%s\"", name, back);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  uint64_t seed = kcf_seed(data, size);
  unsigned mode = data[0] % 4;
  const uint8_t *d = data + 1;
  size_t n = size - 1;
  kc__entry e;
  if (mode == 0) {
    bool valid = envelope_valid(d, n);
    if (decode(d, n, &e) == KC_OK) {
      KCF_CHECK(valid, "accepted a file with a bad envelope");
      check_round_trip(&e);
      kc__entry_free(NULL, &e);
    }
    return 0;
  }
  if (mode == 3) {
    mode_counters(d, n);
    return 0;
  }
  uint8_t key[16] = {0};
  memcpy(key, d, n < 16 ? n : 16);
  size_t fsize;
  uint8_t *file = wrap(key, n > 16 ? d + 16 : NULL, n > 16 ? n - 16 : 0, &fsize);
  if (mode == 1) {
    if (decode(file, fsize, &e) == KC_OK) {
      check_round_trip(&e);
      kc__entry_free(NULL, &e);
    }
    check_damage_rejected(file, fsize, seed);
  } else {
    mode_file(file, fsize, (data[0] >> 2) & 1);
  }
  free(file);
  return 0;
}
