/* SPDX-License-Identifier: MIT */
/*
 * test_abi_sizes.c -- the size rule of kcache.h ("Struct sizes") seen from
 * a program built against a NEWER kcache.h: a kc_options larger than this
 * library's is accepted when its extra bytes are 0 and refused (KC_EINVAL,
 * a message that gives both sizes) when they are not; a larger kc_stats is
 * only written (whatever it held), the counters this library lacks zeroed
 * and its size set to what was filled; a size of 0 or below the oldest
 * layout is refused; a kc_options that never went
 * through kc_options_init (size 0) is refused by kc_runtime_create.
 */
#include "kc_test.h"

#include <stddef.h>
#include <stdlib.h>

/* Fields only ever go at the end. The layout that shipped (the landed
 * 1bd9e74) ends log_level, checked, compile_threads: an application built
 * against it sets these two at these offsets (both are 4 bytes, so a swap
 * keeps the size, and no size check would notice an old program's
 * compile_threads turning checked mode on). */
_Static_assert(offsetof(kc_options, checked) == offsetof(kc_options, log_level) + sizeof(kc_log_level),
               "kc_options: checked follows log_level, as in the shipped layout");
_Static_assert(offsetof(kc_options, compile_threads) == offsetof(kc_options, checked) + sizeof(int),
               "kc_options: compile_threads follows checked, as in the shipped layout");

/* A field added since lies past the end of the 0.1 layout (compile_threads
 * and the padding to 8 bytes): else the struct would not grow, and a 0.1
 * library would accept and ignore it. */
_Static_assert(offsetof(kc_options, guard_launches) >=
                   (offsetof(kc_options, compile_threads) + sizeof(uint32_t) + 7) / 8 * 8,
               "kc_options: guard_launches lies in the 0.1 layout's tail padding");

/* A struct from a newer header: this library's plus fields it never knew. */
typedef struct {
  kc_options o;
  uint64_t newer[4];
} newer_options;
typedef struct {
  kc_stats s;
  uint64_t newer[4];
} newer_stats;

static void test_newer_options_zero_tail_accepted(void **state) {
  (void)state;
  newer_options n;
  memset(&n, 0x77, sizeof n);
  KCT_OK(NULL, kc_options_init_size(&n.o, sizeof n));
  assert_int_equal(n.o.size, sizeof n);
  for (int i = 0; i < 4; i++) assert_int_equal(n.newer[i], 0); /* the newer fields' defaults */
  assert_int_equal(n.o.platform_index, -1);
  n.o.cache_disable = 1;
  n.o.backend = kct_backend;
  kc_runtime *rt = NULL; /* not kct_runtime: it copies a kc_options, not the newer struct */
  KCT_OK(NULL, kc_runtime_create(&n.o, &rt));
  assert_string_equal(kc_runtime_backend(rt), kct_backend_name);
  kc_runtime_destroy(rt);
}

static void test_newer_options_set_tail_refused(void **state) {
  (void)state;
  newer_options n;
  KCT_OK(NULL, kc_options_init_size(&n.o, sizeof n));
  n.o.backend = kct_backend;
  n.newer[2] = 1; /* a field this library does not have, set */
  kc_runtime *rt = (kc_runtime *)&n;
  KCT_STATUS(NULL, KC_EINVAL, kc_runtime_create(&n.o, &rt));
  assert_null(rt);
  char want[160];
  snprintf(want, sizeof want, "kc_options of %zu bytes, this library knows %zu", sizeof n,
           sizeof(kc_options));
  KCT_CONTAINS(kc_errmsg(NULL), want);
  KCT_CONTAINS(kc_errmsg(NULL), "newer kcache.h");
}

static void test_options_without_size_refused(void **state) {
  (void)state;
  kc_options o;
  memset(&o, 0, sizeof o);
  o.backend = kct_backend;
  kc_runtime *rt = NULL;
  KCT_STATUS(NULL, KC_EINVAL, kc_runtime_create(&o, &rt));
  assert_null(rt);
  KCT_CONTAINS(kc_errmsg(NULL), "kc_options has size 0");
  KCT_CONTAINS(kc_errmsg(NULL), "kc_options_init");
  o.size = 8; /* below the oldest layout */
  KCT_STATUS(NULL, KC_EINVAL, kc_runtime_create(&o, &rt));
  KCT_CONTAINS(kc_errmsg(NULL), "kc_options of 8 bytes is smaller than the oldest layout");
  KCT_STATUS(NULL, KC_EINVAL, kc_options_init_size(&o, 0));
  KCT_STATUS(NULL, KC_EINVAL, kc_options_init_size(&o, 8));
  KCT_STATUS(NULL, KC_EINVAL, kc_options_init_size(NULL, sizeof o));
  KCT_OK(NULL, kc_options_init(&o)); /* the macro: this header's size */
  assert_int_equal(o.size, sizeof o);
}

static void test_newer_stats(void **state) {
  (void)state;
  kc_options o;
  kc_options_init(&o);
  o.cache_disable = 1;
  kc_runtime *rt = kct_runtime(&o);
  kct_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f; }");
  newer_stats n;
  memset(&n, 0, sizeof n);
  KCT_OK(rt, kc_stats_get_size(rt, &n.s, sizeof n));
  assert_int_equal(n.s.size, sizeof(kc_stats)); /* what this library filled */
  assert_int_equal(n.s.defines, 1);
  assert_int_equal(n.s.world, 2);
  for (int i = 0; i < 4; i++) assert_int_equal(n.newer[i], 0);

  /* written, never read: garbage in the caller's struct (not initialized)
   * changes nothing, and the counters this library lacks come back 0 */
  memset(&n, 0xa5, sizeof n);
  KCT_OK(rt, kc_stats_get_size(rt, &n.s, sizeof n));
  assert_int_equal(n.s.size, sizeof(kc_stats));
  assert_int_equal(n.s.defines, 1);
  for (int i = 0; i < 4; i++) assert_int_equal(n.newer[i], 0);

  kc_stats s;
  memset(&s, 0x5a, sizeof s);
  KCT_STATUS(rt, KC_EINVAL, kc_stats_get_size(rt, &s, 0));
  KCT_CONTAINS(kc_errmsg(rt), "kc_stats has size 0");
  KCT_STATUS(rt, KC_EINVAL, kc_stats_get_size(rt, &s, 16));
  KCT_CONTAINS(kc_errmsg(rt), "smaller than the oldest layout");
  assert_int_equal(s.compiles, 0x5a5a5a5a5a5a5a5aull); /* refused: nothing written */
  KCT_OK(rt, kc_stats_get(rt, &s));
  assert_int_equal(s.size, sizeof s);
  assert_int_equal(s.defines, 1);
  kct_destroy(rt);
}

KCT_MAIN(KCT_TEST(test_newer_options_zero_tail_accepted), KCT_TEST(test_newer_options_set_tail_refused),
         KCT_TEST(test_options_without_size_refused), KCT_TEST(test_newer_stats))
