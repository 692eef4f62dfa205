/*
 * store.c -- the disk cache: a persistent, content-addressed store of
 * compiled artifacts shared by the threads and processes that use one
 * directory. It owns the key (what changes a compile's output), the entry
 * format (see store.h), reads that heal the store when an entry is damaged,
 * single flight across processes (a flock per key), the size bound (LRU by
 * last use, evicted by the thread that wrote past it), and the fall back to
 * memory only when the directory cannot be written.
 *
 * The engine calls it only on a miss of the world-age cache (ci_get), with
 * the specialization's lock held; launches never reach it. Nothing here
 * fails the caller: a store that does not work is a store that misses.
 */

#include "store.h"
#include "remote.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

/* An entry larger than this is damage, not a kernel. */
#define KC__STORE_MAX_ENTRY (1ull << 30)
/* Temp files older than this belong to writers that died. */
#define KC__STALE_TEMP_NS (3600ull * 1000000000ull)
/* Lock files untouched this long belong to compiles that died. */
#define KC__STALE_LOCK_NS (600ull * 1000000000ull)

struct kc__store {
  char *root; /* the directory the user named */
  char *vdir; /* root/v1 */
  uint64_t max_size;
  uint32_t lock_ms;
  _Atomic int writable; /* 0 after the first write that failed */
  _Atomic int warned;   /* one warning per runtime */
  _Atomic uint64_t hits, misses, writes, evictions, repairs, write_failures, lock_timeouts;
  /* A context of the runtime's backend, made on the first hit, in which
   * stored artifacts are test-loaded before they are trusted. */
  kc__mutex probe_lock; /* leaf */
  int probe_state;      /* 0: not made yet, 1: ready, -1: the backend cannot make one */
  void *probe_bctx;
  kc__remote *remote; /* the remote tier behind this store (remote.c), or NULL */
};

/* ---------------------------------------------------------- utilities */

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Fault injection (tests): of the next writes, `skip` succeed, then n fail. */
static _Atomic int kc__fail_skip, kc__fail_writes, kc__fail_errno;

void kc__store_test_fail_writes(int skip, int n, int err) {
  kc__store_relaxed(&kc__fail_errno, err);
  kc__store_relaxed(&kc__fail_skip, skip);
  kc__store_release(&kc__fail_writes, n);
}

/* 0, or the errno that an injected failure gives this write. */
static int injected_failure(void) {
  if (KC__LIKELY(kc__load_acquire(&kc__fail_writes) <= 0)) return 0;
  int s = kc__load_relaxed(&kc__fail_skip);
  while (s > 0)
    if (atomic_compare_exchange_weak(&kc__fail_skip, &s, s - 1)) return 0;
  int n = kc__load_relaxed(&kc__fail_writes);
  while (n > 0)
    if (atomic_compare_exchange_weak(&kc__fail_writes, &n, n - 1)) return kc__load_relaxed(&kc__fail_errno);
  return 0;
}

/* Every open, read, write, fsync and rename of the store goes through these,
 * so that a test build can fail the Nth one (src/fault.c) as a failing disk
 * would: with EIO. */
#ifdef KC_FAULT_INJECTION
static bool fo_fault(void) {
  if (KC__LIKELY(!kc__fault_hit(KC__FAULT_FILE))) return false;
  errno = EIO;
  return true;
}
#else
static inline bool fo_fault(void) { return false; }
#endif
static int fo_open(const char *path, int flags, mode_t mode) {
  return fo_fault() ? -1 : open(path, flags, mode);
}
static ssize_t fo_pread(int fd, void *buf, size_t n, off_t off) {
  return fo_fault() ? -1 : pread(fd, buf, n, off);
}
static ssize_t fo_pwrite(int fd, const void *buf, size_t n, off_t off) {
  return fo_fault() ? -1 : pwrite(fd, buf, n, off);
}
static ssize_t fo_write(int fd, const void *buf, size_t n) { return fo_fault() ? -1 : write(fd, buf, n); }
static int fo_fsync(int fd) { return fo_fault() ? -1 : fsync(fd); }
static int fo_rename(const char *from, const char *to) { return fo_fault() ? -1 : rename(from, to); }

/* A growable byte buffer (with rt's allocator, or malloc). */
typedef struct obuf {
  kc_runtime *rt;
  uint8_t *p;
  size_t len, cap;
  bool failed;
} obuf;

static void ob_put(obuf *b, const void *d, size_t n) {
  if (b->failed) return;
  if (n > b->cap - b->len) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) {
        b->failed = true;
        return;
      }
      cap *= 2;
    }
    uint8_t *np = kc__xrealloc(b->rt, b->p, cap);
    if (!np) {
      b->failed = true;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, d, n);
  b->len += n;
}
static void ob_u32(obuf *b, uint32_t v) {
  uint8_t x[4];
  kc__le32(x, v);
  ob_put(b, x, 4);
}
static void ob_u64(obuf *b, uint64_t v) {
  uint8_t x[8];
  kc__le64(x, v);
  ob_put(b, x, 8);
}
static size_t ob_section(obuf *b, uint32_t tag) {
  ob_u32(b, tag);
  ob_u32(b, 0);
  size_t at = b->len;
  ob_u64(b, 0);
  return at;
}
static void ob_section_end(obuf *b, size_t at) {
  if (!b->failed) kc__le64(b->p + at, b->len - at - 8);
}

/* ---------------------------------------------------------------- keys */

static void key_field(XXH3_state_t *s, uint8_t tag, const void *data, size_t len) {
  uint8_t h[9];
  h[0] = tag;
  kc__le64(h + 1, len);
  XXH3_128bits_update(s, h, sizeof h);
  if (len) XXH3_128bits_update(s, data, len);
}

static void key_str(XXH3_state_t *s, uint8_t tag, const char *str) {
  key_field(s, tag, str ? str : "", str ? strlen(str) : 0);
}

/* (name, index) order: the closure by name, whatever order it came in,
 * without allocating. Closures are small; this is quadratic. */
static bool def_before(const kc__key_def *d, uint32_t i, uint32_t j) {
  int c = strcmp(d[i].name, d[j].name);
  return c < 0 || (c == 0 && i < j);
}

void kc__store_key(const kc__key_parts *p, uint8_t key[16]) {
  XXH3_state_t s;
  XXH3_INITSTATE(&s);
  XXH3_128bits_reset(&s);
  uint8_t f[4];
  kc__le32(f, p->format);
  key_field(&s, 'F', f, sizeof f);
  key_str(&s, 'L', p->library);
  key_str(&s, 'B', p->backend);
  key_str(&s, 'I', p->identity);
  key_str(&s, 'O', p->options);
  key_str(&s, 'P', p->params);
  key_str(&s, 'E', p->entry);
  if (p->tu) key_field(&s, 'T', p->tu, p->tu_len);
  uint8_t n[4];
  kc__le32(n, p->ndefs);
  key_field(&s, 'N', n, sizeof n);
  uint32_t prev = UINT32_MAX;
  for (uint32_t k = 0; k < p->ndefs; k++) {
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < p->ndefs; i++)
      if ((prev == UINT32_MAX || def_before(p->defs, prev, i)) &&
          (best == UINT32_MAX || def_before(p->defs, i, best)))
        best = i;
    key_str(&s, 'D', p->defs[best].name);
    key_field(&s, 'X', p->defs[best].text, p->defs[best].len);
    prev = best;
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&s));
  memcpy(key, c.digest, 16);
}

