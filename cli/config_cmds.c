/* SPDX-License-Identifier: MIT */
/*
 * cli/config_cmds.c -- the settings in force (kcache -p, --show-config:
 * every KC_* setting of the library's table, its value and where it came
 * from, as `ccache -p` shows its own) and the store's persistent size bound
 * (kcache -M SIZE, --max-size SIZE: max_size in ROOT/kcache.conf, which
 * every runtime on that store reads; $KC_CACHE_MAXSIZE still wins).
 */
#include "cli.h"
#include "out.h"
#include "cache/dir.h"
#include "base/config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char cli_help_config[] =
    "usage: kcache [--dir DIR] [--json] -p | --show-config\n"
    "       kcache [--dir DIR] -M SIZE | --max-size SIZE\n"
    "\n"
    "-p prints every KC_* setting the library reads: its value and where it\n"
    "comes from, \"(environment)\", \"(default)\", \"(kcache.conf)\" (the store's\n"
    "configuration file) or \"(--dir)\"; a value the library would not take\n"
    "is shown with a warning. With --json, an array of objects with name,\n"
    "value (null: not set, no default), malformed, from and doc.\n"
    "\n"
    "-M SIZE keeps SIZE (e.g. 500M, 2G; 0: the default, 1 GiB) as the store's\n"
    "size bound in DIR/kcache.conf; every runtime on the store and `kcache gc`\n"
    "read it; $KC_CACHE_MAXSIZE, where set, wins over it. Like ccache -M, it\n"
    "evicts nothing itself: the next compile or `kcache gc` does.\n";

typedef struct row {
  const char *name, *value, *from, *doc;
  bool malformed; /* the library warns and uses the default */
} row;

/* Whether a value the library would refuse (and use the default for): the
 * kinds' parsers, and the words of the settings that take a word. */
static const char *const words[][6] = {
    [KC__SET_LOG] = {"error", "warn", "info", "debug"},
    [KC__SET_BACKEND] = {"auto", "host", "opencl", "cuda"},
    [KC__SET_OPENCL_HELPERS] = {"auto", "0", "1"},
};

static bool malformed(kc__setting id, const char *v) {
  if (!v || !*v) return false;
  if ((size_t)id < sizeof words / sizeof *words && words[id][0]) {
    for (size_t i = 0; i < 6 && words[id][i]; i++)
      if (!strcmp(v, words[id][i])) return false;
    return true;
  }
  kc__setting_kind k = kc__setting_kind_of(id);
  if (k == KC__KIND_STR || k == KC__KIND_TEXT) return false; /* any text */
  union {
    bool b;
    uint64_t u;
    double d;
  } out;
  return kc__setting_parse(id, v, &out, 0, UINT64_MAX) == KC__SETTING_BAD;
}

static void print_rows(const cli *c, const row *r, size_t n) {
  if (!c->json) {
    for (size_t i = 0; i < n; i++)
      printf("(%s) %s = %s\n", r[i].from, r[i].name, r[i].value ? r[i].value : "(not set)");
    return;
  }
  printf("[");
  for (size_t i = 0; i < n; i++) {
    printf("%s\n {\"name\": ", i ? "," : "");
    json_str(r[i].name);
    printf(", \"value\": ");
    if (r[i].value) json_str(r[i].value);
    else printf("null");
    printf(", \"malformed\": %s", r[i].malformed ? "true" : "false");
    printf(", \"from\": ");
    json_str(r[i].from);
    printf(", \"doc\": ");
    json_str(r[i].doc);
    printf("}");
  }
  printf("\n]\n");
}

