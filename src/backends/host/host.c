/* SPDX-License-Identifier: MIT */
/*
 * host.c -- the host CPU backend (this folder; tools.c finds and runs the
 * compiler, loader.c and arena.c load what it makes). Kernel source is C;
 * the closure is compiled by the system C compiler into a relocatable
 * object (cc -c -fPIC), which is the artifact, and loaded by kcache's own
 * loader into the runtime's regions. A launch runs the kernel a work group
 * at a time, the group's items in a loop the compiler vectorizes
 * (codegen.c), its groups on the calling thread and a pool of workers
 * (exec.c).
 *
 * Each compile makes a directory of its own under $TMPDIR for its source,
 * object and log, and removes it before it returns: a process that ends
 * without kc_runtime_destroy leaves nothing there. One killed during a
 * compile leaves that compile's directory, named after the process: the
 * next runtime to open the host backend removes it (tools.c).
 */
#include "backends/host/host.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* --------------------------------------------------------------- state */

static void host_ident_fork_lock(void *ud) { kc__lock(&((host_state *)ud)->ident_lock); }
static void host_ident_fork_unlock(void *ud) { kc__unlock(&((host_state *)ud)->ident_lock); }

static void host_close(void *state) {
  host_state *s = state;
  if (!s) return;
  const kc__bsvc *sv = s->sv;
  kc__fork_unregister(&s->ident_fork);
  host_streams_close(s); /* their threads first (each context's streams went with it) */
  host_pool_close(s); /* its threads next: they run nothing now */
  host_arena_close(s);
  host_loader_close(s);
  for (int i = 0; i < s->cc_argc; i++) kc__bs_free(sv, s->cc_argv[i]);
  kc__bs_free(sv, s->identity);
  kc__bs_free(sv, s->sysinc);
  kc__mutex_destroy(&s->ident_lock);
  if (s->arena_ready) kc__mutex_destroy(&s->arena_lock);
  kc__bs_free(sv, s);
}

static kc_status host_split_words(host_state *s, const char *words, const char *what) {
  for (const char *p = words; p && *p;) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) break;
    size_t n = strcspn(p, " \t");
    if (s->cc_argc >= KC__HOST_MAX_WORDS)
      return kc__bs_err(s->sv, KC_EINVAL, "%s: too many words (at most %d)", what, KC__HOST_MAX_WORDS);
    if (!(s->cc_argv[s->cc_argc++] = kc__bs_strndup(s->sv, p, n)))
      return kc__bs_err(s->sv, KC_ENOMEM, "out of memory");
    p += n;
  }
  return KC_OK;
}

static kc_status host_open(const kc__bsvc *sv, const kc__bconfig *cfg, void **state) {
  host_state *s = kc__bs_calloc(sv, sizeof *s);
  if (!s) return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  s->svc = *sv;
  s->sv = &s->svc;
  s->compile_options = cfg->compile_options;
  if (!kc__mutex_init(&s->ident_lock)) {
    kc__bs_free(sv, s);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  }
  /* a fork waits for the identity being made (a first `cc --version`, at
   * most compile_timeout_ms), so that the child never finds it held */
  s->ident_fork = (kc__fork_hook){.level = KC__FORK_HOST,
                                  .prepare = host_ident_fork_lock,
                                  .parent = host_ident_fork_unlock,
                                  .child = host_ident_fork_unlock,
                                  .ud = s};
  kc__fork_register(&s->ident_fork);
  s->arena_ready = kc__mutex_init(&s->arena_lock);
  if (!s->arena_ready) {
    host_close(s);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  }
  host_loader_open(s);
  /* what the loader gives every object: exec.c's slot and hooks */
  s->tp_off = host_tls_offset();
  s->hooks.par = host_par;
  s->hooks.barrier = host_barrier;
  s->hooks.fibers = host_fibers_hook;
  s->hooks.split_bad = host_split_bad;
  s->timeout_ms = cfg->compile_timeout_ms;
  s->opt_flags = cfg->host_opt; /* NULL: by compiler, once it is known (host_identity) */
  kc_status st = host_split_words(s, cfg->host_cc, "host compiler");
  if (!st && s->cc_argc == 0) st = kc__bs_err(sv, KC_EINVAL, "host compiler: empty command");
  char path[512];
  if (!st && !host_find_in_path(s->cc_argv[0], path, sizeof path))
    st = kc__bs_err(sv, KC_EUNAVAILABLE, "host compiler \"%s\" not found in PATH", s->cc_argv[0]);
  if (!st) {
    snprintf(s->device, sizeof s->device, "host CPU (compiler: %s)", cfg->host_cc);
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    if (strlen(tmp) >= sizeof s->dir)
      st = kc__bs_err(sv, KC_EINVAL, "TMPDIR is too long (%zu bytes)", strlen(tmp));
    else snprintf(s->dir, sizeof s->dir, "%s", tmp);
  }
  /* the work directories of processes killed during a compile */
  if (!st) host_workdir_sweep(s);
  if (!st) st = host_pool_open(s, cfg->host_threads);
  if (!st) st = host_streams_open(s, cfg->host_stream_idle_ns, cfg->host_stream_spin_ns);
  if (st) {
    host_close(s);
    return st;
  }
  *state = s;
  return KC_OK;
}