void kc__store_text_hash(const char *text, size_t len, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(text, len));
  memcpy(out, c.digest, 16);
}

void kc__store_hex(const uint8_t key[16], char hex[33]) { kc__hex(key, 16, hex); }

static bool unhex_n(const char *s, uint8_t key[16]) {
  for (int i = 0; i < 16; i++) {
    int hi = kc__hexval((unsigned char)s[2 * i]), lo = hi < 0 ? -1 : kc__hexval((unsigned char)s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    key[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

bool kc__store_unhex(const char *s, uint8_t key[16]) {
  return s && strlen(s) == 32 && unhex_n(s, key);
}

/* ----------------------------------------------------------- directory */

bool kc__store_default_root(char *out, size_t outlen) {
  const char *dir = getenv("KC_CACHE_DIR");
  int n = -1;
  if (dir && *dir) {
    n = snprintf(out, outlen, "%s", dir);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/') n = snprintf(out, outlen, "%s/kcache", xdg); /* relative: ignored (XDG) */
    else if (home && *home) n = snprintf(out, outlen, "%s/.cache/kcache", home);
  }
  return n > 0 && (size_t)n < outlen;
}

void kc__store_vdir(const char *root, char *out, size_t outlen) {
  /* A root too long for out gives an empty path, which no directory
   * function accepts, rather than a cut-short one. */
  int n = snprintf(out, outlen, "%s/v%u", root, KC__STORE_FORMAT);
  if (n < 0 || (size_t)n >= outlen) out[0] = 0;
}

void kc__store_path(const char *vdir, const uint8_t key[16], const char *suffix, char *out,
                    size_t outlen) {
  char hex[33];
  kc__store_hex(key, hex);
  snprintf(out, outlen, "%s/%.2s/%s%s", vdir, hex, hex, suffix);
}

bool kc__store_parse_size(const char *s, uint64_t *out) {
  if (!s) return false;
  while (isspace((unsigned char)*s)) s++;
  if (!isdigit((unsigned char)*s) && *s != '.') return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || v < 0) return false;
  while (isspace((unsigned char)*end)) end++;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K': mult = 1024.0; break;
  case 'M': mult = 1024.0 * 1024; break;
  case 'G': mult = 1024.0 * 1024 * 1024; break;
  case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
  default: break;
  }
  if (mult > 1) {
    end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
  } else if (*end == 'b' || *end == 'B') {
    end++;
  }
  while (isspace((unsigned char)*end)) end++;
  double r = v * mult;
  if (*end || r >= 18446744073709551615.0) return false;
  *out = (uint64_t)r;
  return true;
}

bool kc__store_env_max_size(uint64_t *out) {
  const char *env = getenv("KC_CACHE_MAXSIZE");
  uint64_t v = 0;
  bool ok = !env || !*env || kc__store_parse_size(env, &v);
  *out = ok && v ? v : KC__STORE_DEFAULT_MAX;
  return ok;
}

/* mkdir -p; true if path is a directory afterwards. */
static bool make_dirs(const char *path, int *err) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
    *err = ENAMETOOLONG;
    return false;
  }
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(tmp, 0755);
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
    *err = errno;
    struct stat st;
    return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode);
  }
  struct stat st;
  if (stat(tmp, &st) != 0) {
    *err = errno;
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *err = ENOTDIR;
    return false;
  }
  return true;
}

/* -------------------------------------------------------------- counters */

#define KC__COUNTERS_MAGIC "KCSTATS1"
#define KC__COUNTERS_SIZE 72

/* magic, then bytes, entries, hits, misses, writes, evictions, repairs,
 * flags (bit 0: bytes and entries are known) */
static void counters_parse(const uint8_t *b, ssize_t n, kc__store_counters *c) {
  memset(c, 0, sizeof *c);
  if (n != KC__COUNTERS_SIZE || memcmp(b, KC__COUNTERS_MAGIC, 8)) return;
  uint64_t *f[] = {&c->bytes, &c->entries, &c->hits, &c->misses, &c->writes, &c->evictions, &c->repairs};
  for (int i = 0; i < 7; i++) *f[i] = kc__rd64(b + 8 + 8 * i);
  c->valid = true;
  c->sized = kc__rd64(b + 64) & 1;
}

void kc__store_counters_read(const char *vdir, kc__store_counters *out) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stats", vdir);
  memset(out, 0, sizeof *out);
  int fd = fo_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return;
  uint8_t b[KC__COUNTERS_SIZE];
  flock(fd, LOCK_SH);
  ssize_t n = fo_pread(fd, b, sizeof b, 0);
  flock(fd, LOCK_UN);
  close(fd);
  counters_parse(b, n, out);
}

static uint64_t add_clamped(uint64_t v, int64_t d) {
  if (d < 0 && (uint64_t)(-d) > v) return 0;
  return v + (uint64_t)d;
}

bool kc__store_counters_add(const char *vdir, int64_t bytes, int64_t entries, uint64_t hits,
                            uint64_t misses, uint64_t writes, uint64_t evictions, uint64_t repairs,
                            bool set, kc__store_counters *now) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stats", vdir);
  kc__store_counters c;
  memset(&c, 0, sizeof c);
  int fd = fo_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (now) *now = c;
    return false;
  }
  uint8_t b[KC__COUNTERS_SIZE];
  flock(fd, LOCK_EX);
  counters_parse(b, fo_pread(fd, b, sizeof b, 0), &c);
  if (set) {
    c.bytes = (uint64_t)bytes;
    c.entries = (uint64_t)entries;
  } else {
    c.bytes = add_clamped(c.bytes, bytes);
    c.entries = add_clamped(c.entries, entries);
  }
  c.hits += hits;
  c.misses += misses;
  c.writes += writes;
  c.evictions += evictions;
  c.repairs += repairs;
  memcpy(b, KC__COUNTERS_MAGIC, 8);
  uint64_t f[] = {c.bytes, c.entries, c.hits, c.misses, c.writes, c.evictions, c.repairs};
  for (int i = 0; i < 7; i++) kc__le64(b + 8 + 8 * i, f[i]);
  /* bytes and entries are known only if they were (or a scan sets them) */
  c.sized = c.sized || set;
  kc__le64(b + 64, c.sized ? 1 : 0);
  bool ok = fo_pwrite(fd, b, sizeof b, 0) == (ssize_t)sizeof b;
  flock(fd, LOCK_UN);
  close(fd);
  c.valid = ok;
  if (now) *now = c;
  return ok;
}

/* ----------------------------------------------------------- entry format */

static void meta_kv(obuf *b, const char *k, const char *v) {
  if (!v) v = "";
  size_t kl = strlen(k), vl = strlen(v) + 1;
  ob_u32(b, (uint32_t)kl);
  ob_u32(b, (uint32_t)vl);
  ob_put(b, k, kl);
  ob_put(b, v, vl);
}

static void meta_u64(obuf *b, const char *k, uint64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%llu", (unsigned long long)v);
  meta_kv(b, k, s);
}

static void defs_encode(obuf *b, const kc__key_def *defs, uint32_t n) {
  ob_u32(b, n);
  for (uint32_t i = 0; i < n; i++) {
    size_t nl = strlen(defs[i].name) + 1;
    ob_u32(b, (uint32_t)nl);
    ob_put(b, defs[i].name, nl);
    ob_u64(b, defs[i].len + 1);
    ob_put(b, defs[i].text, defs[i].len);
    ob_put(b, "", 1);
  }
}

