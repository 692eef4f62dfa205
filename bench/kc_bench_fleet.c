/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_fleet -- the remote tier at the scale of a fleet (issue 25): N
 * nodes (processes, each with its own empty disk store) cold-start the same
 * K kernels at once through one Redis, for N = 1, 2, 4, ... 64.
 *
 * Each node makes its runtime and defines the typical kernel (VARIANT=1..K
 * are the K kernels), says it is ready, and waits; the parent releases them
 * all together (a pipe closed) and each launches the K kernels in the same
 * order, timing every first launch (kc_kernel_create + kc_launch + finish),
 * and checks the results. Per node count it reports:
 *
 *   compiles      in total across the fleet (single flight's goal: K), with
 *                 the remote hits, the lookups that failed (a deadline
 *                 missed, mostly) and those the breaker skipped
 *   wall          release to the last node done, against one node compiling
 *                 the K kernels alone without the tier (x alone)
 *   latency       median and worst first launch over every node's kernels
 *   commands      Redis commands per kernel: the server's commandstats
 *                 before and after (redis-cli INFO; its own INFO calls left
 *                 out), divided by K
 *
 * It runs the whole list once per deadline of --timeouts (default
 * "default,250"): "default" leaves every remote setting at kcache's default
 * (KC_REMOTE_TIMEOUT_MS and the others unset); a number sets
 * KC_REMOTE_TIMEOUT_MS for the nodes. Every run has a key prefix of its own,
 * so every run starts cold.
 *
 * Starts its own redis-server on a free loopback port and kills it at the
 * end, unless --url names a server: any URL kcache takes (kc_options
 * .remote_url, as $KC_REMOTE), so that a cluster's or a TLS server's can be
 * measured the same way; the keys it wrote there are removed with `kcache
 * remote clear --prefix`. The command counts come from the one server the
 * URL names (with a cluster: from that node only).
 *
 * --json prints the figures as one JSON line first (bench/plot_fleet.py
 * draws it), then the table. Exit status 1 when a node failed (a launch,
 * or a wrong result) and, with --check, when a fleet with a deadline set
 * by --timeouts compiled more than K times (tests/scenario's short run);
 * 77 when redis-server, the tier or the backend cannot be used here.
 *
 * --kill PID sends SIGKILL to process PID (a Redis Cluster's primary, from
 * bench/redis-cluster.sh) --kill-after MS (default 200) after the release of
 * the first run: a failover in the middle of a cold start.
 *
 * Usage: kc_bench_fleet [--json] [--check] [--nodes "1 2 4 ..."] [--kernels K]
 *                       [--backend tcc|host|opencl] [--timeouts "default,250"] [--url redis://...]
 *                       [--kill PID [--kill-after MS]]
 */
#include <kcache.h>

#define KCB_PROG "kc_bench_fleet"
#include "kc_bench_util.h"

#include <ctype.h>

typedef struct bconf {
  const char *label;
  kc_backend_kind kind;
  const char *cc; /* host backend: the compiler */
  const char *compiler;
} bconf;

static const bconf confs[] = {
    {"tcc", KC_BACKEND_HOST, "tcc", "tcc"},
    {"host", KC_BACKEND_HOST, "cc", "cc -O2"},
    {"opencl", KC_BACKEND_OPENCL, NULL, "OpenCL"},
};

static const bconf *conf_named(const char *label) {
  for (size_t i = 0; i < sizeof confs / sizeof *confs; i++)
    if (!strcmp(confs[i].label, label)) return &confs[i];
  return NULL;
}

/* The counters a node sends back (kc_stats' names). */
#define NODE_COUNTERS(X) \
  X(compiles) \
  X(remote_hits) \
  X(remote_misses) \
  X(remote_lookups) \
  X(remote_lock_waits) \
  X(remote_lookup_errors) \
  X(remote_lookup_skips) \
  X(remote_errors) \
  X(remote_rejects) \
  X(disk_hits)

typedef struct counters {
#define X(f) unsigned long long f;
  NODE_COUNTERS(X)
#undef X
} counters;

/* ------------------------------------------------------------------ a node */

/* --node LABEL DIR URL PREFIX K GOFD: a node on its own disk store DIR with
 * the tier at URL ("-": none) under PREFIX. Prints "ready", waits until GOFD
 * reads end of file, launches the K kernels, then prints
 * "done T_DONE COUNTERS..." and "lat NS..." (T_DONE: now_ns() after the
 * last launch; the clock is the system's monotonic one, the parent's too). */
static int node(const char *label, const char *dir, const char *url, const char *prefix, int nk, int go) {
  const bconf *c = conf_named(label);
  if (!c || nk < 1) return 2;
  kc_options o;
  kcb_options_store(&o, c->kind, c->cc, dir);
  o.remote_url = strcmp(url, "-") ? url : "off";
  o.remote_prefix = prefix;
  kcb_session s;
  if (!kcb_session_open(&s, kcb_runtime(&o, label), true)) return 1;
  double *lat = calloc((size_t)nk, sizeof *lat);
  if (!lat) return 1;
  printf("ready\n");
  fflush(stdout);
  char ch;
  for (ssize_t k; (k = read(go, &ch, 1)) != 0;) /* end of file: released */
    if (k < 0 && errno != EINTR) break;
  close(go);
  for (int v = 1; v <= nk; v++) {
    char params[32];
    snprintf(params, sizeof params, "VARIANT=%d", v);
    kc_kernel *k = NULL;
    double t0 = now_ns();
    kc_status st = kc_kernel_create(s.rt, "typical", params, &k);
    if (!st) st = kcb_session_launch(&s, k);
    lat[v - 1] = now_ns() - t0;
    kc_kernel_destroy(k);
    if (!st) st = kcb_session_check(&s, (float)v);
    if (st) {
      fprintf(stderr, "%s: node %d, kernel %d: %s: %s\n", KCB_PROG, (int)getpid(), v, kc_status_name(st),
              kc_errmsg(s.rt));
      return 1;
    }
  }
  double done = now_ns();
  kc_stats k;
  kc_stats_get(s.rt, &k);
  printf("done %.0f", done);
#define X(f) printf(" %llu", (unsigned long long)k.f);
  NODE_COUNTERS(X)
#undef X
  printf("\nlat");
  for (int i = 0; i < nk; i++) printf(" %.0f", lat[i]);
  printf("\n");
  fflush(stdout);
  free(lat);
  kcb_session_close(&s); /* uploads finish here */
  return 0;
}

/* ------------------------------------------------------- Redis's own counts */

static const char *url_arg; /* the server's URL (ours or --url) */
static pid_t kill_pid; /* --kill: a process to SIGKILL during the first run (a cluster's primary) */
static int kill_after_ms = 200;

/* The server's calls per command (INFO commandstats through redis-cli),
 * less its INFO calls: the sum into *total; false when redis-cli cannot
 * say. names/calls (may be NULL): up to max commands. */
typedef struct cmdstats {
  int n;
  char name[32][40];
  unsigned long long calls[32];
  unsigned long long total;
} cmdstats;

static bool redis_cmdstats(cmdstats *cs) {
  memset(cs, 0, sizeof *cs);
  char cmd[1024];
  const char *ca = getenv("KC_REMOTE_TLS_CA");
  /* redis-cli takes rediss:// URLs itself; the CA kcache is told of, if any */
  snprintf(cmd, sizeof cmd, "redis-cli -u '%s'%s%s%s INFO commandstats 2>/dev/null", url_arg,
           ca && *ca ? " --cacert '" : "", ca && *ca ? ca : "", ca && *ca ? "'" : "");
  FILE *p = popen(cmd, "r");
  if (!p) return false;
  char line[512];
  bool any = false; /* the section's head seen (it is empty before the first command) */
  while (fgets(line, sizeof line, p)) {
    any |= !strncmp(line, "# Commandstats", 14);
    /* cmdstat_get:calls=12,usec=34,... */
    if (strncmp(line, "cmdstat_", 8)) continue;
    char *colon = strchr(line, ':');
    char *calls = strstr(line, "calls=");
    if (!colon || !calls) continue;
    *colon = 0;
    const char *name = line + 8;
    unsigned long long n = strtoull(calls + 6, NULL, 10);
    if (!strcmp(name, "info")) continue;
    cs->total += n;
    if (cs->n < 32 && strlen(name) < sizeof cs->name[0]) {
      memcpy(cs->name[cs->n], name, strlen(name) + 1);
      cs->calls[cs->n++] = n;
    }
  }
  return pclose(p) == 0 && any;
}

/* The calls of after less before, per command (into after). */
static void cmdstats_sub(cmdstats *after, const cmdstats *before) {
  after->total -= before->total;
  for (int i = 0; i < after->n; i++)
    for (int j = 0; j < before->n; j++)
      if (!strcmp(after->name[i], before->name[j])) after->calls[i] -= before->calls[j];
}

/* ------------------------------------------------------------------ a fleet */

typedef struct row {
  int nodes;
  bool ok;
  char why[160];
  counters sum;
  double wall_s; /* release to the last node done */
  double exit_s; /* release to the last node exited (its uploads finished) */
  double med_ms, worst_ms; /* first launch, over every node's kernels */
  bool have_cmds;
  cmdstats cmds; /* the run's commands */
  double load1; /* the 1-minute load average when the run started */
} row;

static const char *self_path;
static const bconf *conf;
static int nkernels = 50;
static char root[4096]; /* the node stores live under it */

static double load_avg(int which) {
  double l[3] = {-1, -1, -1};
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = -1;
    fclose(f);
  }
  return l[which];
}

/* Reads a line of fd (a child's stdout) into buf, a byte at a time, so
 * that nothing after it is taken. */
static bool read_line(int fd, char *buf, size_t len) {
  size_t n = 0;
  while (n < len - 1) {
    ssize_t k = read(fd, buf + n, 1);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    if (buf[n++] == '\n') break;
  }
  buf[n] = 0;
  return n && buf[n - 1] == '\n';
}

/* Runs n nodes at once against url ("-": no tier) under prefix. */
static void fleet(int n, const char *url, const char *prefix, row *r) {
  memset(r, 0, sizeof *r);
  r->nodes = n;
  r->load1 = load_avg(0);
  pid_t *pid = calloc((size_t)n, sizeof *pid);
  int *fd = calloc((size_t)n, sizeof *fd);
  double *lat = calloc((size_t)n * (size_t)nkernels, sizeof *lat);
  size_t blen = (size_t)nkernels * 24 + 1024;
  char *buf = malloc(blen);
  int go[2] = {-1, -1};
  if (!pid || !fd || !lat || !buf || pipe(go)) {
    snprintf(r->why, sizeof r->why, "out of memory or pipes");
    goto out;
  }
  char run[4096];
  if (snprintf(run, sizeof run, "%s/%s", root, prefix) >= (int)sizeof run) {
    snprintf(r->why, sizeof r->why, "the temporary directory's name is too long");
    goto out;
  }
  for (char *p = run + strlen(root) + 1; *p; p++)
    if (!isalnum((unsigned char)*p)) *p = '-';
  int started = 0;
  for (int i = 0; i < n; i++, started++) {
    pid[i] = kcb_fork_piped(&fd[i], NULL);
    if (pid[i] < 0) break;
    if (pid[i] == 0) {
      close(go[1]);
      kcb_child_env(NULL);
      char dir[4200], nks[16], gos[16];
      snprintf(dir, sizeof dir, "%s/node%d", run, i);
      snprintf(nks, sizeof nks, "%d", nkernels);
      snprintf(gos, sizeof gos, "%d", go[0]);
      execl(self_path, self_path, "--node", conf->label, dir, url, prefix, nks, gos, (char *)NULL);
      _exit(127);
    }
  }
  bool ok = started == n;
  for (int i = 0; i < started; i++)
    if (!read_line(fd[i], buf, blen) || strcmp(buf, "ready\n")) ok = false;
  cmdstats before;
  bool have_before = strcmp(url, "-") && redis_cmdstats(&before);
  double t_release = now_ns(), t_done = t_release;
  close(go[1]);
  close(go[0]);
  go[0] = go[1] = -1;
  pid_t killer = 0;
  if (kill_pid > 0) { /* a failover in the middle of this run: once */
    killer = fork();
    if (killer == 0) {
      usleep((useconds_t)kill_after_ms * 1000u);
      _exit(kill(kill_pid, SIGKILL) == 0 ? 0 : 1);
    }
    if (killer > 0)
      fprintf(stderr, "%s: SIGKILL to process %ld %d ms after the release\n", KCB_PROG, (long)kill_pid,
              kill_after_ms);
    kill_pid = 0;
  }
  int nl = 0;
  for (int i = 0; i < started; i++) {
    bool child_ok = kcb_child_reap(pid[i], fd[i], buf, blen);
    double done;
    counters c;
    int used = 0;
    if (!child_ok || sscanf(buf, "done %lf%n", &done, &used) != 1) {
      ok = false;
      continue;
    }
    char *p = buf + used;
#define X(f) c.f = strtoull(p, &p, 10);
    NODE_COUNTERS(X)
#undef X
#define X(f) r->sum.f += c.f;
    NODE_COUNTERS(X)
#undef X
    if (done > t_done) t_done = done;
    if (!(p = strstr(p, "lat "))) {
      ok = false;
      continue;
    }
    p += 3;
    for (int k = 0; k < nkernels; k++) lat[nl++] = strtod(p, &p) / 1e6;
  }
  r->exit_s = (now_ns() - t_release) / 1e9;
  r->wall_s = (t_done - t_release) / 1e9;
  if (killer > 0) waitpid(killer, NULL, 0);
  if (have_before && redis_cmdstats(&r->cmds)) {
    cmdstats_sub(&r->cmds, &before);
    r->have_cmds = true;
  }
  if (nl) {
    r->med_ms = median(lat, nl); /* sorts */
    r->worst_ms = lat[nl - 1];
  }
  if (!ok) snprintf(r->why, sizeof r->why, "a node failed (its message is above)");
  else if (nl != n * nkernels) snprintf(r->why, sizeof r->why, "a node's figures were incomplete");
  else r->ok = true;
  kcb_rmrf(run);
out:
  if (go[0] >= 0) close(go[0]);
  if (go[1] >= 0) close(go[1]);
  free(pid);
  free(fd);
  free(lat);
  free(buf);
}

/* ------------------------------------------------------------------- main */

typedef struct mode {
  char name[32]; /* "default" or "timeout 250 ms" */
  unsigned timeout_ms; /* 0: kcache's default */
  row rows[16];
} mode;

static void remote_env_defaults(void) {
  /* kcache's defaults: none of the remote settings from this environment */
  static const char *const vars[] = {
      "KC_REMOTE",           "KC_REMOTE_TIMEOUT_MS", "KC_REMOTE_RETRY_MS", "KC_REMOTE_LOCK_TIMEOUT",
      "KC_REMOTE_MAX_ENTRY", "KC_REMOTE_KEY",        "KC_REMOTE_PREFIX"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

static void clear_prefix(const char *prefix) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' remote clear --url '%s' --prefix '%s' >/dev/null 2>&1", KC_CLI, url_arg,
           prefix);
  if (system(cmd)) fprintf(stderr, "%s: could not remove the keys under %s\n", KCB_PROG, prefix);
}

static void print_row(const row *r, double alone_s) {
  if (!r->ok) {
    printf("%5d  failed: %s\n", r->nodes, r->why);
    return;
  }
  char cmds[32] = "n/a";
  if (r->have_cmds) snprintf(cmds, sizeof cmds, "%.1f", (double)r->cmds.total / nkernels);
  printf("%5d %8llu%s %7llu %6llu %6llu %6llu %8.2f %7.2fx %9.1f %9.1f %8s %6.1f\n", r->nodes,
         r->sum.compiles, r->sum.compiles == (unsigned long long)nkernels ? " " : "!", r->sum.remote_hits,
         r->sum.remote_lock_waits, r->sum.remote_lookup_errors, r->sum.remote_lookup_skips, r->wall_s,
         alone_s > 0 ? r->wall_s / alone_s : 0, r->med_ms, r->worst_ms, cmds, r->load1);
}

static void json_row(const row *r, bool first) {
  printf("%s{\"nodes\": %d, \"ok\": %s", first ? "" : ", ", r->nodes, r->ok ? "true" : "false");
  if (!r->ok) {
    printf(", \"why\": \"%s\"}", r->why);
    return;
  }
#define X(f) printf(", \"%s\": %llu", #f, r->sum.f);
  NODE_COUNTERS(X)
#undef X
  printf(", \"wall_s\": %.3f, \"exit_s\": %.3f, \"first_launch_median_ms\": %.3f, "
         "\"first_launch_worst_ms\": %.3f, \"load1\": %.2f",
         r->wall_s, r->exit_s, r->med_ms, r->worst_ms, r->load1);
  if (r->have_cmds) {
    printf(", \"redis_commands\": %llu, \"redis_commands_per_kernel\": %.2f, \"redis_calls\": {",
           r->cmds.total, (double)r->cmds.total / nkernels);
    bool f = true;
    for (int i = 0; i < r->cmds.n; i++) {
      if (!r->cmds.calls[i]) continue;
      printf("%s\"%s\": %llu", f ? "" : ", ", r->cmds.name[i], r->cmds.calls[i]);
      f = false;
    }
    printf("}");
  }
  printf("}");
}

int main(int argc, char **argv) {
  if (argc == 8 && !strcmp(argv[1], "--node"))
    return node(argv[2], argv[3], argv[4], argv[5], atoi(argv[6]), atoi(argv[7]));
  bool json = false, check = false;
  const char *nodes_arg = "1 2 4 8 16 32 64", *timeouts_arg = "default,250", *backend = "tcc";
  const char *url = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--check")) check = true;
    else if (!strcmp(argv[i], "--nodes") && i + 1 < argc) nodes_arg = argv[++i];
    else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) nkernels = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--timeouts") && i + 1 < argc) timeouts_arg = argv[++i];
    else if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--kill") && i + 1 < argc) kill_pid = (pid_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--kill-after") && i + 1 < argc) kill_after_ms = atoi(argv[++i]);
    else {
      fprintf(
          stderr,
          "usage: %s [--json] [--check] [--nodes \"1 2 4 ...\"] [--kernels K] [--backend tcc|host|opencl] "
          "[--timeouts \"default,250\"] [--url redis://...] [--kill PID [--kill-after MS]]\n",
          argv[0]);
      return 2;
    }
  }
  conf = conf_named(backend);
  if (!conf || nkernels < 1 || nkernels > 100000) {
    fprintf(stderr, "%s: unknown backend %s or a kernel count out of 1..100000\n", KCB_PROG, backend);
    return 2;
  }
  int counts[16], ncounts = 0;
  for (const char *p = nodes_arg; *p && ncounts < 16;) {
    char *e;
    long v = strtol(p, &e, 10);
    if (e == p) {
      p++;
      continue;
    }
    if (v < 1 || v > 1024) {
      fprintf(stderr, "%s: a node count out of 1..1024: %ld\n", KCB_PROG, v);
      return 2;
    }
    counts[ncounts++] = (int)v;
    p = e;
  }
  mode modes[4];
  int nmodes = 0;
  for (const char *p = timeouts_arg; *p && nmodes < 4;) {
    size_t len = strcspn(p, ", ");
    if (len) {
      mode *m = &modes[nmodes++];
      memset(m, 0, sizeof *m);
      if (!strncmp(p, "default", len)) snprintf(m->name, sizeof m->name, "default");
      else if ((m->timeout_ms = (unsigned)strtoul(p, NULL, 10)) > 0)
        snprintf(m->name, sizeof m->name, "timeout %u ms", m->timeout_ms);
      else {
        fprintf(stderr, "%s: --timeouts takes \"default\" and milliseconds\n", KCB_PROG);
        return 2;
      }
    }
    p += len + (p[len] != 0);
  }
  if (!ncounts || !nmodes) return 2;
  char why[256];
  if (kcb_backend_missing(conf->kind, conf->cc, why, sizeof why)) {
    printf("%s: skipped: %s\n", KCB_PROG, why);
    return 77;
  }
  static char self[4096];
  if (!kcb_self_path(self, sizeof self)) return 1;
  self_path = self;
  remote_env_defaults();
  kcb_redis srv;
  memset(&srv, 0, sizeof srv);
  if (!url) {
    if (!kcb_in_path("redis-server")) {
      printf("%s: skipped: redis-server is not installed (Debian: apt-get install redis-server)\n", KCB_PROG);
      return 77;
    }
    if (!kcb_redis_start(&srv, "kc-bench-fleet")) {
      fprintf(stderr, "%s: redis-server did not start\n", KCB_PROG);
      return 1;
    }
    url = srv.url;
  }
  url_arg = url;
  if (!kcb_remote_usable(url, "kc-bench-fleet")) {
    printf("%s: skipped: the remote tier cannot be used here (see the warning above)\n", KCB_PROG);
    kcb_redis_stop(&srv);
    return 77;
  }
  if (!kcb_mkdtemp(root, sizeof root, "kc-bench-fleet", conf->label)) {
    fprintf(stderr, "%s: mkdtemp: %s\n", KCB_PROG, strerror(errno));
    kcb_redis_stop(&srv);
    return 1;
  }
  double load_start[3] = {load_avg(0), load_avg(1), load_avg(2)}, t_start = now_ns();

  /* one node alone, without the tier */
  /* one node alone, without the tier: the median of 3 runs (by wall time) */
  row alone, alones[3];
  if (!json) fprintf(stderr, "one node alone, without the tier, 3 times...\n");
  int alone_failed = 0;
  for (int i = 0; i < 3; i++) {
    fleet(1, "-", "alone", &alones[i]);
    alone_failed += !alones[i].ok;
  }
  for (int i = 0; i < 2; i++) /* sort the three by wall time */
    for (int j = 0; j < 2 - i; j++)
      if (alones[j].wall_s > alones[j + 1].wall_s) {
        row t = alones[j];
        alones[j] = alones[j + 1];
        alones[j + 1] = t;
      }
  alone = alones[1];
  double alone_s = alone_failed ? 0 : alone.wall_s;
  int failed = alone_failed;
  for (int m = 0; m < nmodes; m++) {
    if (modes[m].timeout_ms) {
      char t[16];
      snprintf(t, sizeof t, "%u", modes[m].timeout_ms);
      setenv("KC_REMOTE_TIMEOUT_MS", t, 1);
    } else {
      unsetenv("KC_REMOTE_TIMEOUT_MS");
    }
    for (int i = 0; i < ncounts; i++) {
      char prefix[96];
      snprintf(prefix, sizeof prefix, "kcfleet:%d:%u:%d:", (int)getpid(), modes[m].timeout_ms, counts[i]);
      if (!json) fprintf(stderr, "%s, %d nodes...\n", modes[m].name, counts[i]);
      fleet(counts[i], url, prefix, &modes[m].rows[i]);
      failed += !modes[m].rows[i].ok;
      if (check && modes[m].timeout_ms && modes[m].rows[i].ok &&
          modes[m].rows[i].sum.compiles > (unsigned long long)nkernels) {
        fprintf(stderr, "%s: %s, %d nodes: %llu compiles for %d kernels\n", KCB_PROG, modes[m].name,
                counts[i], modes[m].rows[i].sum.compiles, nkernels);
        failed++;
      }
      if (!srv.pid) clear_prefix(prefix);
    }
  }
  unsetenv("KC_REMOTE_TIMEOUT_MS");
  kcb_redis_stop(&srv);
  kcb_rmrf(root);
  double elapsed = (now_ns() - t_start) / 1e9;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);

  if (json) {
    printf("{\"backend\": \"%s\", \"compiler\": \"%s\", \"kernels\": %d, \"cores\": %ld, \"own_server\": %s, "
           "\"load_start\": [%.2f, %.2f, %.2f], \"load_end\": [%.2f, %.2f, %.2f], \"elapsed_s\": %.1f, "
           "\"alone\": ",
           conf->label, conf->compiler, nkernels, cores, srv.url[0] ? "true" : "false", load_start[0],
           load_start[1], load_start[2], load_avg(0), load_avg(1), load_avg(2), elapsed);
    json_row(&alone, true);
    printf(", \"modes\": [");
    for (int m = 0; m < nmodes; m++) {
      printf("%s{\"name\": \"%s\", \"timeout_ms\": %u, \"rows\": [", m ? ", " : "", modes[m].name,
             modes[m].timeout_ms);
      for (int i = 0; i < ncounts; i++) json_row(&modes[m].rows[i], i == 0);
      printf("]}");
    }
    printf("]}\n");
  }
  printf("kcache fleet: N nodes cold-start the same %d kernels at once through one Redis (%s, %s)\n",
         nkernels, conf->compiler, srv.url[0] ? "its own redis-server on loopback" : "--url");
  printf("%ld cores; load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end; %.0f s in all\n",
         cores, load_start[0], load_start[1], load_start[2], load_avg(0), load_avg(1), load_avg(2), elapsed);
  if (!alone_failed)
    printf("one node alone, without the tier (the median of 3 runs): %llu compiles, %.2f s (runs: %.2f to "
           "%.2f s), "
           "first launch median %.1f ms, worst %.1f ms\n",
           alone.sum.compiles, alone.wall_s, alones[0].wall_s, alones[2].wall_s, alone.med_ms,
           alone.worst_ms);
  else printf("one node alone, without the tier: %d of 3 runs failed\n", alone_failed);
  for (int m = 0; m < nmodes; m++) {
    printf("\n%s%s:\n", modes[m].name, modes[m].timeout_ms ? " (KC_REMOTE_TIMEOUT_MS)" : " remote settings");
    printf("%5s %9s %7s %6s %6s %6s %8s %8s %9s %9s %8s %6s\n", "nodes", "compiles", "r.hits", "waits",
           "errors", "skips", "wall s", "x alone", "med ms", "worst ms", "cmds/k", "load");
    for (int i = 0; i < ncounts; i++) print_row(&modes[m].rows[i], alone_s);
  }
  printf(
      "\ncompiles: in total across the fleet (goal %d: single flight; ! marks a miss); r.hits: remote hits;\n"
      "waits: lookups that waited for another node's compile; errors: lookups that failed (a deadline\n"
      "missed, mostly: that node compiles for itself); skips: lookups the breaker skipped; wall: release\n"
      "to the last node done; x alone: that over one node compiling alone; med/worst: first launch\n"
      "(create + launch + finish) over every node's kernels; cmds/k: Redis commands per kernel; load:\n"
      "the 1-minute load average when the row started.\n",
      nkernels);
  return failed ? 1 : 0;
}
