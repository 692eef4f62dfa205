/* SPDX-License-Identifier: MIT */
/*
 * soak_worker -- one process of the soak test (scripts/soak.sh,
 * tests/reliability/soak.py): several threads on one runtime, on the shared
 * store and Redis server, doing a random mix of definitions, redefinitions,
 * identical redefinitions, pins, launches checked against a model, context
 * resets, kc_collect and runtime re-creation, until SIGTERM or --seconds.
 *
 * The model: three helpers hJ(x) = x * C + D and three kernels
 * kN(y) = y[i] = hA(i) * M + hB(i) + V (A = N, B = N + 1 mod 3; V a
 * specialization parameter), with C, D, M from small sets, so that the
 * processes' definitions meet in the store and in Redis. Every definition
 * (1.6% of operations: 0.8% helpers, 0.4% kernels, 0.4% identical; resets 1%) is recorded with the world
 * kc_define returned, under the model's lock, which kc_define runs under; a pinned launch expects what the
 * latest record at or before its world says; an unpinned one is checked when no definition happened around
 * it. A launch that fails (a compiler killed, a full disk, a stopped server) is counted by status, never as
 * wrong: a wrong result is a launch that succeeded with other numbers.
 *
 * Counters go to --stats (a JSON line, rewritten through a rename every
 * second), so a process killed with SIGKILL loses at most a second of them.
 * They include the heap in use (glibc's mallinfo2; ASan's count of the
 * bytes allocated and not freed, in an ASan build) just before and just
 * after each kc_collect (and just before each re-creation): between two collects the code instances of every
 * world since the last one are alive (a definition makes six to eight
 * specializations miss), after it only the live worlds' are, so the heap
 * after a collect is what must stay flat; RSS keeps the high-water mark
 * of the first (glibc reuses the freed heap but seldom returns it).
 *
 * --recreate N: N runtime re-creations in one thread (RSS per round).
 * --sweep: creates a runtime (the host backend's sweep of the work
 * directories of processes that were killed during a compile) and exits.
 */

#include "kcache.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
/* SOAK_ASAN: 1 in an AddressSanitizer build (gcc or clang). The heap in
 * use (KB) and the trim after a collect come from its allocator then,
 * else from glibc's. */
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#ifndef SOAK_ASAN
#define SOAK_ASAN 0
#endif
#if SOAK_ASAN
/* Declared here: gcc ships these (libasan) but not clang's
 * sanitizer/allocator_interface.h. Allocated bytes: not freed (what
 * waits in the quarantine is freed); the purge drains the quarantine and
 * returns free memory. */
#include <stddef.h>
size_t __sanitizer_get_current_allocated_bytes(void);
void __sanitizer_purge_allocator(void);
#define HEAP_IN_USE() ((unsigned long long)__sanitizer_get_current_allocated_bytes() / 1024)
#define TRIM_HEAP() __sanitizer_purge_allocator()
#elif defined(__GLIBC__)
#include <malloc.h>
#if __GLIBC__ > 2 || __GLIBC_MINOR__ >= 33
#define HEAP_IN_USE() ((unsigned long long)mallinfo2().uordblks / 1024)
#else
#define HEAP_IN_USE() 0ull
#endif
#define TRIM_HEAP() malloc_trim(0) /* every arena's free pages back to the system */
#else
#define HEAP_IN_USE() 0ull
#define TRIM_HEAP() ((void)0)
#endif

enum { MAX_DEFINES_PER_COLLECT = 300, H = 3, K = 3, NV = 4, N = 64, RECS = 256, MAXT = 16 };

typedef struct rec {
  kc_world world;
  int a, b; /* helper: C, D; kernel: M, unused */
} rec;

typedef struct hist {
  rec r[RECS];
  unsigned n; /* records made; r[n % RECS] is the next */
} hist;

