/* SPDX-License-Identifier: MIT */
/*
 * cli/main.c -- the `kcache` command's entry point: the table of commands,
 * the global options (--dir, --json, --help, --version), help, and the
 * argument helpers and usage errors that every command uses.
 *
 * kcache looks after a kcache disk cache: what it holds (stats, ls, show),
 * whether it is sound (verify), how big it may be (gc, clear), why a kernel
 * missed it (explain), and the shared Redis tier behind it (remote). It
 * works on the files alone, through the store's kc__ functions: it needs no
 * backend, no compiler and no device. Tables for people by default, --json
 * for scripts; --help everywhere. The conventions are ccache's and
 * sccache's: --version/-V, stats --zero/-z, an option missing its value and
 * an argument a command does not take are usage errors (exit 2).
 *
 * --json: a command's whole output is one JSON document (watch: one object
 * a line, JSON Lines). Its output is held until it ends (in memory, else a
 * temporary file), so that a failure (cli_fail, cli_usage, cli_error and a
 * nonzero status) prints {"error": MESSAGE, "exit_status": N, "command":
 * NAME} instead of half a document; the message goes to stderr as in text
 * mode. A write that fails, into the hold or to stdout, is a failure too
 * ("kcache: write error: ..."), never exit 0 with the output cut short.
 */
#include "cli.h"
#include "out.h"
#include "core/core.h" /* kc__config_resolve: the settings as a runtime resolves them */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char help_main[] =
    "usage: kcache [--dir DIR] [--json] COMMAND [ARGS]\n"
    "       kcache --version | --help\n"
    "\n"
    "Looks after the disk cache of kcache, the JIT kernel compiler.\n"
    "\n"
    "commands:\n"
    "  stats [--zero]       what the store holds, and its hit/miss counters (-z zeroes them)\n"
    "  ls                   every entry: key, backend, entry, params, source and\n"
    "                       build hashes, size, age, last use\n"
    "  show KEY|ENTRY       one entry: metadata, source closure, build log\n"
    "  verify [--repair]    checks every entry; --repair removes damaged ones\n"
    "  gc [--max-size SIZE] evicts least recently used entries down to SIZE\n"
    "  clear                removes every entry\n"
    "  explain KEY|ENTRY    why a kernel missed: what differs from the nearest entry\n"
    "  remote ping|ls|clear the shared Redis tier: reachable? what it holds; empty it\n"
    "  watch FILE           hot reload: loads a kernel file on each change, relaunches\n"
    "                       its kernels, prints which recompiled\n"
    "  help [COMMAND]       this, or a command's help (also: COMMAND --help)\n"
    "\n"
    "options:\n"
    "  --dir DIR      the store, a directory that exists (default $KC_CACHE_DIR,\n"
    "                 which must exist too, else $XDG_CACHE_HOME/kcache, else\n"
    "                 ~/.cache/kcache)\n"
    "  --json         machine-readable output: one JSON document (watch: JSON Lines);\n"
    "                 a failure is {\"error\": ..., \"exit_status\": N} on stdout\n"
    "\n"
    "ccache's and sccache's spellings (see kcache --help -p for -p and -M):\n"
    "  -s, --show-stats   kcache stats         -z, --zero-stats   kcache stats --zero\n"
    "  -C, --clear        kcache clear         -p, --show-config  the settings in force\n"
    "  -M, --max-size SIZE  the store's size bound, kept in DIR/kcache.conf\n"
    "  -sz (-zs, -z -s)   the stats as they are, then zeroed, as ccache -sz does\n"
    "\n"
    "  -V, --version  prints \"kcache VERSION\"\n"
    "  -h, --help     help\n"
    "\n"
    "Exit status: 0 success, 1 failure (or damage found), 2 a usage error.\n";

