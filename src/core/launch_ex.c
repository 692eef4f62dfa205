/* SPDX-License-Identifier: MIT */
/*
 * launch_ex.c -- owns launches with a configuration (kc_launch_ex,
 * kc_launch_args_ex): a stream, dynamic shared memory, cooperative and
 * cluster launches, raw-pointer and local-memory arguments; capture
 * safety (a stream that is capturing a CUDA graph gets no compile and no
 * link: KC_EBUSY) is capture.c's.
 *
 * The cached path keeps launch.c's contract: it reads the handle's slot,
 * the context's link key and the latest world exactly like kc_launch, and
 * never locks, allocates or hashes; the checks of the configuration and the
 * arguments and their packing follow in one out-of-line function (it needs
 * a frame for argv), then the backend's launch_ex. kc_launch's own fast
 * path is untouched: nothing here is on it.
 */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ the launch */

/* A configuration of another size than this library's, read as this
 * library's (the caller's copy in *full): smaller ones get the defaults
 * past their end; a larger one is accepted if every byte past what the
 * library knows is 0 (kcache.h, "Struct sizes"). Cold. */
static KC__COLD kc_status cfg_normalize(kc_runtime *rt, const kc_launch_config *cfg, kc_launch_config *full) {
  kc_status st = kc__abi_check(rt, "kc_launch_config", KC__INIT_HINT(kc_launch_config_init, kc_launch_config),
                               cfg, cfg->size, KC__LAUNCH_CONFIG_MIN_SIZE, sizeof *full);
  if (st) return st;
  if (cfg->size > sizeof *full) {
    memcpy(full, cfg, sizeof *full);
  } else {
    kc_launch_config_init_size(full, sizeof *full);
    memcpy(full, cfg, cfg->size);
  }
  full->size = sizeof *full;
  return KC_OK;
}

static KC__COLD kc_status bad_stream(kc_runtime *rt, const kc_context *ctx, const kc_stream *s,
                                     const char *name) {
  if (!kc__load_relaxed(&s->alive))
    return kc__err(rt, KC_EDESTROYED, "launch of '%s': the stream's context has been destroyed", name);
  (void)ctx;
  return kc__err(rt, KC_EINVAL, "launch of '%s': the stream belongs to another context", name);
}

static inline bool arg_fits_ex(const kc_arg *a, uint64_t want, const kc_context *ctx) {
  switch (a->kind) {
  case KC_ARG_PTR: return want == KC__SIG(KC_ARG_BUFFER, 0) && a->size == 0;
  case KC_ARG_LOCAL: return want == KC__SIG(KC_ARG_LOCAL, 0) && a->size != 0;
  case KC_ARG_BUFFER:
    return want == KC__SIG(KC_ARG_BUFFER, 0) && !a->size && a->ptr && ((const kc_buffer *)a->ptr)->ctx == ctx;
  default: return KC__SIG(a->kind, a->size) == KC__SIG_MATCH(want) && a->ptr && a->size != UINT32_MAX;
  }
}

/* Checked mode on the host (check_each): a launch on a stream runs on the
 * stream's thread, so it is waited for before any check of the guards (its
 * own, at kc_context_finish, or another launch's) can run beside it. */
static inline kc_status checked_stream_wait(kc_runtime *rt, const kc_context *ctx, void *stream,
                                            kc_status st) {
  if (KC__UNLIKELY(rt->check_each) && !st && stream) st = rt->be->stream_sync(ctx->bctx, stream);
  return st;
}

/* What both configured launches do first: cfg as the backend's
 * configuration (*lc), read through *full when the caller's struct has
 * another size than this library's, with its stream checked against ctx. */
static inline kc_status ex_config(kc_runtime *rt, const kc_context *ctx, const kc__linked *l,
                                  const kc_launch_config *cfg, kc_launch_config *full, const kc_arg *args,
                                  kc__lcfg *lc) {
  if (KC__UNLIKELY(cfg->size != sizeof *cfg)) {
    kc_status st = cfg_normalize(rt, cfg, full);
    if (st) return st;
    cfg = full;
  }
  *lc = (kc__lcfg){&cfg->grid, &cfg->block, NULL, cfg->shared_bytes, cfg->flags, cfg->cluster, args};
  const kc_stream *s = cfg->stream;
  if (s) {
    if (KC__UNLIKELY(s->ctx != ctx || !kc__load_relaxed(&s->alive)))
      return bad_stream(rt, ctx, s, l->ci->spec->name);
    lc->stream = s->native;
  }
  return KC_OK;
}

/* The configuration's and the arguments' checks, the packing, the
 * backend's launch_ex. argv as for launch: a buffer's entry is its handle,
 * a scalar's its bytes, a raw pointer's the pointer's value in the caller's
 * kc_arg, local memory's NULL. */
