/* SPDX-License-Identifier: MIT */
/*
 * test_store_cli -- the `kcache` command against a store that the library
 * populated: ls (table and --json), show, stats, verify (sound, damaged,
 * --repair), explain (a changed definition, parameters, a first compile),
 * gc to a size, clear, and --help for every command; and the conventions of
 * ccache/sccache: --version/-V, stats --zero/-z, an option missing its
 * value, extra arguments, --dir naming no directory, an invalid
 * KC_CACHE_MAXSIZE in stats, show by entry name, ls telling apart entries
 * that differ only by a callee or the compiler, and show --json on bytes
 * that are not UTF-8. A KC_CACHE_DIR that names nothing and a store this
 * user cannot read are errors in every command (never an empty listing);
 * --json output is one valid JSON document for every command, a failure's
 * {"error", "exit_status"} object included; a key prefix too short says
 * what a prefix needs. And what the bug hunt found: --json with /tmp full or
 * its hold cut short, stdout that cannot be written, clear that cannot
 * remove an entry (or finds it gone), -sz's order, the newest use kept by
 * -z and gc, -M's blanks, --params in any order, -p --help, a v1 that is a
 * file.
 */
#include "st.h"
#include "kct_conf.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef KC_CLI
#error "KC_CLI must name the kcache executable"
#endif

typedef struct fx {
  char root[512];
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  st_mkdtemp(f->root, sizeof f->root, "cli");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  st_rmrf(f->root);
  free(f);
  return 0;
}

/* Runs `kcache --dir ROOT ARGS` after the shell commands `pre` (may be
 * ""); returns its exit status, output in *out. */
static int cli_after(const fx *f, const char *pre, char **out, const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s '%s' --dir '%s' %s 2>&1", pre, KC_CLI, f->root, args);
  char *buf;
  int rc = kct_capture(cmd, &buf);
  if (out) *out = buf;
  else free(buf);
  return rc;
}

static int cli(const fx *f, char **out, const char *fmt, ...) KCT_PRINTF(3, 4);
static int cli(const fx *f, char **out, const char *fmt, ...) {
  char args[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  return cli_after(f, "", out, args);
}

/* Runs `kcache --dir ROOT ARGS`: it must exit rc (a usage error: 2) and
 * say want (KCT_SAYS's check, named by the command). */
static void cli_says(const fx *f, int rc, const char *args, const char *want) {
  char *out = NULL, what[2048];
  snprintf(what, sizeof what, "kcache %s", args);
  kct_says(what, cli(f, &out, "%s", args), &out, rc, want, kct_says_end);
}

static void populate(const fx *f) {
  kc_runtime *rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  st_run_ok(rt, "kv", "V=1", 1);
  kct_define(rt, "h", "KC_DEVICE float h(float x) {\n  return 3.0f * x + 2.0f;\n}");
  st_run_ok(rt, "k", NULL, 1);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 3);
}

static void test_ls_show_stats(void **state) {
  fx *f = *state;
  populate(f);
  char *out;
  assert_int_equal(cli(f, &out, "ls --json"), 0);
  assert_int_equal(st_count(out, "\"key\":"), 3);
  assert_int_equal(st_count(out, "\"entry\": \"k\""), 2);
  KCT_CONTAINS(out, "\"params\": \"V=1\"");
  KCT_CONTAINS(out, "\"backend\": \"host\"");
  /* a key to show */
  const char *kp = strstr(out, "\"key\": \"");
  assert_non_null(kp);
  char key[33];
  memcpy(key, kp + 8, 32);
  key[32] = 0;
  free(out);

  assert_int_equal(cli(f, &out, "ls"), 0);
  KCT_CONTAINS(out, "KEY");
  KCT_CONTAINS(out, "LAST USE");
  assert_int_equal(st_count(out, " host "), 3);
  free(out);
  KCT_SAYS(cli(f, &out, "ls --sort size"), out, 0);

  char prefix[9];
  snprintf(prefix, sizeof prefix, "%.8s", key);
  KCT_SAYS(cli(f, &out, "show %s", prefix), out, 0, key, "identity", "--- h", "--- build log",
           "signature    buffer");
  KCT_SAYS(cli(f, &out, "show --json %s", key), out, 0, "\"closure\": [", "\"log\": ");
  KCT_SAYS(cli(f, &out, "show 0000ffff"), out, 1);

  KCT_SAYS(cli(f, &out, "stats --json"), out, 0, "\"entries\": 3", "\"writes\": 3");
  KCT_SAYS(cli(f, &out, "stats"), out, 0, "host: 3 entries");
}

static void test_verify_and_repair(void **state) {
  fx *f = *state;
  populate(f);
  char *out, path[4096];
  KCT_SAYS(cli(f, &out, "verify"), out, 0, "3 entries checked, all sound");
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  size_t n;
  char *b = st_read_file(path, &n);
  b[n / 2] ^= 1;
  st_write_file(path, b, n);
  free(b);
  KCT_SAYS(cli(f, &out, "verify"), out, 1, "checksum mismatch");
  KCT_SAYS(cli(f, &out, "verify --json"), out, 1, "\"removed\": false");
  KCT_SAYS(cli(f, &out, "verify --repair"), out, 0, "(removed)");
  assert_int_equal(st_entries(f->root, NULL), 2);
  KCT_SAYS(cli(f, &out, "verify --json"), out, 0, "\"checked\": 2");
}

/* What a neighbour sharing the store can plant where kcache keeps its
 * files (kcache makes none of these): verify lists each within a bounded
 * time (a FIFO must not block it), --repair removes them without following
 * a link out of the store, and the entries are untouched. */
static void test_verify_planted(void **state) {
  fx *f = *state;
  populate(f);
  char path[4096], vdir[700], outside[700], cmd[4096];
  snprintf(vdir, sizeof vdir, "%s/v1", f->root);
  snprintf(outside, sizeof outside, "%s/outside", f->root);
  assert_int_equal(mkdir(outside, 0700), 0);
  st_write_file(strcat(strcpy(path, outside), "/keep"), "x", 1);
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  char bucket[4096], hex[40];
  snprintf(bucket, sizeof bucket, "%.*s", (int)(strrchr(path, '/') - path), path);
  snprintf(hex, sizeof hex, "%.2s", strrchr(path, '/') + 1);
  char spare[3] = "", probe[800];
  for (int b = 255; b >= 0 && !spare[0]; b--) { /* a bucket no entry uses */
    struct stat ls;
    snprintf(probe, sizeof probe, "%s/%02x", vdir, b);
    if (lstat(probe, &ls) != 0) snprintf(spare, sizeof spare, "%02x", b);
  }
  /* what the swapped bucket points at holds a file named like an entry of it */
  char bait[1024];
  snprintf(bait, sizeof bait, "%s/%s000000000000000000000000000000.kce", outside, spare);
  st_write_file(bait, "theirs", 6);
  /* a FIFO, a directory with a file and a link out of the store at entry
   * names; a FIFO at the counters; a socket at a lock; an empty bucket
   * swapped for a link to a directory outside */
  snprintf(
      cmd, sizeof cmd,
      "cd '%s' && mkfifo %s/%s000000000000000000000000000000.kce && mkdir -p "
      "%s/%s111111111111111111111111111111.kce/sub && touch %s/%s111111111111111111111111111111.kce/sub/f && "
      "ln -s '%s/keep' %s/%s222222222222222222222222222222.kce && rm -f stats && mkfifo stats && "
      "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('locks/planted.lock')\" && "
      "ln -s '%s' %s",
      vdir, hex, hex, hex, hex, hex, hex, outside, hex, hex, outside, spare);
  assert_int_equal(system(cmd), 0);
  char *out;
  assert_int_equal(cli_after(f, "timeout 60", &out, "verify"), 1);
  KCT_CONTAINS(out, "000000000000000000000000000000.kce  a FIFO where an entry should be");
  KCT_CONTAINS(out, "111111111111111111111111111111.kce  a directory where an entry should be");
  KCT_CONTAINS(out, "222222222222222222222222222222.kce  a symbolic link where an entry should be");
  KCT_CONTAINS(out, "/stats  a FIFO where the store's counters should be");
  KCT_CONTAINS(out, "/locks/planted.lock  a socket where a lock file should be");
  snprintf(probe, sizeof probe, "/%s  a symbolic link where a bucket directory should be", spare);
  KCT_CONTAINS(out, probe);
  KCT_CONTAINS(out, "6 files that kcache never makes where the store keeps its own (--repair removes them)");
  KCT_CONTAINS(out, "3 entries checked, all sound (the files above are not entries)");
  free(out);
  assert_int_equal(cli_after(f, "timeout 60", &out, "verify --json"), 1);
  assert_int_equal(st_count(out, "\"reason\": "), 6);
  KCT_CONTAINS(out, "\"planted\": [");
  free(out);
  assert_int_equal(cli_after(f, "timeout 60", &out, "verify --repair"), 0);
  assert_int_equal(st_count(out, "(removed)"), 6);
  free(out);
  KCT_SAYS(cli_after(f, "timeout 60", &out, "verify"), out, 0, "3 entries checked, all sound\n");
  /* what the links pointed at is untouched */
  struct stat st;
  assert_int_equal(stat(strcat(strcpy(path, outside), "/keep"), &st), 0);
  assert_int_equal(stat(bait, &st), 0);
  assert_int_equal(st_entries(f->root, NULL), 3);
}

