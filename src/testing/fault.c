/* SPDX-License-Identifier: MIT */
/*
 * fault.c -- fault injection, for tests only (built with
 * -DKC_FAULT_INJECTION=ON, which also compiles the hooks that call it;
 * the interface is fault.h).
 *
 * Owns three counters, SQLite style: of the operations of one kind counted
 * from the moment a test arms it, the Nth fails (or, sticky, every one from
 * the Nth on). A test sweeps N = 1, 2, 3... until a run hits no fault.
 *
 *   KC__FAULT_ALLOC    kc__fault_alloc: the allocator hook a test installs
 *                      (kc_options.alloc), as Lua's ltests.c does
 *   KC__FAULT_FILE     the disk cache's open, read, write, fsync, rename (store.c)
 *   KC__FAULT_BACKEND  every backend call that can fail, through a proxy table
 *
 * The proxy: kc_runtime_create hands the backend it picked to
 * kc__fault_wrap_backend, and the runtime uses the table returned, whose
 * functions count, fail the armed call with the status the real backend
 * would give, or forward. Forwarding needs the real table: the proxy finds
 * it from the runtime (open), from a registry of backend states and
 * contexts (everything else), or from a side table of linked objects
 * (launch, unlink), since launches go straight through kc__blinked.launch.
 * A test that wants a backend of its own calls kc__runtime_open with it.
 *
 * The registry and the side table use malloc, never the runtime's
 * allocator: they must not shift the allocation counter.
 *
 * $KC_FAULT_BACKTRACE=1 prints where each injected fault hit.
 */
#include "kc_internal.h"

#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- counters */

static struct {
  _Atomic uint64_t ops; /* operations counted since the kind was armed or reset */
  _Atomic uint64_t fail_at; /* the operation that fails; 0: disarmed */
  _Atomic int sticky; /* every operation from fail_at on fails */
  _Atomic uint64_t hits; /* faults injected since the last reset */
} kc__faults[KC__FAULT_KINDS];

static const char *const kc__fault_names[KC__FAULT_KINDS] = {"alloc", "file", "backend"};

const char *kc__fault_name(kc__fault_kind kind) {
  return (unsigned)kind < KC__FAULT_KINDS ? kc__fault_names[kind] : "?";
}

static void arm(kc__fault_kind kind, uint64_t n, int sticky) {
  if ((unsigned)kind >= KC__FAULT_KINDS) return;
  kc__store_relaxed(&kc__faults[kind].fail_at, 0);
  kc__store_relaxed(&kc__faults[kind].ops, 0);
  kc__store_relaxed(&kc__faults[kind].sticky, sticky);
  kc__store_release(&kc__faults[kind].fail_at, n);
}

void kc__fault_set(kc__fault_kind kind, uint64_t n) { arm(kind, n, 0); }

void kc__fault_set_sticky(kc__fault_kind kind, uint64_t n) { arm(kind, n, 1); }

void kc__fault_reset(void) {
  for (int k = 0; k < KC__FAULT_KINDS; k++) {
    arm((kc__fault_kind)k, 0, 0);
    kc__store_relaxed(&kc__faults[k].hits, 0);
  }
}

uint64_t kc__fault_hits(void) {
  uint64_t n = 0;
  for (int k = 0; k < KC__FAULT_KINDS; k++) n += kc__load_relaxed(&kc__faults[k].hits);
  return n;
}

uint64_t kc__fault_ops(kc__fault_kind kind) {
  return (unsigned)kind < KC__FAULT_KINDS ? kc__load_relaxed(&kc__faults[kind].ops) : 0;
}

/* With a sanitizer, its symbolizing stack printer; else glibc's. */
void __sanitizer_print_stack_trace(void) __attribute__((weak));

/* $KC_FAULT_BACKTRACE set: where each injected fault hit, on stderr. */
static KC__COLD void trace(kc__fault_kind kind, uint64_t n) {
  bool on = false;
  const char *v = kc__setting_raw(KC__SET_FAULT_BACKTRACE); /* test builds: the process's, read once here */
  kc__setting_parse(KC__SET_FAULT_BACKTRACE, v && *v ? v : NULL, &on, 0, 0);
  if (!on) return;
  fprintf(stderr, "kcache: injected %s fault %llu here:\n", kc__fault_name(kind), (unsigned long long)n);
  if (__sanitizer_print_stack_trace) {
    __sanitizer_print_stack_trace();
  } else {
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  }
}

