/* SPDX-License-Identifier: MIT */
/*
 * core/cache_glue.c -- the one place that sees both a code instance and the
 * cache: the engine's hooks (core/cache_glue.h) on top of the disk cache
 * (cache/cache.h) and the remote tier (remote/remote.h). It makes a
 * lookup's key parts from the runtime, the specialization and the closure,
 * decides whether an entry's bytes are usable by a trial load in a scratch
 * context of the backend (the cache's verify callback), fills the code
 * instance from a good entry, hands a compile's result back, and wires the
 * remote tier behind the disk cache.
 *
 * The engine calls it only on a miss of the world-age cache (ci_get), with
 * the specialization's lock held; launches never reach it.
 */
#include "core/cache_glue.h"
#include "remote/remote.h"

#include <stdio.h>
#include <string.h>

#define KC__LATE_KEEP 64

struct kc__store {
  kc__cache *cache;
  kc__remote *remote; /* the tier behind the cache, or NULL */
  /* A context of the runtime's backend, made on the first hit, in which
   * stored artifacts are test-loaded before they are trusted. */
  kc__mutex probe_lock; /* under kc__spec.lock; the backend's link/unlink run under it */
  int probe_state; /* 0: not made yet, 1: ready, -1: the backend cannot make one */
  void *probe_bctx;
  /* The entries this runtime wrote whose artifact the backend may make
   * better later (kc__backend.late_artifacts): each key with its
   * artifact's hash and size, the newest KC__LATE_KEEP. late_lock (a leaf)
   * guards them. */
  kc__mutex late_lock;
  struct kc__late {
    uint8_t key[16];
    uint64_t hash;
    size_t size; /* 0: a free slot */
  } late[KC__LATE_KEEP];
  int late_next;
};

/* ----------------------------------------------------------- the tier */

static bool tier_fetch(void *self, const uint8_t key[16], kc__tier_accept_fn accept, void *ud,
                       uint64_t *lock) {
  return kc__remote_fetch(self, key, accept, ud, lock);
}
static void tier_upload(void *self, const uint8_t key[16], void *image, size_t size, uint64_t lock) {
  kc__remote_upload(self, key, image, size, lock);
}
static bool tier_defer(void *self, kc__tier_defer_fn fn, void *ud, const uint8_t key[16], void *image,
                       size_t size) {
  return kc__remote_defer(self, fn, ud, key, image, size);
}

/* --------------------------------------------------------------- open */

void kc__store_open(kc_runtime *rt) {
  rt->store = NULL;
  kc__cache_config cfg = {
      .mem = &rt->heap,
      .conf = &rt->conf, /* resolved once: options, variables, kcache.conf */
      /* the cache's warnings go to the runtime's log (kcache.h, "log") */
      .warn = kc__log_warn_cb,
      .warn_ud = rt,
  };
  kc__cache *cache = kc__cache_open(&cfg);
  if (!cache) return;
  struct kc__store *s = kc__calloc(rt, sizeof *s);
  if (s && !kc__mutex_init(&s->probe_lock)) {
    kc__free(rt, s);
    s = NULL;
  }
  if (s && !kc__mutex_init(&s->late_lock)) {
    kc__mutex_destroy(&s->probe_lock);
    kc__free(rt, s);
    s = NULL;
  }
  if (!s) {
    kc__cache_close(cache);
    kc__log(rt, KC_LOG_WARN,
            "out of memory opening the disk cache; compiled kernels are kept in memory only");
    return;
  }
  s->cache = cache;
  s->remote = kc__remote_open(&rt->heap, &rt->log, &rt->conf,
                              kc__cache_vdir(cache)); /* NULL: none, or unusable (warned) */
  if (s->remote) kc__cache_set_tier(cache, &(kc__cache_tier){s->remote, tier_fetch, tier_upload, tier_defer});
  rt->store = s;
}

void kc__store_config_file(kc__config *conf) { kc__store_conf_resolve(conf); }

void kc__store_close(kc_runtime *rt) {
  struct kc__store *s = rt->store;
  if (!s) return;
  kc__remote_close(s->remote); /* finishes its uploads (which may write to the cache) first */
  kc__cache_close(s->cache);
  if (s->probe_state == 1) rt->be->ctx_destroy(s->probe_bctx);
  kc__mutex_destroy(&s->probe_lock);
  kc__mutex_destroy(&s->late_lock);
  kc__free(rt, s);
  rt->store = NULL;
}

void kc__store_fork_lock(kc_runtime *rt) {
  if (rt->store) kc__lock(&rt->store->probe_lock);
}

void kc__store_fork_unlock(kc_runtime *rt, bool child) {
  if (!rt->store) return;
  /* a child that refuses (core/fork.c): the trial-load context is its too
   * (not reached there today: without the backend's identity the child
   * looks nothing up, so it trial-loads nothing) */
  if (child && rt->store->probe_state == 1 && rt->be == &rt->forked.table)
    rt->store->probe_bctx = &rt->forked;
  kc__unlock(&rt->store->probe_lock); /* the same in both: this thread took it */
}