/* verify checks who may have written the store (cache/trust.h): an entry
 * that others may write is listed as not trusted and removed with --repair;
 * a store whose directory others may write is reported as refused. */
static void test_verify_trust(void **state) {
  fx *f = *state;
  populate(f);
  char *out, path[4096], vdir[1024];
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  assert_int_equal(chmod(path, 0666), 0);
  KCT_SAYS(cli(f, &out, "verify"), out, 1, "not trusted", "1 of 3 entries damaged");
  KCT_SAYS(cli(f, &out, "verify --json"), out, 1, "\"store_refused\": null", "not trusted");
  KCT_SAYS(cli(f, &out, "verify --repair"), out, 0, "(removed)");
  assert_int_equal(st_entries(f->root, NULL), 2);
  snprintf(vdir, sizeof vdir, "%s/v1", f->root);
  assert_int_equal(chmod(vdir, 0777), 0);
  KCT_SAYS(cli(f, &out, "verify"), out, 1, "store: ", "kcache refuses the store itself");
  assert_int_equal(cli(f, &out, "verify --json"), 1);
  if (strstr(out, "\"store_refused\": null")) fail_msg("a refused store reported as usable: %s", out);
  free(out);
  /* a refused store is reported, never repaired: removing files from a
   * directory others may write proves nothing */
  KCT_SAYS(cli(f, &out, "verify --repair"), out, 1, "not repairing");
  assert_int_equal(st_entries(f->root, NULL), 2);
  assert_int_equal(chmod(vdir, 0700), 0);
  KCT_SAYS(cli(f, &out, "verify"), out, 0, "2 entries checked, all sound");
}

/* A store made in shared mode (kc_options.cache_shared: setgid,
 * group-writable directories, 0660 entries) is checked as a shared store
 * by verify without KC_CACHE_SHARED in its environment: sound, and
 * --repair removes nothing. */
static void test_verify_shared_store(void **state) {
  fx *f = *state;
  kc_options o;
  kc_options_init(&o);
  o.cache_shared = 1;
  st_capture_begin(); /* shared mode without a key warns that the group is trusted */
  kc_runtime *rt = st_runtime(f->root, &o);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_runtime_destroy(rt);
  free(st_capture_end());
  assert_int_equal(st_entries(f->root, NULL), 1);
  char *out;
  int rc = cli_after(f, "unset KC_CACHE_SHARED;", &out, "verify --repair");
  print_message("$ kcache verify --repair\n%s", out);
  assert_int_equal(rc, 0);
  KCT_CONTAINS(out, "laid out as a shared store");
  KCT_CONTAINS(out, "1 entries checked, all sound");
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 1);
}

/* An entry that cannot be read here (out of memory: a 512 MiB file, sparse,
 * under a 256 MiB address-space limit) is not damage: reported, never
 * removed, and verify does not pass. */
static void test_verify_keeps_unreadable_entries(void **state) {
  fx *f = *state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  print_message("not under a sanitizer: its shadow memory alone exceeds the ulimit -v\n");
  skip();
#endif
  populate(f);
  char *out, path[4096];
  st_entry_of(f->root, "k", NULL, path, sizeof path);
  assert_int_equal(truncate(path, 512 << 20), 0);
  assert_int_equal(cli_after(f, "ulimit -v 262144;", &out, "verify --repair"), 1);
  KCT_CONTAINS(out, "unreadable");
  KCT_CONTAINS(out, "left alone");
  if (strstr(out, "(removed)")) fail_msg("verify --repair removed an entry it could not read:\n%s", out);
  free(out);
  assert_int_equal(access(path, F_OK), 0);
  assert_int_equal(st_entries(f->root, NULL), 3);
}

static void test_explain(void **state) {
  fx *f = *state;
  populate(f);
  char *out;
  /* k was compiled twice: with h, then with h changed */
  KCT_SAYS(cli(f, &out, "explain k"), out, 0, "definition 'h' changed, first at line 1",
           "now: KC_DEVICE float h(float x) {");
  KCT_SAYS(cli(f, &out, "explain --json k"), out, 0, "\"component\": \"definition\"", "\"name\": \"h\"");
  /* kv has one entry: a first compile */
  KCT_SAYS(cli(f, &out, "explain kv"), out, 0, "only entry");
  /* parameters and options */
  kc_options o;
  kc_options_init(&o);
  o.compile_options = "-DKC_TEST_X=1";
  kc_runtime *rt = st_runtime(f->root, &o);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "kv", "V=2", 2);
  kc_runtime_destroy(rt);
  KCT_SAYS(cli(f, &out, "explain kv"), out, 0, "specialization parameters: \"V=2\" (was \"V=1\")",
           "compile options: \"-DKC_TEST_X=1\" (was \"\")");
  KCT_SAYS(cli(f, &out, "explain nosuchkernel"), out, 1);
}

static void test_gc_and_clear(void **state) {
  fx *f = *state;
  populate(f);
  uint64_t total;
  st_entries(f->root, &total);
  char *out;
  KCT_SAYS(cli(f, &out, "gc --json"), out, 0, "\"evicted\": 0"); /* under the default bound: nothing to do */
  /* KC_CACHE_MAXSIZE=0 means the default bound, as in the library: not
   * "evict everything" */
  setenv("KC_CACHE_MAXSIZE", "0", 1);
  assert_int_equal(cli(f, &out, "gc --json"), 0);
  unsetenv("KC_CACHE_MAXSIZE");
  KCT_CONTAINS(out, "\"evicted\": 0");
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 3);
  KCT_SAYS(cli(f, &out, "gc --max-size %llu", (unsigned long long)(total / 2)), out, 0,
           "removed 2 of 3 entries");
  assert_int_equal(st_entries(f->root, NULL), 1);
  KCT_SAYS(cli(f, &out, "gc --max-size lots"), out, 2);
  /* 0 is the default everywhere else: here a usage error, not an empty store */
  KCT_SAYS(cli(f, &out, "gc --max-size 0"), out, 2, "would remove every entry: kcache clear does that");
  KCT_SAYS(cli(f, &out, "gc --max-size 0.4"), out, 2, "would remove every entry");
  assert_int_equal(st_entries(f->root, NULL), 1);
  KCT_SAYS(cli(f, &out, "clear"), out, 0);
  assert_int_equal(st_entries(f->root, NULL), 0);
  assert_int_equal(cli(f, &out, "ls --json"), 0);
  assert_string_equal(out, "[]\n");
  free(out);
  KCT_SAYS(cli(f, &out, "stats --json"), out, 0, "\"entries\": 0, \"bytes\": 0");
}

static void test_help_and_usage(void **state) {
  fx *f = *state;
  static const char *cmds[] = {"stats", "ls", "show", "verify", "gc", "clear", "explain"};
  char *out;
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    char want[64];
    snprintf(want, sizeof want, "usage: kcache %s", cmds[i]);
    KCT_SAYS(cli(f, &out, "%s --help", cmds[i]), out, 0, want);
    KCT_SAYS(cli(f, &out, "help %s", cmds[i]), out, 0, want);
  }
  KCT_SAYS(cli(f, &out, "--help"), out, 0, "commands:");
  KCT_SAYS(cli(f, &out, "frobnicate"), out, 2);
  KCT_SAYS(cli(f, &out, "ls --bogus"), out, 2);
  KCT_SAYS(cli(f, &out, "show"), out, 2);
}

/* ------------------------------------------- the conventions of ccache/sccache */

