/* SPDX-License-Identifier: MIT */
/*
 * interop.c -- owns streams (kc_stream: a native in-order queue of one
 * context, made by kcache or the caller's) and kc_launch_config's
 * initialization. Adopted contexts and foreign buffers live with the rest
 * of contexts and buffers in context.c; launches with a configuration in
 * launch.c. The backend does the native work (backend.h, "Interop").
 */
#include "core/core.h"

#include <stdio.h>

#include <string.h>

/* ctx is alive and its backend has `op`; else the error for fn. */
static kc_status stream_ctx_check(kc_context *ctx, const void *op, const char *fn) {
  if (!ctx) return kc__err(NULL, KC_EINVAL, "%s: context is NULL", fn);
  kc_runtime *rt = ctx->rt;
  if (!kc__load_relaxed(&ctx->alive))
    return kc__err(rt, KC_EDESTROYED, "%s: the context has been destroyed", fn);
  if (!op) return kc__err(rt, KC_EUNAVAILABLE, "%s: the %s backend has no streams", fn, rt->be->name);
  return KC_OK;
}

/* Puts a new stream of ctx on its list (made: native from the backend). */
static kc_status stream_open(kc_context *ctx, bool create, void *native, const char *fn, kc_stream **out) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&ctx->lock);
  kc_status st = KC_OK;
  kc_stream *s = NULL;
  if (!kc__load_relaxed(&ctx->alive))
    st = kc__err(rt, KC_EDESTROYED, "%s: the context has been destroyed", fn);
  if (!st) {
    KC__STACK_POP(ctx->free_streams, s, next);
    if (!s && !(s = kc__calloc(rt, sizeof *s))) st = kc__err(rt, KC_ENOMEM, "%s: out of memory", fn);
  }
  if (!st) st = create ? rt->be->stream_create(ctx->bctx, &native) : rt->be->stream_wrap(ctx->bctx, native);
  if (st) {
    if (s) KC__STACK_PUSH(ctx->free_streams, s, next);
    kc__unlock(&ctx->lock);
    return st;
  }
  s->ctx = ctx;
  s->native = native;
  s->owned = create;
  kc__store_relaxed(&s->alive, 1);
  s->prev = NULL;
  KC__LIST_PUSH(ctx->streams, s);
  kc__unlock(&ctx->lock);
  *out = s;
  return KC_OK;
}

kc_status kc_stream_create(kc_context *ctx, kc_stream **out) {
  if (!out) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_stream_create: out is NULL");
  *out = NULL;
  kc_status st =
      stream_ctx_check(ctx, ctx ? (const void *)ctx->rt->be->stream_create : NULL, "kc_stream_create");
  return st ? st : stream_open(ctx, true, NULL, "kc_stream_create", out);
}

kc_status kc_stream_wrap(kc_context *ctx, void *native, kc_stream **out) {
  if (!out) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_stream_wrap: out is NULL");
  *out = NULL;
  kc_status st = stream_ctx_check(ctx, ctx ? (const void *)ctx->rt->be->stream_wrap : NULL, "kc_stream_wrap");
  return st ? st : stream_open(ctx, false, native, "kc_stream_wrap", out);
}

/* Releases s's native handle and moves it to its context's free list;
 * ctx->lock held, s alive. */
static void stream_close_locked(kc_stream *s) {
  kc_context *ctx = s->ctx;
  ctx->rt->be->stream_release(ctx->bctx, s->native, s->owned);
  KC__LIST_REMOVE(ctx->streams, s);
  s->prev = NULL;
  s->native = NULL;
  kc__store_relaxed(&s->alive, 0);
  KC__STACK_PUSH(ctx->free_streams, s, next);
}

void kc__streams_teardown(kc_context *ctx) {
  while (ctx->streams) stream_close_locked(ctx->streams);
}

/* Under ctx->lock, so that no stream is destroyed while it is drained;
 * the first failure is kept, with its message (a later stream's sync
 * writes the thread's message again), the other streams are still waited
 * for. */