static struct {
  pthread_mutex_t lock; /* definitions and their records */
  hist h[H], k[K];
  atomic_uint seq; /* definitions made (checks unpinned launches) */
} model = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_rwlock_t gate; /* write: collect, re-create (writers first: main) */
static kc_runtime *rt;
static atomic_uint gen; /* runtime generation */
static atomic_int stop;
static int nthreads = 4, wid;
static const char *stats_path;

static struct {
  atomic_ullong checked, pinned, wrong, unchecked, defines, identical, resets, collects, recreates;
  atomic_ullong fails[32]; /* by status */
  atomic_ullong compiles, disk_hits, disk_misses, remote_hits, remote_uploads, repairs;
  atomic_ullong launch_ns_max; /* the slowest kc_launch (a cold start with a compile, or a wait) */
  unsigned long long heap_before_max, heap_after_max, heap_after_first, heap_after_last; /* KB; main only */
  unsigned long long rss_after_first, rss_after_max, rss_after_last; /* KB, after a collect and a trim */
} c;

static void fail_count(kc_status st) { atomic_fetch_add(&c.fails[st & 31], 1); }

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

/* ------------------------------------------------------------ the model */

static void record(hist *h, kc_world w, int a, int b) {
  h->r[h->n % RECS] = (rec){w, a, b};
  h->n++;
}

/* The record of h visible at world w; false if it is too old to be kept. */
static bool at(const hist *h, kc_world w, rec *out) {
  for (unsigned i = 0; i < h->n && i < RECS; i++) {
    const rec *r = &h->r[(h->n - 1 - i) % RECS];
    if (r->world <= w) {
      *out = *r;
      return true;
    }
  }
  return false;
}

static kc_status define_helper(int j, int cc, int d) {
  char src[160], name[16];
  snprintf(name, sizeof name, "h%d", j);
  snprintf(src, sizeof src, "KC_DEVICE float h%d(float x) { return x * %d.0f + %d.0f; }", j, cc, d);
  kc_world w = 0;
  kc_status st = kc_define(rt, name, src, &w);
  if (!st) {
    record(&model.h[j], w, cc, d);
    atomic_fetch_add(&model.seq, 1);
  }
  return st;
}

static kc_status define_kernel(int n, int m) {
  char src[240], name[16];
  snprintf(name, sizeof name, "k%d", n);
  snprintf(src, sizeof src,
           "KC_KERNEL void k%d(KC_GLOBAL float *y) { size_t i = kc_global_id(0); "
           "y[i] = h%d((float)i) * %d.0f + h%d((float)i) + V; }",
           n, n, m, (n + 1) % H);
  kc_world w = 0;
  kc_status st = kc_define(rt, name, src, &w);
  if (!st) {
    record(&model.k[n], w, m, 0);
    atomic_fetch_add(&model.seq, 1);
  }
  return st;
}

/* Defines everything as the model says now, on a new runtime: the old
 * records' worlds were the old runtime's. */
static kc_status define_all(void) {
  kc_status st = KC_OK;
  pthread_mutex_lock(&model.lock);
  for (int j = 0; j < H && !st; j++) {
    rec r = {0, 1 + j, j};
    if (model.h[j].n) r = model.h[j].r[(model.h[j].n - 1) % RECS];
    model.h[j].n = 0;
    st = define_helper(j, r.a, r.b);
  }
  for (int n = 0; n < K && !st; n++) {
    rec r = {0, 1 + n, 0};
    if (model.k[n].n) r = model.k[n].r[(model.k[n].n - 1) % RECS];
    model.k[n].n = 0;
    st = define_kernel(n, r.a);
  }
  pthread_mutex_unlock(&model.lock);
  return st;
}

/* y[i] of kernel n at world w, V = v. */
static bool expected(int n, int v, kc_world w, float out[N]) {
  rec k, a, b;
  if (!at(&model.k[n], w, &k) || !at(&model.h[n], w, &a) || !at(&model.h[(n + 1) % H], w, &b)) return false;
  for (int i = 0; i < N; i++)
    out[i] =
        ((float)i * (float)a.a + (float)a.b) * (float)k.a + ((float)i * (float)b.a + (float)b.b) + (float)v;
  return true;
}

