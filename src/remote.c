/*
 * remote.c -- the remote tier: a Redis server shared by many machines
 * behind each machine's disk cache (see remote.h for the names and values
 * in Redis). It owns the Redis client (hiredis through dlopen, driven
 * without blocking so that every wait has a deadline), the configuration,
 * authentication of entries (HMAC-SHA256 through libcrypto, also through
 * dlopen), single flight across machines (a lock in Redis with an expiry),
 * the circuit breaker, and the uploader thread that takes uploads off the
 * launch that compiled.
 *
 * Nothing here fails the caller: a tier that does not answer is a tier
 * that misses, within the timeout; after repeated failures it is not even
 * asked for a while. What comes from the server is verified before it is
 * used: here its framing and MAC, then by the store exactly like a file.
 */

#include "remote.h"
#include "store.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A value is read with GETRANGE 0 max_entry: at most one byte more than
 * the limit ever crosses the network. Uploads queue at most this much. */
#define KC__QUEUE_JOBS 64u
#define KC__QUEUE_BYTES (256ull << 20)
/* Idle connections kept per runtime. */
#define KC__POOL_IDLE 4
/* Polls while another machine compiles: from 2 ms, doubling, up to 50 ms. */
#define KC__POLL_FIRST_NS 2000000ull
#define KC__POLL_MAX_NS 50000000ull
/* Time earned per byte moved: 20 ns, i.e. at least 50 MB/s. */
#define KC__NS_PER_BYTE 20ull

/* ---------------------------------------------------------- utilities */

static void wipe(void *p, size_t n) {
  volatile uint8_t *v = p;
  while (n--) *v++ = 0;
}

static void nap_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static uint64_t random64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = kc__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&v;
  return v ? v : 1;
}

/* ------------------------------------------------------------- hiredis */

/* The parts of hiredis' structures that kcache reads, for the two ABIs it
 * knows. 0.14 (Debian 12): the context starts with err; 1.x: with a
 * function table. 1.x replies carry dval and vtype. Only these prefixes are
 * declared; the library allocates the objects. */
typedef struct hr_ctx0 {
  int err;
  char errstr[128];
  int fd;
  int flags;
} hr_ctx0;
typedef struct hr_ctx1 {
  const void *funcs;
  int err;
  char errstr[128];
  int fd;
  int flags;
} hr_ctx1;
typedef struct hr_reply0 {
  int type;
  long long integer;
  size_t len;
  char *str;
  size_t elements;
  struct hr_reply0 **element;
} hr_reply0;
typedef struct hr_reply1 {
  int type;
  long long integer;
  double dval;
  size_t len;
  char *str;
  char vtype[4];
  size_t elements;
  struct hr_reply1 **element;
} hr_reply1;

static struct {
  void *(*connect_nb)(const char *ip, int port);
  void *(*connect_fd)(int fd);
  void (*free_ctx)(void *c);
  int (*append_argv)(void *c, int argc, const char **argv, const size_t *lens);
  int (*buffer_write)(void *c, int *done);
  int (*buffer_read)(void *c);
  int (*get_reply)(void *c, void **reply);
  void (*free_reply)(void *r);
  void *(*reader_create)(void);
  int (*reader_feed)(void *r, const char *buf, size_t len);
  int (*reader_get_reply)(void *r, void **reply);
  void (*reader_free)(void *r);
  int abi; /* 0: 0.14, 1: 1.x */
  char name[300];
  const char *why;
  char whybuf[600];
} hr;
static kc__once hr_once = KC__ONCE_INIT;

#define HR_CTX(c, f) (hr.abi ? ((hr_ctx1 *)(c))->f : ((hr_ctx0 *)(c))->f)

typedef struct hr_view {
  int type;
  long long integer;
  size_t len;
  const char *str;
  size_t elements;
  void **element;
} hr_view;

static hr_view hr_reply(const void *p) {
  hr_view v;
  if (hr.abi) {
    const hr_reply1 *r = p;
    v = (hr_view){r->type, r->integer, r->len, r->str, r->elements, (void **)r->element};
  } else {
    const hr_reply0 *r = p;
    v = (hr_view){r->type, r->integer, r->len, r->str, r->elements, (void **)r->element};
  }
  return v;
}

/* Checks that the structures above match the library: a reply parsed by
 * its own reader, and a context made on a socket pair. */
static bool hr_abi_ok(void) {
  void *rd = hr.reader_create();
  if (!rd) return false;
  static const char wire[] = "*2\r\n$3\r\nabc\r\n:42\r\n";
  void *reply = NULL;
  bool ok = hr.reader_feed(rd, wire, sizeof wire - 1) == 0 && hr.reader_get_reply(rd, &reply) == 0 && reply;
  if (ok) {
    hr_view a = hr_reply(reply);
    ok = a.type == KC__R_ARRAY && a.elements == 2 && a.element;
    if (ok) {
      hr_view s = hr_reply(a.element[0]), i = hr_reply(a.element[1]);
      ok = s.type == KC__R_STRING && s.len == 3 && s.str && !memcmp(s.str, "abc", 4) && i.type == KC__R_INTEGER &&
           i.integer == 42;
    }
  }
  if (reply) hr.free_reply(reply);
  hr.reader_free(rd);
  if (!ok) return false;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return true; /* cannot tell: trust the reply */
  void *c = hr.connect_fd(sv[0]);
  ok = c && HR_CTX(c, err) == 0 && HR_CTX(c, fd) == sv[0];
  if (c) hr.free_ctx(c); /* closes sv[0] */
  else close(sv[0]);
  close(sv[1]);
  return ok;
}

static bool hr_try(const char *path) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return false;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  /* only the ABIs declared above: 0.14 and 1.x (the soname says which) */
  int abi = !strncmp(base, "libhiredis.so.0.14", 18) ? 0 : !strncmp(base, "libhiredis.so.1.", 16) ? 1 : -1;
  if (abi < 0) {
    /* an unversioned name: 1.x has redisConnectWithOptions, 0.14 does not */
    abi = dlsym(dl, "redisConnectWithOptions") ? 1 : 0;
    if (strcmp(base, "libhiredis.so") != 0) {
      snprintf(hr.whybuf, sizeof hr.whybuf, "%s is a hiredis version whose ABI kcache does not know (0.14 and 1.x are)",
               path);
      dlclose(dl);
      return false;
    }
  }
#define HR_SYM(field, sym)                                           \
  *(void **)&hr.field = dlsym(dl, sym);                              \
  if (!hr.field) {                                                   \
    snprintf(hr.whybuf, sizeof hr.whybuf, "%s lacks %s", path, sym); \
    dlclose(dl);                                                     \
    return false;                                                    \
  }
  HR_SYM(connect_nb, "redisConnectNonBlock")
  HR_SYM(connect_fd, "redisConnectFd")
  HR_SYM(free_ctx, "redisFree")
  HR_SYM(append_argv, "redisAppendCommandArgv")
  HR_SYM(buffer_write, "redisBufferWrite")
  HR_SYM(buffer_read, "redisBufferRead")
  HR_SYM(get_reply, "redisGetReply")
  HR_SYM(free_reply, "freeReplyObject")
  HR_SYM(reader_create, "redisReaderCreate")
  HR_SYM(reader_feed, "redisReaderFeed")
  HR_SYM(reader_get_reply, "redisReaderGetReply")
  HR_SYM(reader_free, "redisReaderFree")
