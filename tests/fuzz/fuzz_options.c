/* SPDX-License-Identifier: MIT */
/*
 * fuzz_options.c -- the options kcache reads from the environment: the size
 * parser behind KC_CACHE_MAXSIZE (kc__store_parse_size), backend selection
 * by KC_BACKEND, KC_HOST_CC, KC_CACHE_LOCK_TIMEOUT and KC_CACHE_DISABLE
 * through kc_runtime_create, and the disk cache's default directory from
 * KC_CACHE_DIR, XDG_CACHE_HOME and HOME (the configuration's default). A value
 * in the environment is whatever the user typed: it may be refused with a
 * status or a warning, never crash or be misread.
 *
 * The input is up to eight lines (a missing line leaves the variable unset,
 * an empty one sets it to ""):
 *   0 KC_CACHE_MAXSIZE (also given to kc__store_parse_size directly)
 *   1 KC_BACKEND   2 KC_CACHE_LOCK_TIMEOUT   3 KC_CACHE_DISABLE
 *   4 KC_HOST_CC   5 KC_CACHE_DIR   6 XDG_CACHE_HOME   7 HOME
 *
 * Checked: the size parser against a reference for plain sizes (digits, an
 * optional K/M/G/T with optional "i" and "B", or "B"; blanks around), and
 * that it leaves *out alone when it refuses; a KC_BACKEND that is not host,
 * opencl, cuda, auto or empty is KC_EINVAL naming the variable; with
 * KC_BACKEND=host the runtime is created exactly when the host backend says
 * it is available and its command splits (else an error with a message),
 * uses the host backend, and has a disk cache exactly when KC_CACHE_DISABLE
 * does not turn it off; the default root is KC_CACHE_DIR, else an absolute
 * XDG_CACHE_HOME/kcache, else HOME/.cache/kcache (a default longer than a
 * path can be is none). A runtime is created only for the host backend: opening OpenCL
 * or CUDA is not option parsing, and their libraries are not ours.
 */
#include "fuzz.h"
#include "core/cache_glue.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { V_SIZE, V_BACKEND, V_LOCK, V_DISABLE, V_HOST_CC, V_CACHE_DIR, V_XDG, V_HOME, V_COUNT };
static const char *const var_names[V_COUNT] = {"KC_CACHE_MAXSIZE", "KC_BACKEND", "KC_CACHE_LOCK_TIMEOUT",
                                               "KC_CACHE_DISABLE", "KC_HOST_CC", "KC_CACHE_DIR",
                                               "XDG_CACHE_HOME",   "HOME"};

static char *saved[V_COUNT];
static bool saved_ok;
static char cache_root[256];

static void restore_env(void) {
  for (int i = 0; i < V_COUNT; i++) {
    if (saved[i]) setenv(var_names[i], saved[i], 1);
    else unsetenv(var_names[i]);
  }
}

static void remove_cache_root(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/v%u", cache_root, KC__STORE_FORMAT);
  rmdir(p);
  rmdir(cache_root);
}

static void setup(void) {
  if (saved_ok) return;
  for (int i = 0; i < V_COUNT; i++) {
    const char *v = getenv(var_names[i]);
    saved[i] = v ? strdup(v) : NULL;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(cache_root, sizeof cache_root, "%s/kc-fuzz-options-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  KCF_CHECK(mkdtemp(cache_root), "mkdtemp %s: %s", cache_root, strerror(errno));
  atexit(remove_cache_root);
  saved_ok = true;
}

/* -------------------------------------------------------------- sizes */

/* 1: s is a plain size and *want its value; 0: s is no size at all;
 * -1: s is something strtod reads (a fraction, an exponent, hex, 16 digits
 * or more) and only "no crash, no overflow" is checked. */
static int reference_size(const char *s, uint64_t *want) {
  while (isspace((unsigned char)*s)) s++;
  if (*s == '.') return -1;
  if (!isdigit((unsigned char)*s)) return 0;
  uint64_t v = 0;
  int digits = 0;
  for (; isdigit((unsigned char)*s); s++, digits++) v = v * 10 + (uint64_t)(*s - '0');
  if (digits > 15 || (*s && strchr(".eExXpP", *s))) return -1;
  while (isspace((unsigned char)*s)) s++;
  int shift = 0;
  switch (toupper((unsigned char)*s)) {
  case 'K': shift = 10; break;
  case 'M': shift = 20; break;
  case 'G': shift = 30; break;
  case 'T': shift = 40; break;
  default: break;
  }
  if (shift) {
    s++;
    if (*s == 'i' || *s == 'I') s++;
  }
  if (*s == 'b' || *s == 'B') s++;
  while (isspace((unsigned char)*s)) s++;
  if (*s) return 0;
  if (shift && v > (UINT64_MAX >> shift)) return 0; /* 2^64 or more: not a size */
  *want = v << shift;
  return 1;
}

static void check_size(const char *s) {
  uint64_t got = 0xdeadbeefdeadbeefull, want = 0;
  bool ok = kc__store_parse_size(s, &got);
  int ref = reference_size(s, &want);
  if (!ok)
    KCF_CHECK(got == 0xdeadbeefdeadbeefull, "refused \"%s\" but wrote %llu", s, (unsigned long long)got);
  if (ref == 1)
    KCF_CHECK(ok && got == want, "\"%s\" is %llu bytes; the parser says %s%llu", s, (unsigned long long)want,
              ok ? "" : "no, ", (unsigned long long)got);
  else if (ref == 0) KCF_CHECK(!ok, "\"%s\" is not a size; the parser says %llu", s, (unsigned long long)got);
}

/* ------------------------------------------------------------ runtime */

/* kcache warns on stderr about each bad KC_CACHE_* value: thousands of
 * lines a second under libFuzzer. Only the call is silenced; the checks
 * after it print as usual. */
static int quiet_begin(void) {
  fflush(stderr);
  int saved = dup(2), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 2);
    close(null);
  }
  return saved;
}

