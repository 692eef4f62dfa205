/*
 * engine.c -- the runtime, specializations and their code instances,
 * contexts and their linked objects, kernel handles, pins, and the launch
 * path: the lock-free fast path and the slow path that compiles and links.
 */

#include "kc_internal.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KC__KEY_DEAD UINT64_MAX

/* ------------------------------------------------------------- options */

void kc_options_init(kc_options *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof *opt);
  opt->backend = KC_BACKEND_AUTO;
  opt->platform_index = -1;
}

/* A backend whose source file is not part of this build. */
#define KC__ABSENT_BACKEND(var, nm)                                                      \
  static const char *var##_absent(void) { return "kcache was built without the " nm " backend"; } \
  const kc__backend var = {.name = nm, .unavailable = var##_absent};
#ifdef KC_WITHOUT_OPENCL
KC__ABSENT_BACKEND(kc__backend_opencl, "opencl")
#endif
#ifdef KC_WITHOUT_CUDA
KC__ABSENT_BACKEND(kc__backend_cuda, "cuda")
const char *kc__cuda_nvrtc_unavailable(void) { return "kcache was built without the cuda backend"; }
kc_status kc__cuda_compile_only(kc_runtime *rt, const char *source_tu, size_t len, const char *entry,
                                int sm, bool ptx, void **out, size_t *out_size, kc__sb *log) {
  (void)source_tu, (void)len, (void)entry, (void)sm, (void)ptx, (void)out, (void)out_size, (void)log;
  return kc__err(rt, KC_EUNAVAILABLE, "kcache was built without the cuda backend");
}
#endif

static const kc__backend *backend_of(kc_backend_kind kind) {
  switch (kind) {
  case KC_BACKEND_HOST:
    return &kc__backend_host;
  case KC_BACKEND_OPENCL:
    return &kc__backend_opencl;
  case KC_BACKEND_CUDA:
    return &kc__backend_cuda;
  default:
    return NULL;
  }
}

/* Appends "  device I: NAME\n" (or the platform line) at buf+len with
 * snprintf semantics; returns the full length so far. */
static size_t list_append(char *buf, size_t size, size_t len, const char *what, int i, const char *name) {
  int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s %d: %s\n", what, i,
                   name);
  return n < 0 ? len : len + (size_t)n;
}

