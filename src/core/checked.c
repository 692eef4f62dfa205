/* SPDX-License-Identifier: MIT */
/*
 * checked.c -- owns checked mode (kcache.h, "Checked mode"): buffers with a
 * guard zone of KC_CHECKED_GUARD bytes on each side (one backend buffer for
 * the whole, and the user's buffer a view of its middle), filled with a
 * pattern at create; the check of the pattern after each launch where
 * launches are synchronous (the host backend) and at kc_context_finish; and
 * the message that names the kernel, the argument and the offsets written.
 * Nothing here is on the fast path: in checked mode the slow paths launch
 * through kc__checked_launch and fill no launch cache, so every launch
 * comes back here; with checked mode off nothing here runs.
 */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

#define KC__GUARD ((size_t)KC_CHECKED_GUARD)

void kc__checked_setup(kc_runtime *rt) {
  bool on = false; /* kc_options.checked, else $KC_CHECKED (the resolved configuration) */
  if (kc__config_bool(&rt->conf, KC__SET_CHECKED, &on) == KC__SETTING_BAD)
    kc__config_warn(&rt->log, &rt->conf, KC__SET_CHECKED, "0");
  rt->checked = on;
  rt->check_each = on && strcmp(rt->be->name, "host") == 0;
}

/* The guard pattern's byte i: position-dependent, so that a kernel that
 * writes one constant is seen whatever the constant. */
static unsigned char pattern_at(size_t i) { return (unsigned char)(0xA5u ^ (i * 0x3Bu) ^ (i >> 8)); }

static void pattern(unsigned char *p) {
  for (size_t i = 0; i < KC__GUARD; i++) p[i] = pattern_at(i);
}

static kc_status fill_guards(kc_context *ctx, kc_buffer *b, size_t size) {
  unsigned char pat[KC__GUARD];
  pattern(pat);
  const kc__backend *be = ctx->rt->be;
  kc_status st = be->buf_write(ctx->bctx, &b->whole, 0, pat, KC__GUARD);
  return st ? st : be->buf_write(ctx->bctx, &b->whole, KC__GUARD + size, pat, KC__GUARD);
}

static void release_view(const kc__backend *be, void *bctx, kc_buffer *b) {
  if (be->buf_view && be->buf_view_destroy) be->buf_view_destroy(bctx, &b->h);
  b->h.u64 = 0;
}

kc_status kc__checked_buf_create(kc_context *ctx, size_t size, kc_buffer *b) {
  kc_runtime *rt = ctx->rt;
  const kc__backend *be = rt->be;
  if (size > SIZE_MAX - 2 * KC__GUARD)
    return kc__err(rt, KC_ENOMEM, "kc_buffer_create: %zu bytes and the checked mode's guard zones", size);
  kc_status st = be->buf_create(ctx->bctx, size + 2 * KC__GUARD, &b->whole);
  if (st) return st;
  if (be->buf_view) st = be->buf_view(ctx->bctx, &b->whole, KC__GUARD, size, &b->h);
  else b->h.u64 = b->whole.u64 + KC__GUARD; /* handles are addresses */
  if (st) {
    be->buf_destroy(ctx->bctx, &b->whole);
    return st;
  }
  st = fill_guards(ctx, b, size);
  if (st) {
    release_view(be, ctx->bctx, b);
    be->buf_destroy(ctx->bctx, &b->whole);
    return st;
  }
  b->chk_spec = NULL;
  b->chk_arg = 0;
  b->chk_label[0] = '\0';
  return KC_OK;
}

void kc__checked_buf_destroy(kc_context *owner, kc_buffer *b) {
  const kc__backend *be = owner->rt->be;
  if (!b->whole.u64) { /* a buffer made without guards */
    be->buf_destroy(owner->bctx, &b->h);
    return;
  }
  release_view(be, owner->bctx, b);
  be->buf_destroy(owner->bctx, &b->whole);
  b->whole.u64 = 0;
}

/* The bytes of one guard zone (at `at` in the whole) that differ from the
 * pattern, as offsets from the buffer's start into [*lo, *hi]; restores
 * the zone if any do. */
static kc_status check_zone(kc_context *ctx, kc_buffer *b, size_t at, long long base, long long *lo,
                            long long *hi, bool *hit) {
  const kc__backend *be = ctx->rt->be;
  unsigned char got[KC__GUARD];
  kc_status st = be->buf_read(ctx->bctx, &b->whole, at, got, KC__GUARD);
  if (st) return st;
  *hit = false;
  for (size_t i = 0; i < KC__GUARD; i++) {
    if (got[i] == pattern_at(i)) continue;
    long long off = base + (long long)i;
    if (!*hit) *lo = off;
    *hi = off;
    *hit = true;
  }
  if (!*hit) return KC_OK;
  pattern(got);
  return be->buf_write(ctx->bctx, &b->whole, at, got, KC__GUARD);
}

/* Checks b's guards (ctx->lock held); KC_ELAUNCH naming the kernel that
 * last launched with b, if a write outside it shows. */
