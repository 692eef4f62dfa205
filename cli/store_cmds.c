/* SPDX-License-Identifier: MIT */
/*
 * cli/store_cmds.c -- owns the `kcache` commands on the local store: stats
 * (and --zero), ls, show, verify, gc and clear, with their help texts.
 * Entries are decoded through the codec (kc__entry_peek for listings,
 * kc__entry_read for the whole entry); eviction is the store's kc__store_gc.
 */
#include "cli.h"
#include "out.h"
#include "cache/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- stats */

const char cli_help_stats[] = "usage: kcache stats [--zero] [--dir DIR] [--json]\n"
                              "\n"
                              "What the store holds (entries, size and bound, backends, oldest and newest\n"
                              "use) and the counters that every process using it keeps: hits, misses,\n"
                              "writes, evictions, repairs; and, when a remote tier was used (or $KC_REMOTE\n"
                              "names one), its lookups, hits, misses, rejected values, errors, skips,\n"
                              "uploads, waits for another machine's compile, and time per lookup.\n"
                              "It reads the store's index (rebuilt when damaged or stale), not every\n"
                              "entry: `kcache verify` reads every entry.\n"
                              "\n"
                              "  -z, --zero  first zeroes the store's hits, misses, writes, evictions and\n"
                              "              repairs (for every process using it; what it holds is kept,\n"
                              "              and so are the remote tier's counters); ccache's -sz (-zs,\n"
                              "              -z -s) shows them as they are, then zeroes them\n"
                              "\n"
                              "An invalid $KC_CACHE_MAXSIZE is reported (a warning, as the library gives)\n"
                              "and the default bound shown, which is what the library then uses.\n";

typedef struct be_tally {
  char name[32];
  uint64_t count, bytes;
} be_tally;

typedef struct summary {
  size_t n;
  uint64_t total, damaged, max;
  int64_t oldest, newest;
  be_tally be[8];
  int nbe;
  kc__max_from max_from; /* where the bound comes from; with max_error, the one that is not a size */
  char max_error[PATH_MAX + 256]; /* "" or why the bound is the default instead */
  kc__store_counters k;
} summary;

/* The shared counters' last change, which summarize takes for the store's
 * last lookup: the mtime of vdir/stats, and the lookups counted then. */
typedef struct last_lookup {
  struct timespec mtime;
  uint64_t lookups; /* hits + misses */
  bool known; /* the file is there (a regular file) */
} last_lookup;

static void lookup_mark(const cli *c, last_lookup *m) {
  char path[PATH_MAX + 16];
  struct stat st;
  kc__store_counters k;
  snprintf(path, sizeof path, "%s/stats", c->vdir);
  memset(m, 0, sizeof *m);
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
  kc__store_counters_read(c->vdir, &k);
  m->mtime = st.st_mtim;
  m->lookups = k.hits + k.misses;
  m->known = true;
}

/* After a command rewrote the counters without a lookup (stats --zero, a
 * gc's recount), their file's mtime goes back to m's, so that the newest
 * use stats shows is not the command's own (it was "0 s ago" after every
 * `kcache -z`). Unless a lookup came meanwhile, which counted a hit or a
 * miss (zeroed: the counters were zeroed in between, so any counts one); a
 * lookup in the instant between that check and the restore is shown older,
 * until the next. Best effort: a file of another user's is left as it is. */
static void lookup_restore(const cli *c, const last_lookup *m, bool zeroed) {
  if (!m->known) return;
  char path[PATH_MAX + 16];
  kc__store_counters k;
  kc__store_counters_read(c->vdir, &k);
  if (k.hits + k.misses != (zeroed ? 0 : m->lookups)) return;
  snprintf(path, sizeof path, "%s/stats", c->vdir);
  struct timespec t[2] = {{.tv_nsec = UTIME_OMIT}, m->mtime};
  (void)utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW);
}

/* stats --zero: the counters of use zeroed, the last lookup kept. */
static void zero_counters(const cli *c) {
  last_lookup m;
  lookup_mark(c, &m);
  if (!kc__store_counters_zero(c->vdir))
    cli_fail("stats --zero: cannot write %s/stats: %s", c->vdir, strerror(errno));
  lookup_restore(c, &m, true);
}

