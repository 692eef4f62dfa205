/* SPDX-License-Identifier: MIT */
/*
 * runtime.c -- owns the runtime's life: options, kc_runtime_create (the
 * backend picked in src/backends/registry.c) and kc__runtime_open, whose
 * steps unwind through a libuv-style fail_ ladder, kc_runtime_destroy,
 * device queries and kc_stats_get; the size rule of kc_options and kc_stats
 * (kcache.h, "Struct sizes").
 */
#include "core/core.h"
#include "core/cache_glue.h"
#ifdef KC_FAULT_INJECTION
#include "testing/fault.h" /* tests: the backend proxy */
#endif

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- options */

/* Guarded launches (kcache.h, kc_options.guard_launches): the option, else
 * $KC_GUARD_LAUNCHES (the resolved configuration). */
static void guard_setup(kc_runtime *rt) {
  bool on = false;
  if (kc__config_bool(&rt->conf, KC__SET_GUARD_LAUNCHES, &on) == KC__SETTING_BAD)
    kc__config_warn(&rt->log, &rt->conf, KC__SET_GUARD_LAUNCHES, "0");
  rt->guarded = on;
}

/* The oldest layouts accepted (kcache.h, "Struct sizes"): the fields
 * before the disk cache and the remote tier grew the structs. */
#define KC__OPTIONS_MIN_SIZE KC__END_OF(kc_options, alloc_ud)
#define KC__STATS_MIN_SIZE KC__END_OF(kc_stats, collected)

kc_status kc_options_init_size(kc_options *opt, size_t size) {
  if (!opt) return kc__err(NULL, KC_EINVAL, "kc_options_init: opt is NULL");
  kc_status st = kc__abi_check(NULL, "kc_options", KC__INIT_HINT(kc_options_init, kc_options), NULL, size,
                               KC__OPTIONS_MIN_SIZE, sizeof *opt);
  if (st) return st;
  kc_options d;
  memset(&d, 0, sizeof d);
  d.size = size;
  d.backend = KC_BACKEND_AUTO;
  d.platform_index = -1;
  memset(opt, 0, size); /* a newer caller's fields: 0, their default */
  memcpy(opt, &d, size < sizeof d ? size : sizeof d);
  return KC_OK;
}

/* The caller's options as this library's struct: its first opt->size
 * bytes over the defaults (NULL: the defaults). */
static kc_status options_read(const kc_options *user, kc_options *out) {
  kc_options_init(out);
  if (!user) return KC_OK;
  kc_status st = kc__abi_check(NULL, "kc_options", KC__INIT_HINT(kc_options_init, kc_options), user,
                               user->size, KC__OPTIONS_MIN_SIZE, sizeof *out);
  if (st) return st;
  memcpy(out, user, user->size < sizeof *out ? user->size : sizeof *out);
  out->size = sizeof *out;
  if (out->reserved0)
    return kc__err(NULL, KC_EINVAL, "kc_options.reserved0 is %u: it must be 0 (kc_options_init sets it)",
                   out->reserved0);
  return KC_OK;
}

/* -------------------------------------------------------------- runtime */

static kc_status runtime_open(kc_runtime *rt, const kc_options *opt, const kc__backend *be, kc_runtime **out);

/* The runtime's memory (the first block the caller's allocator gives) and
 * its configuration, resolved once (config.c). */
static kc_status runtime_alloc(const kc_options *opt, kc_runtime **out) {
  kc__heap heap = {opt->alloc ? opt->alloc : kc__libc_alloc, opt->alloc_ud};
  kc_runtime *rt = heap.fn(heap.ud, NULL, sizeof *rt);
  if (!rt) return kc__err(NULL, KC_ENOMEM, "kc_runtime_create: out of memory");
  memset(rt, 0, sizeof *rt);
  rt->heap = heap;
  kc_status st = kc__config_resolve(opt, &rt->heap, &rt->conf);
  if (st) {
    heap.fn(heap.ud, rt, 0);
    return st;
  }
  *out = rt;
  return KC_OK;
}