static void test_version(void **state) {
  fx *f = *state;
  char want[64], *out;
  snprintf(want, sizeof want, "kcache %s\n", kc_version());
  assert_string_equal(want, "kcache " KC_VERSION_STRING "\n");
  assert_int_equal(cli(f, &out, "--version"), 0);
  assert_string_equal(out, want);
  free(out);
  assert_int_equal(cli(f, &out, "-V"), 0);
  assert_string_equal(out, want);
  free(out);
  KCT_SAYS(cli(f, &out, "--help"), out, 0, "-V, --version");
}

static void test_stats_zero(void **state) {
  fx *f = *state;
  populate(f);
  char vdir[1024], *out;
  kc__store_vdir(f->root, vdir, sizeof vdir);
  kc__store_counters before, after;
  kc__store_counters_read(vdir, &before);
  assert_true(before.valid);
  assert_int_equal(before.writes, 3);
  assert_true(before.misses >= 3);
  KCT_SAYS(cli(f, &out, "stats --zero --json"), out, 0, "\"zeroed\": true",
           "\"hits\": 0, \"misses\": 0, \"writes\": 0, \"evictions\": 0, \"repairs\": 0", "\"entries\": 3");
  kc__store_counters_read(vdir, &after);
  assert_true(after.valid);
  /* what the store holds is kept; the counters of use are zero */
  assert_int_equal(after.bytes, before.bytes);
  assert_int_equal(after.entries, before.entries);
  assert_int_equal(after.sized, before.sized);
  assert_int_equal(after.hits + after.misses + after.writes + after.evictions + after.repairs, 0);
  /* and count again from there: a hit from the disk */
  st_store_k(f->root); /* a store with the entry of k */
  kc__store_counters_read(vdir, &after);
  assert_int_equal(after.hits, 1);
  assert_int_equal(after.misses, 0);
  KCT_SAYS(cli(f, &out, "stats -z"), out, 0,
           "counters    0 hits, 0 misses, 0 writes, 0 evictions, 0 repairs (just zeroed)", "entries     3");
  KCT_SAYS(cli(f, &out, "stats --json"), out, 0, "\"zeroed\": false");
  /* a store that was never used has nothing to zero */
  char empty[1024];
  snprintf(empty, sizeof empty, "%s/empty", f->root);
  assert_int_equal(mkdir(empty, 0755), 0);
  KCT_SAYS(cli(f, &out, "--dir '%s' stats -z", empty), out, 0, "entries     0");
}

static void test_usage_errors(void **state) {
  fx *f = *state;
  populate(f);
  /* an option without its value */
  cli_says(f, 2, "gc --max-size", "gc: option --max-size needs a value");
  cli_says(f, 2, "ls --sort", "ls: option --sort needs a value");
  cli_says(f, 2, "explain k --params", "explain: option --params needs a value");
  cli_says(f, 2, "show k --params", "show: option --params needs a value");
  cli_says(f, 2, "remote ping --url", "remote: option --url needs a value");
  cli_says(f, 2, "ls --dir", "option --dir needs a value");
  /* arguments a command does not take */
  cli_says(f, 2, "stats extra", "stats: unexpected argument 'extra'");
  cli_says(f, 2, "stats --bogus", "stats: unknown option '--bogus'");
  cli_says(f, 2, "ls extra", "ls: unexpected argument 'extra'");
  cli_says(f, 2, "verify extra", "verify: unexpected argument 'extra'");
  cli_says(f, 2, "gc 100M", "gc: unexpected argument '100M'");
  cli_says(f, 2, "clear extra", "clear takes no arguments");
  cli_says(f, 2, "show k kv", "show: unexpected argument 'kv'");
  cli_says(f, 2, "explain k kv", "explain: unexpected argument 'kv'");
  cli_says(f, 2, "help stats extra", "help: unexpected argument 'extra'");
  /* --dir must name a directory: a typo is not an empty store */
  cli_says(f, 2, "--dir /nonexistent/kc-typo stats", "--dir /nonexistent/kc-typo: No such file or directory");
  cli_says(f, 2, "--dir /nonexistent/kc-typo ls", "No such file or directory");
  char file[1024];
  snprintf(file, sizeof file, "%s/a-file", f->root);
  st_write_file(file, "x", 1);
  char args[1200];
  snprintf(args, sizeof args, "--dir '%s' stats", file);
  cli_says(f, 2, args, "not a directory");
  /* nothing was removed by any of that */
  assert_int_equal(st_entries(f->root, NULL), 3);
}

static void test_stats_invalid_max_size(void **state) {
  fx *f = *state;
  populate(f);
  const char *msg = "KC_CACHE_MAXSIZE=\"lots\" is not a size (e.g. 500M, 2G); using 1G";
  setenv("KC_CACHE_MAXSIZE", "lots", 1);
  /* the library warns and uses the default */
  st_capture_begin();
  st_store_k(f->root); /* a store with the entry of k */
  char *lib = st_capture_end(), *out;
  KCT_CONTAINS(lib, msg);
  free(lib);
  /* stats says the same, and shows the default it then uses */
  KCT_SAYS(cli(f, &out, "stats"), out, 0, "kcache: warning: ", msg,
           "of at most 1.0 GiB (default: KC_CACHE_MAXSIZE is not a size)");
  KCT_SAYS(cli(f, &out, "stats --json"), out, 0, "\"max_bytes\": 1073741824",
           "\"max_size_error\": \"KC_CACHE_MAXSIZE=\\\"lots\\\" is not a size");
  /* gc, which would act on it, refuses */
  KCT_SAYS(cli(f, &out, "gc"), out, 2, "KC_CACHE_MAXSIZE=\"lots\" is not a size");
  setenv("KC_CACHE_MAXSIZE", "2G", 1);
  assert_int_equal(cli(f, &out, "stats"), 0);
  KCT_CONTAINS(out, "of at most 2.0 GiB (KC_CACHE_MAXSIZE)");
  if (strstr(out, "warning")) fail_msg("a warning for a valid KC_CACHE_MAXSIZE:\n%s", out);
  free(out);
  unsetenv("KC_CACHE_MAXSIZE");
}

/* ccache's spellings: -s, -z, -C, -p, -M (kept in the store's kcache.conf,
 * which the library reads too), -V. */
