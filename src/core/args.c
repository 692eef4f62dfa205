/* SPDX-License-Identifier: MIT */
/*
 * args.c -- owns a launch's dimensions and arguments checked, and packed:
 * the engine's entry for backends without their own (kc__entry_packed:
 * each kc_arg against the parameter's signature, then the backend's launch
 * with argv), and the messages for a bad grid or block and bad arguments
 * that every path gives (kc__check_dims; kc__launch_bad_dims and
 * kc__launch_bad_args, which backends reach through kc__bsvc). Below both
 * launch files and the contexts. The entry is on the fast path of every
 * backend but the host's: it locks, allocates and formats nothing until an
 * argument does not fit.
 */
#include "core/core.h"

kc_status kc__launch_bad_args(const kc__blinked *b, const kc_context *ctx, const kc_arg *args,
                              uint32_t nargs) {
  const kc__linked *l = kc__linked_of(b);
  return kc__explain_args(l->rt, l->ci, ctx, args, nargs, KC__RULES_LAUNCH);
}

kc_status kc__check_dims(kc_runtime *rt, const char *fn, const char *name, const kc_dim3 *grid,
                         const kc_dim3 *block) {
  if (!grid || !block) return kc__err(rt, KC_EINVAL, "%s of '%s': grid or block is NULL", fn, name);
  if (!grid->x || !grid->y || !grid->z || !block->x || !block->y || !block->z)
    return kc__err(rt, KC_EINVAL, "%s of '%s': grid and block dimensions must be at least 1", fn, name);
  return KC_OK;
}

kc_status kc__launch_bad_dims(const kc__blinked *b, const kc_dim3 *grid, const kc_dim3 *block) {
  const kc__linked *l = kc__linked_of(b);
  return kc__check_dims(l->rt, "launch", l->ci->spec->name, grid, block);
}

/* Checks the arguments against the kernel's parameters while packing them
 * for the backend, then launches. Hot, but out of line so that launches
 * without arguments need no stack frame at all. */
static KC__NOINLINE kc_status pack_and_launch(kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                                              const kc_dim3 *block, const kc_arg *args, uint32_t nargs) {
  void *argv[KC_MAX_ARGS];
  if (KC__UNLIKELY(nargs != l->nargs || !args)) return kc__launch_bad_args(&l->b, ctx, args, nargs);
  for (uint32_t i = 0; i < nargs; i++) {
    const kc_arg *a = &args[i];
    if (KC__UNLIKELY(!kc__arg_fits(a, l->sig[i], ctx))) return kc__launch_bad_args(&l->b, ctx, args, nargs);
    argv[i] = (void *)a->ptr; /* a buffer's handle is its first member */
  }
  return l->b.launch(&l->b, argv, grid, block);
}

/* The entry of backends without their own (kc__linked.b.entry). */
kc_status kc__entry_packed(kc__blinked *b, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                           const kc_arg *args, uint32_t nargs) {
  kc__linked *l = kc__linked_of(b);
  if ((nargs | l->nargs) == 0) return b->launch(b, NULL, grid, block);
  return pack_and_launch(l, ctx, grid, block, args, nargs);
}