int kc_list_devices(kc_backend_kind kind, char *buf, size_t size) {
  if (size) buf[0] = 0;
  const kc__backend *be = backend_of(kind);
  if (!be || be->unavailable()) return -1;
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

int kc_backend_available(kc_backend_kind kind, const char **why) {
  const kc__backend *be = backend_of(kind);
  const char *reason = be ? be->unavailable() : "unknown backend";
  if (why) *why = reason;
  return reason == NULL;
}

/* $KC_BACKEND, else CUDA, OpenCL, host: the first that can run here. */
static kc_status pick_backend(kc_backend_kind want, const kc__backend **out) {
  const char *env = kc__setting_str(KC__SET_BACKEND); /* "auto" when unset */
  if (want == KC_BACKEND_AUTO && strcmp(env, "auto") != 0) {
    if (!strcmp(env, "host")) want = KC_BACKEND_HOST;
    else if (!strcmp(env, "opencl")) want = KC_BACKEND_OPENCL;
    else if (!strcmp(env, "cuda")) want = KC_BACKEND_CUDA;
    else
      return kc__err(NULL, KC_EINVAL, "KC_BACKEND=\"%s\": expected host, opencl, cuda or auto", env);
  }
  if (want != KC_BACKEND_AUTO) {
    const kc__backend *be = backend_of(want);
    if (!be) return kc__err(NULL, KC_EINVAL, "unknown backend kind %d", (int)want);
    const char *why = be->unavailable();
    if (why) return kc__err(NULL, KC_EUNAVAILABLE, "backend %s is not available: %s", be->name, why);
    *out = be;
    return KC_OK;
  }
  static const kc_backend_kind order[] = {KC_BACKEND_CUDA, KC_BACKEND_OPENCL, KC_BACKEND_HOST};
  for (size_t i = 0; i < 3; i++) {
    const kc__backend *be = backend_of(order[i]);
    if (!be->unavailable()) {
      *out = be;
      return KC_OK;
    }
  }
  return kc__err(NULL, KC_EUNAVAILABLE, "no backend is available: %s",
                 kc__backend_host.unavailable());
}

/* -------------------------------------------------------------- runtime */

kc_status kc_runtime_create(const kc_options *user_opt, kc_runtime **out) {
  if (!out) return kc__err(NULL, KC_EINVAL, "kc_runtime_create: out is NULL");
  *out = NULL;
  const kc__backend *be = NULL;
  kc_status st = pick_backend(user_opt ? user_opt->backend : KC_BACKEND_AUTO, &be);
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
  st = be->open(rt, &rt->opt, &rt->bstate);
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

static void free_ci(kc_runtime *rt, kc__ci *ci) {
  kc__free(rt, ci->artifact);
  kc__free(rt, ci->source);
  kc__free(rt, ci->error);
  kc__free_params(rt, ci->params, ci->nparams);
  kc__free(rt, ci->sig);
  kc__free(rt, ci->edges);
  kc__free(rt, ci);
}

static void context_teardown(kc_context *ctx);
static void drop_own_pin(const kc_runtime *rt);

void kc_runtime_destroy(kc_runtime *rt) {
  if (!rt) return;
  drop_own_pin(rt); /* the caller's own pin dies with it */
  for (kc_context *c = rt->contexts, *next; c; c = next) {
    next = c->next;
    if (kc__load_relaxed(&c->alive)) context_teardown(c);
    kc__mutex_destroy(&c->lock);
    kc__free(rt, c->linked);
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
  for (size_t i = 0; i < rt->capspecs; i++)
    for (kc__spec *s = rt->specs[i], *next; s; s = next) {
      next = s->next_in_bucket;
      for (kc__ci *ci = kc__load_relaxed(&s->head), *older; ci; ci = older) {
        older = ci->next;
        free_ci(rt, ci);
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
  kc__free(rt, rt->specs);
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

/* ------------------------------------------------------------ worlds, pins */

/* The calling thread's pin. Read on every launch: in the shared library it
 * is built with the initial-exec TLS model, so this is one %fs load. */
static _Thread_local struct {
  const kc_runtime *rt; /* the runtime pinned, NULL if none */
  uint64_t rt_id;       /* its id: memory can be reused by a new runtime */
  kc_world world;
  uint32_t depth;
} kc__pin;

/* Whether this thread's pin is on rt. The fast path compares the pointer
 * only; a match (rare: pinned threads) is confirmed here against the id, so
 * a pin left on a destroyed runtime never applies to a new one at the same
 * address. */
static KC__NOINLINE bool pinned_on(const kc_runtime *rt) {
  if (kc__pin.rt != rt) return false;
  if (kc__pin.rt_id == rt->id) return true;
  kc__pin.rt = NULL; /* stale: the runtime it pinned is gone */
  kc__pin.depth = 0;
  return false;
}

static void drop_own_pin(const kc_runtime *rt) {
  if (kc__pin.rt == rt) {
    kc__pin.rt = NULL;
    kc__pin.depth = 0;
  }
}

static inline kc_world caller_world(const kc_runtime *rt) {
  if (KC__UNLIKELY(kc__pin.rt == rt) && pinned_on(rt)) return kc__pin.world;
  return kc__load_acquire(&rt->world);
}

kc_world kc_world_latest(const kc_runtime *rt) { return rt ? kc__load_acquire(&rt->world) : 0; }

kc_world kc_world_current(const kc_runtime *rt) { return rt ? caller_world(rt) : 0; }

/* The multiset of pinned worlds, for kc_collect, under world_lock: a
 * collect that snapshots the pins never misses a world that is being
 * pinned, and the first pin turns the launch fast path's world check off
 * (fast_world) before this thread can launch pinned, with no definition
 * publishing a new world in between. */
static kc_status pins_add(kc_runtime *rt, kc_world *world) {
  kc__lock(&rt->world_lock);
  kc_world w = kc__load_acquire(&rt->world);
  size_t i = 0;
  while (i < rt->npins && rt->pins[i].world != w) i++;
  if (i == rt->npins) {
    if (rt->npins == rt->cappins) {
      size_t cap = rt->cappins ? rt->cappins * 2 : 8;
      struct kc__pinned *np = kc__realloc(rt, rt->pins, cap * sizeof *np);
      if (!np) {
        kc__unlock(&rt->world_lock);
        return kc__err(rt, KC_ENOMEM, "kc_pin: out of memory");
      }
      rt->pins = np;
      rt->cappins = cap;
    }
    rt->pins[rt->npins++] = (struct kc__pinned){w, 0};
  }
  rt->pins[i].count++;
  kc__store_relaxed(&rt->fast_world, KC__WORLD_PINNED);
  kc__unlock(&rt->world_lock);
  *world = w;
  return KC_OK;
}

static void pins_remove(kc_runtime *rt, kc_world w) {
  kc__lock(&rt->world_lock);
  for (size_t i = 0; i < rt->npins; i++)
    if (rt->pins[i].world == w) {
      if (--rt->pins[i].count == 0) rt->pins[i] = rt->pins[--rt->npins];
      break;
    }
  /* the last pin gone: launches may check the latest world alone again */
  if (!rt->npins) kc__store_release(&rt->fast_world, kc__load_relaxed(&rt->world));
  kc__unlock(&rt->world_lock);
}

kc_status kc_pin(kc_runtime *rt, kc_world *pinned) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_pin: runtime is NULL");
  if (kc__pin.depth && !pinned_on(rt) && kc__pin.depth)
    return kc__err(rt, KC_EBUSY, "kc_pin: this thread already pinned another runtime");
  if (kc__pin.depth == UINT32_MAX) return kc__err(rt, KC_EBUSY, "kc_pin: nested too deeply");
  if (!kc__pin.depth) {
    kc_status st = pins_add(rt, &kc__pin.world);
    if (st) return st;
    kc__pin.rt = rt;
    kc__pin.rt_id = rt->id;
  }
  kc__pin.depth++;
  if (pinned) *pinned = kc__pin.world;
  return KC_OK;
}

kc_status kc_unpin(kc_runtime *rt) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_unpin: runtime is NULL");
  if (!kc__pin.depth || !pinned_on(rt))
    return kc__err(rt, KC_EBUSY, "kc_unpin: this thread holds no pin on this runtime");
  if (--kc__pin.depth == 0) {
    kc__pin.rt = NULL;
    pins_remove(rt, kc__pin.world);
  }
  return KC_OK;
}

/* ------------------------------------------------------ specializations */

static kc_status spec_intern(kc_runtime *rt, const char *name, const char *canon, kc__spec **out) {
  size_t nl = strlen(name), pl = strlen(canon);
  uint64_t h = kc__hash(name, nl) ^ (kc__hash(canon, pl) * 0x9E3779B97F4A7C15ull);
  kc__lock(&rt->spec_lock);
  if (rt->capspecs)
    for (kc__spec *s = rt->specs[h & (rt->capspecs - 1)]; s; s = s->next_in_bucket)
      if (s->hash == h && !strcmp(s->name, name) && !strcmp(s->params, canon)) {
        kc__unlock(&rt->spec_lock);
        *out = s;
        return KC_OK;
      }
  if (rt->nspecs + 1 > rt->capspecs) {
    size_t cap = rt->capspecs ? rt->capspecs * 2 : 64;
    kc__spec **ns = kc__calloc(rt, cap * sizeof *ns);
    if (!ns) goto oom;
    for (size_t i = 0; i < rt->capspecs; i++)
      for (kc__spec *s = rt->specs[i], *next; s; s = next) {
        next = s->next_in_bucket;
        s->next_in_bucket = ns[s->hash & (cap - 1)];
        ns[s->hash & (cap - 1)] = s;
      }
    kc__free(rt, rt->specs);
    rt->specs = ns;
    rt->capspecs = cap;
  }
  kc__spec *s = kc__calloc(rt, sizeof *s);
  if (!s) goto oom;
  s->name = kc__strdup(rt, name);
  s->params = kc__strdup(rt, canon);
  bool locked = s->name && s->params && kc__mutex_init(&s->lock);
  if (locked && !kc__mutex_init(&s->free_lock)) {
    kc__mutex_destroy(&s->lock);
    locked = false;
  }
  if (!locked) {
    kc__free(rt, s->name);
    kc__free(rt, s->params);
    kc__free(rt, s);
    goto oom;
  }
  s->hash = h;
  atomic_init(&s->head, NULL);
  s->next_in_bucket = rt->specs[h & (rt->capspecs - 1)];
  rt->specs[h & (rt->capspecs - 1)] = s;
  rt->nspecs++;
  kc__unlock(&rt->spec_lock);
  *out = s;
  return KC_OK;
oom:
  kc__unlock(&rt->spec_lock);
  return kc__err(rt, KC_ENOMEM, "kc_kernel_create: out of memory");
}

/* Whether ci's world range holds w (lock-free). */
static inline bool ci_valid_at(const kc__ci *ci, kc_world w) {
  return kc__load_relaxed(&ci->min_world) <= w && w <= kc__load_acquire(&ci->max_world);
}

/* The code instance valid at world w, without locks. */
static kc__ci *ci_find(kc__spec *spec, kc_world w) {
  for (kc__ci *ci = kc__load_acquire(&spec->head); ci; ci = ci->next)
    if (ci_valid_at(ci, w)) return ci;
  return NULL;
}

/* -------------------------------------------------- translation units */

static void emit_params(kc__sb *sb, const char *params) {
  for (const char *q = params; *q;) {
    const char *eq = strchr(q, '=');
    const char *end = strchr(q, ',');
    if (!end) end = q + strlen(q);
    kc__sb_printf(sb, "#define %.*s %.*s\n", (int)(eq - q), q, (int)(end - eq - 1), eq + 1);
    q = *end ? end + 1 : end;
  }
}

static kc_status build_tu(kc_runtime *rt, const kc__spec *spec, const kc__closure *c,
                          const kc__param *params, uint32_t nparams, char **out, size_t *len) {
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  kc__sb_puts(&sb, rt->be->prelude);
  kc__sb_puts(&sb, "\n/* specialization parameters */\n");
  emit_params(&sb, spec->params);
  /* Helpers get private symbol names, so a definition may shadow a builtin
   * or library function (sqrtf, sqrt) on every backend without clashing with
   * the prelude's declarations of it. */
  for (uint32_t i = 0; i + 1 < c->ndefs; i++)
    kc__sb_printf(&sb, "#define %s kc__u_%s\n", c->defs[i]->binding->name,
                  c->defs[i]->binding->name);
  for (uint32_t i = 0; i < c->ndefs; i++) {
    kc__sb_printf(&sb, "#line 1 \"%s\"\n", c->defs[i]->binding->name);
    kc__sb_append(&sb, c->defs[i]->source, c->defs[i]->len);
    kc__sb_puts(&sb, "\n");
  }
  if (rt->be->epilogue) {
    kc__sb_puts(&sb, "#line 1 \"<kcache>\"\n");
    kc__tu tu = {spec->name, sb.buf, sb.len, params, nparams, spec};
    kc_status st = rt->be->epilogue(rt->bstate, &tu, &sb);
    if (st) {
      kc__sb_free(&sb);
      return st;
    }
  }
  *len = sb.len;
  *out = kc__sb_take(&sb);
  return *out ? KC_OK : kc__err(rt, KC_ENOMEM, "out of memory building the source of '%s'", spec->name);
}

/* Resolves the closure of spec at world w, and builds its translation unit. */
static kc_status prepare(kc_runtime *rt, kc__spec *spec, kc_world w, kc__closure *c, kc__param **params,
                         uint32_t *nparams, char **text, size_t *len) {
  kc_status st = kc__resolve(rt, spec, w, c);
  if (st) return st;
  kc__def *entry = c->defs[c->ndefs - 1];
  st = kc__parse_params(rt, spec->name, entry->source, params, nparams);
  if (!st) st = build_tu(rt, spec, c, *params, *nparams, text, len);
  if (st) {
    kc__free_params(rt, *params, *nparams);
    *params = NULL;
    kc__closure_free(rt, c);
  }
  return st;
}

/* Whether a compiler failure is worth remembering for the worlds in which
 * the same sources are visible (a syntax error is; a timeout is not). */
static bool failure_is_deterministic(kc_status st) { return st == KC_ECOMPILE || st == KC_ENOTFOUND; }

/* Drops the private prefix that helpers get in the translation unit
 * ("kc__u_h" -> "h"), so that compiler messages name the user's functions. */
static void unmangle(char *log) {
  static const char prefix[] = "kc__u_";
  char *out = log;
  for (const char *in = log; *in;) {
    if (!strncmp(in, prefix, sizeof prefix - 1)) in += sizeof prefix - 1;
    else *out++ = *in++;
  }
  *out = 0;
}

/* Names an undefined function that the compiler complained about. */
static kc_status explain_failure(kc_runtime *rt, const kc__spec *spec, const kc__closure *c,
                                 kc_status st, char *log) {
  if (log) unmangle(log);
  const char *missing = NULL;
  for (uint32_t i = 0; i < c->nedges && log; i++)
    if (!c->edges[i].def && strstr(log, c->edges[i].binding->name)) {
      missing = c->edges[i].binding->name;
      break;
    }
  if (missing && st == KC_ECOMPILE)
    return kc__err(rt, KC_ENOTFOUND,
                   "kernel '%s' calls '%s', which is neither defined in kcache nor provided by "
                   "the %s backend:\n%s",
                   spec->name, missing, rt->be->name, log);
  if (!log || !*log)
    return kc__err(rt, st, "compiling kernel '%s' (%s backend) failed: %s", spec->name, rt->be->name,
                   kc_errmsg(rt));
  return kc__err(rt, st, "compiling kernel '%s' (%s backend) failed: %s\n%s", spec->name, rt->be->name,
                 kc_errmsg(rt), log);
}

/* Finds or makes the code instance of spec valid at world w. One compile
 * per miss however many threads ask: the spec's lock, re-checked. */
static KC__NOINLINE kc_status ci_get(kc_runtime *rt, kc__spec *spec, kc_world w, kc__ci **out) {
  kc__ci *ci = ci_find(spec, w);
  if (!ci) {
    kc__lock(&spec->lock);
    ci = ci_find(spec, w);
    if (!ci) {
      kc__closure c;
      kc__param *params = NULL;
      uint32_t nparams = 0;
      char *text = NULL;
      size_t len = 0;
      kc_status st = prepare(rt, spec, w, &c, &params, &nparams, &text, &len);
      if (st) {
        kc__unlock(&spec->lock);
        return st;
      }
      ci = kc__calloc(rt, sizeof *ci);
      uint64_t *sig = kc__alloc(rt, (nparams ? nparams : 1) * sizeof *sig);
      if (!ci || !sig) {
        kc__free(rt, ci);
        kc__free(rt, sig);
        kc__free(rt, text);
        kc__free_params(rt, params, nparams);
        kc__closure_free(rt, &c);
        kc__unlock(&spec->lock);
        return kc__err(rt, KC_ENOMEM, "out of memory compiling '%s'", spec->name);
      }
      for (uint32_t i = 0; i < nparams; i++) {
        uint32_t size = kc__scalar_size(params[i].type, spec);
        sig[i] = params[i].is_buffer ? KC__SIG(KC_ARG_BUFFER, 0)
                                     : KC__SIG(KC_ARG_SCALAR, size ? size : UINT32_MAX);
      }
      atomic_init(&ci->min_world, 1); /* the empty range until complete */
      atomic_init(&ci->max_world, 0);
      ci->id = kc__next_id();
      ci->spec = spec;
      ci->compiled_at = w;
      ci->source = text;
      ci->params = params;
      ci->nparams = nparams;
      ci->sig = sig;
      ci->edges = c.edges;
      ci->nedges = c.nedges;

      kc__sb log;
      kc__sb_init(&log, kc__rt_heap(rt));
      kc__tu tu = {spec->name, text, len, params, nparams, spec};
      /* The disk cache: a hit fills the artifact and sig without compiling;
       * a miss may hold the entry's cross-process lock until finish. */
      kc__store_txn txn;
      bool from_disk = kc__store_fetch(rt, ci, &c, &txn);
      if (!from_disk) {
        uint64_t t0 = kc__now_ns();
        st = rt->be->compile(rt->bstate, &tu, &ci->artifact, &ci->artifact_size, sig, &log);
        ci->compile_ns = kc__now_ns() - t0;
        kc__fetch_add_relaxed(&rt->compile_ns, ci->compile_ns);
        kc__store_finish(rt, &txn, st, ci, &log);
      }
      if (st) {
        kc__fetch_add_relaxed(&rt->n_compile_failures, 1);
        st = explain_failure(rt, spec, &c, st, log.buf);
        kc__sb_free(&log);
        if (!failure_is_deterministic(st) || !(ci->error = kc__strdup(rt, kc_errmsg(rt)))) {
          c.edges = NULL;
          kc__closure_free(rt, &c);
          free_ci(rt, ci);
          kc__unlock(&spec->lock);
          return st;
        }
        ci->status = st; /* remembered: the same sources fail the same way */
      } else {
        if (!from_disk) kc__fetch_add_relaxed(&rt->n_compiles, 1);
        kc__sb_free(&log);
      }
      c.edges = NULL; /* now owned by ci */
      kc__closure_free(rt, &c);
      kc__publish_range(rt, ci, w);
      ci->next = kc__load_relaxed(&spec->head);
      kc__store_release(&spec->head, ci);
      kc__fetch_add_relaxed(&rt->n_cis, 1);
    }
    kc__unlock(&spec->lock);
  }
  if (ci->status) return kc__err(rt, ci->status, "%s", ci->error);
  *out = ci;
  return KC_OK;
}

/* -------------------------------------------------------------- contexts */

static size_t linked_slot(const kc_context *ctx, uint64_t id) {
  return (size_t)(id * 0x9E3779B97F4A7C15ull >> 20) & (ctx->caplinked - 1);
}

/* Unloads a linked object and keeps its memory for its specialization:
 * handles may still point at it, and link key 0 never matches. */
static void recycle_linked(kc_runtime *rt, kc__linked *l) {
  rt->be->unlink(l);
  kc__store_release(&l->link_key, 0);
  kc__spec *spec = l->ci->spec;
  kc__lock(&spec->free_lock);
  l->next_in_bucket = spec->free_linked;
  spec->free_linked = l;
  kc__unlock(&spec->free_lock);
}

static void unlink_all(kc_context *ctx) {
  for (size_t i = 0; i < ctx->caplinked; i++) {
    for (kc__linked *l = ctx->linked[i], *next; l; l = next) {
      next = l->next_in_bucket;
      recycle_linked(ctx->rt, l);
    }
    ctx->linked[i] = NULL;
  }
  ctx->nlinked = 0;
}

/* A context's link key and the offset of its slot in a handle. */
static void set_link_key(kc_context *ctx, uint64_t key) {
  kc__store_relaxed(&ctx->slot_off, KC__SLOT_OFF(key));
  kc__store_relaxed(&ctx->link_key, key);
}

kc_status kc_context_create(kc_runtime *rt, int device, kc_context **out) {
  if (!out) return kc__err(rt, KC_EINVAL, "kc_context_create: out is NULL");
  *out = NULL;
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_context_create: runtime is NULL");
  int n = rt->be->device_count(rt->bstate);
  if (device < 0 || device >= n)
    return kc__err(rt, KC_EINVAL, "kc_context_create: device %d out of range (the %s backend has %d)",
                   device, rt->be->name, n);
  kc__lock(&rt->ctx_lock);
  kc_context *ctx = rt->contexts;
  while (ctx && kc__load_relaxed(&ctx->alive)) ctx = ctx->next;
  bool fresh = !ctx;
  if (fresh) {
    ctx = kc__calloc(rt, sizeof *ctx);
    if (!ctx || !kc__mutex_init(&ctx->lock)) {
      kc__free(rt, ctx);
      kc__unlock(&rt->ctx_lock);
      return kc__err(rt, KC_ENOMEM, "kc_context_create: out of memory");
    }
    ctx->rt = rt;
    atomic_init(&ctx->link_key, KC__KEY_DEAD);
    atomic_init(&ctx->slot_off, 0);
  }
  void *bctx = NULL;
  kc_status st = rt->be->ctx_create(rt->bstate, device, &bctx);
  if (st) {
    if (fresh) {
      kc__mutex_destroy(&ctx->lock);
      kc__free(rt, ctx);
    }
    kc__unlock(&rt->ctx_lock);
    return st;
  }
  ctx->bctx = bctx;
  ctx->device = device;
  ctx->buffers = NULL;
  ctx->nlinked = 0;
  kc__store_relaxed(&ctx->id, kc__next_id());
  set_link_key(ctx, kc__next_id());
  kc__store_relaxed(&ctx->alive, 1);
  if (fresh) {
    ctx->next = rt->contexts;
    rt->contexts = ctx;
  }
  kc__unlock(&rt->ctx_lock);
  *out = ctx;
  return KC_OK;
}

/* Releases a buffer's backend memory and keeps its struct on the owner's
 * free list, marked destroyed (ctx NULL); owner->lock held. */
static void buffer_retire(kc_context *owner, kc_buffer *b) {
  owner->rt->be->buf_destroy(owner->bctx, &b->h);
  b->h.u64 = 0;
  b->ctx = NULL;
  b->size = 0;
  b->prev = NULL;
  b->next = owner->free_buffers;
  owner->free_buffers = b;
}

/* Frees what a live context holds; the struct stays for reuse. */
static void context_teardown(kc_context *ctx) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&ctx->lock);
  set_link_key(ctx, KC__KEY_DEAD);
  kc__store_relaxed(&ctx->alive, 0);
  unlink_all(ctx);
  for (kc_buffer *b = ctx->buffers, *next; b; b = next) {
    next = b->next;
    buffer_retire(ctx, b);
  }
  ctx->buffers = NULL;
  rt->be->ctx_destroy(ctx->bctx);
  ctx->bctx = NULL;
  kc__unlock(&ctx->lock);
}

void kc_context_destroy(kc_context *ctx) {
  if (!ctx || !kc__load_relaxed(&ctx->alive)) return;
  kc_runtime *rt = ctx->rt;
  kc__lock(&rt->ctx_lock); /* creation may be looking for a free struct */
  context_teardown(ctx);
  kc__unlock(&rt->ctx_lock);
}

kc_status kc_context_reset(kc_context *ctx) {
  if (!ctx) return kc__err(NULL, KC_EINVAL, "kc_context_reset: context is NULL");
  kc__lock(&ctx->lock);
  if (!kc__load_relaxed(&ctx->alive)) {
    kc__unlock(&ctx->lock);
    return kc__err(ctx->rt, KC_EDESTROYED, "kc_context_reset: the context has been destroyed");
  }
  unlink_all(ctx);
  kc_status st = ctx->rt->be->ctx_reset(ctx->bctx);
  /* every handle's cached entry for this context is now stale */
  set_link_key(ctx, kc__next_id());
  kc__unlock(&ctx->lock);
  return st;
}

uint64_t kc_context_id(const kc_context *ctx) {
  return ctx && kc__load_relaxed(&ctx->alive) ? kc__load_relaxed(&ctx->id) : 0;
}

kc_status kc_context_finish(kc_context *ctx) {
  if (!ctx) return kc__err(NULL, KC_EINVAL, "kc_context_finish: context is NULL");
  if (!kc__load_relaxed(&ctx->alive))
    return kc__err(ctx->rt, KC_EDESTROYED, "kc_context_finish: the context has been destroyed");
  return ctx->rt->be->ctx_finish(ctx->bctx);
}

/* The linked object of ci in ctx, linking it on first use. */
static kc_status entry_packed(kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                              const kc_dim3 *block, const kc_arg *args, uint32_t nargs);

static kc_status ctx_link(kc_context *ctx, kc__ci *ci, kc__linked **out) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&ctx->lock);
  if (!kc__load_relaxed(&ctx->alive)) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_EDESTROYED, "launch of '%s': the context has been destroyed", ci->spec->name);
  }
  if (ctx->caplinked)
    for (kc__linked *l = ctx->linked[linked_slot(ctx, ci->id)]; l; l = l->next_in_bucket)
      if (l->ci == ci) {
        kc__unlock(&ctx->lock);
        *out = l;
        return KC_OK;
      }
  if (ctx->nlinked + 1 > ctx->caplinked) {
    size_t cap = ctx->caplinked ? ctx->caplinked * 2 : 16;
    kc__linked **nt = kc__calloc(rt, cap * sizeof *nt);
    if (!nt) {
      kc__unlock(&ctx->lock);
      return kc__err(rt, KC_ENOMEM, "out of memory linking '%s'", ci->spec->name);
    }
    size_t oldcap = ctx->caplinked;
    kc__linked **old = ctx->linked;
    ctx->linked = nt;
    ctx->caplinked = cap;
    for (size_t i = 0; i < oldcap; i++)
      for (kc__linked *l = old[i], *next; l; l = next) {
        next = l->next_in_bucket;
        size_t s = linked_slot(ctx, l->ci->id);
        l->next_in_bucket = nt[s];
        nt[s] = l;
      }
    kc__free(rt, old);
  }
  kc__spec *spec = ci->spec;
  kc__lock(&spec->free_lock);
  kc__linked *l = spec->free_linked;
  if (l) spec->free_linked = l->next_in_bucket;
  kc__unlock(&spec->free_lock);
  if (!l) {
    l = kc__calloc(rt, sizeof *l);
    if (!l) {
      kc__unlock(&ctx->lock);
      return kc__err(rt, KC_ENOMEM, "out of memory linking '%s'", ci->spec->name);
    }
    atomic_init(&l->link_key, 0);
  }
  l->ci = ci;
  l->rt = rt;
  l->bctx = ctx->bctx;
  l->nargs = ci->nparams;
  l->sig = ci->sig;
  l->fn = l->module = l->extra = NULL;
  l->entry = NULL;
  kc_status st = rt->be->link(ctx->bctx, ci, l);
  if (st) {
    kc__lock(&spec->free_lock);
    l->next_in_bucket = spec->free_linked;
    spec->free_linked = l;
    kc__unlock(&spec->free_lock);
    kc__unlock(&ctx->lock);
    return st;
  }
  if (!l->entry) l->entry = entry_packed;
  kc__store_release(&l->link_key, kc__load_relaxed(&ctx->link_key));
  size_t s = linked_slot(ctx, ci->id);
  l->next_in_bucket = ctx->linked[s];
  ctx->linked[s] = l;
  ctx->nlinked++;
  kc__fetch_add_relaxed(&rt->n_links, 1);
  kc__unlock(&ctx->lock);
  *out = l;
  return KC_OK;
}