static int host_device_count(void *state) {
  (void)state;
  return 1;
}

static const char *host_device_name(void *state, int index) {
  (void)index;
  return ((host_state *)state)->device;
}

/* ------------------------------------------------------------- compile */

/* kc__launch in the object reads kc_args and buffers through these layouts */
_Static_assert(offsetof(kc_arg, ptr) == 0 && offsetof(kc_arg, size) == 8 && offsetof(kc_arg, kind) == 12 &&
                   sizeof(kc_arg) == 16,
               "the host prelude's struct kc__arg mirrors kc_arg");
_Static_assert(KC__SIG(KC_ARG_BUFFER, 0) == 2ull << 32 && KC__SIG(KC_ARG_SCALAR, 4) == (1ull << 32 | 4),
               "the host prelude's KC__SIG_BUFFER and KC__SIG_SCALAR mirror KC__SIG");
_Static_assert(offsetof(kc__bbuf, h) == 0 && offsetof(kc__bbuf, ctx) == sizeof(void *),
               "the host prelude's struct kc__buf mirrors kc_buffer");
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the host backend's kc__arg.sig reads kc_arg's size and kind as one little-endian word"
#endif

/* The optimisation flags of a compile: the configured ones (KC_HOST_OPT),
 * else for the compiler host_identity found: tcc optimises little and
 * takes no -march. */
static const char *host_opt_flags(const host_state *s) {
  if (s->opt_flags) return s->opt_flags;
  return s->is_tcc ? "-O2" : "-O3 -march=native";
}