/* What runtime_alloc made, given back. */
static void runtime_unalloc(kc_runtime *rt) {
  kc__config_free(&rt->conf);
  kc__heap heap = rt->heap;
  heap.fn(heap.ud, rt, 0);
}

/* The backend to run: the option, else KC_BACKEND, else the first that can
 * run here with the configuration. */
static kc_status pick(const kc_options *opt, const kc__config *conf, const kc__backend **be) {
  kc__bconfig b;
  kc__bconfig_make(conf, opt, &b, NULL, false);
  char what[256];
  return kc__backend_pick(opt->backend, kc__config_text(conf, KC__SET_BACKEND),
                          kc__config_what(conf, KC__SET_BACKEND, what, sizeof what), &b, be);
}

kc_status kc_runtime_create(const kc_options *user_opt, kc_runtime **out) {
  if (!out) return kc__err(NULL, KC_EINVAL, "kc_runtime_create: out is NULL");
  *out = NULL;
  kc_options opt;
  kc_status st = options_read(user_opt, &opt);
  if (st) return st;
  kc_runtime *rt;
  if ((st = runtime_alloc(&opt, &rt))) return st;
  const kc__backend *be = NULL;
  if ((st = pick(&opt, &rt->conf, &be))) {
    runtime_unalloc(rt);
    return st;
  }
#ifdef KC_FAULT_INJECTION
  be = kc__fault_wrap_backend(be); /* tests: counts and fails backend calls (src/testing) */
#endif
  return runtime_open(rt, &opt, be, out);
}

kc_status kc__runtime_open(const kc_options *user_opt, const kc__backend *be, kc_runtime **out) {
  if (!out) return kc__err(NULL, KC_EINVAL, "kc__runtime_open: out is NULL");
  *out = NULL;
  if (!be || !be->open || !be->close)
    return kc__err(NULL, KC_EINVAL, "kc__runtime_open: not a backend table");
  kc_options opt;
  kc_status st = options_read(user_opt, &opt);
  if (st) return st;
  kc_runtime *rt;
  if ((st = runtime_alloc(&opt, &rt))) return st;
  return runtime_open(rt, &opt, be, out);
}

/* The runtime's copies of the option strings (the caller's may go away):
 * the backend's alone; the settings' are the configuration's. */
static bool dup_options(kc_runtime *rt, const kc_options *opt) {
  struct {
    char **field;
    const char *value;
  } dups[] = {{&rt->compile_options, opt->compile_options}, {&rt->device_name, opt->device_name}};
  for (size_t i = 0; i < sizeof dups / sizeof *dups; i++)
    if (dups[i].value && !(*dups[i].field = kc__strdup(rt, dups[i].value))) return false;
  rt->opt.compile_options = rt->compile_options;
  rt->opt.device_name = rt->device_name;
  /* the settings' strings were read once, into the configuration */
  rt->opt.host_cc = rt->opt.cache_dir = NULL;
  rt->opt.remote_url = rt->opt.remote_prefix = rt->opt.remote_key = NULL;
  return true;
}

static void free_options(kc_runtime *rt) {
  kc__free(rt, rt->compile_options);
  kc__free(rt, rt->device_name);
}

/* Each step that can fail jumps to the label that undoes the steps before
 * it, in reverse order (libuv's fail_ ladder). rt: runtime_alloc's. */