#undef HR_SYM
  hr.abi = abi;
  if (!hr_abi_ok()) {
    snprintf(hr.whybuf, sizeof hr.whybuf, "%s does not have the hiredis %s ABI that its name says", path,
             abi ? "1.x" : "0.14");
    dlclose(dl);
    return false;
  }
  snprintf(hr.name, sizeof hr.name, "%s (ABI %s)", base, abi ? "1.x" : "0.14");
  return true; /* stays loaded for the life of the process */
}

static void hr_load(void) {
  const char *forced = getenv("KC_HIREDIS_LIB");
  snprintf(hr.whybuf, sizeof hr.whybuf,
           "libhiredis is not installed (Debian: apt-get install libhiredis0.14, or libhiredis1.1.0)");
  hr.why = hr.whybuf;
  if (forced && *forced) {
    if (hr_try(forced)) {
      hr.why = NULL;
    } else if (!strstr(hr.whybuf, forced)) {
      const char *e = dlerror();
      snprintf(hr.whybuf, sizeof hr.whybuf, "KC_HIREDIS_LIB=%s cannot be used: %s", forced,
               e ? e : "not a hiredis library");
    }
    return;
  }
  static const char *const names[] = {"libhiredis.so.0.14", "libhiredis.so.1.1.0", "libhiredis.so.1.0.0"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (hr_try(names[i])) {
      hr.why = NULL;
      return;
    }
  /* other builds of the same ABIs, wherever the system keeps libraries */
  static const char *const patterns[] = {"/usr/lib/*/libhiredis.so.*", "/usr/lib/libhiredis.so.*",
                                         "/usr/lib64/libhiredis.so.*", "/usr/local/lib/libhiredis.so.*",
                                         "/usr/local/lib64/libhiredis.so.*"};
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
    glob_t g;
    if (glob(patterns[i], 0, NULL, &g) != 0) continue;
    bool found = false;
    for (size_t j = 0; j < g.gl_pathc && !found; j++)
      if (!strstr(g.gl_pathv[j], "_ssl")) found = hr_try(g.gl_pathv[j]);
    globfree(&g);
    if (found) {
      hr.why = NULL;
      return;
    }
  }
  if (hr_try("libhiredis.so")) hr.why = NULL;
}

const char *kc__hiredis_unavailable(void) {
  kc__call_once(&hr_once, hr_load);
  return hr.why;
}

const char *kc__hiredis_name(void) { return kc__hiredis_unavailable() ? NULL : hr.name; }

/* ------------------------------------------------------------ libcrypto */

/* HMAC-SHA256 comes from OpenSSL's libcrypto, opened at run time: it is on
 * nearly every machine (libssl3), its one-shot HMAC() takes no structures
 * whose layout would have to be declared here, and it is the implementation
 * that security updates reach. Nettle's HMAC needs its context struct's
 * size, libgcrypt a version handshake; writing SHA-256 here would be one
 * more implementation to trust. */
static struct {
  unsigned char *(*hmac)(const void *md, const void *key, int klen, const unsigned char *d, size_t n,
                         unsigned char *out, unsigned int *outlen);
  const void *(*sha256)(void);
  const char *why;
  char whybuf[300];
} cr;
static kc__once cr_once = KC__ONCE_INIT;

static void cr_load(void) {
  static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
  cr.why = "libcrypto (OpenSSL) is not installed; it is needed for KC_REMOTE_KEY (Debian: apt-get install libssl3)";
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    void *dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!dl) continue;
    *(void **)&cr.hmac = dlsym(dl, "HMAC");
    *(void **)&cr.sha256 = dlsym(dl, "EVP_sha256");
    if (!cr.hmac || !cr.sha256) {
      dlclose(dl);
      continue;
    }
    /* RFC 4231, test case 2 */
    static const uint8_t want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                     0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                     0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    static const char msg[] = "what do ya want for nothing?";
    uint8_t got[64];
    unsigned int glen = 0;
    if (cr.hmac(cr.sha256(), "Jefe", 4, (const unsigned char *)msg, sizeof msg - 1, got, &glen) && glen == 32 &&
        !memcmp(got, want, 32)) {
      cr.why = NULL;
      return;
    }
    snprintf(cr.whybuf, sizeof cr.whybuf, "%s computes a wrong HMAC-SHA256 (RFC 4231 test)", names[i]);
    cr.why = cr.whybuf;
    cr.hmac = NULL;
    dlclose(dl);
  }
}

const char *kc__hmac_unavailable(void) {
  kc__call_once(&cr_once, cr_load);
  return cr.why;
}

bool kc__hmac_sha256(const void *key, size_t klen, const void *data, size_t n, uint8_t out[32]) {
  if (kc__hmac_unavailable() || klen > INT_MAX) return false;
  uint8_t md[64];
  unsigned int len = 0;
  if (!cr.hmac(cr.sha256(), key, (int)klen, data, n, md, &len) || len != 32) return false;
  memcpy(out, md, 32);
  return true;
}

/* --------------------------------------------------------- configuration */

/* Percent-decodes s[0..n) into out; false if it does not fit or is malformed. */
static bool pct_decode(const char *s, size_t n, char *out, size_t outlen) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (c == '%') {
      if (n - i < 3) return false;
      int hi = kc__hexval((unsigned char)s[i + 1]), lo = kc__hexval((unsigned char)s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = hi << 4 | lo;
      i += 2;
    }
    if (c == 0 || o + 1 >= outlen) return false;
    out[o++] = (char)c;
  }
  out[o] = 0;
  return true;
}