/* The file image of e; the DEFS section from defs_blob if given. */
static kc_status encode(kc_runtime *rt, const kc__entry *e, const void *defs_blob, size_t defs_len,
                        void **out, size_t *size) {
  obuf b = {.rt = rt};
  uint8_t zero[KC__STORE_HEADER] = {0};
  ob_put(&b, zero, sizeof zero);

  size_t at = ob_section(&b, KC__SEC_META);
  meta_kv(&b, "backend", e->backend);
  meta_kv(&b, "identity", e->identity);
  meta_kv(&b, "options", e->options);
  meta_kv(&b, "params", e->params);
  meta_kv(&b, "entry", e->entry);
  meta_kv(&b, "library", e->library);
  meta_u64(&b, "created_ns", e->created_ns);
  meta_u64(&b, "compile_ns", e->compile_ns);
  char hex[33];
  kc__store_hex(e->tu_hash, hex);
  meta_kv(&b, "tu_hash", hex);
  ob_section_end(&b, at);

  at = ob_section(&b, KC__SEC_DEFS);
  if (defs_blob) ob_put(&b, defs_blob, defs_len);
  else defs_encode(&b, e->defs, e->ndefs);
  ob_section_end(&b, at);

  at = ob_section(&b, KC__SEC_LOG);
  ob_put(&b, e->log ? e->log : "", e->log ? e->log_len : 0);
  ob_put(&b, "", 1);
  ob_section_end(&b, at);

  at = ob_section(&b, KC__SEC_SIG);
  ob_u32(&b, e->nsig);
  for (uint32_t i = 0; i < e->nsig; i++) ob_u64(&b, e->sig[i]);
  ob_section_end(&b, at);

  at = ob_section(&b, KC__SEC_ARTIFACT);
  ob_put(&b, e->artifact, e->artifact_size);
  ob_section_end(&b, at);

  if (b.failed) {
    kc__xfree(rt, b.p);
    return kc__err(rt, KC_ENOMEM, "out of memory encoding a disk cache entry");
  }
  uint8_t *h = b.p;
  memcpy(h, KC__STORE_MAGIC, 8);
  kc__le32(h + 8, KC__STORE_FORMAT);
  kc__le32(h + 12, KC__STORE_HEADER);
  memcpy(h + 16, e->key, 16);
  kc__le64(h + 32, b.len - KC__STORE_HEADER);
  kc__le64(h + 40, XXH3_64bits(h + KC__STORE_HEADER, b.len - KC__STORE_HEADER));
  kc__le64(h + 48, 0);
  kc__le64(h + 56, XXH3_64bits(h, 56));
  *out = b.p;
  *size = b.len;
  return KC_OK;
}

kc_status kc__entry_encode(kc_runtime *rt, const kc__entry *e, void **out, size_t *size) {
  return encode(rt, e, NULL, 0, out, size);
}

static bool meta_parse(kc__entry *e, const uint8_t *p, size_t n, char *why, size_t wl) {
  size_t off = 0;
  while (off < n) {
    if (n - off < 8) {
      snprintf(why, wl, "truncated metadata");
      return false;
    }
    uint32_t kl = kc__rd32(p + off), vl = kc__rd32(p + off + 4);
    off += 8;
    if (kl > n - off || vl > n - off - kl || vl == 0 || p[off + kl + vl - 1] != 0) {
      snprintf(why, wl, "malformed metadata");
      return false;
    }
    const char *k = (const char *)p + off, *v = (const char *)p + off + kl;
    off += kl + vl;
#define KC__IS(name) (kl == sizeof name - 1 && !memcmp(k, name, kl))
    if (KC__IS("backend")) e->backend = v;
    else if (KC__IS("identity")) e->identity = v;
    else if (KC__IS("options")) e->options = v;
    else if (KC__IS("params")) e->params = v;
    else if (KC__IS("entry")) e->entry = v;
    else if (KC__IS("library")) e->library = v;
    else if (KC__IS("created_ns")) e->created_ns = strtoull(v, NULL, 10);
    else if (KC__IS("compile_ns")) e->compile_ns = strtoull(v, NULL, 10);
    else if (KC__IS("tu_hash")) kc__store_unhex(v, e->tu_hash);
#undef KC__IS
  }
  if (!e->backend || !e->identity || !e->options || !e->params || !e->entry || !e->library) {
    snprintf(why, wl, "metadata incomplete");
    return false;
  }
  return true;
}

static bool defs_parse(kc_runtime *rt, kc__entry *e, const uint8_t *p, size_t n, char *why, size_t wl,
                       bool *oom) {
  if (n < 4) goto bad;
  uint32_t cnt = kc__rd32(p);
  size_t off = 4;
  if (cnt > (n - 4) / 14) goto bad; /* each takes at least 14 bytes */
  e->defs = kc__xalloc(rt, (cnt ? cnt : 1) * sizeof *e->defs);
  if (!e->defs) {
    snprintf(why, wl, "out of memory");
    *oom = true;
    return false;
  }
  for (uint32_t i = 0; i < cnt; i++) {
    if (n - off < 4) goto bad;
    uint32_t nl = kc__rd32(p + off);
    off += 4;
    if (nl == 0 || nl > n - off || p[off + nl - 1] != 0) goto bad;
    const char *name = (const char *)p + off;
    off += nl;
    if (n - off < 8) goto bad;
    uint64_t tl = kc__rd64(p + off);
    off += 8;
    if (tl == 0 || tl > n - off || p[off + tl - 1] != 0) goto bad;
    e->defs[i] = (kc__key_def){name, (const char *)p + off, (size_t)tl - 1};
    off += tl;
  }
  e->ndefs = cnt;
  if (off == n) return true;
bad:
  snprintf(why, wl, "malformed closure section");
  return false;
}

