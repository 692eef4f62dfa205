/* SPDX-License-Identifier: MIT */
/*
 * test_abi_old.c -- a program built against an older kcache.h (kcache_old.h:
 * kc_options and kc_stats in their oldest layouts) runs against this
 * library: kc_options_init and kc_stats_get touch no byte past the old
 * structs (guard bytes after each stay as they were), kc_runtime_create
 * reads the old options' fields (the allocator hook at their very end is
 * used) and reads nothing past them (the guard bytes would be a log hook, a
 * cache switch and sizes if it did), and the counters come back in the old
 * layout. Exits 77 (skipped) without the host backend's compiler.
 */
#include "kcache_old.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 0xA5
#define GUARD_BYTES 512

static int failures;
#define CHECK(cond) \
  do { \
    if (!(cond)) { \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++; \
    } \
  } while (0)

static int guard_intact(const unsigned char *g) {
  for (size_t i = 0; i < GUARD_BYTES; i++)
    if (g[i] != GUARD) return 0;
  return 1;
}

static size_t allocs;
static void *counting_alloc(void *ud, void *ptr, size_t new_size) {
  (void)ud;
  if (!new_size) {
    free(ptr);
    return NULL;
  }
  allocs++;
  return realloc(ptr, new_size);
}

int main(void) {
  const char *why = NULL;
  if (!kc_backend_available(KC_BACKEND_HOST, &why)) {
    printf("SKIPPED: host backend unavailable: %s\n", why ? why : "?");
    return 77;
  }
  static struct {
    kc_options o;
    unsigned char guard[GUARD_BYTES];
  } ob;
  memset(&ob, GUARD, sizeof ob);
  CHECK(kc_options_init(&ob.o) == KC_OK);
  CHECK(guard_intact(ob.guard));
  CHECK(ob.o.size == sizeof(kc_options));
  CHECK(ob.o.platform_index == -1 && ob.o.host_cc == NULL && ob.o.alloc == NULL);
  ob.o.backend = KC_BACKEND_HOST;
  ob.o.alloc = counting_alloc;

  kc_runtime *rt = NULL;
  kc_status st = kc_runtime_create(&ob.o, &rt);
  if (st != KC_OK) {
    fprintf(stderr, "kc_runtime_create with the old kc_options: %s: %s\n", kc_status_name(st),
            kc_errmsg(NULL));
    return 1;
  }
  CHECK(allocs > 0); /* the last field of the old layout was read */
  CHECK(kc_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f; }", NULL) ==
        KC_OK);
  kc_kernel *k = NULL;
  CHECK(kc_kernel_create(rt, "k", "", &k) == KC_OK);
  st = k ? kc_kernel_compile(k) : KC_EINVAL;
  if (st) fprintf(stderr, "kc_kernel_compile: %s: %s\n", kc_status_name(st), kc_errmsg(rt));
  CHECK(st == KC_OK);

  static struct {
    kc_stats s;
    unsigned char guard[GUARD_BYTES];
  } sb;
  memset(&sb, GUARD, sizeof sb);
  CHECK(kc_stats_get(rt, &sb.s) == KC_OK);
  CHECK(guard_intact(sb.guard));
  CHECK(sb.s.size == sizeof(kc_stats));
  CHECK(sb.s.defines == 1);
  CHECK(sb.s.compiles + sb.s.code_instances >= 1); /* compiled, or a disk hit made the code instance */
  CHECK(sb.s.code_instances == 1);
  CHECK(sb.s.world == 2);
  CHECK(sb.s.collected == 0);

  /* A struct smaller than the oldest layout is refused, and left alone. */
  memset(&sb, GUARD, sizeof sb);
  CHECK(kc_stats_get_size(rt, &sb.s, offsetof(kc_stats, collected)) == KC_EINVAL);
  CHECK(strstr(kc_errmsg(rt), "smaller than the oldest layout") != NULL);
  CHECK(sb.s.size == (size_t)0xA5A5A5A5A5A5A5A5ull && guard_intact(sb.guard));
  CHECK(kc_options_init_size(&ob.o, offsetof(kc_options, alloc_ud)) == KC_EINVAL);
  kc_runtime_destroy(rt);

  if (failures) fprintf(stderr, "%d checks failed\n", failures);
  else
    printf("ok: old layouts (kc_options %zu bytes, kc_stats %zu bytes) work against this library\n",
           sizeof(kc_options), sizeof(kc_stats));
  return failures ? 1 : 0;
}
