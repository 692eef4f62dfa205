/* SPDX-License-Identifier: MIT */
/*
 * test_disk_headers.c -- headers on disk (issue 22, item 3), on the
 * backend of the suite: a header found through -I is recorded with the
 * code; editing it ends that code at kc_refresh, in memory, and makes a
 * stored entry stale for every later process (a new runtime here), which
 * compiles again and writes over it; nested includes, a header that did
 * not exist yet, and (OpenCL, CUDA: kcache looks itself) a header created
 * in a directory searched earlier.
 */
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct disk {
  char root[64], inc1[96], inc2[96], cache[96];
  char opts[256];
} disk;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Writes path (text), then waits past the timestamps' grain: a file changed
 * as a compile starts is one whose content kcache cannot vouch for. */
static void put(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) fail_msg("cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
  sleep_ms(40);
}

static void disk_open(disk *d) {
  snprintf(d->root, sizeof d->root, "/tmp/kc-diskhdr-XXXXXX");
  if (!mkdtemp(d->root)) fail_msg("mkdtemp: %s", strerror(errno));
  snprintf(d->inc1, sizeof d->inc1, "%s/inc1", d->root);
  snprintf(d->inc2, sizeof d->inc2, "%s/inc2", d->root);
  snprintf(d->cache, sizeof d->cache, "%s/cache", d->root);
  mkdir(d->inc1, 0700);
  mkdir(d->inc2, 0700);
  snprintf(d->opts, sizeof d->opts, "-I%s -I %s", d->inc1, d->inc2);
}

static void disk_close(disk *d) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->root);
  if (system(cmd) != 0) print_message("could not remove %s\n", d->root);
}

/* A fixture on its own runtime: the include directories, a disk cache
 * (or none), and the host compiler given (NULL: the default). */
static void open_rt_timeout(kct_fixture *f, const disk *d, bool cache, const char *cc, uint32_t timeout_ms) {
  memset(f, 0, sizeof *f);
  kc_options o;
  kc_options_init(&o);
  o.compile_options = d->opts;
  o.cache_dir = cache ? d->cache : NULL;
  o.cache_disable = !cache;
  o.compile_timeout_ms = timeout_ms;
  if (cc) o.host_cc = cc;
  f->rt = kct_runtime(&o);
  f->ctx = kct_context(f->rt);
  f->buf = kct_buffer(f->rt, f->ctx, KCT_FX_N);
}

static void open_rt(kct_fixture *f, const disk *d, bool cache, const char *cc) {
  open_rt_timeout(f, d, cache, cc, 0);
}

/* A disk whose inc1 is a system directory ($C_INCLUDE_PATH, set until
 * sys_close; no -I): the variable's value before, or NULL. */
static char *sys_open(disk *d) {
  disk_open(d);
  d->opts[0] = '\0';
  const char *old = getenv("C_INCLUDE_PATH");
  char *saved = old ? strdup(old) : NULL;
  setenv("C_INCLUDE_PATH", d->inc1, 1);
  return saved;
}

static void sys_close(disk *d, char *saved) {
  if (saved) setenv("C_INCLUDE_PATH", saved, 1);
  else unsetenv("C_INCLUDE_PATH");
  free(saved);
  disk_close(d);
}

static const char *kernel_x =
    "#include <x.h>\nKC_KERNEL void kx(KC_GLOBAL float *y) { y[kc_global_id(0)] = XV; }";

static size_t refresh(kc_runtime *rt) {
  size_t n = 99;
  KCT_OK(rt, kc_refresh(rt, &n, NULL));
  return n;
}

/* A disk with x.h (which includes y.h) and y.h in inc2, a runtime on it
 * without the disk cache (open_rt with cc), and kx defined, which reads
 * them: its first run gives 1.5. */
static void open_xy(disk *d, kct_fixture *f, const char *cc) {
  disk_open(d);
  put(d->inc2, "x.h", "#include \"y.h\"\n#define XV (1.0f + YV)\n");
  put(d->inc2, "y.h", "#define YV 0.5f\n");
  open_rt(f, d, false, cc);
  kct_define(f->rt, "kx", kernel_x);
  assert_true(src_run(f, "kx") == 1.5f);
}

/* In one runtime: an edit is seen at kc_refresh, and only then; nested
 * includes are followed; a refresh with nothing changed makes no world. */
