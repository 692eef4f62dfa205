/* SPDX-License-Identifier: MIT */
/*
 * remote/remote.h -- the remote tier (src/remote/): a Redis server that many
 * machines share behind their local disk caches, so that a fleet compiles
 * each kernel once in total. It moves opaque values: the disk cache drives
 * it through its tier interface (cache/cache.h, wired in core/cache_glue.c)
 * after a local miss and hands it what was compiled; whether a value holds
 * a well-formed entry is the entry codec's question (cache/codec.h). The
 * `kcache remote` command and the tests use the client underneath
 * (configuration, one connection, one command).
 *
 * Files: config.c (URL and configuration, the one reader of the
 * environment), hiredis.c (hiredis through dlopen), conn.c (one connection
 * and one command), tls.c (libssl through dlopen, TLS sessions for conn.c), mac.c (the MAC trailer of a
 * value, through base/hmac.h), cluster.c (the nodes, their pools of idle connections and breakers, a Redis
 * Cluster's slot map, MOVED and ASK), tier.c (opening the tier, the get/put/lock protocol, the
 * uploads, counters, fork), estimate.c (how long compiles under a lock take here), queue.c (a job queue and
 * its thread, knowing nothing of the tier: the uploads run on it through a callback).
 *
 * In Redis (PREFIX is $KC_REMOTE_PREFIX, default "kcache:"; KEY is the
 * store's 32 hex digit key, the same as the local file's name):
 *
 *   PREFIX KEY                  an entry without a shared secret: exactly the
 *                               bytes of the local entry file (cache/format.h)
 *   PREFIX hmac-ID: KEY         an entry with a secret: the entry file, then
 *                               "KCMAC256" and HMAC-SHA256(mac key, entry).
 *                               ID (8 hex digits) names the secret, so that
 *                               clients with different secrets, or none, never
 *                               overwrite each other's entries
 *   <entry name>:lock           single flight across machines: SET NX PX while
 *                               one machine compiles; the value says who
 *                               ("host:pid:random"), for a compare-and-delete
 *
 * On a Redis Cluster (redis+cluster://) the KEY part is a hash tag, so that
 * an entry and its lock live in one slot: PREFIX{KEY}, PREFIX hmac-ID:{KEY}
 * and <entry name>:lock as above (cluster.c).
 *
 * From the secret S two keys are derived, so that S itself never enters a
 * MAC: mac key = HMAC-SHA256(S, "kcache remote entry mac v1") and ID = the
 * first 4 bytes of HMAC-SHA256(S, "kcache remote key id v1").
 *
 * Libraries that a machine may not have are opened with dlopen: hiredis
 * (0.14 as in Debian 12, or 1.x; the ABI is checked on a socket pair and a
 * parsed reply before it is used), only with a secret, libcrypto (for
 * HMAC-SHA256; checked against RFC 4231 before it is used), and only for
 * rediss://, libssl (tls.c: kcache's own TLS connection, whose bytes
 * hiredis' reply reader parses).
 *
 * Locks: kc__remote.pool_lock (the nodes: their idle connections and
 * breakers, and a cluster's slot map) and kc__jobq.queue_lock
 * (the upload queue, remote/queue.h) are leaves; they may be taken while holding a
 * kc__spec.lock and the store's per-key flock, and nothing is taken while
 * holding them. Neither is held while waiting for the network, but a
 * lookup (connect, GETRANGE, SET NX, polling for another machine's compile,
 * up to the lock timeout) runs under the caller's kc__spec.lock and per-key
 * flock (doc/locks.md).
 *
 * Memory: through a kc__heap (base/mem.h): the runtime's, or NULL for
 * libc, as the CLI passes. The tier reports nothing through a runtime's
 * error message: it warns on stderr or fills a caller's `why`, so it takes
 * no error owner.
 */
#ifndef KC_REMOTE_REMOTE_H
#define KC_REMOTE_REMOTE_H

#include "base/base.h"
#include "kcache.h"
#include "base/hmac.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tier's counters, in the order of the shared file vdir/remote-stats:
 * kc_stats.remote_NAME and kc__remote_counters.NAME. */
