/* SPDX-License-Identifier: MIT */
/*
 * context.c -- owns contexts, their linked objects and their buffers:
 * create/destroy/reset (context structs are type-stable: recycled, never
 * freed while the runtime lives), kc__ctx_link (a code instance loaded
 * into a context, on first use; linked objects are type-stable per
 * specialization), and buffers (type-stable in their context struct, so a
 * destroyed one answers KC_EDESTROYED).
 */
#include "core/cache_glue.h"
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

void kc__ctx_limbo_drop(kc_context *ctx, uint64_t batch) {
  for (kc__linked **pl = &ctx->limbo; *pl;) {
    kc__linked *l = *pl;
    if (batch && l->batch != batch) {
      pl = &l->next_in_bucket;
      continue;
    }
    *pl = l->next_in_bucket;
    kc__linked_recycle(ctx->rt, l);
  }
}

static void unlink_all(kc_context *ctx) {
  KC__HTAB_DROP_IF(&ctx->linked, kc__linked, l, next_in_bucket, true, kc__linked_recycle(ctx->rt, l));
  kc__ctx_limbo_drop(ctx, 0);
}

/* A context's link key and the offset of its slot in a handle. */
static void set_link_key(kc_context *ctx, uint64_t key) {
  kc__store_relaxed(&ctx->slot_off, KC__SLOT_OFF(key));
  kc__store_relaxed(&ctx->link_key, key);
}

/* Makes a context on a backend session: kc_context_create's (native_ctx
 * NULL and wrap false: a new session on `device`) and kc_context_wrap's. */
