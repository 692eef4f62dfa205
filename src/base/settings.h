/* SPDX-License-Identifier: MIT */
/* settings.h -- the one table of the KC_* environment variables (the model
 * is mimalloc's options.c). Every KC_* variable kcache reads is a row of
 * KC__SETTINGS: (id, name, kind, default, doc); each kind has one parser.
 * A malformed value is reported by the getter (KC__SETTING_BAD, *out = the
 * default); the caller either fails with its own message or warns with
 * kc__config_warn and goes on with the default.
 *
 * Kinds:  STR      any text; empty counts as unset
 *         TEXT     any text; empty is a value (a key prefix may be empty)
 *         BOOL     unset or empty: the default; "0": false; anything else: true
 *         U64      a decimal integer in the caller's range
 *         SIZE     bytes with an optional K/M/G/T suffix (binary: 1K = 1024),
 *                  "KiB"/"KB"/"B" accepted ("512M", "1G", "100k", "1.5G")
 *         SECONDS  a non-negative decimal number of seconds ("30", "0.5")
 *
 * The values themselves are read once, into a resolved configuration
 * (config.h), with the options and the store's kcache.conf; this file
 * only knows the rows and how each kind is parsed.
 */
#ifndef KC_BASE_SETTINGS_H
#define KC_BASE_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

/* clang-format off */
#define KC__SETTINGS(X)                                                                           \
  X(BACKEND,            "KC_BACKEND",             STR,     "auto", "backend: a backend's name (host, opencl, cuda) or auto (the first of the registry's order that runs here)") \
  X(HOST_CC,            "KC_HOST_CC",             STR,     "cc",   "the host backend's C compiler command (kc_options.host_cc wins)") \
  X(HOST_OPT,           "KC_HOST_OPT",            STR,     NULL,   "the host backend's optimisation flags (default: -O3 -march=native with gcc and clang, -O2 with tcc; part of the disk key)") \
  X(HOST_THREADS,       "KC_HOST_THREADS",        U64,     "0",    "host backend: threads that run a launch's groups, the caller included (0: one per core; 1: the caller alone)") \
  X(HOST_STREAM_IDLE,   "KC_HOST_STREAM_IDLE",    SECONDS, "5",    "host backend: seconds a stream's thread waits for a launch before it ends, to start again at the stream's next launch (0: it waits for as long as the stream lives; a value over 86400 is warned about and 5 used)") \
  X(HOST_STREAM_SPIN_US, "KC_HOST_STREAM_SPIN_US", U64,   "20",   "host backend: microseconds a stream's thread watches for a launch, and kc_stream_sync for the stream's last launch to end, before it sleeps (0: it sleeps at once; 0..10000)") \
  X(CUDA_FORCE_PTX,     "KC_CUDA_FORCE_PTX",      BOOL,    "0",    "CUDA: compile to PTX even where a cubin could be made") \
  X(FAULT_BACKTRACE,    "KC_FAULT_BACKTRACE",     BOOL,    "0",    "fault-injection builds: print a backtrace where each fault hits") \
  X(CACHE_DIR,          "KC_CACHE_DIR",           STR,     NULL,   "disk cache directory (default $XDG_CACHE_HOME/kcache or ~/.cache/kcache)") \
  X(CACHE_DISABLE,      "KC_CACHE_DISABLE",       BOOL,    "0",    "turn the disk cache off") \
  X(CACHE_MAXSIZE,      "KC_CACHE_MAXSIZE",       SIZE,    "1G",   "disk cache size limit (e.g. 500M, 2G)") \
  X(CACHE_SHARED,       "KC_CACHE_SHARED",        BOOL,    "0",    "a disk cache shared by a group: directories 2770, files 0660 (see doc/security.md)") \
  X(CACHE_KEY,          "KC_CACHE_KEY",           STR,     NULL,   "secret that authenticates disk cache entries (HMAC-SHA256)") \
  X(CACHE_LOCK_TIMEOUT, "KC_CACHE_LOCK_TIMEOUT",  SECONDS, "60",   "seconds to wait for another process compiling the same entry") \
  X(REMOTE,             "KC_REMOTE",              STR,     NULL,   "remote cache URL (redis://[user:password@]host[:port][/db], rediss:// for TLS; redis+cluster://[user:password@]host:port[,host:port...] for a Redis Cluster, rediss+cluster:// over TLS; off, none: no remote)") \
  X(REMOTE_PREFIX,      "KC_REMOTE_PREFIX",       TEXT,    "kcache:", "key prefix of remote entries") \
  X(REMOTE_TIMEOUT_MS,  "KC_REMOTE_TIMEOUT_MS",   U64,     "5",    "remote connect/command timeout in milliseconds (1..600000)") \
  X(REMOTE_LOCK_DEADLINE_MS, "KC_REMOTE_LOCK_DEADLINE_MS", U64, "250", "deadline in milliseconds of the remote single-flight commands (taking the lock, polling for another machine's upload); never below KC_REMOTE_TIMEOUT_MS (1..600000)") \
  X(REMOTE_RETRY_MS,    "KC_REMOTE_RETRY_MS",     U64,     "10000", "milliseconds before retrying a remote that failed (1..86400000)") \
  X(REMOTE_LOCK_TIMEOUT, "KC_REMOTE_LOCK_TIMEOUT", SECONDS, "30",  "seconds to wait for another machine compiling the same entry (0 < s <= 86400)") \
  X(REMOTE_MAX_ENTRY,   "KC_REMOTE_MAX_ENTRY",    SIZE,    "64M",  "largest entry sent to the remote (at least 1K)") \
  X(REMOTE_KEY,         "KC_REMOTE_KEY",          STR,     NULL,   "secret that authenticates remote entries (HMAC)") \
  X(REMOTE_TLS_CA,      "KC_REMOTE_TLS_CA",       STR,     NULL,   "rediss://: the CA certificates (a PEM file, or a directory hashed by openssl rehash) that the server's certificate must chain to (default: the system's; kc_options.remote_tls_ca wins)") \
  X(REMOTE_TLS_CERT,    "KC_REMOTE_TLS_CERT",     STR,     NULL,   "rediss://: the client certificate (PEM, with its chain) for servers that require one (tls-auth-clients; kc_options.remote_tls_cert wins)") \
  X(REMOTE_TLS_KEY,     "KC_REMOTE_TLS_KEY",      STR,     NULL,   "rediss://: the client certificate's private key (PEM; default: the certificate's file; kc_options.remote_tls_key wins)") \
  X(REMOTE_TLS_SERVER_NAME, "KC_REMOTE_TLS_SERVER_NAME", STR, NULL, "rediss://: the name the server's certificate must carry, also sent as SNI (default: the URL's host; kc_options.remote_tls_server_name wins)") \
  X(HIREDIS_LIB,        "KC_HIREDIS_LIB",         STR,     NULL,   "path of the libhiredis to load instead of the system's") \
  X(COMPILE_THREADS,    "KC_COMPILE_THREADS",     U64,     "0",    "threads that compile a kc_prepare batch, the caller included (0: one per core; kc_options.compile_threads wins)") \
  X(OPENCL_HELPERS,     "KC_OPENCL_HELPERS",      STR,     "auto", "OpenCL: compile in helper processes: auto (with more than one compile thread, where the platform builds one program at a time per process: PoCL), 1 (on any platform), 0 (never)") \
  X(OPENCL_HELPER,      "KC_OPENCL_HELPER",       STR,     NULL,   "OpenCL: the compile helper to run (default: kcache-clc in the installed libexec/kcache, else beside the library)") \
  X(OPENCL_HELPER_TIMEOUT, "KC_OPENCL_HELPER_TIMEOUT", SECONDS, "120", "OpenCL: seconds a compile helper has to answer before it is killed and the compile fails (KC_EBACKEND)") \
  X(OPENCL_LATE_BINARIES, "KC_OPENCL_LATE_BINARIES", STR, "auto", "OpenCL on PoCL: after a kernel's first launch, write its disk entry again with the machine code that launch made, so that a later process with a cold PoCL cache starts it without code generation: auto (only with PoCL's own kernel cache off, $POCL_KERNEL_CACHE set to a value not starting with 1; with it on, PoCL keeps that code on this machine), 1 (with it on too: for a store shared with other machines; a runtime's first kernel then takes about 600 ms more where PoCL's cache holds its source, and builds in compile helpers keep their first binary: KC_OPENCL_HELPERS=0 keeps every build in the process), 0 (never); with compile options, only where they are -D, -I, -w and -Werror with no -cl-, quote or backslash in them (anything else turns them off, said in the log at the first build: a warning with 1, at info level with auto)") \
  X(CHECKED,            "KC_CHECKED",             BOOL,    "0",    "checked mode: guard zones around buffers, checked after launches and at finish (kc_options.checked)") \
  X(GUARD_LAUNCHES,     "KC_GUARD_LAUNCHES",      BOOL,    "0",    "cached launches run inside a grace section, so kc_collect may run while other threads launch (kc_options.guard_launches)") \
  X(LOG,                "KC_LOG",                 STR,     NULL,   "log level: error, warn (the default), info (compiles, cache hits) or debug (why each miss missed); kc_options.log_level wins")
