/* SPDX-License-Identifier: MIT */
/*
 * cli/watch.c -- `kcache watch FILE`: the hot-reload demo of kc_define_file.
 * The one command that runs a runtime (a backend, a compiler): it loads a
 * source file of the dialect, launches each of its kernels (every pointer
 * parameter gets a zeroed buffer of 64 elements of its type, every scalar a
 * zero, on 64 work items), prints the first four values of each kernel's
 * first buffer (its first four scalars: a vector type's lanes) and whether it
 * was compiled again or served by code already compiled; then it polls the
 * file (every --interval ms) and does it again whenever the text changes.
 * Errors in the file (a syntax error, an undefined name) are printed and
 * the watch goes on. The file's text goes through the core's own splitter
 * to find its kernels, so the command links the internal library.
 */
#include "cli.h"
#include "out.h"
#include "core/core.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ITEMS 64
/* bytes an element where kcache cannot tell the pointee's size (a struct) */
#define ELEM_UNKNOWN 4096

const char cli_help_watch[] =
    "usage: kcache watch FILE [--backend host|opencl|cuda] [--language dialect|opencl|cuda]\n"
    "                         [--interval MS] [--count N] [--json]\n"
    "\n"
    "Loads FILE (a .c, .cl or .cu file in the kernel dialect; with --language\n"
    "opencl or cuda, OpenCL C or CUDA C++ as written) with kc_define_file_lang,\n"
    "launches each of its kernels on 64 work items (zeroed buffers of 64 elements,\n"
    "zero scalars) and prints the first four values of each kernel's first buffer\n"
    "(its first four scalars: a vector type's lanes), and whether it was\n"
    "recompiled or cached. Then polls FILE every --interval ms (default 200) and\n"
    "does it again on each change: only the kernels that reach an edited\n"
    "definition recompile. Between changes it asks kcache whether a header on\n"
    "disk that the kernels read (#include <x.h>) changed (kc_refresh): that is\n"
    "a load too, in which only the kernels that read it recompile. Stops after\n"
    "--count loads (default: never; Ctrl-C).\n"
    "--backend (default $KC_BACKEND, else the best available). The disk cache\n"
    "is the library's default ($KC_CACHE_DIR...; KC_CACHE_DISABLE=1: none).\n"
    "With --json it prints JSON Lines, one object a line: a load\n"
    "{\"load\", \"world\", \"changed\", \"names\"}, a kernel {\"kernel\", \"code\", \"y\"}, or\n"
    "a failure with \"error\" (the status) and \"message\" (the compiler's log).\n";

typedef struct wkernel {
  char *name;
  kc_kernel *k;
  uint64_t last_id; /* its code instance last time (0: never ran) */
} wkernel;

typedef struct watch {
  kc_runtime *rt;
  kc_context *ctx;
  wkernel *ks;
  size_t nk;
  bool json;
  kc_language lang; /* --language: what the file is written in */
  int failed; /* errors in the last load: a definition refused, a kernel that did not compile or run */
} watch;