static kc_status context_open(kc_runtime *rt, int device, bool wrap, void *native_ctx, void *native_dev,
                              kc_context **out) {
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
  kc_status st = wrap ? rt->be->ctx_wrap(rt->bstate, native_ctx, native_dev, &bctx)
                      : rt->be->ctx_create(rt->bstate, device, &bctx);
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
  ctx->wrapped = wrap;
  ctx->buffers = NULL;
  ctx->streams = NULL;
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

kc_status kc_context_create(kc_runtime *rt, int device, kc_context **out) {
  if (!out) return kc__err(rt, KC_EINVAL, "kc_context_create: out is NULL");
  *out = NULL;
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_context_create: runtime is NULL");
  int n = rt->be->device_count(rt->bstate);
  if (device < 0 || device >= n)
    return kc__err(rt, KC_EINVAL, "kc_context_create: device %d out of range (the %s backend has %d)", device,
                   rt->be->name, n);
  return context_open(rt, device, false, NULL, NULL, out);
}

kc_status kc_context_wrap(kc_runtime *rt, void *native_ctx, void *native_device, kc_context **out) {
  if (!out) return kc__err(rt, KC_EINVAL, "kc_context_wrap: out is NULL");
  *out = NULL;
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_context_wrap: runtime is NULL");
  if (!rt->be->ctx_wrap)
    return kc__err(rt, KC_EUNAVAILABLE, "kc_context_wrap: the %s backend cannot adopt a native context",
                   rt->be->name);
  return context_open(rt, -1, true, native_ctx, native_device, out);
}

void *kc_context_native(const kc_context *ctx) {
  if (!ctx || !kc__load_relaxed(&ctx->alive) || !ctx->rt->be->ctx_native) return NULL;
  return ctx->rt->be->ctx_native(ctx->bctx);
}

/* Releases a buffer's backend memory and keeps its struct on the owner's
 * free list, marked destroyed (ctx NULL); owner->lock held. */
static void buffer_retire(kc_context *owner, kc_buffer *b) {
  const kc__backend *be = owner->rt->be;
  if (b->origin == KC__BUF_FOREIGN || b->origin == KC__BUF_HOST) {
    if (be->buf_unwrap) be->buf_unwrap(owner->bctx, &b->h);
  } else if (b->origin == KC__BUF_VIEW) {
    if (be->buf_view && be->buf_view_destroy) be->buf_view_destroy(owner->bctx, &b->h);
  } else if (owner->rt->checked) {
    kc__checked_buf_destroy(owner, b);
  } else {
    be->buf_destroy(owner->bctx, &b->h);
  }
  if (b->origin == KC__BUF_VIEW) b->parent->nviews--;
  b->origin = KC__BUF_OWNED;
  b->nviews = 0;
  b->parent = NULL;
  b->offset = 0;
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
  kc__streams_teardown(ctx);
  /* views first: a sub-buffer goes before the buffer it is part of */
  for (int views = 1; views >= 0; views--)
    for (kc_buffer *b = ctx->buffers, *next; b; b = next) {
      next = b->next;
      if ((b->origin == KC__BUF_VIEW) != views) continue;
      KC__LIST_REMOVE(ctx->buffers, b);
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
  /* the context's own queue, then every kc_stream of it (on OpenCL each is
   * a queue of its own; CUDA's cuCtxSynchronize has waited for them) */
  kc_status ss = kc__streams_sync(ctx);
  if (!st) st = ss;
  /* checked mode: the guard zones of every buffer, once the work is done */
  return st || !ctx->rt->checked ? st : kc__checked_finish(ctx);
}

kc__linked *kc__ctx_find_linked(kc_context *ctx, const kc__ci *ci) {
  kc__linked *found = NULL;
  kc__lock(&ctx->lock);
  if (kc__load_relaxed(&ctx->alive)) {
    KC__HTAB_FOR(&ctx->linked, ci->id, kc__linked, l, next_in_bucket)
    if (l->ci == ci) found = l;
  }
  kc__unlock(&ctx->lock);
  return found;
}

/* The linked object of ci in ctx, linking it on first use; *dead (and
 * nothing linked) if kc_collect chose ci meanwhile: kc_collect sets dead
 * before it takes the contexts' locks to retire ci's linked objects, so
 * a link made under this lock is either seen by it or sees dead. */
static kc_status link_once(kc_context *ctx, kc__ci *ci, kc__linked **out, bool *dead) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&ctx->lock);
  if (!kc__load_relaxed(&ctx->alive)) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_EDESTROYED, "launch of '%s': the context has been destroyed", ci->spec->name);
  }
  if ((*dead = kc__load_relaxed(&ci->dead))) {
    kc__unlock(&ctx->lock);
    return KC_OK;
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

kc_status kc__ctx_link(kc_context *ctx, kc__ci *ci, kc_world w, kc__linked **out) {
  for (;;) { /* a thread that holds ci is inside a section: ci is not freed under it */
    bool dead;
    kc_status st = link_once(ctx, ci, out, &dead);
    if (st || !dead) return st;
    st = kc__ci_get(ctx->rt, ci->spec, w, &ci);
    if (st) return st;
  }
}

/* ---------------------------------------------------------------- buffers */

/* A buffer struct of ctx for a new buffer (reused or new); ctx->lock held. */
static kc_buffer *buffer_take(kc_context *ctx) {
  kc_buffer *b;
  KC__STACK_POP(ctx->free_buffers, b, next);
  if (!b) {
    b = kc__calloc(ctx->rt, sizeof *b);
    if (b) b->owner = ctx;
  }
  return b;
}

/* The handle of bytes [offset, offset+size) of parent: the backend's view
 * (an OpenCL sub-buffer), else an address plus offset (backend.h). In
 * checked mode an owned parent's handle is itself a view of its guarded
 * allocation, so the view is made of that allocation. */
static kc_status buffer_view_handle(kc_context *ctx, const kc_buffer *parent, size_t offset, size_t size,
                                    kc__bufh *h) {
  const kc__backend *be = ctx->rt->be;
  const kc__bufh *base = parent->whole.u64 ? &parent->whole : &parent->h;
  if (parent->whole.u64) offset += KC_CHECKED_GUARD;
  if (be->buf_view) return be->buf_view(ctx->bctx, base, offset, size, h);
  h->u64 = base->u64 + offset;
  return KC_OK;
}

/* Makes a buffer of ctx: origin says how (buf_create, buf_wrap of native,
 * buf_host of the host memory at native, a view of parent at offset). */
static kc_status buffer_make(kc_context *ctx, uint32_t origin, void *native, kc_buffer *parent, size_t offset,
                             size_t size, const char *fn, kc_buffer **out) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&ctx->lock);
  if (!kc__load_relaxed(&ctx->alive)) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_EDESTROYED, "%s: the context has been destroyed", fn);
  }
  if (parent && !parent->ctx) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_EDESTROYED, "%s: the buffer has been destroyed", fn);
  }
  kc_buffer *b = buffer_take(ctx);
  if (!b) {
    kc__unlock(&ctx->lock);
    return kc__err(rt, KC_ENOMEM, "%s: out of memory", fn);
  }
  const kc__backend *be = rt->be;
  kc_status st = KC_OK;
  b->whole.u64 = 0; /* no guard zones (checked mode) but an owned buffer's */
  if (origin == KC__BUF_OWNED)
    st = rt->checked ? kc__checked_buf_create(ctx, size, b) : be->buf_create(ctx->bctx, size, &b->h);
  else if (origin == KC__BUF_FOREIGN) st = be->buf_wrap(ctx->bctx, native, size, &b->h);
  else if (origin == KC__BUF_HOST) st = be->buf_host(ctx->bctx, native, size, &b->h);
  else st = buffer_view_handle(ctx, parent, offset, size, &b->h);
  if (st) {
    KC__STACK_PUSH(ctx->free_buffers, b, next);
    kc__unlock(&ctx->lock);
    return st;
  }
  b->ctx = ctx;
  b->size = size;
  b->origin = origin;
  b->parent = parent;
  b->offset = offset;
  b->nviews = 0;
  if (parent) parent->nviews++;
  KC__LIST_PUSH(ctx->buffers, b);
  kc__unlock(&ctx->lock);
  *out = b;
  return KC_OK;
}

