/* SPDX-License-Identifier: MIT */
/*
 * test_settings.c -- the KC_* settings table (src/base/settings.h): one
 * parser per kind (sizes, seconds, whole numbers, booleans, strings), the
 * getters' UNSET/SET/BAD states with the default on UNSET and BAD, values
 * read again on every call, and the warning's text. Backend-independent.
 */
#include "kc_test.h"

#include "base/settings.h"

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

/* Getters read the environment on each call; UNSET and BAD give the
 * default, SET the value. */
static void test_getters(void **state) {
  (void)state;
  uint64_t v = 0;
  unsetenv("KC_CACHE_MAXSIZE");
  assert_int_equal(kc__setting_size(KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_UNSET);
  assert_int_equal(v, 1ull << 30); /* "1G" */
  setenv("KC_CACHE_MAXSIZE", "", 1);
  assert_int_equal(kc__setting_size(KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_UNSET);
  setenv("KC_CACHE_MAXSIZE", "2G", 1);
  assert_int_equal(kc__setting_size(KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_SET);
  assert_int_equal(v, 2ull << 30);
  setenv("KC_CACHE_MAXSIZE", "lots", 1);
  assert_int_equal(kc__setting_size(KC__SET_CACHE_MAXSIZE, &v), KC__SETTING_BAD);
  assert_int_equal(v, 1ull << 30);
  unsetenv("KC_CACHE_MAXSIZE");

  double secs = 0;
  setenv("KC_CACHE_LOCK_TIMEOUT", "2.5", 1);
  assert_int_equal(kc__setting_seconds(KC__SET_CACHE_LOCK_TIMEOUT, &secs), KC__SETTING_SET);
  assert_true(secs == 2.5);
  setenv("KC_CACHE_LOCK_TIMEOUT", "soon", 1);
  assert_int_equal(kc__setting_seconds(KC__SET_CACHE_LOCK_TIMEOUT, &secs), KC__SETTING_BAD);
  assert_true(secs == 60);
  unsetenv("KC_CACHE_LOCK_TIMEOUT");

  setenv("KC_REMOTE_TIMEOUT_MS", "700000", 1);
  assert_int_equal(kc__setting_u64(KC__SET_REMOTE_TIMEOUT_MS, &v, 1, 600000), KC__SETTING_BAD);
  assert_int_equal(v, 5);
  setenv("KC_REMOTE_TIMEOUT_MS", "250", 1);
  assert_int_equal(kc__setting_u64(KC__SET_REMOTE_TIMEOUT_MS, &v, 1, 600000), KC__SETTING_SET);
  assert_int_equal(v, 250);
  unsetenv("KC_REMOTE_TIMEOUT_MS");

  bool b = true;
  unsetenv("KC_CACHE_DISABLE");
  assert_int_equal(kc__setting_bool(KC__SET_CACHE_DISABLE, &b), KC__SETTING_UNSET);
  assert_false(b);
  setenv("KC_CACHE_DISABLE", "0", 1);
  assert_int_equal(kc__setting_bool(KC__SET_CACHE_DISABLE, &b), KC__SETTING_SET);
  assert_false(b);
  setenv("KC_CACHE_DISABLE", "yes", 1); /* anything but "0" is true, as kcache always read it */
  assert_int_equal(kc__setting_bool(KC__SET_CACHE_DISABLE, &b), KC__SETTING_SET);
  assert_true(b);
  unsetenv("KC_CACHE_DISABLE");

  /* a getter of the wrong kind is refused, not misparsed */
  assert_int_equal(kc__setting_size(KC__SET_CACHE_DISABLE, &v), KC__SETTING_BAD);
}

static void test_strings_and_names(void **state) {
  (void)state;
  const char *saved = getenv("KC_HOST_CC");
  char keep[256] = "";
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  unsetenv("KC_HOST_CC");
  assert_string_equal(kc__setting_str(KC__SET_HOST_CC), "cc");
  assert_null(kc__setting_raw(KC__SET_HOST_CC));
  setenv("KC_HOST_CC", "", 1);
  assert_string_equal(kc__setting_str(KC__SET_HOST_CC), "cc"); /* empty counts as unset */
  assert_string_equal(kc__setting_raw(KC__SET_HOST_CC), "");
  setenv("KC_HOST_CC", "tcc -w", 1);
  assert_string_equal(kc__setting_str(KC__SET_HOST_CC), "tcc -w");
  if (saved) setenv("KC_HOST_CC", keep, 1);
  else unsetenv("KC_HOST_CC");
  if (!getenv("KC_REMOTE_KEY")) assert_null(kc__setting_str(KC__SET_REMOTE_KEY)); /* no default */
  /* every row has a KC_ name and a doc line */
  for (int i = 0; i < KC__SETTING_COUNT; i++) {
    assert_memory_equal(kc__setting_name((kc__setting)i), "KC_", 3);
    assert_true(strlen(kc__setting_doc((kc__setting)i)) > 10);
  }
  assert_string_equal(kc__setting_name(KC__SET_REMOTE_MAX_ENTRY), "KC_REMOTE_MAX_ENTRY");
}

/* The warning names the variable, its value, what it takes and the fallback. */
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
  kc__setting_warn(KC__SET_CACHE_MAXSIZE, "1G");
  unsetenv("KC_CACHE_MAXSIZE");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char buf[512] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  assert_true(n > 0);
  KCT_CONTAINS(buf, "kcache: warning: KC_CACHE_MAXSIZE=\"huge\" is not a size (e.g. 500M, 2G); using 1G");
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_parse_size),        KCT_TEST(test_parse_seconds_and_u64), KCT_TEST(test_getters),
      KCT_TEST(test_strings_and_names), KCT_TEST(test_warning_text),
  };
  return KCT_RUN(tests);
}
