/* SPDX-License-Identifier: MIT */
/*
 * capture.c -- owns capture safety (modes.h): a stream that is capturing a
 * graph (CUDA) gets no compile and no module load, only code that is
 * compiled and linked already, or KC_EBUSY saying to prepare the kernel
 * first. Below both launch files (launch.c, launch_ex.c), which ask it on
 * their slow paths.
 */
#include "core/core.h"

/* -------------------------------------------------------- capture safety */

bool kc__stream_capturing(kc_context *ctx, const kc_stream *s) {
  const kc__backend *be = ctx->rt->be;
  return be->stream_capturing && be->stream_capturing(ctx->bctx, s ? s->native : NULL);
}

static KC__COLD kc_status capture_busy(kc_context *ctx, const char *name, const char *what) {
  return kc__err(ctx->rt, KC_EBUSY,
                 "launch of '%s': the stream is capturing a graph and the kernel is %s (compiling or loading "
                 "a module would break the capture): prepare the kernel first, kc_kernel_prepare(k, ctx), "
                 "before the capture begins",
                 name, what);
}

kc_status kc__capture_ci(kc_context *ctx, kc__spec *spec, kc_world w, kc__ci **out) {
  kc__ci *ci = kc__ci_find(spec, w);
  if (ci && ci->status) return kc__ci_get(ctx->rt, spec, w, out); /* a remembered failure: no compile */
  if (!ci || !ci->artifact) return capture_busy(ctx, spec->name, "not compiled for the current world");
  *out = ci;
  return KC_OK;
}

kc_status kc__capture_link(kc_context *ctx, kc__ci *ci, kc__linked **out) {
  kc__linked *l = kc__ctx_find_linked(ctx, ci);
  if (!l) return capture_busy(ctx, ci->spec->name, "not linked in this context for the current world");
  *out = l;
  return KC_OK;
}
