/* SPDX-License-Identifier: MIT */
/*
 * context.c -- owns contexts, their linked objects and their buffers:
 * create/destroy/reset (context structs are type-stable: recycled, never
 * freed while the runtime lives), kc__ctx_link (a code instance loaded
 * into a context, on first use; linked objects are type-stable per
 * specialization), and buffers (type-stable in their context struct, so a
 * destroyed one answers KC_EDESTROYED).
 */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- contexts */

#define linked_hash(l) ((l)->ci->id)

/* Unloads a linked object and keeps its memory for its specialization:
 * handles may still point at it, and link key 0 never matches. */
void kc__linked_recycle(kc_runtime *rt, kc__linked *l) {
  rt->be->unlink(&l->b);
  kc__store_release(&l->link_key, 0);
  kc__spec *spec = l->ci->spec;
  kc__lock(&spec->free_lock);
  KC__STACK_PUSH(spec->free_linked, l, next_in_bucket);
  kc__unlock(&spec->free_lock);
}

static void unlink_all(kc_context *ctx) {
  KC__HTAB_DROP_IF(&ctx->linked, kc__linked, l, next_in_bucket, true, kc__linked_recycle(ctx->rt, l));
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
    return kc__err(rt, KC_EINVAL, "kc_context_create: device %d out of range (the %s backend has %d)", device,
                   rt->be->name, n);
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
  ctx->linked.count = 0;
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
  if (owner->rt->checked) kc__checked_buf_destroy(owner, b);
  else owner->rt->be->buf_destroy(owner->bctx, &b->h);
  b->h.u64 = 0;
  b->ctx = NULL;
  b->size = 0;
  b->prev = NULL;
  KC__STACK_PUSH(owner->free_buffers, b, next);
}

/* Frees what a live context holds; the struct stays for reuse. */
void kc__context_teardown(kc_context *ctx) {
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
  kc__context_teardown(ctx);
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
  kc_status st = ctx->rt->be->ctx_finish(ctx->bctx);
  /* checked mode: the guard zones of every buffer, once the work is done */
  return st || !ctx->rt->checked ? st : kc__checked_finish(ctx);
}

/* The linked object of ci in ctx, linking it on first use. */
kc_status kc__ctx_link(kc_context *ctx, kc__ci *ci, kc__linked **out) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&ctx->lock);
  if (!kc__load_relaxed(&ctx->alive)) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_EDESTROYED, "launch of '%s': the context has been destroyed", ci->spec->name);
  }
  KC__HTAB_FOR(&ctx->linked, ci->id, kc__linked, l, next_in_bucket)
  if (l->ci == ci) {
    kc__unlock(&ctx->lock);
    *out = l;
    return KC_OK;
  }
  bool ok;
  kc__htab_reserve(&rt->heap, &ctx->linked, kc__linked, next_in_bucket, linked_hash, 16, &ok);
  if (!ok) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_ENOMEM, "out of memory linking '%s'", ci->spec->name);
  }
  kc__spec *spec = ci->spec;
  kc__lock(&spec->free_lock);
  kc__linked *l;
  KC__STACK_POP(spec->free_linked, l, next_in_bucket);
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
  l->nargs = ci->nparams;
  l->sig = ci->sig;
  l->b = (kc__blinked){.bctx = ctx->bctx};
  const kc__artifact a = kc__artifact_of(ci);
  kc_status st = rt->be->link(ctx->bctx, &a, &l->b);
  if (st) {
    kc__lock(&spec->free_lock);
    KC__STACK_PUSH(spec->free_linked, l, next_in_bucket);
    kc__unlock(&spec->free_lock);
    kc__unlock(&ctx->lock);
    return st;
  }
  if (!l->b.entry) l->b.entry = kc__entry_packed;
  kc__store_release(&l->link_key, kc__load_relaxed(&ctx->link_key));
  KC__HTAB_PUT(&ctx->linked, l, ci->id, next_in_bucket);
  kc__fetch_add_relaxed(&rt->n_links, 1);
  kc__unlock(&ctx->lock);
  *out = l;
  return KC_OK;
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
  kc_buffer *b;
  KC__STACK_POP(ctx->free_buffers, b, next);
  if (!b) {
    b = kc__calloc(rt, sizeof *b);
    if (!b) {
      kc__unlock(&ctx->lock);
      return kc__err(rt, KC_ENOMEM, "kc_buffer_create: out of memory");
    }
    b->owner = ctx;
  }
  kc_status st =
      rt->checked ? kc__checked_buf_create(ctx, size, b) : rt->be->buf_create(ctx->bctx, size, &b->h);
  if (st) {
    KC__STACK_PUSH(ctx->free_buffers, b, next);
    kc__unlock(&ctx->lock);
    return st;
  }
  b->ctx = ctx;
  b->size = size;
  KC__LIST_PUSH(ctx->buffers, b);
  kc__unlock(&ctx->lock);
  *out = b;
  return KC_OK;
}

/* A buffer destroyed twice, or after its context: its struct is still
 * there (type-stable), so this is an error message, not a double free. */
/* Bound arguments hold their buffers by pointer, and their fast path
 * checks no argument: those of ctx that hold b forget the code they reached
 * (ci_id 0 is no code instance's id), so their next launch takes the slow
 * path, which finds the destroyed buffer (KC_EARGS). Walks the runtime's
 * bound arguments, not its kernels: the cost is what there is to check.
 * Under ctx->lock; takes kernels_lock (below it in the order). */
static void unbind_buffer(kc_context *ctx, const kc_buffer *b) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&rt->kernels_lock);
  for (kc_args *a = rt->bound_args; a; a = a->all.next) {
    if (a->ctx != ctx) continue;
    for (uint32_t i = 0; i < a->n; i++)
      if (a->args[i].kind == KC_ARG_BUFFER && a->args[i].ptr == b) kc__store_relaxed(&a->ci_id, 0);
  }
  kc__unlock(&rt->kernels_lock);
}

void kc_buffer_destroy(kc_buffer *b) {
  if (!b) return;
  kc_context *ctx = b->owner;
  kc__lock(&ctx->lock);
  if (!b->ctx) {
    kc__unlock(&ctx->lock);
    kc__err(ctx->rt, KC_EDESTROYED,
            "kc_buffer_destroy: the buffer has been destroyed (by "
            "kc_buffer_destroy or with its context)");
    return;
  }
  KC__LIST_REMOVE(ctx->buffers, b);
  buffer_retire(ctx, b);
  unbind_buffer(ctx, b);
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

/* ------------------------------------------------------- backend services */

kc__bsvc kc__bsvc_of(const kc_runtime *rt) {
  if (!rt) return (kc__bsvc){{kc__libc_alloc, NULL}, 0, NULL};
  return (kc__bsvc){rt->heap, rt->id, rt->be};
}

const char *kc__blinked_name(const kc__blinked *b) { return kc__linked_name(kc__linked_of(b)); }