/* Runs the compiler on src into obj, its output into lg and then the log. */
static kc_status host_cc(host_state *s, const char *sysinc, const char *src, const char *obj, const char *lg,
                         const char *dep, kc__sb *log) {
  const kc__bsvc *sv = s->sv;
  /* the command's words, the optimisation words, 6 flags, the output and
   * the source, the dependency file's 3 words, the options' words and the
   * terminating NULL */
  char *argv[3 * KC__HOST_MAX_WORDS + 6 + 2 + 3 + KC__HOST_MAX_SYSINC + 1];
  int argc = 0;
  for (int i = 0; i < s->cc_argc; i++) argv[argc++] = s->cc_argv[i];
  host_state optw = {.sv = sv}; /* the optimisation flags (host_opt_flags) */
  kc_status ost = host_split_words(&optw, host_opt_flags(s), "optimisation flags");
  if (ost) return ost;
  for (int i = 0; i < optw.cc_argc; i++) argv[argc++] = optw.cc_argv[i];
  static char *const fixed[] = {
      "-c", "-fPIC", "-std=gnu11", "-fvisibility=hidden", "-Werror=implicit-function-declaration", "-o"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) argv[argc++] = fixed[i];
  argv[argc++] = (char *)obj;
  argv[argc++] = (char *)src;
  /* the files it reads (core/extfiles.c): gcc, clang and tcc take these */
  argv[argc++] = "-MD";
  argv[argc++] = "-MF";
  argv[argc++] = (char *)dep;
  /* user options come last so that they win */
  host_state opts = {.sv = sv};
  kc_status st = host_split_words(&opts, s->compile_options, "compile options");
  bool nostdinc = false;
  for (int i = 0; !st && i < opts.cc_argc; i++) {
    argv[argc++] = opts.cc_argv[i];
    nostdinc |= !strcmp(opts.cc_argv[i], "-nostdinc");
  }
  /* tcc: its system directories as -I, after the options' own (sysinc.c) */
  kc__sb inc;
  kc__sb_init(&inc, &sv->heap);
  int ninc = 0;
  if (!st) st = host_sysinc_args(s, sysinc, nostdinc, &inc, &ninc);
  if (!st && ninc > KC__HOST_MAX_SYSINC)
    st = kc__bs_err(sv, KC_EINVAL, "too many include directories for tcc (%d words, at most %d)", ninc,
                    KC__HOST_MAX_SYSINC);
  for (int i = 0, at = 0; !st && i < ninc; i++, at += (int)strlen(inc.buf + at) + 1)
    argv[argc++] = inc.buf + at;
  argv[argc] = NULL;
  /* tcc: without $CPATH and $C_INCLUDE_PATH, whose directories it has as
   * -I: it would search them again, as system directories, whose headers it
   * does not list; a header that appears there between the two searches
   * (rewritten as editors do: removed, then renamed into place) would be
   * read and not recorded, and its code never end (sysinc.c) */
  char **env = NULL;
  if (!st && sysinc && !(env = host_sysinc_env(s)))
    st = kc__bs_err(sv, KC_ENOMEM, "out of memory running the host compiler");
  int code = -1, sig_no = 0;
  bool ran = !st;
  if (ran) st = host_run_tool(s, argv, env, lg, &code, &sig_no);
  kc__bs_free(sv, env);
  for (int i = 0; i < opts.cc_argc; i++) kc__bs_free(sv, opts.cc_argv[i]);
  for (int i = 0; i < optw.cc_argc; i++) kc__bs_free(sv, optw.cc_argv[i]);
  kc__sb_free(&inc);
  void *text = NULL;
  size_t tn = 0, at = log->len;
  /* the compiler's log, if it ran and wrote one (else the error stands) */
  if (ran && access(lg, R_OK) == 0 && host_read_file(sv, lg, HOST_LOG_MAX, true, &text, &tn) == KC_OK) {
    host_log_append(log, text, tn, src);
    kc__bs_free(sv, text);
  }
  if (st) return st;
  if (sig_no)
    return kc__bs_err(sv, KC_EBACKEND, "the host compiler \"%s\" crashed (signal %d, %s)", argv[0], sig_no,
                      strsignal(sig_no));
  if (code != 0 && log->buf && host_resource_failure(log->buf + at, log->len - at))
    return kc__bs_err(sv, KC_EBACKEND, "the host compiler \"%s\" ran out of a resource (exit code %d)",
                      argv[0], code);
  if (code != 0)
    return kc__bs_err(sv, KC_ECOMPILE, "the host compiler \"%s\" failed (exit code %d)", argv[0], code);
  return KC_OK;
}

/* Checks the object as the loader will load it, and asks it for its
 * parameter sizes and alignments (the probe): the compiler knows them best. */
static kc_status host_check_object(host_state *s, const kc__tu *tu, const void *obj, size_t n,
                                   uint64_t *sig) {
  char what[200];
  snprintf(what, sizeof what, "the host compiler \"%.100s\" produced an unusable object", s->cc_argv[0]);
  host_plan *p;
  kc_status st = host_plan_make(s, obj, n, KC_ECOMPILE, what, &p);
  if (st) return st;
  /* bytes of the file, perhaps unaligned: read with memcpy */
  const unsigned char *nargs = host_plan_bytes(p, "kc__nargs", sizeof(unsigned));
  unsigned n_in_object = 0;
  if (nargs) memcpy(&n_in_object, nargs, sizeof n_in_object);
  uint32_t m = kc__probe_count(tu);
  size_t nvals = m ? 1 + 2 * (size_t)m : 0;
  const unsigned char *probe = m ? host_plan_bytes(p, "kc__probe", nvals * sizeof(uint64_t)) : NULL;
  uint64_t *vals = probe ? kc__bs_alloc(s->sv, nvals * sizeof *vals) : NULL;
  if (probe && !vals) st = kc__bs_err(s->sv, KC_ENOMEM, "out of memory compiling '%s'", tu->entry);
  else if (!nargs || n_in_object != tu->nparams || !host_plan_bytes(p, "kc__run", 1) ||
           !host_plan_bytes(p, "kc__launch", 1))
    st = kc__bs_err(s->sv, KC_ECOMPILE, "the compiled object for '%s' lacks its entry trampoline", tu->entry);
  else {
    if (vals) memcpy(vals, probe, nvals * sizeof *vals);
    st = kc__probe_apply(s->sv, tu, vals, vals ? nvals : 0, sig);
  }
  kc__bs_free(s->sv, vals);
  host_plan_free(s, p);
  return st;
}