static kc_status check_buffer(kc_context *ctx, kc_buffer *b) {
  if (!b->whole.u64) return KC_OK; /* made without guards: nothing to check */
  long long lo = 0, hi = 0, lo2 = 0, hi2 = 0;
  bool before = false, after = false;
  kc_status st = check_zone(ctx, b, 0, -(long long)KC__GUARD, &lo, &hi, &before);
  if (!st) st = check_zone(ctx, b, KC__GUARD + b->size, (long long)b->size, &lo2, &hi2, &after);
  if (st || (!before && !after)) return st;
  if (!before) lo = lo2;
  if (after) hi = hi2;
  const char *where = before && after ? "before its start and after its end"
                      : before        ? "before its start"
                                      : "after its end";
  if (!b->chk_spec)
    return kc__err(ctx->rt, KC_ELAUNCH,
                   "checked mode: a buffer of %zu bytes was written outside, at offsets %lld..%lld (%s), "
                   "by no launch that kcache saw",
                   b->size, lo, hi, where);
  return kc__err(ctx->rt, KC_ELAUNCH,
                 "checked mode: kernel '%s' argument %u%s wrote outside its buffer of %zu bytes, at offsets "
                 "%lld..%lld (%s)",
                 b->chk_spec->name, b->chk_arg, b->chk_label, b->size, lo, hi, where);
}

/* The buffer whose guards argument i's writes reach: the argument's own,
 * or for a view its parent's (a view has none of its own); NULL when it
 * is not a live buffer of ctx. ctx->lock held. */
static kc_buffer *guarded_arg(const kc_context *ctx, const kc__ci *ci, const kc_arg *args, uint32_t i) {
  if (ci->sig[i] != KC__SIG(KC_ARG_BUFFER, 0) || args[i].kind != KC_ARG_BUFFER) return NULL;
  kc_buffer *b = (kc_buffer *)(uintptr_t)args[i].ptr;
  if (b->ctx != ctx) return NULL;
  if (b->origin == KC__BUF_VIEW) b = b->parent;
  return b && b->ctx == ctx ? b : NULL;
}

kc_status kc__checked_launch(kc__linked *l, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                             const kc_arg *args, uint32_t nargs, void **argv) {
  kc_status st =
      argv ? l->b.launch(&l->b, argv, grid, block) : l->b.entry(&l->b, ctx, grid, block, args, nargs);
  return kc__checked_after(l, ctx, args, nargs, st);
}

kc_status kc__checked_after(kc__linked *l, kc_context *ctx, const kc_arg *args, uint32_t nargs,
                            kc_status st) {
  const kc__ci *ci = l->ci;
  /* a launch that went ahead had arguments that fit (checked by the entry) */
  if (st || !args || nargs != ci->nparams) return st;
  kc__lock(&ctx->lock);
  const kc_buffer *seen[KC_MAX_ARGS];
  uint32_t nseen = 0;
  for (uint32_t i = 0; i < nargs; i++) {
    kc_buffer *b = guarded_arg(ctx, ci, args, i);
    if (!b) continue;
    const kc_buffer *view = (const kc_buffer *)(uintptr_t)args[i].ptr;
    char one[112];
    if (view == b) snprintf(one, sizeof one, "(%s %s)", ci->params[i].type, ci->params[i].name);
    else /* the parent's guards are the view's: the message says which view */
      snprintf(one, sizeof one, "(%s %s, a view of %zu bytes at offset %zu)", ci->params[i].type,
               ci->params[i].name, view->size, view->offset);
    bool again = false;
    for (uint32_t j = 0; j < nseen && !again; j++) again = seen[j] == b;
    if (!again) {
      seen[nseen++] = b;
      b->chk_spec = ci->spec;
      b->chk_arg = i;
      snprintf(b->chk_label, sizeof b->chk_label, " %s", one);
    } else { /* two views of one buffer: either may have written */
      size_t at = strlen(b->chk_label);
      snprintf(b->chk_label + at, sizeof b->chk_label - at, " or argument %u %s", i, one);
    }
  }
  for (uint32_t i = 0; i < nargs && !st && l->rt->check_each; i++) {
    kc_buffer *b = guarded_arg(ctx, ci, args, i);
    if (b) st = check_buffer(ctx, b);
  }
  kc__unlock(&ctx->lock);
  return st;
}

kc_status kc__checked_finish(kc_context *ctx) {
  kc_status first = KC_OK;
  char msg[1024] = "";
  kc__lock(&ctx->lock);
  for (kc_buffer *b = ctx->buffers; b; b = b->next) { /* every guard is checked and restored */
    kc_status st = check_buffer(ctx, b);
    if (st && !first) {
      first = st;
      snprintf(msg, sizeof msg, "%s", kc_errmsg(ctx->rt));
    }
  }
  kc__unlock(&ctx->lock);
  return first ? kc__err(ctx->rt, first, "%s", msg) : KC_OK;
}