#define KC__REMOTE_COUNTERS(X) \
  X(LOOKUPS, lookups) \
  X(HITS, hits) \
  X(MISSES, misses) \
  X(REJECTS, rejects) \
  X(ERRORS, errors) \
  X(SKIPS, skips) \
  X(UPLOADS, uploads) \
  X(LOCK_WAITS, lock_waits) \
  X(LOOKUP_NS, lookup_ns) \
  X(LOOKUP_ERRORS, lookup_errors) \
  X(LOOKUP_SKIPS, lookup_skips)

#define KC__REMOTE_DEFAULT_PREFIX "kcache:"
#define KC__REMOTE_DEFAULT_TIMEOUT_MS 5u
#define KC__REMOTE_DEFAULT_LOCK_MS 30000u
#define KC__REMOTE_DEFAULT_RETRY_MS 10000u
#define KC__REMOTE_DEFAULT_MAX_ENTRY (64ull << 20)
#define KC__REMOTE_DEFAULT_LOCK_DEADLINE_MS 250u
/* Seed nodes a cluster URL may name. */
#define KC__REMOTE_MAX_SEEDS 8
/* Consecutive failures that open the circuit breaker. */
#define KC__REMOTE_BREAKER_FAILURES 3u
#define KC__REMOTE_MAC_MAGIC KC__MAC_MAGIC
#define KC__REMOTE_TRAILER KC__MAC_TRAILER /* magic + HMAC-SHA256 */

/* ------------------------------------------------------ optional libraries */

/* NULL when hiredis could be loaded and its ABI is one kcache knows, else
 * why not (static string). Thread-safe; loads once, for the life of the
 * process: lib is where the library is ($KC_HIREDIS_LIB of a resolved
 * configuration: kc__remote_config's hiredis_lib; NULL or "": the known
 * sonames, then a search of the system's library directories), and the
 * first call's lib is the one loaded, whatever later calls name. */
const char *kc__hiredis_unavailable(const char *lib);
/* The library loaded ("libhiredis.so.0.14") and its ABI ("0.14", "1.x");
 * NULL when none is (yet). */
const char *kc__hiredis_name(void);
/* HMAC-SHA256 (kc__hmac_unavailable, kc__hmac_sha256): base/hmac.h. */

/* ----------------------------------------------------------- configuration */

typedef struct kc__remote_config {
  char host[256];
  int port;
  int db;
  char user[128];
  char password[256];
  bool has_password;
  char url[640]; /* the URL with the password masked: for messages */
  char prefix[128];
  char ns[24]; /* "" or "hmac-ID:" */
  bool has_secret;
  uint8_t mac_key[32];
  uint32_t timeout_ms, lock_ms, retry_ms;
  uint64_t max_entry;
  char hiredis_lib[1024]; /* $KC_HIREDIS_LIB: "" for the system's (kc__hiredis_unavailable) */
  /* rediss://: TLS (tls.c), with these settings ("": none) */
  bool tls;
  char tls_ca[1024]; /* a CA file or directory; "": the system's */
  char tls_cert[1024], tls_key[1024]; /* a client certificate and its key */
  char tls_name[256]; /* the name to verify; "": host */
  /* redis+cluster:// (rediss+cluster://): a Redis Cluster, reached first
   * through these seed nodes (host and port are the first's); entries are
   * named with their key in braces, a hash tag (kc__remote_name) */
  bool cluster;
  int nseeds;
  char seed_host[KC__REMOTE_MAX_SEEDS][256];
  int seed_port[KC__REMOTE_MAX_SEEDS];
  /* the deadline of the single-flight commands (SET NX, the polls for
   * another machine's upload): KC_REMOTE_LOCK_DEADLINE_MS */
  uint32_t lock_deadline_ms;
  /* The TLS client context that connections share (an SSL_CTX, made by
   * kc__remote_tls_setup); NULL: each connection makes its own. */
  void *tls_ctx;
} kc__remote_config;

/* Parses redis[s]://[[user]:password@]host[:port][/db] into cfg's host,
 * port, db, user, password, tls and url, and
 * redis[s]+cluster://[[user]:password@]host[:port][,host[:port]...] (a
 * cluster: cfg's cluster and seeds; database 0 only). KC_EINVAL with why
 * for anything else. */