static const char *host_identity(void *state);

/* The dependency file of a compile into tu->deps (reported: it was there
 * and could be read whole). tcc writes its own format; the compiler's
 * first --version line says which one ran. */
static void host_deps_read(host_state *s, const kc__tu *tu, const char *dep, const char *src) {
  if (!tu->deps) return;
  void *text = NULL;
  size_t n = 0;
  if (access(dep, R_OK) != 0 || host_read_file(s->sv, dep, HOST_FILE_MAX, false, &text, &n) != KC_OK) return;
  const char *id = host_identity(s);
  bool lines = id && strstr(id, "tcc version");
  tu->deps->reported = host_deps_parse(text, n, lines, src, &tu->deps->paths);
  kc__bs_free(s->sv, text);
}

static kc_status host_compile(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                              kc__sb *log) {
  host_state *s = state;
  const kc__bsvc *sv = s->sv;
  *artifact = NULL;
  *size = 0;
  /* asked once: with tcc, its system directories too (sysinc.c). Without
   * the answer (it failed: the next compile asks again), whether the
   * compiler is tcc is unknown, and tcc's list would lack the headers it
   * found in system directories: the list is not taken (core/extfiles.c:
   * the code then serves this launch only, and is not stored) */
  bool known = host_identity(s) != NULL;
  const char *sysinc = NULL;
  kc_status ready = host_sysinc_ready(s, &sysinc);
  if (ready) return ready;
  char dir[HOST_WORKDIR_MAX], src[HOST_WORKDIR_MAX + 8], obj[HOST_WORKDIR_MAX + 8], lg[HOST_WORKDIR_MAX + 8],
      dep[HOST_WORKDIR_MAX + 8];
  if (!host_workdir_make(s, dir, sizeof dir))
    return kc__bs_err(sv, KC_EIO, "cannot create a work directory in %s: %s", s->dir, strerror(errno));
  snprintf(src, sizeof src, "%s/k.c", dir);
  snprintf(obj, sizeof obj, "%s/k.o", dir);
  snprintf(lg, sizeof lg, "%s/k.log", dir);
  snprintf(dep, sizeof dep, "%s/k.d", dir);
  kc_status st = host_write_file(sv, src, tu->text, tu->len);
  if (!st) st = host_cc(s, sysinc, src, obj, lg, dep, log);
  if (!st) st = host_read_file(sv, obj, HOST_FILE_MAX, false, artifact, size);
  if (known) host_deps_read(s, tu, dep, src); /* after a failure too: gcc writes it then */
  unlink(dep);
  unlink(lg);
  unlink(src);
  unlink(obj);
  rmdir(dir);
  if (!st) st = host_check_object(s, tu, *artifact, *size, sig);
  if (st) {
    kc__bs_free(sv, *artifact);
    *artifact = NULL;
    *size = 0;
  }
  return st;
}

/* ------------------------------------------------------------ contexts */

static kc_status host_ctx_create(void *state, int device, void **bctx) {
  (void)device;
  *bctx = state;
  return KC_OK;
}

static void host_ctx_destroy(void *bctx) { (void)bctx; }
static kc_status host_ctx_reset(void *bctx) {
  (void)bctx;
  return KC_OK;
}
static kc_status host_ctx_finish(void *bctx) {
  (void)bctx;
  return KC_OK;
}

static void host_unlink(kc__blinked *l);

/* Loads the object (the same for every compiler, so every object launches
 * on the same path); keeps its bytes if threads will need copies of it. */