kc_status kc__entry_decode(kc_runtime *rt, void *buf, size_t size, kc__entry *e, char *why, size_t wl) {
  char local[128];
  if (!why || !wl) {
    why = local;
    wl = sizeof local;
  }
  memset(e, 0, sizeof *e);
  e->buf = buf;
  e->size = size;
  const uint8_t *b = buf;
  bool oom = false; /* the entry may be sound: not damage */
#define KC__BAD(...)                    \
  do {                                  \
    snprintf(why, wl, __VA_ARGS__);     \
    goto bad;                           \
  } while (0)
  if (size == 0) KC__BAD("empty file");
  if (size < KC__STORE_HEADER) KC__BAD("truncated header (%zu bytes)", size);
  if (memcmp(b, KC__STORE_MAGIC, 8)) KC__BAD("not a kcache entry (bad magic)");
  if (kc__rd64(b + 56) != XXH3_64bits(b, 56)) KC__BAD("header checksum mismatch");
  e->format = kc__rd32(b + 8);
  if (e->format != KC__STORE_FORMAT) KC__BAD("format version %u, expected %u", e->format, KC__STORE_FORMAT);
  if (kc__rd32(b + 12) != KC__STORE_HEADER) KC__BAD("unexpected header size %u", kc__rd32(b + 12));
  memcpy(e->key, b + 16, 16);
  uint64_t plen = kc__rd64(b + 32);
  if (plen > size - KC__STORE_HEADER)
    KC__BAD("truncated payload (%zu of %llu bytes)", size - KC__STORE_HEADER, (unsigned long long)plen);
  if (plen < size - KC__STORE_HEADER)
    KC__BAD("%llu bytes after the payload", (unsigned long long)(size - KC__STORE_HEADER - plen));
  if (XXH3_64bits(b + KC__STORE_HEADER, plen) != kc__rd64(b + 40)) KC__BAD("payload checksum mismatch");

  unsigned seen = 0;
  for (size_t off = KC__STORE_HEADER; off < size;) {
    if (size - off < 16) KC__BAD("truncated section header");
    uint32_t tag = kc__rd32(b + off);
    uint64_t len = kc__rd64(b + off + 8);
    off += 16;
    if (len > size - off) KC__BAD("section %u overruns the file", tag);
    const uint8_t *p = b + off;
    off += len;
    if (tag >= KC__SEC_META && tag <= KC__SEC_ARTIFACT) {
      if (seen & (1u << tag)) KC__BAD("section %u appears twice", tag);
      seen |= 1u << tag;
    }
    switch (tag) {
    case KC__SEC_META:
      if (!meta_parse(e, p, len, why, wl)) goto bad;
      break;
    case KC__SEC_DEFS:
      if (!defs_parse(rt, e, p, len, why, wl, &oom)) goto bad;
      break;
    case KC__SEC_LOG:
      if (len == 0 || p[len - 1] != 0) KC__BAD("malformed build log");
      e->log = (const char *)p;
      e->log_len = len - 1;
      break;
    case KC__SEC_SIG: {
      if (len < 4 || (len - 4) % 8 || (len - 4) / 8 != kc__rd32(p)) KC__BAD("malformed signature");
      e->nsig = kc__rd32(p);
      e->sig = kc__xalloc(rt, (e->nsig ? e->nsig : 1) * sizeof *e->sig);
      oom = !e->sig;
      if (oom) KC__BAD("out of memory");
      for (uint32_t i = 0; i < e->nsig; i++) e->sig[i] = kc__rd64(p + 4 + 8 * i);
      break;
    }
    case KC__SEC_ARTIFACT:
      e->artifact = p;
      e->artifact_size = len;
      break;
    default: /* a later writer's addition: ignored */
      break;
    }
  }
  unsigned need = 1u << KC__SEC_META | 1u << KC__SEC_DEFS | 1u << KC__SEC_LOG | 1u << KC__SEC_SIG |
                  1u << KC__SEC_ARTIFACT;
  if ((seen & need) != need) KC__BAD("a section is missing");
#undef KC__BAD
  return KC_OK;
bad:
  kc__entry_free(rt, e);
  return oom ? KC_ENOMEM : KC_EIO;
}

void kc__entry_free(kc_runtime *rt, kc__entry *e) {
  if (!e) return;
  kc__xfree(rt, e->defs);
  kc__xfree(rt, e->sig);
  kc__xfree(rt, e->buf);
  memset(e, 0, sizeof *e);
}

/* Opens and decodes path. On success *fd (if fd) stays open for the
 * caller; *st describes the file whenever it could be opened.
 * KC_ENOTFOUND: no file. KC_EUNAVAILABLE: it could not be read (left
 * alone). KC_EIO: it is damaged (why says how). */
static kc_status entry_load(kc_runtime *rt, const char *path, const uint8_t *want_key, kc__entry *e,
                            char *why, size_t wl, struct stat *st, int *fd_out) {
  memset(e, 0, sizeof *e);
  int fd = fo_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, wl, "cannot open: %s", strerror(errno));
    return errno == ENOENT ? KC_ENOTFOUND : KC_EUNAVAILABLE;
  }
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    snprintf(why, wl, "not a regular file");
    close(fd);
    return KC_EUNAVAILABLE;
  }
  if ((uint64_t)st->st_size > KC__STORE_MAX_ENTRY) {
    snprintf(why, wl, "implausibly large (%lld bytes)", (long long)st->st_size);
    close(fd);
    return KC_EIO;
  }
  size_t size = (size_t)st->st_size;
  uint8_t *buf = kc__xalloc(rt, size ? size : 1);
  if (!buf) {
    snprintf(why, wl, "out of memory");
    close(fd);
    return KC_EUNAVAILABLE;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = fo_pread(fd, buf + got, size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      snprintf(why, wl, "read error: %s", strerror(errno));
      kc__xfree(rt, buf);
      close(fd);
      return KC_EUNAVAILABLE;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  kc_status s = kc__entry_decode(rt, buf, got, e, why, wl);
  if (s == KC_ENOMEM) s = KC_EUNAVAILABLE; /* not the file's fault: left alone */
  if (!s && want_key && memcmp(e->key, want_key, 16)) {
    char hex[33];
    kc__store_hex(e->key, hex);
    snprintf(why, wl, "holds key %s, not the key of its name", hex);
    kc__entry_free(rt, e);
    s = KC_EIO;
  }
  if (s || !fd_out) close(fd);
  else *fd_out = fd;
  return s;
}

kc_status kc__entry_read(kc_runtime *rt, const char *path, const uint8_t *want_key, kc__entry *out,
                         char *why, size_t whylen) {
  char local[128];
  if (!why || !whylen) {
    why = local;
    whylen = sizeof local;
  }
  struct stat st;
  return entry_load(rt, path, want_key, out, why, whylen, &st, NULL);
}

/* The header of an entry image of `total` bytes and the header of its META
 * section (h: the first KC__STORE_HEADER + 16 bytes). exact: the payload
 * must fill the image (a file), else fit in it (a prefix read from Redis).
 * Returns the metadata's length, or -1 with why. */
static int64_t image_header(const uint8_t *h, uint64_t total, bool exact, char *why, size_t wl) {
  uint64_t room = total - KC__STORE_HEADER; /* total >= KC__STORE_HEADER + 16: checked by callers */
  if (memcmp(h, KC__STORE_MAGIC, 8)) {
    snprintf(why, wl, "not a kcache entry (bad magic)");
  } else if (kc__rd64(h + 56) != XXH3_64bits(h, 56)) {
    snprintf(why, wl, "header checksum mismatch");
  } else if (kc__rd32(h + 8) != KC__STORE_FORMAT) {
    snprintf(why, wl, "format version %u, expected %u", kc__rd32(h + 8), KC__STORE_FORMAT);
  } else if (exact ? kc__rd64(h + 32) != room : kc__rd64(h + 32) > room) {
    snprintf(why, wl, "payload length %llu, but the image holds %llu", (unsigned long long)kc__rd64(h + 32),
             (unsigned long long)room);
  } else if (kc__rd32(h + KC__STORE_HEADER) != KC__SEC_META || kc__rd64(h + KC__STORE_HEADER + 8) > room - 16) {
    snprintf(why, wl, "malformed metadata");
  } else {
    return (int64_t)kc__rd64(h + KC__STORE_HEADER + 8);
  }
  return -1;
}

/* Parses the metadata m (len bytes, malloc'd; e owns it on success) of the
 * entry image whose header is h and size total. */
static kc_status image_meta(const uint8_t *h, uint8_t *m, size_t len, size_t total, kc__entry *e, char *why,
                            size_t wl) {
  if (!meta_parse(e, m, len, why, wl)) {
    free(m);
    memset(e, 0, sizeof *e);
    return KC_EIO;
  }
  e->buf = m;
  e->size = total;
  e->format = KC__STORE_FORMAT;
  memcpy(e->key, h + 16, 16);
  return KC_OK;
}

kc_status kc__entry_peek(const char *path, kc__entry *e, char *why, size_t wl) {
  char local[128];
  if (!why || !wl) {
    why = local;
    wl = sizeof local;
  }
  memset(e, 0, sizeof *e);
  int fd = fo_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, wl, "cannot open: %s", strerror(errno));
    return errno == ENOENT ? KC_ENOTFOUND : KC_EUNAVAILABLE;
  }
  struct stat st;
  uint8_t h[KC__STORE_HEADER + 16];
  kc_status s = KC_EIO;
  int64_t len = -1;
  ssize_t n = fstat(fd, &st) == 0 ? fo_pread(fd, h, sizeof h, 0) : -1;
  if (n < 0) {
    snprintf(why, wl, "cannot read: %s", strerror(errno));
    s = KC_EUNAVAILABLE;
  } else if (n == 0) {
    snprintf(why, wl, "empty file");
  } else if (n < (ssize_t)sizeof h) {
    snprintf(why, wl, "truncated (%zd bytes)", n);
  } else if ((uint64_t)st.st_size > KC__STORE_MAX_ENTRY) {
    snprintf(why, wl, "larger than any entry (%llu bytes)", (unsigned long long)st.st_size);
  } else if ((len = image_header(h, (uint64_t)st.st_size, true, why, wl)) >= 0) {
    uint8_t *m = malloc(len ? (size_t)len : 1);
    if (!m) {
      snprintf(why, wl, "out of memory");
      s = KC_EUNAVAILABLE;
    } else if (fo_pread(fd, m, (size_t)len, sizeof h) != (ssize_t)len) {
      snprintf(why, wl, "truncated metadata");
      free(m);
    } else {
      s = image_meta(h, m, (size_t)len, (size_t)st.st_size, e, why, wl);
    }
  }
  close(fd);
  return s;
}