/* --------------------------------------------------------- trial loads */

/* Loads a stored artifact into a scratch context of the backend: a stored
 * artifact is trusted only once the backend has accepted it. The engine
 * links after ci_get, too late to fall back to a compile. No source is
 * lent: a backend that rebuilds from source when it rejects a binary
 * (OpenCL) must say that it rejected it, or a bad entry would cost every
 * process a compile, forever. KC_OK: accepted (or no probe is possible);
 * KC_ELINK: refused (the bytes are bad: probe_says_bad); anything else
 * (out of memory, of mappings, of descriptors, a device that failed): the
 * backend could not tell now. */
static kc_status probe_link(kc_runtime *rt, struct kc__store *s, const kc__artifact *a) {
  const kc__backend *be = rt->be;
  if (!be->ctx_create || !be->link || !be->unlink) return KC_OK;
  kc__lock(&s->probe_lock);
  if (s->probe_state == 0) {
    kc_status st = be->ctx_create(rt->bstate, 0, &s->probe_bctx);
    if (st == KC_ENOMEM) { /* passing: could not tell now, ask again next time */
      kc__unlock(&s->probe_lock);
      return KC_ENOMEM;
    }
    s->probe_state = st ? -1 : 1;
  }
  kc_status ok = KC_OK;
  if (s->probe_state == 1) {
    kc__blinked b = {.bctx = s->probe_bctx};
    ok = be->link(s->probe_bctx, a, &b);
    if (ok == KC_OK) be->unlink(&b);
  }
  kc__unlock(&s->probe_lock);
  return ok;
}

/* Whether a trial load's failure condemns the entry. Only the backend's
 * refusal of the bytes does (KC_ELINK): a load that failed for want of a
 * resource (memory, mappings, descriptors: KC_ENOMEM, KC_EIO...) or of a
 * device says nothing about them, and removing the entry would cost every
 * process a compile. Such a lookup is a miss that leaves the entry be. */
static bool probe_says_bad(kc_status st) { return st == KC_ELINK; }

typedef struct use_ctx {
  kc_runtime *rt;
  kc__ci *ci;
} use_ctx;

/* The cache's verify callback: whether the decoded entry e is one that ci
 * can use: the same kernel, backend and signature, and an artifact the
 * backend loads. Then ci gets the artifact (a copy) and the signature.
 * The disk and the remote tier ask it alike, so both trust entries alike. */
static kc__verdict entry_use(void *ud, const kc__entry *e) {
  use_ctx *x = ud;
  kc_runtime *rt = x->rt;
  kc__ci *ci = x->ci;
  if (e->nsig != ci->nparams || strcmp(e->entry, ci->spec->name) || strcmp(e->backend, rt->be->name) ||
      !e->artifact_size)
    return KC__ENTRY_BAD;
  /* the headers on disk it was compiled from: still the same here? (then
   * they were read, as far as the world goes, while this looked) */
  uint64_t t0 = kc__now_ns();
  if (!kc__ext_same(e->files, e->nfiles)) return KC__ENTRY_STALE;
  if (kc__ext_copy(rt, ci, e->files, e->nfiles, t0, kc__now_ns())) {
    kc__ci_files_free(rt, ci);
    return KC__ENTRY_UNSURE;
  }
  void *art = kc__alloc(rt, e->artifact_size);
  if (!art) { /* (the entry's records go too: the compile records its own) */
    kc__ci_files_free(rt, ci);
    return KC__ENTRY_UNSURE;
  }
  memcpy(art, e->artifact, e->artifact_size);
  kc__artifact a = kc__artifact_of(ci);
  a.bytes = art;
  a.size = e->artifact_size;
  a.sig = e->sig;
  a.source = NULL;
  kc_status probe = probe_link(rt, rt->store, &a);
  if (probe == KC_OK) {
    ci->artifact = art;
    ci->artifact_size = e->artifact_size;
    memcpy(ci->sig, e->sig, e->nsig * sizeof *e->sig);
    return KC__ENTRY_GOOD;
  }
  kc__free(rt, art);
  kc__ci_files_free(rt, ci);
  return probe_says_bad(probe) ? KC__ENTRY_BAD : KC__ENTRY_UNSURE;
}

/* ------------------------------------------------------------ lookups */

/* The identity fields of ci's compile; false without the compiler's
 * identity (the backend ran out of memory making it): no key would be right. */
static bool identity_parts(kc_runtime *rt, const kc__ci *ci, kc__key_parts *p) {
  const char *identity = rt->be->identity(rt->bstate);
  if (!identity) return false;
  *p = (kc__key_parts){
      .format = KC__STORE_FORMAT,
      .library = KC_VERSION_STRING,
      .backend = rt->be->name,
      .identity = identity,
      .options = rt->compile_options,
      .params = ci->spec->params,
      .entry = ci->spec->name,
  };
  return true;
}