kc_status kc__remote_parse_url(const char *url, kc__remote_config *cfg, char *why, size_t wl) {
  cfg->host[0] = cfg->user[0] = cfg->password[0] = 0;
  cfg->has_password = false;
  cfg->port = 6379;
  cfg->db = 0;
  if (!url) url = "";
  if (!strncmp(url, "rediss://", 9)) {
    snprintf(why, wl,
             "\"%.*s...\": rediss:// (TLS) is not supported: the hiredis that kcache loads (Debian 12's "
             "libhiredis0.14) has no TLS, and kcache does not drive hiredis_ssl; reach the server through a TLS "
             "tunnel (stunnel, spiped, a service mesh) at a redis:// address",
             9, url);
    return KC_EINVAL;
  }
  if (strncmp(url, "redis://", 8) != 0) {
    snprintf(why, wl, "\"%s\" is not a redis://[[user]:password@]host[:port][/db] URL", url);
    return KC_EINVAL;
  }
  const char *p = url + 8, *slash = strchr(p, '/');
  const char *end = slash ? slash : p + strlen(p);
  const char *at = NULL;
  for (const char *q = p; q < end; q++)
    if (*q == '@') at = q;
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (!colon) {
      snprintf(why, wl, "the URL names a user but no password: write redis://USER:PASSWORD@host or "
                        "redis://:PASSWORD@host");
      return KC_EINVAL;
    }
    if (!pct_decode(p, (size_t)(colon - p), cfg->user, sizeof cfg->user) ||
        !pct_decode(colon + 1, (size_t)(at - colon - 1), cfg->password, sizeof cfg->password)) {
      snprintf(why, wl, "the user or password in the URL is too long or badly %%-encoded");
      return KC_EINVAL;
    }
    cfg->has_password = true;
    p = at + 1;
  }
  const char *hend, *port = NULL;
  if (*p == '[') {
    const char *rb = memchr(p, ']', (size_t)(end - p));
    if (!rb) {
      snprintf(why, wl, "unterminated [IPv6 address] in the URL");
      return KC_EINVAL;
    }
    snprintf(cfg->host, sizeof cfg->host, "%.*s", (int)(rb - p - 1), p + 1);
    hend = rb + 1;
    if (hend < end && *hend != ':') {
      snprintf(why, wl, "unexpected text after the [IPv6 address] in the URL");
      return KC_EINVAL;
    }
    if (hend < end) port = hend + 1;
  } else {
    const char *colon = memchr(p, ':', (size_t)(end - p));
    hend = colon ? colon : end;
    if ((size_t)(hend - p) >= sizeof cfg->host) {
      snprintf(why, wl, "the host name in the URL is too long");
      return KC_EINVAL;
    }
    snprintf(cfg->host, sizeof cfg->host, "%.*s", (int)(hend - p), p);
    if (colon) port = colon + 1;
  }
  if (!cfg->host[0]) {
    snprintf(why, wl, "the URL \"%s\" names no host", url);
    return KC_EINVAL;
  }
  if (port) {
    char *e;
    long v = strtol(port, &e, 10);
    if (e != end || port == end || v < 1 || v > 65535) {
      snprintf(why, wl, "bad port \"%.*s\" in the URL", (int)(end - port), port);
      return KC_EINVAL;
    }
    cfg->port = (int)v;
  }
  if (slash && slash[1]) {
    char *e;
    long v = strtol(slash + 1, &e, 10);
    if (*e || v < 0 || v > 1000000 || !(slash[1] >= '0' && slash[1] <= '9')) {
      snprintf(why, wl, "bad database number \"%s\" in the URL (redis://host:port/DB)", slash + 1);
      return KC_EINVAL;
    }
    cfg->db = (int)v;
  }
  bool v6 = strchr(cfg->host, ':') != NULL;
  snprintf(cfg->url, sizeof cfg->url, "redis://%s%s%s%s%s%s:%d/%d", cfg->user, cfg->has_password ? ":***" : "",
           cfg->has_password ? "@" : "", v6 ? "[" : "", cfg->host, v6 ? "]" : "", cfg->port, cfg->db);
  return KC_OK;
}

static bool env_u64(const char *name, uint64_t *out, uint64_t lo, uint64_t hi, char *why, size_t wl) {
  const char *v = getenv(name);
  if (!v || !*v) return true;
  char *e;
  errno = 0;
  unsigned long long x = strtoull(v, &e, 10);
  if (errno || *e || x < lo || x > hi || *v == '-') {
    snprintf(why, wl, "%s=\"%s\" is not a number from %llu to %llu", name, v, (unsigned long long)lo,
             (unsigned long long)hi);
    return false;
  }
  *out = x;
  return true;
}

kc_status kc__remote_config_load(const kc_options *opt, kc__remote_config *cfg, char *why, size_t wl) {
  memset(cfg, 0, sizeof *cfg);
  const char *url = opt && opt->remote_url ? opt->remote_url : getenv("KC_REMOTE");
  if (!url || !*url || !strcmp(url, "off") || !strcmp(url, "none")) return KC_ENOTFOUND;
  kc_status st = kc__remote_parse_url(url, cfg, why, wl);
  if (st) return st;

  const char *prefix = opt && opt->remote_prefix ? opt->remote_prefix : getenv("KC_REMOTE_PREFIX");
  if (!prefix) prefix = KC__REMOTE_DEFAULT_PREFIX;
  if (strlen(prefix) >= sizeof cfg->prefix - 1) {
    snprintf(why, wl, "the key prefix \"%s\" is longer than %zu bytes", prefix, sizeof cfg->prefix - 2);
    return KC_EINVAL;
  }
  for (const char *c = prefix; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f) {
      snprintf(why, wl, "the key prefix \"%s\" holds a space or a control character", prefix);
      return KC_EINVAL;
    }
  snprintf(cfg->prefix, sizeof cfg->prefix, "%s", prefix);

  uint64_t timeout = KC__REMOTE_DEFAULT_TIMEOUT_MS, retry = KC__REMOTE_DEFAULT_RETRY_MS;
  uint64_t max = KC__REMOTE_DEFAULT_MAX_ENTRY;
  if (opt && opt->remote_timeout_ms) timeout = opt->remote_timeout_ms;
  else if (!env_u64("KC_REMOTE_TIMEOUT_MS", &timeout, 1, 600000, why, wl)) return KC_EINVAL;
  if (opt && opt->remote_retry_ms) retry = opt->remote_retry_ms;
  else if (!env_u64("KC_REMOTE_RETRY_MS", &retry, 1, 86400000, why, wl)) return KC_EINVAL;
  cfg->lock_ms = KC__REMOTE_DEFAULT_LOCK_MS;
  if (opt && opt->remote_lock_timeout_ms) {
    cfg->lock_ms = opt->remote_lock_timeout_ms;
  } else {
    const char *v = getenv("KC_REMOTE_LOCK_TIMEOUT");
    if (v && *v) {
      char *e;
      double secs = strtod(v, &e);
      if (e == v || *e || !(secs > 0) || secs > 86400) {
        snprintf(why, wl, "KC_REMOTE_LOCK_TIMEOUT=\"%s\" is not a number of seconds (0 < s <= 86400)", v);
        return KC_EINVAL;
      }
      cfg->lock_ms = (uint32_t)(secs * 1000 + 0.5);
      if (!cfg->lock_ms) cfg->lock_ms = 1;
    }
  }
  if (opt && opt->remote_max_entry) {
    max = opt->remote_max_entry;
  } else {
    const char *v = getenv("KC_REMOTE_MAX_ENTRY");
    if (v && *v && (!kc__store_parse_size(v, &max) || max < 1024)) {
      snprintf(why, wl, "KC_REMOTE_MAX_ENTRY=\"%s\" is not a size of at least 1K (e.g. 64M)", v);
      return KC_EINVAL;
    }
  }
  if (max > (1ull << 31)) max = 1ull << 31; /* Redis strings hold at most 512 MiB by default anyway */
  cfg->timeout_ms = (uint32_t)timeout;
  cfg->retry_ms = (uint32_t)retry;
  cfg->max_entry = max;

  const char *secret = opt && opt->remote_key ? opt->remote_key : getenv("KC_REMOTE_KEY");
  if (secret && *secret) {
    const char *no = kc__hmac_unavailable();
    if (no) {
      snprintf(why, wl, "KC_REMOTE_KEY is set but entries cannot be authenticated: %s", no);
      return KC_EUNAVAILABLE;
    }
    static const char mac_label[] = "kcache remote entry mac v1", id_label[] = "kcache remote key id v1";
    uint8_t id[32];
    if (!kc__hmac_sha256(secret, strlen(secret), mac_label, sizeof mac_label - 1, cfg->mac_key) ||
        !kc__hmac_sha256(secret, strlen(secret), id_label, sizeof id_label - 1, id)) {
      snprintf(why, wl, "KC_REMOTE_KEY is set but HMAC-SHA256 failed");
      return KC_EUNAVAILABLE;
    }
    char idhex[9];
    kc__hex(id, 4, idhex);
    snprintf(cfg->ns, sizeof cfg->ns, "hmac-%s:", idhex);
    cfg->has_secret = true;
    wipe(id, sizeof id);
  }
  return KC_OK;
}