/* From the store's summary and index (cache/index.h), not from every
 * entry: what it holds, by backend; entries that could not be read when
 * they were indexed count as damaged. Last uses are those the index
 * records (a hit touches the entry's file, not the index); the newest use
 * is also the shared counters' last change (every hit and miss rewrites
 * them; the commands that rewrite them otherwise put their mtime back:
 * lookup_restore). */
static void summarize(const cli *c, summary *s) {
  memset(s, 0, sizeof *s);
  kc__index_summary t;
  if (!kc__index_summarize(NULL, c->vdir, cli_index_writable(c), &t))
    cli_fail("out of memory reading the index");
  s->n = t.count;
  s->total = t.bytes;
  s->damaged = t.damaged;
  s->oldest = t.oldest;
  s->newest = t.newest;
  for (int j = 0; j < t.nbe; j++) {
    char be[9];
    memcpy(be, t.be[j].backend, 8);
    be[8] = 0;
    s->nbe = j + 1;
    snprintf(s->be[j].name, sizeof s->be[j].name, "%s", be[0] ? be : "(damaged)");
    s->be[j].count = t.be[j].count;
    s->be[j].bytes = t.be[j].bytes;
  }
  char path[PATH_MAX + 16];
  struct stat st;
  snprintf(path, sizeof path, "%s/stats", c->vdir);
  int64_t counted = stat(path, &st) == 0 ? kc__stat_mtime_ns(&st) : 0;
  if (s->n && counted > s->newest) s->newest = counted;
  s->max_error[0] = 0;
  if (!kc__store_max_size(&c->conf, c->root, &c->trust, &s->max, &s->max_from, s->max_error,
                          sizeof s->max_error - 16))
    strcat(s->max_error, "; using 1G");
  kc__store_counters_read(c->vdir, &s->k);
}

/* Where the bound comes from, as stats says it ("default: ... is not a size"
 * when the one that counts is not). */
static const char *max_from_name(const summary *s) {
  if (s->max_error[0])
    return s->max_from == KC__MAX_ENV ? "default: KC_CACHE_MAXSIZE is not a size"
                                      : "default: kcache.conf's max_size is not used";
  return s->max_from == KC__MAX_ENV    ? "KC_CACHE_MAXSIZE"
         : s->max_from == KC__MAX_FILE ? "kcache.conf"
                                       : "default";
}

static void stats_json(const cli *c, const summary *s, bool zeroed, bool after) {
  const kc__store_counters *k = &s->k;
  printf("{\"directory\": ");
  json_str(c->root);
  printf(", \"format\": %u, \"entries\": %zu, \"bytes\": %llu, \"max_bytes\": %llu, \"damaged\": %llu,\n",
         KC__STORE_FORMAT, s->n, (unsigned long long)s->total, (unsigned long long)s->max,
         (unsigned long long)s->damaged);
  printf(" \"max_bytes_from\": \"%s\", \"max_size_error\": ", s->max_error[0] ? "default" : max_from_name(s));
  if (s->max_error[0]) json_str(s->max_error);
  else printf("null");
  printf(",\n \"backends\": {");
  for (int j = 0; j < s->nbe; j++) {
    printf("%s", j ? ", " : "");
    json_str(s->be[j].name);
    printf(": {\"entries\": %llu, \"bytes\": %llu}", (unsigned long long)s->be[j].count,
           (unsigned long long)s->be[j].bytes);
  }
  printf("},\n \"oldest_use_ns\": %lld, \"newest_use_ns\": %lld,\n", (long long)s->oldest,
         (long long)s->newest);
  /* "zeroed_after_shown": the counters are those before the zeroing (-sz) */
  printf(" \"zeroed\": %s, \"zeroed_after_shown\": %s, \"counters\": {\"hits\": %llu, \"misses\": %llu, "
         "\"writes\": %llu, \"evictions\": "
         "%llu, "
         "\"repairs\": %llu}",
         zeroed ? "true" : "false", after ? "true" : "false", (unsigned long long)k->hits,
         (unsigned long long)k->misses, (unsigned long long)k->writes, (unsigned long long)k->evictions,
         (unsigned long long)k->repairs);
  cli_stats_remote(c);
  printf("}\n");
}