bool kc__store_fetch(kc_runtime *rt, kc__ci *ci, const kc__closure *c, kc__store_txn *txn) {
  memset(txn, 0, sizeof *txn);
  txn->lock_fd = -1;
  struct kc__store *s = rt->store;
  kc__key_parts p;
  if (!s || !identity_parts(rt, ci, &p)) return false;
  kc__key_def few[16], *defs = c->ndefs <= 16 ? few : kc__alloc(rt, c->ndefs * sizeof *defs);
  if (!defs) return false;
  for (uint32_t i = 0; i < c->ndefs; i++)
    defs[i] = (kc__key_def){c->defs[i]->binding->name, c->defs[i]->source, c->defs[i]->len};
  p.tu = ci->source;
  p.tu_len = strlen(ci->source);
  p.defs = defs;
  p.ndefs = c->ndefs;
  use_ctx x = {rt, ci};
  bool hit = kc__cache_fetch(s->cache, &p, entry_use, &x, txn);
  if (defs != few) kc__free(rt, defs);
  return hit;
}

void kc__store_finish(kc_runtime *rt, kc__store_txn *txn, kc_status st, const kc__ci *ci, const kc__sb *log) {
  struct kc__store *s = rt->store;
  if (!s) return;
  kc__key_parts p;
  /* (not with files no later lookup could check) */
  bool made =
      txn->active && st == KC_OK && ci->artifact && kc__ext_storable(ci) && identity_parts(rt, ci, &p);
  kc__cache_result res = {
      .compile_ns = ci->compile_ns,
      .tu = ci->source,
      .tu_len = ci->source ? strlen(ci->source) : 0,
      .nsig = ci->nparams,
      .sig = ci->sig,
      .artifact = ci->artifact,
      .artifact_size = ci->artifact_size,
      .log = log ? log->buf : NULL,
      .log_len = log && log->buf ? log->len : 0,
      .files = ci->files,
      .nfiles = ci->nfiles,
  };
  uint8_t key[16];
  memcpy(key, txn->key, 16);
  kc__cache_finish(s->cache, txn, made ? &p : NULL, &res);
  if (made && rt->be->late_artifacts && ci->artifact_size) {
    uint64_t h = kc__hash(ci->artifact, ci->artifact_size);
    kc__lock(&s->late_lock);
    struct kc__late *l = &s->late[s->late_next];
    s->late_next = (s->late_next + 1) % KC__LATE_KEEP;
    memcpy(l->key, key, 16);
    l->hash = h;
    l->size = ci->artifact_size;
    kc__unlock(&s->late_lock);
  }
}

/* kc__bsvc.better: the entry this runtime wrote with old (the newest one,
 * if two kernels made the same bytes) written again with bytes, if it
 * still holds old on disk (kc__cache_replace_artifact), and forgotten
 * either way; bytes NULL: whether there is such an entry to write. A
 * failure leaves the entry as it was. True: written (or, asked, there is). */
bool kc__store_better(const kc__bsvc *sv, const void *old, size_t old_size, const void *bytes, size_t size) {
  kc_runtime *rt = sv ? sv->rt : NULL;
  struct kc__store *s = rt ? rt->store : NULL;
  if (!s || !old || !old_size || !kc__cache_writable(s->cache)) return false;
  uint64_t h = kc__hash(old, old_size);
  uint8_t key[16];
  bool found = false;
  kc__lock(&s->late_lock);
  for (int i = 1; i <= KC__LATE_KEEP && !found; i++) {
    struct kc__late *l = &s->late[(s->late_next - i + KC__LATE_KEEP) % KC__LATE_KEEP];
    if (l->size == old_size && l->hash == h) {
      memcpy(key, l->key, 16);
      if (bytes) l->size = 0;
      found = true;
    }
  }
  kc__unlock(&s->late_lock);
  if (!found || !bytes) return found;
  if (!size || !kc__cache_replace_artifact(s->cache, key, old, old_size, bytes, size)) return false;
  kc__log(rt, KC_LOG_DEBUG,
          "disk cache: an entry written again with the %zu-byte artifact its backend made after its "
          "first launch (%zu bytes before)",
          size, old_size);
  return true;
}

bool kc__store_writable(const kc__bsvc *sv) { return sv && kc_cache_writable(sv->rt); }

void kc__store_stats(const kc_runtime *rt, kc_stats *out) {
  const struct kc__store *s = rt->store;
  if (!s) return;
  kc__cache_stats(s->cache, out);
  kc__remote_stats(s->remote, out);
}

/* ----------------------------------------------------------- public API */

const char *kc_cache_dir(const kc_runtime *rt) {
  return rt && rt->store ? kc__cache_root(rt->store->cache) : NULL;
}

int kc_cache_writable(const kc_runtime *rt) {
  return rt && rt->store && kc__cache_writable(rt->store->cache);
}

const char *kc_remote_url(const kc_runtime *rt) {
  return rt && rt->store ? kc__remote_url_of(rt->store->remote) : NULL;
}