kc_status kc__remote_parse_url(const char *url, kc__remote_config *cfg, char *why, size_t wl);
/* The whole configuration from a resolved one (base/config.h: options and
 * variables; NULL: the defaults, no tier). KC_ENOTFOUND: no remote tier is
 * configured. KC_EINVAL or KC_EUNAVAILABLE (a secret without libcrypto)
 * with why: one is, but it cannot be used. Whether hiredis is there is
 * kc__hiredis_unavailable's (given cfg->hiredis_lib). */
kc_status kc__remote_config_load(const kc__config *conf, kc__remote_config *cfg, char *why, size_t wl);
/* Makes cfg->tls_ctx, the TLS client context its connections share, when
 * cfg->tls: KC_EUNAVAILABLE (no libssl) or KC_EINVAL (a CA, certificate or
 * key that cannot be used) with why. kc__remote_tls_release frees it. */
kc_status kc__remote_tls_setup(kc__remote_config *cfg, char *why, size_t wl);
void kc__remote_tls_release(kc__remote_config *cfg);
/* The Redis name of an entry (lock: with ":lock"): PREFIX NS KEY, and for
 * a cluster PREFIX NS {KEY}, so that an entry and its lock share a slot. */
void kc__remote_name(const kc__remote_config *cfg, const uint8_t key[16], bool lock, char *out, size_t len);

/* ------------------------------------------------------------ one connection */

typedef struct kc__rconn kc__rconn;

enum {
  KC__R_STRING = 1,
  KC__R_ARRAY = 2,
  KC__R_INTEGER = 3,
  KC__R_NIL = 4,
  KC__R_STATUS = 5,
  KC__R_ERROR = 6
};

/* A reply, copied out of hiredis (the heap's, or malloc's for a NULL heap). */
typedef struct kc__rreply {
  int type;
  long long integer;
  char *str; /* NUL-terminated; STRING, STATUS, ERROR */
  size_t len;
  struct kc__rreply *elem; /* ARRAY */
  size_t n;
} kc__rreply;

/* Redis Cluster's slot of a key (CRC16 of the key, or of its hash tag: the
 * text between the first '{' and the next '}', when not empty), 0..16383. */
#define KC__SLOTS 16384
unsigned kc__keyslot(const char *key, size_t n);
/* For each slot range of a CLUSTER SLOTS reply, fn(ud, first, last, host,
 * port) with its primary (an empty host, as a node that does not know its
 * own address reports it, is asked_host: the node that answered). False
 * when the reply is not one or fn returns false. */
typedef bool (*kc__slots_fn)(void *ud, int first, int last, const char *host, int port);
bool kc__cluster_slots_each(const kc__rreply *rep, const char *asked_host, kc__slots_fn fn, void *ud);
/* A MOVED or ASK error reply ("MOVED 3999 127.0.0.1:6381"): its slot and
 * where to go. False for any other text. */
bool kc__redirect_parse(const char *err, bool *ask, int *slot, char *host, size_t hl, int *port);

/* Connects (over TLS for rediss://, the handshake verifying the server's
 * certificate and name; and authenticates, and selects the database)
 * within cfg->timeout_ms. KC_EIO / KC_EUNAVAILABLE / KC_ENOMEM with why. */
kc_status kc__rconn_open(const kc__heap *heap, const kc__remote_config *cfg, kc__rconn **out, char *why,
                         size_t wl);
/* The same to host:port (a cluster's node) with cfg's other settings. */
kc_status kc__rconn_open_at(const kc__heap *heap, const kc__remote_config *cfg, const char *host, int port,
                            kc__rconn **out, char *why, size_t wl);
void kc__rconn_close(kc__rconn *c);
/* One command, binary safe. KC_OK with *out filled (a server's error reply
 * is KC_OK with type KC__R_ERROR); KC_EIO with why when the connection failed
 * or the server did not answer in time: the connection is then unusable.
 * The time bound is cfg->timeout_ms without progress, and timeout_ms plus
 * 20 ns per byte moved in all (a slow trickle cannot hold a launch). */
kc_status kc__rconn_cmd(kc__rconn *c, int argc, const char *const *argv, const size_t *lens, kc__rreply *out,
                        char *why, size_t wl);