static void stats_text(const cli *c, const summary *s, bool zeroed, bool after) {
  const kc__store_counters *k = &s->k;
  char a[32], b[32], t[32];
  printf("directory   %s (format v%u)\n", c->root, KC__STORE_FORMAT);
  printf("entries     %zu\n", s->n);
  if (s->damaged)
    printf("damaged     %llu (kcache verify --repair removes them)\n", (unsigned long long)s->damaged);
  printf("size        %s of at most %s (%s)\n", human_size(s->total, a, sizeof a),
         human_size(s->max, b, sizeof b), max_from_name(s));
  for (int j = 0; j < s->nbe; j++)
    printf("%-11s %s: %llu entries, %s\n", j ? "" : "backends", s->be[j].name,
           (unsigned long long)s->be[j].count, human_size(s->be[j].bytes, t, sizeof t));
  if (s->n) {
    printf("oldest use  %s ago\n", ago(s->oldest, a, sizeof a));
    printf("newest use  %s ago\n", ago(s->newest, a, sizeof a));
  }
  uint64_t lookups = k->hits + k->misses;
  printf("counters    %llu hits, %llu misses", (unsigned long long)k->hits, (unsigned long long)k->misses);
  if (lookups) printf(" (%.0f%% hits)", 100.0 * (double)k->hits / (double)lookups);
  printf(", %llu writes, %llu evictions, %llu repairs%s\n", (unsigned long long)k->writes,
         (unsigned long long)k->evictions, (unsigned long long)k->repairs,
         !zeroed ? ""
         : after ? " (shown, then zeroed)"
                 : " (just zeroed)");
  cli_stats_remote(c);
}

int cmd_stats(cli *c) {
  bool zero = false;
  for (int i = 0; i < c->argc; i++) {
    if (cli_flag(c->argv[i], "--zero", "-z")) zero = true;
    else cli_unexpected(c, c->argv[i]);
  }
  /* stats --zero zeroes, then shows the zeros; ccache's -sz shows the
   * counters as they were, then zeroes them (read, then zeroed before
   * anything is printed, so that a failure to zero is the whole output) */
  bool after = zero && c->zero_after;
  if (zero && !after) zero_counters(c);
  summary s;
  summarize(c, &s);
  if (after) zero_counters(c);
  if (s.max_error[0]) fprintf(stderr, "kcache: warning: %s\n", s.max_error);
  if (c->json) stats_json(c, &s, zero, after);
  else stats_text(c, &s, zero, after);
  return 0;
}

/* ------------------------------------------------------------------- ls */

const char cli_help_ls[] = "usage: kcache ls [--sort use|age|size|entry] [--dir DIR] [--json]\n"
                           "\n"
                           "Every entry: its key (the table shows the first 12 digits; any unique\n"
                           "prefix of 4 or more names an entry), backend, kernel entry name,\n"
                           "specialization parameters, SOURCE and BUILD, size, age (since it was\n"
                           "compiled) and last use. Sorted by last use, most recent first, unless\n"
                           "--sort says otherwise.\n"
                           "\n"
                           "SOURCE is a short hash of the source that was compiled (the kernel, every\n"
                           "definition it calls, kcache's prelude): entries that differ only by a\n"
                           "callee differ there. BUILD is a short hash of the compiler and device\n"
                           "identity, the compile options and kcache's version: entries that differ\n"
                           "only by the compiler differ there. `kcache explain KEY` says what differs.\n";

typedef struct row {
  kc__store_file f;
  kc__entry e;
  bool ok;
  bool unreadable; /* not ok: this user cannot read it (not damaged) */
  char why[128];
  char source[9], build[9];
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
  return (x->f.mtime_ns < y->f.mtime_ns) - (x->f.mtime_ns > y->f.mtime_ns); /* last use, newest first */
}

/* The hash of how an entry was built: what the key holds besides the
 * source, the backend, the entry and the parameters (shown themselves). */
static void build_hash(const kc__entry *e, char out[9]) {
  size_t n = strlen(e->identity) + strlen(e->options) + strlen(e->library) + 3;
  char *s = malloc(n);
  if (!s) cli_fail("out of memory");
  snprintf(s, n, "%s\n%s\n%s", e->identity, e->options, e->library);
  short_text_hash(s, out);
  free(s);
}

