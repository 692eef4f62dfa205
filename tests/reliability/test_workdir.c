/* SPDX-License-Identifier: MIT */
/*
 * test_workdir -- the host backend's work directories of processes that
 * were killed during a compile (src/backends/host/tools.c,
 * host_workdir_sweep). Two children each create a runtime and start a
 * compile whose compiler waits for a file; one is killed with SIGKILL
 * (its directory stays behind), the other lives on. Then, next to them,
 * directories that look like work directories but must be kept are
 * planted, and some that must go. The parent's next runtime must remove
 * the killed child's directory and those of pids that now belong to a
 * process started at another time, and keep: the live child's, another
 * pid namespace's, a symbolic link and what it points to, names not
 * exactly of the form, a plain file, another user's directory (as root).
 */
#include "rel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

enum { WATCHDOG_S = 60 };

static char tmp[512], hang[600];

static const char SRC[] = "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f; }\n";

/* A child: a runtime whose compiler (hang) waits for tmp/release, and a
 * launch that compiles; exits 0 when the launch failed (the compiler exits
 * 1 once released), as it must. */
static pid_t start_compile(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) return pid;
  alarm(WATCHDOG_S);
  kc_options o;
  kc_options_init(&o);
  o.backend = KC_BACKEND_HOST;
  o.host_cc = hang;
  o.compile_timeout_ms = WATCHDOG_S * 1000;
  kc_runtime *rt = NULL;
  if (kc_runtime_create(&o, &rt)) _exit(3);
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  if (kc_define(rt, "k", SRC, NULL) < 0 || kc_context_create(rt, 0, &ctx) || kc_buffer_create(ctx, 16, &b) ||
      kc_kernel_create(rt, "k", NULL, &k))
    _exit(4);
  kc_dim3 g = {4, 1, 1}, bl = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_status st = kc_launch(k, ctx, &g, &bl, args, 1);
  _exit(st == KC_OK ? 5 : 0);
}

/* The name of pid's work directory in tmp (with a k.c: its compile has
 * begun), or false after 20 s. */
static bool find_dir(pid_t pid, char *name, size_t len) {
  char mid[32];
  snprintf(mid, sizeof mid, "-%ld-", (long)pid);
  for (double t0 = rel_now(); rel_now() - t0 < 20;) {
    DIR *d = opendir(tmp);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
      const char *p = strchr(e->d_name + sizeof "kcache-host-" - 1, '-');
      char kc[1024];
      snprintf(kc, sizeof kc, "%s/%.256s/k.c", tmp, e->d_name);
      if (!strncmp(e->d_name, "kcache-host-", 12) && p && !strncmp(p, mid, strlen(mid)) &&
          !access(kc, F_OK)) {
        snprintf(name, len, "%s", e->d_name);
        closedir(d);
        return true;
      }
    }
    closedir(d);
    usleep(20000);
  }
  return false;
}

static bool there(const char *name) {
  char p[1200];
  struct stat st;
  snprintf(p, sizeof p, "%s/%.256s", tmp, name);
  return lstat(p, &st) == 0;
}

static void plant_dir(const char *name, bool with_file) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%.256s", tmp, name);
  assert_int_equal(mkdir(p, 0700), 0);
  if (with_file) {
    snprintf(p, sizeof p, "%s/%.256s/k.c", tmp, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
  }
}