/* --------------------------------------------------------------- kernels */

kc_status kc_kernel_create(kc_runtime *rt, const char *name, const char *params, kc_kernel **out) {
  if (!out) return kc__err(rt, KC_EINVAL, "kc_kernel_create: out is NULL");
  *out = NULL;
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_kernel_create: runtime is NULL");
  if (!name || !kc__is_identifier(name))
    return kc__err(rt, KC_EINVAL, "kc_kernel_create: \"%s\" is not a valid kernel name",
                   name ? name : "(null)");
  char *canon;
  kc_status st = kc__canon_params(rt, params, &canon);
  if (st) return st;
  kc__spec *spec = NULL;
  st = spec_intern(rt, name, canon, &spec);
  kc__free(rt, canon);
  if (st) return st;
  kc_kernel *k = kc__calloc(rt, sizeof *k);
  if (!k) return kc__err(rt, KC_ENOMEM, "kc_kernel_create: out of memory");
  k->rt = rt;
  k->spec = spec;
  for (int i = 0; i < KC__HSLOTS; i++) atomic_init(&k->slots[i], &kc__no_linked);
  kc__lock(&rt->kernels_lock);
  k->next = rt->kernels;
  if (rt->kernels) rt->kernels->prev = k;
  rt->kernels = k;
  kc__unlock(&rt->kernels_lock);
  *out = k;
  return KC_OK;
}