static void ls_json_row(const row *r, bool first) {
  char hex[33], tu[33];
  kc__store_hex(r->f.key, hex);
  printf("%s\n {\"key\": \"%s\", \"path\": ", first ? "" : ",", hex);
  json_str(r->f.path);
  printf(", \"size\": %llu, \"last_use_ns\": %lld", (unsigned long long)r->f.size, (long long)r->f.mtime_ns);
  if (!r->ok) {
    printf(", \"%s\": ", r->unreadable ? "unreadable" : "damaged");
    json_str(r->why);
    printf("}");
    return;
  }
  kc__store_hex(r->e.tu_hash, tu);
  printf(", \"backend\": ");
  json_str(r->e.backend);
  printf(", \"entry\": ");
  json_str(r->e.entry);
  printf(", \"params\": ");
  json_str(r->e.params);
  printf(", \"options\": ");
  json_str(r->e.options);
  printf(", \"identity\": ");
  json_str(r->e.identity);
  printf(", \"library\": ");
  json_str(r->e.library);
  printf(", \"tu_hash\": \"%s\", \"source\": \"%s\", \"build\": \"%s\"", tu, r->source, r->build);
  printf(", \"created_ns\": %llu, \"compile_ns\": %llu}", (unsigned long long)r->e.created_ns,
         (unsigned long long)r->e.compile_ns);
}

static void ls_text_row(const row *r) {
  char hex[33], sz[32], age[32], use[32];
  kc__store_hex(r->f.key, hex);
  if (!r->ok) {
    printf("%.12s  (%s: %s)  %s\n", hex, r->unreadable ? "unreadable here" : "damaged", r->why,
           human_size(r->f.size, sz, sizeof sz));
    return;
  }
  printf("%.12s  %-7s  %-24s  %-20s  %-8s  %-8s  %10s  %7s  %8s\n", hex, r->e.backend, r->e.entry,
         *r->e.params ? r->e.params : "-", r->source, r->build, human_size(r->f.size, sz, sizeof sz),
         ago((int64_t)r->e.created_ns, age, sizeof age), ago(r->f.mtime_ns, use, sizeof use));
}

int cmd_ls(cli *c) {
  for (int i = 0; i < c->argc; i++)
    if (!cli_opt(c, &i, "--sort", &sort_key)) cli_unexpected(c, c->argv[i]);
  if (strcmp(sort_key, "use") && strcmp(sort_key, "age") && strcmp(sort_key, "size") &&
      strcmp(sort_key, "entry"))
    cli_usage("ls: --sort takes use, age, size or entry");
  size_t n;
  kc__store_file *files = cli_list(c, &n);
  row *rows = calloc(n ? n : 1, sizeof *rows);
  if (!rows) cli_fail("out of memory");
  size_t m = 0; /* the rows of entries still there */
  for (size_t i = 0; i < n; i++) {
    row *r = &rows[m];
    r->f = files[i]; /* (its path stays the list's) */
    kc_status st = kc__entry_peek(files[i].path, &r->e, r->why, sizeof r->why);
    if (st == KC_ENOTFOUND) continue; /* removed since the listing (an eviction, a clear) */
    m++;
    r->ok = st == KC_OK;
    r->unreadable = st == KC_EUNAVAILABLE;
    if (!r->ok) continue;
    short_hex(r->e.tu_hash, r->source);
    build_hash(&r->e, r->build);
  }
  size_t listed = n;
  n = m;
  qsort(rows, n, sizeof *rows, row_cmp);
  if (c->json) printf("[");
  else if (n)
    printf("%-12s  %-7s  %-24s  %-20s  %-8s  %-8s  %10s  %7s  %8s\n", "KEY", "BACKEND", "ENTRY", "PARAMS",
           "SOURCE", "BUILD", "SIZE", "AGE", "LAST USE");
  else printf("(no entries in %s)\n", c->root);
  for (size_t i = 0; i < n; i++) {
    if (c->json) ls_json_row(&rows[i], i == 0);
    else ls_text_row(&rows[i]);
    if (rows[i].ok) kc__entry_free(NULL, &rows[i].e);
  }
  if (c->json) printf("%s]\n", n ? "\n" : "");
  free(rows);
  kc__store_list_free(NULL, files, listed);
  return 0;
}

/* ----------------------------------------------------------------- show */

const char cli_help_show[] = "usage: kcache show KEY|ENTRY [--params P] [--dir DIR] [--json]\n"
                             "\n"
                             "One entry in full: its metadata (backend, compiler and device identity,\n"
                             "entry, parameters, options, when it was compiled and how long it took),\n"
                             "the source closure it was compiled from, and the compiler's log.\n"
                             "\n"
                             "KEY is the full key or a unique prefix of at least 4 hex digits. ENTRY is\n"
                             "a kernel name: its most recently compiled entry is shown, optionally only\n"
                             "among entries with parameters P (as `kcache explain` takes them). In\n"
                             "--json, bytes that are not UTF-8 (in a log or a source) are written as\n"
                             "\\u00XX, the byte's value.\n";

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

