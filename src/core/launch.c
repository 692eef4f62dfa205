/* SPDX-License-Identifier: MIT */
/*
 * launch.c -- owns kernel handles, launches and bound arguments.
 *
 * THE FAST PATH'S CONTRACT. kc_launch and kc_launch_args, up to the call
 * of the backend's entry or launch, must never lock, allocate, hash a
 * string, touch the function table, read the thread's pin when no thread
 * holds one, or write anything but a relaxed statistics counter. They read
 * a handle's slot (or the bound arguments' cached linked object), the
 * context's link key (acquire on the linked object's key), and the latest
 * world (fast_world, acquire) against the code instance's max_world; a
 * kc_launch with no arguments costs +25 instructions over a direct call
 * (bench/kc_bench). Everything else is out of line: launch_pinned (some
 * thread holds a pin), launch_slow/args_slow (compile, link; they may lock
 * and wait). The backend's half (kc__linked.b: entry, launch) checks grid and
 * block itself (kc__launch_bad_dims) and may wait on the device or its own
 * per-kernel lock (OpenCL's per-kernel spin lock), never on a kcache lock.
 */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- kernels */

kc_status kc_kernel_create(kc_runtime *rt, const char *name, const char *params, kc_kernel **out) {
  if (!out) return kc__err(rt, KC_EINVAL, "kc_kernel_create: out is NULL");
  *out = NULL;
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_kernel_create: runtime is NULL");
  if (!name || (!kc__is_identifier(name) && !kc__name_expr_base(name)))
    return kc__err(rt, KC_EINVAL, "kc_kernel_create: \"%s\" is not a valid kernel name",
                   name ? name : "(null)");
  char *canon;
  kc_status st = kc__canon_params(rt, params, &canon);
  if (st) return st;
  kc__spec *spec = NULL;
  st = kc__spec_intern(rt, name, canon, &spec);
  kc__free(rt, canon);
  if (st) return st;
  kc_kernel *k = kc__calloc(rt, sizeof *k);
  if (!k) return kc__err(rt, KC_ENOMEM, "kc_kernel_create: out of memory");
  k->rt = rt;
  k->spec = spec;
  for (int i = 0; i < KC__HSLOTS; i++) {
    atomic_init(&k->slots[i], &kc__no_linked);
    atomic_init(&k->gslots[i], &kc__no_linked);
  }
  kc__lock(&rt->kernels_lock);
  KC__LIST_PUSH(rt->kernels, k);
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
  KC__LIST_REMOVE(rt->kernels, k);
  kc__unlock(&rt->kernels_lock);
  kc__free(rt, k);
}

/* ---------------------------------------------------------------- launch */

kc__linked kc__no_linked;

/* What the slow paths of kc_launch and kc_launch_args check before they
 * resolve anything: grid and block, and that ctx is alive (and, if ctx_id
 * is not 0, still the context of that id: its struct may have been reused). */
static kc_status slow_checks(kc_runtime *rt, const char *fn, const char *name, const kc_context *ctx,
                             uint64_t ctx_id, const kc_dim3 *grid, const kc_dim3 *block) {
  if (!grid || !block) return kc__check_dims(rt, fn, name, grid, block);
  if (kc__load_relaxed(&ctx->link_key) == KC__KEY_DEAD || !kc__load_relaxed(&ctx->alive) ||
      (ctx_id && kc__load_relaxed(&ctx->id) != ctx_id))
    return kc__err(rt, KC_EDESTROYED, "%s of '%s': the context has been destroyed", fn, name);
  return kc__check_dims(rt, fn, name, grid, block);
}

/* The slow path proper, inside a grace section: checks, the code for the
 * caller's world (compiling it if need be), its link into ctx, the cache
 * for the next launch, the launch. */
