/*
 * kcache -- the command that looks after a kcache disk cache: what it holds
 * (stats, ls, show), whether it is sound (verify), how big it may be (gc,
 * clear), and why a kernel missed it (explain).
 *
 * It works on the files alone, through the store's kc__ functions: it needs
 * no backend, no compiler and no device. Tables for people by default,
 * --json for scripts; --help everywhere.
 */
#include "cache/cache.h"
#include "remote/remote.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct cli {
  char root[PATH_MAX];
  char vdir[PATH_MAX];
  bool json;
  bool progress; /* stderr is a terminal */
  int argc;      /* the command's own arguments */
  char **argv;
} cli;

/* ------------------------------------------------------------- helpers */

static void KC__PRINTF(1, 2) die_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kcache: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(kcache --help for usage)\n");
  va_end(ap);
  exit(2);
}

static void json_str(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", stdout); break;
    case '\\': fputs("\\\\", stdout); break;
    case '\n': fputs("\\n", stdout); break;
    case '\r': fputs("\\r", stdout); break;
    case '\t': fputs("\\t", stdout); break;
    default:
      if (*p < 0x20) printf("\\u%04x", *p);
      else putchar(*p);
    }
  }
  putchar('"');
}

static const char *human_size(uint64_t n, char *buf, size_t len) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0) snprintf(buf, len, "%llu B", (unsigned long long)n);
  else snprintf(buf, len, "%.1f %s", v, units[u]);
  return buf;
}

static uint64_t now_real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* "5 s", "3 min", "2 h", "4 d" since t (ns, realtime). */
static const char *ago(int64_t t, char *buf, size_t len) {
  if (t <= 0) return "?";
  double s = ((double)now_real_ns() - (double)t) / 1e9;
  if (s < 0) s = 0;
  if (s < 120) snprintf(buf, len, "%.0f s", s);
  else if (s < 7200) snprintf(buf, len, "%.0f min", s / 60);
  else if (s < 172800) snprintf(buf, len, "%.0f h", s / 3600);
  else snprintf(buf, len, "%.0f d", s / 86400);
  return buf;
}