static void in_memory(const char *cc) {
  disk d;
  kct_fixture f;
  open_xy(&d, &f, cc);
  kc_stats s = kct_stats(f.rt);
  assert_true(s.files_tracked >= 2); /* x.h and y.h (and the paths looked in) */
  uint64_t c0 = src_compiles(f.rt);
  kc_world w0 = kc_world_latest(f.rt);
  assert_int_equal(refresh(f.rt), 0);
  assert_int_equal(kc_world_latest(f.rt), w0);
  put(d.inc2, "y.h", "#define YV 2.5f\n");
  assert_true(src_run(&f, "kx") == 1.5f); /* launches do not look at the disk */
  assert_int_equal(refresh(f.rt), 1);
  assert_true(kc_world_latest(f.rt) > w0);
  assert_true(src_run(&f, "kx") == 3.5f);
  assert_int_equal(src_compiles(f.rt), c0 + 1);
  assert_true(kct_stats(f.rt).files_changed >= 1);
  /* an unrelated kernel reads no header: a header's change leaves it be */
  kct_define(f.rt, "kz", "KC_KERNEL void kz(KC_GLOBAL float *y) { y[kc_global_id(0)] = 4.0f; }");
  assert_true(src_run(&f, "kz") == 4.0f);
  uint64_t c1 = src_compiles(f.rt);
  put(d.inc2, "x.h", "#include \"y.h\"\n#define XV (10.0f + YV)\n");
  assert_int_equal(refresh(f.rt), 1);
  assert_true(src_run(&f, "kz") == 4.0f);
  assert_true(src_run(&f, "kx") == 12.5f);
  assert_int_equal(src_compiles(f.rt), c1 + 1);
  kct_fx_close(&f);
  disk_close(&d);
}

/* Across runtimes (as across processes): a stored entry is used while its
 * headers are the same, passed over once one changed, and written over. */
static void across_runtimes(const char *cc) {
  disk d;
  disk_open(&d);
  put(d.inc2, "x.h", "#define XV 2.0f\n");
  for (int round = 0; round < 3; round++) {
    kct_fixture f;
    open_rt(&f, &d, true, cc);
    kct_define(f.rt, "kx", kernel_x);
    float want = round < 2 ? 2.0f : 3.0f;
    float got = src_run(&f, "kx");
    kc_stats s = kct_stats(f.rt);
    if (got != want) fail_msg("round %d: %g, expected %g (stale from the disk cache)", round, got, want);
    if (round == 0) assert_int_equal(s.compiles, 1);
    if (round == 1) assert_int_equal(s.disk_hits, 1);
    if (round == 2) {
      assert_int_equal(s.disk_stale, 1);
      assert_int_equal(s.compiles, 1);
    }
    kct_fx_close(&f);
    if (round == 1) put(d.inc2, "x.h", "#define XV 3.0f\n");
  }
  kct_fixture f; /* the entry was written over: a hit again */
  open_rt(&f, &d, true, cc);
  kct_define(f.rt, "kx", kernel_x);
  assert_true(src_run(&f, "kx") == 3.0f);
  assert_int_equal(kct_stats(f.rt).disk_hits, 1);
  kct_fx_close(&f);
  disk_close(&d);
}

/* A header that is not there yet: the compile fails; once it is there (and
 * kc_refresh has looked), the kernel compiles. On OpenCL and CUDA, where
 * kcache looks itself, a header created in a directory searched before the
 * one where it was found is a change too. */
static void created_later(const char *cc) {
  disk d;
  disk_open(&d);
  kct_fixture f;
  open_rt(&f, &d, false, cc);
  kct_define(f.rt, "kx", kernel_x);
  kc_kernel *k = kct_kernel(f.rt, "kx", NULL);
  assert_int_not_equal(kct_run(k, f.ctx, f.buf, KCT_FX_N, NULL), KC_OK);
  put(d.inc2, "x.h", "#define XV 5.0f\n");
  refresh(f.rt);
  assert_true(src_run(&f, "kx") == 5.0f);
  if (kct_backend != KC_BACKEND_HOST) {
    put(d.inc1, "x.h", "#define XV 6.0f\n"); /* -I inc1 comes first */
    assert_int_equal(refresh(f.rt), 1);
    assert_true(src_run(&f, "kx") == 6.0f);
    /* and a FIFO where a header is looked for never hangs a compile */
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/w.h", d.inc1);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    kct_define(f.rt, "kw",
               "#include <w.h>\nKC_KERNEL void kw(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f; }");
    kc_kernel *kw = kct_kernel(f.rt, "kw", NULL);
    assert_int_equal(kct_run(kw, f.ctx, f.buf, KCT_FX_N, NULL), KC_ECOMPILE);
    KCT_CONTAINS(kc_errmsg(f.rt), "is not a regular file");
    kc_kernel_destroy(kw);
  }
  kc_kernel_destroy(k);
  kct_fx_close(&f);
  disk_close(&d);
}