static kc_status launch_resolve(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                                const kc_arg *args, uint32_t nargs) {
  kc_runtime *rt = k->rt;
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc_status st = slow_checks(rt, "kc_launch", k->spec->name, ctx, 0, grid, block);
  if (st) return st;
  kc__fetch_add_relaxed(&rt->n_slow, 1);
  kc_world w = kc__caller_world(rt);
  if (KC__UNLIKELY(kc__log_on(rt, KC_LOG_DEBUG)))
    kc__trace_launch_miss(rt, "kc_launch", k->spec, ctx, kc__load_relaxed(&k->slots[key & (KC__HSLOTS - 1)]),
                          k, w);
  /* the default stream capturing (a CUDA graph, or another stream's
   * global-mode capture): no compile and no module load (launch_ex.c) */
  bool capturing = kc__stream_capturing(ctx, NULL);
  kc__ci *ci;
  st = capturing ? kc__capture_ci(ctx, k->spec, w, &ci) : kc__ci_get(rt, k->spec, w, &ci);
  if (st) return st;
  kc__linked *l = NULL;
  st = capturing ? kc__capture_link(ctx, ci, &l) : kc__ctx_link(ctx, ci, w, &l);
  if (st) return st;
  /* checked mode fills no cache: every launch comes back here */
  if (KC__UNLIKELY(rt->checked)) return kc__checked_launch(l, ctx, grid, block, args, nargs, NULL);
  kc__store_release(kc__slot_of(k, key), l);
  return l->b.entry(&l->b, ctx, grid, block, args, nargs);
}

/* A launch of a runtime that guards launches (kc_options.guard_launches):
 * the fast path's checks on the guarded cache, inside a grace section, so
 * that kc_collect frees nothing this launch may still run. */
static KC__NOINLINE kc_status launch_guarded(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid,
                                             const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  kc_status st = kc__enter(k->rt, "kc_launch");
  if (st) return st;
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc__linked *l = kc__load_relaxed(&k->gslots[key & (KC__HSLOTS - 1)]);
  if (KC__LIKELY(kc__load_acquire(&l->link_key) == key && kc__ci_valid_at(l->ci, kc__caller_world(k->rt)))) {
    kc__count_relaxed(&ctx->fast_hits);
    st = l->b.entry(&l->b, ctx, grid, block, args, nargs);
  } else {
    st = launch_resolve(k, ctx, grid, block, args, nargs);
  }
  kc__leave();
  return st;
}

static KC__NOINLINE kc_status launch_unguarded(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid,
                                               const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_launch: kernel is NULL");
  kc_runtime *rt = k->rt;
  if (!ctx) return kc__err(rt, KC_EINVAL, "kc_launch: context is NULL");
  if (ctx->rt != rt) return kc__err(rt, KC_EINVAL, "kc_launch: the context belongs to another runtime");
  kc_status st = kc__enter(rt, "kc_launch");
  if (st) return st;
  st = launch_resolve(k, ctx, grid, block, args, nargs);
  kc__leave();
  return st;
}

/* Where a launch that missed the cache goes: a runtime that guards its
 * launches has its own (a dispatch of a few instructions, no frame). */
static KC__NOINLINE kc_status launch_slow(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid,
                                          const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  if (KC__LIKELY(k && ctx && ctx->rt == k->rt && k->rt->guarded))
    return launch_guarded(k, ctx, grid, block, args, nargs);
  return launch_unguarded(k, ctx, grid, block, args, nargs);
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
  /* statistics: exact while one thread at a time launches in this context */
  (void)k;
  kc__count_relaxed(&ctx->fast_hits);
  return l->b.entry(&l->b, ctx, grid, block, args, nargs);
}

/* The fast path while some thread holds a pin on the runtime (fast_world
 * says so): this thread's world may be an old one, so the whole range
 * matters. Also where the latest world is past the entry's code. Six
 * arguments, so that kc_launch reaches it with a tail call and no stack
 * frame. */