kc_status kc__streams_sync(kc_context *ctx) {
  const kc__backend *be = ctx->rt->be;
  if (!be->stream_sync) return KC_OK;
  kc_status first = KC_OK;
  char msg[1024];
  kc__lock(&ctx->lock);
  for (kc_stream *s = ctx->streams; s; s = s->next) {
    kc_status st = be->stream_sync(ctx->bctx, s->native);
    if (st && !first) {
      first = st;
      snprintf(msg, sizeof msg, "%s", kc_errmsg(ctx->rt));
    }
  }
  kc__unlock(&ctx->lock);
  return first ? kc__err(ctx->rt, first, "%s", msg) : KC_OK;
}

void kc__streams_free(kc_context *ctx) {
  for (kc_stream *s = ctx->free_streams, *next; s; s = next) {
    next = s->next;
    kc__free(ctx->rt, s);
  }
  ctx->free_streams = NULL;
}

/* A destroyed stream's struct stays (type-stable): destroying it again, or
 * after its context, does nothing. */
void kc_stream_destroy(kc_stream *s) {
  if (!s) return;
  kc_context *ctx = s->ctx; /* type-stable: the struct lives as long as the runtime */
  kc__lock(&ctx->lock);
  if (kc__load_relaxed(&s->alive)) stream_close_locked(s);
  kc__unlock(&ctx->lock);
}

/* s is a live stream; else the error for fn. */
static kc_status stream_check(const kc_stream *s, const char *fn) {
  if (!s) return kc__err(NULL, KC_EINVAL, "%s: stream is NULL", fn);
  if (!kc__load_relaxed(&s->alive))
    return kc__err(s->ctx->rt, KC_EDESTROYED, "%s: the stream's context has been destroyed", fn);
  return KC_OK;
}

kc_status kc_stream_sync(kc_stream *s) {
  kc_status st = stream_check(s, "kc_stream_sync");
  return st ? st : s->ctx->rt->be->stream_sync(s->ctx->bctx, s->native);
}

kc_status kc_stream_wait(kc_stream *s, kc_stream *other) {
  kc_status st = stream_check(s, "kc_stream_wait");
  if (!st) st = stream_check(other, "kc_stream_wait");
  if (st) return st;
  kc_runtime *rt = s->ctx->rt;
  if (other->ctx != s->ctx)
    return kc__err(rt, KC_EINVAL, "kc_stream_wait: the two streams belong to different contexts");
  if (other == s) return KC_OK; /* in order already */
  return rt->be->stream_wait(s->ctx->bctx, s->native, other->native);
}

/* What a user sees of s->native (NULL for the host's queues). */
static void *stream_shown(const kc_stream *s) { return s->ctx->rt->be->private_streams ? NULL : s->native; }

void *kc_stream_native(const kc_stream *s) {
  return s && kc__load_relaxed(&s->alive) ? stream_shown(s) : NULL;
}

kc_status kc_stream_get_native(const kc_stream *s, void **native) {
  if (!native) return kc__err(s ? s->ctx->rt : NULL, KC_EINVAL, "kc_stream_get_native: native is NULL");
  *native = NULL;
  kc_status st = stream_check(s, "kc_stream_get_native");
  if (!st) *native = stream_shown(s);
  return st;
}

/* ------------------------------------------------------ launch config */

kc_status kc_launch_config_init_size(kc_launch_config *cfg, size_t size) {
  if (!cfg) return kc__err(NULL, KC_EINVAL, "kc_launch_config_init: cfg is NULL");
  kc_status st =
      kc__abi_check(NULL, "kc_launch_config", KC__INIT_HINT(kc_launch_config_init, kc_launch_config), NULL,
                    size, KC__LAUNCH_CONFIG_MIN_SIZE, sizeof *cfg);
  if (st) return st;
  kc_launch_config d = {.size = sizeof d, .grid = {1, 1, 1}, .block = {1, 1, 1}};
  size_t n = size < sizeof d ? size : sizeof d;
  memset(cfg, 0, size);
  memcpy(cfg, &d, n);
  cfg->size = size;
  return KC_OK;
}