static const char *date(int64_t t, char *buf, size_t len) {
  time_t secs = (time_t)(t / 1000000000);
  struct tm tm;
  localtime_r(&secs, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

typedef struct bar {
  const char *what;
  int last; /* last drawn permille */
  bool on;
} bar;

static void bar_draw(void *ud, size_t done, size_t total) {
  bar *b = ud;
  if (!b->on || total < 20) return;
  int pm = (int)(done * 1000 / total);
  if (pm == b->last && done != total) return;
  b->last = pm;
  char cells[31];
  int full = (int)(done * 30 / total);
  for (int i = 0; i < 30; i++) cells[i] = i < full ? '#' : '.';
  cells[30] = 0;
  fprintf(stderr, "\r%-7s [%s] %zu/%zu", b->what, cells, done, total);
  if (done == total) fputc('\n', stderr);
  fflush(stderr);
}

static kc__store_file *list_or_die(cli *c, size_t *n) {
  kc__store_file *files = NULL;
  if (kc__store_list(NULL, c->vdir, &files, n) != KC_OK) {
    fprintf(stderr, "kcache: %s\n", kc_errmsg(NULL));
    exit(1);
  }
  return files;
}

static int by_use_desc(const void *a, const void *b) {
  const kc__store_file *x = a, *y = b;
  return (x->mtime_ns < y->mtime_ns) - (x->mtime_ns > y->mtime_ns);
}

/* The entry file whose key starts with prefix (4 to 32 hex digits). */
static bool find_key(cli *c, const char *prefix, char *path, size_t len, uint8_t key[16], bool quiet) {
  size_t pl = strlen(prefix);
  if (pl < 4 || pl > 32 || strspn(prefix, "0123456789abcdefABCDEF") != pl) return false;
  size_t n, hits = 0;
  kc__store_file *files = list_or_die(c, &n);
  for (size_t i = 0; i < n; i++) {
    char hex[33];
    kc__store_hex(files[i].key, hex);
    if (strncasecmp(hex, prefix, pl)) continue;
    if (hits++ == 0) {
      snprintf(path, len, "%s", files[i].path);
      memcpy(key, files[i].key, 16);
    }
  }
  kc__store_list_free(NULL, files);
  if (hits > 1 && !quiet) {
    fprintf(stderr, "kcache: key prefix %s is ambiguous (%zu entries); give more digits\n", prefix, hits);
    exit(1);
  }
  return hits == 1;
}

static bool has_help(cli *c) {
  for (int i = 0; i < c->argc; i++)
    if (!strcmp(c->argv[i], "--help") || !strcmp(c->argv[i], "-h")) return true;
  return false;
}

/* ------------------------------------------------------------- commands */

static const char *const help_stats =
    "usage: kcache stats [--dir DIR] [--json]\n"
    "\n"
    "What the store holds (entries, size and bound, backends, oldest and newest\n"
    "use) and the counters that every process using it keeps: hits, misses,\n"
    "writes, evictions, repairs; and, when a remote tier was used (or $KC_REMOTE\n"
    "names one), its lookups, hits, misses, rejected values, errors, skips,\n"
    "uploads, waits for another machine's compile, and time per lookup.\n";

/* The remote tier's part of `kcache stats`: the counters that processes
 * using this store keep (vdir/remote-stats), and the tier $KC_REMOTE names. */
static void stats_remote(cli *c) {
  kc__remote_counters r;
  kc__remote_counters_read(c->vdir, &r);
  kc__remote_config cfg;
  char why[1024];
  kc_status st = kc__remote_config_load(NULL, &cfg, why, sizeof why);
  if (!r.valid && st == KC_ENOTFOUND) {
    if (c->json) printf(", \"remote\": null");
    return;
  }
  double per = r.lookups ? (double)r.lookup_ns / (double)r.lookups / 1e6 : 0;
  if (c->json) {
    printf(",\n \"remote\": {\"url\": ");
    if (st == KC_OK) json_str(cfg.url);
    else printf("null");
    printf(", \"lookups\": %llu, \"hits\": %llu, \"misses\": %llu, \"rejects\": %llu, \"errors\": %llu, "
           "\"skips\": %llu, \"uploads\": %llu, \"lock_waits\": %llu, \"lookup_ns\": %llu, \"ms_per_lookup\": %.3f}",
           (unsigned long long)r.lookups, (unsigned long long)r.hits, (unsigned long long)r.misses,
           (unsigned long long)r.rejects, (unsigned long long)r.errors, (unsigned long long)r.skips,
           (unsigned long long)r.uploads, (unsigned long long)r.lock_waits, (unsigned long long)r.lookup_ns, per);
    return;
  }
  if (st == KC_OK) printf("remote      %s, prefix %s%s (KC_REMOTE)\n", cfg.url, cfg.prefix, cfg.ns);
  else if (st != KC_ENOTFOUND) printf("remote      KC_REMOTE is set but unusable: %s\n", why);
  printf("remote use  %llu lookups: %llu hits, %llu misses (%llu values rejected), %llu errors; %llu skipped "
         "(breaker open); %llu uploads; %llu waits for another machine; %.2f ms per lookup\n",
         (unsigned long long)r.lookups, (unsigned long long)r.hits, (unsigned long long)r.misses,
         (unsigned long long)r.rejects, (unsigned long long)r.errors, (unsigned long long)r.skips,
         (unsigned long long)r.uploads, (unsigned long long)r.lock_waits, per);
}

static int cmd_stats(cli *c) {
  size_t n;
  kc__store_file *files = list_or_die(c, &n);
  uint64_t total = 0;
  int64_t oldest = 0, newest = 0;
  struct {
    char name[32];
    uint64_t count, bytes;
  } be[8];
  int nbe = 0;
  uint64_t damaged = 0;
  for (size_t i = 0; i < n; i++) {
    total += files[i].size;
    if (!oldest || files[i].mtime_ns < oldest) oldest = files[i].mtime_ns;
    if (files[i].mtime_ns > newest) newest = files[i].mtime_ns;
    kc__entry e;
    const char *name = "(damaged)";
    bool ok = kc__entry_peek(files[i].path, &e, NULL, 0) == KC_OK;
    if (ok) name = e.backend;
    else damaged++;
    int j = 0;
    while (j < nbe && strcmp(be[j].name, name)) j++;
    if (j == nbe && nbe < 8) {
      snprintf(be[nbe].name, sizeof be[nbe].name, "%s", name);
      be[nbe].count = be[nbe].bytes = 0;
      nbe++;
    }
    if (j < nbe) {
      be[j].count++;
      be[j].bytes += files[i].size;
    }
    if (ok) kc__entry_free(NULL, &e);
  }
  kc__store_list_free(NULL, files);
  uint64_t max;
  const char *env = getenv("KC_CACHE_MAXSIZE");
  bool from_env = kc__store_env_max_size(&max) && env && *env;
  kc__store_counters k;
  kc__store_counters_read(c->vdir, &k);
  uint64_t lookups = k.hits + k.misses;
  if (c->json) {
    printf("{\"directory\": ");
    json_str(c->root);
    printf(", \"format\": %u, \"entries\": %zu, \"bytes\": %llu, \"max_bytes\": %llu, \"damaged\": %llu,\n",
           KC__STORE_FORMAT, n, (unsigned long long)total, (unsigned long long)max,
           (unsigned long long)damaged);
    printf(" \"backends\": {");
    for (int j = 0; j < nbe; j++) {
      printf("%s", j ? ", " : "");
      json_str(be[j].name);
      printf(": {\"entries\": %llu, \"bytes\": %llu}", (unsigned long long)be[j].count,
             (unsigned long long)be[j].bytes);
    }
    printf("},\n \"oldest_use_ns\": %lld, \"newest_use_ns\": %lld,\n", (long long)oldest, (long long)newest);
    printf(" \"counters\": {\"hits\": %llu, \"misses\": %llu, \"writes\": %llu, \"evictions\": %llu, "
           "\"repairs\": %llu}",
           (unsigned long long)k.hits, (unsigned long long)k.misses, (unsigned long long)k.writes,
           (unsigned long long)k.evictions, (unsigned long long)k.repairs);
    stats_remote(c);
    printf("}\n");
    return 0;
  }
  char a[32], b[32], t[32];
  printf("directory   %s (format v%u)\n", c->root, KC__STORE_FORMAT);
  printf("entries     %zu\n", n);
  if (damaged) printf("damaged     %llu (kcache verify --repair removes them)\n", (unsigned long long)damaged);
  printf("size        %s of at most %s (%s)\n", human_size(total, a, sizeof a), human_size(max, b, sizeof b),
         from_env ? "KC_CACHE_MAXSIZE" : "default");
  for (int j = 0; j < nbe; j++)
    printf("%-11s %s: %llu entries, %s\n", j ? "" : "backends", be[j].name, (unsigned long long)be[j].count,
           human_size(be[j].bytes, t, sizeof t));
  if (n) {
    printf("oldest use  %s ago\n", ago(oldest, a, sizeof a));
    printf("newest use  %s ago\n", ago(newest, a, sizeof a));
  }
  printf("counters    %llu hits, %llu misses", (unsigned long long)k.hits, (unsigned long long)k.misses);
  if (lookups) printf(" (%.0f%% hits)", 100.0 * (double)k.hits / (double)lookups);
  printf(", %llu writes, %llu evictions, %llu repairs\n", (unsigned long long)k.writes,
         (unsigned long long)k.evictions, (unsigned long long)k.repairs);
  stats_remote(c);
  return 0;
}

static const char *const help_ls =
    "usage: kcache ls [--sort use|age|size|entry] [--dir DIR] [--json]\n"
    "\n"
    "Every entry: its key (the table shows the first 12 digits; any unique\n"
    "prefix of 4 or more names an entry), backend, kernel entry name,\n"
    "specialization parameters, size, age (since it was compiled) and last use.\n"
    "Sorted by last use, most recent first, unless --sort says otherwise.\n";

typedef struct row {
  kc__store_file f;
  kc__entry e;
  bool ok;
  char why[128];
} row;

static const char *sort_key = "use";

static int row_cmp(const void *a, const void *b) {
  const row *x = a, *y = b;
  if (!strcmp(sort_key, "size")) return (x->f.size < y->f.size) - (x->f.size > y->f.size);
  if (!strcmp(sort_key, "age") && x->ok && y->ok)
    return (x->e.created_ns > y->e.created_ns) - (x->e.created_ns < y->e.created_ns);
  if (!strcmp(sort_key, "entry") && x->ok && y->ok) {
    int r = strcmp(x->e.entry, y->e.entry);
    if (r) return r;
  }
  return by_use_desc(&x->f, &y->f);
}

static int cmd_ls(cli *c) {
  for (int i = 0; i < c->argc; i++) {
    if (!strcmp(c->argv[i], "--sort") && i + 1 < c->argc) sort_key = c->argv[++i];
    else if (!strncmp(c->argv[i], "--sort=", 7)) sort_key = c->argv[i] + 7;
    else die_usage("ls: unexpected argument '%s'", c->argv[i]);
  }
  if (strcmp(sort_key, "use") && strcmp(sort_key, "age") && strcmp(sort_key, "size") && strcmp(sort_key, "entry"))
    die_usage("ls: --sort takes use, age, size or entry");
  size_t n;
  kc__store_file *files = list_or_die(c, &n);
  row *rows = calloc(n ? n : 1, sizeof *rows);
  if (!rows) {
    fprintf(stderr, "kcache: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    rows[i].f = files[i];
    rows[i].ok = kc__entry_peek(files[i].path, &rows[i].e, rows[i].why, sizeof rows[i].why) == KC_OK;
  }
  kc__store_list_free(NULL, files);
  qsort(rows, n, sizeof *rows, row_cmp);
  if (c->json) printf("[");
  else if (n) printf("%-12s  %-7s  %-24s  %-20s  %10s  %7s  %8s\n", "KEY", "BACKEND", "ENTRY", "PARAMS", "SIZE", "AGE",
                     "LAST USE");
  else printf("(no entries in %s)\n", c->root);
  for (size_t i = 0; i < n; i++) {
    row *r = &rows[i];
    char hex[33], sz[32], age[32], use[32];
    kc__store_hex(r->f.key, hex);
    if (c->json) {
      printf("%s\n {\"key\": \"%s\", \"path\": ", i ? "," : "", hex);
      json_str(r->f.path);
      printf(", \"size\": %llu, \"last_use_ns\": %lld", (unsigned long long)r->f.size, (long long)r->f.mtime_ns);
      if (r->ok) {
        printf(", \"backend\": ");
        json_str(r->e.backend);
        printf(", \"entry\": ");
        json_str(r->e.entry);
        printf(", \"params\": ");
        json_str(r->e.params);
        printf(", \"options\": ");
        json_str(r->e.options);
        printf(", \"created_ns\": %llu, \"compile_ns\": %llu}", (unsigned long long)r->e.created_ns,
               (unsigned long long)r->e.compile_ns);
      } else {
        printf(", \"damaged\": ");
        json_str(r->why);
        printf("}");
      }
    } else if (r->ok) {
      printf("%.12s  %-7s  %-24s  %-20s  %10s  %7s  %8s\n", hex, r->e.backend, r->e.entry,
             *r->e.params ? r->e.params : "-", human_size(r->f.size, sz, sizeof sz),
             ago((int64_t)r->e.created_ns, age, sizeof age), ago(r->f.mtime_ns, use, sizeof use));
    } else {
      printf("%.12s  (damaged: %s)  %s\n", hex, r->why, human_size(r->f.size, sz, sizeof sz));
    }
    if (r->ok) kc__entry_free(NULL, &r->e);
  }
  if (c->json) printf("%s]\n", n ? "\n" : "");
  free(rows);
  return 0;
}

static const char *const help_show =
    "usage: kcache show KEY [--dir DIR] [--json]\n"
    "\n"
    "One entry in full: its metadata (backend, compiler and device identity,\n"
    "entry, parameters, options, when it was compiled and how long it took),\n"
    "the source closure it was compiled from, and the compiler's log. KEY is\n"
    "the full key or a unique prefix of at least 4 hex digits.\n";

static void sig_text(const kc__entry *e, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (uint32_t i = 0; i < e->nsig && o < len; i++) {
    uint32_t kind = (uint32_t)(e->sig[i] >> 32), size = (uint32_t)e->sig[i];
    if (kind == KC_ARG_BUFFER) o += (size_t)snprintf(buf + o, len - o, "%sbuffer", i ? ", " : "");
    else if (size == UINT32_MAX) o += (size_t)snprintf(buf + o, len - o, "%sscalar", i ? ", " : "");
    else o += (size_t)snprintf(buf + o, len - o, "%sscalar %u bytes", i ? ", " : "", size);
  }
  if (!e->nsig) snprintf(buf, len, "(no parameters)");
}

static int cmd_show(cli *c) {
  if (c->argc != 1) die_usage("show takes one KEY");
  char path[PATH_MAX], why[256];
  uint8_t key[16];
  if (!find_key(c, c->argv[0], path, sizeof path, key, false)) {
    fprintf(stderr, "kcache: no entry with key %s in %s\n", c->argv[0], c->root);
    return 1;
  }
  kc__entry e;
  kc_status st = kc__entry_read(NULL, path, key, &e, why, sizeof why);
  if (st == KC_EUNAVAILABLE) {
    fprintf(stderr, "kcache: cannot read %s here: %s\n", path, why);
    return 1;
  } else if (st != KC_OK) {
    fprintf(stderr, "kcache: %s is damaged: %s (kcache verify --repair removes it)\n", path, why);
    return 1;
  }
  char hex[33], sigs[1024], a[64], b[64];
  kc__store_hex(e.key, hex);
  sig_text(&e, sigs, sizeof sigs);
  char tu[33];
  kc__store_hex(e.tu_hash, tu);
  if (c->json) {
    printf("{\"key\": \"%s\", \"path\": ", hex);
    json_str(path);
    printf(", \"size\": %zu, \"artifact_size\": %zu, \"format\": %u,\n \"backend\": ", e.size, e.artifact_size,
           e.format);
    json_str(e.backend);
    printf(", \"identity\": ");
    json_str(e.identity);
    printf(", \"entry\": ");
    json_str(e.entry);
    printf(", \"params\": ");
    json_str(e.params);
    printf(", \"options\": ");
    json_str(e.options);
    printf(", \"library\": ");
    json_str(e.library);
    printf(",\n \"created_ns\": %llu, \"compile_ns\": %llu, \"tu_hash\": \"%s\", \"signature\": [",
           (unsigned long long)e.created_ns, (unsigned long long)e.compile_ns, tu);
    for (uint32_t i = 0; i < e.nsig; i++) printf("%s%llu", i ? ", " : "", (unsigned long long)e.sig[i]);
    printf("],\n \"closure\": [");
    for (uint32_t i = 0; i < e.ndefs; i++) {
      uint8_t h[16];
      char hh[33];
      kc__store_text_hash(e.defs[i].text, e.defs[i].len, h);
      kc__store_hex(h, hh);
      printf("%s\n  {\"name\": ", i ? "," : "");
      json_str(e.defs[i].name);
      printf(", \"hash\": \"%s\", \"source\": ", hh);
      json_str(e.defs[i].text);
      printf("}");
    }
    printf("],\n \"log\": ");
    json_str(e.log);
    printf("}\n");
  } else {
    printf("key          %s\n", hex);
    printf("file         %s\n", path);
    printf("size         %s (artifact %s)\n", human_size(e.size, a, sizeof a),
           human_size(e.artifact_size, b, sizeof b));
    printf("backend      %s\n", e.backend);
    printf("identity     %s\n", e.identity);
    printf("entry        %s\n", e.entry);
    printf("params       %s\n", *e.params ? e.params : "(none)");
    printf("options      %s\n", *e.options ? e.options : "(none)");
    printf("signature    %s\n", sigs);
    printf("kcache       %s, store format %u\n", e.library, e.format);
    printf("created      %s (%s ago)\n", date((int64_t)e.created_ns, a, sizeof a),
           ago((int64_t)e.created_ns, b, sizeof b));
    printf("compile      %.1f ms\n", (double)e.compile_ns / 1e6);
    printf("closure      %u definition%s\n", e.ndefs, e.ndefs == 1 ? "" : "s");
    for (uint32_t i = 0; i < e.ndefs; i++) {
      uint8_t h[16];
      char hh[33];
      kc__store_text_hash(e.defs[i].text, e.defs[i].len, h);
      kc__store_hex(h, hh);
      printf("\n--- %s (%.12s)\n%s%s", e.defs[i].name, hh, e.defs[i].text,
             e.defs[i].len && e.defs[i].text[e.defs[i].len - 1] == '\n' ? "" : "\n");
    }
    printf("\n--- build log\n%s%s", e.log_len ? e.log : "(empty)\n",
           e.log_len && e.log[e.log_len - 1] != '\n' ? "\n" : "");
  }
  kc__entry_free(NULL, &e);
  return 0;
}

static const char *const help_verify =
    "usage: kcache verify [--repair] [--dir DIR] [--json]\n"
    "\n"
    "Reads every entry and checks its header, checksums, format version, that\n"
    "it holds the key its name says and that it sits in the right directory.\n"
    "Damaged entries are listed; --repair removes them (a program that needs\n"
    "one compiles it again). Exit status 1 if damage was found and not removed.\n";

static int cmd_verify(cli *c) {
  bool repair = false;
  for (int i = 0; i < c->argc; i++) {
    if (!strcmp(c->argv[i], "--repair")) repair = true;
    else die_usage("verify: unexpected argument '%s'", c->argv[i]);
  }
  size_t n;
  kc__store_file *files = list_or_die(c, &n);
  bar b = {"verify", -1, c->progress};
  size_t bad = 0, removed = 0, unreadable = 0;
  if (c->json) printf("{\"checked\": %zu, \"damaged\": [", n);
  for (size_t i = 0; i < n; i++) {
    bar_draw(&b, i + 1, n);
    char why[256] = "";
    kc__entry e;
    kc_status st = kc__entry_read(NULL, files[i].path, files[i].key, &e, why, sizeof why);
    if (st == KC_OK) {
      kc__entry_free(NULL, &e);
      if (!files[i].misplaced) continue;
      snprintf(why, sizeof why, "in the wrong directory");
    } else if (st == KC_ENOTFOUND) {
      continue; /* evicted meanwhile */
    } else if (st == KC_EUNAVAILABLE) {
      /* not the entry's fault (out of memory, a read error): not damage */
      char tmp[200];
      snprintf(tmp, sizeof tmp, "%s", why);
      snprintf(why, sizeof why, "unreadable here: %s (left alone)", tmp);
      unreadable++;
    }
    bool rm = repair && st != KC_EUNAVAILABLE && unlink(files[i].path) == 0;
    removed += rm;
    char hex[33];
    kc__store_hex(files[i].key, hex);
    if (c->json) {
      printf("%s\n  {\"key\": \"%s\", \"path\": ", bad ? "," : "", hex);
      json_str(files[i].path);
      printf(", \"reason\": ");
      json_str(why);
      printf(", \"removed\": %s}", rm ? "true" : "false");
    } else {
      if (b.on && b.last >= 0) fputc('\n', stderr), b.last = -1;
      printf("%s  %s%s\n", hex, why, rm ? " (removed)" : "");
    }
    bad++;
  }
  kc__store_list_free(NULL, files);
  if (removed) kc__store_gc(NULL, c->vdir, UINT64_MAX, true, NULL, NULL, NULL); /* recount */
  if (c->json) printf("%s], \"removed\": %zu, \"unreadable\": %zu}\n", bad ? "\n" : "", removed, unreadable);
  else if (bad)
    printf("%zu of %zu entries damaged or unreadable (%zu unreadable, left alone)%s\n", bad, n, unreadable,
           removed == bad - unreadable ? (removed ? ", the damaged removed" : "")
           : repair ? "; some could not be removed" : " (--repair removes the damaged)");
  else printf("%zu entries checked, all sound\n", n);
  return bad > removed ? 1 : 0;
}

static const char *const help_gc =
    "usage: kcache gc [--max-size SIZE] [--dir DIR] [--json]\n"
    "\n"
    "Evicts least recently used entries until the store holds at most SIZE\n"
    "(\"500M\", \"2G\", bytes; default $KC_CACHE_MAXSIZE, else 1G), removes temp\n"
    "files left by writers that died and lock files of compiles that died, and\n"
    "recounts the store's size.\n";

static const char *const help_clear =
    "usage: kcache clear [--dir DIR] [--json]\n"
    "\n"
    "Removes every entry (programs running now keep what they loaded, and\n"
    "compile again what they need next).\n";

static int run_gc(cli *c, uint64_t target, const char *what) {
  if (access(c->vdir, F_OK) != 0) {
    if (c->json) printf("{\"entries_before\": 0, \"evicted\": 0, \"entries_after\": 0}\n");
    else printf("no store in %s: nothing to do\n", c->root);
    return 0;
  }
  bar b = {what, -1, c->progress};
  kc__gc_result r;
  if (kc__store_gc(NULL, c->vdir, target, true, bar_draw, &b, &r) != KC_OK) {
    fprintf(stderr, "kcache: %s: %s\n", what, kc_errmsg(NULL));
    return 1;
  }
  char a[32], bb[32], t[32];
  if (c->json) {
    printf("{\"target_bytes\": %llu, \"entries_before\": %llu, \"bytes_before\": %llu, \"evicted\": %llu, "
           "\"evicted_bytes\": %llu, \"entries_after\": %llu, \"bytes_after\": %llu, \"temps_removed\": %llu, "
           "\"locks_removed\": %llu}\n",
           (unsigned long long)target, (unsigned long long)r.entries_before, (unsigned long long)r.bytes_before,
           (unsigned long long)r.evicted, (unsigned long long)r.evicted_bytes, (unsigned long long)r.entries_after,
           (unsigned long long)r.bytes_after, (unsigned long long)r.temps_removed,
           (unsigned long long)r.locks_removed);
  } else {
    printf("removed %llu of %llu entries (%s); %llu entries (%s) left", (unsigned long long)r.evicted,
           (unsigned long long)r.entries_before, human_size(r.evicted_bytes, a, sizeof a),
           (unsigned long long)r.entries_after, human_size(r.bytes_after, bb, sizeof bb));
    if (target != UINT64_MAX && target) printf(", at most %s", human_size(target, t, sizeof t));
    printf("\n");
    if (r.temps_removed || r.locks_removed)
      printf("removed %llu stale temp files and %llu abandoned lock files\n", (unsigned long long)r.temps_removed,
             (unsigned long long)r.locks_removed);
  }
  return 0;
}

static int cmd_gc(cli *c) {
  uint64_t target;
  if (!kc__store_env_max_size(&target))
    die_usage("KC_CACHE_MAXSIZE=\"%s\" is not a size", getenv("KC_CACHE_MAXSIZE"));
  for (int i = 0; i < c->argc; i++) {
    const char *v = NULL;
    if (!strcmp(c->argv[i], "--max-size") && i + 1 < c->argc) v = c->argv[++i];
    else if (!strncmp(c->argv[i], "--max-size=", 11)) v = c->argv[i] + 11;
    else die_usage("gc: unexpected argument '%s'", c->argv[i]);
    if (!kc__store_parse_size(v, &target)) die_usage("gc: --max-size \"%s\" is not a size (e.g. 500M, 2G)", v);
  }
  return run_gc(c, target, "gc");
}

static int cmd_clear(cli *c) {
  if (c->argc) die_usage("clear takes no arguments");
  return run_gc(c, 0, "clear");
}

/* ---------------------------------------------------------------- explain */

static const char *const help_explain =
    "usage: kcache explain KEY|ENTRY [--params P] [--dir DIR] [--json]\n"
    "\n"
    "Why a kernel missed the cache: compares an entry with the nearest other\n"
    "entry for the same kernel (the one that differs in the fewest parts of\n"
    "the key) and names what differs: a definition that changed (with its\n"
    "first differing line), one that is new or gone, the specialization\n"
    "parameters, the compile options, the compiler or device identity, the\n"
    "backend, kcache's version.\n"
    "\n"
    "KEY is a key or a unique prefix. ENTRY is a kernel name: its most recently\n"
    "compiled entry is explained (the one its last miss wrote), optionally\n"
    "only among entries with parameters P.\n";

typedef struct change {
  const char *component; /* "definition", "params", "options", "identity", "backend", "library", "source" */
  const char *name;      /* a definition's name */
  const char *kind;      /* "changed", "new", "gone" */
  const char *now, *was;
  int line; /* first differing line of a changed definition (1-based) */
  char now_line[160], was_line[160];
} change;

static const kc__key_def *def_named(const kc__entry *e, const char *name) {
  for (uint32_t i = 0; i < e->ndefs; i++)
    if (!strcmp(e->defs[i].name, name)) return &e->defs[i];
  return NULL;
}

static void first_diff_line(change *ch, const kc__key_def *now, const kc__key_def *was) {
  const char *a = now->text, *b = was->text;
  int line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') {
      line++;
      la = a + 1;
      lb = b + 1;
    }
    a++;
    b++;
  }
  ch->line = line;
  snprintf(ch->now_line, sizeof ch->now_line, "%.*s", (int)strcspn(la, "\n"), la);
  snprintf(ch->was_line, sizeof ch->was_line, "%.*s", (int)strcspn(lb, "\n"), lb);
}

/* What differs between `now` and `was`; returns the count (at most max). */
static int diff_entries(const kc__entry *now, const kc__entry *was, change *out, int max) {
  int n = 0;
#define KC__FIELD(f, comp)                                                       \
  if (strcmp(now->f, was->f) && n < max)                                         \
    out[n++] = (change){.component = comp, .kind = "changed", .now = now->f, .was = was->f};
  KC__FIELD(backend, "backend")
  KC__FIELD(identity, "identity")
  KC__FIELD(options, "options")
  KC__FIELD(params, "params")
  KC__FIELD(library, "library")
#undef KC__FIELD
  for (uint32_t i = 0; i < now->ndefs && n < max; i++) {
    const kc__key_def *d = &now->defs[i], *o = def_named(was, d->name);
    if (!o) {
      out[n++] = (change){.component = "definition", .name = d->name, .kind = "new"};
    } else if (d->len != o->len || memcmp(d->text, o->text, d->len)) {
      out[n] = (change){.component = "definition", .name = d->name, .kind = "changed"};
      first_diff_line(&out[n++], d, o);
    }
  }
  for (uint32_t i = 0; i < was->ndefs && n < max; i++)
    if (!def_named(now, was->defs[i].name))
      out[n++] = (change){.component = "definition", .name = was->defs[i].name, .kind = "gone"};
  if (n == 0 && memcmp(now->tu_hash, was->tu_hash, 16) && n < max)
    out[n++] = (change){.component = "source", .kind = "changed"};
  return n;
}

static int cmd_explain(cli *c) {
  const char *what = NULL, *params = NULL;
  for (int i = 0; i < c->argc; i++) {
    if (!strcmp(c->argv[i], "--params") && i + 1 < c->argc) params = c->argv[++i];
    else if (!strncmp(c->argv[i], "--params=", 9)) params = c->argv[i] + 9;
    else if (!what && c->argv[i][0] != '-') what = c->argv[i];
    else die_usage("explain: unexpected argument '%s'", c->argv[i]);
  }
  if (!what) die_usage("explain needs a KEY or an ENTRY name");
  size_t n;
  kc__store_file *files = list_or_die(c, &n);
  /* the target: a key, else the newest entry of that name */
  char path[PATH_MAX];
  uint8_t key[16];
  kc__entry target;
  bool have = false;
  if (find_key(c, what, path, sizeof path, key, true))
    have = kc__entry_read(NULL, path, key, &target, NULL, 0) == KC_OK;
  const char *entry_name = have ? target.entry : what;
  /* candidates: entries of the same kernel (metadata first, cheap) */
  size_t *same = calloc(n ? n : 1, sizeof *same), nsame = 0;
  uint64_t newest = 0;
  size_t newest_i = SIZE_MAX;
  for (size_t i = 0; same && i < n; i++) {
    kc__entry e;
    if (kc__entry_peek(files[i].path, &e, NULL, 0) != KC_OK) continue;
    if (!strcmp(e.entry, entry_name) && (!have || memcmp(files[i].key, target.key, 16))) {
      if (!have && (!params || !strcmp(e.params, params)) && e.created_ns >= newest) {
        newest = e.created_ns;
        newest_i = nsame;
      }
      same[nsame++] = i;
    }
    kc__entry_free(NULL, &e);
  }
  if (!have && newest_i != SIZE_MAX) {
    size_t i = same[newest_i];
    have = kc__entry_read(NULL, files[i].path, files[i].key, &target, NULL, 0) == KC_OK;
    same[newest_i] = same[--nsame];
  }
  if (!have) {
    fprintf(stderr, "kcache: no sound entry for %s in %s\n", what, c->root);
    free(same);
    kc__store_list_free(NULL, files);
    return 1;
  }
  /* the nearest: fewest differences, then the newest */
  enum { MAXCH = 64 };
  change best[MAXCH], cur[MAXCH];
  int nbest = -1;
  kc__entry near;
  memset(&near, 0, sizeof near);
  for (size_t k = 0; k < nsame; k++) {
    kc__entry e;
    size_t i = same[k];
    if (kc__entry_read(NULL, files[i].path, files[i].key, &e, NULL, 0) != KC_OK) continue;
    int d = diff_entries(&target, &e, cur, MAXCH);
    if (nbest < 0 || d < nbest || (d == nbest && e.created_ns > near.created_ns)) {
      kc__entry_free(NULL, &near);
      near = e;
      nbest = d;
    } else {
      kc__entry_free(NULL, &e);
    }
  }
  free(same);
  kc__store_list_free(NULL, files);
  /* again, against the kept `near`: the changes point into it */
  if (nbest >= 0) nbest = diff_entries(&target, &near, best, MAXCH);
  char hex[33], nhex[33], a[32];
  kc__store_hex(target.key, hex);
  if (nbest >= 0) kc__store_hex(near.key, nhex);
  if (c->json) {
    printf("{\"key\": \"%s\", \"entry\": ", hex);
    json_str(target.entry);
    printf(", \"params\": ");
    json_str(target.params);
    printf(", \"nearest\": ");
    if (nbest < 0) printf("null");
    else printf("\"%s\"", nhex);
    printf(", \"differences\": [");
    for (int i = 0; i < nbest; i++) {
      change *ch = &best[i];
      printf("%s\n  {\"component\": \"%s\", \"change\": \"%s\"", i ? "," : "", ch->component, ch->kind);
      if (ch->name) printf(", \"name\": "), json_str(ch->name);
      if (ch->now) printf(", \"now\": "), json_str(ch->now), printf(", \"was\": "), json_str(ch->was);
      if (ch->line) {
        printf(", \"line\": %d, \"now_line\": ", ch->line);
        json_str(ch->now_line);
        printf(", \"was_line\": ");
        json_str(ch->was_line);
      }
      printf("}");
    }
    printf("%s]}\n", nbest > 0 ? "\n" : "");
  } else if (nbest < 0) {
    printf("%.12s (%s%s%s) is the only entry for kernel '%s' in %s: it was compiled for the first "
           "time with this store.\n",
           hex, target.entry, *target.params ? " " : "", target.params, target.entry, c->root);
  } else {
    printf("%.12s (%s%s%s, compiled %s ago)\n", hex, target.entry, *target.params ? " " : "", target.params,
           ago((int64_t)target.created_ns, a, sizeof a));
    printf("nearest entry %.12s (compiled %s ago) differs in %d part%s of the key:\n", nhex,
           ago((int64_t)near.created_ns, a, sizeof a), nbest, nbest == 1 ? "" : "s");
    for (int i = 0; i < nbest; i++) {
      change *ch = &best[i];
      if (!strcmp(ch->component, "definition")) {
        if (!strcmp(ch->kind, "new")) printf("  definition '%s' is new (the nearest entry does not call it)\n", ch->name);
        else if (!strcmp(ch->kind, "gone")) printf("  definition '%s' is gone (the nearest entry called it)\n", ch->name);
        else
          printf("  definition '%s' changed, first at line %d:\n    now: %s\n    was: %s\n", ch->name, ch->line,
                 ch->now_line, ch->was_line);
      } else if (!strcmp(ch->component, "source")) {
        printf("  the generated source differs (kcache's prelude or trampoline changed)\n");
      } else {
        static const struct {
          const char *comp, *label;
        } labels[] = {{"backend", "backend"},
                      {"identity", "compiler/device identity"},
                      {"options", "compile options"},
                      {"params", "specialization parameters"},
                      {"library", "kcache version"}};
        const char *label = ch->component;
        for (size_t j = 0; j < sizeof labels / sizeof *labels; j++)
          if (!strcmp(labels[j].comp, ch->component)) label = labels[j].label;
        printf("  %s: \"%s\" (was \"%s\")\n", label, ch->now, ch->was);
      }
    }
  }
  kc__entry_free(NULL, &near);
  kc__entry_free(NULL, &target);
  return 0;
}

/* ----------------------------------------------------------------- remote */

static const char *const help_remote =
    "usage: kcache remote ping|ls|clear [--url URL] [--prefix P] [--timeout MS] [--json]\n"
    "\n"
    "Looks at the remote tier: the Redis server that machines share behind\n"
    "their disk caches (see \"remote tier\" in kcache.h).\n"
    "\n"
    "  ping    connects, measures the round trip, and shows the server's version,\n"
    "          memory policy, and the entries and locks under the prefix\n"
    "  ls      every entry under the prefix (any secret's namespace): key,\n"
    "          namespace, backend, entry, params, size, age, and whether its\n"
    "          MAC verifies with $KC_REMOTE_KEY; then the locks held now\n"
    "  clear   removes every entry and lock under the prefix\n"
    "\n"
    "options:\n"
    "  --url URL     redis://[[user]:password@]host[:port][/db] (default $KC_REMOTE)\n"
    "  --prefix P    the key prefix (default $KC_REMOTE_PREFIX, else \"kcache:\")\n"
    "  --timeout MS  for each command (default 2000)\n";

typedef struct rcli {
  kc__remote_config cfg;
  kc__rconn *conn;
  char why[1024];
} rcli;

static void rcli_die(rcli *r, const char *what) {
  fprintf(stderr, "kcache: remote %s: %s: %s\n", what, r->cfg.url[0] ? r->cfg.url : "(no URL)", r->why);
  exit(1);
}

/* One command that must work; the reply is the caller's to free. */
static kc__rreply rcli_cmd(rcli *r, const char *what, int argc, const char *const *argv) {
  size_t lens[16];
  for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
  kc__rreply rep;
  if (kc__rconn_cmd(r->conn, argc, argv, lens, &rep, r->why, sizeof r->why)) rcli_die(r, what);
  if (rep.type == KC__R_ERROR) {
    snprintf(r->why, sizeof r->why, "%s: %s", argv[0], rep.str);
    rcli_die(r, what);
  }
  return rep;
}

/* The prefix as a SCAN pattern that matches it literally. */
static void scan_pattern(const char *prefix, char *out, size_t len) {
  size_t o = 0;
  for (const char *p = prefix; *p && o + 3 < len; p++) {
    if (strchr("*?[]\\", *p)) out[o++] = '\\';
    out[o++] = *p;
  }
  out[o++] = '*';
  out[o] = 0;
}

/* Every key under the prefix (malloc). */
static char **rcli_keys(rcli *r, size_t *n) {
  char pattern[300], cursor[32] = "0";
  scan_pattern(r->cfg.prefix, pattern, sizeof pattern);
  char **keys = NULL;
  size_t cap = 0;
  *n = 0;
  do {
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    kc__rreply rep = rcli_cmd(r, "ls", 6, argv);
    if (rep.type != KC__R_ARRAY || rep.n != 2 || rep.elem[1].type != KC__R_ARRAY) {
      snprintf(r->why, sizeof r->why, "unexpected reply to SCAN");
      rcli_die(r, "ls");
    }
    snprintf(cursor, sizeof cursor, "%s", rep.elem[0].str ? rep.elem[0].str : "0");
    for (size_t i = 0; i < rep.elem[1].n; i++) {
      if (*n == cap) {
        cap = cap ? cap * 2 : 256;
        keys = realloc(keys, cap * sizeof *keys);
        if (!keys) {
          fprintf(stderr, "kcache: out of memory\n");
          exit(1);
        }
      }
      keys[(*n)++] = strdup(rep.elem[1].elem[i].str ? rep.elem[1].elem[i].str : "");
    }
    kc__rreply_free(NULL, &rep);
  } while (strcmp(cursor, "0") != 0);
  return keys;
}

static void keys_free(char **keys, size_t n) {
  for (size_t i = 0; i < n; i++) free(keys[i]);
  free(keys);
}

/* A key's parts after the prefix: namespace ("" or "hmac-xxxxxxxx"), the
 * 32 hex digits, and whether it is a lock. False for anything else. */
static bool key_parts(const rcli *r, const char *name, char ns[24], uint8_t key[16], bool *lock) {
  const char *p = name + strlen(r->cfg.prefix);
  ns[0] = 0;
  if (!strncmp(p, "hmac-", 5) && strlen(p) > 14 && p[13] == ':') {
    snprintf(ns, 24, "%.13s", p);
    p += 14;
  }
  char h[33];
  snprintf(h, sizeof h, "%.32s", p);
  if (!kc__store_unhex(h, key)) return false;
  *lock = !strcmp(p + 32, ":lock");
  return *lock || p[32] == 0;
}

static int remote_ping(cli *c, rcli *r) {
  double t0 = (double)kc__now_ns();
  if (kc__rconn_open(NULL, &r->cfg, &r->conn, r->why, sizeof r->why)) rcli_die(r, "ping");
  double connect_ms = ((double)kc__now_ns() - t0) / 1e6, best = 1e30, sum = 0;
  enum { PINGS = 10 };
  for (int i = 0; i < PINGS; i++) {
    const char *argv[] = {"PING"};
    double p0 = (double)kc__now_ns();
    kc__rreply rep = rcli_cmd(r, "ping", 1, argv);
    double dt = ((double)kc__now_ns() - p0) / 1e6;
    kc__rreply_free(NULL, &rep);
    sum += dt;
    if (dt < best) best = dt;
  }
  const char *info_argv[] = {"INFO"};
  kc__rreply info = rcli_cmd(r, "ping", 1, info_argv);
  char version[64] = "?", policy[64] = "?", used[64] = "?";
  unsigned long long maxmem = 0;
  for (const char *l = info.str; l && *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
    if (!strncmp(l, "redis_version:", 14)) sscanf(l + 14, "%63[^\r\n]", version);
    else if (!strncmp(l, "maxmemory_policy:", 17)) sscanf(l + 17, "%63[^\r\n]", policy);
    else if (!strncmp(l, "used_memory_human:", 18)) sscanf(l + 18, "%63[^\r\n]", used);
    else if (!strncmp(l, "maxmemory:", 10)) maxmem = strtoull(l + 10, NULL, 10);
  }
  kc__rreply_free(NULL, &info);
  size_t n, entries = 0, locks = 0, mine = 0;
  char **keys = rcli_keys(r, &n);
  for (size_t i = 0; i < n; i++) {
    char ns[24];
    uint8_t key[16];
    bool lock;
    if (!key_parts(r, keys[i], ns, key, &lock)) continue;
    if (lock) locks++;
    else {
      entries++;
      char want[24];
      snprintf(want, sizeof want, "%.*s", r->cfg.ns[0] ? (int)strlen(r->cfg.ns) - 1 : 0, r->cfg.ns);
      mine += !strcmp(ns, want);
    }
  }
  keys_free(keys, n);
  if (c->json) {
    printf("{\"url\": ");
    json_str(r->cfg.url);
    printf(", \"redis_version\": ");
    json_str(version);
    printf(", \"hiredis\": ");
    json_str(kc__hiredis_name());
    printf(", \"connect_ms\": %.3f, \"rtt_min_ms\": %.3f, \"rtt_avg_ms\": %.3f, \"prefix\": ", connect_ms, best,
           sum / PINGS);
    json_str(r->cfg.prefix);
    printf(", \"namespace\": ");
    json_str(r->cfg.ns);
    printf(", \"entries\": %zu, \"entries_in_namespace\": %zu, \"locks\": %zu, \"maxmemory\": %llu, "
           "\"maxmemory_policy\": ",
           entries, mine, locks, maxmem);
    json_str(policy);
    printf("}\n");
  } else {
    printf("server      %s: PONG (redis %s)\n", r->cfg.url, version);
    printf("client      %s; no TLS\n", kc__hiredis_name());
    printf("connect     %.2f ms\n", connect_ms);
    printf("round trip  %.3f ms (min of %d), %.3f ms on average\n", best, PINGS, sum / PINGS);
    printf("namespace   %s%s (%s)\n", r->cfg.prefix, r->cfg.ns,
           r->cfg.has_secret ? "KC_REMOTE_KEY set: entries are authenticated"
                             : "no KC_REMOTE_KEY: entries are not authenticated");
    printf("entries     %zu under %s (%zu in this namespace), %zu lock%s held\n", entries, r->cfg.prefix, mine,
           locks, locks == 1 ? "" : "s");
    printf("memory      %s used, maxmemory %llu, policy %s\n", used, maxmem, policy);
    if (!maxmem || strncmp(policy, "allkeys-", 8))
      printf("            (as a cache, Redis wants a maxmemory and the allkeys-lru policy: kcache sets no expiry)\n");
  }
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int remote_ls(cli *c, rcli *r) {
  if (kc__rconn_open(NULL, &r->cfg, &r->conn, r->why, sizeof r->why)) rcli_die(r, "ls");
  size_t n, shown = 0;
  char **keys = rcli_keys(r, &n);
  if (n) qsort(keys, n, sizeof *keys, by_name);
  if (c->json) printf("[");
  else if (n) printf("%-12s  %-13s  %-7s  %-20s  %-14s  %10s  %7s  %s\n", "KEY", "NAMESPACE", "BACKEND", "ENTRY", "PARAMS",
                     "SIZE", "AGE", "MAC");
  char maxs[32];
  snprintf(maxs, sizeof maxs, "%llu", (unsigned long long)r->cfg.max_entry);
  for (int pass = 0; pass < 2; pass++) /* entries, then locks */
    for (size_t i = 0; i < n; i++) {
      char ns[24], hexk[33], sz[32], age[32];
      uint8_t key[16];
      bool lock;
      if (!key_parts(r, keys[i], ns, key, &lock) || lock != (pass == 1)) continue;
      kc__store_hex(key, hexk);
      if (lock) {
        const char *argv[] = {"GET", keys[i]}, *pargv[] = {"PTTL", keys[i]};
        kc__rreply v = rcli_cmd(r, "ls", 2, argv), t = rcli_cmd(r, "ls", 2, pargv);
        if (c->json) {
          printf("%s\n {\"key\": \"%s\", \"namespace\": ", shown++ ? "," : "", hexk);
          json_str(ns);
          printf(", \"lock\": true, \"holder\": ");
          json_str(v.str);
          printf(", \"ttl_ms\": %lld}", t.integer);
        } else {
          printf("%.12s  %-13s  lock held by %s (%lld ms left)\n", hexk, ns[0] ? ns : "-", v.str ? v.str : "?",
                 t.integer);
        }
        kc__rreply_free(NULL, &v);
        kc__rreply_free(NULL, &t);
        continue;
      }
      /* the head for the metadata; the whole value only to check a MAC */
      bool check = r->cfg.has_secret && ns[0] && !strncmp(r->cfg.ns, ns, strlen(ns));
      const char *argv[] = {"GETRANGE", keys[i], "0", check ? maxs : "65535"}, *sargv[] = {"STRLEN", keys[i]};
      kc__rreply v = rcli_cmd(r, "ls", 4, argv), len = rcli_cmd(r, "ls", 2, sargv);
      size_t total = (size_t)len.integer, img = 0;
      kc__entry e;
      char why[256] = "", auth[40];
      bool ok = v.type == KC__R_STRING && kc__entry_peek_mem(v.str, v.len, total, &e, why, sizeof why) == KC_OK;
      /* a MAC follows the entry file exactly when 40 bytes are left over */
      uint64_t image = ok ? kc__entry_image_size(v.str) : 0; /* what the header says the entry holds */
      bool has_mac = ok && total == image + KC__REMOTE_TRAILER;
      if (!ns[0]) snprintf(auth, sizeof auth, "%s", has_mac ? "present" : "none");
      else if (!check) snprintf(auth, sizeof auth, "another secret");
      else if (total > r->cfg.max_entry) snprintf(auth, sizeof auth, "too large to check");
      else
        snprintf(auth, sizeof auth, "%s",
                 kc__remote_unwrap(&r->cfg, v.str, v.len, &img, why, sizeof why) == KC_OK ? "ok" : "BAD");
      if (c->json) {
        printf("%s\n {\"key\": \"%s\", \"name\": ", shown++ ? "," : "", hexk);
        json_str(keys[i]);
        printf(", \"namespace\": ");
        json_str(ns);
        printf(", \"size\": %zu, \"mac\": ", total);
        json_str(auth);
        if (ok) {
          printf(", \"backend\": ");
          json_str(e.backend);
          printf(", \"entry\": ");
          json_str(e.entry);
          printf(", \"params\": ");
          json_str(e.params);
          printf(", \"created_ns\": %llu}", (unsigned long long)e.created_ns);
        } else {
          printf(", \"damaged\": ");
          json_str(why);
          printf("}");
        }
      } else if (ok) {
        printf("%.12s  %-13s  %-7s  %-20s  %-14s  %10s  %7s  %s\n", hexk, ns[0] ? ns : "-", e.backend, e.entry,
               *e.params ? e.params : "-", human_size(total, sz, sizeof sz), ago((int64_t)e.created_ns, age, sizeof age),
               auth);
        shown++;
      } else {
        printf("%.12s  %-13s  (damaged: %s)  %s\n", hexk, ns[0] ? ns : "-", why, human_size(total, sz, sizeof sz));
        shown++;
      }
      if (ok) kc__entry_free(NULL, &e);
      kc__rreply_free(NULL, &v);
      kc__rreply_free(NULL, &len);
    }
  if (c->json) printf("%s]\n", shown ? "\n" : "");
  else if (!shown) printf("(no entries under %s on %s)\n", r->cfg.prefix, r->cfg.url);
  keys_free(keys, n);
  return 0;
}

static int remote_clear(cli *c, rcli *r) {
  if (kc__rconn_open(NULL, &r->cfg, &r->conn, r->why, sizeof r->why)) rcli_die(r, "clear");
  size_t n, entries = 0, locks = 0;
  char **keys = rcli_keys(r, &n);
  for (size_t i = 0; i < n; i++) {
    char ns[24];
    uint8_t key[16];
    bool lock;
    if (!key_parts(r, keys[i], ns, key, &lock)) continue; /* not kcache's, though under the prefix */
    const char *argv[] = {"DEL", keys[i]};
    kc__rreply rep = rcli_cmd(r, "clear", 2, argv);
    if (rep.integer == 1) {
      if (lock) locks++;
      else entries++;
    }
    kc__rreply_free(NULL, &rep);
  }
  keys_free(keys, n);
  if (c->json) printf("{\"entries_removed\": %zu, \"locks_removed\": %zu}\n", entries, locks);
  else printf("removed %zu entries and %zu locks under %s on %s\n", entries, locks, r->cfg.prefix, r->cfg.url);
  return 0;
}

static int cmd_remote(cli *c) {
  const char *sub = NULL, *url = NULL, *prefix = NULL;
  unsigned long timeout = 2000;
  for (int i = 0; i < c->argc; i++) {
    const char *a = c->argv[i];
    if (!strcmp(a, "--url") && i + 1 < c->argc) url = c->argv[++i];
    else if (!strncmp(a, "--url=", 6)) url = a + 6;
    else if (!strcmp(a, "--prefix") && i + 1 < c->argc) prefix = c->argv[++i];
    else if (!strncmp(a, "--prefix=", 9)) prefix = a + 9;
    else if ((!strcmp(a, "--timeout") && i + 1 < c->argc) || !strncmp(a, "--timeout=", 10)) {
      const char *v = a[9] == '=' ? a + 10 : c->argv[++i];
      char *end;
      timeout = strtoul(v, &end, 10);
      if (*end || !timeout || timeout > 600000) die_usage("remote: --timeout takes milliseconds (1 to 600000)");
    } else if (!sub && a[0] != '-') sub = a;
    else die_usage("remote: unexpected argument '%s'", a);
  }
  if (!sub) die_usage("remote needs ping, ls or clear");
  int (*run)(cli *, rcli *) = !strcmp(sub, "ping")  ? remote_ping
                              : !strcmp(sub, "ls")  ? remote_ls
                              : !strcmp(sub, "clear") ? remote_clear
                                                      : NULL;
  if (!run) die_usage("remote: no subcommand '%s' (ping, ls, clear)", sub);
  rcli r;
  memset(&r, 0, sizeof r);
  kc_options o;
  kc_options_init(&o);
  o.remote_url = url;
  o.remote_prefix = prefix;
  o.remote_timeout_ms = (uint32_t)timeout;
  kc_status st = kc__remote_config_load(&o, &r.cfg, r.why, sizeof r.why);
  if (st == KC_ENOTFOUND) {
    fprintf(stderr, "kcache: remote: no server: give --url redis://host:port, or set KC_REMOTE\n");
    return 2;
  }
  if (st) rcli_die(&r, sub);
  int rc = run(c, &r);
  kc__rconn_close(r.conn);
  return rc;
}

/* ------------------------------------------------------------------ main */

static const char *const help_main =
    "usage: kcache [--dir DIR] [--json] COMMAND [ARGS]\n"
    "\n"
    "Looks after the disk cache of kcache, the JIT kernel compiler.\n"
    "\n"
    "commands:\n"
    "  stats                what the store holds, and its hit/miss counters\n"
    "  ls                   every entry: key, backend, entry, params, size, age, last use\n"
    "  show KEY             one entry: metadata, source closure, build log\n"
    "  verify [--repair]    checks every entry; --repair removes damaged ones\n"
    "  gc [--max-size SIZE] evicts least recently used entries down to SIZE\n"
    "  clear                removes every entry\n"
    "  explain KEY|ENTRY    why a kernel missed: what differs from the nearest entry\n"
    "  remote ping|ls|clear the shared Redis tier: reachable? what it holds; empty it\n"
    "  help [COMMAND]       this, or a command's help (also: COMMAND --help)\n"
    "\n"
    "options:\n"
    "  --dir DIR   the store (default $KC_CACHE_DIR, else $XDG_CACHE_HOME/kcache,\n"
    "              else ~/.cache/kcache)\n"
    "  --json      machine-readable output\n"
    "  --help      help\n";

static const struct {
  const char *name;
  int (*run)(cli *);
  const char *const *help;
} commands[] = {
    {"stats", cmd_stats, &help_stats},       {"ls", cmd_ls, &help_ls},          {"show", cmd_show, &help_show},
    {"verify", cmd_verify, &help_verify},    {"gc", cmd_gc, &help_gc},          {"clear", cmd_clear, &help_clear},
    {"explain", cmd_explain, &help_explain},  {"remote", cmd_remote, &help_remote},
};

int main(int argc, char **argv) {
  cli c;
  memset(&c, 0, sizeof c);
  const char *dir = NULL, *cmd = NULL;
  static char *rest[4096];
  bool help = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--dir")) {
      if (i + 1 >= argc) die_usage("--dir needs a directory");
      dir = argv[++i];
    } else if (!strncmp(a, "--dir=", 6)) {
      dir = a + 6;
    } else if (!strcmp(a, "--json")) {
      c.json = true;
    } else if (!cmd && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
      help = true;
    } else if (!cmd && a[0] == '-') {
      die_usage("unknown option '%s'", a);
    } else if (!cmd) {
      cmd = a;
    } else if (c.argc < (int)(sizeof rest / sizeof *rest)) {
      rest[c.argc++] = argv[i];
    } else {
      die_usage("too many arguments");
    }
  }
  c.argv = rest;
  if (help || !cmd || !strcmp(cmd, "help")) {
    const char *topic = cmd && !strcmp(cmd, "help") && c.argc ? c.argv[0] : NULL;
    for (size_t i = 0; topic && i < sizeof commands / sizeof *commands; i++)
      if (!strcmp(commands[i].name, topic)) {
        fputs(*commands[i].help, stdout);
        return 0;
      }
    if (topic) die_usage("no command '%s'", topic);
    fputs(help_main, cmd || help ? stdout : stderr);
    return cmd || help ? 0 : 2;
  }
  size_t k = 0, nc = sizeof commands / sizeof *commands;
  while (k < nc && strcmp(commands[k].name, cmd)) k++;
  if (k == nc) die_usage("no command '%s'", cmd);
  if (has_help(&c)) {
    fputs(*commands[k].help, stdout);
    return 0;
  }
  if (dir) snprintf(c.root, sizeof c.root, "%s", dir);
  else if (!kc__store_default_root(c.root, sizeof c.root)) {
    fprintf(stderr, "kcache: no store directory: give --dir, or set KC_CACHE_DIR or HOME\n");
    return 2;
  }
  kc__store_vdir(c.root, c.vdir, sizeof c.vdir);
  c.progress = !c.json && isatty(2);
  return commands[k].run(&c);
}
