/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_store_scale -- `kc_bench_store --scale`: the disk store's costs
 * at a size (100,000 entries unless --entries says otherwise), through the
 * store's own functions (src/cache) and the kcache command:
 *
 *   populate        N entry files written directly (real entries, made by
 *                   the codec, a 1 KiB artifact each, last uses 1 ms apart)
 *   index build     the first reading of the index: every bucket rebuilt
 *                   from its directory (what a store made before the index
 *                   costs once: a readdir and an lstat per entry)
 *   summary build   the first reading of the store's totals after that:
 *                   each entry's backend read (once, as `kcache stats` does)
 *   index read      reading it again (256 files, each checked)
 *   summary read    the store's totals from the summary (one file and a
 *                   stat per bucket: what `kcache stats` reads)
 *   hit, miss       kc__cache_fetch of a present key (verify says GOOD: the
 *                   backend's trial load is not the store's cost) and of an
 *                   absent one (its kc__cache_finish without a result
 *                   included: the lock released)
 *   write           kc__cache_fetch + kc__cache_finish of a new entry, the
 *                   store under its bound
 *   write past      the same with the bound set just below what the store
 *   the bound       holds: the write that crosses it evicts in the calling
 *                   thread (at most KC__EVICT_BATCH entries)
 *   eviction        kc__store_evict of KC__EVICT_BATCH entries alone, as
 *                   the write past the bound runs it (without the write's
 *                   own fsyncs)
 *   stats, show,    `kcache stats --json`, `kcache show KEY` (a full key),
 *   explain         `show PREFIX` (its first 8 hex digits), `show NAME`
 *                   (entries are ten specializations of each of N/10
 *                   kernels: the newest of ten) and `explain KEY` (against
 *                   the other nine) as processes, start to exit
 *
 * Each is a median over --runs runs (hits and misses: over 200 lookups of
 * random keys). Target: each under 50 ms at 100,000 entries.
 */
#include "cache/cache.h"
#include "kc_test_parts.h" /* tests/support: the key parts of synthetic entries */
#include <kcache.h>

#define KCB_PROG "kc_bench_store"
#include "kc_bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int kcb_store_scale(int argc, char **argv);

/* The parts of entry i (its key is made from them, as the glue would):
 * kernel k<i/10> with parameters I=<i>, ten specializations per kernel.
 * buf holds the parameters, then the name. */
static void parts_of(size_t i, char *buf, size_t len, kc__key_parts *p) {
  kct_entry_parts(i, "kc_bench_store --scale", buf, len, p);
  size_t used = strlen(buf) + 1;
  snprintf(buf + used, len - used, "k%zu", i / 10);
  p->entry = buf + used;
}

/* Writes entry i with last use t (ns); its size into *size. */
static bool put_entry(const char *vdir, size_t i, int64_t t, uint64_t *size) {
  char params[64], path[4200];
  kc__key_parts p;
  parts_of(i, params, sizeof params, &p);
  static uint8_t artifact[1024];
  static const uint64_t sig[1] = {(uint64_t)KC_ARG_BUFFER << 32};
  memset(artifact, (int)(i & 0xff), sizeof artifact);
  kc__entry e;
  memset(&e, 0, sizeof e);
  kc__store_key(&p, e.key);
#define KC__X(name, tag, first) e.name = p.name;
  KC__IDENTITY_FIELDS(KC__X)
#undef KC__X
  e.created_ns = (uint64_t)t;
  e.nsig = 1;
  e.sig = (uint64_t *)sig;
  e.artifact = artifact;
  e.artifact_size = sizeof artifact;
  e.log = "";
  void *img;
  size_t n;
  if (kc__entry_encode(NULL, &e, &img, &n) != KC_OK) return false;
  kc__store_path(vdir, e.key, ".kce", path, sizeof path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write(fd, img, n) == (ssize_t)n;
  struct timespec ts[2] = {{t / 1000000000, t % 1000000000}, {t / 1000000000, t % 1000000000}};
  ok = ok && futimens(fd, ts) == 0;
  if (fd >= 0) close(fd);
  free(img);
  *size = n;
  return ok;
}

static bool populate(const char *root, const char *vdir, size_t n, uint64_t *bytes) {
  int err;
  if (!kc__store_make_dirs(vdir, 0700, &err)) return false;
  for (int b = 0; b < 256; b++) {
    char dir[4300];
    snprintf(dir, sizeof dir, "%.4200s/%02x", vdir, b);
    mkdir(dir, 0700);
  }
  int64_t t0 = (int64_t)kc__realtime_ns() - (int64_t)n * 1000000 - 3600ll * 1000000000;
  *bytes = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t size;
    if (!put_entry(vdir, i, t0 + (int64_t)i * 1000000, &size)) {
      fprintf(stderr, "kc_bench_store: cannot write entry %zu in %s: %s\n", i, root, strerror(errno));
      return false;
    }
    *bytes += size;
  }
  kc__store_counters_add(vdir, (int64_t)*bytes, (int64_t)n, 0, 0, 0, 0, 0, true, NULL);
  return true;
}

