/* SPDX-License-Identifier: MIT */
/*
 * cli/cli.h -- what the files of the `kcache` command share: the parsed
 * invocation, the commands (one family per file), argument parsing and
 * usage errors (main.c), and finding entries by key prefix or kernel name
 * (lookup.c). Output helpers are out.h's.
 *
 * Files: main.c (dispatch, global options, help, version), lookup.c
 * (finding entries), out.c (JSON strings, sizes, ages, the progress bar),
 * store_cmds.c (stats, ls, show, verify, gc, clear), explain.c (why a kernel
 * missed), remote_cmds.c (remote ping|ls|clear and the remote part of
 * stats), config_cmds.c (-p, the settings in force; -M, the store's size
 * bound in its kcache.conf). A new command is a function and a help text in one of them and a
 * row in main.c's table.
 *
 * Entries are read only through the entry codec (cache/codec.h, dir.h).
 * Exit status: 0 success, 1 failure (or damage found), 2 a usage error.
 * With --json every command prints valid JSON, a failure included (main.c).
 */
#ifndef KC_CLI_CLI_H
#define KC_CLI_CLI_H

#include "cache/cache.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define CLI_NORETURN __attribute__((noreturn))

typedef struct cli {
  char root[PATH_MAX]; /* the store's directory */
  char vdir[PATH_MAX]; /* root/v1 */
  /* whom the store trusts (kc__store_trust_load; filled for a store
   * command even when it refuses the store: verify says why) */
  kc__store_trust trust;
  /* every setting, resolved as a runtime resolves it (kc__config_resolve,
   * with --dir as the cache directory's option) */
  kc__config conf;
  bool json; /* --json */
  bool progress; /* stderr is a terminal (and not --json) */
  bool zero_after; /* ccache's -sz (-zs, -z -s): stats --zero shows the counters first, then zeroes them */
  const char *cmd; /* the command's name */
  int argc; /* the command's own arguments */
  char **argv;
} cli;

/* ------------------------------------------------- arguments (main.c) */

/* "kcache: MSG" and a pointer to --help on stderr, then exit(2). */
CLI_NORETURN void cli_usage(const char *fmt, ...) CLI_PRINTF(1, 2);
/* "kcache: MSG" on stderr, then exit(1). */
CLI_NORETURN void cli_fail(const char *fmt, ...) CLI_PRINTF(1, 2);
/* "kcache: MSG" on stderr, for a command that then returns a nonzero status:
 * with --json, the first such message is the error object that replaces the
 * command's output (main.c). Warnings are written to stderr directly. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* Whether c->argv[*i] is the option `name` ("--max-size") as "--max-size V"
 * or "--max-size=V": then *val is V and *i is past it. An option given
 * without its value is a usage error ("option --max-size needs a value"). */
bool cli_opt(cli *c, int *i, const char *name, const char **val);
/* Whether a is the flag spelled `name` or `alias` (alias may be NULL). */
bool cli_flag(const char *a, const char *name, const char *alias);
/* The usage error for an argument that a command does not take: an unknown
 * option, or an extra operand. */
CLI_NORETURN void cli_unexpected(const cli *c, const char *a);

/* ------------------------------------------- settings (config_cmds.c) */

extern const char cli_help_config[];
/* kcache -p: every setting, its value and origin (dir_given: --dir named the store). */
int cli_show_config(cli *c, bool dir_given);
/* kcache -M SIZE: the store's size bound into ROOT/kcache.conf. */
int cli_set_max_size(cli *c, const char *size);

/* --------------------------------------------- finding entries (lookup.c) */

/* Every entry file of the store (exit 1 with the reason if it cannot be
 * listed). Free with kc__store_list_free(NULL, files, *n). */
kc__store_file *cli_list(const cli *c, size_t *n);
/* Whether this user may rewrite the store's index: a store it can write,
 * and not another user's store as root (its index would be root's). */
bool cli_index_writable(const cli *c);
/* The index records of the entries named `name` (their names' hashes: a
 * collision is possible, so read each entry to be sure), from every
 * bucket's index (reading the entries the index does not know yet). Exit
 * 1 when out of memory. Free with kc__index_set_free(NULL, out). */
void cli_named(const cli *c, const char *name, kc__index_set *out);

/* What `show` and `explain` take: a key (32 hex digits, or a unique prefix
 * of 4 or more), else a kernel's entry name, which names its most recently
 * compiled entry (only among those whose parameters are `params`, if not
 * NULL). The entry is decoded in full into *e (free with kc__entry_free);
 * path gets its file. Prints why to stderr and returns false when there is
 * no such entry, a prefix is ambiguous, or the entry cannot be read. */
bool cli_resolve(const cli *c, const char *what, const char *params, kc__entry *e, char *path, size_t len);

/* ------------------------------------------------------------ commands */

typedef int (*cli_cmd_fn)(cli *c);

int cmd_stats(cli *c);
int cmd_ls(cli *c);
int cmd_show(cli *c);
int cmd_verify(cli *c);
int cmd_gc(cli *c);
int cmd_clear(cli *c);
/* watch.c: the hot-reload demo, the one command that runs a runtime. */
int cmd_watch(cli *c);
int cmd_explain(cli *c);
int cmd_remote(cli *c);

extern const char cli_help_stats[], cli_help_ls[], cli_help_show[], cli_help_verify[], cli_help_gc[],
    cli_help_clear[], cli_help_explain[], cli_help_remote[], cli_help_watch[];

/* The remote tier's part of `kcache stats` (remote_cmds.c): the counters of
 * the processes that used this store, and the tier $KC_REMOTE names. In
 * JSON, a ", \"remote\": ..." member. */
void cli_stats_remote(const cli *c);

#endif /* KC_CLI_CLI_H */