/* Removes path if it is still the file we looked at (a writer may have
 * renamed a good entry over it meanwhile). */
static bool remove_if_same(const char *path, const struct stat *seen) {
  struct stat now;
  if (stat(path, &now) != 0 || now.st_ino != seen->st_ino || now.st_dev != seen->st_dev) return false;
  return unlink(path) == 0;
}

/* ------------------------------------------------------------ listing */

static bool entry_name(const char *name, uint8_t key[16]) {
  return strlen(name) == 36 && !strcmp(name + 32, ".kce") && unhex_n(name, key);
}

kc_status kc__store_list(kc_runtime *rt, const char *vdir, kc__store_file **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t cap = 0;
  for (int bucket = 0; bucket < 256; bucket++) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    DIR *d = opendir(dir);
    if (!d) continue;
    for (struct dirent *de; (de = readdir(d));) {
      uint8_t key[16];
      if (!entry_name(de->d_name, key)) continue;
      kc__store_file f;
      memset(&f, 0, sizeof f);
      if (snprintf(f.path, sizeof f.path, "%s/%s", dir, de->d_name) >= (int)sizeof f.path) continue;
      struct stat st;
      if (lstat(f.path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      memcpy(f.key, key, 16);
      f.size = (uint64_t)st.st_size;
      f.mtime_ns = mtime_ns(&st);
      f.misplaced = key[0] != bucket;
      if (*n == cap) {
        cap = cap ? cap * 2 : 256;
        kc__store_file *nf = kc__xrealloc(rt, *out, cap * sizeof *nf);
        if (!nf) {
          closedir(d);
          kc__xfree(rt, *out);
          *out = NULL;
          *n = 0;
          return kc__err(rt, KC_ENOMEM, "out of memory listing %s", vdir);
        }
        *out = nf;
      }
      (*out)[(*n)++] = f;
    }
    closedir(d);
  }
  return KC_OK;
}

void kc__store_list_free(kc_runtime *rt, kc__store_file *files) { kc__xfree(rt, files); }

/* Removes temp files of dead writers and lock files of dead compiles. */
static void sweep_aux(const char *vdir, kc__gc_result *r) {
  int64_t now = (int64_t)realtime_ns();
  for (int bucket = 0; bucket < 256; bucket++) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    DIR *d = opendir(dir);
    if (!d) continue;
    for (struct dirent *de; (de = readdir(d));) {
      char path[PATH_MAX];
      bool temp = !strncmp(de->d_name, ".tmp-", 5);
      size_t nl = strlen(de->d_name);
      bool lock = nl > 5 && !strcmp(de->d_name + nl - 5, ".lock");
      if (!temp && !lock) continue;
      if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path) continue;
      struct stat st;
      if (lstat(path, &st) != 0) continue;
      if (temp) {
        if (now - mtime_ns(&st) > (int64_t)KC__STALE_TEMP_NS && unlink(path) == 0) r->temps_removed++;
        continue;
      }
      if (now - mtime_ns(&st) <= (int64_t)KC__STALE_LOCK_NS) continue;
      /* Unlinked while held, like a finishing holder does: a waiter that
       * gets this inode sees that it is gone and locks a new file. */
      int fd = fo_open(path, O_RDWR | O_CLOEXEC, 0);
      if (fd < 0) continue;
      if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        if (remove_if_same(path, &st)) r->locks_removed++;
        flock(fd, LOCK_UN);
      }
      close(fd);
    }
    closedir(d);
  }
}

static int by_last_use(const void *a, const void *b) {
  const kc__store_file *x = a, *y = b;
  if (x->mtime_ns != y->mtime_ns) return x->mtime_ns < y->mtime_ns ? -1 : 1;
  return strcmp(x->path, y->path);
}

kc_status kc__store_gc(kc_runtime *rt, const char *vdir, uint64_t target, bool wait,
                       kc__progress_fn progress, void *ud, kc__gc_result *out) {
  kc__gc_result r;
  memset(&r, 0, sizeof r);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/gc.lock", vdir);
  int lfd = fo_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lfd < 0) return kc__err(rt, KC_EIO, "cannot open %s: %s", path, strerror(errno));
  while (flock(lfd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    close(lfd);
    return errno == EWOULDBLOCK ? KC_EBUSY : kc__err(rt, KC_EIO, "cannot lock %s: %s", path, strerror(errno));
  }
  sweep_aux(vdir, &r);
  kc__store_file *files;
  size_t n;
  kc_status st = kc__store_list(rt, vdir, &files, &n);
  if (st) {
    flock(lfd, LOCK_UN);
    close(lfd);
    return st;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += files[i].size;
  r.entries_before = n;
  r.bytes_before = total;
  qsort(files, n, sizeof *files, by_last_use);
  uint64_t left = n;
  for (size_t i = 0; i < n && total > target; i++) {
    if (progress) progress(ud, i + 1, n);
    if (unlink(files[i].path) == 0) {
      total -= files[i].size;
      left--;
      r.evicted++;
      r.evicted_bytes += files[i].size;
    }
  }
  if (progress && n) progress(ud, n, n);
  kc__store_list_free(rt, files);
  r.entries_after = left;
  r.bytes_after = total;
  kc__store_counters_add(vdir, (int64_t)total, (int64_t)left, 0, 0, 0, r.evicted, 0, true, NULL);
  flock(lfd, LOCK_UN);
  close(lfd);
  if (out) *out = r;
  return KC_OK;
}

/* --------------------------------------------------------------- store */

static void KC__PRINTF(2, 3) warn_once(kc__store *s, const char *fmt, ...) {
  if (s && atomic_exchange(&s->warned, 1)) return;
  va_list ap;
  va_start(ap, fmt);
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "kcache: warning: %s\n", msg);
}