/* ------------------------------------------------------------ threads */

typedef struct tstate {
  unsigned gen;
  kc_context *ctx;
  kc_buffer *buf;
  kc_kernel *k[K][NV];
  unsigned seed;
} tstate;

static void drop(tstate *t) { /* before the runtime goes: it frees them */
  memset(t->k, 0, sizeof t->k);
  t->ctx = NULL;
  t->buf = NULL;
}

static kc_status ready(tstate *t) {
  if (t->gen != atomic_load(&gen)) {
    drop(t);
    t->gen = atomic_load(&gen);
  }
  kc_status st = KC_OK;
  if (!t->ctx) st = kc_context_create(rt, 0, &t->ctx);
  if (!st && !t->buf) st = kc_buffer_create(t->ctx, N * sizeof(float), &t->buf);
  return st;
}

static void launch_one(tstate *t) {
  int n = (int)(rnd(&t->seed) % K), v = (int)(rnd(&t->seed) % NV);
  bool pin = rnd(&t->seed) % 4 != 0;
  kc_status st = KC_OK;
  if (!t->k[n][v]) {
    char params[24];
    snprintf(params, sizeof params, "V=%d", v);
    char name[16];
    snprintf(name, sizeof name, "k%d", n);
    st = kc_kernel_create(rt, name, params, &t->k[n][v]);
    if (st) {
      fail_count(st);
      return;
    }
  }
  kc_world w = 0;
  unsigned seq0 = atomic_load(&model.seq);
  if (pin && (st = kc_pin(rt, &w))) {
    fail_count(st);
    return;
  }
  kc_arg arg = KC_ARG_BUF(t->buf);
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  float out[N], want[N];
  struct timespec l0, l1;
  clock_gettime(CLOCK_MONOTONIC, &l0);
  st = kc_launch(t->k[n][v], t->ctx, &grid, &block, &arg, 1);
  clock_gettime(CLOCK_MONOTONIC, &l1);
  unsigned long long took = (unsigned long long)(l1.tv_sec - l0.tv_sec) * 1000000000ull +
                            (unsigned long long)l1.tv_nsec - (unsigned long long)l0.tv_nsec;
  for (unsigned long long m = atomic_load(&c.launch_ns_max); took > m;)
    if (atomic_compare_exchange_weak(&c.launch_ns_max, &m, took)) break;
  if (!st) st = kc_buffer_read(t->buf, 0, out, sizeof out);
  bool check = false;
  if (!st) {
    pthread_mutex_lock(&model.lock);
    if (!pin && atomic_load(&model.seq) == seq0) w = kc_world_latest(rt); /* nothing moved */
    check = (pin || atomic_load(&model.seq) == seq0) && expected(n, v, w, want);
    pthread_mutex_unlock(&model.lock);
  }
  if (pin) kc_unpin(rt);
  if (st) {
    fail_count(st);
    return;
  }
  if (!check) {
    atomic_fetch_add(&c.unchecked, 1);
    return;
  }
  atomic_fetch_add(&c.checked, 1);
  if (pin) atomic_fetch_add(&c.pinned, 1);
  for (int i = 0; i < N; i++)
    if (out[i] != want[i]) {
      atomic_fetch_add(&c.wrong, 1);
      fprintf(stderr, "soak_worker %d: WRONG k%d V=%d world %llu: y[%d] = %g, expected %g\n", wid, n, v,
              (unsigned long long)w, i, out[i], want[i]);
      break;
    }
}