static void test_ccache_flags(void **state) {
  fx *f = *state;
  populate(f);
  unsetenv("KC_CACHE_MAXSIZE");
  cli_says(f, 0, "-s", "entries     3");
  cli_says(f, 0, "-s", "of at most 1.0 GiB (default)");
  cli_says(f, 0, "--show-stats --json", "\"entries\": 3");
  cli_says(f, 0, "-z", "(just zeroed)");
  cli_says(f, 0, "-M 3G", "is now 3.0 GiB");
  cli_says(f, 0, "-s", "of at most 3.0 GiB (kcache.conf)");
  uint64_t bound;
  kc__store_trust t;
  char tw[1024];
  assert_true(kc__store_trust_load(&t, f->root, kct_conf(NULL), NULL, tw, sizeof tw));
  assert_true(
      kc__store_max_size(kct_conf(NULL), f->root, &t, &bound, NULL, NULL, 0)); /* the library's reading */
  assert_int_equal(bound, 3ull << 30);
  cli_says(f, 0, "--json --max-size=2G",
           "{\"max_size\": \"2G\", \"max_bytes\": 2147483648, \"in_force\": true}");
  cli_says(f, 0, "-p", "(kcache.conf) KC_CACHE_MAXSIZE = 2G");
  cli_says(f, 0, "-p", "(--dir) KC_CACHE_DIR = ");
  /* KC_BACKEND as this test was started with (bench/gpu/check.sh sets it) */
  const char *be = getenv("KC_BACKEND");
  char want_be[160];
  if (be && *be) snprintf(want_be, sizeof want_be, "(environment) KC_BACKEND = %s", be);
  else snprintf(want_be, sizeof want_be, "(default) KC_BACKEND = auto");
  cli_says(f, 0, "-p", want_be);
  char *out;
  KCT_SAYS(cli_after(f, "KC_BACKEND=host", &out, "--json -p"), out, 0,
           "{\"name\": \"KC_BACKEND\", \"value\": \"host\", \"malformed\": false, \"from\": \"environment\"");
  /* well-formed values (--dir's included): no warning */
  assert_int_equal(cli_after(f, "KC_HOST_THREADS=2", &out, "-p"), 0);
  if (strstr(out, "warning")) fail_msg("kcache -p warned about well-formed values:\n%s", out);
  free(out);
  /* ccache's combined and joined forms */
  cli_says(f, 0, "-sz", "(shown, then zeroed)");
  cli_says(f, 0, "-z -s", "(shown, then zeroed)");
  cli_says(f, 0, "-M3G", "is now 3.0 GiB");
  /* a value the library would not take: -p shows it, and warns */
  KCT_SAYS(cli_after(f, "KC_HOST_THREADS=x KC_LOG=verbose", &out, "-p"), out, 0,
           "kcache: warning: KC_HOST_THREADS=x is not a whole number",
           "kcache: warning: KC_LOG=verbose is not one of error, warn, info, debug",
           "(environment) KC_HOST_THREADS = x");
  KCT_SAYS(cli_after(f, "KC_HOST_THREADS=x", &out, "--json -p"), out, 0,
           "{\"name\": \"KC_HOST_THREADS\", \"value\": \"x\", \"malformed\": true");
  KCT_SAYS(cli_after(f, "KC_CACHE_MAXSIZE=1G", &out, "-M 5G"), out, 0,
           "(KC_CACHE_MAXSIZE=1G is set and wins over it in this environment)");
  cli_says(f, 2, "-M lots", "\"lots\" is not a size");
  cli_says(f, 2, "-M", "option -M needs a value");
  /* a kcache.conf whose max_size is not a size: stats and -p say so, gc refuses */
  assert_int_equal(kc__store_conf_set(f->root, &t, "max_size", "lots"), 0);
  cli_says(f, 0, "-s", "of at most 1.0 GiB (default: kcache.conf's max_size is not used)");
  cli_says(f, 0, "-p", "max_size = \"lots\" in ");
  cli_says(f, 2, "gc", "is not a size (e.g. 500M, 2G)");
  /* one the store does not trust: the same, and why */
  char conf[700];
  snprintf(conf, sizeof conf, "%s/" KC__STORE_CONF, f->root);
  assert_int_equal(chmod(conf, 0666), 0);
  cli_says(f, 0, "-s", "of at most 1.0 GiB (default: kcache.conf's max_size is not used)");
  cli_says(f, 0, "-s", "kcache.conf is not trusted");
  cli_says(f, 1, "-M 2G", "is not trusted");
  assert_int_equal(chmod(conf, 0600), 0);
  cli_says(f, 0, "-C", "removed 3 of 3 entries");
  assert_int_equal(st_entries(f->root, NULL), 0);
  cli_says(f, 0, "-V", "kcache ");
  kc__store_trust_wipe(&t);
}

static void test_show_by_entry_name(void **state) {
  fx *f = *state;
  populate(f);
  char *out;
  /* k was compiled twice: the newest is the one with h changed */
  KCT_SAYS(cli(f, &out, "show k"), out, 0, "entry        k\n", "return 3.0f * x + 2.0f;");
  KCT_SAYS(cli(f, &out, "show --json kv --params V=1"), out, 0, "\"entry\": \"kv\"", "\"params\": \"V=1\"");
  KCT_SAYS(cli(f, &out, "show kv --params V=9"), out, 1, "no kernel named kv with params V=9");
  KCT_SAYS(cli(f, &out, "show nosuchkernel"), out, 1, "no kernel named nosuchkernel");
  /* the same as explain takes: explain and show agree on the entry */
  assert_int_equal(cli(f, &out, "explain --json k"), 0);
  const char *kp = strstr(out, "\"key\": \"");
  assert_non_null(kp);
  char key[33];
  snprintf(key, sizeof key, "%.32s", kp + 8);
  free(out);
  KCT_SAYS(cli(f, &out, "show --json k"), out, 0, key);
}

static bool have_python(void) { return system("python3 -c 'import json' >/dev/null 2>&1") == 0; }

static void test_ls_tells_apart(void **state) {
  fx *f = *state;
  if (!have_python()) {
    print_message("python3 is needed to read the JSON\n");
    skip();
  }
  populate(f);
  /* k with the first h again, through another compiler (a wrapper: another
   * identity) */
  char wrapper[1024], *out;
  st_wrapper(f->root, wrapper, sizeof wrapper);
  kc_options o;
  kc_options_init(&o);
  o.host_cc = wrapper;
  kc_runtime *rt = st_runtime(f->root, &o);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 4);
  /* of k's three entries: two differ only by a callee (same build, other
   * source), two only by the compiler (same source, other build) */
  const char *py = "import json,sys\n"
                   "r=[e for e in json.load(sys.stdin) if e[\"entry\"]==\"k\"]\n"
                   "same=lambda a,b,x:a[x]==b[x]\n"
                   "pairs=[(a,b) for a in r for b in r if a[\"key\"]<b[\"key\"]]\n"
                   "callee=sum(1 for a,b in pairs if same(a,b,\"build\") and not same(a,b,\"source\"))\n"
                   "cc=sum(1 for a,b in pairs if same(a,b,\"source\") and not same(a,b,\"build\"))\n"
                   "print(len(r), callee, cc, len(r[0][\"source\"]), len(r[0][\"build\"]))\n";
  assert_int_equal(cli(f, &out, "ls --json | python3 -c '%s'", py), 0);
  assert_string_equal(out, "3 1 1 8 8\n");
  free(out);
  /* the table shows both columns, and no two of its rows are the same */
  assert_int_equal(cli(f, &out, "ls | cut -c15- | sort | uniq -d | wc -l"), 0);
  assert_string_equal(out, "0\n");
  free(out);
  KCT_SAYS(cli(f, &out, "ls"), out, 0, "SOURCE", "BUILD");
  KCT_SAYS(cli(f, &out, "ls --help"), out, 0, "differ only by a\ncallee");
}

/* show --json on an entry whose log and source hold bytes that are not
 * UTF-8 (the codec rewrites a real entry): valid JSON, each such byte as
 * \u00XX, valid UTF-8 kept. */
static void test_show_json_invalid_utf8(void **state) {
  fx *f = *state;
  populate(f);
  char path[4096], why[256], hex[33], *out;
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  kc__entry e;
  assert_int_equal(kc__entry_read(NULL, path, NULL, &e, why, sizeof why), KC_OK);
  static const char log[] = "bad \xff\xfe ok \xc3( \xed\xa0\x80 \xe2\x82\xac end\x01";
  static const char text[] = "// \x80\xbf lone \xf4\x90\x80\x80 \xc0\xaf\n";
  e.log = log;
  e.log_len = sizeof log - 1;
  assert_true(e.ndefs >= 1);
  e.defs[0].text = text;
  e.defs[0].len = sizeof text - 1;
  void *img;
  size_t size;
  assert_int_equal(kc__entry_encode(NULL, &e, &img, &size), KC_OK);
  st_write_file(path, img, size);
  free(img);
  kc__store_hex(e.key, hex);
  kc__entry_free(NULL, &e);

  assert_int_equal(cli(f, &out, "show --json %s", hex), 0);
  if (strchr(out, '\xff') || strchr(out, '\x80') || strchr(out, '\x01'))
    fail_msg("show --json wrote raw bytes that are not UTF-8:\n%s", out);
  KCT_CONTAINS(out, "bad \\u00ff\\u00fe ok \\u00c3( \\u00ed\\u00a0\\u0080 \xe2\x82\xac end\\u0001");
  free(out);
  KCT_SAYS(cli(f, &out, "show %s", hex), out, 0, "bad \xff\xfe"); /* the text form shows the bytes */
  if (!have_python()) {
    print_message("python3 is needed to read the JSON\n");
    skip();
  }
  const char *py = "import json,sys\n"
                   "d=json.load(sys.stdin)\n"
                   "print(ascii(d[\"log\"]))\n"
                   "print(ascii(d[\"closure\"][0][\"source\"]))\n";
  assert_int_equal(cli(f, &out, "show --json %s | python3 -c '%s'", hex, py), 0);
  assert_string_equal(out, "'bad \\xff\\xfe ok \\xc3( \\xed\\xa0\\x80 \\u20ac end\\x01'\n"
                           "'// \\x80\\xbf lone \\xf4\\x90\\x80\\x80 \\xc0\\xaf\\n'\n");
  free(out);
}

/* Runs `kcache --dir ROOT ARGS` on a terminal (script(1) gives it one);
 * returns its exit status, what the terminal showed in *out. */
