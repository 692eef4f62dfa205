/* SPDX-License-Identifier: MIT */
/*
 * test_stress.c -- a bounded run of threads that launch, define, undefine,
 * pin and reset contexts at random, checked against a reference model of
 * which world gives which result.
 *
 * The definer thread changes the helpers a and b and the kernel k (each
 * version with its own values) and records, under the model's lock and in
 * the same critical section as the change, what every new world holds.
 * Launcher threads launch k through shared handles (half the time with
 * arguments bound once per thread, handle and context), each on a context of
 * its own (kc_context_reset is not thread-safe with launches on the same
 * context) and on one shared context whose resets are guarded by a rwlock:
 *  - pinned: the result must be exactly what the model says of the pinned
 *    world, including its failure (a helper or the kernel undefined);
 *  - unpinned: the result must be what the model says of one world between
 *    the latest before the launch and the latest after it, the same world
 *    for every element.
 *
 *   KC_STRESS_SECONDS  how long (default 5)
 *   KC_STRESS_SEED     the seed (default 1)
 *
 * Host backend with $KC_HOST_CC, else tcc when installed (fast compiles),
 * else cc; memory-only. Runs with `--backend opencl` too (fewer worlds:
 * PoCL compiles take longer). Under ThreadSanitizer in the tsan suite.
 */
#include "rel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define N 8 /* work items per launch */
#define LAUNCHERS 3
#define HANDLES 2 /* handles on k shared by every launcher */

/* y[i] = i*10^7 + kv*10^6 + a()*10^3 + b() (b() only in kernels that call it) */
typedef struct world_state {
  int kv; /* the kernel's version value 0..9; -1: k undefined */
  bool uses_b;
  int a, b; /* 0..999; -1: undefined */
  int c; /* the version of stress_c, which nothing calls */
} world_state;

static struct {
  pthread_mutex_t lock; /* guards the table; held by the definer across each change */
  world_state *worlds; /* indexed by world */
  size_t cap;
  kc_world latest;
} model = {.lock = PTHREAD_MUTEX_INITIALIZER};

static kc_runtime *rt;
static kc_kernel *handles[HANDLES];
static kc_context *shared_ctx;
static pthread_rwlock_t shared_guard = PTHREAD_RWLOCK_INITIALIZER;
static _Atomic int stop;
static double deadline;

typedef struct report {
  kct_report k; /* the first failure */
  uint64_t launches, pinned, unpinned, bound, errors_expected, resets, defines, undefines, identical;
} report;

static void report_fail(report *r, const char *fmt, ...) KCT_PRINTF(2, 3);
static void report_fail(report *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kct_report_vfail(&r->k, fmt, ap);
  va_end(ap);
  atomic_store(&stop, 1);
}

static world_state state_of(kc_world w) {
  pthread_mutex_lock(&model.lock);
  world_state s = model.worlds[w];
  pthread_mutex_unlock(&model.lock);
  return s;
}

/* Whether launching k in a world in state s fails (something undefined). */
static bool fails_in(world_state s) { return s.kv < 0 || s.a < 0 || (s.uses_b && s.b < 0); }

static int32_t expected(world_state s, int i) {
  return i * 10000000 + s.kv * 1000000 + s.a * 1000 + (s.uses_b ? s.b : 0);
}

static bool matches(world_state s, kc_status st, const int32_t *out) {
  if (fails_in(s)) return st == KC_ENOTFOUND || st == KC_ECOMPILE;
  if (st) return false;
  for (int i = 0; i < N; i++)
    if (out[i] != expected(s, i)) return false;
  return true;
}

static void describe(char *buf, size_t len, kc_world w, world_state s) {
  snprintf(buf, len, "world %llu: k%s%d%s, a=%d, b=%d", (unsigned long long)w,
           s.kv < 0 ? " undefined (" : " v", s.kv,
           s.kv < 0   ? ")"
           : s.uses_b ? " (calls a and b)"
                      : " (calls a)",
           s.a, s.b);
}

/* ----------------------------------------------------------- the definer */

static void record(kc_world w, world_state s) {
  if (w >= model.cap) {
    size_t cap = model.cap * 2;
    world_state *n = realloc(model.worlds, cap * sizeof *n);
    if (!n) abort();
    model.worlds = n;
    model.cap = cap;
  }
  model.worlds[w] = s;
  model.latest = w;
}