void test_disk_headers_in_memory(void **state) {
  (void)state;
  in_memory(NULL);
  if (kct_backend == KC_BACKEND_HOST && strcmp(kct_host_cc(), "cc"))
    in_memory(kct_host_cc()); /* tcc's list */
}

void test_disk_headers_across_runtimes(void **state) {
  (void)state;
  unsetenv("KC_CACHE_DISABLE"); /* the suite is memory-only (kct_memory_only), but for its own store */
  across_runtimes(NULL);
  if (kct_backend == KC_BACKEND_HOST && strcmp(kct_host_cc(), "cc")) across_runtimes(kct_host_cc());
  kct_memory_only();
}

void test_disk_headers_created_later(void **state) {
  (void)state;
  created_later(NULL);
}

/* Host backend: a header in a system directory ($C_INCLUDE_PATH here, searched
 * where /usr/local/include is: after -I and $CPATH) is recorded like one
 * found through -I, in memory and in the store. tcc lists no header of a
 * system directory itself: kcache gives it those directories as -I. */
static void system_dirs(const char *cc) {
  disk d;
  char *saved = sys_open(&d); /* no -I: the header is found as a system one */
  put(d.inc1, "kc_sys_x.h", "#define SXV 1.0f\n");
  static const char *kernel_s =
      "#include <kc_sys_x.h>\n#include <math.h>\n"
      "KC_KERNEL void ks(KC_GLOBAL float *y) { y[kc_global_id(0)] = SXV + floorf(0.5f); }";
  kct_fixture f;
  open_rt(&f, &d, false, cc);
  kct_define(f.rt, "ks", kernel_s);
  assert_true(src_run(&f, "ks") == 1.0f);
  put(d.inc1, "kc_sys_x.h", "#define SXV 2.0f\n");
  assert_int_equal(refresh(f.rt), 1);
  if (src_run(&f, "ks") != 2.0f)
    fail_msg("%s: a header of a system directory was not seen to change", cc ? cc : "cc");
  kct_fx_close(&f);
  /* across runtimes: the stored entry is stale once the header changes */
  open_rt(&f, &d, true, cc);
  kct_define(f.rt, "ks", kernel_s);
  assert_true(src_run(&f, "ks") == 2.0f);
  kct_fx_close(&f);
  put(d.inc1, "kc_sys_x.h", "#define SXV 3.0f\n");
  open_rt(&f, &d, true, cc);
  kct_define(f.rt, "ks", kernel_s);
  assert_true(src_run(&f, "ks") == 3.0f);
  assert_true(kct_stats(f.rt).disk_stale >= 1);
  kct_fx_close(&f);
  sys_close(&d, saved);
}

/* Host backend: a header the compiler read and that is gone when kcache
 * reads the compiler's list (a compiler wrapper removes it right after the
 * compile): what was compiled from it cannot be told, so its code serves
 * that launch only; the next launch compiles again, and fails as a cold
 * compile now would. */
void test_disk_headers_gone_after_the_compile(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  disk d;
  disk_open(&d);
  char wrapper[200];
  snprintf(wrapper, sizeof wrapper, "%s/cc-rm", d.root);
  kct_write_script(
      wrapper,
      "#!/bin/sh\ncase \"$1\" in --version|-vv) exec %s \"$@\";; esac\n%s \"$@\"; rc=$?\nrm -f '%s/x.h'\n"
      "exit $rc\n",
      kct_host_cc(), kct_host_cc(), d.inc2);
  put(d.inc2, "x.h", "#define XV 4.0f\n");
  kct_fixture f;
  open_rt(&f, &d, false, wrapper);
  kct_define(f.rt, "kx", kernel_x);
  assert_true(src_run(&f, "kx") == 4.0f);
  kc_kernel *k = kct_kernel(f.rt, "kx", NULL);
  kc_status st = kct_run(k, f.ctx, f.buf, KCT_FX_N, NULL);
  if (st != KC_ECOMPILE && st != KC_ENOTFOUND)
    fail_msg("the header is gone: %s, expected a failed compile", kc_status_name(st));
  kc_kernel_destroy(k);
  kct_fx_close(&f);
  disk_close(&d);
}

/* Host backend: a header that is a symbolic link, switched to another file
 * while a compile runs (as a deployment switches a "current" link). The
 * compiler read the old target; kcache reads the compiler's list after the
 * compile, through the link, and finds the new target, whose own stamps are
 * older than the compile: unless the link's are looked at too, that record
 * is trusted, so the code of the old text is published as the code of the
 * new one. kc_refresh then sees nothing to change and keeps serving it, and
 * the disk cache holds it for every later runtime. The compiler wrapper
 * switches the link right after the compiler ran, once. */