static KC__NOINLINE kc_status ex_go(kc__linked *l, kc_context *ctx, const kc_launch_config *cfg,
                                    const kc_arg *args, uint32_t nargs) {
  kc_runtime *rt = l->rt;
  kc_launch_config full;
  kc__lcfg lc;
  kc_status st = ex_config(rt, ctx, l, cfg, &full, args, &lc);
  if (KC__UNLIKELY(st)) return st;
  void *argv[KC_MAX_ARGS];
  if (KC__UNLIKELY(nargs != l->nargs || (nargs && !args)))
    return kc__explain_args(rt, l->ci, ctx, args, nargs, KC__RULES_EX);
  for (uint32_t i = 0; i < nargs; i++) {
    const kc_arg *a = &args[i];
    if (KC__UNLIKELY(!arg_fits_ex(a, l->sig[i], ctx)))
      return kc__explain_args(rt, l->ci, ctx, args, nargs, KC__RULES_EX);
    argv[i] = a->kind == KC_ARG_PTR ? (void *)(uintptr_t)&a->ptr : (void *)(uintptr_t)a->ptr;
  }
  return rt->be->launch_ex(&l->b, argv, &lc);
}

static kc_status ex_resolve(kc_kernel *k, kc_context *ctx, const kc_launch_config *cfg, const kc_arg *args,
                            uint32_t nargs);

/* kc_launch_ex's checks, then its slow path inside a grace section (on a
 * runtime that guards launches, first the guarded cache: launch.c). */
static KC__NOINLINE kc_status ex_slow(kc_kernel *k, kc_context *ctx, const kc_launch_config *cfg,
                                      const kc_arg *args, uint32_t nargs) {
  if (!k) return kc__err(NULL, KC_EINVAL, "kc_launch_ex: kernel is NULL");
  kc_status st = kc__enter(k->rt, "kc_launch_ex");
  if (st) return st;
  st = ex_resolve(k, ctx, cfg, args, nargs);
  kc__leave();
  return st;
}

static kc_status ex_resolve(kc_kernel *k, kc_context *ctx, const kc_launch_config *cfg, const kc_arg *args,
                            uint32_t nargs) {
  kc_runtime *rt = k->rt;
  const char *name = k->spec->name;
  if (!ctx) return kc__err(rt, KC_EINVAL, "kc_launch_ex: context is NULL");
  if (!cfg) return kc__err(rt, KC_EINVAL, "kc_launch_ex of '%s': cfg is NULL", name);
  if (ctx->rt != rt) return kc__err(rt, KC_EINVAL, "kc_launch_ex: the context belongs to another runtime");
  if (!rt->be->launch_ex)
    return kc__err(rt, KC_EUNAVAILABLE, "kc_launch_ex: the %s backend has no configured launch",
                   rt->be->name);
  kc_launch_config full;
  if (cfg->size != sizeof *cfg) {
    kc_status st = cfg_normalize(rt, cfg, &full);
    if (st) return st;
    cfg = &full;
  }
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  if (key == KC__KEY_DEAD || !kc__load_relaxed(&ctx->alive))
    return kc__err(rt, KC_EDESTROYED, "kc_launch_ex of '%s': the context has been destroyed", name);
  const kc_stream *s = cfg->stream;
  if (s && (s->ctx != ctx || !kc__load_relaxed(&s->alive))) return bad_stream(rt, ctx, s, name);
  if (rt->guarded) {
    kc__linked *g = kc__load_relaxed(&k->gslots[key & (KC__HSLOTS - 1)]);
    if (kc__load_acquire(&g->link_key) == key && kc__ci_valid_at(g->ci, kc__caller_world(rt))) {
      kc__count_relaxed(&ctx->fast_hits);
      return ex_go(g, ctx, cfg, args, nargs);
    }
  }
  kc__fetch_add_relaxed(&rt->n_slow, 1);
  kc_world w = kc__caller_world(rt);
  bool capturing = kc__stream_capturing(ctx, s); /* NULL: the default stream */
  kc__ci *ci;
  kc_status st = capturing ? kc__capture_ci(ctx, k->spec, w, &ci) : kc__ci_get(rt, k->spec, w, &ci);
  if (st) return st;
  kc__linked *l = NULL;
  st = capturing ? kc__capture_link(ctx, ci, &l) : kc__ctx_link(ctx, ci, w, &l);
  if (st) return st;
  /* checked mode fills no cache: every launch comes here, records its
   * buffers' kernel and (host) has their guards checked */
  if (KC__UNLIKELY(rt->checked)) {
    st = checked_stream_wait(rt, ctx, s ? s->native : NULL, ex_go(l, ctx, cfg, args, nargs));
    return kc__checked_after(l, ctx, args, nargs, st);
  }
  kc__store_release(kc__slot_of(k, key), l);
  return ex_go(l, ctx, cfg, args, nargs);
}