static int cli_tty(const fx *f, char **out, const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "script -qec \"'%s' --dir '%s' %s\" /dev/null 2>&1 </dev/null", KC_CLI, f->root,
           args);
  char *buf;
  int rc = kct_capture(cmd, &buf);
  *out = buf;
  return rc;
}

/* verify, gc and clear draw a progress bar on a terminal, and never when
 * stderr is not one. */
/* ------------------------------------- stores that are not there or not readable; --json */

/* The --json outputs a test collected (json_add), checked at once by one
 * python3 (json_check): each must be one JSON document, and a failure's an
 * object whose "error" is a string and whose "exit_status" is its exit
 * status. Without python3 the check is skipped. */
typedef struct json_set {
  char dir[512];
  int n;
} json_set;

static void json_add(json_set *j, const char *what, const char *text, int rc) {
  if (!j->dir[0]) st_mkdtemp(j->dir, sizeof j->dir, "json");
  char path[700], name[720];
  snprintf(path, sizeof path, "%s/%03d-%d.json", j->dir, j->n++, rc);
  st_write_file(path, text, strlen(text));
  snprintf(name, sizeof name, "%s.what", path);
  st_write_file(name, what, strlen(what));
}

static void json_check(json_set *j) {
  static int python = -1;
  if (python < 0) python = have_python();
  if (python && j->n) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import glob, json, sys\n"
             "for p in sorted(glob.glob(sys.argv[1] + \"/*.json\")):\n"
             "    rc, what, text = int(p[-6]), open(p + \".what\").read(), open(p).read()\n"
             "    try:\n"
             "        d = json.loads(text)\n"
             "        assert rc == 0 or (isinstance(d[\"error\"], str) and d[\"exit_status\"] == rc)\n"
             "    except Exception as e:\n"
             "        print(f\"kcache {what}: not valid --json output ({e!r}):\\n{text}\")\n' '%s' 2>&1",
             j->dir);
    assert_int_equal(kct_capture(cmd, &out), 0);
    if (*out) fail_msg("%s", out);
    free(out);
  }
  if (j->dir[0]) st_rmrf(j->dir);
  j->dir[0] = 0;
  j->n = 0;
}

/* Runs `ENV kcache ARGS` with stdout only (stderr dropped): its exit status, stdout in *out. */
static int cli_stdout(const char *env, const char *args, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s '%s' %s 2>/dev/null", env, KC_CLI, args);
  return kct_capture(cmd, out);
}

static const char *const store_cmds[] = {"stats",  "stats --zero", "-s",    "ls", "show 4567", "show k",
                                         "verify", "gc",           "clear", "-C", "explain k"};

/* KC_CACHE_DIR naming nothing is the usage error that --dir with the same
 * typo is, in every command, with --json too; -p only warns; the default
 * store (nothing cached yet) is an empty store. */
static void test_cache_dir_names_nothing(void **state) {
  fx *f = *state;
  json_set js = {0};
  const char *env = "KC_CACHE_DIR=/nonexistent/kc-typo";
  for (size_t i = 0; i < sizeof store_cmds / sizeof *store_cmds; i++) {
    char cmd[4096], args[256], *out;
    snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1", env, KC_CLI, store_cmds[i]);
    int rc = kct_capture(cmd, &out);
    if (rc != 2 ||
        !strstr(out, "KC_CACHE_DIR=/nonexistent/kc-typo: No such file or directory (it names no store"))
      fail_msg("KC_CACHE_DIR naming nothing, kcache %s: exit %d, wanted 2 and why:\n%s", store_cmds[i], rc,
               out);
    free(out);
    snprintf(args, sizeof args, "--json %s", store_cmds[i]);
    assert_int_equal(cli_stdout(env, args, &out), 2);
    json_add(&js, args, out, 2);
    KCT_CONTAINS(out, "KC_CACHE_DIR=/nonexistent/kc-typo");
    free(out);
  }
  json_check(&js);
  char *out, cmd[4096];
  snprintf(cmd, sizeof cmd, "%s '%s' -p 2>&1", env, KC_CLI);
  KCT_SAYS(kct_capture(cmd, &out), out, 0,
           "warning: KC_CACHE_DIR=/nonexistent/kc-typo: No such file or directory (no store there yet)",
           "(environment) KC_CACHE_DIR = /nonexistent/kc-typo");
  /* the default store, not made yet: empty, not an error */
  snprintf(cmd, sizeof cmd, "env -u KC_CACHE_DIR -u XDG_CACHE_HOME HOME='%s' '%s' ls 2>&1", f->root, KC_CLI);
  KCT_SAYS(kct_capture(cmd, &out), out, 0, "(no entries in ");
}

/* A store this user cannot read (its v1 folder another user's, 0700) is an
 * error, exit 1, in every command: before, stats showed "entries 0". */
static void test_unreadable_store(void **state) {
  fx *f = *state;
  populate(f);
  char vdir[600], pre[1024], *out;
  snprintf(vdir, sizeof vdir, "%s/v%u", f->root, KC__STORE_FORMAT);
  bool root = geteuid() == 0;
  json_set js = {0};
  if (root) {
    /* as another user: the store root readable, its v1 folder not */
    snprintf(pre, sizeof pre, "setpriv --reuid=65534 --regid=65534 --clear-groups");
    assert_int_equal(chmod(f->root, 0755), 0);
    if (cli_after(f, pre, &out, "--version") != 0) {
      free(out);
      print_message("cannot run kcache as uid 65534 here (setpriv, or a build directory it cannot reach)\n");
      skip();
    }
    free(out);
    assert_int_equal(chmod(vdir, 0700), 0);
  } else {
    pre[0] = 0;
    assert_int_equal(chmod(vdir, 0), 0);
  }
  for (size_t i = 0; i < sizeof store_cmds / sizeof *store_cmds; i++) {
    int rc = cli_after(f, pre, &out, store_cmds[i]);
    if (rc != 1 || !strstr(out, "cannot read the store") || !strstr(out, "Permission denied"))
      fail_msg("an unreadable store, kcache %s: exit %d, wanted 1 and why:\n%s", store_cmds[i], rc, out);
    free(out);
    char cmd[4096], args[256];
    snprintf(args, sizeof args, "--json %s", store_cmds[i]);
    snprintf(cmd, sizeof cmd, "%s '%s' --dir '%s' %s 2>/dev/null", pre, KC_CLI, f->root, args);
    assert_int_equal(kct_capture(cmd, &out), 1);
    json_add(&js, args, out, 1);
    free(out);
  }
  json_check(&js);
  if (!root) assert_int_equal(chmod(vdir, 0700), 0);
  assert_int_equal(st_entries(f->root, NULL), 3); /* nothing was lost */
}

/* Every command's --json output is one JSON document, its failures too. */
static void test_json_everywhere(void **state) {
  fx *f = *state;
  populate(f);
  char dir[700];
  json_set js = {0};
  snprintf(dir, sizeof dir, "--dir '%s'", f->root);
  static const struct {
    const char *args;
    int rc;
  } runs[] = {
      {"stats", 0},
      {"stats -z", 0},
      {"-s", 0},
      {"ls", 0},
      {"ls --sort size", 0},
      {"show k", 0},
      {"verify", 0},
      {"explain k", 0},
      {"-p", 0},
      {"-M 2G", 0},
      {"gc --max-size 1G", 0},
      {"--version", 0},
      /* failures: an error object */
      {"show nosuchkernel", 1},
      {"show 45", 1},
      {"explain 45", 1},
      {"ls --bogus", 2},
      {"frobnicate", 2},
      {"gc --max-size lots", 2},
      {"remote ping --url redis://127.0.0.1:1 --timeout 200", 1},
      {"", 2},
      {"clear", 0},
      {"ls", 0},
      {"stats", 0},
  };
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    char args[1024], *out;
    snprintf(args, sizeof args, "%s --json %s", dir, runs[i].args);
    int rc = cli_stdout("", args, &out);
    if (rc != runs[i].rc) fail_msg("kcache %s: exit %d, wanted %d:\n%s", args, rc, runs[i].rc, out);
    json_add(&js, args, out, runs[i].rc);
    free(out);
  }
  json_check(&js);
  char *out;
  assert_int_equal(cli_stdout("", "--json --version", &out), 0);
  assert_string_equal(out, "{\"version\": \"" KC_VERSION_STRING "\"}\n");
  free(out);
}