static const struct {
  const char *name;
  cli_cmd_fn run;
  const char *help;
  bool store; /* works on the store named by --dir */
} commands[] = {
    {"stats", cmd_stats, cli_help_stats, true},
    {"ls", cmd_ls, cli_help_ls, true},
    {"show", cmd_show, cli_help_show, true},
    {"verify", cmd_verify, cli_help_verify, true},
    {"gc", cmd_gc, cli_help_gc, true},
    {"clear", cmd_clear, cli_help_clear, true},
    {"explain", cmd_explain, cli_help_explain, true},
    {"remote", cmd_remote, cli_help_remote, false},
    {"watch", cmd_watch, cli_help_watch, false},
};
enum { NCOMMANDS = sizeof commands / sizeof *commands };

/* ------------------------------------------------------- errors, --json */

static struct {
  bool json; /* --json */
  bool capturing; /* stdout (fd 1) is the temporary file */
  int saved; /* the real stdout while capturing */
  FILE *tmp;
  const char *cmd;
  char msg[4096]; /* the first error said, for the JSON error object */
  int write_err; /* why copying the hold to stdout failed (end() says it) */
} out_state = {.saved = -1};

/* "kcache: MSG" on stderr; kept for --json's error object. */
static void say_error(const char *fmt, va_list ap) {
  char msg[sizeof out_state.msg];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fflush(stdout); /* after what was printed, where both go to one file */
  fprintf(stderr, "kcache: %s\n", msg);
  if (!out_state.msg[0]) snprintf(out_state.msg, sizeof out_state.msg, "%s", msg);
}

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_error(fmt, ap);
  va_end(ap);
}

/* Starts holding stdout (--json), so that a failure can replace it: in
 * memory (a memfd), so that a full or read-only /tmp does not cut the
 * document short, else in a temporary file. A hold that cannot be made is a
 * failure now, while its error object can still be the whole output. */
static void capture_start(void) {
  fflush(stdout);
  int fd = memfd_create("kcache-json", MFD_CLOEXEC), err = 0;
  FILE *tmp = fd >= 0 ? fdopen(fd, "w+") : NULL;
  if (!tmp) {
    if (fd >= 0) close(fd);
    tmp = tmpfile();
  }
  if (!tmp) err = errno;
  int saved = tmp ? dup(1) : -1;
  if (tmp && (saved < 0 || dup2(fileno(tmp), 1) < 0)) {
    err = errno;
    if (saved >= 0) close(saved);
    fclose(tmp);
  }
  if (err) cli_fail("--json: cannot hold the output until the command ends: %s", strerror(err));
  out_state.tmp = tmp;
  out_state.saved = saved;
  out_state.capturing = true;
}

/* Copies what was held to stdout (whose own errors end() reports); false
 * with errno if the hold cannot be read back. */
static bool copy_held(FILE *tmp) {
  rewind(tmp);
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, tmp)) > 0;)
    if (fwrite(buf, 1, n, stdout) != n) { /* stdout failed: said at the end, with this errno */
      out_state.write_err = errno;
      return true;
    }
  return !ferror(tmp);
}

/* The end of a command in --json: what it printed, or (it failed with a
 * message, or its output could not all be held) the error object instead.
 * Returns the exit status. */
static int finish(int rc) {
  if (!out_state.json) return rc;
  bool failed = rc != 0 && out_state.msg[0];
  if (out_state.capturing) {
    /* a write into the hold that failed (no memory, a full /tmp): the
     * document there is cut short, and only the error object may go out */
    errno = 0;
    bool cut = fflush(stdout) != 0;
    int err = cut ? errno : 0;
    cut = cut || ferror(stdout);
    clearerr(stdout); /* the real stdout's errors are its own (end) */
    dup2(out_state.saved, 1);
    close(out_state.saved);
    out_state.capturing = false;
    if (!failed && !cut && !copy_held(out_state.tmp)) {
      err = errno;
      fprintf(stderr, "kcache: --json: cannot read back the held output: %s\n", strerror(err));
      rc = rc ? rc : 1;
    }
    fclose(out_state.tmp);
    out_state.tmp = NULL;
    if (!failed && cut) {
      out_state.msg[0] = 0; /* this is the error the object says */
      cli_error("--json: the output could not be held until the command ended (%s); none of it is printed",
                err ? strerror(err) : "a write failed");
      failed = true;
      rc = rc ? rc : 1;
    }
  }
  if (failed) {
    printf("{\"error\": ");
    json_str(out_state.msg);
    printf(", \"exit_status\": %d, \"command\": ", rc);
    json_str(out_state.cmd);
    printf("}\n");
  }
  return rc;
}