bool kc__fault_hit(kc__fault_kind kind) {
  uint64_t n = kc__fetch_add_relaxed(&kc__faults[kind].ops, 1) + 1;
  uint64_t at = kc__load_acquire(&kc__faults[kind].fail_at);
  if (KC__LIKELY(!at || n < at)) return false;
  if (n > at && !kc__load_relaxed(&kc__faults[kind].sticky)) return false;
  kc__fetch_add_relaxed(&kc__faults[kind].hits, 1);
  trace(kind, n);
  return true;
}

/* ------------------------------------------------------- proxy backends */

/* One proxy per real backend table; the proxy's table comes first, so a
 * runtime's `be` leads back to its proxy. */
typedef struct proxy {
  kc__backend table;
  const kc__backend *real;
} proxy;

#define KC__FAULT_PROXIES 8
static proxy kc__proxies[KC__FAULT_PROXIES];
static size_t kc__nproxies;
static kc__mutex kc__proxy_lock = PTHREAD_MUTEX_INITIALIZER; /* leaf, like everything here */

/* Backend states and contexts -> their runtime and proxy. The host
 * backend's context is its state: a key may be in twice, with equal values. */
typedef struct owner {
  const void *key;
  uint64_t id; /* the error owner (backend.h: kc__bsvc.owner) */
  const proxy *px;
} owner;

static owner *kc__owners;
static size_t kc__nowners, kc__capowners;

static bool owner_add(const void *key, uint64_t id, const proxy *px) {
  kc__lock(&kc__proxy_lock);
  bool ok;
  KC__GROW(NULL, kc__owners, kc__capowners, kc__nowners + 1, 16, &ok); /* libc (NULL heap) */
  if (ok) kc__owners[kc__nowners++] = (owner){key, id, px};
  kc__unlock(&kc__proxy_lock);
  return ok;
}

static owner owner_of(const void *key) {
  owner o = {key, 0, NULL};
  kc__lock(&kc__proxy_lock);
  for (size_t i = 0; i < kc__nowners; i++)
    if (kc__owners[i].key == key) {
      o = kc__owners[i];
      break;
    }
  kc__unlock(&kc__proxy_lock);
  if (!o.px) abort(); /* a state the proxy never saw: a bug in this file */
  return o;
}

static void owner_remove(const void *key) {
  kc__lock(&kc__proxy_lock);
  for (size_t i = 0; i < kc__nowners; i++)
    if (kc__owners[i].key == key) {
      kc__owners[i] = kc__owners[--kc__nowners];
      break;
    }
  kc__unlock(&kc__proxy_lock);
}

/* Linked objects -> the real launch and proxy. Launches read it, so it is
 * hashed by address. */
typedef struct lnode {
  const kc__blinked *l;
  kc__launch_fn launch;
  const proxy *px;
  uint64_t id; /* the error owner */
  struct lnode *next;
} lnode;

#define KC__FAULT_LBUCKETS 1024
static lnode *kc__lbuckets[KC__FAULT_LBUCKETS];

static size_t lbucket(const kc__blinked *l) {
  return (size_t)(((uintptr_t)l >> 4) * 0x9E3779B97F4A7C15ull >> 54) & (KC__FAULT_LBUCKETS - 1);
}

static bool linked_add(const kc__blinked *l, kc__launch_fn launch, const proxy *px, uint64_t id) {
  lnode *n = malloc(sizeof *n);
  if (!n) return false;
  *n = (lnode){l, launch, px, id, NULL};
  kc__lock(&kc__proxy_lock);
  n->next = kc__lbuckets[lbucket(l)];
  kc__lbuckets[lbucket(l)] = n;
  kc__unlock(&kc__proxy_lock);
  return true;
}

