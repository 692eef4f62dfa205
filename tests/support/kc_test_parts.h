/* SPDX-License-Identifier: MIT */
/*
 * kc_test_parts.h -- the key parts of synthetic disk-store entries, shared
 * by the store's tests (tests/store/) and the store's benchmark
 * (bench/kc_bench_store --scale), which write many entries through the
 * store's own functions (src/cache/) without compiling anything.
 *
 * Header-only and without cmocka, so that the benchmark, which links no
 * test support, includes it too (bench/CMakeLists.txt puts tests/support on
 * its include path). Needs the internal headers (kcache_internal).
 */
#ifndef KC_TEST_PARTS_H
#define KC_TEST_PARTS_H

#include "base/config.h"
#include "cache/cache.h"
#include "cache/key.h"
#include "kcache.h"

#include <stdio.h>
#include <string.h>

/* The parts of synthetic entry i, as the glue would fill them for kernel
 * "k" of the host backend specialized with I=<i>; identity names who made
 * it (its own entries' key space). params (len bytes) holds the
 * specialization text p points to. */
static inline void kct_entry_parts(size_t i, const char *identity, char *params, size_t len,
                                   kc__key_parts *p) {
  snprintf(params, len, "I=%zu", i);
  memset(p, 0, sizeof *p);
  p->format = KC__STORE_FORMAT;
  p->backend = "host";
  p->identity = identity;
  p->options = "";
  p->params = params;
  p->entry = "k";
  p->library = KC_VERSION_STRING;
}

/* A store at root with its own configuration: the directory and the bound
 * (max bytes; 0: the default) as options, the defaults for the rest (no
 * environment). NULL if it cannot be opened. */
static inline kc__cache *kct_store_open(const char *root, uint64_t max) {
  kc__config conf;
  kc__config_init(&conf, NULL);
  kc__config_set(&conf, KC__SET_CACHE_DIR, root, KC__FROM_OPTION, "cache_dir");
  if (max) {
    char text[32];
    snprintf(text, sizeof text, "%llu", (unsigned long long)max);
    kc__config_set(&conf, KC__SET_CACHE_MAXSIZE, text, KC__FROM_OPTION, "cache_max_size");
  }
  kc__cache *c = kc__cache_open(&(kc__cache_config){.conf = &conf});
  kc__config_free(&conf);
  return c;
}

#endif /* KC_TEST_PARTS_H */
