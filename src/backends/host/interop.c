/* SPDX-License-Identifier: MIT */
/*
 * interop.c -- the host backend's part of "Using kcache inside an existing
 * program" (kcache.h): launches with a configuration on the calling thread
 * (their checks, a per-group scratch area for shared_bytes; stream.c
 * queues those on a kc_stream), the adopted context, and memory
 * the caller owns (a plain pointer; a view is the pointer plus its
 * offset). It touches neither how objects are compiled nor how they are
 * loaded (host.c, loader.c): it calls the loaded object's kc__run, with
 * the thread's kc_scratch() set (host_set_scratch: it lives in the
 * thread's slot that every object reaches, exec.c; the pool's workers
 * and the streams' threads get areas of the same size).
 */
#include "backends/host/host.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The calling thread's scratch area, grown to the largest shared_bytes it
 * launched with, and freed when the thread exits (host_scratch_key's
 * destructor: a pool that recycles threads leaks nothing). */
static _Thread_local void *host_scratch;
static _Thread_local size_t host_scratch_size;
static pthread_key_t host_scratch_key;
static pthread_once_t host_scratch_once = PTHREAD_ONCE_INIT;
static bool host_scratch_keyed; /* the key exists (written once, under the once) */

static void host_scratch_make_key(void) {
  host_scratch_keyed = pthread_key_create(&host_scratch_key, free) == 0;
}

/* Grows the thread's area to n bytes (n > its size); the key owns it. */
static KC__COLD bool host_scratch_grow(size_t n) {
  pthread_once(&host_scratch_once, host_scratch_make_key);
  if (!host_scratch_keyed) return false; /* no way to free it at thread exit */
  /* libc, not the runtime's allocator: the area belongs to the thread */
  void *p = realloc(host_scratch, n);
  if (!p) return false;
  if (pthread_setspecific(host_scratch_key, p) != 0) {
    free(p);
    host_scratch = NULL;
    host_scratch_size = 0;
    return false;
  }
  host_scratch = p;
  host_scratch_size = n;
  return true;
}

#define HOST_SCRATCH_MAX (64u << 20)

kc_status host_launch_check(const kc__blinked *l, const kc__lcfg *cfg) {
  host_state *s = l->bctx;
  if (KC__UNLIKELY(cfg->flags || cfg->cluster.x || cfg->cluster.y || cfg->cluster.z))
    return kc__bs_err(
        s->sv, KC_EUNAVAILABLE,
        "kernel '%s': the host backend has no cooperative or cluster launches (they are CUDA's)",
        host_sv(l)->name_of(l));
  if (KC__UNLIKELY(cfg->shared_bytes > HOST_SCRATCH_MAX))
    return kc__bs_err(s->sv, KC_EINVAL, "kernel '%s': shared_bytes %u is above the host backend's %u",
                      host_sv(l)->name_of(l), cfg->shared_bytes, HOST_SCRATCH_MAX);
  return KC_OK;
}

/* On the calling thread, to completion (the context's own queue, a
 * stream's launch on its thread, or on the caller where it has none). */
kc_status host_launch_now(kc__blinked *l, void **argv, const kc__lcfg *cfg) {
  host_state *s = l->bctx;
  if (KC__LIKELY(!cfg->shared_bytes)) return l->launch(l, argv, cfg->grid, cfg->block);
  if (host_scratch_size < cfg->shared_bytes && !host_scratch_grow(cfg->shared_bytes))
    return kc__bs_err(s->sv, KC_ENOMEM, "out of memory for a %u-byte scratch area", cfg->shared_bytes);
  host_set_scratch(host_scratch, cfg->shared_bytes); /* the thread's own; workers get their own */
  kc_status st = ((host_run_fn)l->fn)(l, argv, cfg->grid, cfg->block);
  host_set_scratch(NULL, 0);
  return st;
}

/* The host has no native context: NULL adopts "the process". */
kc_status host_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx) {
  host_state *s = state;
  if (native_ctx || native_dev)
    return kc__bs_err(s->sv, KC_EINVAL,
                      "kc_context_wrap: the host backend has no native context (pass NULL, NULL)");
  *bctx = state;
  return KC_OK;
}

kc_status host_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h) {
  (void)bctx, (void)size;
  h->ptr = native;
  return KC_OK;
}