static void def_hash(const kc__key_def *d, char hex[33]) {
  uint8_t h[16];
  kc__store_text_hash(d->text, d->len, h);
  kc__store_hex(h, hex);
}

static void show_json(const kc__entry *e, const char *path) {
  char hex[33], tu[33];
  kc__store_hex(e->key, hex);
  kc__store_hex(e->tu_hash, tu);
  printf("{\"key\": \"%s\", \"path\": ", hex);
  json_str(path);
  printf(", \"size\": %zu, \"artifact_size\": %zu, \"format\": %u,\n \"backend\": ", e->size,
         e->artifact_size, e->format);
  json_str(e->backend);
  printf(", \"identity\": ");
  json_str(e->identity);
  printf(", \"entry\": ");
  json_str(e->entry);
  printf(", \"params\": ");
  json_str(e->params);
  printf(", \"options\": ");
  json_str(e->options);
  printf(", \"library\": ");
  json_str(e->library);
  printf(",\n \"created_ns\": %llu, \"compile_ns\": %llu, \"tu_hash\": \"%s\", \"signature\": [",
         (unsigned long long)e->created_ns, (unsigned long long)e->compile_ns, tu);
  for (uint32_t i = 0; i < e->nsig; i++) printf("%s%llu", i ? ", " : "", (unsigned long long)e->sig[i]);
  printf("],\n \"closure\": [");
  for (uint32_t i = 0; i < e->ndefs; i++) {
    char hh[33];
    def_hash(&e->defs[i], hh);
    printf("%s\n  {\"name\": ", i ? "," : "");
    json_str(e->defs[i].name);
    printf(", \"hash\": \"%s\", \"source\": ", hh);
    json_strn(e->defs[i].text, e->defs[i].len);
    printf("}");
  }
  printf("],\n \"log\": ");
  json_strn(e->log, e->log_len);
  printf("}\n");
}

static void show_text(const kc__entry *e, const char *path) {
  char hex[33], sigs[1024], a[64], b[64];
  kc__store_hex(e->key, hex);
  sig_text(e, sigs, sizeof sigs);
  printf("key          %s\n", hex);
  printf("file         %s\n", path);
  printf("size         %s (artifact %s)\n", human_size(e->size, a, sizeof a),
         human_size(e->artifact_size, b, sizeof b));
  printf("backend      %s\n", e->backend);
  printf("identity     %s\n", e->identity);
  printf("entry        %s\n", e->entry);
  printf("params       %s\n", *e->params ? e->params : "(none)");
  printf("options      %s\n", *e->options ? e->options : "(none)");
  printf("signature    %s\n", sigs);
  printf("kcache       %s, store format %u\n", e->library, e->format);
  printf("created      %s (%s ago)\n", date_str((int64_t)e->created_ns, a, sizeof a),
         ago((int64_t)e->created_ns, b, sizeof b));
  printf("compile      %.1f ms\n", (double)e->compile_ns / 1e6);
  printf("closure      %u definition%s\n", e->ndefs, e->ndefs == 1 ? "" : "s");
  for (uint32_t i = 0; i < e->ndefs; i++) {
    char hh[33];
    def_hash(&e->defs[i], hh);
    printf("\n--- %s (%.12s)\n%s%s", e->defs[i].name, hh, e->defs[i].text,
           e->defs[i].len && e->defs[i].text[e->defs[i].len - 1] == '\n' ? "" : "\n");
  }
  printf("\n--- build log\n%s%s", e->log_len ? e->log : "(empty)\n",
         e->log_len && e->log[e->log_len - 1] != '\n' ? "\n" : "");
}

int cmd_show(cli *c) {
  const char *what = NULL, *params = NULL;
  for (int i = 0; i < c->argc; i++) {
    if (cli_opt(c, &i, "--params", &params)) continue;
    if (what || c->argv[i][0] == '-') cli_unexpected(c, c->argv[i]);
    what = c->argv[i];
  }
  if (!what) cli_usage("show takes one KEY or ENTRY name");
  char path[PATH_MAX];
  kc__entry e;
  if (!cli_resolve(c, what, params, &e, path, sizeof path)) return 1;
  if (c->json) show_json(&e, path);
  else show_text(&e, path);
  kc__entry_free(NULL, &e);
  return 0;
}