/* The end of every run (finish, then stdout): what is still buffered for
 * stdout is written, and a write to it that failed (a full disk,
 * /dev/full, a closed pipe with SIGPIPE ignored) is said, with exit status
 * 1 where there was none: its reader got less than it was told. */
static int end(int rc) {
  rc = finish(rc);
  errno = 0;
  bool bad = fflush(stdout) != 0;
  int err = bad ? errno : out_state.write_err;
  bad = ferror(stdout) || bad;
  if (fclose(stdout) != 0 && !bad) bad = true, err = errno;
  if (bad) {
    fprintf(stderr, "kcache: write error%s%s\n", err ? ": " : "", err ? strerror(err) : "");
    rc = rc ? rc : 1;
  }
  return rc;
}

void cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_error(fmt, ap);
  fprintf(stderr, "(kcache --help for usage)\n");
  va_end(ap);
  exit(end(2));
}

void cli_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_error(fmt, ap);
  va_end(ap);
  exit(end(1));
}

/* ------------------------------------------------------------ arguments */

bool cli_opt(cli *c, int *i, const char *name, const char **val) {
  const char *a = c->argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n)) return false;
  if (a[n] == '=') {
    *val = a + n + 1;
    return true;
  }
  if (a[n]) return false;
  if (*i + 1 >= c->argc) cli_usage("%s: option %s needs a value", c->cmd, name);
  *val = c->argv[++*i];
  return true;
}

bool cli_flag(const char *a, const char *name, const char *alias) {
  return !strcmp(a, name) || (alias && !strcmp(a, alias));
}

void cli_unexpected(const cli *c, const char *a) {
  if (a[0] == '-' && a[1]) cli_usage("%s: unknown option '%s'", c->cmd, a);
  cli_usage("%s: unexpected argument '%s'", c->cmd, a);
}

/* ----------------------------------------------------------------- main */

static bool has_help(const cli *c) {
  for (int i = 0; i < c->argc; i++)
    if (cli_flag(c->argv[i], "--help", "-h")) return true;
  return false;
}

/* `kcache`, `kcache help [COMMAND]`, `kcache --help`: the exit status. */
static int print_help(const char *cmd, const cli *c, bool asked) {
  const char *topic = cmd && !strcmp(cmd, "help") && c->argc ? c->argv[0] : NULL;
  if (topic && c->argc > 1) cli_usage("help: unexpected argument '%s'", c->argv[1]);
  for (size_t i = 0; topic && i < NCOMMANDS; i++)
    if (!strcmp(commands[i].name, topic)) {
      fputs(commands[i].help, stdout);
      return 0;
    }
  if (topic) cli_usage("no command '%s'", topic);
  fputs(help_main, cmd || asked ? stdout : stderr);
  return cmd || asked ? 0 : 2;
}

/* The store's directory. --dir, or $KC_CACHE_DIR, must name one that
 * exists: a typo is a usage error (exit 2), never an empty store; the
 * default (~/.cache/kcache) may not exist yet (nothing was cached). For -p
 * (`lenient`) a store that is not there is a warning. */