static KC__NOINLINE kc_status launch_pinned(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid,
                                            const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  /* the slot again: another thread may have replaced it since kc_launch
   * checked it, so its link key is checked again (acquire: then its fields
   * are complete) */
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc__linked *l = kc__load_relaxed(&k->slots[key & (KC__HSLOTS - 1)]);
  if (KC__UNLIKELY(kc__load_acquire(&l->link_key) != key))
    return launch_slow(k, ctx, grid, block, args, nargs);
  if (KC__LIKELY(kc__ci_valid_at(l->ci, kc__caller_world(k->rt))))
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

/* Whether arg fits a bound parameter whose KC__SIG is want: as for
 * kc_launch, plus local memory sizes for KC_LOCAL parameters (OpenCL), which
 * kc_launch_args_ex passes on. */
static bool args_fit(const kc_arg *a, uint64_t want, const kc_context *ctx) {
  if (want == KC__SIG(KC_ARG_LOCAL, 0) || a->kind == KC_ARG_LOCAL)
    return want == KC__SIG(KC_ARG_LOCAL, 0) && a->kind == KC_ARG_LOCAL && a->size != 0;
  return kc__arg_fits(a, want, ctx);
}

/* Why argument i, the first that does not fit, does not fit a bound
 * parameter (KC_EARGS): about local memory, without the parameter's name. */
static KC__COLD kc_status args_explain(kc_runtime *rt, const kc__ci *ci, const kc_context *ctx,
                                       const kc_arg *args, uint32_t nargs, uint32_t i) {
  if (args[i].kind == KC_ARG_LOCAL || ci->sig[i] == KC__SIG(KC_ARG_LOCAL, 0)) {
    kc_status st = kc__explain_arg(rt, ci->spec->name, i, "", ci->sig[i], &args[i], ctx, KC__RULES_BOUND);
    if (st) return st;
  }
  return kc__explain_args(rt, ci, ctx, args, nargs, KC__RULES_BOUND);
}

/* Stores arg (it fits) as argument i of a; a scalar's bytes are copied to
 * v, its own 16-byte-aligned room in a->values (laid out at create). */
static void args_store(kc_args *a, uint32_t i, const kc_arg *arg, unsigned char *v) {
  if (arg->kind == KC_ARG_BUFFER) {
    a->args[i] = *arg;
    a->argv[i] = (void *)arg->ptr; /* a buffer's handle is its first member */
  } else if (arg->kind == KC_ARG_LOCAL) {
    a->args[i] = (kc_arg){NULL, arg->size, KC_ARG_LOCAL}; /* the backend's launch_ex reads args */
    a->argv[i] = NULL;
  } else {
    memcpy(v, arg->ptr, arg->size);
    a->args[i] = (kc_arg){v, arg->size, KC_ARG_SCALAR};
    a->argv[i] = v;
  }
}

static size_t value_room(uint64_t sig) {
  return sig == KC__SIG(KC_ARG_BUFFER, 0) ? 0 : ((size_t)(uint32_t)sig + 15) & ~(size_t)15;
}

/* The alignment of a scalar's room: 16, or the type's where the compiler
 * says it is more (a host kernel reads the value in place). */
static size_t value_align(uint64_t sig) {
  size_t al = kc__sig_align(sig);
  return al > 16 ? al : 16;
}

#define KC__ALIGN_UP(x, al) (((x) + (al)-1) & ~((size_t)(al)-1))

static kc_status args_make(kc_kernel *k, kc_context *ctx, const kc_arg *args, uint32_t nargs, kc_args **out);

kc_status kc_args_create(kc_kernel *k, kc_context *ctx, const kc_arg *args, uint32_t nargs, kc_args **out) {
  if (!out) return kc__err(k ? k->rt : NULL, KC_EINVAL, "kc_args_create: out is NULL");
  *out = NULL;
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_args_create: kernel is NULL");
  kc_runtime *rt = k->rt;
  if (!ctx) return kc__err(rt, KC_EINVAL, "kc_args_create: context is NULL");
  if (ctx->rt != rt) return kc__err(rt, KC_EINVAL, "kc_args_create: the context belongs to another runtime");
  if (!kc__load_relaxed(&ctx->alive))
    return kc__err(rt, KC_EDESTROYED, "kc_args_create of '%s': the context has been destroyed",
                   k->spec->name);
  kc_status st = kc__enter(rt, "kc_args_create");
  if (st) return st;
  st = args_make(k, ctx, args, nargs, out);
  kc__leave();
  return st;
}

/* kc_args_create's work, inside a grace section. */
static kc_status args_make(kc_kernel *k, kc_context *ctx, const kc_arg *args, uint32_t nargs, kc_args **out) {
  kc_runtime *rt = k->rt;
  kc__ci *ci;
  kc_status st = kc__ci_get(rt, k->spec, kc__caller_world(rt), &ci);
  if (st) return st;
  uint32_t n = ci->nparams;
  if (nargs != n || (n && !args)) return kc__explain_args(rt, ci, ctx, args, nargs, KC__RULES_BOUND);
  size_t values = 0, maxal = 16;
  bool ex_only = false;
  for (uint32_t i = 0; i < n; i++) {
    if (!args_fit(&args[i], ci->sig[i], ctx)) return args_explain(rt, ci, ctx, args, nargs, i);
    ex_only |= ci->sig[i] == KC__SIG(KC_ARG_LOCAL, 0);
    size_t al = value_align(ci->sig[i]);
    values = KC__ALIGN_UP(values, al) + value_room(ci->sig[i]);
    if (al > maxal) maxal = al;
  }
  size_t head = KC__ALIGN_UP(sizeof(kc_args) + n * sizeof(void *), 16);
  size_t size = head + (maxal - 16) + values + n * (sizeof(kc_arg) + sizeof(uint64_t));
  kc_args *a = kc__calloc(rt, size);
  if (!a) return kc__err(rt, KC_ENOMEM, "kc_args_create: out of memory");
  a->values = (unsigned char *)a + head;
  a->values += KC__ALIGN_UP((uintptr_t)a->values, maxal) - (uintptr_t)a->values;
  a->args = (kc_arg *)(void *)(a->values + values);
  a->want = (uint64_t *)(void *)(a->args + n);
  memcpy(a->want, ci->sig, n * sizeof *a->want);
  for (size_t i = 0, off = 0; i < n; off += value_room(a->want[i]), i++) {
    off = KC__ALIGN_UP(off, value_align(a->want[i]));
    args_store(a, (uint32_t)i, &args[i], a->values + off);
  }
  atomic_init(&a->l, &kc__no_linked);
  atomic_init(&a->gl, &kc__no_linked);
  atomic_init(&a->ci_id, ci->id | (ex_only ? KC__ARGS_EX_ONLY : 0));
  a->ctx = ctx;
  a->rt = rt;
  a->k = k;
  a->ctx_id = kc__load_relaxed(&ctx->id);
  a->n = n;
  kc__lock(&rt->kernels_lock);
  KC__LIST_PUSH(k->bound, a);
  KC__LIST_PUSH_AT(rt->bound_args, a, all);
  kc__unlock(&rt->kernels_lock);
  *out = a;
  return KC_OK;
}

kc_status kc_args_set(kc_args *a, uint32_t index, kc_arg arg) {
  if (!a) return kc__err(NULL, KC_EINVAL, "kc_args_set: args is NULL");
  kc_runtime *rt = a->rt;
  const char *name = a->k->spec->name;
  if (index >= a->n)
    return kc__err(rt, KC_EARGS, "kc_args_set of '%s': argument %u does not exist (it takes %u)", name, index,
                   a->n);
  if (!kc__load_relaxed(&a->ctx->alive) || kc__load_relaxed(&a->ctx->id) != a->ctx_id)
    return kc__err(rt, KC_EDESTROYED, "kc_args_set of '%s': the context has been destroyed", name);
  if (!args_fit(&arg, a->want[index], a->ctx)) {
    kc_status st = kc__explain_arg(rt, name, index, "", a->want[index], &arg, a->ctx, KC__RULES_BOUND);
    return st ? st : kc__err(rt, KC_EARGS, "kc_args_set of '%s': argument %u does not fit", name, index);
  }
  /* a scalar keeps its room: where args[index] points since create.
   * Under kernels_lock, as kc_buffer_destroy's mark of a bound buffer that
   * it destroys (context.c, unbind_buffer): a mark made between this
   * check and this store would otherwise land on the new binding. */
  kc__lock(&rt->kernels_lock);
  args_store(a, index, &arg, (unsigned char *)(uintptr_t)a->args[index].ptr);
  kc__unlock(&rt->kernels_lock);
  return KC_OK;
}

/* Unlinks a from its kernel's list; kernels_lock held. */
static void args_free_locked(kc_runtime *rt, kc_args *a) {
  KC__LIST_REMOVE(a->k->bound, a);
  KC__LIST_REMOVE_AT(rt->bound_args, a, all);
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
 * link into the context (while stream is capturing a graph, only what is
 * there already: kc__capture_ci); then remembers the linked object. */
kc_status kc__args_resolve(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block, const kc_stream *stream,
                           bool ex, kc__linked **out) {
  if (!a) return kc__err(NULL, KC_EINVAL, "kc_launch_args: args is NULL");
  kc_runtime *rt = a->rt;
  kc_context *ctx = a->ctx;
  const char *name = a->k->spec->name;
  kc_status st = slow_checks(rt, "kc_launch_args", name, ctx, a->ctx_id, grid, block);
  if (st) return st;
  uint64_t ex_only = kc__load_relaxed(&a->ci_id) & KC__ARGS_EX_ONLY; /* constant: set at kc_args_create */
  if (ex_only && !ex)
    return kc__err(rt, KC_EARGS,
                   "kc_launch_args of '%s': the bound arguments size local memory (KC_ARG_LOCAL_BYTES, for a "
                   "KC_LOCAL parameter), which only kc_launch_args_ex passes: launch them with "
                   "kc_launch_args_ex",
                   name);
  for (uint32_t i = 0; i < a->n; i++) /* held by pointer: destroyed since they were bound? */
    if (a->args[i].kind == KC_ARG_BUFFER &&
        (__atomic_load_n(&a->args[i].size, __ATOMIC_RELAXED) == KC__ARGS_BUFFER_GONE ||
         !((const kc_buffer *)a->args[i].ptr)->ctx))
      return kc__err(rt, KC_EARGS,
                     "kc_launch_args of '%s': argument %u is a buffer that has been destroyed since it was "
                     "bound (kc_args_set binds another)",
                     name, i);
  kc__fetch_add_relaxed(&rt->n_slow, 1);
  kc_world w = kc__caller_world(rt);
  if (KC__UNLIKELY(kc__log_on(rt, KC_LOG_DEBUG)))
    kc__trace_launch_miss(rt, "kc_launch_args", a->k->spec, ctx, kc__load_relaxed(&a->l), NULL, w);
  kc__ci *ci;
  bool capturing = kc__stream_capturing(ctx, stream); /* NULL: the default stream */
  if (capturing) st = kc__capture_ci(ctx, a->k->spec, w, &ci);
  else st = kc__ci_get(rt, a->k->spec, w, &ci);
  if (st) return st;
  if (ci->nparams != a->n || memcmp(ci->sig, a->want, a->n * sizeof *a->want) != 0) {
    kc__explain_args(rt, ci, ctx, a->args, a->n, KC__RULES_BOUND);
    char why[512];
    snprintf(why, sizeof why, "%s", kc_errmsg(rt));
    return kc__err(rt, KC_EARGS,
                   "kc_launch_args of '%s': the kernel's parameters changed since the arguments were "
                   "bound: %s",
                   name, why);
  }
  kc__linked *l = NULL;
  if (capturing) st = kc__capture_link(ctx, ci, &l);
  else st = kc__ctx_link(ctx, ci, w, &l);
  if (st) return st;
  *out = l;
  if (KC__UNLIKELY(rt->checked)) return KC_OK; /* checked mode fills no cache */
  kc__store_relaxed(&a->ci_id, ci->id | ex_only);
  kc__store_relaxed(rt->guarded ? &a->gl : &a->l, l);
  return KC_OK;
}

/* The cached linked object of a runtime that guards launches, if it
 * serves the caller's world (inside a section; ex: kc_launch_args_ex,
 * which takes local memory sizes); else NULL. */
kc__linked *kc__args_guarded_hit(kc_args *a, bool ex) {
  kc__linked *l = kc__load_relaxed(&a->gl);
  if (kc__load_acquire(&l->link_key) != kc__load_relaxed(&a->ctx->link_key)) return NULL;
  uint64_t id = kc__load_relaxed(&a->ci_id);
  if (ex) id &= ~KC__ARGS_EX_ONLY;
  const kc__ci *ci = l->ci;
  if (!kc__ci_valid_at(ci, kc__caller_world(a->rt)) || ci->id != id) return NULL;
  kc__count_relaxed(&a->ctx->fast_hits);
  return l;
}

/* kc_launch_args' slow path, inside a section. */
static kc_status args_run(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  kc__linked *l = a->rt->guarded ? kc__args_guarded_hit(a, false) : NULL;
  if (l) return l->b.launch(&l->b, a->argv, grid, block);
  kc_status st = kc__args_resolve(a, grid, block, NULL, false, &l);
  if (st) return st;
  if (KC__UNLIKELY(a->rt->checked)) return kc__checked_launch(l, a->ctx, grid, block, a->args, a->n, a->argv);
  return l->b.launch(&l->b, a->argv, grid, block);
}

static KC__NOINLINE kc_status args_slow(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  if (!a) return kc__err(NULL, KC_EINVAL, "kc_launch_args: args is NULL");
  kc_status st = kc__enter(a->rt, "kc_launch_args");
  if (st) return st;
  st = args_run(a, grid, block);
  kc__leave();
  return st;
}

/* The cached path while some thread holds a pin (see launch_pinned). */
static KC__NOINLINE kc_status args_pinned(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  kc__linked *l = kc__load_relaxed(&a->l);
  if (KC__UNLIKELY(kc__load_acquire(&l->link_key) != kc__load_relaxed(&a->ctx->link_key)))
    return args_slow(a, grid, block);
  const kc__ci *ci = l->ci;
  if (KC__LIKELY(kc__ci_valid_at(ci, kc__caller_world(a->rt)) && ci->id == kc__load_relaxed(&a->ci_id))) {
    kc__count_relaxed(&a->ctx->fast_hits);
    return l->b.launch(&l->b, a->argv, grid, block);
  }
  return args_slow(a, grid, block);
}

/* The fast path of bound arguments: kc_launch's checks, less the
 * arguments' (checked when bound) plus the code's identity (ci_id), then
 * the backend's launch with the bound argv. */
kc_status kc_launch_args(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block) {
  if (KC__LIKELY(a != NULL)) {
    kc__linked *l = kc__load_relaxed(&a->l);
    kc_context *ctx = a->ctx;
    if (KC__LIKELY(kc__load_acquire(&l->link_key) == kc__load_relaxed(&ctx->link_key))) {
      const kc__ci *ci = l->ci;
      kc_world w = kc__load_acquire(&a->rt->fast_world); /* as in kc_launch */
      if (KC__LIKELY(w < kc__load_relaxed(&ci->max_world) && ci->id == kc__load_relaxed(&a->ci_id))) {
        kc__count_relaxed(&ctx->fast_hits);
        return l->b.launch(&l->b, a->argv, grid, block);
      }
      return args_pinned(a, grid, block);
    }
  }
  return args_slow(a, grid, block);
}
