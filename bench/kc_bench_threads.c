/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_threads.c -- what threads that launch at the same time cost
 * each other on the host backend (the cached kc_launch of an empty kernel,
 * grid 1x1, no arguments).
 *
 * The launch path writes one thing: the relaxed statistics counter of the
 * context it launches in (kc_stats.fast_hits). Threads that launch in one
 * context therefore write one cache line; threads that launch in contexts
 * of their own do not. This benchmark runs, in one process and
 * interleaved, T threads each launching N times
 *   shared   into one context (one kernel handle, one context), and
 *   own      each into a context of its own (one kernel handle),
 * and prints the median nanoseconds per launch per thread, and the ratio
 * shared / own. T = 1 is the reference: the two layouts do the same there.
 *
 * usage: kc_bench_threads [--json] [--threads T] [--launches N] [--reps R]
 */
#define KCB_PROG "kc_bench_threads"
#include "kc_bench_util.h"

#include <pthread.h>

enum { MAX_THREADS = 16 };

static kc_kernel *kern;
static int launches = 2000000;
static pthread_barrier_t start;

typedef struct {
  kc_context *ctx;
  double ns; /* per launch */
} worker;

static void *run(void *arg) {
  worker *w = arg;
  const kc_dim3 one = {1, 1, 1};
  pthread_barrier_wait(&start);
  double t0 = now_ns();
  for (int i = 0; i < launches; i++)
    if (kc_launch(kern, w->ctx, &one, &one, NULL, 0)) kcb_die("kc_launch", KC_ELAUNCH);
  w->ns = (now_ns() - t0) / launches;
  return NULL;
}

/* One round: t threads, each into ctxs[i] (all the same for `shared`).
 * Returns the mean over threads of their nanoseconds per launch. */
static double round_of(kc_context **ctxs, int t) {
  pthread_t th[MAX_THREADS];
  worker w[MAX_THREADS];
  pthread_barrier_init(&start, NULL, (unsigned)t);
  for (int i = 0; i < t; i++) {
    w[i] = (worker){ctxs[i], 0};
    if (pthread_create(&th[i], NULL, run, &w[i])) kcb_die("pthread_create", KC_EBACKEND);
  }
  double sum = 0;
  for (int i = 0; i < t; i++) {
    pthread_join(th[i], NULL);
    sum += w[i].ns;
  }
  pthread_barrier_destroy(&start);
  return sum / t;
}

int main(int argc, char **argv) {
  bool json = false;
  int maxt = 2, reps = 7;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) maxt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--launches") && i + 1 < argc) launches = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--json] [--threads T] [--launches N] [--reps R]\n", KCB_PROG);
      return 2;
    }
  }
  if (maxt < 1 || maxt > MAX_THREADS || launches < 1 || reps < 1 || reps > 64) {
    fprintf(stderr, "%s: threads 1..%d, launches >= 1, reps 1..64\n", KCB_PROG, MAX_THREADS);
    return 2;
  }
  kcb_require_backend(KC_BACKEND_HOST);
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  kc_context *ctxs[MAX_THREADS], *shared[MAX_THREADS];
  kc_runtime *rt = kcb_main_runtime(&o, &ctxs[0]);
  for (int i = 1; i < maxt; i++) KCB_CHECK(kc_context_create(rt, 0, &ctxs[i]));
  for (int i = 0; i < maxt; i++) shared[i] = ctxs[0];
  KCB_CHECK(kc_define(rt, "empty", "KC_KERNEL void empty(void) {}", NULL));
  KCB_CHECK(kc_kernel_create(rt, "empty", NULL, &kern));
  const kc_dim3 one = {1, 1, 1};
  for (int i = 0; i < maxt; i++) KCB_CHECK(kc_launch(kern, ctxs[i], &one, &one, NULL, 0)); /* links */

  if (json) printf("{\"launches\": %d, \"reps\": %d, \"rows\": [", launches, reps);
  else
    printf("kc_launch of an empty kernel, T threads at once (medians of %d rounds, ns per launch)\n"
           "threads    shared context    own contexts    shared/own\n",
           reps);
  for (int t = 1; t <= maxt; t++) {
    double s[64], w[64];
    for (int r = 0; r < reps; r++) { /* interleaved: the load changes both alike */
      s[r] = round_of(shared, t);
      w[r] = round_of(ctxs, t);
    }
    double ms = median(s, reps), mw = median(w, reps);
    if (json)
      printf("%s{\"threads\": %d, \"shared_ns\": %.2f, \"own_ns\": %.2f, \"ratio\": %.3f}", t > 1 ? ", " : "",
             t, ms, mw, ms / mw);
    else printf("%7d    %14.2f    %12.2f    %10.3f\n", t, ms, mw, ms / mw);
  }
  kc_stats st;
  kc_stats_get(rt, &st);
  if (json) printf("], \"fast_hits\": %llu}\n", (unsigned long long)st.fast_hits);
  else
    printf("kc_stats.fast_hits %llu (a lower bound when threads share a context)\n",
           (unsigned long long)st.fast_hits);
  kc_kernel_destroy(kern);
  kc_runtime_destroy(rt);
  return 0;
}
