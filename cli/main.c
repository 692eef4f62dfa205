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
 */
#include "cli.h"
#include "out.h"
#include "core/core.h" /* kc__config_resolve: the settings as a runtime resolves them */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    "                 else $XDG_CACHE_HOME/kcache, else ~/.cache/kcache)\n"
    "  --json         machine-readable output\n"
    "\n"
    "ccache's and sccache's spellings (see kcache --help -p for -p and -M):\n"
    "  -s, --show-stats   kcache stats         -z, --zero-stats   kcache stats --zero\n"
    "  -C, --clear        kcache clear         -p, --show-config  the settings in force\n"
    "  -M, --max-size SIZE  the store's size bound, kept in DIR/kcache.conf\n"
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

/* ------------------------------------------------------------ arguments */

void cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kcache: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(kcache --help for usage)\n");
  va_end(ap);
  exit(2);
}

void cli_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kcache: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

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

/* The store's directory: --dir must name one that exists (a typo is not an
 * empty store); the default may not exist yet (nothing was cached). */
static void set_root(cli *c, const char *dir) {
  if (dir) {
    struct stat st;
    if (!*dir) cli_usage("option --dir needs a value");
    if (stat(dir, &st) != 0) cli_usage("--dir %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) cli_usage("--dir %s: not a directory", dir);
  }
  const char *root = kc__config_text(&c->conf, KC__SET_CACHE_DIR); /* --dir, KC_CACHE_DIR or the default */
  if (!root || !*root) {
    fprintf(stderr, "kcache: no store directory: give --dir, or set KC_CACHE_DIR or HOME\n");
    exit(2);
  }
  if (strlen(root) >= sizeof c->root) cli_usage("the store's path is too long (%zu bytes)", strlen(root));
  snprintf(c->root, sizeof c->root, "%s", root);
  kc__store_vdir(c->root, c->vdir, sizeof c->vdir);
  char why[1024];
  (void)kc__store_trust_load(&c->trust, c->root, &c->conf, NULL, why, sizeof why);
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

int main(int argc, char **argv) {
  static cli c; /* static: what it holds (its configuration) lives until exit */
  memset(&c, 0, sizeof c);
  const char *dir = NULL, *cmd = NULL;
  static char *rest[4096];
  bool help = false;
  char special = 0; /* 'p': --show-config; 'M': --max-size */
  const char *max_size = NULL;
  c.cmd = "kcache";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--dir")) {
      if (i + 1 >= argc) cli_usage("option --dir needs a value");
      dir = argv[++i];
    } else if (!strncmp(a, "--dir=", 6)) {
      dir = a + 6;
    } else if (!strcmp(a, "--json")) {
      c.json = true;
    } else if (!cmd && cli_flag(a, "--help", "-h")) {
      help = true;
    } else if (!cmd && cli_flag(a, "--show-stats", "-s")) { /* ccache's and sccache's spellings */
      cmd = "stats";
    } else if (!cmd && cli_flag(a, "--zero-stats", "-z")) {
      cmd = "stats";
      rest[c.argc++] = "--zero";
    } else if (!cmd && cli_flag(a, "--clear", "-C")) {
      cmd = "clear";
    } else if (!cmd && cli_flag(a, "--show-config", "-p")) {
      special = 'p';
      cmd = "config";
    } else if (!cmd && (cli_flag(a, "--max-size", "-M") || !strncmp(a, "--max-size=", 11))) {
      const char *eq = strchr(a, '='); /* only in "--max-size=SIZE" */
      if (!eq && i + 1 >= argc) cli_usage("option %s needs a value (a size: 500M, 2G)", a);
      max_size = eq ? eq + 1 : argv[++i];
      special = 'M';
      cmd = "config";
    } else if (!cmd && cli_flag(a, "--version", "-V")) {
      printf("kcache %s\n", kc_version());
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
  resolve(&c, dir && *dir ? dir : NULL);
  if (special) { /* -p and -M: the store's settings, no command */
    if (help) {
      fputs(cli_help_config, stdout);
      return 0;
    }
    if (c.argc) cli_usage("-%c takes no command ('%s')", special, c.argv[0]);
    c.cmd = special == 'p' ? "--show-config" : "--max-size";
    set_root(&c, dir);
    if (special == 'p') return cli_show_config(&c, dir != NULL);
    int err = 0; /* a store that is not there yet: made as the library would make it */
    if (!kc__store_make_dirs(c.root, kc__store_dir_mode(&c.trust), &err))
      cli_fail("-M: cannot make %s: %s", c.root, strerror(err));
    return cli_set_max_size(&c, max_size);
  }
  if (help || !cmd || !strcmp(cmd, "help")) return print_help(cmd, &c, help);
  size_t k = 0;
  while (k < NCOMMANDS && strcmp(commands[k].name, cmd)) k++;
  if (k == NCOMMANDS) cli_usage("no command '%s'", cmd);
  if (has_help(&c)) {
    fputs(commands[k].help, stdout);
    return 0;
  }
  c.cmd = commands[k].name;
  if (commands[k].store) set_root(&c, dir);
  c.progress = !c.json && isatty(2);
  return commands[k].run(&c);
}