void test_disk_headers_link_switched_during_a_compile(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  unsetenv("KC_CACHE_DISABLE"); /* as test_disk_headers_across_runtimes */
  disk d;
  disk_open(&d);
  char va[128], vb[128], link[160], next[160], trigger[160], wrapper[200];
  snprintf(va, sizeof va, "%s/va", d.root);
  snprintf(vb, sizeof vb, "%s/vb", d.root);
  snprintf(link, sizeof link, "%s/x.h", d.inc2);
  snprintf(next, sizeof next, "%s/x.h.next", d.inc2);
  snprintf(trigger, sizeof trigger, "%s/switch", d.root);
  snprintf(wrapper, sizeof wrapper, "%s/cc-switch", d.root);
  assert_int_equal(mkdir(va, 0700), 0);
  assert_int_equal(mkdir(vb, 0700), 0);
  kct_write_script(wrapper,
                   "#!/bin/sh\ncase \"$1\" in --version|-vv) exec %s \"$@\";; esac\n%s \"$@\"; rc=$?\n"
                   "if [ -e '%s' ]; then rm -f '%s'; ln -s '%s/x.h' '%s' && mv -T '%s' '%s'; fi\n"
                   "exit $rc\n",
                   kct_host_cc(), kct_host_cc(), trigger, trigger, vb, next, next, link);
  put(va, "x.h", "#define XV 1.0f\n");
  put(vb, "x.h", "#define XV 2.0f\n");
  char target[160];
  snprintf(target, sizeof target, "%s/x.h", va);
  assert_int_equal(symlink(target, link), 0);
  sleep_ms(40); /* past the grain: the link is older than the compile too */
  kct_fixture f;
  open_rt(&f, &d, true, wrapper);
  kct_define(f.rt, "kx", kernel_x);
  FILE *t = fopen(trigger, "w");
  assert_non_null(t);
  fclose(t);
  assert_true(src_run(&f, "kx") == 1.0f); /* the launch that compiled it runs what it compiled */
  assert_int_equal(access(trigger, F_OK), -1); /* the wrapper switched the link */
  refresh(f.rt);
  float got = src_run(&f, "kx");
  if (got != 2.0f) fail_msg("after kc_refresh: %g, the code of the link's old target (expected 2)", got);
  kct_fx_close(&f);
  /* a later runtime on the same disk cache (a new process to the store) */
  open_rt(&f, &d, true, wrapper);
  kct_define(f.rt, "kx", kernel_x);
  got = src_run(&f, "kx");
  if (got != 2.0f)
    fail_msg("a new runtime: %g from the disk cache, the code of the old target (expected 2)", got);
  kct_fx_close(&f);
  kct_memory_only();
  disk_close(&d);
}

/* The same switch while a kernel compiled before is compiled again (its
 * text changed): kcache knows, before the compiler runs, which files its
 * last compile read, and compares them with what it reads after; the
 * switched header is not the same file, so its record is unknown whatever
 * the stamps say. The wrapper switches the link to the file the trigger
 * names. */
void test_disk_headers_link_switched_during_a_recompile(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  disk d;
  disk_open(&d);
  char va[128], vb[128], link[160], next[160], trigger[160], wrapper[200], target[160];
  snprintf(va, sizeof va, "%s/va", d.root);
  snprintf(vb, sizeof vb, "%s/vb", d.root);
  snprintf(link, sizeof link, "%s/x.h", d.inc2);
  snprintf(next, sizeof next, "%s/x.h.next", d.inc2);
  snprintf(trigger, sizeof trigger, "%s/switch", d.root);
  snprintf(wrapper, sizeof wrapper, "%s/cc-switch", d.root);
  assert_int_equal(mkdir(va, 0700), 0);
  assert_int_equal(mkdir(vb, 0700), 0);
  kct_write_script(
      wrapper,
      "#!/bin/sh\ncase \"$1\" in --version|-vv) exec %s \"$@\";; esac\n%s \"$@\"; rc=$?\n"
      "if [ -e '%s' ]; then t=$(cat '%s'); rm -f '%s'; ln -s \"$t\" '%s' && mv -T '%s' '%s'; fi\n"
      "exit $rc\n",
      kct_host_cc(), kct_host_cc(), trigger, trigger, trigger, next, next, link);
  put(va, "x.h", "#define XV 1.0f\n");
  put(vb, "x.h", "#define XV 2.0f\n");
  snprintf(target, sizeof target, "%s/x.h", vb);
  assert_int_equal(symlink(target, link), 0);
  sleep_ms(40);
  kct_fixture f;
  open_rt(&f, &d, false, wrapper);
  kct_define(f.rt, "kx", kernel_x);
  assert_true(src_run(&f, "kx") == 2.0f); /* compiled once: its files are known */
  snprintf(target, sizeof target, "%s/x.h", va);
  FILE *t = fopen(trigger, "w");
  assert_non_null(t);
  fputs(target, t);
  fclose(t);
  kct_define(f.rt, "kx",
             "#include <x.h>\nKC_KERNEL void kx(KC_GLOBAL float *y) { y[kc_global_id(0)] = XV + 0.0f; }");
  assert_true(src_run(&f, "kx") == 2.0f); /* the compiler read vb's text */
  assert_int_equal(access(trigger, F_OK), -1);
  refresh(f.rt);
  float got = src_run(&f, "kx");
  if (got != 1.0f) fail_msg("after kc_refresh: %g, the code of the link's old target (expected 1)", got);
  kct_fx_close(&f);
  disk_close(&d);
}