/* `kcache show 45`: not "no entry" alone, but what a prefix needs. */
static void test_short_prefix_says_what_a_prefix_needs(void **state) {
  fx *f = *state;
  populate(f);
  char *out;
  KCT_SAYS(cli(f, &out, "show 45"), out, 1, "no kernel named 45 in ",
           "45 is too short for a key prefix: a prefix needs 4 or more of the key's 32 hex digits");
  KCT_SAYS(cli(f, &out, "explain abc"), out, 1, "a prefix needs 4 or more");
  KCT_SAYS(cli(f, &out, "show 0123456789abcdef0123456789abcdef0"), out, 1,
           "longer than a key (32 hex digits)");
  KCT_SAYS(cli(f, &out, "show ffff"), out, 1,
           "no entry whose key starts with ffff, and no kernel named ffff");
}

static void test_progress_on_a_terminal(void **state) {
  fx *f = *state;
  if (system("script -qec true /dev/null >/dev/null 2>&1 </dev/null") != 0) {
    print_message("no script(1) here: no terminal to test with\n");
    skip();
  }
  populate(f);
  /* 30 more sound entries: one entry under other keys, through the codec */
  char path[4096], why[256], vdir[1024];
  kc__store_vdir(f->root, vdir, sizeof vdir);
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  for (int i = 0; i < 30; i++) {
    kc__entry e;
    assert_int_equal(kc__entry_read(NULL, path, NULL, &e, why, sizeof why), KC_OK);
    e.key[0] ^= (uint8_t)(i + 1);
    e.key[15] = (uint8_t)i;
    void *img;
    size_t size;
    assert_int_equal(kc__entry_encode(NULL, &e, &img, &size), KC_OK);
    char p[4096], dir[4096];
    kc__store_path(vdir, e.key, ".kce", p, sizeof p);
    snprintf(dir, sizeof dir, "%s", p);
    *strrchr(dir, '/') = 0;
    (void)mkdir(dir, 0755);
    st_write_file(p, img, size);
    free(img);
    kc__entry_free(NULL, &e);
  }
  assert_int_equal(st_entries(f->root, NULL), 33);
  char *out;
  KCT_SAYS(cli_tty(f, &out, "verify"), out, 0, "verify  [##############################] 33/33",
           "33 entries checked, all sound");
  assert_int_equal(cli(f, &out, "verify"), 0); /* stderr is a pipe here */
  if (strstr(out, "[#")) fail_msg("a progress bar where stderr is not a terminal:\n%s", out);
  free(out);
  assert_int_equal(cli_tty(f, &out, "--json verify"), 0); /* nor with --json */
  if (strstr(out, "[#")) fail_msg("a progress bar with --json:\n%s", out);
  free(out);
  KCT_SAYS(cli_tty(f, &out, "gc --max-size 1G"), out, 0, "gc      [##############################] 33/33");
  KCT_SAYS(cli_tty(f, &out, "clear"), out, 0, "clear   [##############################] 33/33",
           "removed 33 of 33 entries");
  assert_int_equal(st_entries(f->root, NULL), 0);
}

/* A store whose path is longer than the 512 bytes the listing once kept
 * for an entry's path: ls, verify and clear see every entry (they saw
 * none, and said so with exit 0); a root too long for its files' paths to
 * fit PATH_MAX is a usage error. And ls while entries vanish (a clear, an
 * eviction) lists no vanished entry as damaged; an entry this user cannot
 * read is "unreadable here", not damaged. */
static void test_long_store_path(void **state) {
  fx *f = *state;
  char root[4096], cmd[8192], *out;
  int n = snprintf(root, sizeof root, "%s/", f->root);
  for (int i = 0; i < 3; i++) {
    memset(root + n, 'a' + i, 200);
    n += 200;
    root[n++] = '/';
  }
  root[n - 1] = 0;
  assert_true(strlen(root) > 600);
  kc_runtime *rt = st_runtime(root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  st_run_ok(rt, "kv", "V=1", 1);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(root, NULL), 2);
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' ls 2>&1", KC_CLI, root);
  KCT_SAYS(kct_capture(cmd, &out), out, 0, " k ", " kv ");
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' verify 2>&1", KC_CLI, root);
  KCT_SAYS(kct_capture(cmd, &out), out, 0, "2 entries checked");
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' clear 2>&1", KC_CLI, root);
  KCT_SAYS(kct_capture(cmd, &out), out, 0, "removed 2 of 2 entries");
  assert_int_equal(st_entries(root, NULL), 0);
  /* too long: refused, where the library keeps its kernels in memory */
  char big[PATH_MAX + 64];
  for (size_t i = 0; i < sizeof big - 1; i++) big[i] = i % 200 ? 'x' : '/'; /* names of 199 bytes */
  big[KC__STORE_ROOT_MAX + 1] = 0;
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' ls 2>&1", KC_CLI, big);
  KCT_SAYS(kct_capture(cmd, &out), out, 2, "the store's path is too long", "at most");
  big[KC__STORE_ROOT_MAX] = 0; /* the longest: not refused for its length (it names no directory) */
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' ls 2>&1", KC_CLI, big);
  KCT_SAYS(kct_capture(cmd, &out), out, 2, "No such file or directory");
}

static void test_ls_while_entries_vanish(void **state) {
  fx *f = *state;
  populate(f);
  char *out, path[1024], cmd[4096];
  st_entry_of(f->root, "k", NULL, path, sizeof path);
  if (geteuid() == 0) { /* unreadable here: an entry of mode 0600, listed as uid 65534 */
    char vdir[700], *slash = strrchr(path, '/');
    snprintf(vdir, sizeof vdir, "%s/v%u", f->root, KC__STORE_FORMAT);
    *slash = 0;
    assert_int_equal(chmod(f->root, 0755) | chmod(vdir, 0755) | chmod(path, 0755), 0);
    *slash = '/';
    assert_int_equal(chmod(path, 0600), 0);
    if (cli_after(f, "setpriv --reuid=65534 --regid=65534 --clear-groups", &out, "ls") == 0) {
      KCT_CONTAINS(out, "(unreadable here: ");
      if (strstr(out, "damaged")) fail_msg("an entry this user cannot read listed as damaged:\n%s", out);
    } else print_message("cannot run kcache as uid 65534 here: the unreadable case is not checked\n");
    free(out);
    assert_int_equal(chmod(path, 0644), 0);
  }
  /* vanished: 3,000 copies of an entry (each named as an entry of its
   * bucket), listed while a clear removes them; no row may say damaged */
  snprintf(cmd, sizeof cmd,
           "cd '%s/v%u' && for i in $(seq 1000 3999); do b=$(printf %%02x $((i %% 256))); "
           "mkdir -p $b && cp '%s' \"$b/${b}$(printf %%030x $i).kce\" || exit 1; done",
           f->root, KC__STORE_FORMAT, path);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "'%s' --dir '%s' clear >/dev/null 2>&1 & '%s' --dir '%s' ls 2>&1; wait", KC_CLI,
           f->root, KC_CLI, f->root);
  assert_int_equal(kct_capture(cmd, &out), 0);
  if (strstr(out, "damaged")) fail_msg("ls beside a clear listed an entry as damaged:\n%.2000s", out);
  free(out);
}

/* ---------------------------------------------------- failures said, never exit 0 */

/* --json output is held in memory until the command ends: with /tmp full
 * (a tmpfs of 4 KiB, filled, in a mount namespace of its own) the document
 * is whole; it was held in a temporary file there, cut short, with exit 0.
 * Needs root and unshare -m. */
/* For a command run where /tmp is covered (test_json_with_tmp_full): a
 * sanitizer's suppressions file named in its *SAN_OPTIONS, opened on a
 * descriptor before the mount (open: "exec 4<'PATH' && ") and named
 * through it after (env: "TSAN_OPTIONS='...suppressions=/proc/self/fd/4'
 * "): a build under /tmp has it there, and TSan exits 66 when it cannot
 * read it. */
static void keep_suppressions(char *open, size_t olen, char *env, size_t elen) {
  static const char *const vars[] = {"TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"};
  size_t o = 0, e = 0;
  open[0] = env[0] = 0;
  for (int i = 0; i < 4; i++) {
    const char *v = getenv(vars[i]), *at = v ? strstr(v, "suppressions=") : NULL;
    if (!at) continue;
    const char *path = at + 13;
    size_t pl = strcspn(path, ":");
    o += (size_t)snprintf(open + o, olen - o, "exec %d<'%.*s' && ", 4 + i, (int)pl, path);
    e += (size_t)snprintf(env + e, elen - e, "%s='%.*ssuppressions=/proc/self/fd/%d%s' ", vars[i],
                          (int)(at - v), v, 4 + i, path + pl);
    assert_true(o < olen && e < elen);
  }
}

