/* SPDX-License-Identifier: MIT */
/*
 * extfiles.h -- what src/core calls of extfiles.c: the files outside the
 * function table that compiles read (headers on disk), their records with
 * a code instance, their check against a stored entry, and their place in
 * the world. Included by core.h, after the data model.
 */
#ifndef KC_CORE_EXTFILES_H
#define KC_CORE_EXTFILES_H

/* extfiles.c: the files outside the table that compiles read (headers on
 * disk). The most one code instance records, and reads while following
 * #include lines; past either its files are unknown (it is not stored). */
#define KC__EXT_MAX 4096u
#define KC__EXT_MAX_BYTES (256ull << 20)
/* The -I directories of the compile options, after the working directory
 * (runtime create); freed after the table (runtime destroy). */
kc_status kc__ext_setup(kc_runtime *rt);
void kc__ext_free(kc_runtime *rt);
void kc__ci_files_free(kc_runtime *rt, kc__ci *ci);
/* A binding's record of a file on disk or a set of files (its b->ext;
 * below), filled here and freed with the table. */
typedef struct kc__extinfo {
  kc__filedep seen; /* a file: what was seen of it last (path owned), for kc_refresh */
  struct kc__binding **sets; /* a file: the sets that hold it */
  size_t nsets, capsets;
  struct kc__binding **files; /* a set: its files, in the order of their paths */
  uint32_t nfiles;
} kc__extinfo;
/* ci's files from what its compiler reported (host), read now; since_ns:
 * when the compile started (a file changed since is UNKNOWN). */
kc_status kc__ext_from_paths(kc_runtime *rt, kc__ci *ci, const kc__tu_deps *d, uint64_t since_ns);
/* Before a compiler that reports its files (host) runs: the files the
 * last compile of spec read (the newest code instance of spec that has
 * files), read now into *out (*n of them; free with kc__ext_before_free).
 * After it, kc__ext_after makes unknown each of ci's files that is one of
 * them and is not the same file as it was then (another file, content or
 * stamp): it changed while the compiler ran, whatever its stamps say of
 * the compile's start. Callers are inside a grace section (spec's code
 * instances are read). KC_ENOMEM only. */
kc_status kc__ext_before(kc_runtime *rt, kc__spec *spec, kc__filedep **out, uint32_t *n);
void kc__ext_after(kc__ci *ci, const kc__filedep *before, uint32_t n);
void kc__ext_before_free(kc_runtime *rt, kc__filedep *before, uint32_t n);
/* ci's files found by following the #include lines of text (its
 * translation unit), before it is compiled. KC_ENOMEM only. */
kc_status kc__ext_scan(kc_runtime *rt, kc__ci *ci, const char *text, size_t len);
/* Whether text has an #include line. */
bool kc__tu_includes(const char *text);
/* Whether each of files is still the same on disk (a stored entry's). */
bool kc__ext_same(const kc__filedep *files, uint32_t n);
/* ci's files := a copy of files (a stored entry's, found the same on disk
 * between begin_ns and end_ns: when they count as read); KC_ENOMEM. */
kc_status kc__ext_copy(kc_runtime *rt, kc__ci *ci, const kc__filedep *files, uint32_t n, uint64_t begin_ns,
                       uint64_t end_ns);
/* Whether ci's files can all be checked later (else it is not stored). */
bool kc__ext_storable(const kc__ci *ci);
/* Under world_lock, while ci is published: an edge to the version of the
 * set of ci's files that it read, a new version (and a new world) for a
 * file that changed since it was last seen. 1: done; 0: out of memory
 * (edges may be missing: the caller trusts ci for no later world); -1:
 * some of its files cannot be told (KC__FILEDEP_UNKNOWN, files_unknown:
 * what it was compiled from is not known, so no world may reuse it). */
int kc__ext_observe(kc_runtime *rt, kc__ci *ci);
/* table.c, under world_lock: publishes world w + 1 (world, and fast_world
 * unless a pin is held), after every clip that it ends. */
void kc__world_advance(kc_runtime *rt, kc_world w);

#endif /* KC_CORE_EXTFILES_H */