void test_disk_headers_in_system_dirs(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  unsetenv("KC_CACHE_DISABLE"); /* as test_disk_headers_across_runtimes */
  system_dirs(NULL);
  if (strcmp(kct_host_cc(), "cc")) system_dirs(kct_host_cc()); /* tcc */
  kct_memory_only();
}

/* Host backend (the compiler tells what it read, after): a header written
 * as a compile starts may have been read before or after the write, so its
 * code serves that launch only (the next compiles again), and is not
 * stored; once the file has settled, its code is cached again (found by
 * the oracle, test_oracle.c). */
void test_disk_headers_changed_during_a_compile(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  disk d;
  disk_open(&d);
  kct_fixture f;
  open_rt(&f, &d, false, NULL);
  kct_define(f.rt, "kx", kernel_x);
  char path[160];
  snprintf(path, sizeof path, "%s/x.h", d.inc2);
  FILE *h = fopen(path, "w");
  assert_non_null(h);
  fputs("#define XV 1.0f\n", h);
  fclose(h);
  /* stamped an hour ahead: to every compile it is a file that changed as it
   * ran (deterministic, whatever the machine's load and the compiler's
   * speed) */
  struct timespec ts[2] = {{0, UTIME_OMIT}, {time(NULL) + 3600, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
  uint64_t c0 = src_compiles(f.rt);
  assert_true(src_run(&f, "kx") == 1.0f);
  assert_true(src_run(&f, "kx") == 1.0f); /* not trusted for a second launch: compiled again */
  assert_int_equal(src_compiles(f.rt), c0 + 2);
  /* settled: stamped an hour back, and past the grain since the stamp */
  ts[1].tv_sec = time(NULL) - 3600;
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
  sleep_ms(60);
  assert_true(src_run(&f, "kx") == 1.0f);
  assert_int_equal(src_compiles(f.rt), c0 + 3);
  assert_true(src_run(&f, "kx") == 1.0f); /* and that one is cached */
  assert_int_equal(src_compiles(f.rt), c0 + 3);
  kct_fx_close(&f);
  disk_close(&d);
}

/* A compile that read a header, and publishes its code after kc_refresh saw
 * a newer content: that code is of no world from then on (its launch gets
 * it, the next one compiles again), and the world's content of the file
 * stays the newer one (found by the oracle, test_oracle.c). The compile is
 * held in the log sink, which hears of it before the code is published. */
typedef struct held {
  kct_hold hold; /* first: the log sink's ud */
  kct_fixture *f;
  float got;
} held;

static void *held_launch(void *arg) {
  held *h = arg;
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  float out[KCT_FX_N] = {0};
  if (!kc_context_create(h->f->rt, 0, &ctx) && !kc_buffer_create(ctx, sizeof out, &b) &&
      !kc_kernel_create(h->f->rt, "kx", NULL, &k))
    kct_run(k, ctx, b, KCT_FX_N, out);
  h->got = out[0];
  kc_kernel_destroy(k);
  kc_context_destroy(ctx);
  return NULL;
}

void test_disk_headers_read_before_a_refresh(void **state) {
  (void)state;
  disk d;
  disk_open(&d);
  put(d.inc2, "x.h", "#define XV 1.0f\n");
  held h = {.f = NULL};
  kct_hold_init(&h.hold, true);
  kc_options o;
  kc_options_init(&o);
  o.compile_options = d.opts;
  o.cache_disable = 1;
  o.log = kct_hold_log;
  o.log_ud = &h.hold;
  o.log_level = KC_LOG_INFO;
  kct_fixture f = {.rt = kct_runtime(&o)};
  f.ctx = kct_context(f.rt);
  f.buf = kct_buffer(f.rt, f.ctx, KCT_FX_N);
  h.f = &f;
  kct_define(f.rt, "kx", kernel_x);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, held_launch, &h), 0);
  kct_hold_wait_inside(&h.hold);
  /* compiled with XV 1, not yet published: the header changes, and the
   * caller refreshes (nothing published read it yet: no new world) */
  put(d.inc2, "x.h", "#define XV 2.0f\n");
  assert_int_equal(refresh(f.rt), 0);
  kct_hold_release(&h.hold);
  pthread_join(t, NULL);
  assert_true(h.got == 1.0f); /* the held launch ran what it compiled */
  uint64_t c0 = src_compiles(f.rt);
  assert_true(src_run(&f, "kx") == 2.0f); /* never the held code after the refresh */
  assert_int_equal(src_compiles(f.rt), c0 + 1);
  kct_fx_close(&f);
  kct_hold_destroy(&h.hold);
  disk_close(&d);
}