static const char *source_of(const char *name, world_state s, char *buf, size_t len) {
  if (!strcmp(name, "stress_a")) snprintf(buf, len, "KC_DEVICE int stress_a(void) { return %d; }", s.a);
  else if (!strcmp(name, "stress_b")) snprintf(buf, len, "KC_DEVICE int stress_b(void) { return %d; }", s.b);
  else if (!strcmp(name, "stress_c")) snprintf(buf, len, "KC_DEVICE int stress_c(void) { return %d; }", s.c);
  else
    snprintf(buf, len,
             "KC_KERNEL void k(KC_GLOBAL int *y) {\n"
             "  int i = (int)kc_global_id(0);\n"
             "  y[i] = i * 10000000 + %d * 1000000 + stress_a() * 1000%s;\n"
             "}\n",
             s.kv, s.uses_b ? " + stress_b()" : "");
  return buf;
}

typedef struct definer_arg {
  report r;
  uint64_t seed;
  unsigned pause_us;
} definer_arg;

static void *definer(void *arg) {
  definer_arg *d = arg;
  report *r = &d->r;
  uint64_t rng = d->seed;
  while (!atomic_load(&stop) && rel_now() < deadline) {
    pthread_mutex_lock(&model.lock);
    world_state s = model.worlds[model.latest];
    uint32_t op = rel_below(&rng, 100);
    const char *name;
    bool undefine = false;
    if (s.kv < 0 || op < 10) { /* k: a new version, at once after it was undefined */
      name = "k";
      s.kv = (int)rel_below(&rng, 10);
      s.uses_b = rel_below(&rng, 2);
    } else if (op < 35) {
      name = "stress_a";
      s.a = (int)rel_below(&rng, 1000);
    } else if (op < 55) {
      name = "stress_b";
      s.b = (int)rel_below(&rng, 1000);
    } else if (op < 80) { /* nothing calls it: a new world that invalidates nothing */
      name = "stress_c";
      s.c++;
    } else if (op < 88) {
      name = op < 84 ? "stress_a" : "stress_b";
      undefine = true;
    } else if (op < 98) { /* the same text again: no new world */
      name = "k";
    } else {
      name = "k";
      undefine = true;
    }
    kc_world before = model.latest, w = 0;
    kc_status st;
    char src[512];
    if (undefine) {
      bool defined = !strcmp(name, "k") ? s.kv >= 0 : !strcmp(name, "stress_a") ? s.a >= 0 : s.b >= 0;
      st = kc_undefine(rt, name, &w);
      if (!defined) {
        if (st != KC_ENOTFOUND) report_fail(r, "kc_undefine(%s) of nothing: %s", name, kc_status_name(st));
        pthread_mutex_unlock(&model.lock);
        continue;
      }
      if (!strcmp(name, "k")) s.kv = -1;
      else if (!strcmp(name, "stress_a")) s.a = -1;
      else s.b = -1;
      r->undefines++;
    } else {
      st = kc_define(rt, name, source_of(name, s, src, sizeof src), &w);
      r->defines++;
    }
    if (st) {
      report_fail(r, "%s(%s): %s: %s", undefine ? "kc_undefine" : "kc_define", name, kc_status_name(st),
                  kc_errmsg(rt));
    } else if (w == before) { /* the same text as the visible one */
      world_state was = model.worlds[before];
      if (was.kv != s.kv || was.uses_b != s.uses_b || was.a != s.a || was.b != s.b || was.c != s.c)
        report_fail(r, "kc_define(%s) changed the text but made no world", name);
      r->identical++;
    } else if (w != before + 1) {
      report_fail(r, "%s(%s) made world %llu after %llu", undefine ? "kc_undefine" : "kc_define", name,
                  (unsigned long long)w, (unsigned long long)before);
    } else {
      record(w, s);
    }
    pthread_mutex_unlock(&model.lock);
    if (d->pause_us) {
      struct timespec ts = {0, (long)(rel_below(&rng, d->pause_us) + 1) * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

/* ---------------------------------------------------------- the launchers */

typedef struct launcher_arg {
  report r;
  uint64_t seed;
  kc_context *ctx;
  kc_buffer *own_buf, *shared_buf;
  kc_args *bound[HANDLES][2]; /* bound arguments of each handle: own context, shared */
} launcher_arg;

/* Launches handle h (on the shared context or the thread's own), half the
 * time with bound arguments, bound on first use (when binding fails, as in
 * a world where the kernel does not compile, kc_launch this time). */
static kc_status launch(launcher_arg *a, uint64_t *rng, int h, bool shared, int32_t *out) {
  kc_context *ctx = shared ? shared_ctx : a->ctx;
  kc_buffer *b = shared ? a->shared_buf : a->own_buf;
  for (int i = 0; i < N; i++) out[i] = -7;
  kc_args **bound = &a->bound[h][shared];
  if (rel_below(rng, 2) == 0) {
    kc_arg arg = KC_ARG_BUF(b);
    if (!*bound && kc_args_create(handles[h], ctx, &arg, 1, bound) != KC_OK) *bound = NULL;
    if (*bound) {
      a->r.bound++;
      kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
      kc_status st = kc_launch_args(*bound, &grid, &block);
      if (!st) st = kc_context_finish(ctx);
      if (!st) st = kc_buffer_read(b, 0, out, sizeof(int32_t) * N);
      return st;
    }
  }
  return rel_run(handles[h], ctx, b, N, out);
}

static void check_pinned(report *r, kc_world w, kc_status st, const int32_t *out, const char *where) {
  world_state s = state_of(w);
  if (fails_in(s)) r->errors_expected++;
  if (matches(s, st, out)) return;
  char what[160];
  describe(what, sizeof what, w, s);
  report_fail(r, "pinned launch on %s context in %s: %s (%s), y[1] = %d, expected %d", where, what,
              kc_status_name(st), st ? kc_errmsg(rt) : "ok", out[1], fails_in(s) ? 0 : expected(s, 1));
}

static void check_between(report *r, kc_world lo, kc_world hi, kc_status st, const int32_t *out,
                          const char *where) {
  bool failing = false;
  for (kc_world w = lo; w <= hi; w++) {
    world_state s = state_of(w);
    failing |= fails_in(s);
    if (matches(s, st, out)) {
      if (st) r->errors_expected++;
      return;
    }
  }
  char what[160];
  describe(what, sizeof what, lo, state_of(lo));
  report_fail(r, "launch on %s context between worlds %llu and %llu (%s...): %s (%s), y[1] = %d", where,
              (unsigned long long)lo, (unsigned long long)hi, what, kc_status_name(st),
              st ? kc_errmsg(rt) : "ok", out[1]);
  (void)failing;
}

static void *launcher(void *arg) {
  launcher_arg *a = arg;
  report *r = &a->r;
  uint64_t rng = a->seed;
  int32_t out[N];
  while (!atomic_load(&stop) && rel_now() < deadline) {
    uint32_t op = rel_below(&rng, 100);
    int h = (int)rel_below(&rng, HANDLES);
    bool shared = rel_below(&rng, 3) == 0;
    const char *where = shared ? "the shared" : "its own";
    if (op < 45) {
      kc_world w = 0, inner = 0;
      kc_status st = kc_pin(rt, &w);
      if (st) {
        report_fail(r, "kc_pin: %s", kc_status_name(st));
        break;
      }
      bool nested = rel_below(&rng, 4) == 0;
      if (nested && (st = kc_pin(rt, &inner)) != KC_OK) {
        report_fail(r, "a nested kc_pin: %s", kc_status_name(st));
        nested = false;
      } else if (nested && inner != w) {
        report_fail(r, "a nested pin moved the world from %llu to %llu", (unsigned long long)w,
                    (unsigned long long)inner);
      }
      /* several launches: the cached path too, and worlds move meanwhile */
      int times = 1 + (int)rel_below(&rng, 5);
      bool linger = rel_below(&rng, 3) == 0;
      for (int t = 0; t < times; t++) {
        if (linger && t) {
          struct timespec ts = {0, 500000};
          nanosleep(&ts, NULL);
        }
        if (shared) pthread_rwlock_rdlock(&shared_guard);
        st = launch(a, &rng, h, shared, out);
        if (shared) pthread_rwlock_unlock(&shared_guard);
        r->launches++;
        r->pinned++;
        check_pinned(r, w, st, out, where);
      }
      if (nested && kc_unpin(rt)) report_fail(r, "kc_unpin (inner): %s", kc_errmsg(rt));
      if ((st = kc_unpin(rt))) report_fail(r, "kc_unpin: %s", kc_errmsg(rt));
    } else if (op < 90) {
      kc_world lo = kc_world_latest(rt);
      if (shared) pthread_rwlock_rdlock(&shared_guard);
      kc_status st = launch(a, &rng, h, shared, out);
      if (shared) pthread_rwlock_unlock(&shared_guard);
      kc_world hi = kc_world_latest(rt);
      r->launches++;
      r->unpinned++;
      check_between(r, lo, hi, st, out, where);
    } else if (op < 97) {
      kc_status st = kc_context_reset(a->ctx);
      if (st) report_fail(r, "kc_context_reset: %s", kc_errmsg(rt));
      r->resets++;
    } else {
      pthread_rwlock_wrlock(&shared_guard);
      kc_status st = kc_context_reset(shared_ctx);
      pthread_rwlock_unlock(&shared_guard);
      if (st) report_fail(r, "kc_context_reset (shared): %s", kc_errmsg(rt));
      r->resets++;
    }
  }
  return NULL;
}

/* -------------------------------------------------------------- the test */

static void test_stress(void **state) {
  (void)state;
  double seconds = (double)rel_env_u64("KC_STRESS_SECONDS", 5);
  uint64_t seed = rel_env_u64("KC_STRESS_SEED", 1);
  kc_options opt;
  kc_options_init(&opt);
  opt.host_cc = rel_cc();
  opt.cache_disable = 1;
  rt = kct_runtime(&opt);
  model.cap = 1024;
  model.worlds = calloc(model.cap, sizeof *model.worlds);
  assert_non_null(model.worlds);
  /* world 1: nothing defined */
  model.worlds[1] = (world_state){-1, false, -1, -1, 0};
  model.latest = 1;
  assert_int_equal(kc_world_latest(rt), 1);
  /* worlds 2..4: a, b, then k: launches work from the start */
  world_state w = model.worlds[1];
  static const char *const first[] = {"stress_a", "stress_b", "k"};
  for (int i = 0; i < 3; i++) {
    char src[512];
    if (i == 0) w.a = 1;
    if (i == 1) w.b = 2;
    if (i == 2) w.kv = 3, w.uses_b = true;
    kc_world got = kct_define(rt, first[i], source_of(first[i], w, src, sizeof src));
    assert_int_equal(got, (kc_world)i + 2);
    record(got, w);
  }
  for (int h = 0; h < HANDLES; h++) handles[h] = kct_kernel(rt, "k", NULL);
  shared_ctx = kct_context(rt);
  atomic_store(&stop, 0);
  deadline = rel_now() + seconds;

  definer_arg d;
  memset(&d, 0, sizeof d);
  d.seed = seed * 0x9E3779B97F4A7C15ull + 1;
  /* a redefinition costs a compile on first use: leave launches time to hit */
  d.pause_us = kct_backend == KC_BACKEND_HOST ? 20000 : 200000;
  launcher_arg l[LAUNCHERS];
  memset(l, 0, sizeof l);
  for (int i = 0; i < LAUNCHERS; i++) {
    l[i].seed = seed * 0xD1B54A32D192ED03ull + (uint64_t)i + 7;
    l[i].ctx = kct_context(rt);
    KCT_OK(rt, kc_buffer_create(l[i].ctx, N * sizeof(int32_t), &l[i].own_buf));
    KCT_OK(rt, kc_buffer_create(shared_ctx, N * sizeof(int32_t), &l[i].shared_buf));
  }
  pthread_t td, tl[LAUNCHERS];
  assert_int_equal(pthread_create(&td, NULL, definer, &d), 0);
  for (int i = 0; i < LAUNCHERS; i++) assert_int_equal(pthread_create(&tl[i], NULL, launcher, &l[i]), 0);
  assert_int_equal(pthread_join(td, NULL), 0);
  for (int i = 0; i < LAUNCHERS; i++) assert_int_equal(pthread_join(tl[i], NULL), 0);

  kct_report_check("definer", &d.r.k);
  uint64_t launches = 0, pinned = 0, unpinned = 0, bound = 0, expected_errors = 0, resets = 0;
  for (int i = 0; i < LAUNCHERS; i++) {
    char who[32];
    snprintf(who, sizeof who, "launcher %d", i);
    kct_report_check(who, &l[i].r.k);
    launches += l[i].r.launches;
    pinned += l[i].r.pinned;
    unpinned += l[i].r.unpinned;
    bound += l[i].r.bound;
    expected_errors += l[i].r.errors_expected;
    resets += l[i].r.resets;
  }
  kc_stats s = kct_stats(rt);
  rel_summary("stress [%s]: %llu launches (%llu pinned, %llu unpinned, %llu with bound arguments, %llu "
              "expected failures) in %.0f s, "
              "%llu defines, %llu undefines, %llu worlds, %llu compiles, %llu links, %llu resets, "
              "%llu fast hits, seed %llu, 0 mismatches",
              kct_backend_name, (unsigned long long)launches, (unsigned long long)pinned,
              (unsigned long long)unpinned, (unsigned long long)bound, (unsigned long long)expected_errors,
              seconds, (unsigned long long)d.r.defines, (unsigned long long)d.r.undefines,
              (unsigned long long)model.latest, (unsigned long long)s.compiles, (unsigned long long)s.links,
              (unsigned long long)resets, (unsigned long long)s.fast_hits, (unsigned long long)seed);
  /* launches whose result was compared with the model, not only expected errors */
  assert_true(launches > expected_errors);
  assert_true(bound > 0);
  assert_true(pinned > 0 && unpinned > 0);
  /* the definer made worlds while the launchers ran (the setup made 1..4) */
  assert_true(d.r.defines > 0);
  assert_true(model.latest > 4);
  kct_destroy(rt);
  free(model.worlds);
  model.worlds = NULL;
}

KCT_MAIN(KCT_TEST(test_stress))