/* kc__rconn_cmd for text arguments (NULL-terminated list). */
kc_status kc__rconn_cmdv(kc__rconn *c, kc__rreply *out, char *why, size_t wl, ...);
void kc__rreply_free(const kc__heap *heap, kc__rreply *r);

/* ----------------------------------------------------------------- values */

/* Where the entry image lies in a value (its framing is the codec's,
 * kc__entry_frame): KC_OK with *image_len set, or KC_EIO with why:
 * truncated, foreign, or (with a secret) unsigned or with a MAC that does
 * not verify. Without a secret a trailer is ignored. */
kc_status kc__remote_unwrap(const kc__remote_config *cfg, const void *value, size_t n, size_t *image_len,
                            char *why, size_t wl);
/* The trailer for an entry file (cfg must have a secret). */
bool kc__remote_trailer(const kc__remote_config *cfg, const void *image, size_t n,
                        uint8_t out[KC__REMOTE_TRAILER]);

/* --------------------------------------------------------------- the tier */

typedef struct kc__remote kc__remote;

/* Opens a remote tier from a resolved configuration (vdir: the local
 * store's, for the shared counters). NULL when none is
 * configured, or when it cannot be used: then one warning in log (NULL:
 * stderr) says why; later warnings of the tier go there too. The caller's
 * strings in conf are not kept. */
kc__remote *kc__remote_open(const kc__heap *heap, const kc__log_sink *log, const kc__config *conf,
                            const char *vdir);
/* Finishes queued uploads (each bounded by the timeout; none while the
 * breaker is open), stops the uploader thread, frees everything. NULL: no-op. */
void kc__remote_close(kc__remote *r);

/* Verifies a value's entry image (taken over: free it with the tier's heap). why gets the reason of a
 * refusal. */
typedef bool (*kc__remote_accept_fn)(void *ud, void *image, size_t size, char *why, size_t wl);

/* The lookup after a local miss. True when an entry came and `accept` took
 * it. False otherwise; then *lock is nonzero if this caller now holds the
 * entry's lock in Redis and must pass it to kc__remote_upload after its
 * compile (others wait for that upload). Waits for another machine's
 * compile at most cfg.lock_ms, and never longer once the server fails. */
bool kc__remote_fetch(kc__remote *r, const uint8_t key[16], kc__remote_accept_fn accept, void *ud,
                      uint64_t *lock);
/* After a compile: queues the upload of image (taken over, the tier's heap;
 * NULL for none) and the release of lock (0: none) for the uploader thread.
 * Never blocks on the network. */
void kc__remote_upload(kc__remote *r, const uint8_t key[16], void *image, size_t size, uint64_t lock);
/* Runs fn(ud, key, image, size) on the uploader thread after the jobs
 * queued before it (kc__remote_close waits for it), then frees image (the tier's
 * heap): work that a launch served by the tier need not wait for.
 * False if it was not queued (out of memory, a full queue, no thread):
 * then image is still the caller's. */
typedef void (*kc__remote_defer_fn)(void *ud, const uint8_t key[16], const void *image, size_t size);
bool kc__remote_defer(kc__remote *r, kc__remote_defer_fn fn, void *ud, const uint8_t key[16], void *image,
                      size_t size);
/* The most jobs with an image or deferred work, and bytes, the upload queue
 * ever held (tests: at most KC__QUEUE_JOBS and KC__QUEUE_BYTES). */
void kc__remote_queue_peak(kc__remote *r, size_t *jobs, uint64_t *bytes);
/* Adds the tier's counters to *out. */
void kc__remote_stats(const kc__remote *r, kc_stats *out);
/* The URL in use (password masked). */
const char *kc__remote_url_of(const kc__remote *r);

/* Counters shared by every process using one local store (vdir/remote-stats),
 * for `kcache stats`. */
typedef struct kc__remote_counters {
#define KC__X(ID, name) uint64_t name;
  KC__REMOTE_COUNTERS(KC__X)
#undef KC__X
  bool valid;
} kc__remote_counters;
void kc__remote_counters_read(const char *vdir, kc__remote_counters *out);

#endif /* KC_REMOTE_REMOTE_H */