static void set_root(cli *c, const char *dir, bool lenient) {
  if (dir && !*dir) cli_usage("option --dir needs a value");
  const char *root = kc__config_text(&c->conf, KC__SET_CACHE_DIR); /* --dir, KC_CACHE_DIR or the default */
  if (!root || !*root) cli_usage("no store directory: give --dir, or set KC_CACHE_DIR or HOME");
  if (strlen(root) > KC__STORE_ROOT_MAX)
    cli_usage("the store's path is too long (%zu bytes; at most %d, so that the paths of its files fit in "
              "PATH_MAX)",
              strlen(root), KC__STORE_ROOT_MAX);
  snprintf(c->root, sizeof c->root, "%s", root);
  kc__origin from = kc__config_origin(&c->conf, KC__SET_CACHE_DIR);
  const char *named = dir ? "--dir " : from == KC__FROM_ENV ? "KC_CACHE_DIR=" : NULL;
  struct stat st;
  int err = stat(c->root, &st) != 0 ? errno : 0;
  const char *why = err ? strerror(err) : !S_ISDIR(st.st_mode) ? "not a directory" : NULL;
  if (named && why) {
    if (lenient) fprintf(stderr, "kcache: warning: %s%s: %s (no store there yet)\n", named, c->root, why);
    else if (err == ENOENT && !dir)
      cli_usage("%s%s: %s (it names no store; kcache makes the directory at its first compile there)", named,
                c->root, why);
    else cli_usage("%s%s: %s", named, c->root, why);
  }
  kc__store_vdir(c->root, c->vdir, sizeof c->vdir);
  char trust_why[1024];
  (void)kc__store_trust_load(&c->trust, c->root, &c->conf, NULL, trust_why, sizeof trust_why);
}

/* A store this user cannot read is an error (exit 1), not an empty listing:
 * its directory, and its v1 folder where there is one. One that is not a
 * directory says so (access() would call a plain file's missing search
 * permission "Permission denied"). */
static void check_readable(const cli *c) {
  const char *dirs[] = {c->root, c->vdir};
  for (int i = 0; i < 2; i++) {
    struct stat st;
    if (stat(dirs[i], &st) != 0) {
      if (errno == ENOENT) return; /* not made yet: an empty store */
    } else if (!S_ISDIR(st.st_mode)) {
      cli_fail(
          "cannot read the store: %s is not a directory (kcache could not keep its entries there either)",
          dirs[i]);
    }
    if (access(dirs[i], R_OK | X_OK) != 0)
      cli_fail("cannot read the store %s: %s (kcache would not see its entries either)", dirs[i],
               strerror(errno));
  }
}

/* The settings in force, as a runtime would resolve them, with --dir (if
 * given) as the cache directory's option. */
static void resolve(cli *c, const char *dir) {
  kc_options o;
  kc_options_init(&o);
  o.cache_dir = dir;
  if (kc__config_resolve(&o, NULL, &c->conf)) cli_fail("out of memory");
  if (dir) kc__config_set(&c->conf, KC__SET_CACHE_DIR, dir, KC__FROM_OPTION, "--dir");
}