kc_status kc_buffer_create(kc_context *ctx, size_t size, kc_buffer **out) {
  if (!out) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_buffer_create: out is NULL");
  *out = NULL;
  if (!ctx) return kc__err(NULL, KC_EINVAL, "kc_buffer_create: context is NULL");
  if (size == 0) return kc__err(ctx->rt, KC_EINVAL, "kc_buffer_create: size is 0");
  return buffer_make(ctx, KC__BUF_OWNED, NULL, NULL, 0, size, "kc_buffer_create", out);
}

kc_status kc_buffer_wrap(kc_context *ctx, void *native, size_t size, kc_buffer **out) {
  if (!out) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_buffer_wrap: out is NULL");
  *out = NULL;
  if (!ctx) return kc__err(NULL, KC_EINVAL, "kc_buffer_wrap: context is NULL");
  kc_runtime *rt = ctx->rt;
  if (!rt->be->buf_wrap)
    return kc__err(rt, KC_EUNAVAILABLE, "kc_buffer_wrap: the %s backend cannot wrap memory", rt->be->name);
  if (!native) return kc__err(rt, KC_EINVAL, "kc_buffer_wrap: the native handle is NULL");
  if (size == 0) return kc__err(rt, KC_EINVAL, "kc_buffer_wrap: size is 0");
  return buffer_make(ctx, KC__BUF_FOREIGN, native, NULL, 0, size, "kc_buffer_wrap", out);
}

kc_status kc_buffer_host(kc_context *ctx, void *ptr, size_t size, kc_buffer **out) {
  if (!out) return kc__err(ctx ? ctx->rt : NULL, KC_EINVAL, "kc_buffer_host: out is NULL");
  *out = NULL;
  if (!ctx) return kc__err(NULL, KC_EINVAL, "kc_buffer_host: context is NULL");
  kc_runtime *rt = ctx->rt;
  if (!ptr) return kc__err(rt, KC_EINVAL, "kc_buffer_host: the pointer is NULL");
  if (size == 0) return kc__err(rt, KC_EINVAL, "kc_buffer_host: size is 0");
  if (!rt->be->buf_host)
    return kc__err(rt, KC_EUNAVAILABLE,
                   "kc_buffer_host: the %s backend's devices cannot use host memory in place: copy it with "
                   "kc_buffer_write and kc_buffer_read",
                   rt->be->name);
  return buffer_make(ctx, KC__BUF_HOST, ptr, NULL, 0, size, "kc_buffer_host", out);
}