/* A pin is held on the runtime, or the latest world is past the slot's
 * code (launch.c: launch_pinned). */
static KC__NOINLINE kc_status ex_pinned(kc_kernel *k, kc_context *ctx, const kc_launch_config *cfg,
                                        const kc_arg *args, uint32_t nargs) {
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  kc__linked *l = kc__load_relaxed(&k->slots[key & (KC__HSLOTS - 1)]);
  if (KC__LIKELY(kc__load_acquire(&l->link_key) == key && kc__ci_valid_at(l->ci, kc__caller_world(k->rt)))) {
    kc__count_relaxed(&ctx->fast_hits);
    return ex_go(l, ctx, cfg, args, nargs);
  }
  return ex_slow(k, ctx, cfg, args, nargs);
}

kc_status kc_launch_ex(kc_kernel *k, kc_context *ctx, const kc_launch_config *cfg, const kc_arg *args,
                       uint32_t nargs) {
  if (KC__LIKELY(k && ctx && cfg)) { /* kc_launch's checks (launch.c) */
    uint64_t key = kc__load_relaxed(&ctx->link_key);
    size_t off = kc__load_relaxed(&ctx->slot_off);
    kc__linked *l = kc__load_relaxed((_Atomic(kc__linked *) *)((char *)k->slots + off));
    if (KC__LIKELY(kc__load_acquire(&l->link_key) == key)) {
      kc_world w = kc__load_acquire(&k->rt->fast_world);
      if (KC__LIKELY(w < kc__load_relaxed(&l->ci->max_world))) {
        kc__count_relaxed(&ctx->fast_hits);
        return ex_go(l, ctx, cfg, args, nargs);
      }
      return ex_pinned(k, ctx, cfg, args, nargs);
    }
  }
  return ex_slow(k, ctx, cfg, args, nargs);
}

/* ---------------------------------------------------- bound arguments */

static KC__NOINLINE kc_status args_ex_go(kc__linked *l, kc_args *a, const kc_launch_config *cfg) {
  kc_launch_config full;
  kc__lcfg lc;
  kc_status st = ex_config(a->rt, a->ctx, l, cfg, &full, a->args, &lc);
  if (KC__UNLIKELY(st)) return st;
  return checked_stream_wait(a->rt, a->ctx, lc.stream, a->rt->be->launch_ex(&l->b, a->argv, &lc));
}

kc_status kc_launch_args_ex(kc_args *a, const kc_launch_config *cfg) {
  if (KC__LIKELY(a && cfg)) { /* kc_launch_args' checks (launch.c) */
    kc__linked *l = kc__load_relaxed(&a->l);
    if (KC__LIKELY(kc__load_acquire(&l->link_key) == kc__load_relaxed(&a->ctx->link_key))) {
      const kc__ci *ci = l->ci;
      kc_world w = kc__load_acquire(&a->rt->fast_world);
      uint64_t id = kc__load_relaxed(&a->ci_id) & ~KC__ARGS_EX_ONLY; /* local sizes are passed here */
      if (KC__LIKELY(w < kc__load_relaxed(&ci->max_world) && ci->id == id)) {
        kc__count_relaxed(&a->ctx->fast_hits);
        return args_ex_go(l, a, cfg);
      }
      /* a pin is held (launch.c: args_pinned): the caller's own world decides */
      if (kc__ci_valid_at(ci, kc__caller_world(a->rt)) && ci->id == id) {
        kc__count_relaxed(&a->ctx->fast_hits);
        return args_ex_go(l, a, cfg);
      }
    }
  }
  if (!a) return kc__err(NULL, KC_EINVAL, "kc_launch_args_ex: args is NULL");
  if (!cfg) return kc__err(a->rt, KC_EINVAL, "kc_launch_args_ex: cfg is NULL");
  if (!a->rt->be->launch_ex)
    return kc__err(a->rt, KC_EUNAVAILABLE, "kc_launch_args_ex: the %s backend has no configured launch",
                   a->rt->be->name);
  const kc_stream *s = cfg->stream;
  if (s && (s->ctx != a->ctx || !kc__load_relaxed(&s->alive)))
    return bad_stream(a->rt, a->ctx, s, a->k->spec->name);
  /* the slow path (pinned threads included): resolve, relink, remember;
   * inside a section, where a runtime that guards launches finds its cache */
  kc_status st = kc__enter(a->rt, "kc_launch_args_ex");
  if (st) return st;
  kc__linked *l = a->rt->guarded ? kc__args_guarded_hit(a, true) : NULL;
  if (!l) st = kc__args_resolve(a, &cfg->grid, &cfg->block, s, true, &l);
  if (!st) st = args_ex_go(l, a, cfg);
  kc__leave();
  return st;
}