static lnode linked_of(const kc__blinked *l, bool remove) {
  lnode found = {l, NULL, NULL, 0, NULL};
  kc__lock(&kc__proxy_lock);
  for (lnode **p = &kc__lbuckets[lbucket(l)]; *p; p = &(*p)->next)
    if ((*p)->l == l) {
      lnode *n = *p;
      found = *n;
      if (remove) {
        *p = n->next;
        free(n);
      }
      break;
    }
  kc__unlock(&kc__proxy_lock);
  if (!found.px) abort(); /* a linked object the proxy never linked: a bug in this file */
  return found;
}

static kc_status injected(uint64_t id, kc_status st, const char *call) {
  return kc__err_owner(id, st, "fault injection: backend call '%s' failed (call %llu)", call,
                       (unsigned long long)kc__fault_ops(KC__FAULT_BACKEND));
}

#define KC__FAIL(id, st, call) \
  if (kc__fault_hit(KC__FAULT_BACKEND)) return injected((id), (st), (call))

/* svc->be is the proxy's table (it comes first in the proxy). */
static kc_status px_open(const kc__bsvc *svc, const kc__bconfig *opt, void **state) {
  KC__FAIL(svc->owner, KC_EBACKEND, "open");
  const proxy *px = (const proxy *)svc->be;
  kc_status st = px->real->open(svc, opt, state);
  if (st) return st;
  if (!owner_add(*state, svc->owner, px)) {
    px->real->close(*state);
    return kc__err_owner(svc->owner, KC_ENOMEM, "fault injection: out of memory");
  }
  return KC_OK;
}

static void px_close(void *state) {
  if (!state) return;
  owner o = owner_of(state);
  owner_remove(state);
  o.px->real->close(state);
}

static int px_device_count(void *state) { return owner_of(state).px->real->device_count(state); }

static const char *px_device_name(void *state, int index) {
  return owner_of(state).px->real->device_name(state, index);
}

static const char *px_identity(void *state) { return owner_of(state).px->real->identity(state); }

static kc_status px_epilogue(void *state, const kc__tu *tu, kc__sb *out) {
  owner o = owner_of(state);
  KC__FAIL(o.id, KC_ENOMEM, "epilogue");
  return o.px->real->epilogue(state, tu, out);
}

static kc_status px_compile(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                            kc__sb *log) {
  owner o = owner_of(state);
  if (kc__fault_hit(KC__FAULT_BACKEND)) {
    /* like a compiler that crashed: transient, so not remembered */
    kc__sb_puts(log, "fault injection: the compiler did not run\n");
    return injected(o.id, KC_EBACKEND, "compile");
  }
  return o.px->real->compile(state, tu, artifact, size, sig, log);
}

static kc_status px_ctx_create(void *state, int device, void **bctx) {
  owner o = owner_of(state);
  KC__FAIL(o.id, KC_EBACKEND, "ctx_create");
  kc_status st = o.px->real->ctx_create(state, device, bctx);
  if (st) return st;
  if (!owner_add(*bctx, o.id, o.px)) {
    o.px->real->ctx_destroy(*bctx);
    return kc__err_owner(o.id, KC_ENOMEM, "fault injection: out of memory");
  }
  return KC_OK;
}

static void px_ctx_destroy(void *bctx) {
  owner o = owner_of(bctx);
  owner_remove(bctx);
  o.px->real->ctx_destroy(bctx);
}

static kc_status px_ctx_reset(void *bctx) {
  owner o = owner_of(bctx);
  KC__FAIL(o.id, KC_EBACKEND, "ctx_reset");
  return o.px->real->ctx_reset(bctx);
}

static kc_status px_ctx_finish(void *bctx) {
  owner o = owner_of(bctx);
  KC__FAIL(o.id, KC_EBACKEND, "ctx_finish");
  return o.px->real->ctx_finish(bctx);
}

static kc_status px_launch(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block) {
  lnode n = linked_of(l, false);
  KC__FAIL(n.id, KC_ELAUNCH, "launch");
  return n.launch(l, argv, grid, block);
}