static void quiet_end(int saved) {
  fflush(stderr);
  if (saved >= 0) {
    dup2(saved, 2);
    close(saved);
  }
}

static void check_runtime(const char *const *f) {
  const char *be = f[V_BACKEND];
  bool any = !be || !*be || !strcmp(be, "auto");
  bool known = any || !strcmp(be, "host") || !strcmp(be, "opencl") || !strcmp(be, "cuda");
  if (known && (any || strcmp(be, "host"))) return; /* would open OpenCL or CUDA */

  kc_options opt;
  kc_options_init(&opt);
  opt.cache_dir = cache_root;
  kc_runtime *rt = (kc_runtime *)1;
  int saved = quiet_begin();
  kc_status st = kc_runtime_create(&opt, &rt);
  quiet_end(saved);
  const char *msg = kc_errmsg(NULL);
  if (!known) {
    KCF_CHECK(st == KC_EINVAL && rt == NULL, "KC_BACKEND=\"%s\": %s", be, kc_status_name(st));
    KCF_CHECK(strstr(msg, "KC_BACKEND"), "KC_BACKEND=\"%s\" refused with \"%s\"", be, msg);
    return;
  }
  const char *why = NULL;
  bool avail = kc_backend_available(KC_BACKEND_HOST, &why);
  if (st != KC_OK) {
    KCF_CHECK(rt == NULL && *msg, "kc_runtime_create failed (%s) without a message or with a runtime",
              kc_status_name(st));
    KCF_CHECK(st == KC_EUNAVAILABLE || (avail && (st == KC_EINVAL || st == KC_EIO)),
              "KC_HOST_CC=\"%s\" (%s): kc_runtime_create returned %s: %s",
              f[V_HOST_CC] ? f[V_HOST_CC] : "(unset)", avail ? "available" : why, kc_status_name(st), msg);
    return;
  }
  KCF_CHECK(avail, "created a host runtime although the host backend is unavailable: %s", why);
  KCF_CHECK(!strcmp(kc_runtime_backend(rt), "host"), "KC_BACKEND=host gave backend %s",
            kc_runtime_backend(rt));
  const char *off = f[V_DISABLE];
  bool disabled = off && *off && strcmp(off, "0");
  const char *dir = kc_cache_dir(rt);
  if (disabled) KCF_CHECK(dir == NULL, "KC_CACHE_DISABLE=\"%s\" left the disk cache on", off);
  else
    KCF_CHECK(dir && !strcmp(dir, cache_root) && kc_cache_writable(rt),
              "KC_CACHE_DISABLE=\"%s\": the disk cache is %s, expected %s", off ? off : "(unset)",
              dir ? dir : "off", cache_root);
  kc_runtime_destroy(rt);
}

/* ------------------------------------------------------ default root */

static void check_default_root(const char *const *f) {
  const char *dir = f[V_CACHE_DIR], *xdg = f[V_XDG], *home = f[V_HOME];
  char want[8192];
  bool have = true;
  if (dir && *dir) snprintf(want, sizeof want, "%s", dir);
  else if (xdg && *xdg == '/') snprintf(want, sizeof want, "%s/kcache", xdg);
  else if (home && *home) snprintf(want, sizeof want, "%s/.cache/kcache", home);
  else have = false;
  /* the resolved configuration's KC_CACHE_DIR: the variable as given, a
   * default only when it fits a path (4096 bytes) */
  if (have && !(dir && *dir) && strlen(want) >= 4096) have = false;
  kc__config conf;
  KCF_CHECK(kc__config_resolve(NULL, NULL, &conf) == KC_OK, "kc__config_resolve failed");
  const char *got = kc__config_text(&conf, KC__SET_CACHE_DIR);
  KCF_CHECK((got != NULL) == have, "default root: %s, expected %s", got ? got : "none", have ? want : "none");
  if (got && have) KCF_CHECK(!strcmp(got, want), "default root \"%s\", expected \"%s\"", got, want);
  kc__config_free(&conf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  char *text = kcf_cstr(data, size);
  const char *f[V_COUNT] = {0};
  char *p = text;
  for (int i = 0; i < V_COUNT && p; i++) {
    f[i] = p;
    p = strchr(p, '\n');
    if (p) *p++ = 0;
  }
  if (size == 0) f[0] = NULL; /* no line at all */
  for (int i = 0; i < V_COUNT; i++) {
    if (f[i]) setenv(var_names[i], f[i], 1);
    else unsetenv(var_names[i]);
  }
  if (f[V_SIZE]) check_size(f[V_SIZE]);
  check_runtime(f);
  check_default_root(f);
  restore_env();
  free(text);
  return 0;
}