/* The command line's run: its exit status, before end() checks stdout. */
static int run(int argc, char **argv) {
  static cli c; /* static: what it holds (its configuration) lives until exit */
  memset(&c, 0, sizeof c);
  const char *dir = NULL, *cmd = NULL;
  static char *rest[4096];
  bool help = false;
  char special = 0; /* 'p': --show-config; 'M': --max-size */
  const char *max_size = NULL;
  c.cmd = "kcache";
  out_state.cmd = "kcache";
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) /* errors of the arguments are JSON too */
    if (!strcmp(argv[i], "--json")) out_state.json = true;
  bool zero = false, show = false; /* -z given, -s given (ccache's -sz, -zs, -z -s) */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool stats_flags = (a[0] == '-' && a[1] && a[1] != '-' && strspn(a + 1, "sz") == strlen(a + 1)) ||
                       !strcmp(a, "--show-stats") || !strcmp(a, "--zero-stats");
    if (stats_flags && (!cmd || (!strcmp(cmd, "stats") && !c.argc) || (zero && !strcmp(cmd, "stats")))) {
      /* -s, -z and their combinations: with both, the stats are shown and
       * then zeroed, as ccache -sz does (-z alone is stats --zero) */
      cmd = "stats";
      bool lng = a[1] == '-'; /* --show-stats, --zero-stats: not letters to look for */
      show = show || (!lng && strchr(a + 1, 's')) || !strcmp(a, "--show-stats");
      if (!zero && ((!lng && strchr(a + 1, 'z')) || !strcmp(a, "--zero-stats"))) {
        zero = true;
        rest[c.argc++] = "--zero";
      }
      continue;
    }
    if (!strcmp(a, "--dir")) {
      if (i + 1 >= argc) cli_usage("option --dir needs a value");
      dir = argv[++i];
    } else if (!strncmp(a, "--dir=", 6)) {
      dir = a + 6;
    } else if (!strcmp(a, "--json")) {
      c.json = true;
    } else if (!cmd && cli_flag(a, "--help", "-h")) {
      help = true;
    } else if (!cmd && cli_flag(a, "--clear", "-C")) {
      cmd = "clear";
    } else if (!cmd && cli_flag(a, "--show-config", "-p")) {
      special = 'p';
      cmd = "config";
    } else if (!cmd && (cli_flag(a, "--max-size", "-M") || !strncmp(a, "--max-size=", 11) ||
                        (!strncmp(a, "-M", 2) && a[2]))) {
      const char *eq = strchr(a, '='); /* only in "--max-size=SIZE" */
      bool joined = a[1] == 'M' && a[2]; /* ccache's -M5G */
      if (!eq && !joined && i + 1 >= argc) cli_usage("option %s needs a value (a size: 500M, 2G)", a);
      max_size = eq ? eq + 1 : joined ? a + 2 : argv[++i];
      special = 'M';
      cmd = "config";
    } else if (!cmd && cli_flag(a, "--version", "-V")) {
      if (out_state.json) printf("{\"version\": \"%s\"}\n", kc_version());
      else printf("kcache %s\n", kc_version());
      return 0;
    } else if (!cmd && a[0] == '-') {
      cli_usage("unknown option '%s'", a);
    } else if (!cmd) {
      cmd = a;
    } else if (c.argc < (int)(sizeof rest / sizeof *rest)) {
      rest[c.argc++] = argv[i];
    } else {
      cli_usage("too many arguments");
    }
  }
  c.argv = rest;
  c.zero_after = zero && show;
  resolve(&c, dir && *dir ? dir : NULL);
  if (special) { /* -p and -M: the store's settings, no command */
    if (help || has_help(&c)) { /* --help wherever it is, as after a command */
      fputs(cli_help_config, stdout);
      return 0;
    }
    if (c.argc) cli_usage("-%c takes no command ('%s')", special, c.argv[0]);
    c.cmd = out_state.cmd = special == 'p' ? "--show-config" : "--max-size";
    if (c.json) capture_start();
    set_root(&c, dir, special == 'p');
    if (special == 'p') return cli_show_config(&c, dir != NULL);
    int err = 0; /* a default store that is not there yet: made as the library would make it */
    if (!kc__store_make_dirs(c.root, kc__store_dir_mode(&c.trust), &err))
      cli_fail("-M: cannot make %s: %s", c.root, strerror(err));
    return cli_set_max_size(&c, max_size);
  }
  if (help || !cmd || !strcmp(cmd, "help")) {
    if (!help && !cmd && c.json) cli_usage("no command given");
    return print_help(cmd, &c, help);
  }
  size_t k = 0;
  while (k < NCOMMANDS && strcmp(commands[k].name, cmd)) k++;
  if (k == NCOMMANDS) cli_usage("no command '%s'", cmd);
  if (has_help(&c)) {
    fputs(commands[k].help, stdout);
    return 0;
  }
  c.cmd = out_state.cmd = commands[k].name;
  /* watch streams one object a line: nothing to hold back */
  if (c.json && commands[k].run != cmd_watch) capture_start();
  if (commands[k].store) {
    set_root(&c, dir, false);
    check_readable(&c);
  }
  c.progress = !c.json && isatty(2);
  return commands[k].run(&c);
}

int main(int argc, char **argv) { return end(run(argc, argv)); }