static void test_sweep(void **state) {
  (void)state;
  rel_mkdtemp(tmp, sizeof tmp, "workdir");
  snprintf(hang, sizeof hang, "%s/hang.sh", tmp);
  kct_write_script(
      hang,
      "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'hang 1.0'; exit 0; }\ni=0\nwhile [ ! -e '%s/release' "
      "] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); "
      "done\nexit 1\n",
      tmp); /* at most a minute, should the test fail before the release */
  char *old_tmpdir = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  setenv("TMPDIR", tmp, 1);

  pid_t victim = start_compile(), live = start_compile();
  assert_true(victim > 0 && live > 0);
  char vdir[256], ldir[256];
  assert_true(find_dir(victim, vdir, sizeof vdir));
  assert_true(find_dir(live, ldir, sizeof ldir));
  kill(victim, SIGKILL);
  int ws;
  assert_int_equal(waitpid(victim, &ws, 0), victim);
  assert_true(there(vdir));

  /* the live child's tag: kcache-host-NS-PID-START-XXXXXX */
  unsigned long long ns, start;
  long lpid;
  assert_int_equal(sscanf(ldir, "kcache-host-%llu-%ld-%llu-", &ns, &lpid, &start), 3);
  assert_int_equal(lpid, (long)live);
  if (start == 0) skip(); /* no /proc: the sweep removes nothing it cannot tell dead */
  char gone[4][256], kept[6][256], link[256], target[1100];
  /* the live pid with another start time: a process that ended, whose pid was reused */
  snprintf(gone[0], sizeof gone[0], "kcache-host-%llu-%ld-%llu-reuse1", ns, lpid, start + 1);
  snprintf(gone[1], sizeof gone[1], "kcache-host-%llu-%ld-%llu-Reuse2", ns, lpid, start - 1);
  /* the killed one's pid, another of its directories (empty) */
  snprintf(gone[2], sizeof gone[2], "kcache-host-%llu-%ld-%llu-empty0", ns, (long)victim, start);
  snprintf(gone[3], sizeof gone[3], "%s", vdir);
  plant_dir(gone[0], true);
  plant_dir(gone[1], false);
  plant_dir(gone[2], false);
  snprintf(kept[0], sizeof kept[0], "kcache-host-%llu-%ld-%llu-otherN", ns + 1, (long)victim, start);
  snprintf(kept[1], sizeof kept[1], "kcache-host-%llu-%ld-%llu-long123", ns, (long)victim, start);
  snprintf(kept[2], sizeof kept[2], "kcache-host-%llu-%ld-x%llu-short", ns, (long)victim, start);
  snprintf(kept[3], sizeof kept[3], "kcache-host-Ab3dE9");
  snprintf(kept[4], sizeof kept[4], "kcache-host-%llu-%ld-%llu-afile0", ns, (long)victim, start);
  snprintf(kept[5], sizeof kept[5], "kcache-host-%llu-%ld-%llu-other0", ns, (long)victim, start);
  for (int i = 0; i < 4; i++) plant_dir(kept[i], true);
  snprintf(target, sizeof target, "%s/%s", tmp, kept[4]);
  FILE *f = fopen(target, "w"); /* a plain file with a dead process's work directory's name */
  assert_non_null(f);
  fclose(f);
  bool root = geteuid() == 0;
  if (root) {
    plant_dir(kept[5], true);
    snprintf(target, sizeof target, "%s/%s", tmp, kept[5]);
    assert_int_equal(chown(target, 65534, 65534), 0);
  }
  /* a symbolic link named as a dead process's directory, to a directory with a file */
  char tdir[1024];
  snprintf(tdir, sizeof tdir, "%s/target", tmp);
  assert_int_equal(mkdir(tdir, 0700), 0);
  snprintf(target, sizeof target, "%s/keep", tdir);
  f = fopen(target, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(link, sizeof link, "kcache-host-%llu-%ld-%llu-link00", ns, (long)victim, start);
  char lpath[1024];
  snprintf(lpath, sizeof lpath, "%s/%s", tmp, link);
  assert_int_equal(symlink(tdir, lpath), 0);

  kc_runtime *rt = kct_runtime(NULL); /* the host backend opens: the sweep */
  for (int i = 0; i < 4; i++)
    if (there(gone[i])) fail_msg("%s was not removed", gone[i]);
  for (int i = 0; i < 5; i++)
    if (!there(kept[i])) fail_msg("%s was removed", kept[i]);
  if (root && !there(kept[5])) fail_msg("another user's %s was removed", kept[5]);
  if (!there(ldir)) fail_msg("the live process's %s was removed", ldir);
  assert_true(there(link));
  assert_int_equal(access(target, F_OK), 0); /* what the link points to */
  kct_destroy(rt);

  /* the live child's compile then fails, and its directory goes with it */
  char rel[1024];
  snprintf(rel, sizeof rel, "%s/release", tmp);
  f = fopen(rel, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(waitpid(live, &ws, 0), live);
  if (!WIFEXITED(ws))
    fail_msg("the live child died of signal %d (SIGALRM %d: it hung)", WTERMSIG(ws), SIGALRM);
  assert_int_equal(WEXITSTATUS(ws), 0);
  assert_false(there(ldir));
  if (old_tmpdir) setenv("TMPDIR", old_tmpdir, 1);
  else unsetenv("TMPDIR");
  free(old_tmpdir);
  rel_summary("host work directories: %d of dead processes removed, %d kept (live, other namespace, link, "
              "names not of the form, a file%s)",
              4, root ? 6 : 5, root ? ", another user's" : "");
  rel_rmrf(tmp);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  if (strcmp(kct_backend_name, "host")) {
    printf("SKIPPED: the work directories are the host backend's\n");
    return 77;
  }
  kct_memory_only();
  const struct CMUnitTest tests[] = {KCT_TEST(test_sweep)};
  return KCT_RUN(tests);
}