/* --------------------------------------------------------------- verify */

const char cli_help_verify[] = "usage: kcache verify [--repair] [--dir DIR] [--json]\n"
                               "\n"
                               "Reads every entry and checks its header, checksums, format version, that\n"
                               "it holds the key its name says and that it sits in the right directory.\n"
                               "Damaged entries are listed; --repair removes them (a program that needs\n"
                               "one compiles it again). An entry that cannot be read here (out of memory,\n"
                               "a read error) is reported and left alone. It also checks who may have\n"
                               "written the store: an entry owned by another user or writable by group or\n"
                               "others (in a private store), or without a valid MAC when $KC_CACHE_KEY is\n"
                               "set, is listed as not trusted (--repair removes it), and a store that\n"
                               "kcache would refuse to use (directories writable by others) is reported.\n"
                               "FIFOs, sockets, devices, directories and links where the store keeps its\n"
                               "entries, indexes, locks, temp files or counters (kcache never makes them;\n"
                               "someone sharing the store can) are listed; --repair removes them.\n"
                               "Exit status 1 if damage was found and not removed, or the store is refused.\n"
                               "A terminal shows progress.\n";

typedef struct verify_tally {
  size_t bad, removed, unreadable;
} verify_tally;

/* Prints one finding (and whether repair removed the file). */
static void verify_report(const cli *c, const uint8_t key[16], const char *path, const char *why, bool rm,
                          bar *b, verify_tally *t) {
  char hex[33];
  kc__store_hex(key, hex);
  if (c->json) {
    printf("%s\n  {\"key\": \"%s\", \"path\": ", t->bad ? "," : "", hex);
    json_str(path);
    printf(", \"reason\": ");
    json_str(why);
    printf(", \"removed\": %s}", rm ? "true" : "false");
  } else {
    bar_break(b);
    printf("%s  %s%s\n", hex, why, rm ? " (removed)" : "");
  }
  t->bad++;
}

/* Checks one file: who may have written it (cache/trust.h: its owner and
 * mode, and its MAC under $KC_CACHE_KEY), then its content; reports it (and
 * removes it with repair) if it is not sound. */
static void verify_one(const cli *c, const kc__store_trust *trust, const kc__store_file *f, bool repair,
                       bar *b, verify_tally *t) {
  char why[1024] = "", tmp[1024];
  if (!kc__store_check_file(trust, f->path, tmp, sizeof tmp)) {
    snprintf(why, sizeof why, "not trusted: %.900s", tmp);
    bool rm = repair && unlink(f->path) == 0;
    t->removed += rm;
    verify_report(c, f->key, f->path, why, rm, b, t);
    return;
  }
  kc__entry e;
  kc_status st = kc__entry_read(NULL, f->path, f->key, &e, why, sizeof why);
  if (st == KC_OK) {
    kc__entry_free(NULL, &e);
    if (!f->misplaced) return;
    snprintf(why, sizeof why, "in the wrong directory");
  } else if (st == KC_ENOTFOUND) {
    return; /* evicted meanwhile */
  } else if (st == KC_EUNAVAILABLE) {
    /* not the entry's fault (out of memory, a read error): not damage */
    memcpy(tmp, why, sizeof tmp);
    snprintf(why, sizeof why, "unreadable here: %.900s (left alone)", tmp);
    t->unreadable++;
  }
  bool rm = repair && st != KC_EUNAVAILABLE && unlink(f->path) == 0;
  t->removed += rm;
  verify_report(c, f->key, f->path, why, rm, b, t);
}

/* What a neighbour planted where the store keeps its files (a FIFO, a
 * socket, a device, a directory or a link; cache/planted.c): listed, and
 * removed with repair. Returns how many are left; *found: how many there were. */