void kc__store_open(kc_runtime *rt) {
  rt->store = NULL;
  const char *off = getenv("KC_CACHE_DISABLE");
  if (rt->opt.cache_disable || (off && *off && strcmp(off, "0") != 0)) return;
  char root[PATH_MAX], vdir[PATH_MAX];
  if (rt->cache_dir && *rt->cache_dir) {
    snprintf(root, sizeof root, "%s", rt->cache_dir);
  } else if (!kc__store_default_root(root, sizeof root)) {
    warn_once(NULL, "no directory for the disk cache (set KC_CACHE_DIR, XDG_CACHE_HOME or HOME); "
                    "compiled kernels are kept in memory only");
    return;
  }
  uint64_t max = rt->opt.cache_max_size;
  if (!max && !kc__store_env_max_size(&max))
    warn_once(NULL, "KC_CACHE_MAXSIZE=\"%s\" is not a size (e.g. 500M, 2G); using 1G",
              getenv("KC_CACHE_MAXSIZE"));
  uint32_t lock_ms = rt->opt.cache_lock_timeout_ms;
  const char *env = getenv("KC_CACHE_LOCK_TIMEOUT");
  if (!lock_ms) {
    lock_ms = KC__STORE_DEFAULT_LOCK_MS;
    if (env && *env) {
      char *end;
      double secs = strtod(env, &end);
      if (end != env && !*end && secs >= 0 && secs < 4e6) lock_ms = (uint32_t)(secs * 1000);
      else warn_once(NULL, "KC_CACHE_LOCK_TIMEOUT=\"%s\" is not a number of seconds; using 60", env);
    }
  }
  kc__store_vdir(root, vdir, sizeof vdir);
  int err = 0;
  if (!make_dirs(vdir, &err)) {
    warn_once(NULL, "cannot use %s as the disk cache (%s); compiled kernels are kept in memory only",
              root, strerror(err));
    return;
  }
  kc__store *s = kc__calloc(rt, sizeof *s);
  if (!s || !(s->root = kc__strdup(rt, root)) || !(s->vdir = kc__strdup(rt, vdir)) ||
      !kc__mutex_init(&s->probe_lock)) {
    if (s) {
      kc__free(rt, s->root);
      kc__free(rt, s->vdir);
      kc__free(rt, s);
    }
    warn_once(NULL, "out of memory opening the disk cache; compiled kernels are kept in memory only");
    return;
  }
  s->max_size = max;
  s->lock_ms = lock_ms;
  atomic_init(&s->writable, 1);
  s->remote = kc__remote_open(rt, s->vdir); /* NULL: none, or unusable (warned) */
  rt->store = s;
}

void kc__store_close(kc_runtime *rt) {
  kc__store *s = rt->store;
  if (!s) return;
  kc__remote_close(s->remote); /* finishes its uploads first */
  if (s->probe_state == 1) rt->be->ctx_destroy(s->probe_bctx);
  kc__mutex_destroy(&s->probe_lock);
  kc__free(rt, s->root);
  kc__free(rt, s->vdir);
  kc__free(rt, s);
  rt->store = NULL;
}

/* A write failed: say so once, and stop writing (reads go on). */
static void write_failed(kc__store *s, const char *what, const char *path, int err) {
  kc__fetch_add_relaxed(&s->write_failures, 1);
  kc__store_relaxed(&s->writable, 0);
  warn_once(s,
            "cannot write to the disk cache in %s (%s %s: %s); compiled kernels are kept in memory "
            "only from now on (entries already there are still used)",
            s->root, what, path, strerror(err));
}

static bool ensure_bucket(kc__store *s, const uint8_t key[16]) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/%02x", s->vdir, key[0]);
  int err = injected_failure();
  if (!err && (mkdir(dir, 0755) == 0 || errno == EEXIST)) return true;
  write_failed(s, "creating", dir, err ? err : errno);
  return false;
}

/* Loads ci's artifact into a scratch context of the backend: a stored
 * artifact is trusted only once the backend has accepted it. The engine
 * links after ci_get, too late to fall back to a compile. The source is
 * hidden meanwhile (ci is not published yet): a backend that rebuilds
 * from source when it rejects a binary (OpenCL) must say that it rejected
 * it, or a bad entry would cost every process a compile, forever. KC_OK:
 * accepted (or no probe is possible); KC_ENOMEM: the backend ran out of
 * memory and could not tell; anything else: refused. */
static kc_status probe_link(kc_runtime *rt, kc__store *s, kc__ci *ci) {
  const kc__backend *be = rt->be;
  if (!be->ctx_create || !be->link || !be->unlink) return KC_OK;
  kc__lock(&s->probe_lock);
  if (s->probe_state == 0) {
    kc_status st = be->ctx_create(rt->bstate, 0, &s->probe_bctx);
    if (st == KC_ENOMEM) { /* passing: could not tell now, ask again next time */
      kc__unlock(&s->probe_lock);
      return KC_ENOMEM;
    }
    s->probe_state = st ? -1 : 1;
  }
  kc_status ok = KC_OK;
  if (s->probe_state == 1) {
    char *source = ci->source;
    ci->source = NULL;
    kc__linked l;
    memset(&l, 0, sizeof l);
    atomic_init(&l.link_key, 0);
    l.ci = ci;
    l.bctx = s->probe_bctx;
    l.nargs = ci->nparams;
    l.sig = ci->sig;
    ok = be->link(s->probe_bctx, ci, &l);
    if (ok == KC_OK) be->unlink(&l);
    ci->source = source;
  }
  kc__unlock(&s->probe_lock);
  return ok;
}

/* Whether the decoded entry e is one that ci can use: the same kernel,
 * backend and signature, and an artifact the backend loads. Then ci gets
 * the artifact (a copy) and the signature. *oom: it could not tell. Shared
 * by the disk and the remote tier, so that both trust entries alike. */
static bool entry_use(kc_runtime *rt, kc__store *s, kc__ci *ci, const kc__entry *e, bool *oom) {
  if (e->nsig != ci->nparams || strcmp(e->entry, ci->spec->name) || strcmp(e->backend, rt->be->name) ||
      !e->artifact_size)
    return false;
  void *art = kc__alloc(rt, e->artifact_size);
  if (!art) {
    *oom = true;
    return false;
  }
  memcpy(art, e->artifact, e->artifact_size);
  uint64_t *mine = ci->sig;
  ci->artifact = art;
  ci->artifact_size = e->artifact_size;
  ci->sig = e->sig;
  kc_status probe = probe_link(rt, s, ci);
  bool good = probe == KC_OK;
  *oom = probe == KC_ENOMEM; /* the backend ran out of memory: not the entry's fault */
  ci->sig = mine;
  if (good) {
    memcpy(ci->sig, e->sig, e->nsig * sizeof *e->sig);
  } else {
    kc__free(rt, art);
    ci->artifact = NULL;
    ci->artifact_size = 0;
  }
  return good;
}

/* One look at the entry of key. True (and ci filled) on a good entry; a
 * damaged one is removed and counted as a repair. */