static kc_status host_link(void *bctx, const kc__artifact *a, kc__blinked *l) {
  host_state *s = bctx;
  const kc__bsvc *sv = s->sv;
  char what[160];
  snprintf(what, sizeof what, "loading '%.100s' failed: the object", a->entry);
  host_image *im = kc__bs_alloc(sv, sizeof *im);
  if (!im) return kc__bs_err(sv, KC_ENOMEM, "out of memory linking '%s'", a->entry);
  kc_status st = host_image_load(s, a->bytes, a->size, what, im);
  if (st) {
    kc__bs_free(sv, im);
    return st;
  }
  if (im->needs_copies) {
    if (!kc__mutex_init(&im->copy_lock)) {
      im->needs_copies = false;
      host_unlink(&(kc__blinked){.bctx = s, .module = im});
      return kc__bs_err(sv, KC_ENOMEM, "out of memory linking '%s'", a->entry);
    }
    if (!(im->bytes = kc__bs_alloc(sv, a->size))) {
      host_unlink(&(kc__blinked){.bctx = s, .module = im});
      return kc__bs_err(sv, KC_ENOMEM, "out of memory linking '%s'", a->entry);
    }
    memcpy(im->bytes, a->bytes, a->size);
    im->size = a->size;
  }
  l->module = im;
  l->fn = im->run;
  l->launch = (kc__launch_fn)im->run; /* kc_status is an int-sized enum */
  l->entry = (kc__entry_fn)im->entry; /* the same, reading kc_args itself */
  return KC_OK;
}

static void host_unlink(kc__blinked *l) {
  host_state *s = l->bctx;
  host_image *im = l->module;
  if (!im) return;
  host_streams_forget(s, im); /* its launches queued on streams run first */
  for (host_copy *c = im->copies, *next; c; c = next) { /* no thread runs them: the engine unlinks after */
    next = c->all_next;
    host_arena_give(s, &c->im.blk);
    kc__bs_free(s->sv, c);
  }
  if (im->needs_copies) {
    kc__mutex_destroy(&im->copy_lock);
    kc__bs_free(s->sv, im->bytes);
  }
  host_arena_give(s, &im->blk);
  kc__bs_free(s->sv, im);
  l->module = NULL;
}

/* ------------------------------------------------------------- buffers */

static kc_status host_buf_create(void *bctx, size_t size, kc__bufh *h) {
  host_state *s = bctx;
  h->ptr = kc__bs_calloc(s->sv, size);
  return h->ptr ? KC_OK : kc__bs_err(s->sv, KC_ENOMEM, "kc_buffer_create: cannot allocate %zu bytes", size);
}

/* After the launches queued on streams before it, which may use it. */
static void host_buf_destroy(void *bctx, kc__bufh *h) {
  host_streams_drain(bctx);
  kc__bs_free(((host_state *)bctx)->sv, h->ptr);
}

/* The memory itself as src or dst (kc_buffer_host, kc_buffer_wrap): nothing
 * to copy (memcpy onto itself is undefined). */
static kc_status host_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  (void)bctx;
  if ((char *)h->ptr + off != src) memmove((char *)h->ptr + off, src, n);
  return KC_OK;
}

static kc_status host_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  (void)bctx;
  if ((const char *)h->ptr + off != dst) memmove(dst, (const char *)h->ptr + off, n);
  return KC_OK;
}

/* ------------------------------------------------------------ identity */

/* The artifact's format, in the identity (so in every disk-store key):
 * entries of another format (the shared objects that kcache made before
 * it had its own loader) are never looked up. Change it with the format. */
#define HOST_ARTIFACT_FORMAT \
  "elf64-x86_64-rel/3" /* 2: work groups; 3: a row of items in SIMD lanes (codegen.c) */

/* The CPU an object made with -march=native runs on: its model and a hash
 * of its feature flags (the first processor of /proc/cpuinfo), appended to
 * sb; "unknown" when it cannot be read (then such entries are kept apart). */
static void host_cpu_signature(kc__sb *sb) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[8192], model[256] = "", vendor[64] = "";
  uint64_t flags = 0;
  bool have_flags = false;
  while (f && fgets(line, sizeof line, f)) {
    size_t n = strcspn(line, "\n");
    line[n] = 0;
    char *colon = strchr(line, ':');
    if (!colon) {
      if (have_flags) break; /* the end of the first processor */
      continue;
    }
    const char *v = colon + 1 + (colon[1] == ' ');
    if (!strncmp(line, "model name", 10) && !model[0]) snprintf(model, sizeof model, "%s", v);
    else if (!strncmp(line, "vendor_id", 9) && !vendor[0]) snprintf(vendor, sizeof vendor, "%s", v);
    else if (!strncmp(line, "flags", 5) && !have_flags) {
      flags = kc__hash(v, strlen(v));
      have_flags = true;
    }
  }
  if (f) fclose(f);
  if (have_flags) kc__sb_printf(sb, "|cpu:%s %s %016llx", vendor, model, (unsigned long long)flags);
  else kc__sb_printf(sb, "|cpu:unknown");
}

