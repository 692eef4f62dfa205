/* SPDX-License-Identifier: MIT */
/*
 * test_settings.c -- the KC_* settings table (src/base/settings.h) and the
 * configuration resolved once (base/config.h, core/config.c): one parser
 * per kind (sizes, seconds, whole numbers, booleans, strings), the
 * getters' UNSET/SET/BAD states with the default on UNSET and BAD, the
 * precedence option > variable > file > default with each value's origin,
 * the environment read once, and the warning's text. Backend-independent.
 */
#include "kc_test.h"

#include "base/config.h"
#include "core/core.h" /* kc__config_resolve */

#include <stdlib.h>
#include <unistd.h>

static void test_parse_size(void **state) {
  (void)state;
  uint64_t v = 0;
  assert_true(kc__parse_size("0", &v) && v == 0);
  assert_true(kc__parse_size("100k", &v) && v == 100u * 1024);
  assert_true(kc__parse_size("512M", &v) && v == 512ull << 20);
  assert_true(kc__parse_size("1G", &v) && v == 1ull << 30);
  assert_true(kc__parse_size(" 1.5 GiB ", &v) && v == 3ull << 29);
  assert_true(kc__parse_size("2T", &v) && v == 2ull << 40);
  assert_true(kc__parse_size("64b", &v) && v == 64);
  v = 7;
  assert_false(kc__parse_size("", &v));
  assert_false(kc__parse_size("-1M", &v));
  assert_false(kc__parse_size("1X", &v));
  assert_false(kc__parse_size("M", &v));
  assert_false(kc__parse_size("1G junk", &v));
  assert_false(kc__parse_size("99999999999T", &v));
  assert_false(kc__parse_size(NULL, &v));
  assert_int_equal(v, 7); /* untouched on failure */
}

static void test_parse_seconds_and_u64(void **state) {
  (void)state;
  double s = -1;
  assert_true(kc__parse_seconds("30", &s) && s == 30);
  assert_true(kc__parse_seconds("0.5", &s) && s == 0.5);
  assert_true(kc__parse_seconds("0", &s) && s == 0);
  assert_false(kc__parse_seconds("", &s));
  assert_false(kc__parse_seconds("-1", &s));
  assert_false(kc__parse_seconds("5s", &s));
  assert_false(kc__parse_seconds("inf", &s));
  assert_false(kc__parse_seconds("nan", &s));
  uint64_t v = 0;
  assert_true(kc__parse_u64("5", &v, 1, 10) && v == 5);
  assert_false(kc__parse_u64("0", &v, 1, 10));
  assert_false(kc__parse_u64("11", &v, 1, 10));
  assert_false(kc__parse_u64("-3", &v, 0, 10));
  assert_false(kc__parse_u64(" 3", &v, 0, 10));
  assert_false(kc__parse_u64("3x", &v, 0, 10));
  assert_false(kc__parse_u64("99999999999999999999", &v, 0, UINT64_MAX));
}

/* The configuration of the environment as it is now (kc__config_read_env
 * alone: no options, no file). */
static kc__config *env_conf(kc__config *c) {
  kc__config_init(c, NULL);
  kc__config_read_env(c);
  return c;
}

/* Getters over a configuration: UNSET and BAD give the default, SET the
 * value; the environment is read when the configuration is made, never
 * after. */
