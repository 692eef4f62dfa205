/*
 * test_store_cli -- the `kcache` command against a store that the library
 * populated: ls (table and --json), show, stats, verify (sound, damaged,
 * --repair), explain (a changed definition, parameters, a first compile),
 * gc to a size, clear, and --help for every command.
 */
#include "st.h"

#include <stdlib.h>
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
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t r; (r = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
    n += r;
    if (cap - n < 2) buf = realloc(buf, cap *= 2);
  }
  buf[n] = 0;
  int st = pclose(p);
  if (out) *out = buf;
  else free(buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
  assert_int_equal(cli(f, &out, "ls --sort size"), 0);
  free(out);

  char prefix[9];
  snprintf(prefix, sizeof prefix, "%.8s", key);
  assert_int_equal(cli(f, &out, "show %s", prefix), 0);
  KCT_CONTAINS(out, key);
  KCT_CONTAINS(out, "identity");
  KCT_CONTAINS(out, "--- h");
  KCT_CONTAINS(out, "--- build log");
  KCT_CONTAINS(out, "signature    buffer");
  free(out);
  assert_int_equal(cli(f, &out, "show --json %s", key), 0);
  KCT_CONTAINS(out, "\"closure\": [");
  KCT_CONTAINS(out, "\"log\": ");
  free(out);
  assert_int_equal(cli(f, &out, "show 0000ffff"), 1);
  free(out);

  assert_int_equal(cli(f, &out, "stats --json"), 0);
  KCT_CONTAINS(out, "\"entries\": 3");
  KCT_CONTAINS(out, "\"writes\": 3");
  free(out);
  assert_int_equal(cli(f, &out, "stats"), 0);
  KCT_CONTAINS(out, "host: 3 entries");
  free(out);
}

static void test_verify_and_repair(void **state) {
  fx *f = *state;
  populate(f);
  char *out, path[4096];
  assert_int_equal(cli(f, &out, "verify"), 0);
  KCT_CONTAINS(out, "3 entries checked, all sound");
  free(out);
  st_entry_of(f->root, "kv", "V=1", path, sizeof path);
  size_t n;
  char *b = st_read_file(path, &n);
  b[n / 2] ^= 1;
  st_write_file(path, b, n);
  free(b);
  assert_int_equal(cli(f, &out, "verify"), 1);
  KCT_CONTAINS(out, "checksum mismatch");
  free(out);
  assert_int_equal(cli(f, &out, "verify --json"), 1);
  KCT_CONTAINS(out, "\"removed\": false");
  free(out);
  assert_int_equal(cli(f, &out, "verify --repair"), 0);
  KCT_CONTAINS(out, "(removed)");
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 2);
  assert_int_equal(cli(f, &out, "verify --json"), 0);
  KCT_CONTAINS(out, "\"checked\": 2");
  free(out);
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
  assert_int_equal(cli(f, &out, "explain k"), 0);
  KCT_CONTAINS(out, "definition 'h' changed, first at line 1");
  KCT_CONTAINS(out, "now: KC_DEVICE float h(float x) {");
  free(out);
  assert_int_equal(cli(f, &out, "explain --json k"), 0);
  KCT_CONTAINS(out, "\"component\": \"definition\"");
  KCT_CONTAINS(out, "\"name\": \"h\"");
  free(out);
  /* kv has one entry: a first compile */
  assert_int_equal(cli(f, &out, "explain kv"), 0);
  KCT_CONTAINS(out, "only entry");
  free(out);
  /* parameters and options */
  kc_options o;
  kc_options_init(&o);
  o.compile_options = "-DKC_TEST_X=1";
  kc_runtime *rt = st_runtime(f->root, &o);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "kv", "V=2", 2);
  kc_runtime_destroy(rt);
  assert_int_equal(cli(f, &out, "explain kv"), 0);
  KCT_CONTAINS(out, "specialization parameters: \"V=2\" (was \"V=1\")");
  KCT_CONTAINS(out, "compile options: \"-DKC_TEST_X=1\" (was \"\")");
  free(out);
  assert_int_equal(cli(f, &out, "explain nosuchkernel"), 1);
  free(out);
}

static void test_gc_and_clear(void **state) {
  fx *f = *state;
  populate(f);
  uint64_t total;
  st_entries(f->root, &total);
  char *out;
  assert_int_equal(cli(f, &out, "gc --json"), 0); /* under the default bound: nothing to do */
  KCT_CONTAINS(out, "\"evicted\": 0");
  free(out);
  /* KC_CACHE_MAXSIZE=0 means the default bound, as in the library: not
   * "evict everything" */
  setenv("KC_CACHE_MAXSIZE", "0", 1);
  assert_int_equal(cli(f, &out, "gc --json"), 0);
  unsetenv("KC_CACHE_MAXSIZE");
  KCT_CONTAINS(out, "\"evicted\": 0");
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 3);
  assert_int_equal(cli(f, &out, "gc --max-size %llu", (unsigned long long)(total / 2)), 0);
  KCT_CONTAINS(out, "removed 2 of 3 entries");
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 1);
  assert_int_equal(cli(f, &out, "gc --max-size lots"), 2);
  free(out);
  assert_int_equal(cli(f, &out, "clear"), 0);
  free(out);
  assert_int_equal(st_entries(f->root, NULL), 0);
  assert_int_equal(cli(f, &out, "ls --json"), 0);
  assert_string_equal(out, "[]\n");
  free(out);
  assert_int_equal(cli(f, &out, "stats --json"), 0);
  KCT_CONTAINS(out, "\"entries\": 0, \"bytes\": 0");
  free(out);
}

static void test_help_and_usage(void **state) {
  fx *f = *state;
  static const char *cmds[] = {"stats", "ls", "show", "verify", "gc", "clear", "explain"};
  char *out;
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    char want[64];
    snprintf(want, sizeof want, "usage: kcache %s", cmds[i]);
    assert_int_equal(cli(f, &out, "%s --help", cmds[i]), 0);
    KCT_CONTAINS(out, want);
    free(out);
    assert_int_equal(cli(f, &out, "help %s", cmds[i]), 0);
    KCT_CONTAINS(out, want);
    free(out);
  }
  assert_int_equal(cli(f, &out, "--help"), 0);
  KCT_CONTAINS(out, "commands:");
  free(out);
  assert_int_equal(cli(f, &out, "frobnicate"), 2);
  free(out);
  assert_int_equal(cli(f, &out, "ls --bogus"), 2);
  free(out);
  assert_int_equal(cli(f, &out, "show"), 2);
  free(out);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_CACHE_DISABLE");
  unsetenv("KC_CACHE_MAXSIZE");
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_ls_show_stats), T(test_verify_and_repair), T(test_verify_keeps_unreadable_entries), T(test_explain), T(test_gc_and_clear),
      T(test_help_and_usage),
  };
#undef T
  return KCT_RUN(tests);
}