static kc_status px_link(void *bctx, const kc__artifact *a, kc__blinked *l) {
  owner o = owner_of(bctx);
  KC__FAIL(o.id, KC_ELINK, "link");
  kc_status st = o.px->real->link(bctx, a, l);
  if (st) return st;
  if (!linked_add(l, l->launch, o.px, o.id)) {
    o.px->real->unlink(l);
    return kc__err_owner(o.id, KC_ENOMEM, "fault injection: out of memory");
  }
  l->launch = px_launch;
  l->entry = NULL; /* the engine's entry, which launches through px_launch */
  return KC_OK;
}

static void px_unlink(kc__blinked *l) {
  lnode n = linked_of(l, true);
  l->launch = n.launch;
  n.px->real->unlink(l);
}

static kc_status px_buf_create(void *bctx, size_t size, kc__bufh *h) {
  owner o = owner_of(bctx);
  KC__FAIL(o.id, KC_ENOMEM, "buf_create");
  return o.px->real->buf_create(bctx, size, h);
}

static void px_buf_destroy(void *bctx, kc__bufh *h) { owner_of(bctx).px->real->buf_destroy(bctx, h); }

static kc_status px_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  owner o = owner_of(bctx);
  KC__FAIL(o.id, KC_EBACKEND, "buf_write");
  return o.px->real->buf_write(bctx, h, off, src, n);
}

static kc_status px_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  owner o = owner_of(bctx);
  KC__FAIL(o.id, KC_EBACKEND, "buf_read");
  return o.px->real->buf_read(bctx, h, off, dst, n);
}

/* The proxy lock around fork() (base/fork.h), like the library's own. */
static void proxy_fork_lock(void *ud) { kc__lock(ud); }
static void proxy_fork_unlock(void *ud) { kc__unlock(ud); }
static kc__fork_hook proxy_fork = {.level = KC__FORK_TESTING,
                                   .prepare = proxy_fork_lock,
                                   .parent = proxy_fork_unlock,
                                   .child = proxy_fork_unlock,
                                   .ud = &kc__proxy_lock};
static kc__once proxy_fork_once = KC__ONCE_INIT;
static void proxy_fork_register(void) { kc__fork_register(&proxy_fork); }

const kc__backend *kc__fault_wrap_backend(const kc__backend *real) {
  if (!real) return NULL;
  kc__call_once(&proxy_fork_once, proxy_fork_register);
  kc__lock(&kc__proxy_lock);
  proxy *px = NULL;
  for (size_t i = 0; i < kc__nproxies && !px; i++)
    if (kc__proxies[i].real == real) px = &kc__proxies[i];
  if (!px && kc__nproxies < KC__FAULT_PROXIES) {
    px = &kc__proxies[kc__nproxies++];
    px->real = real;
    kc__backend *t = &px->table;
    *t = *real; /* name, prelude, unavailable, and the NULLs of optional calls */
#define KC__PROXY(field) \
  if (real->field) t->field = px_##field;
    KC__PROXY(open)
    KC__PROXY(close)
    KC__PROXY(device_count)
    KC__PROXY(device_name)
    KC__PROXY(identity)
    KC__PROXY(epilogue)
    KC__PROXY(compile)
    KC__PROXY(ctx_create)
    KC__PROXY(ctx_destroy)
    KC__PROXY(ctx_reset)
    KC__PROXY(ctx_finish)
    KC__PROXY(link)
    KC__PROXY(unlink)
    KC__PROXY(buf_create)
    KC__PROXY(buf_destroy)
    KC__PROXY(buf_write)
    KC__PROXY(buf_read)
#undef KC__PROXY
  }
  kc__unlock(&kc__proxy_lock);
  return px ? &px->table : real; /* out of proxies: uncounted, but it works */
}

/* ------------------------------------------------------------ allocator */

void *kc__fault_alloc(void *ud, void *ptr, size_t size) {
  const kc__heap *heap = ud;
  if (size == 0) {
    kc__heap_free(heap, ptr);
    return NULL;
  }
  if (KC__UNLIKELY(kc__fault_hit(KC__FAULT_ALLOC))) return NULL;
  return kc__heap_realloc(heap, ptr, size);
}