static kc__verdict verify_good(void *ud, const kc__entry *e) {
  (void)e;
  ++*(int *)ud;
  return KC__ENTRY_GOOD;
}

static kc__cache *open_cache(const char *root, uint64_t max) { return kct_store_open(root, max); }

/* One lookup of entry i; its time (ns). A miss is finished: with a new
 * entry when write, else without one. */
static double lookup(kc__cache *c, size_t i, bool write, int *good) {
  char params[64];
  kc__key_parts p;
  parts_of(i, params, sizeof params, &p);
  static uint8_t artifact[1024];
  static const uint64_t sig[1] = {(uint64_t)KC_ARG_BUFFER << 32};
  kc__cache_result res = {1000, NULL, 0, 1, sig, artifact, sizeof artifact, "", 0};
  kc__cache_txn txn;
  double t0 = now_ns();
  if (!kc__cache_fetch(c, &p, verify_good, good, &txn)) kc__cache_finish(c, &txn, write ? &p : NULL, &res);
  return now_ns() - t0;
}

/* A command's time (ns), its output to /dev/null; -1 if it failed. */
static double run_cli(const char *cli, const char *root, const char *a, const char *b) {
  double t0 = now_ns();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 1);
    execl(cli, cli, "--dir", root, a, b, (char *)NULL);
    _exit(127);
  }
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) return -1;
  return now_ns() - t0;
}

typedef struct scale_result {
  size_t n;
  uint64_t bytes;
  double populate, index_build, index_read, summary_build, summary, hit, miss, write, write_past, evict,
      stats, show, show_prefix, show_name, explain;
  uint64_t evicted_per_crossing, hits_seen;
} scale_result;

static double time_index(const char *vdir, size_t *n) {
  kc__index_set s;
  double t0 = now_ns();
  if (!kc__index_get_all(NULL, vdir, true, &s)) return -1;
  double t = now_ns() - t0;
  *n = s.n;
  kc__index_set_free(NULL, &s);
  return t;
}

/* The store's totals from its summary (what `kcache stats` reads). */
static double time_summary(const char *vdir, uint64_t *count) {
  kc__index_summary t;
  double t0 = now_ns();
  if (!kc__index_summarize(NULL, vdir, true, &t)) return -1;
  double d = now_ns() - t0;
  *count = t.count;
  return d;
}

/* Lookups of random present keys (hits) and of absent ones (misses). */
static void measure_lookups(const char *root, scale_result *r) {
  kc__cache *c = open_cache(root, UINT64_MAX / 2);
  enum { L = 200 };
  double hit[L], miss[L];
  int good = 0;
  srand(7);
  for (int i = 0; i < L; i++) hit[i] = lookup(c, (size_t)rand() % r->n, false, &good);
  for (int i = 0; i < L; i++) miss[i] = lookup(c, r->n * 4 + (size_t)i, false, &good);
  r->hits_seen = (uint64_t)good;
  r->hit = median(hit, L);
  r->miss = median(miss, L);
  kc__cache_close(c);
}