static void test_getters(void **state) {
  (void)state;
  kc__config c;
  uint64_t v = 0;
  unsetenv("KC_CACHE_MAXSIZE");
  assert_int_equal(kc__config_size(env_conf(&c), KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_UNSET);
  assert_int_equal(v, 1ull << 30); /* "1G" */
  kc__config_free(&c);
  setenv("KC_CACHE_MAXSIZE", "", 1);
  assert_int_equal(kc__config_size(env_conf(&c), KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_UNSET);
  kc__config_free(&c);
  setenv("KC_CACHE_MAXSIZE", "2G", 1);
  assert_int_equal(kc__config_size(env_conf(&c), KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_SET);
  assert_int_equal(v, 2ull << 30);
  setenv("KC_CACHE_MAXSIZE", "lots", 1); /* after: the configuration keeps what it read */
  assert_int_equal(kc__config_size(&c, KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_SET);
  assert_int_equal(v, 2ull << 30);
  kc__config_free(&c);
  assert_int_equal(kc__config_size(env_conf(&c), KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_BAD);
  assert_int_equal(v, 1ull << 30);
  kc__config_free(&c);
  unsetenv("KC_CACHE_MAXSIZE");

  double secs = 0;
  setenv("KC_CACHE_LOCK_TIMEOUT", "2.5", 1);
  assert_int_equal(kc__config_seconds(env_conf(&c), KC__SET_CACHE_LOCK_TIMEOUT, &secs), KC__SETTING_SET);
  assert_true(secs == 2.5);
  kc__config_free(&c);
  setenv("KC_CACHE_LOCK_TIMEOUT", "soon", 1);
  assert_int_equal(kc__config_seconds(env_conf(&c), KC__SET_CACHE_LOCK_TIMEOUT, &secs), KC__SETTING_BAD);
  assert_true(secs == 60);
  kc__config_free(&c);
  unsetenv("KC_CACHE_LOCK_TIMEOUT");

  setenv("KC_REMOTE_TIMEOUT_MS", "700000", 1);
  assert_int_equal(kc__config_u64(env_conf(&c), KC__SET_REMOTE_TIMEOUT_MS, &v, 1, 600000), KC__SETTING_BAD);
  assert_int_equal(v, 5);
  kc__config_free(&c);
  setenv("KC_REMOTE_TIMEOUT_MS", "250", 1);
  assert_int_equal(kc__config_u64(env_conf(&c), KC__SET_REMOTE_TIMEOUT_MS, &v, 1, 600000), KC__SETTING_SET);
  assert_int_equal(v, 250);
  kc__config_free(&c);
  unsetenv("KC_REMOTE_TIMEOUT_MS");

  bool b = true;
  unsetenv("KC_CACHE_DISABLE");
  assert_int_equal(kc__config_bool(env_conf(&c), KC__SET_CACHE_DISABLE, &b), KC__SETTING_UNSET);
  assert_false(b);
  kc__config_free(&c);
  setenv("KC_CACHE_DISABLE", "0", 1);
  assert_int_equal(kc__config_bool(env_conf(&c), KC__SET_CACHE_DISABLE, &b), KC__SETTING_SET);
  assert_false(b);
  kc__config_free(&c);
  setenv("KC_CACHE_DISABLE", "yes", 1); /* anything but "0" is true, as kcache always read it */
  assert_int_equal(kc__config_bool(env_conf(&c), KC__SET_CACHE_DISABLE, &b), KC__SETTING_SET);
  assert_true(b);
  kc__config_free(&c);
  unsetenv("KC_CACHE_DISABLE");
  /* NULL: the defaults */
  assert_int_equal(kc__config_bool(NULL, KC__SET_CACHE_DISABLE, &b), KC__SETTING_UNSET);
  assert_false(b);
  assert_string_equal(kc__config_str(NULL, KC__SET_REMOTE_PREFIX), "kcache:");
}

static void test_strings_and_names(void **state) {
  (void)state;
  const char *saved = getenv("KC_HOST_CC");
  char keep[256] = "";
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  kc__config c;
  unsetenv("KC_HOST_CC");
  assert_string_equal(kc__config_str(env_conf(&c), KC__SET_HOST_CC), "cc");
  assert_null(kc__config_text(&c, KC__SET_HOST_CC));
  kc__config_free(&c);
  setenv("KC_HOST_CC", "", 1);
  assert_string_equal(kc__config_str(env_conf(&c), KC__SET_HOST_CC), "cc"); /* empty counts as unset */
  kc__config_free(&c);
  setenv("KC_HOST_CC", "tcc -w", 1);
  assert_string_equal(kc__config_str(env_conf(&c), KC__SET_HOST_CC), "tcc -w");
  assert_int_equal(kc__config_origin(&c, KC__SET_HOST_CC), KC__FROM_ENV);
  assert_string_equal(kc__config_from(&c, KC__SET_HOST_CC), "environment");
  kc__config_free(&c);
  if (saved) setenv("KC_HOST_CC", keep, 1);
  else unsetenv("KC_HOST_CC");
  /* a TEXT setting: empty is a value (a key prefix may be empty) */
  const char *pfx = getenv("KC_REMOTE_PREFIX");
  char keep_pfx[256] = "";
  if (pfx) snprintf(keep_pfx, sizeof keep_pfx, "%s", pfx);
  setenv("KC_REMOTE_PREFIX", "", 1);
  assert_string_equal(kc__config_str(env_conf(&c), KC__SET_REMOTE_PREFIX), "");
  kc__config_free(&c);
  if (pfx) setenv("KC_REMOTE_PREFIX", keep_pfx, 1);
  else unsetenv("KC_REMOTE_PREFIX");
  if (!getenv("KC_REMOTE_KEY")) { /* no default */
    assert_null(kc__config_str(env_conf(&c), KC__SET_REMOTE_KEY));
    kc__config_free(&c);
  }
  /* every row has a KC_ name and a doc line */
  for (int i = 0; i < KC__SETTING_COUNT; i++) {
    assert_memory_equal(kc__setting_name((kc__setting)i), "KC_", 3);
    assert_true(strlen(kc__setting_doc((kc__setting)i)) > 10);
  }
  assert_string_equal(kc__setting_name(KC__SET_REMOTE_MAX_ENTRY), "KC_REMOTE_MAX_ENTRY");
}

/* The one resolution (kc__config_resolve): an option that is set wins over
 * the variable, which wins over the default; each row says where it came
 * from; a flag option that is off leaves the variable's word; the
 * environment is read once. */
static void test_resolution(void **state) {
  (void)state;
  setenv("KC_HOST_CC", "tcc", 1);
  setenv("KC_REMOTE_TIMEOUT_MS", "40", 1);
  setenv("KC_CACHE_DISABLE", "1", 1);
  setenv("KC_CACHE_DIR", "/nowhere/kc-settings-test", 1);
  unsetenv("KC_CACHE_LOCK_TIMEOUT");
  kc_options o;
  kc_options_init(&o);
  o.host_cc = "gcc -O1";
  o.remote_lock_timeout_ms = 2500;
  o.backend = KC_BACKEND_HOST;
  o.cache_disable = 0; /* off: KC_CACHE_DISABLE=1 stands */
  kc__config c;
  assert_int_equal(kc__config_resolve(&o, NULL, &c), KC_OK);
  assert_string_equal(kc__config_str(&c, KC__SET_HOST_CC), "gcc -O1");
  assert_int_equal(kc__config_origin(&c, KC__SET_HOST_CC), KC__FROM_OPTION);
  assert_string_equal(kc__config_from(&c, KC__SET_HOST_CC), "kc_options.host_cc");
  assert_string_equal(kc__config_str(&c, KC__SET_BACKEND), "host");
  uint64_t v;
  assert_int_equal(kc__config_u64(&c, KC__SET_REMOTE_TIMEOUT_MS, &v, 1, 600000), KC__SETTING_SET);
  assert_int_equal(v, 40);
  assert_int_equal(kc__config_origin(&c, KC__SET_REMOTE_TIMEOUT_MS), KC__FROM_ENV);
  double secs;
  assert_int_equal(kc__config_seconds(&c, KC__SET_REMOTE_LOCK_TIMEOUT, &secs), KC__SETTING_SET);
  assert_true(secs == 2.5);
  assert_int_equal(kc__config_seconds(&c, KC__SET_CACHE_LOCK_TIMEOUT, &secs), KC__SETTING_UNSET);
  assert_true(secs == 60);
  bool off = false;
  assert_int_equal(kc__config_bool(&c, KC__SET_CACHE_DISABLE, &off), KC__SETTING_SET);
  assert_true(off);
  assert_string_equal(kc__config_str(&c, KC__SET_CACHE_DIR), "/nowhere/kc-settings-test");
  char what[256];
  assert_string_equal(kc__config_what(&c, KC__SET_HOST_CC, what, sizeof what),
                      "kc_options.host_cc = \"gcc -O1\"");
  assert_string_equal(kc__config_what(&c, KC__SET_REMOTE_TIMEOUT_MS, what, sizeof what),
                      "KC_REMOTE_TIMEOUT_MS=\"40\"");
  setenv("KC_HOST_CC", "cc", 1); /* read once: the configuration keeps what it read */
  o.host_cc = NULL;
  assert_string_equal(kc__config_str(&c, KC__SET_HOST_CC), "gcc -O1");
  kc__config_free(&c);
  /* the default cache directory from HOME when nothing names one */
  unsetenv("KC_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  char keep_xdg[1024] = "";
  if (xdg) snprintf(keep_xdg, sizeof keep_xdg, "%s", xdg);
  unsetenv("XDG_CACHE_HOME");
  assert_int_equal(kc__config_resolve(NULL, NULL, &c), KC_OK);
  const char *home = getenv("HOME");
  if (home && *home) {
    char want[1200];
    snprintf(want, sizeof want, "%s/.cache/kcache", home);
    assert_string_equal(kc__config_str(&c, KC__SET_CACHE_DIR), want);
    assert_int_equal(kc__config_origin(&c, KC__SET_CACHE_DIR), KC__FROM_DEFAULT);
    assert_string_equal(kc__config_from(&c, KC__SET_CACHE_DIR), "default: HOME");
  }
  kc__config_free(&c);
  if (xdg) setenv("XDG_CACHE_HOME", keep_xdg, 1);
  unsetenv("KC_HOST_CC");
  unsetenv("KC_REMOTE_TIMEOUT_MS");
  unsetenv("KC_CACHE_DISABLE");
}

/* The warning names the value as where it came from, what it takes and the
 * fallback. */
static void test_warning_text(void **state) {
  (void)state;
  char path[] = "/tmp/kc-settings-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  dup2(fd, 2);
  setenv("KC_CACHE_MAXSIZE", "huge", 1);
  kc__config c;
  kc__config_warn(NULL, env_conf(&c), KC__SET_CACHE_MAXSIZE, "1G");
  kc__config_free(&c);
  unsetenv("KC_CACHE_MAXSIZE");
  kc__config_init(&c, NULL);
  kc__config_set(&c, KC__SET_COMPILE_THREADS, "many", KC__FROM_OPTION, "--threads");
  kc__config_warn(NULL, &c, KC__SET_COMPILE_THREADS, "one per core");
  kc__config_free(&c);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char buf[1024] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  assert_true(n > 0);
  KCT_CONTAINS(buf, "kcache: warning: KC_CACHE_MAXSIZE=\"huge\" is not a size (e.g. 500M, 2G); using 1G");
  KCT_CONTAINS(buf,
               "kcache: warning: --threads = \"many\" is not a whole number in range; using one per core");
}

KCT_MAIN_INIT_ONLY(KCT_TEST(test_parse_size), KCT_TEST(test_parse_seconds_and_u64), KCT_TEST(test_getters),
                   KCT_TEST(test_strings_and_names), KCT_TEST(test_resolution), KCT_TEST(test_warning_text))