static void one_op(tstate *t) {
  unsigned r = rnd(&t->seed) % 1000;
  if (r < 8) { /* redefine a helper */
    pthread_mutex_lock(&model.lock);
    kc_status st =
        define_helper((int)(rnd(&t->seed) % H), 1 + (int)(rnd(&t->seed) % 2), (int)(rnd(&t->seed) % 2));
    pthread_mutex_unlock(&model.lock);
    if (st) fail_count(st);
    else atomic_fetch_add(&c.defines, 1);
  } else if (r < 12) { /* redefine a kernel */
    pthread_mutex_lock(&model.lock);
    kc_status st = define_kernel((int)(rnd(&t->seed) % K), 1 + (int)(rnd(&t->seed) % 2));
    pthread_mutex_unlock(&model.lock);
    if (st) fail_count(st);
    else atomic_fetch_add(&c.defines, 1);
  } else if (r < 16) { /* identical: no new world */
    pthread_mutex_lock(&model.lock);
    int j = (int)(rnd(&t->seed) % H);
    rec last = {0, 1 + j, j};
    if (model.h[j].n) last = model.h[j].r[(model.h[j].n - 1) % RECS];
    kc_status st = define_helper(j, last.a, last.b);
    pthread_mutex_unlock(&model.lock);
    if (st) fail_count(st);
    else atomic_fetch_add(&c.identical, 1);
  } else if (r < 26) {
    kc_status st = kc_context_reset(t->ctx); /* this thread's own context */
    if (st) fail_count(st);
    else atomic_fetch_add(&c.resets, 1);
  } else {
    launch_one(t);
  }
}

static tstate *states[MAXT];

static void fold_stats(void) {
  kc_stats s;
  if (kc_stats_get(rt, &s)) return;
  atomic_fetch_add(&c.compiles, s.compiles);
  atomic_fetch_add(&c.disk_hits, s.disk_hits);
  atomic_fetch_add(&c.repairs, s.disk_repairs);
  atomic_fetch_add(&c.disk_misses, s.disk_misses);
  atomic_fetch_add(&c.remote_hits, s.remote_hits);
  atomic_fetch_add(&c.remote_uploads, s.remote_uploads);
}

static kc_status make_runtime(void) {
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = KC_BACKEND_HOST;
  opt.compile_timeout_ms = 20000;
  opt.remote_timeout_ms = 200;
  opt.remote_lock_timeout_ms = 2000;
  opt.cache_lock_timeout_ms = 5000;
  kc_status st = kc_runtime_create(&opt, &rt);
  if (st) return st;
  return define_all();
}

