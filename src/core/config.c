/* SPDX-License-Identifier: MIT */
/*
 * config.c -- the configuration resolved once (base/config.h): the one
 * function that builds it from kc_options, the environment (the settings
 * table) and the store's kcache.conf, with where each value came from. A
 * runtime resolves it when it is made and keeps it; the kcache command
 * calls the same function. Precedence, for each setting: an option that is
 * set (non-zero, non-NULL), else the KC_* variable, else the store's
 * kcache.conf (its max_size only), else the default. A flag option (an
 * int: cache_disable, cache_shared, checked, guard_launches) is set when
 * it is non-zero; off, it leaves the variable's word, so that
 * KC_CACHE_DISABLE=1 turns the store off whatever the options say.
 *
 * Also what the backends get of it: kc__bconfig (backend.h), plain values
 * and no environment, and the warnings about their settings' bad values,
 * given once here.
 */
#include "core/core.h"
#include "core/cache_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An option's number as its setting's text: the row then parses it the
 * one way (a bad value is said as the option's). */
static void set_u64(kc__config *c, kc__setting id, uint64_t v, const char *label) {
  char t[32];
  snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  kc__config_set(c, id, t, KC__FROM_OPTION, label);
}

/* Milliseconds as a SECONDS setting's text. */
static void set_ms(kc__config *c, kc__setting id, uint32_t ms, const char *label) {
  char t[32];
  snprintf(t, sizeof t, "%.3f", ms / 1000.0);
  kc__config_set(c, id, t, KC__FROM_OPTION, label);
}

static void set_str(kc__config *c, kc__setting id, const char *v, const char *label) {
  if (v) kc__config_set(c, id, v, KC__FROM_OPTION, label);
}

/* A flag option turns its setting on; off, it leaves the environment's. */
static void set_flag(kc__config *c, kc__setting id, int v, const char *label) {
  if (v) kc__config_set(c, id, "1", KC__FROM_OPTION, label);
}

static void apply_options(kc__config *c, const kc_options *o) {
  /* a kind as the registry names it (a build's stub of a backend it left
   * out has the name too); an unknown kind: none */
  const kc__backend *be = o->backend != KC_BACKEND_AUTO ? kc__backend_of(o->backend) : NULL;
  if (be) set_str(c, KC__SET_BACKEND, be->name, "kc_options.backend");
  set_str(c, KC__SET_HOST_CC, o->host_cc && *o->host_cc ? o->host_cc : NULL, "kc_options.host_cc");
  set_str(c, KC__SET_CACHE_DIR, o->cache_dir && *o->cache_dir ? o->cache_dir : NULL, "kc_options.cache_dir");
  set_flag(c, KC__SET_CACHE_DISABLE, o->cache_disable, "kc_options.cache_disable");
  if (o->cache_max_size) set_u64(c, KC__SET_CACHE_MAXSIZE, o->cache_max_size, "kc_options.cache_max_size");
  if (o->cache_lock_timeout_ms)
    set_ms(c, KC__SET_CACHE_LOCK_TIMEOUT, o->cache_lock_timeout_ms, "kc_options.cache_lock_timeout_ms");
  set_flag(c, KC__SET_CACHE_SHARED, o->cache_shared, "kc_options.cache_shared");
  set_str(c, KC__SET_REMOTE, o->remote_url, "kc_options.remote_url");
  set_str(c, KC__SET_REMOTE_PREFIX, o->remote_prefix, "kc_options.remote_prefix");
  set_str(c, KC__SET_REMOTE_KEY, o->remote_key, "kc_options.remote_key");
  if (o->remote_timeout_ms)
    set_u64(c, KC__SET_REMOTE_TIMEOUT_MS, o->remote_timeout_ms, "kc_options.remote_timeout_ms");
  if (o->remote_lock_timeout_ms)
    set_ms(c, KC__SET_REMOTE_LOCK_TIMEOUT, o->remote_lock_timeout_ms, "kc_options.remote_lock_timeout_ms");
  if (o->remote_retry_ms)
    set_u64(c, KC__SET_REMOTE_RETRY_MS, o->remote_retry_ms, "kc_options.remote_retry_ms");
  if (o->remote_max_entry)
    set_u64(c, KC__SET_REMOTE_MAX_ENTRY, o->remote_max_entry, "kc_options.remote_max_entry");
  if (o->compile_threads)
    set_u64(c, KC__SET_COMPILE_THREADS, o->compile_threads, "kc_options.compile_threads");
  if (o->host_threads) set_u64(c, KC__SET_HOST_THREADS, o->host_threads, "kc_options.host_threads");
  set_str(c, KC__SET_HOST_OPT, o->host_opt, "kc_options.host_opt");
  set_str(c, KC__SET_REMOTE_TLS_CA, o->remote_tls_ca, "kc_options.remote_tls_ca");
  set_str(c, KC__SET_REMOTE_TLS_CERT, o->remote_tls_cert, "kc_options.remote_tls_cert");
  set_str(c, KC__SET_REMOTE_TLS_KEY, o->remote_tls_key, "kc_options.remote_tls_key");
  set_str(c, KC__SET_REMOTE_TLS_SERVER_NAME, o->remote_tls_server_name, "kc_options.remote_tls_server_name");
  set_flag(c, KC__SET_CHECKED, o->checked, "kc_options.checked");
  set_flag(c, KC__SET_GUARD_LAUNCHES, o->guard_launches, "kc_options.guard_launches");
  static const char *const levels[] = {
      [KC_LOG_ERROR] = "error", [KC_LOG_WARN] = "warn", [KC_LOG_INFO] = "info", [KC_LOG_DEBUG] = "debug"};
  if (o->log_level >= KC_LOG_ERROR && o->log_level <= KC_LOG_DEBUG)
    set_str(c, KC__SET_LOG, levels[o->log_level], "kc_options.log_level");
}

/* The cache directory when no option or variable names one:
 * $XDG_CACHE_HOME/kcache (an absolute one), else $HOME/.cache/kcache; a
 * default, named by the variable it came from. */
static void default_cache_dir(kc__config *c) {
  if (kc__config_text(c, KC__SET_CACHE_DIR)) return;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char dir[4096];
  int n = -1;
  const char *from = NULL;
  if (xdg && *xdg == '/') /* relative: ignored (XDG) */
    n = snprintf(dir, sizeof dir, "%s/kcache", xdg), from = "default: XDG_CACHE_HOME";
  else if (home && *home) n = snprintf(dir, sizeof dir, "%s/.cache/kcache", home), from = "default: HOME";
  if (n > 0 && (size_t)n < sizeof dir) /* one longer than a path can be: none */
    kc__config_set(c, KC__SET_CACHE_DIR, dir, KC__FROM_DEFAULT, from);
}

kc_status kc__config_resolve(const kc_options *opt, const kc__heap *heap, kc__config *out) {
  kc__config_init(out, heap);
  kc__config env;
  kc__config_init(&env, heap);
  kc__config_read_env(&env);
  kc__config_copy(out, &env);
  if (opt) apply_options(out, opt); /* a flag option that is off leaves the variable's word */
  kc__config_free(&env);
  default_cache_dir(out);
  if (!out->failed) kc__store_config_file(out); /* the store's kcache.conf, where it is trusted */
  if (out->failed) {
    kc__config_free(out);
    return kc__err_owner(0, KC_ENOMEM, "out of memory resolving the configuration");
  }
  return KC_OK;
}

/* ---------------------------------------------------------- backends */

/* A setting of auto, 0 or 1 (anything else: auto, with a warning). */
static kc__auto_mode config_mode(const kc__config *c, kc__setting id, const kc__log_sink *log, bool warn) {
  const char *mode = kc__config_str(c, id);
  kc__auto_mode m = !strcmp(mode, "1")   ? KC__MODE_ALWAYS
                    : !strcmp(mode, "0") ? KC__MODE_NEVER
                                         : KC__MODE_AUTO;
  if (warn && m == KC__MODE_AUTO && strcmp(mode, "auto") != 0) kc__config_warn(log, c, id, "auto");
  return m;
}

void kc__bconfig_make(const kc__config *c, const kc_options *opt, kc__bconfig *b, const kc__log_sink *log,
                      bool warn) {
  memset(b, 0, sizeof *b);
  b->platform_index = opt ? opt->platform_index : -1;
  b->device_name = opt && opt->device_name && *opt->device_name ? opt->device_name : NULL;
  b->compile_options = opt ? opt->compile_options : NULL;
  b->compile_timeout_ms = opt && opt->compile_timeout_ms ? opt->compile_timeout_ms : 120000;
  const char *cc = kc__config_str(c, KC__SET_HOST_CC);
  b->host_cc = cc && *cc ? cc : "cc";
  b->compile_threads = kc__config_compile_threads(c, false, NULL);
  b->host_opt = kc__config_text(c, KC__SET_HOST_OPT);
  uint64_t ht = 0;
  if (kc__config_u64(c, KC__SET_HOST_THREADS, &ht, 0, 1024) == KC__SETTING_BAD && warn)
    kc__config_warn(log, c, KC__SET_HOST_THREADS, "one per core");
  if (!ht) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ht = cores > 0 ? (uint64_t)(cores > 1024 ? 1024 : cores) : 1;
  }
  b->host_threads = (uint32_t)ht;
  double idle = 5;
  kc__setting_state is = kc__config_seconds(c, KC__SET_HOST_STREAM_IDLE, &idle);
  if (is == KC__SETTING_BAD || idle > 86400) {
    if (warn) kc__config_warn(log, c, KC__SET_HOST_STREAM_IDLE, "5 s");
    idle = 5;
  }
  b->host_stream_idle_ns = (uint64_t)(idle * 1e9);
  if (idle > 0 && !b->host_stream_idle_ns) b->host_stream_idle_ns = 1; /* under 1 ns is not "never" */
  uint64_t spin_us = 20;
  if (kc__config_u64(c, KC__SET_HOST_STREAM_SPIN_US, &spin_us, 0, 10000) == KC__SETTING_BAD) {
    if (warn) kc__config_warn(log, c, KC__SET_HOST_STREAM_SPIN_US, "20 us");
    spin_us = 20;
  }
  b->host_stream_spin_ns = spin_us * 1000;
  bool ptx = false;
  kc__config_bool(c, KC__SET_CUDA_FORCE_PTX, &ptx);
  b->cuda_force_ptx = ptx;
  double t = 0;
  kc__setting_state s = kc__config_seconds(c, KC__SET_OPENCL_HELPER_TIMEOUT, &t);
  if (s == KC__SETTING_BAD || (s == KC__SETTING_SET && !(t > 0))) {
    if (warn) kc__config_warn(log, c, KC__SET_OPENCL_HELPER_TIMEOUT, "120 s");
    t = 120;
  }
  b->opencl_helper_timeout_s = t > 0 ? t : 120;
  b->opencl_helpers = config_mode(c, KC__SET_OPENCL_HELPERS, log, warn);
  b->opencl_helper = kc__config_text(c, KC__SET_OPENCL_HELPER);
  b->opencl_late_binaries = config_mode(c, KC__SET_OPENCL_LATE_BINARIES, log, warn);
}