static void test_json_with_tmp_full(void **state) {
  fx *f = *state;
  const char *ns = "unshare -m sh -c \"mount --make-rprivate / && mount -t tmpfs -o size=4k tmpfs /tmp && "
                   "(head -c 8192 /dev/zero >/tmp/fill; true) && ";
  char cmd[8192], *out;
  snprintf(cmd, sizeof cmd, "%s true\" >/dev/null 2>&1", ns);
  if (geteuid() != 0 || system(cmd) != 0) {
    print_message("needs root and unshare -m, to mount a full tmpfs on /tmp for kcache alone\n");
    skip();
  }
  populate(f);
  /* the store through the working directory and kcache through a
   * descriptor opened before the mount: the tmpfs hides where they are
   * when the build (a clone in /tmp) or the store is under /tmp */
  char keep[2048], env[2048];
  keep_suppressions(keep, sizeof keep, env, sizeof env);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && unshare -m sh -c \"mount --make-rprivate / && exec 3<'%s' && %smount -t tmpfs -o "
           "size=4k tmpfs /tmp && (head -c 8192 /dev/zero >/tmp/fill; true) && %s/proc/self/fd/3 --dir . "
           "--json ls\" 2>/dev/null",
           f->root, KC_CLI, keep, env);
  int rc = kct_capture(cmd, &out);
  if (rc != 0 || st_count(out, "\"key\":") != 3)
    fail_msg("kcache --json ls with /tmp full: exit %d, wanted 0 and 3 entries:\n%s", rc, out);
  json_set js = {0};
  json_add(&js, "--json ls (/tmp full)", out, 0);
  free(out);
  json_check(&js);
}

/* A write into the hold that fails (here a file size limit, EFBIG, as a
 * full disk gives ENOSPC) is the error object and exit 1: it was exit 0
 * with the document cut short. */
static void test_json_hold_cut_short(void **state) {
  fx *f = *state;
  populate(f);
  char args[1024], *out;
  snprintf(args, sizeof args, "--dir '%s' --json ls", f->root);
  /* ulimit -f 1: 512 bytes in dash, 1,024 in bash; the listing is longer */
  assert_int_equal(cli_stdout("trap '' XFSZ; ulimit -f 1;", args, &out), 1);
  KCT_CONTAINS(out,
               "{\"error\": \"--json: the output could not be held until the command ended (File too large)");
  if (strstr(out, "\"key\":")) fail_msg("part of the document printed with the error:\n%s", out);
  json_set js = {0};
  json_add(&js, args, out, 1);
  free(out);
  json_check(&js);
}

/* A write to stdout that fails (/dev/full) is "kcache: write error: ..."
 * and exit 1, in every command: they exited 0 and said nothing. */
static void test_stdout_write_error(void **state) {
  fx *f = *state;
  if (access("/dev/full", W_OK) != 0) {
    print_message("no /dev/full here\n");
    skip();
  }
  populate(f);
  static const char *const runs[] = {"stats",     "ls",     "show k",    "verify",       "explain k",
                                     "gc",        "-p",     "--json ls", "--json stats", "--json -p",
                                     "--version", "--help", "ls --help"};
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "'%s' --dir '%s' %s 2>&1 >/dev/full", KC_CLI, f->root, runs[i]);
    int rc = kct_capture(cmd, &out);
    if (rc != 1 || !strstr(out, "kcache: write error: No space left on device"))
      fail_msg("kcache %s >/dev/full: exit %d, wanted 1 and the write error:\n%s", runs[i], rc, out);
    free(out);
  }
  assert_int_equal(st_entries(f->root, NULL), 3);
}

/* clear and gc that cannot remove an entry (its bucket directory not
 * writable by this user) say which and why, exit 1, and --json gives the
 * error object; they said "removed 2 of 3 entries" and exited 0. As uid
 * 65534 when run as root (root may remove it). */
static void test_clear_that_cannot_remove(void **state) {
  fx *f = *state;
  populate(f);
  char pre[256] = "", path[4096], bucket[4096], cmd[8192], *out;
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  snprintf(bucket, sizeof bucket, "%.*s", (int)(strrchr(path, '/') - path), path);
  if (geteuid() == 0) {
    snprintf(cmd, sizeof cmd, "chown -R 65534:65534 '%s'", f->root);
    assert_int_equal(system(cmd), 0);
    snprintf(pre, sizeof pre, "setpriv --reuid=65534 --regid=65534 --clear-groups");
    if (cli_after(f, pre, &out, "ls") != 0) {
      free(out);
      print_message(
          "cannot run kcache as uid 65534 on the store here (setpriv, or a folder it cannot reach)\n");
      skip();
    }
    free(out);
  }
  assert_int_equal(chmod(bucket, 0555), 0);
  char want[4200];
  snprintf(want, sizeof want, "kcache: clear: 1 entry could not be removed: %s: Permission denied", path);
  KCT_SAYS(cli_after(f, pre, &out, "clear"), out, 1, "removed 2 of 3 entries", want);
  json_set js = {0};
  snprintf(cmd, sizeof cmd, "%s '%s' --dir '%s' --json gc --max-size 1 2>/dev/null", pre, KC_CLI, f->root);
  assert_int_equal(kct_capture(cmd, &out), 1);
  KCT_CONTAINS(out, "gc: 1 entry could not be removed: ");
  json_add(&js, "--json gc --max-size 1 (an entry that cannot be removed)", out, 1);
  free(out);
  json_check(&js);
  assert_int_equal(st_entries(f->root, NULL), 1);
  assert_int_equal(chmod(bucket, 0755), 0);
  KCT_SAYS(cli_after(f, pre, &out, "clear"), out, 0, "removed 1 of 1 entries");
  assert_int_equal(st_entries(f->root, NULL), 0);
}

/* An entry that another process removed between clear's listing and its
 * unlink is gone, not a failure: clear beside a verify --repair that
 * removes the same entries (1,000 copies of one, each named as an entry
 * of its bucket: damaged) exits 0 and leaves none. */
static void test_clear_beside_another_remover(void **state) {
  fx *f = *state;
  populate(f);
  char *out, path[1024], cmd[4096];
  st_entry_of(f->root, "k", NULL, path, sizeof path);
  snprintf(cmd, sizeof cmd,
           "cd '%s/v%u' && for i in $(seq 1000 1999); do b=$(printf %%02x $((i %% 256))); "
           "mkdir -p $b && cp '%s' \"$b/${b}$(printf %%030x $i).kce\" || exit 1; done",
           f->root, KC__STORE_FORMAT, path);
  assert_int_equal(system(cmd), 0);
  snprintf(
      cmd, sizeof cmd,
      "'%s' --dir '%s' verify --repair >/dev/null 2>&1 & '%s' --dir '%s' clear 2>&1; rc=$?; wait; exit $rc",
      KC_CLI, f->root, KC_CLI, f->root);
  int rc = kct_capture(cmd, &out);
  if (rc != 0 || strstr(out, "could not be removed"))
    fail_msg("clear beside verify --repair: exit %d, wanted 0:\n%.2000s", rc, out);
  KCT_CONTAINS(out, "; 0 entries (0 B) left");
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 0);
}

/* ccache's -sz (-zs, -z -s) shows the counters as they are, then zeroes
 * them (it zeroed, then showed the zeros); stats --zero and -z alone still
 * zero first, as documented. */