static size_t verify_planted(const cli *c, bool repair, bar *b, size_t *found) {
  kc__store_planted *p = NULL;
  size_t n = 0, left = 0;
  if (kc__store_planted_list(NULL, c->vdir, &p, &n) != KC_OK) cli_fail("%s", kc_errmsg(NULL));
  if (c->json) printf(", \"planted\": [");
  for (size_t i = 0; i < n; i++) {
    bool rm = repair && kc__store_planted_remove(&p[i]);
    left += !rm;
    if (c->json) {
      printf("%s\n  {\"path\": ", i ? "," : "");
      json_str(p[i].path);
      printf(", \"reason\": ");
      json_str(p[i].why);
      printf(", \"removed\": %s}", rm ? "true" : "false");
    } else {
      bar_break(b);
      printf("%s  %s%s\n", p[i].path, p[i].why, rm ? " (removed)" : "");
    }
  }
  *found = n;
  if (c->json) printf("%s]", n ? "\n" : "");
  else if (n)
    printf("%zu files that kcache never makes where the store keeps its own%s\n", n,
           !left    ? ", removed"
           : repair ? "; some could not be removed"
                    : " (--repair removes them)");
  free(p);
  return left;
}

int cmd_verify(cli *c) {
  bool repair = false;
  for (int i = 0; i < c->argc; i++) {
    if (cli_flag(c->argv[i], "--repair", NULL)) repair = true;
    else cli_unexpected(c, c->argv[i]);
  }
  /* Would this user's kcache use the store at all? (owner and mode of its
   * directories, the key) */
  kc__store_trust trust;
  char refused[1024] = "";
  bool shared = false;
  bool usable = kc__store_trust_load(&trust, c->root, &c->conf, &shared, refused, sizeof refused);
  if (!usable && repair) {
    /* removing files from a directory others may write proves nothing */
    repair = false;
    if (!c->json) printf("not repairing: kcache would not use this store (below)\n");
  }
  size_t n;
  kc__store_file *files = cli_list(c, &n);
  bar b;
  bar_init(&b, "verify", c->progress);
  verify_tally t = {0, 0, 0};
  if (c->json) {
    printf("{\"checked\": %zu, \"shared_layout\": %s, \"store_refused\": ", n, shared ? "true" : "false");
    if (usable) printf("null");
    else json_str(refused);
    printf(", \"damaged\": [");
  } else {
    if (shared)
      printf("store: laid out as a shared store (setgid, group-writable), checked as one; kcache uses it so "
             "only with KC_CACHE_SHARED=1 or kc_options.cache_shared\n");
    if (!usable) printf("store: %s\n", refused);
  }
  for (size_t i = 0; i < n; i++) {
    bar_draw(&b, i + 1, n);
    verify_one(c, &trust, &files[i], repair, &b, &t);
  }
  kc__store_trust_wipe(&trust);
  kc__store_list_free(NULL, files, n);
  if (t.removed) { /* recount (not a lookup: the last one is kept) */
    last_lookup m;
    lookup_mark(c, &m);
    kc__store_gc(NULL, c->vdir, UINT64_MAX, true, NULL, NULL, NULL);
    lookup_restore(c, &m, false);
  }
  if (c->json)
    printf("%s], \"removed\": %zu, \"unreadable\": %zu", t.bad ? "\n" : "", t.removed, t.unreadable);
  size_t found = 0, planted = verify_planted(c, repair, &b, &found);
  if (c->json) printf("}\n");
  else if (t.bad)
    printf("%zu of %zu entries damaged or unreadable (%zu unreadable, left alone)%s\n", t.bad, n,
           t.unreadable,
           t.removed == t.bad - t.unreadable ? (t.removed ? ", the damaged removed" : "")
           : repair                          ? "; some could not be removed"
                                             : " (--repair removes the damaged)");
  else if (usable)
    printf("%zu entries checked, all sound%s\n", n, found ? " (the files above are not entries)" : "");
  else printf("%zu entries checked, all sound, but kcache refuses the store itself (above)\n", n);
  return t.bad > t.removed || planted || !usable ? 1 : 0;
}

/* ----------------------------------------------------------- gc, clear */

const char cli_help_gc[] = "usage: kcache gc [--max-size SIZE] [--dir DIR] [--json]\n"
                           "\n"
                           "Evicts least recently used entries until the store holds at most SIZE\n"
                           "(\"500M\", \"2G\", bytes; default $KC_CACHE_MAXSIZE, else 1G), removes temp\n"
                           "files left by writers that died and lock files of compiles that died, and\n"
                           "recounts the store's size. A terminal shows progress. An entry it cannot\n"
                           "remove (its folder not writable here) is a failure, exit status 1: it says\n"
                           "how many, and the first one's path and why. A SIZE of 0 is refused\n"
                           "(it would remove every entry: kcache clear does that).\n";

