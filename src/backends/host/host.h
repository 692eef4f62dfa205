/* SPDX-License-Identifier: MIT */
/*
 * host.h -- what the files of the host backend share (src/backends/host/):
 * its state, and the helpers of tools.c (finding, running and reading back
 * what the system C compiler makes) that host.c calls.
 */
#ifndef KC_BACKENDS_HOST_H
#define KC_BACKENDS_HOST_H

#include "backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The generated trampoline has the signature of a kc__launch_fn, so the
 * fast path calls straight into the compiled object. */
typedef kc_status (*host_run_fn)(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block);

typedef struct host_state {
  const kc__bsvc *sv; /* &svc: allocation, errors (backend.h) */
  kc__bsvc svc; /* the copy kept from open */
  const char *compile_options; /* kc_options.compile_options (the runtime's copy) */
  char dir[256];
#define KC__HOST_MAX_WORDS 56 /* in the compiler command, and in the compile options */
  char *cc_argv[KC__HOST_MAX_WORDS]; /* the compiler command, split on spaces (owned) */
  int cc_argc;
  uint32_t timeout_ms;
  _Atomic uint64_t seq; /* unique file names */
  kc__mutex ident_lock;
  char *identity;
  char device[256];
} host_state;

/* tools.c */
const char *host_unavailable(void);
/* prog itself if it has a '/', else its first executable match in $PATH. */
bool host_find_in_path(const char *prog, char *out, size_t outlen);
kc_status host_run_tool(host_state *s, char *const argv[], const char *log_path, int *exit_code,
                        int *signal_no);
kc_status host_read_file(const kc__bsvc *sv, const char *path, void **out, size_t *size);
kc_status host_write_file(const kc__bsvc *sv, const char *path, const void *data, size_t n);
bool host_elf_complete(const void *data, size_t n, const char **why);

/* interop.c: launches with a configuration, streams, foreign memory. */
kc_status host_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg);
kc_status host_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx);
kc_status host_stream_create(void *bctx, void **native);
kc_status host_stream_wrap(void *bctx, void *native);
void host_stream_release(void *bctx, void *native, bool owned);
kc_status host_stream_sync(void *bctx, void *native);
kc_status host_stream_wait(void *bctx, void *native, void *other);
kc_status host_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h);

#endif /* KC_BACKENDS_HOST_H */
