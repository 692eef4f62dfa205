/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_hoststream.c -- the host backend's streams (issue 29): what a
 * launch on a kc_stream costs the caller, how long one takes to come back
 * through kc_stream_sync, and what two streams give on two cores, in one
 * process and one run:
 *
 *   queue       ns per launch of a one-item kernel in bursts of 1,000
 *               launches: the calls alone (what the caller spends), and
 *               the calls and one kc_stream_sync after them (what the
 *               queue gets through); kc_launch_ex on the context's own
 *               queue (it runs the kernel in the call), on a kc_stream (it
 *               queues the launch; the stream's thread runs it), and the
 *               same on an OpenCL stream (PoCL's in-order queue,
 *               clEnqueueNDRangeKernel behind it) where OpenCL is installed
 *   round trip  us for one launch on a stream and its kc_stream_sync:
 *               after a pause (the stream's thread asleep: it is woken,
 *               runs the launch and wakes the caller), back to back
 *               (the thread went to sleep just before), and after the
 *               thread ended idle (KC_HOST_STREAM_IDLE=0.001 and a pause
 *               of 5 ms: the launch starts a thread again)
 *   overlap     two chains of compute-bound one-group launches (the worker
 *               pool off: host_threads 1, so each launch is one thread's),
 *               one after the other on the context's queue, against each
 *               chain on a stream of its own at once: the second core's
 *               share, as a speedup
 *
 * Medians of --reps rounds, after a warm-up; results checked.
 * Usage: kc_bench_hoststream [--reps N] [--no-opencl]
 */
#define KCB_PROG "kc_bench_hoststream"
#include "kc_bench_util.h"

#include <unistd.h>

static const char SRC_TINY[] = "KC_KERNEL void tiny(KC_GLOBAL int *y, int v) { y[kc_global_id(0)] += v; }\n";
/* n dependent multiply-adds per item; one group of 256 items */
static const char SRC_WORK[] = "KC_KERNEL void work(KC_GLOBAL float *y, float a, int n) {\n"
                               "  size_t i = kc_global_id(0);\n"
                               "  float v = y[i];\n"
                               "  for (int k = 0; k < n; k++) v = v * a + 0.5f;\n"
                               "  y[i] = v;\n}\n";

enum { BURST = 1000, CHAIN = 40, WORK_ITEMS = 256 };
static int reps = 11;

static kc_runtime *open_rt(kc_backend_kind be, uint32_t threads, kc_context **ctx) {
  kc_options o;
  kcb_options_uncached(&o, be);
  if (be == KC_BACKEND_HOST) {
    o.host_cc = "cc";
    o.host_threads = threads;
  }
  return kcb_main_runtime(&o, ctx);
}

/* A runtime of the backend (no worker pool) with tiny compiled (k), a
 * one-int buffer of 0 (y), a stream if asked (s, else NULL) and a
 * configuration of one item on it (c). */
typedef struct tiny_setup {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *y;
  kc_stream *s;
  kc_launch_config c;
} tiny_setup;

static void tiny_open(tiny_setup *t, kc_backend_kind be, bool on_stream) {
  t->rt = open_rt(be, 1, &t->ctx);
  KCB_CHECK(kc_define(t->rt, "tiny", SRC_TINY, NULL));
  KCB_CHECK(kc_kernel_create(t->rt, "tiny", NULL, &t->k));
  KCB_CHECK(kc_buffer_create(t->ctx, sizeof(int), &t->y));
  KCB_CHECK(kc_buffer_write(t->y, 0, &(int){0}, sizeof(int)));
  t->s = NULL;
  if (on_stream) KCB_CHECK(kc_stream_create(t->ctx, &t->s));
  kc_launch_config_init(&t->c);
  t->c.stream = t->s;
}

static void tiny_close(tiny_setup *t) {
  if (t->s) kc_stream_destroy(t->s);
  kc_runtime_destroy(t->rt);
  kcb_rt = NULL;
}

/* ns per launch of tiny on a stream (or the context's queue), bursts of
 * BURST: the calls alone in *calls, with the sync after them returned;
 * the result checked. */
static double queue_ns(kc_backend_kind be, bool on_stream, double *calls) {
  tiny_setup ts;
  tiny_open(&ts, be, on_stream);
  int v = 1;
  kc_arg args[] = {KC_ARG_BUF(ts.y), KC_ARG_VAL(v)};
  double t[64], tc[64];
  long launched = 0;
  for (int r = -2; r < reps; r++) {
    double t0 = now_ns();
    for (int i = 0; i < BURST; i++) KCB_CHECK(kc_launch_ex(ts.k, ts.ctx, &ts.c, args, 2));
    double t1 = now_ns();
    KCB_CHECK(ts.s ? kc_stream_sync(ts.s) : kc_context_finish(ts.ctx));
    if (r >= 0) t[r] = (now_ns() - t0) / BURST, tc[r] = (t1 - t0) / BURST;
    launched += BURST;
  }
  *calls = median(tc, reps);
  int got = 0;
  KCB_CHECK(kc_buffer_read(ts.y, 0, &got, sizeof got));
  if (got != (int)launched) {
    fprintf(stderr, "%s: %ld launches of tiny on %s added up to %d\n", KCB_PROG, launched,
            kc_runtime_backend(ts.rt), got);
    exit(1);
  }
  tiny_close(&ts);
  return median(t, reps);
}

/* us for a launch on a host stream and its sync: after a pause of 200 us
 * (the stream's thread asleep), back to back (the thread finished the
 * last launch just before), or after the thread ended idle. */
typedef enum { RT_ASLEEP, RT_BACK_TO_BACK, RT_ENDED } rt_mode;
static double round_trip_us(rt_mode mode) {
  tiny_setup ts;
  const char *was = getenv("KC_HOST_STREAM_IDLE");
  char keep[64] = "";
  if (was) snprintf(keep, sizeof keep, "%s", was);
  if (mode == RT_ENDED) setenv("KC_HOST_STREAM_IDLE", "0.001", 1);
  tiny_open(&ts, KC_BACKEND_HOST, true);
  if (!was) unsetenv("KC_HOST_STREAM_IDLE");
  else setenv("KC_HOST_STREAM_IDLE", keep, 1); /* the caller's, for the rest of the run */
  int v = 1;
  kc_arg args[] = {KC_ARG_BUF(ts.y), KC_ARG_VAL(v)};
  enum { N = 201 };
  double t[N];
  for (int r = -20; r < N; r++) {
    if (mode == RT_ASLEEP) usleep(200); /* the stream's thread asleep, as after any pause */
    if (mode == RT_ENDED) usleep(5000); /* 5x its idle time: the thread has ended */
    double t0 = now_ns();
    KCB_CHECK(kc_launch_ex(ts.k, ts.ctx, &ts.c, args, 2));
    KCB_CHECK(kc_stream_sync(ts.s));
    if (r >= 0) t[r] = (now_ns() - t0) / 1e3;
  }
  tiny_close(&ts);
  return median(t, N);
}

/* ms for two chains of CHAIN work launches: sequential on the context's
 * queue (streams false) or each on its own stream. *one: a single launch's
 * ms (sequential only). */
static double overlap_ms(bool streams, int n, double *one) {
  kc_context *ctx;
  kc_runtime *rt = open_rt(KC_BACKEND_HOST, 1, &ctx);
  KCB_CHECK(kc_define(rt, "work", SRC_WORK, NULL));
  kc_kernel *k;
  KCB_CHECK(kc_kernel_create(rt, "work", NULL, &k));
  kc_buffer *y[2];
  float init[WORK_ITEMS];
  for (int i = 0; i < WORK_ITEMS; i++) init[i] = (float)i / WORK_ITEMS;
  kc_stream *s[2] = {NULL, NULL};
  for (int j = 0; j < 2; j++) {
    KCB_CHECK(kc_buffer_create(ctx, sizeof init, &y[j]));
    if (streams) KCB_CHECK(kc_stream_create(ctx, &s[j]));
  }
  float a = 0.999f;
  kc_launch_config c[2];
  kc_arg args[2][3];
  for (int j = 0; j < 2; j++) {
    kc_launch_config_init(&c[j]);
    c[j].block = (kc_dim3){WORK_ITEMS, 1, 1};
    c[j].stream = s[j];
    args[j][0] = KC_ARG_BUF(y[j]), args[j][1] = KC_ARG_VAL(a), args[j][2] = KC_ARG_VAL(n);
  }
  double t[64], t1[64];
  for (int r = -1; r < reps; r++) {
    for (int j = 0; j < 2; j++) KCB_CHECK(kc_buffer_write(y[j], 0, init, sizeof init));
    double t0 = now_ns();
    for (int i = 0; i < CHAIN; i++)
      for (int j = 0; j < 2; j++) KCB_CHECK(kc_launch_ex(k, ctx, &c[j], args[j], 3));
    KCB_CHECK(kc_context_finish(ctx));
    if (r >= 0) t[r] = (now_ns() - t0) / 1e6;
    if (!streams && r >= 0) {
      t0 = now_ns();
      KCB_CHECK(kc_launch_ex(k, ctx, &c[0], args[0], 3));
      t1[r] = (now_ns() - t0) / 1e6;
    }
  }
  /* both chains gave what the same loop gives here (the last round; the
   * sequential one ran one more launch of chain 0) */
  float got[WORK_ITEMS];
  KCB_CHECK(kc_buffer_read(y[1], 0, got, sizeof got));
  for (int i = 0; i < WORK_ITEMS; i += 37) {
    float v = init[i];
    for (int l = 0; l < CHAIN; l++)
      for (int m = 0; m < n; m++) v = v * a + 0.5f;
    if (!(got[i] > v - 1e-3f * (v + 1) && got[i] < v + 1e-3f * (v + 1))) {
      fprintf(stderr, "%s: work [%d] = %g, expected %g\n", KCB_PROG, i, got[i], v);
      exit(1);
    }
  }
  for (int j = 0; j < 2; j++)
    if (s[j]) kc_stream_destroy(s[j]);
  kc_runtime_destroy(rt);
  kcb_rt = NULL;
  if (one) *one = streams ? 0 : median(t1, reps);
  return median(t, reps);
}

int main(int argc, char **argv) {
  bool opencl = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-opencl")) opencl = false;
    else {
      fprintf(stderr, "usage: %s [--reps N] [--no-opencl]\n", KCB_PROG);
      return 2;
    }
  }
  if (reps < 1 || reps > 64) reps = 11;
  kcb_require_backend(KC_BACKEND_HOST);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("%s: %ld cores, medians of %d rounds\n\n", KCB_PROG, cores, reps);

  double c_ctx, c_stream, c_cl = -1;
  double q_ctx = queue_ns(KC_BACKEND_HOST, false, &c_ctx),
         q_stream = queue_ns(KC_BACKEND_HOST, true, &c_stream);
  double q_cl = -1;
  char why[256];
  if (opencl && !kcb_backend_missing(KC_BACKEND_OPENCL, NULL, why, sizeof why))
    q_cl = queue_ns(KC_BACKEND_OPENCL, true, &c_cl);
  printf(
      "queue: ns per launch of a one-item kernel, bursts of %d: the calls alone / with a sync after them\n",
      BURST);
  printf("  host, the context's queue (runs in the call)   %8.0f / %8.0f\n", c_ctx, q_ctx);
  printf("  host, a kc_stream (queued, run by its thread)  %8.0f / %8.0f\n", c_stream, q_stream);
  if (q_cl >= 0) printf("  OpenCL (PoCL), a kc_stream                     %8.0f / %8.0f\n", c_cl, q_cl);
  else printf("  OpenCL: not measured (%s)\n", opencl ? why : "--no-opencl");

  printf("\nround trip: us for a launch on a host stream and its kc_stream_sync (medians)\n");
  printf("  after a pause of 200 us (the stream's thread asleep)   %6.1f\n", round_trip_us(RT_ASLEEP));
  printf("  back to back (the thread finished the last one)        %6.2f\n", round_trip_us(RT_BACK_TO_BACK));
  printf("  after the thread ended idle (a new thread starts)      %6.1f\n", round_trip_us(RT_ENDED));

  /* the work per launch: about a millisecond on one core */
  int n = 4096;
  double one = 0;
  double seq = overlap_ms(false, n, &one);
  double par = overlap_ms(true, n, NULL);
  printf(
      "\noverlap: two chains of %d one-group launches (%d items, %d multiply-adds each; %.2f ms a launch),\n",
      CHAIN, WORK_ITEMS, n, one);
  printf("the worker pool off (host_threads 1)\n");
  printf("  one after the other, the context's queue   %8.2f ms\n", seq);
  printf("  each chain on its own kc_stream            %8.2f ms   speedup %.2fx\n", par, seq / par);
  return 0;
}