/* clang-format on */

typedef enum kc__setting {
#define KC__SETTING_ENUM(id, name, kind, def, doc) KC__SET_##id,
  KC__SETTINGS(KC__SETTING_ENUM)
#undef KC__SETTING_ENUM
      KC__SETTING_COUNT
} kc__setting;

typedef enum kc__setting_state {
  KC__SETTING_UNSET, /* not in the environment (or empty): *out is the default */
  KC__SETTING_SET, /* well-formed: *out is its value */
  KC__SETTING_BAD /* malformed or out of range: *out is the default */
} kc__setting_state;

typedef enum kc__setting_kind {
  KC__KIND_STR,
  KC__KIND_TEXT,
  KC__KIND_BOOL,
  KC__KIND_U64,
  KC__KIND_SIZE,
  KC__KIND_SECONDS
} kc__setting_kind;

const char *kc__setting_name(kc__setting id); /* "KC_..." */
const char *kc__setting_doc(kc__setting id);
const char *kc__setting_default(kc__setting id); /* as text; NULL: none */
kc__setting_kind kc__setting_kind_of(kc__setting id);
/* The environment's text, NULL when unset (empty text is returned as is).
 * Read by config.c, and by the log of no runtime (log.c, $KC_LOG). */
const char *kc__setting_raw(kc__setting id);

/* text (NULL: unset) as id's kind into out (a bool, uint64_t or double;
 * nothing for STR and TEXT): the default first, then the text: UNSET (no
 * text), SET or BAD (out left at the default). lo and hi bound a U64. */
kc__setting_state kc__setting_parse(kc__setting id, const char *text, void *out, uint64_t lo, uint64_t hi);

/* What a variable of id's kind takes ("0 or 1", "a size (e.g. 500M, 2G)"). */
const char *kc__setting_takes(kc__setting id);

/* The parsers, for values that come from elsewhere (options, the CLI). */
bool kc__parse_size(const char *s, uint64_t *out);
bool kc__parse_seconds(const char *s, double *out);
bool kc__parse_u64(const char *s, uint64_t *out, uint64_t lo, uint64_t hi);

#endif /* KC_BASE_SETTINGS_H */
