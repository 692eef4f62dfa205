/* SPDX-License-Identifier: MIT */
/*
 * explain.c -- the one table of argument messages: why the arguments of a
 * launch (kc_launch's, bound ones, kc_launch_ex's) do not fit the
 * parameters of the code, a case per argument kind. Everything here is
 * cold: it runs only after a check on the launch path failed.
 */
#include "core/core.h"

#include <stdio.h>

#define KC__ARG_ERR(...) kc__err(rt, KC_EARGS, "kernel '%s' argument %u%s " __VA_ARGS__)

/* Why a buffer or scalar argument i (a), or one of no known kind, does not
 * fit a parameter whose KC__SIG (want) is a buffer's or a scalar's, in ctx;
 * KC_OK if it fits. */
static KC__COLD kc_status explain_value(kc_runtime *rt, const char *name, uint32_t i, const char *label,
                                        uint64_t want, const kc_arg *a, const kc_context *ctx) {
  bool want_buf = want == KC__SIG(KC_ARG_BUFFER, 0);
  uint32_t size = (uint32_t)want;
  if (a->kind != KC_ARG_BUFFER && a->kind != KC_ARG_SCALAR)
    return KC__ARG_ERR("has an unknown kind %u", name, i, label, a->kind);
  if (want_buf && a->kind != KC_ARG_BUFFER)
    return KC__ARG_ERR("is a buffer; a scalar was given", name, i, label);
  if (!want_buf && a->kind == KC_ARG_BUFFER)
    return KC__ARG_ERR("is a scalar; a buffer was given", name, i, label);
  if (want_buf) {
    if (a->size)
      return KC__ARG_ERR("is a buffer, whose size is 0 (KC_ARG_BUF); %u was given", name, i, label, a->size);
    if (!a->ptr) return KC__ARG_ERR("is a buffer; NULL was given", name, i, label);
    const kc_buffer *b = a->ptr;
    if (!b->ctx) return KC__ARG_ERR("is a buffer that has been destroyed", name, i, label);
    if (b->ctx != ctx) return KC__ARG_ERR("is a buffer of another context", name, i, label);
    return KC_OK;
  }
  if (!a->ptr) return KC__ARG_ERR("has a NULL value pointer", name, i, label);
  if (size == UINT32_MAX)
    return KC__ARG_ERR("has a type whose size the compiler did not tell kcache", name, i, label);
  /* the compiler's size and alignment (the parameter probe), so the same
   * words on every backend */
  uint32_t align = kc__sig_align(want);
  if (a->size != size && align)
    return KC__ARG_ERR("is a %u-byte value (alignment %u); %u bytes were given", name, i, label, size, align,
                       a->size);
  if (a->size != size) return KC__ARG_ERR("has %u bytes; %u were given", name, i, label, size, a->size);
  return KC_OK;
}

/* A raw pointer or a local memory size where the call takes neither. */
static KC__COLD kc_status explain_only_ex(kc_runtime *rt, const char *name, uint32_t i, const char *label,
                                          const kc_arg *a) {
  return KC__ARG_ERR(
      "is a %s, which only kc_launch_ex takes (kc_launch takes buffers and scalars; bound arguments "
      "also take KC_ARG_LOCAL_BYTES for a KC_LOCAL parameter, launched with kc_launch_args_ex)",
      name, i, label,
      a->kind == KC_ARG_PTR ? "raw pointer (KC_ARG_PTR)" : "local memory size (KC_ARG_LOCAL)");
}

/* Anything but a local memory size for a KC_LOCAL parameter. */
static KC__COLD kc_status explain_local_param(kc_runtime *rt, const char *name, uint32_t i,
                                              const char *label) {
  return KC__ARG_ERR("is a KC_LOCAL pointer: pass its size, KC_ARG_LOCAL_BYTES(n), through "
                     "kc_launch_ex (or bind it with kc_args_create and launch with kc_launch_args_ex)",
                     name, i, label);
}

/* Why argument i (a) does not fit a parameter whose KC__SIG is want in ctx
 * under the rules of its call, or KC_OK if it fits: one case per argument
 * kind. label names the parameter (" (float a)") or is "". Cold: only
 * after a check failed. */
KC__COLD kc_status kc__explain_arg(kc_runtime *rt, const char *name, uint32_t i, const char *label,
                                   uint64_t want, const kc_arg *a, const kc_context *ctx,
                                   kc__arg_rules rules) {
  bool want_local = want == KC__SIG(KC_ARG_LOCAL, 0);
  switch (a->kind) {
  case KC_ARG_PTR:
    if (rules == KC__RULES_LAUNCH || (rules == KC__RULES_BOUND && !want_local))
      return explain_only_ex(rt, name, i, label, a);
    if (want_local) return explain_local_param(rt, name, i, label);
    if (want != KC__SIG(KC_ARG_BUFFER, 0))
      return KC__ARG_ERR("is a scalar; a raw pointer (KC_ARG_PTR) was given", name, i, label);
    if (a->size)
      return KC__ARG_ERR("is a raw pointer, whose size is 0 (KC_ARG_DEVPTR); %u was given", name, i, label,
                         a->size);
    return KC_OK;
  case KC_ARG_LOCAL:
    if (rules == KC__RULES_LAUNCH) return explain_only_ex(rt, name, i, label, a);
    if (!want_local)
      return KC__ARG_ERR("is not a KC_LOCAL pointer parameter to kcache; local memory (KC_ARG_LOCAL) was "
                         "given (on OpenCL kcache knows KC_LOCAL parameters only from clGetKernelArgInfo: a "
                         "platform that keeps no argument info shows every pointer parameter as a buffer)",
                         name, i, label);
    if (a->size == 0)
      return KC__ARG_ERR("is local memory of 0 bytes (KC_ARG_LOCAL_BYTES needs at least 1)", name, i, label);
    return KC_OK;
  default: /* buffers, scalars, and kinds kcache does not know */
    if (want_local) return explain_local_param(rt, name, i, label);
    return explain_value(rt, name, i, label, want, a, ctx);
  }
}

#undef KC__ARG_ERR

/* Says why args do not fit the parameters of ci under the rules of their
 * call (KC_EARGS, or KC_EINVAL for a NULL array). Cold: only after a check
 * failed. */
KC__COLD kc_status kc__explain_args(kc_runtime *rt, const kc__ci *ci, const kc_context *ctx,
                                    const kc_arg *args, uint32_t nargs, kc__arg_rules rules) {
  const char *name = ci->spec->name;
  if (nargs != ci->nparams)
    return kc__err(rt, KC_EARGS, "kernel '%s' takes %u argument%s, %u given", name, ci->nparams,
                   ci->nparams == 1 ? "" : "s", nargs);
  if (!args) return kc__err(rt, KC_EINVAL, "kernel '%s': args is NULL", name);
  for (uint32_t i = 0; i < nargs; i++) {
    char label[160];
    snprintf(label, sizeof label, " (%s %s)", ci->params[i].type, ci->params[i].name);
    kc_status st = kc__explain_arg(rt, name, i, label, ci->sig[i], &args[i], ctx, rules);
    if (st) return st;
  }
  return kc__err(rt, KC_EARGS, "kernel '%s': invalid arguments", name);
}