static kc_status runtime_open(kc_runtime *rt, const kc_options *opt, const kc__backend *be,
                              kc_runtime **out) {
  kc_status st;
  rt->id = kc__next_id();
  rt->be = be;
  atomic_init(&rt->world, 1);
  atomic_init(&rt->fast_world, 1);
  rt->opt = *opt;
  kc__log_setup(rt);
  kc__checked_setup(rt);
  guard_setup(rt);
#define KC__OOM(label) \
  do { \
    st = kc__err(NULL, KC_ENOMEM, "kc_runtime_create: out of memory"); \
    goto label; \
  } while (0)
  if (!dup_options(rt, opt)) KC__OOM(fail_options);
  kc__bconfig_make(&rt->conf, &rt->opt, &rt->bconf, &rt->log, true); /* the strings: the runtime's copies */
  if (kc__ext_setup(rt)) KC__OOM(fail_options);
  if (!kc__mutex_init(&rt->world_lock)) KC__OOM(fail_options);
  if (!kc__mutex_init(&rt->spec_lock)) KC__OOM(fail_spec_lock);
  if (!kc__mutex_init(&rt->ctx_lock)) KC__OOM(fail_ctx_lock);
  if (!kc__mutex_init(&rt->kernels_lock)) KC__OOM(fail_kernels_lock);
  if (!kc__mutex_init(&rt->collect_lock)) KC__OOM(fail_collect_lock);
#undef KC__OOM
  const kc__bsvc svc = kc__bsvc_of(rt); /* the backend keeps a copy */
  st = be->open(&svc, &rt->bconf, &rt->bstate);
  if (st) goto fail_open;
  kc__store_open(rt); /* never fails: without a disk cache, code stays in memory */
  kc__runtime_fork_register(rt); /* its locks around fork() (fork.c) */
  kc__runtime_list(rt); /* a pin on it now holds until it is destroyed (world.c) */
  *out = rt;
  return KC_OK;

fail_open:
  kc__err(NULL, st, "%s", kc_errmsg(rt)); /* no runtime to ask afterwards */
  kc__mutex_destroy(&rt->collect_lock);
fail_collect_lock:
  kc__mutex_destroy(&rt->kernels_lock);
fail_kernels_lock:
  kc__mutex_destroy(&rt->ctx_lock);
fail_ctx_lock:
  kc__mutex_destroy(&rt->spec_lock);
fail_spec_lock:
  kc__mutex_destroy(&rt->world_lock);
fail_options:
  kc__ext_free(rt);
  free_options(rt);
  runtime_unalloc(rt);
  return st;
}