static void args_free_locked(kc_runtime *rt, kc_args *a);

void kc_kernel_destroy(kc_kernel *k) {
  if (!k) return;
  kc_runtime *rt = k->rt;
  kc__lock(&rt->kernels_lock);
  while (k->bound) args_free_locked(rt, k->bound);
  rt->dead_kernel_hits += kc__load_relaxed(&k->fast_hits);
  if (k->prev) k->prev->next = k->next;
  else rt->kernels = k->next;
  if (k->next) k->next->prev = k->prev;
  kc__unlock(&rt->kernels_lock);
  kc__free(rt, k);
}

kc_status kc_kernel_compile(kc_kernel *k) {
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_kernel_compile: kernel is NULL");
  kc__ci *ci;
  return ci_get(k->rt, k->spec, caller_world(k->rt), &ci);
}

kc_status kc_kernel_code(kc_kernel *k, kc_code_info *out) {
  if (!k || !out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_code: NULL argument");
  kc__ci *ci;
  kc_status st = ci_get(k->rt, k->spec, caller_world(k->rt), &ci);
  if (st) return st;
  out->max_world = kc__load_acquire(&ci->max_world);
  out->min_world = kc__load_relaxed(&ci->min_world);
  out->id = ci->id;
  out->artifact = ci->artifact;
  out->artifact_size = ci->artifact_size;
  out->compile_ns = ci->compile_ns;
  return KC_OK;
}

kc_status kc_kernel_source(kc_kernel *k, char **out) {
  if (!k || !out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_kernel_source: NULL argument");
  *out = NULL;
  kc_runtime *rt = k->rt;
  kc_world w = caller_world(rt);
  kc__ci *ci = ci_find(k->spec, w);
  if (ci) {
    *out = kc__strdup(rt, ci->source);
    return *out ? KC_OK : kc__err(rt, KC_ENOMEM, "out of memory");
  }
  kc__closure c;
  kc__param *params;
  uint32_t n;
  size_t len;
  kc_status st = prepare(rt, k->spec, w, &c, &params, &n, out, &len);
  if (st) return st;
  kc__free_params(rt, params, n);
  kc__closure_free(rt, &c);
  return KC_OK;
}

/* ---------------------------------------------------------------- launch */

/* Why argument i (a) does not fit a parameter whose KC__SIG is want in ctx,
 * or KC_OK if it fits. label names the parameter (" (float a)") or is "".
 * Cold: only after a check failed. */
static KC__COLD kc_status explain_arg(kc_runtime *rt, const char *name, uint32_t i, const char *label,
                                      uint64_t want, const kc_arg *a, const kc_context *ctx) {
  bool want_buf = want == KC__SIG(KC_ARG_BUFFER, 0);
  uint32_t size = (uint32_t)want;
#define KC__ARG_ERR(...) kc__err(rt, KC_EARGS, "kernel '%s' argument %u%s " __VA_ARGS__)
  if (a->kind != KC_ARG_BUFFER && a->kind != KC_ARG_SCALAR)
    return KC__ARG_ERR("has an unknown kind %u", name, i, label, a->kind);
  if (want_buf && a->kind != KC_ARG_BUFFER)
    return KC__ARG_ERR("is a buffer; a scalar was given", name, i, label);
  if (!want_buf && a->kind == KC_ARG_BUFFER)
    return KC__ARG_ERR("is a scalar; a buffer was given", name, i, label);
  if (want_buf) {
    if (a->size) return KC__ARG_ERR("is a buffer, whose size is 0 (KC_ARG_BUF); %u was given", name, i, label, a->size);
    if (!a->ptr) return KC__ARG_ERR("is a buffer; NULL was given", name, i, label);
    const kc_buffer *b = a->ptr;
    if (!b->ctx) return KC__ARG_ERR("is a buffer that has been destroyed", name, i, label);
    if (b->ctx != ctx) return KC__ARG_ERR("is a buffer of another context", name, i, label);
    return KC_OK;
  }
  if (!a->ptr) return KC__ARG_ERR("has a NULL value pointer", name, i, label);
  if (size == UINT32_MAX)
    return KC__ARG_ERR("has a type whose size kcache does not know; use a scalar type of the dialect", name,
                       i, label);
  if (a->size != size) return KC__ARG_ERR("has %u bytes; %u were given", name, i, label, size, a->size);
#undef KC__ARG_ERR
  return KC_OK;
}

/* Says why args do not fit the parameters of ci (KC_EARGS, or KC_EINVAL for
 * a NULL array). Cold: only after a check failed. */
static KC__COLD kc_status explain_args(kc_runtime *rt, const kc__ci *ci, const kc_context *ctx,
                                       const kc_arg *args, uint32_t nargs) {
  const char *name = ci->spec->name;
  if (nargs != ci->nparams)
    return kc__err(rt, KC_EARGS, "kernel '%s' takes %u argument%s, %u given", name, ci->nparams,
                   ci->nparams == 1 ? "" : "s", nargs);
  if (!args) return kc__err(rt, KC_EINVAL, "kernel '%s': args is NULL", name);
  for (uint32_t i = 0; i < nargs; i++) {
    char label[160];
    snprintf(label, sizeof label, " (%s %s)", ci->params[i].type, ci->params[i].name);
    kc_status st = explain_arg(rt, name, i, label, ci->sig[i], &args[i], ctx);
    if (st) return st;
  }
  return kc__err(rt, KC_EARGS, "kernel '%s': invalid arguments", name);
}

kc_status kc__launch_bad_args(const kc__linked *l, const kc_context *ctx, const kc_arg *args,
                              uint32_t nargs) {
  return explain_args(l->rt, l->ci, ctx, args, nargs);
}

/* Whether arg fits a parameter whose KC__SIG is want, in ctx. A scalar
 * parameter of a size kcache does not know (UINT32_MAX) fits nothing. */
static inline bool arg_fits(const kc_arg *a, uint64_t want, const kc_context *ctx) {
  if (KC__SIG(a->kind, a->size) != want || !a->ptr || a->size == UINT32_MAX) return false;
  return want != KC__SIG(KC_ARG_BUFFER, 0) || ((const kc_buffer *)a->ptr)->ctx == ctx;
}

kc__linked kc__no_linked;

/* KC_OK if grid and block are there and every dimension is at least 1,
 * else KC_EINVAL saying which (fn: the call, for the message). */
static kc_status check_dims(kc_runtime *rt, const char *fn, const char *name, const kc_dim3 *grid,
                            const kc_dim3 *block) {
  if (!grid || !block) return kc__err(rt, KC_EINVAL, "%s of '%s': grid or block is NULL", fn, name);
  if (!grid->x || !grid->y || !grid->z || !block->x || !block->y || !block->z)
    return kc__err(rt, KC_EINVAL, "%s of '%s': grid and block dimensions must be at least 1", fn, name);
  return KC_OK;
}

kc_status kc__launch_bad_dims(const kc__linked *l, const kc_dim3 *grid, const kc_dim3 *block) {
  return check_dims(l->rt, "launch", l->ci->spec->name, grid, block);
}

/* What the slow paths of kc_launch and kc_launch_args check before they
 * resolve anything: grid and block, and that ctx is alive (and, if ctx_id
 * is not 0, still the context of that id: its struct may have been reused). */
static kc_status slow_checks(kc_runtime *rt, const char *fn, const char *name, const kc_context *ctx,
                             uint64_t ctx_id, const kc_dim3 *grid, const kc_dim3 *block) {
  if (!grid || !block) return check_dims(rt, fn, name, grid, block);
  if (kc__load_relaxed(&ctx->link_key) == KC__KEY_DEAD || !kc__load_relaxed(&ctx->alive) ||
      (ctx_id && kc__load_relaxed(&ctx->id) != ctx_id))
    return kc__err(rt, KC_EDESTROYED, "%s of '%s': the context has been destroyed", fn, name);
  return check_dims(rt, fn, name, grid, block);
}

/* Checks the arguments against the kernel's parameters while packing them
 * for the backend, then launches. Hot, but out of line so that launches
 * without arguments need no stack frame at all. */
static KC__NOINLINE kc_status pack_and_launch(kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                                              const kc_dim3 *block, const kc_arg *args,
                                              uint32_t nargs) {
  void *argv[KC_MAX_ARGS];
  if (KC__UNLIKELY(nargs != l->nargs || !args)) return kc__launch_bad_args(l, ctx, args, nargs);
  for (uint32_t i = 0; i < nargs; i++) {
    const kc_arg *a = &args[i];
    if (KC__UNLIKELY(!arg_fits(a, l->sig[i], ctx))) return kc__launch_bad_args(l, ctx, args, nargs);
    argv[i] = (void *)a->ptr; /* a buffer's handle is its first member */
  }
  return l->launch(l, argv, grid, block);
}

/* The entry of backends without their own (kc__linked.entry). */
static kc_status entry_packed(kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                              const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  if ((nargs | l->nargs) == 0) return l->launch(l, NULL, grid, block);
  return pack_and_launch(l, ctx, grid, block, args, nargs);
}

static KC__NOINLINE kc_status launch_slow(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid,
                                          const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_launch: kernel is NULL");
  kc_runtime *rt = k->rt;
  if (!ctx) return kc__err(rt, KC_EINVAL, "kc_launch: context is NULL");
  if (ctx->rt != rt) return kc__err(rt, KC_EINVAL, "kc_launch: the context belongs to another runtime");
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc_status st = slow_checks(rt, "kc_launch", k->spec->name, ctx, 0, grid, block);
  if (st) return st;
  kc__fetch_add_relaxed(&rt->n_slow, 1);
  kc__ci *ci;
  st = ci_get(rt, k->spec, caller_world(rt), &ci);
  if (st) return st;
  kc__linked *l = NULL;
  st = ctx_link(ctx, ci, &l);
  if (st) return st;
  kc__store_release(&k->slots[key & (KC__HSLOTS - 1)], l);
  return l->entry(l, ctx, grid, block, args, nargs);
}

/* THE FAST PATH. It must never lock, allocate, hash a string or touch the
 * function table. It reads the handle's entry for this context and checks
 * that the entry was linked in this generation of the context; then that
 * its code instance is valid in the caller's world: with no pin on the
 * runtime one acquire load of the latest world (fast_world), else the
 * thread's pin (launch_pinned). Then the backend's launch. NULL grid or
 * block and zero dimensions are left to the backend, which reads them and
 * reports them with kc__launch_bad_dims (the same KC_EINVAL the slow path
 * gives). */
static inline kc_status launch_hit(kc_kernel *k, kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                                   const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  /* statistics: exact while one thread at a time launches this handle */
  kc__count_relaxed(&k->fast_hits);
  return l->entry(l, ctx, grid, block, args, nargs);
}

/* The fast path while some thread holds a pin on the runtime (fast_world
 * says so): this thread's world may be an old one, so the whole range
 * matters. Also where the latest world is past the entry's code. Six
 * arguments, so that kc_launch reaches it with a tail call and no stack
 * frame. */
static KC__NOINLINE kc_status launch_pinned(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid,
                                            const kc_dim3 *block, const kc_arg *args,
                                            uint32_t nargs) {
  /* the slot again: another thread may have replaced it since kc_launch
   * checked it, so its link key is checked again (acquire: then its fields
   * are complete) */
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc__linked *l = kc__load_relaxed(&k->slots[key & (KC__HSLOTS - 1)]);
  if (KC__UNLIKELY(kc__load_acquire(&l->link_key) != key)) return launch_slow(k, ctx, grid, block, args, nargs);
  if (KC__LIKELY(ci_valid_at(l->ci, caller_world(k->rt))))
    return launch_hit(k, l, ctx, grid, block, args, nargs);
  return launch_slow(k, ctx, grid, block, args, nargs);
}

kc_status kc_launch(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                    const kc_arg *args, uint32_t nargs) {
  /* grid and block are checked by the backend's launch, which reads them */
  if (KC__LIKELY(k && ctx)) {
    uint64_t key = kc__load_relaxed(&ctx->link_key);
    size_t off = kc__load_relaxed(&ctx->slot_off); /* KC__SLOT_OFF(key) */
    kc__linked *l = kc__load_relaxed((_Atomic(kc__linked *) *)((char *)k->slots + off));
    if (KC__LIKELY(kc__load_acquire(&l->link_key) == key)) {
      /* No pin on the runtime: the caller's world is the latest, and no
       * code instance starts after the latest world, so only the end of the
       * range matters. While a pin is held fast_world is KC__WORLD_PINNED,
       * above every world, and the check fails into launch_pinned. The
       * compare is strict: at w == max_world, a world that is being
       * replaced, the pinned path decides. */
      kc_world w = kc__load_acquire(&k->rt->fast_world); /* before max_world: see table.c */
      if (KC__LIKELY(w < kc__load_relaxed(&l->ci->max_world)))
        return launch_hit(k, l, ctx, grid, block, args, nargs);
      return launch_pinned(k, ctx, grid, block, args, nargs);
    }
  }
  return launch_slow(k, ctx, grid, block, args, nargs);
}

/* --------------------------------------------------------- bound arguments */

/* Stores arg (it fits) as argument i of a; a scalar's bytes are copied to
 * v, its own 16-byte-aligned room in a->values (laid out at create). */
static void args_store(kc_args *a, uint32_t i, const kc_arg *arg, unsigned char *v) {
  if (arg->kind == KC_ARG_BUFFER) {
    a->args[i] = *arg;
    a->argv[i] = (void *)arg->ptr; /* a buffer's handle is its first member */
  } else {
    memcpy(v, arg->ptr, arg->size);
    a->args[i] = (kc_arg){v, arg->size, KC_ARG_SCALAR};
    a->argv[i] = v;
  }
}

static size_t value_room(uint64_t sig) {
  return sig == KC__SIG(KC_ARG_BUFFER, 0) ? 0 : ((size_t)(uint32_t)sig + 15) & ~(size_t)15;
}

kc_status kc_args_create(kc_kernel *k, kc_context *ctx, const kc_arg *args, uint32_t nargs,
                         kc_args **out) {
  if (!out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_args_create: out is NULL");
  *out = NULL;
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_args_create: kernel is NULL");
  kc_runtime *rt = k->rt;
  if (!ctx) return kc__err(rt, KC_EINVAL, "kc_args_create: context is NULL");
  if (ctx->rt != rt) return kc__err(rt, KC_EINVAL, "kc_args_create: the context belongs to another runtime");
  if (!kc__load_relaxed(&ctx->alive))
    return kc__err(rt, KC_EDESTROYED, "kc_args_create of '%s': the context has been destroyed",
                   k->spec->name);
  kc__ci *ci;
  kc_status st = ci_get(rt, k->spec, caller_world(rt), &ci);
  if (st) return st;
  uint32_t n = ci->nparams;
  if (nargs != n || (n && !args)) return explain_args(rt, ci, ctx, args, nargs);
  size_t values = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!arg_fits(&args[i], ci->sig[i], ctx)) return explain_args(rt, ci, ctx, args, nargs);
    values += value_room(ci->sig[i]);
  }
  size_t head = sizeof(kc_args) + n * sizeof(void *);
  head = (head + 15) & ~(size_t)15;
  size_t size = head + values + n * (sizeof(kc_arg) + sizeof(uint64_t));
  kc_args *a = kc__calloc(rt, size);
  if (!a) return kc__err(rt, KC_ENOMEM, "kc_args_create: out of memory");
  a->values = (unsigned char *)a + head;
  a->args = (kc_arg *)(void *)(a->values + values);
  a->want = (uint64_t *)(void *)(a->args + n);
  memcpy(a->want, ci->sig, n * sizeof *a->want);
  for (uint32_t i = 0, off = 0; i < n; off += (uint32_t)value_room(a->want[i]), i++)
    args_store(a, i, &args[i], a->values + off);
  atomic_init(&a->l, &kc__no_linked);
  atomic_init(&a->ci_id, ci->id);
  atomic_init(&a->hits, 0);
  a->ctx = ctx;
  a->rt = rt;
  a->k = k;
  a->ctx_id = kc__load_relaxed(&ctx->id);
  a->n = n;
  kc__lock(&rt->kernels_lock);
  a->next = k->bound;
  if (k->bound) k->bound->prev = a;
  k->bound = a;
  kc__unlock(&rt->kernels_lock);
  *out = a;
  return KC_OK;
}

kc_status kc_args_set(kc_args *a, uint32_t index, kc_arg arg) {
  if (!a) return kc__err(NULL, KC_EINVAL, "kc_args_set: args is NULL");
  kc_runtime *rt = a->rt;
  const char *name = a->k->spec->name;
  if (index >= a->n)
    return kc__err(rt, KC_EARGS, "kc_args_set of '%s': argument %u does not exist (it takes %u)", name,
                   index, a->n);
  if (!kc__load_relaxed(&a->ctx->alive) || kc__load_relaxed(&a->ctx->id) != a->ctx_id)
    return kc__err(rt, KC_EDESTROYED, "kc_args_set of '%s': the context has been destroyed", name);
  if (!arg_fits(&arg, a->want[index], a->ctx)) {
    kc_status st = explain_arg(rt, name, index, "", a->want[index], &arg, a->ctx);
    return st ? st : kc__err(rt, KC_EARGS, "kc_args_set of '%s': argument %u does not fit", name, index);
  }
  /* a scalar keeps its room: where args[index] points since create */
  args_store(a, index, &arg, (unsigned char *)(uintptr_t)a->args[index].ptr);
  return KC_OK;
}

/* Unlinks a from its kernel's list; kernels_lock held. */
static void args_free_locked(kc_runtime *rt, kc_args *a) {
  rt->dead_kernel_hits += kc__load_relaxed(&a->hits);
  if (a->prev) a->prev->next = a->next;
  else a->k->bound = a->next;
  if (a->next) a->next->prev = a->prev;
  kc__free(rt, a);
}

void kc_args_destroy(kc_args *a) {
  if (!a) return;
  kc_runtime *rt = a->rt;
  kc__lock(&rt->kernels_lock);
  args_free_locked(rt, a);
  kc__unlock(&rt->kernels_lock);
}

/* Everything but the fast path: checks, the code for the caller's world,
 * its parameters against the ones the arguments were checked against, the
 * link into the context; then remembers the linked object. */
static KC__NOINLINE kc_status args_slow(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  if (!a) return kc__err(NULL, KC_EINVAL, "kc_launch_args: args is NULL");
  kc_runtime *rt = a->rt;
  kc_context *ctx = a->ctx;
  const char *name = a->k->spec->name;
  kc_status st = slow_checks(rt, "kc_launch_args", name, ctx, a->ctx_id, grid, block);
  if (st) return st;
  kc__fetch_add_relaxed(&rt->n_slow, 1);
  kc__ci *ci;
  st = ci_get(rt, a->k->spec, caller_world(rt), &ci);
  if (st) return st;
  if (ci->nparams != a->n || memcmp(ci->sig, a->want, a->n * sizeof *a->want) != 0) {
    explain_args(rt, ci, ctx, a->args, a->n);
    char why[512];
    snprintf(why, sizeof why, "%s", kc_errmsg(rt));
    return kc__err(rt, KC_EARGS,
                   "kc_launch_args of '%s': the kernel's parameters changed since the arguments were "
                   "bound: %s",
                   name, why);
  }
  kc__linked *l = NULL;
  st = ctx_link(ctx, ci, &l);
  if (st) return st;
  kc__store_relaxed(&a->ci_id, ci->id);
  kc__store_relaxed(&a->l, l);
  return l->launch(l, a->argv, grid, block);
}

/* The cached path while some thread holds a pin (see launch_pinned). */
static KC__NOINLINE kc_status args_pinned(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  kc__linked *l = kc__load_relaxed(&a->l);
  if (KC__UNLIKELY(kc__load_acquire(&l->link_key) != kc__load_relaxed(&a->ctx->link_key)))
    return args_slow(a, grid, block);
  const kc__ci *ci = l->ci;
  if (KC__LIKELY(ci_valid_at(ci, caller_world(a->rt)) && ci->id == kc__load_relaxed(&a->ci_id))) {
    kc__count_relaxed(&a->hits);
    return l->launch(l, a->argv, grid, block);
  }
  return args_slow(a, grid, block);
}

/* The fast path of bound arguments: kc_launch's checks, less the
 * arguments' (checked when bound) plus the code's identity (ci_id), then
 * the backend's launch with the bound argv. */
kc_status kc_launch_args(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  if (KC__LIKELY(a != NULL)) {
    kc__linked *l = kc__load_relaxed(&a->l);
    if (KC__LIKELY(kc__load_acquire(&l->link_key) == kc__load_relaxed(&a->ctx->link_key))) {
      const kc__ci *ci = l->ci;
      kc_world w = kc__load_acquire(&a->rt->fast_world); /* as in kc_launch */
      if (KC__LIKELY(w < kc__load_relaxed(&ci->max_world) && ci->id == kc__load_relaxed(&a->ci_id))) {
        kc__count_relaxed(&a->hits);
        return l->launch(l, a->argv, grid, block);
      }
      return args_pinned(a, grid, block);
    }
  }
  return args_slow(a, grid, block);
}

/* ---------------------------------------------------------------- buffers */

kc_status kc_buffer_create(kc_context *ctx, size_t size, kc_buffer **out) {
  if (!out) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_buffer_create: out is NULL");
  *out = NULL;
  if (!ctx) return kc__err(NULL, KC_EINVAL, "kc_buffer_create: context is NULL");
  kc_runtime *rt = ctx->rt;
  if (size == 0) return kc__err(rt, KC_EINVAL, "kc_buffer_create: size is 0");
  kc__lock(&ctx->lock);
  if (!kc__load_relaxed(&ctx->alive)) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_EDESTROYED, "kc_buffer_create: the context has been destroyed");
  }
  kc_buffer *b = ctx->free_buffers;
  if (b) {
    ctx->free_buffers = b->next;
  } else {
    b = kc__calloc(rt, sizeof *b);
    if (!b) {
      kc__unlock(&ctx->lock);
      return kc__err(rt, KC_ENOMEM, "kc_buffer_create: out of memory");
    }
    b->owner = ctx;
  }
  kc_status st = rt->be->buf_create(ctx->bctx, size, &b->h);
  if (st) {
    b->next = ctx->free_buffers;
    ctx->free_buffers = b;
    kc__unlock(&ctx->lock);
    return st;
  }
  b->ctx = ctx;
  b->size = size;
  b->prev = NULL;
  b->next = ctx->buffers;
  if (ctx->buffers) ctx->buffers->prev = b;
  ctx->buffers = b;
  kc__unlock(&ctx->lock);
  *out = b;
  return KC_OK;
}