/* Two headers one kernel read, both edited before one kc_refresh (their
 * file set gets one new version, not one per file), then collects, over
 * several rounds: each launch gives the new texts' value, and collecting
 * the old versions frees each once (ASan). */
void test_disk_headers_two_change_at_once(void **state) {
  (void)state;
  disk d;
  kct_fixture f;
  open_xy(&d, &f, NULL);
  for (int round = 1; round <= 6; round++) {
    char x[80], y[80];
    snprintf(x, sizeof x, "#include \"y.h\"\n#define XV (%d.0f + YV)\n", 10 * round);
    snprintf(y, sizeof y, "#define YV %d.5f\n", round);
    put(d.inc2, "x.h", x);
    put(d.inc2, "y.h", y);
    assert_int_equal(refresh(f.rt), 2);
    float got = src_run(&f, "kx"), want = (float)(10 * round) + (float)round + 0.5f;
    if (got != want) fail_msg("round %d: %g, expected %g", round, got, want);
    kc_collect_info info;
    KCT_OK(f.rt, kc_collect(f.rt, &info));
    KCT_OK(f.rt, kc_collect(f.rt, &info));
  }
  kct_fx_close(&f);
  disk_close(&d);
}

/* A header edited with no kc_refresh, so that the world still holds its
 * old text, and read by a compile that includes a header none read before
 * (a new file set): the new code is valid from the world the compile's
 * sighting made, not before it. In the world before, the header is still
 * the old text as far as kcache knows, and a thread pinned there must not
 * be given code compiled from the new one (the new set's first version
 * started at world 1). */
void test_disk_headers_new_set_starts_at_the_change(void **state) {
  (void)state;
  disk d;
  kct_fixture f;
  disk_open(&d);
  put(d.inc2, "x.h", "#define XV 1.0f\n");
  open_rt(&f, &d, false, NULL);
  kct_define(f.rt, "kx", kernel_x);
  assert_true(src_run(&f, "kx") == 1.0f);
  put(d.inc2, "y.h", "#define YV 0.5f\n");
  put(d.inc2, "x.h", "#include \"y.h\"\n#define XV (1.0f + YV)\n"); /* no kc_refresh */
  kct_define(f.rt, "kx",
             "#include <x.h>\nKC_KERNEL void kx(KC_GLOBAL float *y) { y[kc_global_id(0)] = XV * 2.0f; }");
  kc_world w2 = kc_world_latest(f.rt);
  assert_true(src_run(&f, "kx") == 3.0f); /* compiled at w2, reading x.h's new text and y.h */
  kc_world w3 = kc_world_latest(f.rt);
  assert_int_equal(w3, w2 + 1); /* the sighting of x.h's new text */
  kc_kernel *k = kct_kernel(f.rt, "kx", NULL);
  kc_code_info ci;
  KCT_OK(f.rt, kc_kernel_code(k, &ci));
  if (ci.min_world != w3)
    fail_msg("the code read x.h's new text, which the world holds from %llu, but is valid from %llu",
             (unsigned long long)w3, (unsigned long long)ci.min_world);
  kc_kernel_destroy(k);
  kct_fx_close(&f);
  disk_close(&d);
}

/* Host backend, tcc: whether the compiler is tcc (whose list leaves out
 * the headers of system directories, so that kcache gives it those as -I)
 * is learnt from its --version, asked once. When that question fails (here
 * it runs past the compile timeout), no compile may run as if the compiler
 * were another one: its list would lack a header of $C_INCLUDE_PATH, and
 * the code would never end when that header changes. The list is not
 * taken then: that code serves its launch only, the next compile asks
 * again, and an edit is seen. */