kc_status kc_buffer_view(kc_buffer *buf, size_t offset, size_t size, kc_buffer **out) {
  if (!out) return kc__err(buf ? buf->owner->rt : NULL, KC_EINVAL, "kc_buffer_view: out is NULL");
  *out = NULL;
  if (!buf) return kc__err(NULL, KC_EINVAL, "kc_buffer_view: buffer is NULL");
  kc_context *ctx = buf->owner;
  kc_runtime *rt = ctx->rt;
  /* read under no lock: a view made while buf is destroyed is the caller's
   * race (kcache.h); buffer_make checks buf again under the lock */
  size_t have = kc_buffer_size(buf);
  if (!buf->ctx) return kc__err(rt, KC_EDESTROYED, "kc_buffer_view: the buffer has been destroyed");
  if (size == 0 || offset > have || size > have - offset)
    return kc__err(rt, KC_EINVAL,
                   "kc_buffer_view: [%zu, %zu) is not a nonempty range of the buffer of %zu bytes", offset,
                   offset + size, have);
  kc_buffer *root = buf->origin == KC__BUF_VIEW ? buf->parent : buf;
  size_t at = buf->origin == KC__BUF_VIEW ? buf->offset + offset : offset;
  return buffer_make(ctx, KC__BUF_VIEW, NULL, root, at, size, "kc_buffer_view", out);
}

void *kc_buffer_native(const kc_buffer *b) { return b && b->ctx ? b->h.ptr : NULL; }

/* A buffer destroyed twice, or after its context: its struct is still
 * there (type-stable), so this is an error message, not a double free. */
/* Bound arguments hold their buffers by pointer, and their fast path
 * checks no argument: those of ctx that hold b forget the code they reached
 * (ci_id 0, or the bit alone, is no code instance's id), so their next launch takes the slow
 * path, which finds the destroyed buffer (KC_EARGS). Walks the runtime's
 * bound arguments, not its kernels: the cost is what there is to check.
 * Under ctx->lock; takes kernels_lock (below it in the order). */
static void unbind_buffer(kc_context *ctx, const kc_buffer *b) {
  kc_runtime *rt = ctx->rt;
  kc__lock(&rt->kernels_lock);
  for (kc_args *a = rt->bound_args; a; a = a->all.next) {
    if (a->ctx != ctx) continue;
    for (uint32_t i = 0; i < a->n; i++)
      if (a->args[i].kind == KC_ARG_BUFFER && a->args[i].ptr == b) { /* KC__ARGS_EX_ONLY kept */
        kc__store_relaxed(&a->ci_id, kc__load_relaxed(&a->ci_id) & KC__ARGS_EX_ONLY);
        /* and the slot is marked, since b's struct may serve a new buffer
         * of ctx before the next launch (a bound buffer's size is 0
         * otherwise; kc_args_set binds another with 0 again) */
        __atomic_store_n(&a->args[i].size, KC__ARGS_BUFFER_GONE, __ATOMIC_RELAXED);
      }
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
  /* its views go first (a view's parent is never a view); a buffer without
   * views costs no scan */
  if (b->nviews)
    for (kc_buffer *v = ctx->buffers, *next; v && b->nviews; v = next) {
      next = v->next;
      if (v->parent != b) continue;
      KC__LIST_REMOVE(ctx->buffers, v);
      buffer_retire(ctx, v);
      unbind_buffer(ctx, v);
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
  kc__bsvc sv = {.heap = {kc__libc_alloc, NULL},
                 .owner = 0,
                 .be = NULL,
                 .log = NULL,
                 .bad_dims = kc__launch_bad_dims,
                 .bad_args = kc__launch_bad_args,
                 .name_of = kc__blinked_name,
                 .better = kc__store_better,
                 .writable = kc__store_writable};
  if (rt) sv.heap = rt->heap, sv.owner = rt->id, sv.be = rt->be, sv.log = &rt->log, sv.rt = (kc_runtime *)rt;
  return sv;
}

const char *kc__blinked_name(const kc__blinked *b) { return kc__linked_name(kc__linked_of(b)); }