/* A buffer destroyed twice, or after its context: its struct is still
 * there (type-stable), so this is an error message, not a double free. */
void kc_buffer_destroy(kc_buffer *b) {
  if (!b) return;
  kc_context *ctx = b->owner;
  kc__lock(&ctx->lock);
  if (!b->ctx) {
    kc__unlock(&ctx->lock);
    kc__err(ctx->rt, KC_EDESTROYED, "kc_buffer_destroy: the buffer has been destroyed (by "
                                    "kc_buffer_destroy or with its context)");
    return;
  }
  if (b->prev) b->prev->next = b->next;
  else ctx->buffers = b->next;
  if (b->next) b->next->prev = b->prev;
  buffer_retire(ctx, b);
  kc__unlock(&ctx->lock);
}

size_t kc_buffer_size(const kc_buffer *b) { return b && b->ctx ? b->size : 0; }

static kc_status buf_check(kc_buffer *b, size_t off, const void *p, size_t n, const char *what) {
  if (!b) return kc__err(NULL, KC_EINVAL, "%s: buffer is NULL", what);
  kc_runtime *rt = b->owner->rt;
  if (!b->ctx)
    return kc__err(rt, KC_EDESTROYED,
                   "%s: the buffer has been destroyed (by kc_buffer_destroy or with its context)", what);
  if (!p && n) return kc__err(rt, KC_EINVAL, "%s: data pointer is NULL", what);
  if (off > b->size || n > b->size - off)
    return kc__err(rt, KC_EINVAL, "%s: range [%zu, %zu) is outside the buffer of %zu bytes", what, off,
                   off + n, b->size);
  if (!kc__load_relaxed(&b->ctx->alive))
    return kc__err(rt, KC_EDESTROYED, "%s: the context has been destroyed", what);
  return KC_OK;
}