/* Writes under the bound, then writes that each cross it. */
static void measure_writes(const char *root, const char *vdir, int runs, size_t *next, scale_result *r) {
  double w[32], wp[32], ev[32];
  int good = 0;
  kc__cache *c = open_cache(root, UINT64_MAX / 2);
  for (int i = 0; i < runs; i++) w[i] = lookup(c, (*next)++, true, &good);
  kc__cache_close(c);
  uint64_t evicted = 0;
  for (int i = 0; i < runs; i++) {
    kc__store_counters k;
    kc__store_counters_read(vdir, &k);
    c = open_cache(root, k.bytes); /* this write takes it past the bound */
    wp[i] = lookup(c, (*next)++, true, &good);
    kc_stats s;
    memset(&s, 0, sizeof s);
    kc__cache_stats(c, &s);
    evicted += s.disk_evictions;
    kc__cache_close(c);
    /* the eviction alone, as that write ran it (at most KC__EVICT_BATCH entries) */
    kc__gc_result g;
    double t0 = now_ns();
    kc__store_evict(NULL, vdir, 0, KC__EVICT_BATCH, &g);
    ev[i] = now_ns() - t0;
  }
  r->write = median(w, runs);
  r->write_past = median(wp, runs);
  r->evicted_per_crossing = evicted / (uint64_t)runs;
  r->evict = median(ev, runs);
}

/* `kcache show` of the entry written last: the evictions of measure_writes
 * take the least recently used, which at 1,000 entries reach any key of
 * the populated ones (show then failed, and the target was missed). */
static void measure_cli(const char *cli, const char *root, int runs, size_t last, scale_result *r) {
  double st[32], sh[32], sp[32], sn[32], ex[32];
  char params[64], key[33], prefix[9];
  kc__key_parts p;
  parts_of(last, params, sizeof params, &p);
  uint8_t k[16];
  kc__store_key(&p, k);
  kc__store_hex(k, key);
  snprintf(prefix, sizeof prefix, "%.8s", key);
  for (int i = 0; i < runs; i++) {
    st[i] = run_cli(cli, root, "--json", "stats");
    sh[i] = run_cli(cli, root, "show", key);
    sp[i] = run_cli(cli, root, "show", prefix);
    sn[i] = run_cli(cli, root, "show", p.entry); /* the newest of its ten */
    ex[i] = run_cli(cli, root, "explain", key); /* against the other nine */
  }
  r->stats = median(st, runs);
  r->show = median(sh, runs);
  r->show_prefix = median(sp, runs);
  r->show_name = median(sn, runs);
  r->explain = median(ex, runs);
}

