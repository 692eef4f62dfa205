/* SPDX-License-Identifier: MIT */
/*
 * runtime.c -- owns the runtime's life: options, kc_runtime_create (the
 * backend picked in src/backends/registry.c) and kc__runtime_open, whose
 * steps unwind through a libuv-style fail_ ladder, kc_runtime_destroy,
 * device queries and kc_stats_get.
 */
#include "core/core.h"
#include "core/cache_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- options */

void kc_options_init(kc_options *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof *opt);
  opt->backend = KC_BACKEND_AUTO;
  opt->platform_index = -1;
}

/* -------------------------------------------------------------- runtime */

kc_status kc_runtime_create(const kc_options *user_opt, kc_runtime **out) {
  if (!out) return kc__err(NULL, KC_EINVAL, "kc_runtime_create: out is NULL");
  *out = NULL;
  const kc__backend *be = NULL;
  kc_status st = kc__backend_pick(user_opt ? user_opt->backend : KC_BACKEND_AUTO, &be);
  if (st) return st;
#ifdef KC_FAULT_INJECTION
  be = kc__fault_wrap_backend(be); /* tests: counts and fails backend calls (src/testing) */
#endif
  return kc__runtime_open(user_opt, be, out);
}

/* The runtime's copies of the option strings (the caller's may go away). */
static bool dup_options(kc_runtime *rt, const kc_options *opt) {
  const char *cc = opt->host_cc ? opt->host_cc : kc__setting_str(KC__SET_HOST_CC); /* "cc" when unset */
  struct {
    char **field;
    const char *value;
  } dups[] = {{&rt->compile_options, opt->compile_options},
              {&rt->host_cc, cc && *cc ? cc : "cc"},
              {&rt->cache_dir, opt->cache_dir},
              {&rt->device_name, opt->device_name}};
  for (size_t i = 0; i < sizeof dups / sizeof *dups; i++)
    if (dups[i].value && !(*dups[i].field = kc__strdup(rt, dups[i].value))) return false;
  rt->opt.compile_options = rt->compile_options;
  rt->opt.host_cc = rt->host_cc;
  rt->opt.cache_dir = rt->cache_dir;
  rt->opt.device_name = rt->device_name;
  return true;
}

static void free_options(kc_runtime *rt) {
  kc__free(rt, rt->compile_options);
  kc__free(rt, rt->host_cc);
  kc__free(rt, rt->cache_dir);
  kc__free(rt, rt->device_name);
}

/* Each step that can fail jumps to the label that undoes the steps before
 * it, in reverse order (libuv's fail_ ladder). */
kc_status kc__runtime_open(const kc_options *user_opt, const kc__backend *be, kc_runtime **out) {
  if (!out) return kc__err(NULL, KC_EINVAL, "kc__runtime_open: out is NULL");
  *out = NULL;
  if (!be || !be->open || !be->close)
    return kc__err(NULL, KC_EINVAL, "kc__runtime_open: not a backend table");
  kc_options opt;
  if (user_opt) opt = *user_opt;
  else kc_options_init(&opt);
  kc__heap heap = {opt.alloc ? opt.alloc : kc__libc_alloc, opt.alloc_ud};
  kc_runtime *rt = heap.fn(heap.ud, NULL, sizeof *rt);
  if (!rt) return kc__err(NULL, KC_ENOMEM, "kc_runtime_create: out of memory");
  memset(rt, 0, sizeof *rt);
  rt->heap = heap;
  rt->id = kc__next_id();
  rt->be = be;
  atomic_init(&rt->world, 1);
  atomic_init(&rt->fast_world, 1);
  rt->opt = opt;
  kc_status st;
#define KC__OOM(label)                                                         \
  do {                                                                         \
    st = kc__err(NULL, KC_ENOMEM, "kc_runtime_create: out of memory");        \
    goto label;                                                                \
  } while (0)
  if (!dup_options(rt, &opt)) KC__OOM(fail_options);
  if (!kc__mutex_init(&rt->world_lock)) KC__OOM(fail_options);
  if (!kc__mutex_init(&rt->spec_lock)) KC__OOM(fail_spec_lock);
  if (!kc__mutex_init(&rt->ctx_lock)) KC__OOM(fail_ctx_lock);
  if (!kc__mutex_init(&rt->kernels_lock)) KC__OOM(fail_kernels_lock);
#undef KC__OOM
  const kc__bsvc svc = kc__bsvc_of(rt); /* the backend keeps a copy */
  st = be->open(&svc, &rt->opt, &rt->bstate);
  if (st) goto fail_open;
  kc__store_open(rt); /* never fails: without a disk cache, code stays in memory */
  *out = rt;
  return KC_OK;

fail_open:
  kc__err(NULL, st, "%s", kc_errmsg(rt)); /* no runtime to ask afterwards */
  kc__mutex_destroy(&rt->kernels_lock);
fail_kernels_lock:
  kc__mutex_destroy(&rt->ctx_lock);
fail_ctx_lock:
  kc__mutex_destroy(&rt->spec_lock);
fail_spec_lock:
  kc__mutex_destroy(&rt->world_lock);
fail_options:
  free_options(rt);
  heap.fn(heap.ud, rt, 0);
  return st;
}