void test_disk_headers_tcc_unidentified(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST || !kct_in_path("tcc")) skip();
  disk d;
  char *saved = sys_open(&d);
  put(d.inc1, "kc_sys_t.h", "#define STV 1.0f\n");
  char cc[160];
  snprintf(cc, sizeof cc, "%s/slow-tcc", d.root);
  /* its first --version outlasts the timeout; then it is tcc */
  kct_write_script(cc,
                   "#!/bin/sh\n"
                   "if [ \"$1\" = --version ] && [ ! -e '%s/asked' ]; then : > '%s/asked'; sleep 5; fi\n"
                   "exec tcc \"$@\"\n",
                   d.root, d.root);
  kct_fixture f;
  open_rt_timeout(&f, &d, false, cc, 1500);
  kct_define(f.rt, "kt",
             "#include <kc_sys_t.h>\nKC_KERNEL void kt(KC_GLOBAL float *y) { y[kc_global_id(0)] = STV; }");
  kc_kernel *k = kct_kernel(f.rt, "kt", NULL);
  assert_int_equal(kct_run(k, f.ctx, f.buf, KCT_FX_N, f.out), KC_OK);
  assert_true(f.out[0] == 1.0f);
  put(d.inc1, "kc_sys_t.h", "#define STV 2.0f\n");
  (void)refresh(f.rt); /* (0 if the code above served its launch only) */
  assert_int_equal(kct_run(k, f.ctx, f.buf, KCT_FX_N, f.out), KC_OK);
  if (f.out[0] != 2.0f) fail_msg("a header of $C_INCLUDE_PATH was not seen to change: %g", f.out[0]);
  kc_kernel_destroy(k);
  kct_fx_close(&f);
  sys_close(&d, saved);
}

/* Host backend, tcc: a header of $C_INCLUDE_PATH that is not there when
 * tcc looks in the directory kcache gives it as -I, and is there a moment
 * later (an editor removes it, then renames the new text into place) was
 * found again in tcc's own system directories (it read $C_INCLUDE_PATH
 * too), read, and left out of its list, so that the code compiled from it
 * never ended. tcc now runs without $C_INCLUDE_PATH and $CPATH: such a
 * compile fails, as a cold one at that moment would, and the next one
 * reads and records the header. The moment is made certain by strace,
 * which fails the compiler's first open of the header, in its first
 * compile only. */
void test_disk_headers_tcc_header_appearing(void **state) {
  (void)state;
  /* (the fault injection itself tried first: ptrace may be refused here) */
  if (kct_backend != KC_BACKEND_HOST || !kct_in_path("tcc") || !kct_in_path("strace") ||
      system("strace -f -qq -o /dev/null -P /kc-none.h -e trace=open,openat "
             "-e inject=open,openat:error=ENOENT:when=1 true 2>/dev/null") != 0)
    skip();
  disk d;
  char *saved = sys_open(&d);
  put(d.inc1, "kc_sys_a.h", "#define SAV 1.0f\n");
  char cc[160];
  snprintf(cc, sizeof cc, "%s/tcc-header-late", d.root);
  kct_write_script(cc,
                   "#!/bin/sh\n"
                   "case \"$*\" in *' -c '*) [ -e '%s/injected' ] || {\n"
                   "  : > '%s/injected'\n"
                   "  exec strace -f -qq -o /dev/null -P '%s/kc_sys_a.h' -e trace=open,openat "
                   "-e inject=open,openat:error=ENOENT:when=1 tcc \"$@\"; } ;; esac\n"
                   "exec tcc \"$@\"\n",
                   d.root, d.root, d.inc1);
  kct_fixture f;
  open_rt(&f, &d, false, cc);
  kct_define(f.rt, "ka",
             "#include <kc_sys_a.h>\nKC_KERNEL void ka(KC_GLOBAL float *y) { y[kc_global_id(0)] = SAV; }");
  kc_kernel *k = kct_kernel(f.rt, "ka", NULL);
  kc_status st = kct_run(k, f.ctx, f.buf, KCT_FX_N, f.out);
  if (st == KC_OK) /* before the fix: read from tcc's own directories, not listed */
    fail_msg("a compile that did not find the header at its -I gave %g (it read it unlisted)", f.out[0]);
  assert_int_equal(st, KC_ECOMPILE);
  KCT_CONTAINS(kc_errmsg(f.rt), "kc_sys_a.h"); /* not found, as tcc looked */
  put(d.inc1, "kc_sys_a.h", "#define SAV 2.0f\n");
  (void)refresh(f.rt);
  assert_int_equal(kct_run(k, f.ctx, f.buf, KCT_FX_N, f.out), KC_OK);
  assert_true(f.out[0] == 2.0f);
  put(d.inc1, "kc_sys_a.h", "#define SAV 3.0f\n"); /* and that compile recorded it */
  assert_int_equal(refresh(f.rt), 1);
  assert_int_equal(kct_run(k, f.ctx, f.buf, KCT_FX_N, f.out), KC_OK);
  assert_true(f.out[0] == 3.0f);
  kc_kernel_destroy(k);
  kct_fx_close(&f);
  sys_close(&d, saved);
}