int cli_show_config(cli *c, bool dir_given) {
  (void)dir_given; /* the configuration names --dir */
  row r[KC__SETTING_COUNT];
  char why[PATH_MAX + 256];
  uint64_t bytes;
  kc__max_from mf;
  bool max_ok = kc__store_max_size(&c->conf, c->root, &c->trust, &bytes, &mf, why, sizeof why);
  for (int id = 0; id < KC__SETTING_COUNT; id++) { /* the library's resolution (kc__config_resolve) */
    row *x = &r[id];
    x->name = kc__setting_name((kc__setting)id);
    x->doc = kc__setting_doc((kc__setting)id);
    x->value = kc__config_str(&c->conf, (kc__setting)id);
    x->from = kc__config_origin(&c->conf, (kc__setting)id) == KC__FROM_DEFAULT
                  ? "default"
                  : kc__config_from(&c->conf, (kc__setting)id);
    x->malformed = kc__config_origin(&c->conf, (kc__setting)id) != KC__FROM_DEFAULT &&
                   id != KC__SET_CACHE_MAXSIZE &&
                   malformed((kc__setting)id, x->value); /* (the size: below) */
    if (x->malformed) {
      char takes[128] = "";
      if ((size_t)id < sizeof words / sizeof *words && words[id][0])
        for (size_t k = 0; k < 6 && words[id][k]; k++)
          snprintf(takes + strlen(takes), sizeof takes - strlen(takes), "%s%s", k ? ", " : "one of ",
                   words[id][k]);
      fprintf(stderr,
              "kcache: warning: %s=%s is not %s: the library warns and uses the default, or refuses it "
              "where it must not guess (doc/settings.md)\n",
              x->name, x->value, *takes ? takes : kc__setting_takes((kc__setting)id));
    }
  }
  if (!max_ok) fprintf(stderr, "kcache: warning: %s; using 1G\n", why);
  print_rows(c, r, KC__SETTING_COUNT);
  return 0;
}

int cli_set_max_size(cli *c, const char *arg) {
  /* What is written is what is reported, and what the file's reader reads
   * back: the size without the blanks around it (kcache.conf's reader trims
   * those), and no control character within (a newline would end the
   * line: "max_size = " and a stray "5G", the default in force) */
  char size[128];
  size_t lead = strspn(arg, " \t\n\r\v\f"), n = strlen(arg + lead);
  while (n && strchr(" \t\n\r\v\f", arg[lead + n - 1])) n--;
  if (n >= sizeof size)
    cli_usage("-M: \"%.40s...\" is not a size (e.g. 500M, 2G; 0: the default)", arg + lead);
  snprintf(size, sizeof size, "%.*s", (int)n, arg + lead);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)size[i] < 0x20 || size[i] == 0x7f)
      cli_usage("-M: the size holds a control character (byte 0x%02x): give it as 500M or 2G",
                (unsigned)(unsigned char)size[i]);
  uint64_t v;
  if (!kc__store_parse_size(size, &v))
    cli_usage("-M: \"%s\" is not a size (e.g. 500M, 2G; 0: the default)", size);
  int err = kc__store_conf_set(c->root, &c->trust, "max_size", size);
  if (err == EPERM)
    cli_fail("-M: %s/" KC__STORE_CONF " is not trusted (owned by another user, or writable by others than "
             "the store trusts, as for its entries): not changed",
             c->root);
  if (err) cli_fail("-M: cannot write %s/" KC__STORE_CONF ": %s", c->root, strerror(err));
  uint64_t now;
  kc__max_from from;
  kc__store_max_size(&c->conf, c->root, &c->trust, &now, &from, NULL, 0);
  bool in_force = from != KC__MAX_ENV; /* (KC_CACHE_MAXSIZE wins) */
  char a[32];
  if (c->json) {
    printf("{\"max_size\": ");
    json_str(size);
    printf(", \"max_bytes\": %llu, \"in_force\": %s}\n", (unsigned long long)(v ? v : KC__STORE_DEFAULT_MAX),
           in_force ? "true" : "false");
  } else {
    printf("the size bound of %s is now %s (%s/" KC__STORE_CONF ")\n", c->root,
           v ? human_size(v, a, sizeof a) : "the default, 1 GiB", c->root);
    if (!in_force)
      printf("(KC_CACHE_MAXSIZE=%s is set and wins over it in this environment)\n",
             kc__config_text(&c->conf, KC__SET_CACHE_MAXSIZE));
  }
  return 0;
}
