/* SPDX-License-Identifier: MIT */
/*
 * modes.h -- the launch's other modes, out of line from the fast path:
 * capture safety (capture.c) and checked mode (checked.c). Included by
 * core.h, after the data model.
 */
#ifndef KC_CORE_MODES_H
#define KC_CORE_MODES_H

/* Capture safety: whether the native stream of s (NULL: the context's
 * default stream) is capturing a graph;
 * then the code instance for world w without compiling, and the linked
 * object of ci in ctx without linking (KC_EBUSY saying to prepare the
 * kernel when there is none). Cold. */
bool kc__stream_capturing(kc_context *ctx, const kc_stream *s) KC__COLD;
kc_status kc__capture_ci(kc_context *ctx, kc__spec *spec, kc_world w, kc__ci **out) KC__COLD;
kc_status kc__capture_link(kc_context *ctx, kc__ci *ci, kc__linked **out) KC__COLD;

/* checked.c: checked mode (kcache.h, "Checked mode"). Setup resolves the
 * option at create. The buffer calls replace the backend's buf_create and
 * buf_destroy in checked mode (owner->lock held). kc__checked_launch is the
 * slow paths' launch in checked mode: it records the buffers' last kernel,
 * launches (argv: the backend's launch with packed arguments; NULL: the
 * entry with args) and, where check_each, checks the guards of the buffer
 * arguments; kc__checked_after is its part after the launch (st: the
 * launch's status), which kc_launch_ex's slow path calls too.
 * kc__checked_finish checks every buffer of ctx. */
void kc__checked_setup(kc_runtime *rt);
kc_status kc__checked_buf_create(kc_context *ctx, size_t size, kc_buffer *b);
void kc__checked_buf_destroy(kc_context *owner, kc_buffer *b);
kc_status kc__checked_launch(kc__linked *l, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                             const kc_arg *args, uint32_t nargs, void **argv) KC__COLD;
kc_status kc__checked_after(kc__linked *l, kc_context *ctx, const kc_arg *args, uint32_t nargs,
                            kc_status st) KC__COLD;
kc_status kc__checked_finish(kc_context *ctx) KC__COLD;

#endif /* KC_CORE_MODES_H */