static bool lookup(kc_runtime *rt, kc__store *s, kc__ci *ci, const uint8_t key[16]) {
  char path[PATH_MAX], why[256];
  kc__store_path(s->vdir, key, ".kce", path, sizeof path);
  kc__entry e;
  struct stat st;
  int fd = -1;
  kc_status r = entry_load(rt, path, key, &e, why, sizeof why, &st, &fd);
  if (r == KC_ENOTFOUND || r == KC_EUNAVAILABLE) return false;
  bool good = r == KC_OK;
  if (good) {
    bool oom = false;
    good = entry_use(rt, s, ci, &e, &oom);
    if (oom) {
      kc__entry_free(rt, &e);
      close(fd);
      return false; /* not the entry's fault */
    }
    if (good) futimens(fd, NULL); /* last use, for eviction; fails harmlessly when read-only */
    kc__entry_free(rt, &e);
    close(fd);
  }
  if (good) return true;
  kc__fetch_add_relaxed(&s->repairs, 1);
  bool removed = kc__load_relaxed(&s->writable) && remove_if_same(path, &st);
  kc__store_counters_add(s->vdir, removed ? -(int64_t)st.st_size : 0, removed ? -1 : 0, 0, 0, 0, 0, 1,
                         false, NULL);
  return false;
}

static void key_lock(kc__store *s, kc__store_txn *txn) {
  char path[PATH_MAX];
  kc__store_path(s->vdir, txn->key, ".lock", path, sizeof path);
  if (!ensure_bucket(s, txn->key)) return;
  uint64_t deadline = kc__now_ns() + (uint64_t)s->lock_ms * 1000000u;
  for (;;) {
    int err = injected_failure();
    int fd = err ? -1 : fo_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      write_failed(s, "creating", path, err ? err : errno);
      return;
    }
    long nap = 200;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) { /* no flock here (some network file systems) */
        close(fd);
        return;
      }
      if (kc__now_ns() >= deadline) { /* the holder is stuck: compile without it */
        kc__fetch_add_relaxed(&s->lock_timeouts, 1);
        close(fd);
        return;
      }
      nap_us(nap);
      if (nap < 20000) nap *= 2;
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      txn->lock_fd = fd;
      return;
    }
    close(fd); /* the holder removed it as it finished: lock the new one */
  }
}

static void key_unlock(kc__store *s, kc__store_txn *txn) {
  if (txn->lock_fd < 0) return;
  char path[PATH_MAX];
  kc__store_path(s->vdir, txn->key, ".lock", path, sizeof path);
  unlink(path); /* while held: see key_lock */
  flock(txn->lock_fd, LOCK_UN);
  close(txn->lock_fd);
  txn->lock_fd = -1;
}

static void txn_clear(kc_runtime *rt, kc__store_txn *txn) {
  kc__free(rt, txn->defs);
  txn->defs = NULL;
  txn->active = false;
}

static bool remote_lookup(kc_runtime *rt, kc__store *s, kc__ci *ci, kc__store_txn *txn);
static void remote_after_compile(kc_runtime *rt, kc__store *s, kc__store_txn *txn, void *img, size_t size);

bool kc__store_fetch(kc_runtime *rt, kc__ci *ci, const kc__closure *c, kc__store_txn *txn) {
  memset(txn, 0, sizeof *txn);
  txn->lock_fd = -1;
  kc__store *s = rt->store;
  if (!s) return false;
  /* Without the compiler's identity (the backend ran out of memory making
   * it) no key would be right: no disk cache for this lookup. */
  const char *identity = rt->be->identity(rt->bstate);
  if (!identity) return false;
  kc__key_def few[16], *defs = c->ndefs <= 16 ? few : kc__alloc(rt, c->ndefs * sizeof *defs);
  if (!defs) return false;
  for (uint32_t i = 0; i < c->ndefs; i++)
    defs[i] = (kc__key_def){c->defs[i]->binding->name, c->defs[i]->source, c->defs[i]->len};
  kc__key_parts p = {
      .format = KC__STORE_FORMAT,
      .library = KC_VERSION_STRING,
      .backend = rt->be->name,
      .identity = identity,
      .options = rt->compile_options,
      .params = ci->spec->params,
      .entry = ci->spec->name,
      .tu = ci->source,
      .tu_len = strlen(ci->source),
      .defs = defs,
      .ndefs = c->ndefs,
  };
  kc__store_key(&p, txn->key);
  bool hit = lookup(rt, s, ci, txn->key);
  if (!hit && kc__load_relaxed(&s->writable)) {
    key_lock(s, txn);
    /* whoever held the lock may have written it meanwhile */
    hit = lookup(rt, s, ci, txn->key);
  }
  if (hit) {
    key_unlock(s, txn);
    kc__fetch_add_relaxed(&s->hits, 1);
    kc__store_counters_add(s->vdir, 0, 0, 1, 0, 0, 0, 0, false, NULL);
  } else {
    kc__fetch_add_relaxed(&s->misses, 1);
    kc__store_counters_add(s->vdir, 0, 0, 0, 1, 0, 0, 0, false, NULL);
  }
  /* Then the remote tier, still holding the key's lock: the other processes
   * here wait for what it brings (written to disk) instead of asking too. */
  bool remote_hit = !hit && s->remote && remote_lookup(rt, s, ci, txn);
  if (remote_hit) key_unlock(s, txn);
  if (!hit && !remote_hit && (kc__load_relaxed(&s->writable) || s->remote)) {
    /* The closure's text goes into the entry; copied now, while the
     * definitions are certainly alive. */
    obuf b = {.rt = rt};
    defs_encode(&b, defs, c->ndefs);
    if (!b.failed) {
      txn->defs = b.p;
      txn->defs_len = b.len;
      txn->active = true;
    } else {
      kc__xfree(rt, b.p);
    }
  }
  if (defs != few) kc__free(rt, defs);
  return hit || remote_hit;
}

/* Writes image as the entry of key: temp file, fsync, rename, fsync of
 * the directory. True if the store is now past its bound (or its size is
 * unknown): then *target is what eviction should bring it down to. */
static bool write_entry(kc__store *s, const uint8_t key[16], const uint8_t *img, size_t size,
                        uint64_t *target) {
  if (!ensure_bucket(s, key)) return false;
  static _Atomic uint64_t seq;
  char hex[33], dir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX];
  kc__store_hex(key, hex);
  snprintf(dir, sizeof dir, "%s/%.2s", s->vdir, hex);
  /* unique per process, thread and call, also in a child after fork */
  if (snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%ld-%ld-%llu", dir, hex, (long)getpid(),
               (long)syscall(SYS_gettid), (unsigned long long)kc__fetch_add_relaxed(&seq, 1)) >= (int)sizeof tmp ||
      snprintf(final, sizeof final, "%s/%s.kce", dir, hex) >= (int)sizeof final) {
    write_failed(s, "naming", dir, ENAMETOOLONG);
    return false;
  }
  int err = injected_failure();
  int fd = err ? -1 : fo_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    write_failed(s, "creating", tmp, err ? err : errno);
    return false;
  }
  const char *what = "writing";
  for (size_t done = 0; done < size;) {
    err = injected_failure();
    ssize_t w = err ? -1 : fo_write(fd, img + done, size - done);
    if (w < 0 && !err && errno == EINTR) continue;
    if (w <= 0) {
      err = err ? err : w < 0 ? errno : ENOSPC;
      goto fail;
    }
    done += (size_t)w;
  }
  what = "flushing";
  if (fo_fsync(fd) != 0) {
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
  bool replaced = stat(final, &old) == 0;
  what = "renaming";
  if (fo_rename(tmp, final) != 0) {
    err = errno;
    goto fail;
  }
  int dfd = fo_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (dfd >= 0) {
    fo_fsync(dfd);
    close(dfd);
  }
  kc__fetch_add_relaxed(&s->writes, 1);
  kc__store_counters now;
  kc__store_counters_add(s->vdir, (int64_t)size - (replaced ? (int64_t)old.st_size : 0), replaced ? 0 : 1, 0,
                         0, 1, 0, 0, false, &now);
  /* Over the bound: evict down to 90%, so that the next writes do not
   * evict again at once. Size unknown: a scan finds it out. */
  *target = now.sized ? s->max_size / 10 * 9 : s->max_size;
  return !now.sized || now.bytes > s->max_size;
fail:
  if (fd >= 0) close(fd);
  unlink(tmp);
  write_failed(s, what, tmp, err);
  return false;
}