const char cli_help_clear[] = "usage: kcache clear [--dir DIR] [--json]\n"
                              "\n"
                              "Removes every entry (programs running now keep what they loaded, and\n"
                              "compile again what they need next). A terminal shows progress. An entry\n"
                              "it cannot remove is a failure, exit status 1, as in gc.\n";

static void gc_report(const cli *c, uint64_t target, const kc__gc_result *r) {
  char a[32], bb[32], t[32];
  if (c->json) {
    printf(
        "{\"target_bytes\": %llu, \"entries_before\": %llu, \"bytes_before\": %llu, \"evicted\": %llu, "
        "\"evicted_bytes\": %llu, \"entries_after\": %llu, \"bytes_after\": %llu, \"temps_removed\": %llu, "
        "\"locks_removed\": %llu}\n",
        (unsigned long long)target, (unsigned long long)r->entries_before,
        (unsigned long long)r->bytes_before, (unsigned long long)r->evicted,
        (unsigned long long)r->evicted_bytes, (unsigned long long)r->entries_after,
        (unsigned long long)r->bytes_after, (unsigned long long)r->temps_removed,
        (unsigned long long)r->locks_removed);
    return;
  }
  printf("removed %llu of %llu entries (%s); %llu entries (%s) left", (unsigned long long)r->evicted,
         (unsigned long long)r->entries_before, human_size(r->evicted_bytes, a, sizeof a),
         (unsigned long long)r->entries_after, human_size(r->bytes_after, bb, sizeof bb));
  if (target != UINT64_MAX && target) printf(", at most %s", human_size(target, t, sizeof t));
  printf("\n");
  if (r->temps_removed || r->locks_removed)
    printf("removed %llu stale temp files and %llu abandoned lock files\n",
           (unsigned long long)r->temps_removed, (unsigned long long)r->locks_removed);
}

static int run_gc(const cli *c, uint64_t target, const char *what) {
  if (access(c->vdir, F_OK) != 0) { /* the default store, not made yet (main.c refuses a named one) */
    kc__gc_result none;
    memset(&none, 0, sizeof none);
    if (c->json) gc_report(c, target, &none);
    else printf("no store in %s yet (nothing was cached there): nothing to do\n", c->root);
    return 0;
  }
  bar b;
  bar_init(&b, what, c->progress);
  kc__gc_result r;
  last_lookup m; /* an eviction is not a lookup: the last one is kept */
  lookup_mark(c, &m);
  if (kc__store_gc(NULL, c->vdir, target, true, bar_draw, &b, &r) != KC_OK) {
    bar_break(&b);
    cli_error("%s: %s", what, kc_errmsg(NULL));
    return 1;
  }
  lookup_restore(c, &m, false);
  gc_report(c, target, &r);
  if (!r.failed) return 0;
  /* as verify --repair: what could not be removed is a failure, and why */
  if (r.failed == 1)
    cli_error("%s: 1 entry could not be removed: %s: %s", what, r.fail_path, strerror(r.fail_errno));
  else
    cli_error("%s: %llu entries could not be removed (the first, %s: %s)", what, (unsigned long long)r.failed,
              r.fail_path, strerror(r.fail_errno));
  return 1;
}

int cmd_gc(cli *c) {
  uint64_t target;
  char why[PATH_MAX + 256];
  if (!kc__store_max_size(&c->conf, c->root, &c->trust, &target, NULL, why, sizeof why)) cli_usage("%s", why);
  for (int i = 0; i < c->argc; i++) {
    const char *v;
    if (!cli_opt(c, &i, "--max-size", &v)) cli_unexpected(c, c->argv[i]);
    if (!kc__store_parse_size(v, &target))
      cli_usage("gc: --max-size \"%s\" is not a size (e.g. 500M, 2G)", v);
    /* everywhere else 0 is "the default" (-M 0, KC_CACHE_MAXSIZE=0); here
     * it would remove every entry, which is what clear says it does */
    if (!target) cli_usage("gc: --max-size %s would remove every entry: kcache clear does that", v);
  }
  return run_gc(c, target, "gc");
}

int cmd_clear(cli *c) {
  if (c->argc) cli_usage("clear takes no arguments (unexpected '%s')", c->argv[0]);
  return run_gc(c, 0, "clear");
}