void kc__remote_name(const kc__remote_config *cfg, const uint8_t key[16], bool lock, char *out, size_t len) {
  char h[33];
  kc__hex(key, 16, h);
  snprintf(out, len, "%s%s%s%s", cfg->prefix, cfg->ns, h, lock ? ":lock" : "");
}

/* ------------------------------------------------------------ connection */

struct kc__rconn {
  kc_runtime *rt;
  void *ctx;
  int fd;
  pid_t pid; /* a connection made before a fork is not the child's to use */
  uint64_t timeout_ns;
  uint64_t cap; /* nonzero: no command waits past this (one deadline for several commands) */
  bool broken;
  kc__rconn *next; /* the idle list */
};

/* Writing to a socket the server closed raises SIGPIPE, whose default
 * action ends the process; hiredis writes with write(2). Blocked around the
 * write, and a SIGPIPE that the write raised is consumed. */
typedef struct pipe_guard {
  sigset_t old;
  bool was_pending;
} pipe_guard;

static void pipe_block(pipe_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void pipe_restore(pipe_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigpending(&pending);
  if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* 1: fd is ready; 0: the deadline passed; -1: poll failed. Past the
 * deadline it still looks once: a thread that was not scheduled in time
 * must not call an answer that did arrive a timeout. */
static int wait_fd(int fd, short events, uint64_t deadline) {
  for (;;) {
    uint64_t now = kc__now_ns();
    uint64_t left = now < deadline ? deadline - now : 0;
    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    struct pollfd p = {fd, events, 0};
    int r = ppoll(&p, 1, &ts, NULL);
    if (r > 0) return 1;
    if (r == 0 && kc__now_ns() >= deadline) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static const char *ctx_why(void *ctx, const char *what, char *why, size_t wl) {
  const char *s = ctx ? HR_CTX(ctx, errstr) : "";
  snprintf(why, wl, "%s: %s", what, s && *s ? s : "connection error");
  return why;
}

static bool copy_reply(kc_runtime *rt, const void *p, kc__rreply *out, int depth) {
  memset(out, 0, sizeof *out);
  hr_view v = hr_reply(p);
  out->type = v.type;
  out->integer = v.integer;
  if (v.type == KC__R_STRING || v.type == KC__R_STATUS || v.type == KC__R_ERROR) {
    out->str = kc__xalloc(rt, v.len + 1);
    if (!out->str) return false;
    if (v.len) memcpy(out->str, v.str, v.len);
    out->str[v.len] = 0;
    out->len = v.len;
  } else if (v.type == KC__R_ARRAY) {
    if (depth > 4) return false;
    out->elem = kc__xcalloc(rt, (v.elements ? v.elements : 1) * sizeof *out->elem);
    if (!out->elem) return false;
    out->n = v.elements;
    for (size_t i = 0; i < v.elements; i++)
      if (!copy_reply(rt, v.element[i], &out->elem[i], depth + 1)) return false;
  } else if (v.type != KC__R_INTEGER && v.type != KC__R_NIL) {
    out->type = KC__R_ERROR; /* a RESP3 type nobody asked for */
    out->str = kc__xalloc(rt, 32);
    if (!out->str) return false;
    out->len = (size_t)snprintf(out->str, 32, "unexpected reply type %d", v.type);
  }
  return true;
}

void kc__rreply_free(kc_runtime *rt, kc__rreply *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) kc__rreply_free(rt, &r->elem[i]);
  kc__xfree(rt, r->elem);
  kc__xfree(rt, r->str);
  memset(r, 0, sizeof *r);
}

kc_status kc__rconn_cmd(kc__rconn *c, int argc, const char *const *argv, const size_t *lens, kc__rreply *out,
                        char *why, size_t wl) {
  memset(out, 0, sizeof *out);
  if (c->broken) {
    snprintf(why, wl, "connection already failed");
    return KC_EIO;
  }
  uint64_t bytes = 0;
  for (int i = 0; i < argc; i++) bytes += lens[i] + 16;
  if (hr.append_argv(c->ctx, argc, (const char **)argv, lens) != 0) {
    c->broken = true;
    ctx_why(c->ctx, "formatting a command", why, wl);
    return KC_EIO;
  }
  uint64_t now = kc__now_ns(), last = now;
  uint64_t base = now + c->timeout_ns;
  if (c->cap && c->cap < base) base = c->cap;
  uint64_t budget = base + bytes * KC__NS_PER_BYTE;
  const char *what = "sending";
  for (int done = 0; !done;) {
    pipe_guard g;
    pipe_block(&g);
    int r = hr.buffer_write(c->ctx, &done);
    pipe_restore(&g);
    if (r != 0) goto io;
    if (done) break;
    last = kc__now_ns();
    uint64_t dl = last + c->timeout_ns < budget ? last + c->timeout_ns : budget;
    int w = wait_fd(c->fd, POLLOUT, dl);
    if (w <= 0) goto timeout;
  }
  what = "receiving";
  last = kc__now_ns();
  for (;;) {
    void *reply = NULL;
    if (hr.get_reply(c->ctx, &reply) != 0) goto io;
    if (reply) {
      bool ok = copy_reply(c->rt, reply, out, 0);
      hr.free_reply(reply);
      if (!ok) {
        kc__rreply_free(c->rt, out);
        c->broken = true; /* the reply is lost: the next one would answer this command */
        snprintf(why, wl, "out of memory copying a reply");
        return KC_ENOMEM;
      }
      return KC_OK;
    }
    int avail = 0;
    if (ioctl(c->fd, FIONREAD, &avail) != 0 || avail <= 0) {
      uint64_t dl = last + c->timeout_ns < budget ? last + c->timeout_ns : budget;
      int w = wait_fd(c->fd, POLLIN, dl);
      if (w <= 0) goto timeout;
      if (ioctl(c->fd, FIONREAD, &avail) != 0) avail = 0;
    }
    if (avail > 0) {
      budget += (uint64_t)avail * KC__NS_PER_BYTE;
      last = kc__now_ns();
    }
    if (hr.buffer_read(c->ctx) != 0) goto io;
  }
io:
  c->broken = true;
  ctx_why(c->ctx, what, why, wl);
  return KC_EIO;
timeout:
  c->broken = true;
  snprintf(why, wl, "no answer within %g ms while %s (timeout)", (double)c->timeout_ns / 1e6, what);
  return KC_EIO;
}

kc_status kc__rconn_cmdv(kc__rconn *c, kc__rreply *out, char *why, size_t wl, ...) {
  const char *argv[16];
  size_t lens[16];
  int argc = 0;
  va_list ap;
  va_start(ap, wl);
  for (const char *a; argc < 16 && (a = va_arg(ap, const char *));) {
    argv[argc] = a;
    lens[argc++] = strlen(a);
  }
  va_end(ap);
  return kc__rconn_cmd(c, argc, argv, lens, out, why, wl);
}

void kc__rconn_close(kc__rconn *c) {
  if (!c) return;
  if (c->ctx) hr.free_ctx(c->ctx);
  kc__xfree(c->rt, c);
}

kc_status kc__rconn_open(kc_runtime *rt, const kc__remote_config *cfg, kc__rconn **out, char *why, size_t wl) {
  *out = NULL;
  const char *no = kc__hiredis_unavailable();
  if (no) {
    snprintf(why, wl, "%s", no);
    return KC_EUNAVAILABLE;
  }
  kc__rconn *c = kc__xcalloc(rt, sizeof *c);
  if (!c) {
    snprintf(why, wl, "out of memory");
    return KC_ENOMEM;
  }
  c->rt = rt;
  c->pid = getpid();
  c->timeout_ns = (uint64_t)cfg->timeout_ms * 1000000u;
  c->fd = -1;
  uint64_t deadline = kc__now_ns() + c->timeout_ns;
  c->ctx = hr.connect_nb(cfg->host, cfg->port);
  if (!c->ctx) {
    kc__xfree(rt, c);
    snprintf(why, wl, "out of memory connecting");
    return KC_ENOMEM;
  }
  char what[400];
  snprintf(what, sizeof what, "connecting to %s:%d", cfg->host, cfg->port);
  if (HR_CTX(c->ctx, err)) {
    ctx_why(c->ctx, what, why, wl);
    kc__rconn_close(c);
    return KC_EIO;
  }
  c->fd = HR_CTX(c->ctx, fd);
  int w = wait_fd(c->fd, POLLOUT, deadline), err = 0;
  socklen_t el = sizeof err;
  if (w <= 0 || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
    if (w == 0) snprintf(why, wl, "%s: no answer within %u ms (timeout)", what, cfg->timeout_ms);
    else snprintf(why, wl, "%s: %s", what, strerror(err ? err : errno));
    kc__rconn_close(c);
    return KC_EIO;
  }
  kc__rreply r;
  kc_status st = KC_OK;
  c->cap = deadline; /* connect, AUTH and SELECT: one timeout in all */
  if (cfg->has_password) {
    st = cfg->user[0] ? kc__rconn_cmdv(c, &r, why, wl, "AUTH", cfg->user, cfg->password, (char *)NULL)
                      : kc__rconn_cmdv(c, &r, why, wl, "AUTH", cfg->password, (char *)NULL);
    if (!st && r.type == KC__R_ERROR) {
      snprintf(why, wl, "authentication failed (check the user and password in the URL): %s", r.str);
      st = KC_EINVAL;
    }
    if (st != KC_EIO) kc__rreply_free(rt, &r);
  }
  if (!st && cfg->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", cfg->db);
    st = kc__rconn_cmdv(c, &r, why, wl, "SELECT", db, (char *)NULL);
    if (!st && r.type == KC__R_ERROR) {
      snprintf(why, wl, "SELECT %d failed: %s", cfg->db, r.str);
      st = KC_EINVAL;
    }
    if (st != KC_EIO) kc__rreply_free(rt, &r);
  }
  if (st) {
    kc__rconn_close(c);
    return st;
  }
  c->cap = 0;
  *out = c;
  return KC_OK;
}

/* ----------------------------------------------------------------- values */

kc_status kc__remote_unwrap(const kc__remote_config *cfg, const void *value, size_t n, size_t *image_len,
                            char *why, size_t wl) {
  const uint8_t *v = value;
  if (n < KC__STORE_HEADER) {
    snprintf(why, wl, "truncated (%zu bytes)", n);
    return KC_EIO;
  }
  if (memcmp(v, KC__STORE_MAGIC, 8)) {
    snprintf(why, wl, "not a kcache entry (bad magic)");
    return KC_EIO;
  }
  uint64_t plen = kc__rd64(v + 32);
  if (plen > n - KC__STORE_HEADER) {
    snprintf(why, wl, "truncated (%zu of %llu bytes)", n, (unsigned long long)plen + KC__STORE_HEADER);
    return KC_EIO;
  }
  size_t img = KC__STORE_HEADER + (size_t)plen, rest = n - img;
  bool trailer = rest == KC__REMOTE_TRAILER && !memcmp(v + img, KC__REMOTE_MAC_MAGIC, 8);
  if (rest && !trailer) {
    snprintf(why, wl, "%zu unknown bytes after the entry", rest);
    return KC_EIO;
  }
  if (cfg->has_secret) {
    if (!trailer) {
      snprintf(why, wl, "not authenticated (uploaded without a KC_REMOTE_KEY)");
      return KC_EIO;
    }
    uint8_t mac[32];
    if (!kc__hmac_sha256(cfg->mac_key, sizeof cfg->mac_key, v, img, mac)) {
      snprintf(why, wl, "HMAC-SHA256 failed");
      return KC_EIO;
    }
    uint8_t diff = 0; /* constant time: the comparison tells a forger nothing */
    for (int i = 0; i < 32; i++) diff |= (uint8_t)(mac[i] ^ v[img + 8 + i]);
    if (diff) {
      snprintf(why, wl, "its MAC does not verify (another KC_REMOTE_KEY, or forged)");
      return KC_EIO;
    }
  }
  *image_len = img;
  return KC_OK;
}

bool kc__remote_trailer(const kc__remote_config *cfg, const void *image, size_t n, uint8_t out[KC__REMOTE_TRAILER]) {
  if (!cfg->has_secret) return false;
  memcpy(out, KC__REMOTE_MAC_MAGIC, 8);
  return kc__hmac_sha256(cfg->mac_key, sizeof cfg->mac_key, image, n, out + 8);
}

/* ----------------------------------------------------------- counters */

#define KC__RCOUNTERS_MAGIC "KCRSTAT1"
enum { KC__NRC = 9 };

static void rcounters_get(const uint8_t *b, ssize_t n, uint64_t v[KC__NRC], bool *valid) {
  memset(v, 0, KC__NRC * sizeof *v);
  *valid = n == 8 + 8 * KC__NRC && !memcmp(b, KC__RCOUNTERS_MAGIC, 8);
  if (*valid)
    for (int i = 0; i < KC__NRC; i++) v[i] = kc__rd64(b + 8 + 8 * i);
}

void kc__remote_counters_read(const char *vdir, kc__remote_counters *out) {
  memset(out, 0, sizeof *out);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/remote-stats", vdir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  uint8_t b[8 + 8 * KC__NRC];
  flock(fd, LOCK_SH);
  ssize_t n = pread(fd, b, sizeof b, 0);
  flock(fd, LOCK_UN);
  close(fd);
  uint64_t v[KC__NRC];
  rcounters_get(b, n, v, &out->valid);
  uint64_t *f[KC__NRC] = {&out->lookups, &out->hits,   &out->misses,     &out->rejects,  &out->errors,
                          &out->skips,   &out->uploads, &out->lock_waits, &out->lookup_ns};
  for (int i = 0; i < KC__NRC; i++) *f[i] = v[i];
}

/* Adds d[] (the order of kc__remote_counters) under the file's lock. */
static void rcounters_add(const char *vdir, const uint64_t d[KC__NRC]) {
  if (!vdir) return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/remote-stats", vdir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return; /* a read-only store: the counters are a hint */
  uint8_t b[8 + 8 * KC__NRC];
  flock(fd, LOCK_EX);
  uint64_t v[KC__NRC];
  bool valid;
  rcounters_get(b, pread(fd, b, sizeof b, 0), v, &valid);
  memcpy(b, KC__RCOUNTERS_MAGIC, 8);
  for (int i = 0; i < KC__NRC; i++) {
    kc__le64(b + 8 + 8 * i, v[i] + d[i]);
  }
  if (pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b) {
    /* a hint only */
  }
  flock(fd, LOCK_UN);
  close(fd);
}

enum { RC_LOOKUPS, RC_HITS, RC_MISSES, RC_REJECTS, RC_ERRORS, RC_SKIPS, RC_UPLOADS, RC_LOCK_WAITS, RC_LOOKUP_NS };

/* ------------------------------------------------------------------ tier */

typedef struct upjob {
  struct upjob *next;
  uint8_t key[16];
  void *image; /* NULL: only the lock */
  size_t size;
  uint64_t lock;
  kc__remote_defer_fn fn; /* instead: work for the store (kc__remote_defer) */
  void *ud;
} upjob;

struct kc__remote {
  kc_runtime *rt;
  kc__remote_config cfg;
  char *vdir;
  char ident[128]; /* "host:pid": who holds a lock */
  pid_t pid;
  /* the circuit breaker */
  _Atomic uint32_t fails;       /* consecutive failures */
  _Atomic uint64_t open_until;  /* monotonic ns; 0: closed */
  _Atomic int trial;            /* a half-open trial is under way */
  _Atomic int warned_error, warned_reject;
  _Atomic uint64_t c[KC__NRC];  /* this runtime's counters (RC_*) */
  /* idle connections */
  kc__mutex pool_lock; /* leaf */
  kc__rconn *idle;
  int nidle;
  /* the uploader */
  kc__mutex queue_lock; /* leaf */
  pthread_cond_t queue_cond;
  upjob *head, *tail;
  size_t qlen;
  uint64_t qbytes;
  bool stop, started;
  pthread_t thread;
};

static void count(kc__remote *r, int which, uint64_t n) { kc__fetch_add_relaxed(&r->c[which], n); }

static void count_shared(kc__remote *r, int which, uint64_t n, int which2, uint64_t n2) {
  uint64_t d[KC__NRC] = {0};
  d[which] += n;
  if (which2 >= 0) d[which2] += n2;
  rcounters_add(r->vdir, d);
}

static void KC__PRINTF(3, 4) warn(kc__remote *r, _Atomic int *once, const char *fmt, ...) {
  if (atomic_exchange(once, 1)) return;
  char msg[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "kcache: warning: remote tier %s: %s\n", r->cfg.url, msg);
}

/* 0: skip the tier; 1: go on; 2: go on as the trial of a half-open breaker. */
static int breaker_allow(kc__remote *r) {
  uint64_t until = kc__load_acquire(&r->open_until);
  if (KC__LIKELY(until == 0)) return 1;
  if (kc__now_ns() < until) return 0;
  int expect = 0;
  return atomic_compare_exchange_strong(&r->trial, &expect, 1) ? 2 : 0;
}

static void breaker_ok(kc__remote *r, int how) {
  kc__store_relaxed(&r->fails, 0);
  if (how == 2 || kc__load_relaxed(&r->open_until)) {
    kc__store_release(&r->open_until, 0);
    kc__store_release(&r->trial, 0);
  }
}

static void breaker_fail(kc__remote *r, int how, const char *why) {
  count(r, RC_ERRORS, 1);
  count_shared(r, RC_ERRORS, 1, -1, 0);
  uint32_t f = kc__fetch_add_relaxed(&r->fails, 1) + 1;
  warn(r, &r->warned_error, "%s; launches go on without it (after %u failures in a row it is skipped for %u ms)",
       why, KC__REMOTE_BREAKER_FAILURES, r->cfg.retry_ms);
  if (how == 2 || f >= KC__REMOTE_BREAKER_FAILURES) {
    kc__store_release(&r->open_until, kc__now_ns() + (uint64_t)r->cfg.retry_ms * 1000000u);
    kc__store_release(&r->trial, 0);
  }
}

static kc__rconn *pool_get(kc__remote *r, char *why, size_t wl, kc_status *st) {
  pid_t me = getpid();
  kc__rconn *c = NULL;
  kc__lock(&r->pool_lock);
  while (r->idle && !c) {
    c = r->idle;
    r->idle = c->next;
    r->nidle--;
    if (c->pid != me) { /* inherited across fork: the parent's socket */
      if (c->ctx) hr.free_ctx(c->ctx);
      kc__xfree(r->rt, c);
      c = NULL;
    }
  }
  kc__unlock(&r->pool_lock);
  if (c) return c;
  *st = kc__rconn_open(r->rt, &r->cfg, &c, why, wl);
  return c;
}

static void pool_put(kc__remote *r, kc__rconn *c) {
  if (!c) return;
  if (!c->broken) {
    kc__lock(&r->pool_lock);
    if (r->nidle < KC__POOL_IDLE) {
      c->next = r->idle;
      r->idle = c;
      r->nidle++;
      c = NULL;
    }
    kc__unlock(&r->pool_lock);
  }
  kc__rconn_close(c);
}

static void lock_value(const kc__remote *r, uint64_t token, char *out, size_t len) {
  snprintf(out, len, "%s:%016llx", r->ident, (unsigned long long)token);
}

typedef enum { GOT_NONE, GOT_HIT, GOT_FAIL } got;

/* Reads the value of name and offers it to accept. A value that is there but
 * not trusted is a miss (counted and warned about once per lookup). */
static got get_value(kc__remote *r, kc__rconn *c, const char *name, kc__remote_accept_fn accept, void *ud,
                     bool *rejected, char *why, size_t wl) {
  char maxs[32];
  snprintf(maxs, sizeof maxs, "%llu", (unsigned long long)r->cfg.max_entry);
  kc__rreply v;
  if (kc__rconn_cmdv(c, &v, why, wl, "GETRANGE", name, "0", maxs, (char *)NULL)) return GOT_FAIL;
  if (v.type == KC__R_ERROR && strncmp(v.str, "WRONGTYPE", 9) != 0) {
    snprintf(why, wl, "GETRANGE %s: %s", name, v.str);
    kc__rreply_free(r->rt, &v);
    return GOT_FAIL;
  }
  if (v.type != KC__R_ERROR && (v.type != KC__R_STRING || v.len == 0)) { /* GETRANGE of no key: "" */
    kc__rreply_free(r->rt, &v);
    return GOT_NONE;
  }
  char rwhy[300];
  size_t img = 0;
  bool good = false;
  if (v.type == KC__R_ERROR) {
    snprintf(rwhy, sizeof rwhy, "not a string value");
  } else if (v.len > r->cfg.max_entry) {
    snprintf(rwhy, sizeof rwhy, "larger than KC_REMOTE_MAX_ENTRY (%llu bytes)", (unsigned long long)r->cfg.max_entry);
  } else if (kc__remote_unwrap(&r->cfg, v.str, v.len, &img, rwhy, sizeof rwhy) == KC_OK) {
    /* the store verifies the entry file as it verifies its own */
    void *image = v.str;
    v.str = NULL;
    if (img != v.len) {
      void *shrunk = kc__realloc(r->rt, image, img);
      if (shrunk) image = shrunk;
    }
    good = accept(ud, image, img, rwhy, sizeof rwhy);
  }
  kc__rreply_free(r->rt, &v);
  if (good) return GOT_HIT;
  if (!*rejected) {
    *rejected = true;
    count(r, RC_REJECTS, 1);
    warn(r, &r->warned_reject, "the entry %s is not trusted (%s): compiled again, and the upload replaces it", name,
         rwhy);
  }
  return GOT_NONE;
}

bool kc__remote_fetch(kc__remote *r, const uint8_t key[16], kc__remote_accept_fn accept, void *ud, uint64_t *lock) {
  *lock = 0;
  if (!r) return false;
  int how = breaker_allow(r);
  if (!how) {
    count(r, RC_SKIPS, 1);
    count_shared(r, RC_SKIPS, 1, -1, 0);
    return false;
  }
  uint64_t t0 = kc__now_ns();
  char why[512], name[256], lname[300];
  kc__remote_name(&r->cfg, key, false, name, sizeof name);
  kc__remote_name(&r->cfg, key, true, lname, sizeof lname);
  kc_status st = KC_OK;
  kc__rconn *c = pool_get(r, why, sizeof why, &st);
  got outcome = GOT_NONE;
  bool rejected = false, waited = false;
  uint64_t wait_until = t0 + (uint64_t)r->cfg.lock_ms * 1000000u, nap = KC__POLL_FIRST_NS;
  uint64_t timeout_ns = (uint64_t)r->cfg.timeout_ms * 1000000u;
  if (c) c->cap = t0 + timeout_ns; /* the lookup, not each command, waits at most the timeout */
  while (c) {
    outcome = get_value(r, c, name, accept, ud, &rejected, why, sizeof why);
    if (outcome != GOT_NONE) break;
    /* nothing usable: compile, unless another machine already does */
    uint64_t token = random64();
    char tok[200], px[24];
    lock_value(r, token, tok, sizeof tok);
    snprintf(px, sizeof px, "%u", r->cfg.lock_ms);
    kc__rreply v;
    if (kc__rconn_cmdv(c, &v, why, sizeof why, "SET", lname, tok, "NX", "PX", px, (char *)NULL)) {
      outcome = GOT_FAIL;
      break;
    }
    int type = v.type;
    if (type == KC__R_ERROR) snprintf(why, sizeof why, "SET %s NX: %s", lname, v.str);
    kc__rreply_free(r->rt, &v);
    if (type == KC__R_ERROR) {
      outcome = GOT_FAIL;
      break;
    }
    if (type == KC__R_STATUS) {
      /* Ours. But the last holder may have uploaded and released between
       * our GET and our SET (it uploads first): look once more. */
      outcome = get_value(r, c, name, accept, ud, &rejected, why, sizeof why);
      if (outcome == GOT_HIT) kc__remote_upload(r, key, NULL, 0, token); /* releases it */
      else *lock = token;
      break;
    }
    /* another machine holds the lock: poll for its upload, within bounds */
    uint64_t now = kc__now_ns();
    if (!waited) {
      waited = true;
      count(r, RC_LOCK_WAITS, 1);
    }
    if (now >= wait_until) break; /* it takes too long: compile without the lock */
    nap_ns(nap < wait_until - now ? nap : wait_until - now);
    if (nap < KC__POLL_MAX_NS) nap *= 2;
    c->cap = kc__now_ns() + timeout_ns;
  }
  if (c) c->cap = 0;
  uint64_t dt = kc__now_ns() - t0;
  if (!c || outcome == GOT_FAIL) breaker_fail(r, how, why);
  else breaker_ok(r, how);
  pool_put(r, c);
  uint64_t d[KC__NRC] = {0};
  d[RC_LOOKUPS] = 1;
  d[RC_LOOKUP_NS] = dt;
  if (outcome == GOT_HIT) d[RC_HITS] = 1;
  else if (c && outcome == GOT_NONE) d[RC_MISSES] = 1;
  d[RC_REJECTS] = rejected;
  d[RC_LOCK_WAITS] = waited;
  for (int i = 0; i < KC__NRC; i++)
    if (i != RC_REJECTS && i != RC_LOCK_WAITS) count(r, i, d[i]);
  rcounters_add(r->vdir, d);
  return outcome == GOT_HIT;
}

static void run_job(kc__remote *r, upjob *j) {
  if (j->fn) {
    j->fn(r->rt, j->ud, j->key, j->image, j->size);
    return;
  }
  int how = breaker_allow(r);
  if (!how) {
    if (j->image) {
      count(r, RC_SKIPS, 1);
      count_shared(r, RC_SKIPS, 1, -1, 0);
    }
    return; /* a lock we held expires by itself */
  }
  char why[512], name[256];
  kc_status st = KC_OK;
  kc__rconn *c = pool_get(r, why, sizeof why, &st);
  bool failed = !c;
  if (c && j->image) {
    size_t size = j->size;
    if (r->cfg.has_secret) {
      uint8_t *img = kc__realloc(r->rt, j->image, size + KC__REMOTE_TRAILER);
      if (img) {
        j->image = img;
        if (kc__remote_trailer(&r->cfg, img, size, img + size)) size += KC__REMOTE_TRAILER;
        else size = 0;
      } else {
        size = 0;
      }
    }
    if (size == 0 || size > r->cfg.max_entry) {
      count(r, RC_SKIPS, 1); /* too large to share, or no MAC (out of memory) */
      count_shared(r, RC_SKIPS, 1, -1, 0);
    } else {
      kc__remote_name(&r->cfg, j->key, false, name, sizeof name);
      const char *argv[] = {"SET", name, j->image};
      size_t lens[] = {3, strlen(name), size};
      kc__rreply v;
      st = kc__rconn_cmd(c, 3, argv, lens, &v, why, sizeof why);
      if (!st && v.type == KC__R_STATUS) {
        count(r, RC_UPLOADS, 1);
        count_shared(r, RC_UPLOADS, 1, -1, 0);
      } else {
        if (!st) snprintf(why, sizeof why, "SET %s: %s", name, v.str ? v.str : "unexpected reply");
        failed = true;
      }
      kc__rreply_free(r->rt, &v);
    }
  }
  if (c && !c->broken && j->lock) {
    /* compare-and-delete: a lock that expired and was taken by another
     * machine is not ours to release */
    static const char script[] =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    char tok[200];
    lock_value(r, j->lock, tok, sizeof tok);
    kc__remote_name(&r->cfg, j->key, true, name, sizeof name);
    kc__rreply v;
    char why2[512];
    if (kc__rconn_cmdv(c, &v, why2, sizeof why2, "EVAL", script, "1", name, tok, (char *)NULL) == KC_OK)
      kc__rreply_free(r->rt, &v); /* scripting off: the lock expires by itself */
  }
  if (failed) breaker_fail(r, how, why);
  else breaker_ok(r, how);
  pool_put(r, c);
}

static void *uploader(void *arg) {
  kc__remote *r = arg;
  /* Background work: on a machine whose cores are all busy, the launches
   * that the application waits for go first (Linux: nice is per thread). */
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) != 0) {
    /* not allowed: run at the application's priority */
  }
  kc__lock(&r->queue_lock);
  for (;;) {
    while (!r->head && !r->stop) pthread_cond_wait(&r->queue_cond, &r->queue_lock);
    upjob *j = r->head;
    if (!j) break; /* stopped, and nothing is left */
    r->head = j->next;
    if (!r->head) r->tail = NULL;
    r->qlen--;
    r->qbytes -= j->size;
    kc__unlock(&r->queue_lock);
    run_job(r, j);
    kc__free(r->rt, j->image);
    kc__free(r->rt, j);
    kc__lock(&r->queue_lock);
  }
  kc__unlock(&r->queue_lock);
  return NULL;
}

/* Queues j for the uploader thread (started on the first job). False when
 * no thread can be made (or the tier is closing). */
static bool enqueue(kc__remote *r, upjob *j) {
  bool queued = false;
  kc__lock(&r->queue_lock);
  if (!r->stop) {
    if (!r->started) {
      /* the uploader takes no signals meant for the application's threads */
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      r->started = pthread_create(&r->thread, NULL, uploader, r) == 0;
      pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (r->started) {
      if (r->tail) r->tail->next = j;
      else r->head = j;
      r->tail = j;
      r->qlen++;
      r->qbytes += j->size;
      pthread_cond_signal(&r->queue_cond);
      queued = true;
    }
  }
  kc__unlock(&r->queue_lock);
  return queued;
}

void kc__remote_upload(kc__remote *r, const uint8_t key[16], void *image, size_t size, uint64_t lock) {
  if (!r || (!image && !lock)) {
    if (r) kc__free(r->rt, image);
    return;
  }
  kc__lock(&r->queue_lock);
  bool full = r->qlen >= KC__QUEUE_JOBS || r->qbytes + size > KC__QUEUE_BYTES;
  kc__unlock(&r->queue_lock);
  if (image && full) {
    count(r, RC_SKIPS, 1); /* a backlog: the server is slower than the compilers */
    count_shared(r, RC_SKIPS, 1, -1, 0);
    kc__free(r->rt, image);
    image = NULL;
    size = 0;
    if (!lock) return;
  }
  upjob *j = kc__calloc(r->rt, sizeof *j);
  if (!j) {
    kc__free(r->rt, image);
    return; /* the lock expires by itself */
  }
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = size;
  j->lock = lock;
  if (!enqueue(r, j)) { /* upload here rather than lose it */
    run_job(r, j);
    kc__free(r->rt, j->image);
    kc__free(r->rt, j);
  }
}

bool kc__remote_defer(kc__remote *r, kc__remote_defer_fn fn, void *ud, const uint8_t key[16], void *image,
                      size_t size) {
  if (!r) return false;
  kc__lock(&r->queue_lock);
  bool full = r->qlen >= KC__QUEUE_JOBS || r->qbytes + size > KC__QUEUE_BYTES;
  kc__unlock(&r->queue_lock);
  upjob *j = full ? NULL : kc__calloc(r->rt, sizeof *j);
  if (!j) return false;
  j->fn = fn;
  j->ud = ud;
  memcpy(j->key, key, 16);
  j->image = image;
  j->size = size;
  if (enqueue(r, j)) return true;
  kc__free(r->rt, j);
  return false;
}

kc__remote *kc__remote_open(kc_runtime *rt, const char *vdir) {
  kc__remote_config cfg;
  char why[1024];
  kc_status st = kc__remote_config_load(&rt->opt, &cfg, why, sizeof why);
  /* the caller's strings are not kept (kcache.h), and the secret is in cfg */
  rt->opt.remote_url = rt->opt.remote_prefix = rt->opt.remote_key = NULL;
  if (st == KC_ENOTFOUND) return NULL;
  const char *no = st ? NULL : kc__hiredis_unavailable();
  if (no) {
    snprintf(why, sizeof why, "%s", no);
    st = KC_EUNAVAILABLE;
  }
  if (st) {
    fprintf(stderr, "kcache: warning: the remote tier is off: %s\n", why);
    wipe(&cfg, sizeof cfg);
    return NULL;
  }
  kc__remote *r = kc__calloc(rt, sizeof *r);
  if (!r || !(r->vdir = kc__strdup(rt, vdir))) {
    kc__free(rt, r);
    wipe(&cfg, sizeof cfg);
    fprintf(stderr, "kcache: warning: the remote tier is off: out of memory\n");
    return NULL;
  }
  bool m1 = kc__mutex_init(&r->pool_lock), m2 = kc__mutex_init(&r->queue_lock);
  bool cv = pthread_cond_init(&r->queue_cond, NULL) == 0;
  if (!m1 || !m2 || !cv) {
    if (m1) kc__mutex_destroy(&r->pool_lock);
    if (m2) kc__mutex_destroy(&r->queue_lock);
    if (cv) pthread_cond_destroy(&r->queue_cond);
    kc__free(rt, r->vdir);
    kc__free(rt, r);
    wipe(&cfg, sizeof cfg);
    fprintf(stderr, "kcache: warning: the remote tier is off: cannot make its locks\n");
    return NULL;
  }
  r->rt = rt;
  r->cfg = cfg;
  wipe(&cfg, sizeof cfg);
  r->pid = getpid();
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = 0;
  snprintf(r->ident, sizeof r->ident, "%s:%ld", host, (long)r->pid);
  return r;
}

void kc__remote_close(kc__remote *r) {
  if (!r) return;
  kc__lock(&r->queue_lock);
  r->stop = true;
  bool join = r->started && r->pid == getpid(); /* after fork, the thread was the parent's */
  pthread_cond_signal(&r->queue_cond);
  kc__unlock(&r->queue_lock);
  if (join) pthread_join(r->thread, NULL);
  for (upjob *j = r->head, *next; j; j = next) { /* only left by a thread of another process */
    next = j->next;
    kc__free(r->rt, j->image);
    kc__free(r->rt, j);
  }
  for (kc__rconn *c = r->idle, *next; c; c = next) {
    next = c->next;
    kc__rconn_close(c);
  }
  kc__mutex_destroy(&r->pool_lock);
  kc__mutex_destroy(&r->queue_lock);
  pthread_cond_destroy(&r->queue_cond);
  kc_runtime *rt = r->rt;
  kc__free(rt, r->vdir);
  wipe(&r->cfg, sizeof r->cfg);
  kc__free(rt, r);
}

void kc__remote_stats(const kc__remote *r, kc_stats *out) {
  if (!r) return;
  out->remote_lookups = kc__load_relaxed(&r->c[RC_LOOKUPS]);
  out->remote_hits = kc__load_relaxed(&r->c[RC_HITS]);
  out->remote_misses = kc__load_relaxed(&r->c[RC_MISSES]);
  out->remote_rejects = kc__load_relaxed(&r->c[RC_REJECTS]);
  out->remote_uploads = kc__load_relaxed(&r->c[RC_UPLOADS]);
  out->remote_errors = kc__load_relaxed(&r->c[RC_ERRORS]);
  out->remote_skips = kc__load_relaxed(&r->c[RC_SKIPS]);
  out->remote_lock_waits = kc__load_relaxed(&r->c[RC_LOCK_WAITS]);
  out->remote_lookup_ns = kc__load_relaxed(&r->c[RC_LOOKUP_NS]);
}

const char *kc__remote_url_of(const kc__remote *r) { return r ? r->cfg.url : NULL; }