void kc_runtime_destroy(kc_runtime *rt) {
  if (!rt) return;
  kc__runtime_fork_unregister(rt); /* first: a fork now takes none of its locks */
  kc__runtime_unlist(rt); /* other threads' pins on it are stale from now on (world.c) */
  kc__drop_own_pin(rt); /* the caller's own pin dies with it */
  kc__pool_destroy(rt); /* idle: no kc_prepare can be running */
  for (kc_context *c = rt->contexts, *next; c; c = next) {
    next = c->next;
    if (kc__load_relaxed(&c->alive)) kc__context_teardown(c);
    kc__mutex_destroy(&c->lock);
    KC__HTAB_FREE(&rt->heap, &c->linked);
    for (kc_buffer *b = c->free_buffers, *next; b; b = next) {
      next = b->next;
      kc__free(rt, b);
    }
    kc__streams_free(c);
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
      older = kc__load_relaxed(&ci->next);
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
  kc__limbo_free(rt);
  kc__table_free(rt);
  kc__files_free(rt);
  kc__ext_free(rt);
  if (rt->be->quiesce) rt->be->quiesce(rt->bstate); /* its threads' better calls end before the store */
  kc__store_close(rt);
  rt->be->close(rt->bstate);
  kc__mutex_destroy(&rt->world_lock);
  kc__mutex_destroy(&rt->spec_lock);
  kc__mutex_destroy(&rt->ctx_lock);
  kc__mutex_destroy(&rt->kernels_lock);
  kc__mutex_destroy(&rt->collect_lock);
  kc__free(rt, rt->pins);
  free_options(rt);
  runtime_unalloc(rt);
}

const char *kc_runtime_backend(const kc_runtime *rt) { return rt ? rt->be->name : NULL; }

int kc_device_count(const kc_runtime *rt) { return rt ? rt->be->device_count(rt->bstate) : 0; }

const char *kc_device_name(const kc_runtime *rt, int index) {
  if (!rt || index < 0 || index >= kc_device_count(rt)) return NULL;
  return rt->be->device_name(rt->bstate, index);
}

/* ------------------------------------------------------------ statistics */

/* Every counter of rt into *out (this library's struct, zeroed). */
static void stats_fill(kc_runtime *rt, kc_stats *out) {
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
  out->files_tracked = kc__load_relaxed(&rt->n_files);
  out->files_changed = kc__load_relaxed(&rt->n_files_changed);
  out->backend_builds = rt->be->builds ? rt->be->builds(rt->bstate) : 0;
  kc__store_stats(rt, out);
  out->disk_read_only = !kc_cache_writable(rt);
  /* The contexts' counters (launch.c counts there, not per handle): the
   * list only grows at its head (release) and its structs are never freed
   * while rt lives, so it is read without a lock, and the cost is the
   * number of contexts ever open at once, whatever the number of handles. */
  for (const kc_context *c = kc__load_acquire(&rt->contexts); c; c = c->next)
    out->fast_hits += kc__load_relaxed(&c->fast_hits);
}

kc_status kc_stats_get_size(kc_runtime *rt, kc_stats *out, size_t size) {
  if (!out) return kc__err(rt, KC_EINVAL, "kc_stats_get: out is NULL");
  /* *out is written, never read: a caller's struct need not be initialized,
   * so only its size is checked (p NULL) */
  kc_status st = kc__abi_check(rt, "kc_stats", KC__SIZE_HINT(kc_stats_get, kc_stats), NULL, size,
                               KC__STATS_MIN_SIZE, sizeof(kc_stats));
  if (st) return st;
  kc_stats s;
  memset(&s, 0, sizeof s);
  if (rt) stats_fill(rt, &s);
  s.size = size < sizeof s ? size : sizeof s;
  if (size > sizeof s)
    memset((unsigned char *)out + sizeof s, 0, size - sizeof s); /* counters this library lacks */
  memcpy(out, &s, s.size);
  return rt ? KC_OK : kc__err(NULL, KC_EINVAL, "kc_stats_get: rt is NULL");
}

/* ------------------------------------------------------------- devices */

/* Appends "  device I: NAME\n" (or the platform line) at buf+len with
 * snprintf semantics; returns the full length so far. */
static size_t list_append(char *buf, size_t size, size_t len, const char *what, int i, const char *name) {
  int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s %d: %s\n", what, i, name);
  return n < 0 ? len : len + (size_t)n;
}

/* Why kind cannot run here with the process's configuration (its
 * variables and defaults), or NULL. */
static const char *unavailable(kc_backend_kind kind) {
  const kc__backend *be = kc__backend_of(kind);
  if (!be) return "unknown backend";
  kc__config conf;
  if (kc__config_resolve(NULL, NULL, &conf)) return "out of memory";
  kc__bconfig b;
  kc__bconfig_make(&conf, NULL, &b, NULL, false);
  const char *why = be->unavailable(&b); /* a static or thread-local string */
  kc__config_free(&conf);
  return why;
}

int kc_backend_available(kc_backend_kind kind, const char **why) {
  const char *reason = unavailable(kind);
  if (why) *why = reason;
  return reason == NULL;
}

int kc_list_devices(kc_backend_kind kind, char *buf, size_t size) {
  if (size) buf[0] = 0;
  const kc__backend *be = kc__backend_of(kind);
  if (!be || unavailable(kind)) return -1;
  if (be->list) return be->list(buf, size);
  kc_options o;
  kc_options_init(&o);
  o.backend = kind;
  o.cache_disable = 1;
  kc_runtime *rt;
  if (kc_runtime_create(&o, &rt)) return -1;
  size_t len = list_append(buf, size, 0, "platform", 0, be->name);
  for (int i = 0; i < kc_device_count(rt); i++)
    len = list_append(buf, size, len, "  device", i, kc_device_name(rt, i));
  kc_runtime_destroy(rt);
  return (int)len;
}
