/* SPDX-License-Identifier: MIT */
/*
 * replay.c -- runs a fuzz target's checks without libFuzzer: every file
 * named on the command line, and every file in every directory named (not
 * recursively; names starting with '.' and README files are skipped), goes
 * through LLVMFuzzerTestOneInput once, in name order. A directory that does
 * not exist is skipped (a target without regression inputs has none).
 *
 *   fuzz_<target>_replay DIR|FILE...
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static long replayed;

static void replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
    exit(1);
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  for (size_t n; buf && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
    len += n;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  if (!buf || ferror(f)) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  /* exactly len bytes, so a read past the end shows under ASan */
  uint8_t *exact = kcf_dup(buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  replayed++;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
    exit(1);
  }
  char **names = NULL;
  size_t n = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] == '.' || !strncmp(de->d_name, "README", 6)) continue;
    names = realloc(names, (n + 1) * sizeof *names);
    if (!names || !(names[n++] = strdup(de->d_name))) abort();
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, by_name);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) replay_file(path);
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) replay_dir(argv[i]);
    else replay_file(argv[i]);
  }
  printf("replayed %ld inputs through %s: all checks passed\n", replayed, argv[0]);
  if (replayed == 0) {
    fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  return 0;
}