kc_status kc_buffer_write(kc_buffer *b, size_t off, const void *src, size_t n) {
  kc_status st = buf_check(b, off, src, n, "kc_buffer_write");
  if (st || !n) return st;
  return b->owner->rt->be->buf_write(b->owner->bctx, &b->h, off, src, n);
}

kc_status kc_buffer_read(kc_buffer *b, size_t off, void *dst, size_t n) {
  kc_status st = buf_check(b, off, dst, n, "kc_buffer_read");
  if (st || !n) return st;
  return b->owner->rt->be->buf_read(b->owner->bctx, &b->h, off, dst, n);
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

/* ---------------------------------------------------------------- collect */

typedef struct {
  kc_world latest;
  struct kc__pinned *pins;
  size_t npins;
} live_worlds;

static bool world_live(void *ud, kc_world min, kc_world max) {
  const live_worlds *lw = ud;
  if (min <= lw->latest && lw->latest <= max) return true;
  for (size_t i = 0; i < lw->npins; i++)
    if (min <= lw->pins[i].world && lw->pins[i].world <= max) return true;
  return false;
}

kc_status kc_collect(kc_runtime *rt, kc_collect_info *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_collect: runtime is NULL");
  live_worlds lw = {0};
  kc__lock(&rt->world_lock);
  if (rt->npins) {
    lw.pins = kc__alloc(rt, rt->npins * sizeof *lw.pins);
    if (!lw.pins) {
      kc__unlock(&rt->world_lock);
      return kc__err(rt, KC_ENOMEM, "kc_collect: out of memory");
    }
    memcpy(lw.pins, rt->pins, rt->npins * sizeof *lw.pins);
    lw.npins = rt->npins;
  }
  lw.latest = kc__load_acquire(&rt->world);
  kc__unlock(&rt->world_lock);

  /* 1. Take dead code instances out of their specializations' lists. */
  kc__ci *dead = NULL;
  uint64_t ndead = 0;
  kc__lock(&rt->spec_lock);
  for (size_t i = 0; i < rt->capspecs; i++)
    for (kc__spec *s = rt->specs[i]; s; s = s->next_in_bucket) {
      kc__ci *keep = NULL, **tail = &keep;
      for (kc__ci *ci = kc__load_relaxed(&s->head), *next; ci; ci = next) {
        next = ci->next;
        if (world_live(&lw, kc__load_relaxed(&ci->min_world), kc__load_relaxed(&ci->max_world))) {
          *tail = ci;
          tail = &ci->next;
        } else {
          ci->dead = true;
          ci->next = dead;
          dead = ci;
          ndead++;
        }
      }
      *tail = NULL;
      kc__store_release(&s->head, keep);
    }
  kc__unlock(&rt->spec_lock);

  /* 2. Their linked objects, in every context. */
  uint64_t nlinked = 0;
  kc__lock(&rt->ctx_lock);
  for (kc_context *ctx = rt->contexts; ctx && ndead; ctx = ctx->next) {
    kc__lock(&ctx->lock);
    if (kc__load_relaxed(&ctx->alive))
      for (size_t i = 0; i < ctx->caplinked; i++)
        for (kc__linked **pl = &ctx->linked[i]; *pl;) {
          kc__linked *l = *pl;
          if (!l->ci->dead) {
            pl = &l->next_in_bucket;
            continue;
          }
          *pl = l->next_in_bucket;
          ctx->nlinked--;
          nlinked++;
          recycle_linked(rt, l);
        }
    kc__unlock(&ctx->lock);
  }
  kc__unlock(&rt->ctx_lock);

  /* 3. The function table: backedges to them, and dead definitions. */
  uint64_t ndefs = kc__table_collect(rt, world_live, &lw);

  /* 4. Free them. */
  for (kc__ci *ci = dead, *next; ci; ci = next) {
    next = ci->next;
    free_ci(rt, ci);
  }
  atomic_fetch_sub_explicit(&rt->n_cis, ndead, memory_order_relaxed);
  kc__fetch_add_relaxed(&rt->n_collected, ndead);
  kc__free(rt, lw.pins);
  if (out) *out = (kc_collect_info){ndead, nlinked, ndefs};
  return KC_OK;
}
