/* SPDX-License-Identifier: MIT */
/*
 * kcache_old.h -- kcache.h as a program built against an older release
 * would have seen it: kc_options and kc_stats in their oldest accepted
 * layouts (kc_options up to alloc_ud, kc_stats up to collected: the
 * layouts before the disk cache and the remote tier grew them), with the
 * same size-passing macros, and the few functions test_abi_old.c calls.
 * Only what an old binary would have is here: it must never include
 * kcache.h, so the compiler sees the old layout alone.
 */
#ifndef KCACHE_OLD_H
#define KCACHE_OLD_H

#include <stddef.h>
#include <stdint.h>

typedef int kc_status; /* KC_OK is 0, KC_EINVAL is 1 (the status table's order) */
#define KC_OK 0
#define KC_EINVAL 1
typedef uint64_t kc_world;
typedef struct kc_runtime kc_runtime;
typedef struct kc_kernel kc_kernel;
typedef enum kc_backend_kind { KC_BACKEND_AUTO = 0, KC_BACKEND_HOST } kc_backend_kind;
typedef void *(*kc_alloc_fn)(void *ud, void *ptr, size_t new_size);

typedef struct kc_options {
  size_t size;
  kc_backend_kind backend;
  const char *compile_options;
  const char *host_cc;
  uint32_t compile_timeout_ms;
  const char *cache_dir;
  int platform_index;
  const char *device_name;
  kc_alloc_fn alloc;
  void *alloc_ud;
} kc_options;

typedef struct kc_stats {
  size_t size;
  uint64_t compiles;
  uint64_t compile_failures;
  uint64_t links;
  uint64_t fast_hits;
  uint64_t slow_lookups;
  uint64_t invalidations;
  uint64_t defines;
  uint64_t code_instances;
  kc_world world;
  uint64_t compile_ns;
  uint64_t definitions;
  uint64_t collected;
} kc_stats;

kc_status kc_options_init_size(kc_options *opt, size_t size);
#define kc_options_init(opt) kc_options_init_size((opt), sizeof(kc_options))
kc_status kc_stats_get_size(kc_runtime *rt, kc_stats *out, size_t size);
#define kc_stats_get(rt, out) kc_stats_get_size((rt), (out), sizeof(kc_stats))

kc_status kc_runtime_create(const kc_options *opt, kc_runtime **out);
void kc_runtime_destroy(kc_runtime *rt);
const char *kc_errmsg(const kc_runtime *rt);
const char *kc_status_name(kc_status s);
int kc_backend_available(kc_backend_kind kind, const char **why);
kc_status kc_define(kc_runtime *rt, const char *name, const char *source, kc_world *new_world);
kc_status kc_kernel_create(kc_runtime *rt, const char *name, const char *params, kc_kernel **out);
kc_status kc_kernel_compile(kc_kernel *k);

#endif /* KCACHE_OLD_H */