/* The whole file, NUL-terminated; NULL with errno set when it cannot be
 * opened or read to its end (a partial text is never loaded). */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += r;
    if (n + 1 == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  int err = !buf ? ENOMEM : ferror(f) ? (errno ? errno : EIO) : 0;
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

static wkernel *kernel_of(watch *w, const char *name) {
  for (size_t i = 0; i < w->nk; i++)
    if (!strcmp(w->ks[i].name, name)) return &w->ks[i];
  wkernel *nk = realloc(w->ks, (w->nk + 1) * sizeof *nk);
  if (!nk) return NULL;
  w->ks = nk;
  wkernel *k = &w->ks[w->nk];
  k->name = strdup(name);
  k->last_id = 0;
  if (!k->name || kc_kernel_create(w->rt, name, NULL, &k->k) != KC_OK) {
    free(k->name);
    return NULL;
  }
  w->nk++;
  return k;
}

/* The size of a buffer parameter's element (its type less the address
 * space, qualifiers and the '*'), and its scalar base ("double" for
 * double4); 0 and "" where kcache cannot tell (a struct, a typedef). */
static uint32_t elem_type(const char *type, const char **base) {
  static const char *const drop[] = {"KC_GLOBAL", "KC_LOCAL",   "KC_CONSTANT",
                                     "restrict",  "__restrict", "__restrict__"};
  char t[128];
  size_t n = 0;
  *base = "";
  for (const char *q = type; *q;) {
    if (*q == '*' || *q == ' ' || *q == '\t') {
      q++;
      continue;
    }
    size_t wl = strcspn(q, " \t*");
    bool skip = false;
    for (size_t i = 0; i < sizeof drop / sizeof *drop; i++)
      skip |= strlen(drop[i]) == wl && !strncmp(q, drop[i], wl);
    if (!skip) {
      if (n + wl + 2 > sizeof t) return 0;
      if (n) t[n++] = ' ';
      memcpy(t + n, q, wl);
      n += wl;
    }
    q += wl;
  }
  t[n] = 0;
  return kc__scalar_type(t, NULL, base, NULL);
}

/* Four scalars of type base (size bytes each) at b, as doubles; floats
 * where the type is not known (size 0). */
static void first_values(const unsigned char *b, const char *base, uint32_t size, double y[4]) {
  for (int i = 0; i < 4; i++) {
    const unsigned char *e = b + (size_t)i * size;
    float f;
    if (!strcmp(base, "float") || !size) {
      memcpy(&f, b + 4 * i, 4);
      y[i] = f;
    } else if (!strcmp(base, "double")) memcpy(&y[i], e, 8);
    else if (!strcmp(base, "half")) {
      uint16_t h;
      memcpy(&h, e, 2);
      int ex = (h >> 10) & 31, m = h & 1023;
      double v = ex == 31 ? (m ? NAN : INFINITY) : ex ? ldexp(1024 + m, ex - 25) : ldexp(m, -24);
      y[i] = h >> 15 ? -v : v;
    } else {
      bool sgn = strncmp(base, "u", 1) && !strstr(base, "unsigned") && strcmp(base, "bool") &&
                 strcmp(base, "_Bool") && strcmp(base, "size_t");
      uint64_t u = 0;
      memcpy(&u, e, size); /* little-endian (x86-64, and the devices kcache runs on) */
      if (sgn && size < 8 && (u >> (size * 8 - 1)) & 1) u |= ~(uint64_t)0 << (size * 8);
      y[i] = sgn ? (double)(int64_t)u : (double)u;
    }
  }
}

/* Launches kernel `name` whose definition is src; prints one line. */
static void run_kernel(watch *w, const char *name, const char *src) {
  kc__param *p = NULL;
  uint32_t n = 0;
  wkernel *k = kernel_of(w, name);
  kc_status st = k ? kc__parse_params(w->rt, name, src, &p, &n) : KC_ENOMEM;
  kc_arg args[KC_MAX_ARGS];
  kc_buffer *bufs[KC_MAX_ARGS] = {0}, *first = NULL;
  static const unsigned char zero[16] = {0};
  const char *base = ""; /* the first buffer's scalar type */
  for (uint32_t i = 0; !st && i < n; i++) {
    if (p[i].is_buffer) {
      /* ITEMS elements of the pointee's size (ELEM_UNKNOWN bytes each where kcache cannot tell) */
      const char *b;
      uint32_t size = elem_type(p[i].type, &b);
      size_t bytes = (size_t)ITEMS * (size ? size : ELEM_UNKNOWN);
      unsigned char *z = calloc(1, bytes);
      st = z ? kc_buffer_create(w->ctx, bytes, &bufs[i]) : KC_ENOMEM;
      if (!st) st = kc_buffer_write(bufs[i], 0, z, bytes);
      free(z);
      args[i] = KC_ARG_BUF(bufs[i]);
      if (!first) first = bufs[i], base = b;
    } else {
      uint32_t size = kc__scalar_size(p[i].type, NULL);
      if (!size || size > sizeof zero) st = KC_EARGS;
      args[i] = (kc_arg){zero, size, KC_ARG_SCALAR};
    }
  }
  kc_dim3 grid = {ITEMS, 1, 1}, block = {1, 1, 1};
  kc_stats s0, s1;
  kc_stats_get(w->rt, &s0);
  if (!st) st = kc_launch(k->k, w->ctx, &grid, &block, args, n);
  kc_stats_get(w->rt, &s1);
  if (!st) st = kc_context_finish(w->ctx);
  /* its first four scalars: y[0..3], or the lanes of its first elements for a vector type */
  uint32_t bsize = *base ? kc__scalar_size(base, NULL) : 0;
  unsigned char raw[4 * 8] = {0};
  if (!st && first) st = kc_buffer_read(first, 0, raw, 4 * (bsize ? bsize : 4));
  double y[4];
  first_values(raw, base, bsize, y);
  kc_code_info ci = {0};
  if (!st) st = kc_kernel_code(k->k, &ci);
  if (st) {
    /* the compiler's message (kc_errmsg) in both forms: text indented under the line, JSON as "message" */
    const char *msg =
        st == KC_EARGS && !kc_errmsg(w->rt)[0] ? "a parameter kcache cannot fill" : kc_errmsg(w->rt);
    if (w->json) {
      printf("{\"kernel\":\"%s\",\"error\":\"%s\",\"message\":", name, kc_status_name(st));
      json_str(msg);
      printf("}\n");
    } else printf("  %-16s error: %s\n    %s\n", name, kc_status_name(st), msg);
    w->failed++;
  } else {
    const char *what = s1.compiles > s0.compiles ? "recompiled"
                       : ci.id == k->last_id     ? "cached"
                                                 : "from disk";
    if (w->json)
      printf("{\"kernel\":\"%s\",\"code\":\"%s\",\"y\":[%g,%g,%g,%g]}\n", name, what, y[0], y[1], y[2], y[3]);
    else printf("  %-16s %-10s y[0..3] = %g %g %g %g\n", name, what, y[0], y[1], y[2], y[3]);
    k->last_id = ci.id;
  }
  for (uint32_t i = 0; i < n; i++) kc_buffer_destroy(bufs[i]);
  kc__free_params(w->rt, p, n);
}

/* The names a load changed, as kc_define_file_ex reports them: a JSON
 * list or "NAME (what), ..." in names (an open_memstream). */
typedef struct {
  FILE *names;
  bool json, first;
} change_list;

static void on_change(void *user, const char *name, kc_change_kind kind) {
  change_list *c = user;
  const char *what = kind == KC_CHANGE_DEFINED     ? "defined"
                     : kind == KC_CHANGE_REDEFINED ? "redefined"
                                                   : "undefined";
  if (!c->names) return;
  fprintf(c->names, c->json ? "%s{\"name\":\"%s\",\"change\":\"%s\"}" : "%s%s (%s)", c->first ? "" : ", ",
          name, what);
  c->first = false;
}

/* Every kernel of the file's text, launched. */
static void run_all(watch *w, const char *path, const char *text, size_t len) {
  kc__change *v;
  size_t n;
  if (kc__split_file_lang(w->rt, path, text, len, (uint8_t)w->lang, &v, &n) == KC_OK) {
    for (size_t i = 0; i < n; i++)
      if (w->lang == KC_LANG_DIALECT
              ? strstr(v[i].source, "KC_KERNEL") != NULL
              : kc__check_native(w->rt, (uint8_t)w->lang, v[i].name, v[i].source) == KC_OK)
        run_kernel(w, v[i].name, v[i].source);
    kc__free_changes(w->rt, v, n);
  }
  fflush(stdout);
}

/* One load of the file's text: define, then launch every kernel. */
static void load(watch *w, const char *path, const char *text, size_t len, int round) {
  size_t changed = 0;
  kc_world world = 0;
  char *names = NULL;
  size_t nlen = 0;
  change_list c = {open_memstream(&names, &nlen), w->json, true};
  kc_status st = kc_define_file_lang(w->rt, path, text, len, w->lang, on_change, &c, &changed, &world);
  if (c.names) fclose(c.names);
  w->failed = 0;
  if (st) {
    w->failed++;
    if (w->json) {
      printf("{\"load\":%d,\"error\":\"%s\",\"message\":", round, kc_status_name(st));
      json_str(kc_errmsg(w->rt));
      printf("}\n");
    } else printf("load %d: %s\n  %s\n", round, kc_status_name(st), kc_errmsg(w->rt));
    fflush(stdout);
    free(names);
    return;
  }
  if (w->json)
    printf("{\"load\":%d,\"world\":%llu,\"changed\":%zu,\"names\":[%s]}\n", round, (unsigned long long)world,
           changed, names ? names : "");
  else
    printf("load %d: world %llu, %zu definition(s) changed%s%s\n", round, (unsigned long long)world, changed,
           changed && names ? ": " : "", names ? names : "");
  free(names);
  run_all(w, path, text, len);
}

/* The file's text is unchanged: the headers on disk its kernels read
 * (kc_refresh); if one changed, the kernels again. Whether one did. */
static bool refresh(watch *w, const char *path, const char *text, size_t len, int round) {
  size_t changed = 0;
  kc_world world = 0;
  kc_status st = kc_refresh(w->rt, &changed, &world);
  if (st) {
    if (w->json) {
      printf("{\"load\":%d,\"error\":\"%s\",\"message\":", round, kc_status_name(st));
      json_str(kc_errmsg(w->rt));
      printf("}\n");
      fflush(stdout);
    }
    fprintf(stderr, "kcache: watch: kc_refresh: %s\n", kc_errmsg(w->rt));
    return false;
  }
  if (!changed) return false;
  w->failed = 0;
  if (w->json)
    printf("{\"load\":%d,\"world\":%llu,\"headers_changed\":%zu}\n", round, (unsigned long long)world,
           changed);
  else
    printf("load %d: world %llu, %zu header(s) on disk changed\n", round, (unsigned long long)world, changed);
  run_all(w, path, text, len);
  return true;
}

static kc_backend_kind backend_of(const char *s) {
  if (!s) return KC_BACKEND_AUTO;
  if (!strcmp(s, "host")) return KC_BACKEND_HOST;
  if (!strcmp(s, "opencl")) return KC_BACKEND_OPENCL;
  if (!strcmp(s, "cuda")) return KC_BACKEND_CUDA;
  cli_usage("watch: --backend must be host, opencl or cuda, not '%s'", s);
}

static kc_language language_of(const char *s) {
  if (!s || !strcmp(s, "dialect")) return KC_LANG_DIALECT;
  if (!strcmp(s, "opencl")) return KC_LANG_OPENCL;
  if (!strcmp(s, "cuda")) return KC_LANG_CUDA;
  cli_usage("watch: --language must be dialect, opencl or cuda, not '%s'", s);
}

/* Longer than 80 lines because it is the command: options, the runtime,
 * and the polling loop with its status line. */
int cmd_watch(cli *c) {
  const char *file = NULL, *be = NULL, *lang = NULL, *val;
  uint64_t interval = 200, count = 0; /* count 0: never stop */
  for (int i = 0; i < c->argc; i++) {
    if (cli_opt(c, &i, "--backend", &be)) continue;
    if (cli_opt(c, &i, "--language", &lang)) continue;
    if (cli_opt(c, &i, "--interval", &val)) {
      if (!kc__parse_u64(val, &interval, 1, 86400000))
        cli_usage("watch: --interval must be a positive number of milliseconds");
      continue;
    }
    if (cli_opt(c, &i, "--count", &val)) {
      if (!kc__parse_u64(val, &count, 1, INT_MAX)) cli_usage("watch: --count must be a positive number");
      continue;
    }
    if (c->argv[i][0] == '-' || file) cli_unexpected(c, c->argv[i]);
    file = c->argv[i];
  }
  if (!file) cli_usage("watch: which FILE?");
  kc_options o;
  kc_options_init(&o);
  o.backend = backend_of(be);
  watch w = {.json = c->json, .lang = language_of(lang)};
  if (kc_runtime_create(&o, &w.rt) != KC_OK) cli_fail("watch: no runtime: %s", kc_errmsg(NULL));
  if (kc_context_create(w.rt, 0, &w.ctx) != KC_OK) {
    cli_error("watch: no context: %s", kc_errmsg(w.rt));
    kc_runtime_destroy(w.rt);
    return 1;
  }
  if (!w.json) printf("watching %s on the %s backend\n", file, kc_runtime_backend(w.rt));
  char *last = NULL;
  size_t last_len = 0;
  int round = 0, rc = 0;
  bool tty = c->progress;
  for (long ticks = 0; count == 0 || (uint64_t)round < count; ticks++) {
    size_t len;
    char *text = read_file(file, &len);
    if (!text && !last) {
      cli_error("watch: cannot read %s: %s", file, strerror(errno));
      rc = 1;
      break;
    }
    if (text && (!last || len != last_len || memcmp(text, last, len))) {
      if (tty) fputs("\r\033[K", stderr);
      load(&w, file, text, len, ++round);
      free(last);
      last = text;
      last_len = len;
    } else if (last && refresh(&w, file, last, last_len, round + 1)) {
      free(text);
      ++round;
    } else {
      free(text);
      if (tty)
        fprintf(stderr, "\r\033[Kwatching %s (%d load%s) %c", file, round, round == 1 ? "" : "s",
                "|/-\\"[ticks % 4]);
      struct timespec ts = {(time_t)(interval / 1000), (long)(interval % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
  if (tty) fputs("\r\033[K", stderr);
  if (!rc && count && w.failed) rc = 1; /* a bounded run: its last load's errors are its exit status */
  free(last);
  for (size_t i = 0; i < w.nk; i++) free(w.ks[i].name);
  free(w.ks);
  kc_runtime_destroy(w.rt);
  return rc;
}