static void report(const scale_result *r, int runs, bool json) {
  double worst = r->write_past;
  const double all[] = {r->summary, r->hit,  r->miss,        r->write,     r->evict,
                        r->stats,   r->show, r->show_prefix, r->show_name, r->explain};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i] > worst || all[i] < 0) worst = all[i] < 0 ? 1e18 : all[i];
  bool meets = worst < 50e6 && r->hits_seen > 0;
  if (json) {
    printf(
        "{\"entries\": %zu, \"bytes\": %llu, \"runs\": %d, \"populate_s\": %.2f, \"index_build_ms\": %.2f, "
        "\"index_read_ms\": %.3f, \"summary_build_ms\": %.2f, \"summary_read_ms\": %.3f,\n \"hit_us\": %.1f, "
        "\"miss_us\": %.1f, "
        "\"write_ms\": %.3f, "
        "\"write_past_bound_ms\": %.3f, \"evict_ms\": %.3f, \"evicted_per_crossing\": %llu,\n "
        "\"stats_cli_ms\": %.2f, "
        "\"show_key_cli_ms\": %.2f, \"show_prefix_cli_ms\": %.2f, \"show_name_cli_ms\": %.2f, "
        "\"explain_cli_ms\": %.2f, \"target_ms\": 50, \"meets_target\": %s}\n",
        r->n, (unsigned long long)r->bytes, runs, r->populate / 1e9, r->index_build / 1e6,
        r->index_read / 1e6, r->summary_build / 1e6, r->summary / 1e6, r->hit / 1e3, r->miss / 1e3,
        r->write / 1e6, r->write_past / 1e6, r->evict / 1e6, (unsigned long long)r->evicted_per_crossing,
        r->stats / 1e6, r->show / 1e6, r->show_prefix / 1e6, r->show_name / 1e6, r->explain / 1e6,
        meets ? "true" : "false");
    return;
  }
  printf("kcache disk store at %zu entries (%.1f MiB), median of %d\n\n", r->n, (double)r->bytes / 1048576.0,
         runs);
  printf("populate (direct writes)      %9.2f s\n", r->populate / 1e9);
  printf(
      "index build (first read)      %9.2f ms  (once, for a store made without the index: no entry opened)\n",
      r->index_build / 1e6);
  printf("summary build (first stats)   %9.2f ms  (once: each entry's backend read)\n",
         r->summary_build / 1e6);
  printf("index read (all 256 buckets)  %9.3f ms\n", r->index_read / 1e6);
  printf("summary read (stats' totals)  %9.3f ms\n", r->summary / 1e6);
  printf("hit (fetch)                   %9.1f us\n", r->hit / 1e3);
  printf("miss (fetch + finish)         %9.1f us\n", r->miss / 1e3);
  printf("write under the bound         %9.3f ms\n", r->write / 1e6);
  printf("write past the bound          %9.3f ms  (%llu entries evicted by it)\n", r->write_past / 1e6,
         (unsigned long long)r->evicted_per_crossing);
  printf("eviction alone (%u entries)    %9.3f ms  (kc__store_evict, as that write runs it)\n",
         KC__EVICT_BATCH, r->evict / 1e6);
  printf("kcache stats --json           %9.2f ms\n", r->stats / 1e6);
  printf("kcache show KEY               %9.2f ms\n", r->show / 1e6);
  printf("kcache show PREFIX (8 digits) %9.2f ms\n", r->show_prefix / 1e6);
  printf("kcache show NAME              %9.2f ms  (the newest of its 10 specializations)\n",
         r->show_name / 1e6);
  printf("kcache explain KEY            %9.2f ms  (against the other 9 of its kernel)\n", r->explain / 1e6);
  printf("\ntarget: each under 50 ms: %s\n", meets ? "met" : "MISSED");
}

int kcb_store_scale(int argc, char **argv) {
  bool json = false;
  int runs = 7;
  size_t n = 100000;
  const char *cli = NULL;
#ifdef KC_CLI
  cli = KC_CLI;
#endif
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--scale")) continue;
    else if (!strcmp(argv[i], "--quick")) runs = 3;
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--entries") && i + 1 < argc) n = (size_t)strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--cli") && i + 1 < argc) cli = argv[++i];
    else {
      fprintf(stderr, "usage: %s --scale [--json] [--quick] [--runs N] [--entries N] [--cli PATH]\n",
              argv[0]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  if (runs > 32) runs = 32;
  if (n < 16) n = 16;
  if (!cli) {
    fprintf(stderr, "kc_bench_store: --cli PATH: the kcache command\n");
    return 2;
  }
  char root[4096], vdir[4200];
  if (!kcb_mkdtemp(root, sizeof root, "kc-bench-store-scale", NULL)) return 1;
  kc__store_vdir(root, vdir, sizeof vdir);
  scale_result r;
  memset(&r, 0, sizeof r);
  r.n = n;
  double t0 = now_ns();
  if (!populate(root, vdir, n, &r.bytes)) {
    kcb_rmrf(root);
    return 1;
  }
  r.populate = now_ns() - t0;
  size_t seen = 0;
  r.index_build = time_index(vdir, &seen);
  r.index_read = time_index(vdir, &seen);
  uint64_t counted = 0;
  r.summary_build = time_summary(vdir, &counted); /* the first reads every entry's backend once */
  r.summary = time_summary(vdir, &counted);
  if (counted != n)
    fprintf(stderr, "kc_bench_store: the summary counts %llu entries, not %zu\n", (unsigned long long)counted,
            n);
  if (seen != n) fprintf(stderr, "kc_bench_store: the index holds %zu entries, not %zu\n", seen, n);
  measure_lookups(root, &r);
  size_t next = n * 2;
  measure_writes(root, vdir, runs, &next, &r);
  measure_cli(cli, root, runs, next - 1, &r);
  kcb_rmrf(root);
  report(&r, runs, json);
  return seen == n ? 0 : 1;
}