/* The process's resident memory in KB (and its mappings in *maps). */
static long self_rss_kb(long *maps) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  *maps = 0;
  f = fopen("/proc/self/maps", "r");
  if (f) {
    for (int ch; (ch = fgetc(f)) != EOF;) *maps += ch == '\n';
    fclose(f);
  }
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Collect or re-create, with every other thread out of kcache. After a
 * collect the allocator gives its free memory back (TRIM_HEAP), so the
 * RSS measured then is the memory that survives the collect: what a leak,
 * of the heap or of mappings (the host loader's code regions), grows. */
static void heavy(bool recreate) {
  pthread_rwlock_wrlock(&gate);
  if (recreate) {
    unsigned long long before = HEAP_IN_USE(); /* a re-creation frees what a collect would, and more */
    if (before > c.heap_before_max) c.heap_before_max = before;
    fold_stats();
    kc_runtime_destroy(rt);
    rt = NULL;
    atomic_fetch_add(&gen, 1);
    for (int i = 0; i < nthreads; i++)
      if (states[i]) drop(states[i]);
    kc_status st = make_runtime();
    if (st) {
      fprintf(stderr, "soak_worker %d: runtime re-creation failed: %s\n", wid, kc_errmsg(NULL));
      fail_count(st);
      if (!rt) atomic_store(&stop, 1);
    } else {
      atomic_fetch_add(&c.recreates, 1);
    }
  } else {
    kc_collect_info info;
    unsigned long long before = HEAP_IN_USE();
    if (kc_collect(rt, &info) == KC_OK) atomic_fetch_add(&c.collects, 1);
    unsigned long long after = HEAP_IN_USE();
    if (before > c.heap_before_max) c.heap_before_max = before;
    if (after > c.heap_after_max) c.heap_after_max = after;
    if (!c.heap_after_first) c.heap_after_first = after;
    c.heap_after_last = after;
    TRIM_HEAP();
    long maps, rss = self_rss_kb(&maps);
    if (!c.rss_after_first) c.rss_after_first = (unsigned long long)rss;
    if ((unsigned long long)rss > c.rss_after_max) c.rss_after_max = (unsigned long long)rss;
    c.rss_after_last = (unsigned long long)rss;
  }
  pthread_rwlock_unlock(&gate);
}

static void *thread_main(void *arg) {
  tstate *t = arg;
  while (!atomic_load(&stop)) {
    pthread_rwlock_rdlock(&gate);
    kc_status st = rt ? ready(t) : KC_EINVAL;
    if (!st) {
      for (int i = 0; i < 8; i++) one_op(t);
    } else {
      fail_count(st);
      drop(t);
    }
    pthread_rwlock_unlock(&gate);
  }
  return NULL;
}

/* ------------------------------------------------------------- stats */

static void write_stats(bool final) {
  if (!stats_path) return;
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  kc_stats s = {0};
  if (rt) kc_stats_get(rt, &s);
  fprintf(
      f,
      "{\"id\": %d, \"pid\": %d, \"final\": %s, \"asan\": %s, \"checked\": %llu, \"pinned\": %llu, "
      "\"wrong\": %llu, "
      "\"unchecked\": %llu, \"defines\": %llu, \"identical\": %llu, \"resets\": %llu, \"collects\": %llu, "
      "\"recreates\": %llu, \"compiles\": %llu, \"disk_hits\": %llu, \"disk_misses\": %llu, "
      "\"remote_hits\": %llu, \"remote_uploads\": %llu, \"repairs\": %llu, \"heap_before_collect_max\": "
      "%llu, "
      "\"heap_after_collect_first\": %llu, \"heap_after_collect_max\": %llu, \"heap_after_collect_last\": "
      "%llu, \"rss_after_collect_first\": %llu, \"rss_after_collect_max\": %llu, "
      "\"rss_after_collect_last\": %llu, \"launch_ms_max\": %llu, "
      "\"fails\": {",
      wid, (int)getpid(), final ? "true" : "false", SOAK_ASAN ? "true" : "false", c.checked, c.pinned,
      c.wrong, c.unchecked, c.defines, c.identical, c.resets, c.collects, c.recreates,
      c.compiles + s.compiles, c.disk_hits + s.disk_hits, c.disk_misses + s.disk_misses,
      c.remote_hits + s.remote_hits, c.remote_uploads + s.remote_uploads, c.repairs + s.disk_repairs,
      c.heap_before_max, c.heap_after_first, c.heap_after_max, c.heap_after_last, c.rss_after_first,
      c.rss_after_max, c.rss_after_last, (unsigned long long)atomic_load(&c.launch_ns_max) / 1000000u);
  bool first = true;
  for (int i = 1; i < 32; i++)
    if (c.fails[i]) {
      fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", kc_status_name((kc_status)i), c.fails[i]);
      first = false;
    }
  fprintf(f, "}}\n");
  fclose(f);
  rename(tmp, stats_path);
}

/* --recreate N: one thread, N rounds of 64 operations, a kc_collect and a
 * new runtime; prints RSS, mappings and the heap in use ten times. A leak
 * per runtime (the host loader's regions, the store's, the tier's) grows
 * them with N. */
static int recreate_rounds(int rounds, unsigned seed) {
  nthreads = 1;
  if (make_runtime()) return 2;
  tstate t;
  memset(&t, 0, sizeof t);
  t.seed = seed;
  states[0] = &t;
  for (int r = 1; r <= rounds && !atomic_load(&stop); r++) {
    pthread_rwlock_rdlock(&gate);
    if (!ready(&t))
      for (int i = 0; i < 64; i++) one_op(&t);
    pthread_rwlock_unlock(&gate);
    heavy(false);
    heavy(true);
    if (!rt) return 2;
    if (r % (rounds >= 10 ? rounds / 10 : 1) == 0) {
      long maps, rss = self_rss_kb(&maps);
      printf("round %d: RSS %ld KB, %ld mappings, heap in use after kc_collect %llu KB; so far %llu launches "
             "checked, %llu wrong, %llu compiles, %llu disk hits\n",
             r, rss, maps, c.heap_after_last, (unsigned long long)c.checked, (unsigned long long)c.wrong,
             (unsigned long long)c.compiles, (unsigned long long)c.disk_hits);
      fflush(stdout);
    }
  }
  kc_runtime_destroy(rt);
  rt = NULL;
  return c.wrong ? 1 : 0;
}

static void on_term(int sig) {
  (void)sig;
  atomic_store(&stop, 1);
}

int main(int argc, char **argv) {
  double seconds = 60;
  unsigned seed = (unsigned)getpid();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--id")) wid = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--stats")) stats_path = argv[i + 1];
    else if (!strcmp(argv[i], "--seed")) seed = (unsigned)strtoul(argv[i + 1], NULL, 10);
  }
  if (argc == 2 && !strcmp(argv[1], "--sweep")) {
    kc_options o;
    kc_options_init(&o);
    o.backend = KC_BACKEND_HOST;
    kc_status st = kc_runtime_create(&o, &rt);
    if (st) fprintf(stderr, "soak_worker --sweep: %s: %s\n", kc_status_name(st), kc_errmsg(NULL));
    kc_runtime_destroy(rt);
    return st ? 2 : 0;
  }
  if (nthreads < 1 || nthreads > MAXT) nthreads = 4;
  pthread_rwlockattr_t ga;
  pthread_rwlockattr_init(&ga);
  pthread_rwlockattr_setkind_np(&ga, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&gate, &ga);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  /* The harness starts a worker with SIGTERM blocked, so that one sent
   * before the handler was in place (a worker started just before the end)
   * waits until now, and stops it the same way as any other. */
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, NULL);
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--recreate")) return recreate_rounds(atoi(argv[i + 1]), seed);
  kc_status st = make_runtime();
  if (st) {
    fprintf(stderr, "soak_worker %d: kc_runtime_create: %s: %s\n", wid, kc_status_name(st), kc_errmsg(NULL));
    return 2;
  }
  pthread_t th[MAXT];
  tstate ts[MAXT];
  memset(ts, 0, sizeof ts);
  for (int i = 0; i < nthreads; i++) {
    ts[i].seed = seed * 7919u + (unsigned)i * 104729u;
    ts[i].gen = atomic_load(&gen);
    states[i] = &ts[i];
    pthread_create(&th[i], NULL, thread_main, &ts[i]);
  }
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  unsigned ms = seed;
  unsigned long long defines_at_collect = 0;
  for (int tick = 1; !atomic_load(&stop); tick++) {
    usleep(250000);
    clock_gettime(CLOCK_MONOTONIC, &now);
    double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
    if (el >= seconds) break;
    unsigned r = rnd(&ms) % 100;
    /* kc_collect about every 3 s, and at the latest after MAX_DEFINES_PER_COLLECT definitions: what
     * lives between two collects is then bounded by the work, not by how fast launches run (the RSS
     * after a collect keeps some of the heap's peak, in glibc's and ASan's free lists) */
    unsigned long long defs = atomic_load(&c.defines);
    if (r < 8 || defs - defines_at_collect >= MAX_DEFINES_PER_COLLECT) {
      heavy(false);
      defines_at_collect = defs;
    } else if (r < 10) heavy(true); /* a new runtime: about every 12 s */
    if (tick % 4 == 0) write_stats(false);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  fold_stats();
  kc_runtime_destroy(rt); /* finishes its uploads */
  rt = NULL;
  write_stats(true);
  return c.wrong ? 1 : 0;
}
