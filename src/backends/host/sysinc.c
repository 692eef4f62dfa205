/* SPDX-License-Identifier: MIT */
/*
 * sysinc.c -- tcc's system include directories, searched as -I
 * directories so that its dependency file lists what it read there.
 *
 * kcache records every header a compile read (core/extfiles.c) from the
 * compiler's -MD list. gcc and clang list system headers too; tcc leaves
 * out every file found in a system directory (its built-in list and
 * $C_INCLUDE_PATH), so a header edited in /usr/local/include would be
 * served stale. A compile with tcc therefore runs with -nostdinc and the
 * same directories given as -I, in the order tcc searches them: $CPATH,
 * then $C_INCLUDE_PATH, then the built-in list (`tcc -vv`, "include:"),
 * all after the compile options' own -I. tcc then finds the same files
 * and lists them all. It runs without $CPATH and $C_INCLUDE_PATH in its
 * environment: it would add their directories again, behind, as system
 * ones, and a header missing at the -I and present there a moment later
 * (an editor's rewrite: removed, then renamed into place, while tcc
 * searches) was read and not listed, and the code compiled from it never
 * ended (the oracle's stale result of issue 22). With -nostdinc in the
 * compile options, only the environment's directories are added.
 */
#include "host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* The directories of tcc's `-vv` output (the indented lines after
 * "include:") into out, one per line. False if it had none. */
static bool sysinc_parse(const char *text, size_t n, kc__sb *out) {
  const char *end = text + n, *p = text;
  bool in = false, any = false;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len && (p[0] == ' ' || p[0] == '\t')) {
      if (in) {
        size_t lead = strspn(p, " \t");
        while (len > lead && (p[len - 1] == '\r' || p[len - 1] == ' ')) len--;
        if (len > lead) {
          kc__sb_append(out, p + lead, len - lead);
          kc__sb_append(out, "\n", 1);
          any = true;
        }
      }
    } else in = len >= 8 && !memcmp(p, "include:", 8);
    p = nl ? nl + 1 : end;
  }
  return any;
}

kc_status host_sysinc_probe(host_state *s, const char *dir) {
  char lg[HOST_WORKDIR_MAX + 16];
  snprintf(lg, sizeof lg, "%s/sysinc.log", dir);
  char *argv[] = {s->cc_argv[0], "-vv", NULL};
  int code = 0, sig = 0;
  /* its own directories only: not those of $CPATH and $C_INCLUDE_PATH,
   * which each compile gives it as -I from the environment of the time */
  char **env = host_sysinc_env(s);
  if (!env) return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
  kc_status st = host_run_tool(s, argv, env, lg, &code, &sig);
  kc__bs_free(s->sv, env);
  void *text = NULL;
  size_t n = 0;
  if (st == KC_OK) st = host_read_file(s->sv, lg, HOST_LOG_MAX, true, &text, &n);
  unlink(lg);
  if (st) return st;
  kc__sb sb;
  kc__sb_init(&sb, &(s->sv)->heap);
  bool any = sysinc_parse(text, n, &sb);
  kc__bs_free(s->sv, text);
  if (sb.failed) {
    kc__sb_free(&sb);
    return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
  }
  if (!any) {
    kc__sb_free(&sb);
    return kc__bs_err(s->sv, KC_EBACKEND,
                      "the host compiler \"%s\" (tcc) did not list its include directories (%s -vv)",
                      s->cc_argv[0], s->cc_argv[0]);
  }
  s->sysinc = kc__sb_take(&sb);
  return s->sysinc ? KC_OK : kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
}

/* Appends "-I" + each directory of list (split on sep; empty parts are
 * skipped) to out, NUL after each. */
static void sysinc_add(kc__sb *out, const char *list, char sep, int *count) {
  for (const char *p = list; p && *p;) {
    size_t n = strcspn(p, (char[]){sep, '\0'});
    if (n) {
      kc__sb_append(out, "-I", 2);
      kc__sb_append(out, p, n);
      kc__sb_append(out, "", 1);
      (*count)++;
    }
    p += n;
    if (*p) p++;
  }
}

kc_status host_sysinc_args(const host_state *s, const char *sysinc, bool nostdinc, kc__sb *out, int *count) {
  *count = 0;
  if (!sysinc) return KC_OK;
  kc__sb_append(out, "-nostdinc", sizeof "-nostdinc");
  (*count)++;
  sysinc_add(out, getenv("CPATH"), ':', count);
  sysinc_add(out, getenv("C_INCLUDE_PATH"), ':', count);
  if (!nostdinc) sysinc_add(out, sysinc, '\n', count);
  return out->failed ? kc__bs_err(s->sv, KC_ENOMEM, "out of memory") : KC_OK;
}

char **host_sysinc_env(const host_state *s) {
  size_t n = 0;
  while (environ && environ[n]) n++; /* (NULL after clearenv) */
  char **env = kc__bs_alloc(s->sv, (n + 1) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "CPATH=", 6) && strncmp(environ[i], "C_INCLUDE_PATH=", 15)) env[k++] = environ[i];
  env[k] = NULL;
  return env;
}

kc_status host_sysinc_ready(host_state *s, const char **sysinc) {
  kc__lock(&s->ident_lock);
  bool missing = s->is_tcc && !s->sysinc;
  *sysinc = s->sysinc; /* set once, never changed: the pointer may be kept */
  kc__unlock(&s->ident_lock);
  if (missing)
    return kc__bs_err(s->sv, KC_EBACKEND,
                      "the host compiler \"%s\" is tcc, and kcache could not ask it for its include "
                      "directories (%s -vv): not compiled, so that no header it reads goes unrecorded",
                      s->cc_argv[0], s->cc_argv[0]);
  return KC_OK;
}