void kc_runtime_destroy(kc_runtime *rt) {
  if (!rt) return;
  kc__drop_own_pin(rt); /* the caller's own pin dies with it */
  for (kc_context *c = rt->contexts, *next; c; c = next) {
    next = c->next;
    if (kc__load_relaxed(&c->alive)) kc__context_teardown(c);
    kc__mutex_destroy(&c->lock);
    KC__HTAB_FREE(&rt->heap, &c->linked);
    for (kc_buffer *b = c->free_buffers, *next; b; b = next) {
      next = b->next;
      kc__free(rt, b);
    }
    kc__free(rt, c);
  }
  for (kc_kernel *k = rt->kernels, *next; k; k = next) {
    next = k->next;
    for (kc_args *a = k->bound, *an; a; a = an) {
      an = a->next;
      kc__free(rt, a);
    }
    kc__free(rt, k);
  }
  KC__HTAB_EACH(&rt->specs, kc__spec, s, next_in_bucket) {
      for (kc__ci *ci = kc__load_relaxed(&s->head), *older; ci; ci = older) {
        older = ci->next;
        kc__ci_free(rt, ci);
      }
      for (kc__linked *l = s->free_linked, *next; l; l = next) {
        next = l->next_in_bucket;
        kc__free(rt, l);
      }
      kc__mutex_destroy(&s->lock);
      kc__mutex_destroy(&s->free_lock);
      kc__free(rt, s->name);
      kc__free(rt, s->params);
      kc__free(rt, s);
    }
  KC__HTAB_FREE(&rt->heap, &rt->specs);
  kc__table_free(rt);
  kc__store_close(rt);
  rt->be->close(rt->bstate);
  kc__mutex_destroy(&rt->world_lock);
  kc__mutex_destroy(&rt->spec_lock);
  kc__mutex_destroy(&rt->ctx_lock);
  kc__mutex_destroy(&rt->kernels_lock);
  kc__free(rt, rt->pins);
  free_options(rt);
  kc__heap heap = rt->heap;
  heap.fn(heap.ud, rt, 0);
}

const char *kc_runtime_backend(const kc_runtime *rt) { return rt ? rt->be->name : NULL; }

int kc_device_count(const kc_runtime *rt) { return rt ? rt->be->device_count(rt->bstate) : 0; }

const char *kc_device_name(const kc_runtime *rt, int index) {
  if (!rt || index < 0 || index >= kc_device_count(rt)) return NULL;
  return rt->be->device_name(rt->bstate, index);
}

/* ------------------------------------------------------------ statistics */

void kc_stats_get(kc_runtime *rt, kc_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!rt) return;
  out->compiles = kc__load_relaxed(&rt->n_compiles);
  out->compile_failures = kc__load_relaxed(&rt->n_compile_failures);
  out->links = kc__load_relaxed(&rt->n_links);
  out->slow_lookups = kc__load_relaxed(&rt->n_slow);
  out->invalidations = kc__load_relaxed(&rt->n_invalidations);
  out->defines = kc__load_relaxed(&rt->n_defines);
  out->code_instances = kc__load_relaxed(&rt->n_cis);
  out->compile_ns = kc__load_relaxed(&rt->compile_ns);
  out->world = kc__load_acquire(&rt->world);
  out->definitions = kc__load_relaxed(&rt->n_defs);
  out->collected = kc__load_relaxed(&rt->n_collected);
  kc__store_stats(rt, out);
  kc__lock(&rt->kernels_lock);
  out->fast_hits = rt->dead_kernel_hits;
  for (kc_kernel *k = rt->kernels; k; k = k->next) {
    out->fast_hits += kc__load_relaxed(&k->fast_hits);
    for (const kc_args *a = k->bound; a; a = a->next) out->fast_hits += kc__load_relaxed(&a->hits);
  }
  kc__unlock(&rt->kernels_lock);
}