static void test_sz_shows_then_zeroes(void **state) {
  fx *f = *state;
  populate(f);
  char vdir[1024], want[256], *out;
  kc__store_vdir(f->root, vdir, sizeof vdir);
  static const char *const forms[] = {"-sz", "-zs", "-z -s", "--show-stats --zero-stats", "stats -s -z"};
  for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
    if (i) st_store_k(f->root); /* a hit: something to show */
    kc__store_counters k;
    kc__store_counters_read(vdir, &k);
    assert_true(k.hits + k.misses > 0);
    snprintf(want, sizeof want, "counters    %llu hits, %llu misses", (unsigned long long)k.hits,
             (unsigned long long)k.misses);
    KCT_SAYS(cli(f, &out, "%s", forms[i]), out, 0, want, "(shown, then zeroed)", "entries     3");
    kc__store_counters_read(vdir, &k);
    if (k.hits + k.misses + k.writes + k.evictions + k.repairs)
      fail_msg("kcache %s did not zero the counters", forms[i]);
  }
  st_store_k(f->root);
  KCT_SAYS(cli(f, &out, "--json -sz"), out, 0, "\"zeroed\": true, \"zeroed_after_shown\": true",
           "\"hits\": 1, \"misses\": 0");
  st_store_k(f->root);
  KCT_SAYS(cli(f, &out, "--json -z"), out, 0, "\"zeroed\": true, \"zeroed_after_shown\": false",
           "\"hits\": 0, \"misses\": 0");
  st_store_k(f->root); /* --zero-stats is -z (its letters are not -s's) */
  KCT_SAYS(cli(f, &out, "--zero-stats"), out, 0, "counters    0 hits, 0 misses", "(just zeroed)");
  st_store_k(f->root);
  KCT_SAYS(cli(f, &out, "stats --zero"), out, 0, "counters    0 hits, 0 misses", "(just zeroed)");
  st_store_k(f->root);
  KCT_SAYS(cli(f, &out, "-z"), out, 0, "counters    0 hits, 0 misses", "(just zeroed)");
}

/* The newest use that stats shows is the store's last lookup: -z, -sz, gc
 * and clear, which rewrite the counters without one, do not move it (it
 * was "0 s ago" after each); a lookup does. */
static void test_newest_use_kept(void **state) {
  fx *f = *state;
  populate(f);
  char cmd[2048], *out;
  snprintf(cmd, sizeof cmd, "touch -d '3 hours ago' '%s'/v1/*/*.kce '%s/v1/stats'", f->root, f->root);
  assert_int_equal(system(cmd), 0);
  KCT_SAYS(cli(f, &out, "gc"), out, 0, "removed 0 of 3 entries"); /* the index then has those last uses */
  KCT_SAYS(cli(f, &out, "stats"), out, 0, "newest use  3 h ago");
  KCT_SAYS(cli(f, &out, "-z"), out, 0, "(just zeroed)");
  KCT_SAYS(cli(f, &out, "stats"), out, 0, "newest use  3 h ago");
  KCT_SAYS(cli(f, &out, "-sz"), out, 0, "newest use  3 h ago");
  KCT_SAYS(cli(f, &out, "stats"), out, 0, "newest use  3 h ago");
  uint64_t total;
  st_entries(f->root, &total);
  KCT_SAYS(cli(f, &out, "gc --max-size %llu", (unsigned long long)(total - 1)), out, 0, "removed 1 of 3");
  KCT_SAYS(cli(f, &out, "stats"), out, 0, "newest use  3 h ago");
  st_store_k(f->root); /* a hit: a use now */
  assert_int_equal(cli(f, &out, "stats"), 0);
  if (strstr(out, "newest use  3 h ago")) fail_msg("a hit not shown as the newest use:\n%s", out);
  KCT_CONTAINS(out, " s ago\n");
  free(out);
}

/* -M writes the size that it reports: blanks around it are dropped (a
 * leading newline wrote "max_size = " and a stray "5G" line, so the
 * default was in force), a control character inside is refused. */
static void test_max_size_as_written(void **state) {
  fx *f = *state;
  populate(f);
  char conf[700], *out;
  snprintf(conf, sizeof conf, "%s/" KC__STORE_CONF, f->root);
  KCT_SAYS(cli(f, &out, "-M \"$(printf '\\n5G')\""), out, 0, "is now 5.0 GiB");
  size_t n;
  char *text = st_read_file(conf, &n);
  KCT_CONTAINS(text, "\nmax_size = 5G\n");
  if (strstr(text, "max_size = \n")) fail_msg("kcache.conf with the size on a line of its own:\n%s", text);
  free(text);
  KCT_SAYS(cli(f, &out, "-s"), out, 0, "of at most 5.0 GiB (kcache.conf)");
  KCT_SAYS(cli(f, &out, "--json -M ' 2G\t'"), out, 0, "{\"max_size\": \"2G\", \"max_bytes\": 2147483648");
  KCT_SAYS(cli(f, &out, "-M \"$(printf '5\\nG')\""), out, 2,
           "-M: the size holds a control character (byte 0x0a)");
  KCT_SAYS(cli(f, &out, "-s"), out, 0, "of at most 2.0 GiB (kcache.conf)");
}

/* show and explain --params find an entry whatever the order and spacing
 * of the parameters (the library keeps them sorted: "V=1,W=2"); only the
 * order kcache ls shows found it. */
static void test_params_in_any_order(void **state) {
  fx *f = *state;
  populate(f);
  kc_runtime *rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "kv", "W=2,V=1", 1);
  kc_runtime_destroy(rt);
  char *out;
  KCT_SAYS(cli(f, &out, "show kv --params W=2,V=1"), out, 0, "params       V=1,W=2\n");
  KCT_SAYS(cli(f, &out, "show kv --params ' V=1 , W=2 '"), out, 0, "params       V=1,W=2\n");
  KCT_SAYS(cli(f, &out, "show kv --params V=1"), out, 0, "params       V=1\n");
  KCT_SAYS(cli(f, &out, "explain kv --params W=2,V=1"), out, 0, "(kv V=1,W=2, compiled");
  KCT_SAYS(cli(f, &out, "show kv --params W=3,V=1"), out, 1, "no kernel named kv with params W=3,V=1");
}

/* --help after -p or -M SIZE is their help, as after a command (it was "-p
 * takes no command ('--help')", exit 2). */
static void test_config_help_anywhere(void **state) {
  fx *f = *state;
  char *out;
  KCT_SAYS(cli(f, &out, "-p --help"), out, 0, "usage: kcache [--dir DIR] [--json] -p | --show-config");
  KCT_SAYS(cli(f, &out, "--json --show-config -h"), out, 0, "usage: kcache [--dir DIR] [--json] -p");
  KCT_SAYS(cli(f, &out, "-M 2G --help"), out, 0, "-M SIZE keeps SIZE");
  struct stat st;
  char conf[700];
  snprintf(conf, sizeof conf, "%s/" KC__STORE_CONF, f->root);
  if (stat(conf, &st) == 0) fail_msg("-M 2G --help wrote %s", conf);
}

/* A store whose v1 is a plain file says that it is not a directory (it said
 * "Permission denied"), exit 1, in every command. */
static void test_store_not_a_directory(void **state) {
  fx *f = *state;
  char vdir[700], *out;
  snprintf(vdir, sizeof vdir, "%s/v%u", f->root, KC__STORE_FORMAT);
  st_write_file(vdir, "x", 1);
  for (size_t i = 0; i < sizeof store_cmds / sizeof *store_cmds; i++) {
    int rc = cli(f, &out, "%s", store_cmds[i]);
    if (rc != 1 || !strstr(out, "is not a directory") || strstr(out, "Permission denied"))
      fail_msg("a store whose v1 is a file, kcache %s: exit %d, wanted 1 and \"is not a directory\":\n%s",
               store_cmds[i], rc, out);
    free(out);
  }
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_CACHE_DISABLE");
  unsetenv("KC_CACHE_MAXSIZE");
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_ls_show_stats),
      T(test_verify_and_repair),
      T(test_verify_planted),
      T(test_verify_trust),
      T(test_verify_shared_store),
      T(test_verify_keeps_unreadable_entries),
      T(test_explain),
      T(test_gc_and_clear),
      T(test_help_and_usage),
      T(test_version),
      T(test_stats_zero),
      T(test_usage_errors),
      T(test_stats_invalid_max_size),
      T(test_ccache_flags),
      T(test_show_by_entry_name),
      T(test_ls_tells_apart),
      T(test_show_json_invalid_utf8),
      T(test_progress_on_a_terminal),
      T(test_cache_dir_names_nothing),
      T(test_unreadable_store),
      T(test_json_everywhere),
      T(test_short_prefix_says_what_a_prefix_needs),
      T(test_long_store_path),
      T(test_ls_while_entries_vanish),
      T(test_json_with_tmp_full),
      T(test_json_hold_cut_short),
      T(test_stdout_write_error),
      T(test_clear_that_cannot_remove),
      T(test_clear_beside_another_remover),
      T(test_sz_shows_then_zeroes),
      T(test_newest_use_kept),
      T(test_max_size_as_written),
      T(test_params_in_any_order),
      T(test_config_help_anywhere),
      T(test_store_not_a_directory),
  };
#undef T
  return KCT_RUN(tests);
}