static const char *host_identity(void *state) {
  host_state *s = state;
  kc__lock(&s->ident_lock);
  if (!s->identity) {
    char dir[HOST_WORKDIR_MAX], lg[HOST_WORKDIR_MAX + 16], path[512];
    bool made = host_workdir_make(s, dir, sizeof dir);
    snprintf(lg, sizeof lg, "%s/version.log", dir);
    char *argv[] = {s->cc_argv[0], "--version", NULL};
    int code, sig;
    kc__sb sb;
    kc__sb_init(&sb, &(s->sv)->heap);
    host_find_in_path(s->cc_argv[0], path, sizeof path);
    kc__sb_printf(&sb, "host|" HOST_ARTIFACT_FORMAT "|%s|", path);
    for (int i = 1; i < s->cc_argc; i++) kc__sb_printf(&sb, "%s ", s->cc_argv[i]);
    void *text = NULL;
    size_t n = 0;
    kc_status st = made ? host_run_tool(s, argv, NULL, lg, &code, &sig) : KC_EIO;
    if (st == KC_OK) st = host_read_file(s->sv, lg, HOST_LOG_MAX, true, &text, &n);
    if (st == KC_OK) {
      size_t first = strcspn(text, "\n");
      kc__sb_append(&sb, text, first);
      /* tcc lists no system header (sysinc.c): the directories it
       * searches as -I instead, and a key apart from entries made before
       * (whose files lack those headers) */
      s->is_tcc = strstr(text, "tcc version") && (size_t)(strstr(text, "tcc version") - (char *)text) < first;
      if (s->is_tcc && !s->sysinc && (st = host_sysinc_probe(s, dir)) == KC_OK)
        kc__sb_printf(&sb, "|sysinc-as-I");
      kc__bs_free(s->sv, text);
      /* the optimisation flags, and the CPU they were made for */
      const char *opt = host_opt_flags(s);
      kc__sb_printf(&sb, "|opt:%s", opt);
      if (strstr(opt, "native")) host_cpu_signature(&sb);
    }
    if (made) {
      unlink(lg);
      rmdir(dir);
    }
    /* Without the compiler's answer (out of memory, of room for the
     * directory, of processes, on the way), the identity would lack its
     * version: nothing is kept, and the next compile asks again. A compiler
     * that ran but has no --version is identified by its path and what it
     * said. */
    if (st != KC_OK || sb.failed) kc__sb_free(&sb);
    else s->identity = kc__sb_take(&sb);
  }
  kc__unlock(&s->ident_lock);
  return s->identity;
}

const kc__backend kc__backend_host = {
    .name = "host",
    .unavailable = host_unavailable,
    .open = host_open,
    .close = host_close,
    .device_count = host_device_count,
    .device_name = host_device_name,
    .identity = host_identity,
    .reports_deps = true,
    .prelude = host_prelude,
    .entry_prologue = host_entry_prologue,
    .epilogue = host_epilogue,
    .compile = host_compile,
    .ctx_create = host_ctx_create,
    .ctx_destroy = host_ctx_destroy,
    .ctx_reset = host_ctx_reset,
    .ctx_finish = host_ctx_finish,
    .link = host_link,
    .unlink = host_unlink,
    .buf_create = host_buf_create,
    .buf_destroy = host_buf_destroy,
    .buf_write = host_buf_write,
    .buf_read = host_buf_read,
    .launch_ex = host_launch_ex,
    .ctx_wrap = host_ctx_wrap,
    .stream_create = host_stream_create,
    .stream_wrap = host_stream_wrap,
    .stream_release = host_stream_release,
    .stream_sync = host_stream_sync,
    .stream_wait = host_stream_wait,
    .buf_wrap = host_buf_wrap,
    .buf_host = host_buf_wrap, /* the pointer itself, as kc_buffer_wrap */
    .fork_safe = true, /* a child goes on compiling with cc and loading with kcache's loader */
    .private_streams = true, /* stream.c's queues */
};