/* A helper in a header on disk that reads the work item's ids: kcache does
 * not read such a header, so its #include alone must keep each item's ids
 * where helpers find them (the host backend's loops give a kernel its ids
 * as loop variables, and store them for helpers only where it sees one may
 * read them). Two groups of 8, with and without a barrier (split into
 * loops over the group's items). */
void test_disk_headers_helper_reads_ids(void **state) {
  (void)state;
  disk d;
  disk_open(&d);
  put(d.inc2, "kc_ids.h", "static float my_gid(void) { return (float)kc_global_id(0); }\n");
  kct_fixture f;
  open_rt(&f, &d, false, NULL);
  static const char *const kernels[] = {
      "#include <kc_ids.h>\nKC_KERNEL void kg(KC_GLOBAL float *y) {\n"
      "  int i = (int)kc_global_id(0);\n  y[i] = my_gid() * 10.0f + (float)i;\n}",
      "#include <kc_ids.h>\nKC_KERNEL void kg(KC_GLOBAL float *y) {\n"
      "  int i = (int)kc_global_id(0);\n  float v = my_gid();\n  kc_barrier();\n"
      "  y[i] = v * 10.0f + (float)i;\n}"};
  for (int b = 0; b < 2; b++) {
    kct_define(f.rt, "kg", kernels[b]);
    kc_kernel *k = kct_kernel(f.rt, "kg", NULL);
    kc_dim3 grid = {2, 1, 1}, block = {8, 1, 1};
    kc_arg a = KC_ARG_BUF(f.buf);
    kc_status st = kc_launch(k, f.ctx, &grid, &block, &a, 1);
    if (st == KC_EUNAVAILABLE && b) { /* a backend without barriers in helpers' kernels */
      kc_kernel_destroy(k);
      continue;
    }
    KCT_OK(f.rt, st);
    float y[KCT_FX_N];
    KCT_OK(f.rt, kc_buffer_read(f.buf, 0, y, sizeof y));
    for (int i = 0; i < KCT_FX_N; i++)
      if (y[i] != (float)i * 11.0f)
        fail_msg("%s: item %d: %g, expected %g (the helper read another item's id)",
                 b ? "with a barrier" : "plain", i, y[i], (float)i * 11.0f);
    kc_kernel_destroy(k);
  }
  kct_fx_close(&f);
  disk_close(&d);
}

/* Host backend, tcc: a process that emptied its environment (clearenv
 * leaves environ NULL) still compiles: tcc is run with an environment
 * made from the process's, without the include variables. */
void test_disk_headers_tcc_empty_environment(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST || access("/usr/bin/tcc", X_OK) != 0) skip();
  extern char **environ;
  size_t n = 0;
  while (environ && environ[n]) n++;
  char **saved = kct_calloc((n + 1) * sizeof *saved);
  for (size_t i = 0; i < n; i++) saved[i] = strdup(environ[i]);
  kc_options o;
  kc_options_init(&o);
  o.cache_disable = true;
  o.host_cc = "/usr/bin/tcc";
  kct_fixture f = {0};
  f.rt = kct_runtime(&o);
  f.ctx = kct_context(f.rt);
  f.buf = kct_buffer(f.rt, f.ctx, KCT_FX_N);
  kct_define(f.rt, "ke", "KC_KERNEL void ke(KC_GLOBAL float *y) { y[kc_global_id(0)] = 4.0f; }");
  kc_kernel *k = kct_kernel(f.rt, "ke", NULL);
  clearenv();
  kc_status st = kct_run(k, f.ctx, f.buf, 1, f.out);
  for (size_t i = 0; i < n; i++) {
    char *eq = strchr(saved[i], '=');
    if (eq) {
      *eq = '\0';
      setenv(saved[i], eq + 1, 1);
    }
    free(saved[i]);
  }
  kct_free(saved);
  KCT_OK(f.rt, st);
  assert_true(f.out[0] == 4.0f);
  kc_kernel_destroy(k);
  kct_fx_close(&f);
}