void kc__store_finish(kc_runtime *rt, kc__store_txn *txn, kc_status st, const kc__ci *ci,
                      const kc__sb *log) {
  kc__store *s = rt->store;
  if (!s) return;
  bool evict = false;
  uint64_t target = 0;
  void *img = NULL;
  size_t size = 0;
  const char *identity = NULL;
  if (txn->active && st == KC_OK && ci->artifact && (kc__load_relaxed(&s->writable) || s->remote) &&
      (identity = rt->be->identity(rt->bstate))) {
    kc__entry e;
    memset(&e, 0, sizeof e);
    memcpy(e.key, txn->key, 16);
    e.backend = rt->be->name;
    e.identity = identity;
    e.options = rt->compile_options;
    e.params = ci->spec->params;
    e.entry = ci->spec->name;
    e.library = KC_VERSION_STRING;
    e.created_ns = realtime_ns();
    e.compile_ns = ci->compile_ns;
    kc__store_text_hash(ci->source, strlen(ci->source), e.tu_hash);
    e.nsig = ci->nparams;
    e.sig = ci->sig;
    e.artifact = ci->artifact;
    e.artifact_size = ci->artifact_size;
    e.log = log ? log->buf : NULL;
    e.log_len = log && log->buf ? log->len : 0;
    if (encode(rt, &e, txn->defs, txn->defs_len, &img, &size) != KC_OK) img = NULL;
    else if (kc__load_relaxed(&s->writable)) evict = write_entry(s, txn->key, img, size, &target);
  }
  key_unlock(s, txn); /* first: waiters read the entry while we evict */
  remote_after_compile(rt, s, txn, img, size); /* takes img */
  txn_clear(rt, txn);
  kc__gc_result r;
  /* KC_EBUSY: another thread or process is evicting; it does the work */
  if (evict && kc__store_gc(rt, s->vdir, target, false, NULL, NULL, &r) == KC_OK)
    kc__fetch_add_relaxed(&s->evictions, r.evicted);
}

void kc__store_stats(const kc_runtime *rt, kc_stats *out) {
  const kc__store *s = rt->store;
  if (!s) return;
  out->disk_hits = kc__load_relaxed(&s->hits);
  out->disk_misses = kc__load_relaxed(&s->misses);
  out->disk_writes = kc__load_relaxed(&s->writes);
  out->disk_evictions = kc__load_relaxed(&s->evictions);
  out->disk_repairs = kc__load_relaxed(&s->repairs);
  out->disk_write_failures = kc__load_relaxed(&s->write_failures);
  out->disk_lock_timeouts = kc__load_relaxed(&s->lock_timeouts);
  kc__remote_stats(s->remote, out);
}

/* ----------------------------------------------------------- public API */

const char *kc_cache_dir(const kc_runtime *rt) { return rt && rt->store ? rt->store->root : NULL; }

int kc_cache_writable(const kc_runtime *rt) {
  return rt && rt->store && kc__load_relaxed(&rt->store->writable);
}

/* ------------------------------------------------------- the remote tier */

/* The glue to remote.c: what comes from Redis is verified here exactly like
 * a file of the store, then written to disk; what was compiled goes to the
 * uploader with the lock this lookup took. */

typedef struct remote_ctx {
  kc_runtime *rt;
  kc__store *s;
  kc__ci *ci;
  const uint8_t *key;
} remote_ctx;

static void remote_write(kc_runtime *rt, void *ud, const uint8_t key[16], const void *image, size_t size) {
  kc__store *s = ud;
  uint64_t target = 0;
  kc__gc_result r;
  /* KC_EBUSY: another thread or process is evicting; it does the work */
  if (kc__load_relaxed(&s->writable) && write_entry(s, key, image, size, &target) &&
      kc__store_gc(rt, s->vdir, target, false, NULL, NULL, &r) == KC_OK)
    kc__fetch_add_relaxed(&s->evictions, r.evicted);
}

static bool remote_accept(void *ud, void *image, size_t size, char *why, size_t wl) {
  remote_ctx *x = ud;
  kc__entry e;
  if (kc__entry_decode(x->rt, image, size, &e, why, wl) != KC_OK) return false;
  if (memcmp(e.key, x->key, 16)) {
    snprintf(why, wl, "it holds the entry of another key");
    kc__entry_free(x->rt, &e);
    return false;
  }
  bool oom = false;
  bool good = entry_use(x->rt, x->s, x->ci, &e, &oom);
  if (!good)
    snprintf(why, wl, "%s", oom ? "out of memory" : "another kernel, backend or signature, or the backend refused its code");
  if (good && kc__load_relaxed(&x->s->writable)) {
    /* written to disk on the uploader thread: the launch that Redis served
     * waits neither for the fsyncs nor for an eviction */
    void *img = e.buf;
    size_t n = e.size;
    e.buf = NULL; /* ci has its own copies of the artifact and signature */
    if (!kc__remote_defer(x->s->remote, remote_write, x->s, x->key, img, n)) {
      remote_write(x->rt, x->s, x->key, img, n);
      kc__free(x->rt, img);
    }
  }
  kc__entry_free(x->rt, &e);
  return good;
}

static bool remote_lookup(kc_runtime *rt, kc__store *s, kc__ci *ci, kc__store_txn *txn) {
  remote_ctx x = {rt, s, ci, txn->key};
  return kc__remote_fetch(s->remote, txn->key, remote_accept, &x, &txn->remote_lock);
}

static void remote_after_compile(kc_runtime *rt, kc__store *s, kc__store_txn *txn, void *img, size_t size) {
  if (s->remote) kc__remote_upload(s->remote, txn->key, img, size, txn->remote_lock);
  else kc__free(rt, img);
  txn->remote_lock = 0;
}

kc_status kc__entry_peek_mem(const void *buf, size_t n, size_t total, kc__entry *e, char *why, size_t wl) {
  char local[128];
  if (!why || !wl) {
    why = local;
    wl = sizeof local;
  }
  memset(e, 0, sizeof *e);
  const uint8_t *h = buf;
  if (n < KC__STORE_HEADER + 16 || total < n) {
    snprintf(why, wl, "truncated (%zu bytes)", total);
    return KC_EIO;
  }
  int64_t len = image_header(h, total, false, why, wl);
  if (len < 0) return KC_EIO;
  if ((uint64_t)len > n - KC__STORE_HEADER - 16) {
    snprintf(why, wl, "metadata of %llu bytes: more than the %zu bytes read", (unsigned long long)len, n);
    return KC_EIO;
  }
  uint8_t *m = malloc(len ? (size_t)len : 1);
  if (!m) {
    snprintf(why, wl, "out of memory");
    return KC_EUNAVAILABLE;
  }
  memcpy(m, h + KC__STORE_HEADER + 16, (size_t)len);
  return image_meta(h, m, (size_t)len, total, e, why, wl);
}

const char *kc_remote_url(const kc_runtime *rt) {
  return rt && rt->store ? kc__remote_url_of(rt->store->remote) : NULL;
}
