/* SPDX-License-Identifier: MIT */
/*
 * table.h -- the function table's work, between the files of src/core: a
 * kernel's closure as of a world (resolve.c) and its headers in the
 * translation unit (headers.c), the range a new code instance is published
 * with (table.c), and many definitions in one world: what table.c gives
 * kc_define_file (source_file.c) and what source_file.c gives the CLI and
 * the fuzzers (the splitter). Included by core.h, after the data model.
 */
#ifndef KC_CORE_TABLE_H
#define KC_CORE_TABLE_H

/* Function table (table.c). */
typedef struct kc__closure {
  kc__def **defs; /* dependency order: callees first, the entry last */
  uint32_t ndefs;
  kc__edge *edges;
  uint32_t nedges;
} kc__closure;

kc_status kc__resolve(kc_runtime *rt, const kc__spec *spec, kc_world world, kc__closure *out);
/* headers.c: appends d's text to sb with its includes of the closure's
 * headers inlined; whether d is a header, or a macro (its first mention
 * of its name is on a preprocessor line: #define NAME). */
kc_status kc__emit_def(kc_runtime *rt, kc__sb *sb, const kc__closure *c, const kc__def *d);
bool kc__def_is_header(const kc__def *d);
bool kc__def_is_macro(const kc__def *d);
void kc__closure_free(kc_runtime *rt, kc__closure *c);
/* Under world_lock, after kc__ext_observe(rt, ci) gave `files` (the files
 * ci read, as edges: a changed one has moved the world on already):
 * computes the world range of a code instance compiled at `world` from its
 * edges, registers backedges if it is still valid in the latest world,
 * publishes the range (release) and puts ci at the head of its
 * specialization's list. */
void kc__publish_range(kc_runtime *rt, kc__ci *ci, kc_world world, int files);
void kc__table_free(kc_runtime *rt);

/* Many definitions in one world (table.c, for kc_define_file): each item
 * defines name (source non-NULL) or undefines it (if visible); identical
 * text changes nothing. With file, the names the file's last load defined
 * and this one does not are undefined too, and the file's names are
 * recorded (source_file.c), all under world_lock. *changed (may be NULL)
 * gets how many names changed; *new_world the world (the current one if
 * nothing changed). */
/* table.c's primitives for batches, under world_lock: the binding of a
 * name (made if new; NULL: out of memory), its definition visible at w,
 * the check of a name, and ending (at w) the code that looked b up or
 * watched a prefix of its name (buf: room for strlen(b->name) + 1 bytes,
 * allocated before anything changed). */
kc__binding *kc__binding_get(kc_runtime *rt, const char *name, size_t len);
void kc__binding_invalidate(kc_runtime *rt, kc__binding *b, kc_world w);
kc__def *kc__visible_def(const kc__binding *b, kc_world w);
kc_status kc__check_name(const kc_runtime *rt, const char *what, const char *name);
void kc__table_clip(kc_runtime *rt, kc__binding *b, kc_world w, char *buf);
/* The watcher of a prefix (the binding "#prefix", which code that pastes a
 * name it cannot know looks up), made if make; NULL if none, or out of
 * memory. Under world_lock. */
kc__binding *kc__watcher(kc_runtime *rt, const char *prefix, size_t n, bool make);
/* The watcher of lang's built-ins (the binding "#!opencl", "#!cuda"),
 * made if make; NULL if none, or out of memory. Under world_lock. */
kc__binding *kc__lang_watcher(kc_runtime *rt, uint8_t lang, bool make);
/* A name without a visible or old definition: no binding, or one with no
 * definition left (NULL: none). Under world_lock. */
kc__binding *kc__binding_find(kc_runtime *rt, const char *name, size_t len);
/* Ends cur (if any) at w, onto the retired list kc_collect walks, and makes
 * d (if any) b's newest definition; under world_lock. */
void kc__def_replace(kc_runtime *rt, kc__binding *b, kc__def *cur, kc__def *d, kc_world w);
/* Enumerators of a new definition of `by` (table.c, under world_lock):
 * their bindings and room to list by as a declarer (false: out of memory),
 * then, once it is in, by listed and the code that looked them up ended. */
bool kc__declare_prepare(kc_runtime *rt, kc__binding *by, const char *source, size_t len);
void kc__declare_commit(kc_runtime *rt, kc__binding *by, const char *source, size_t len, kc_world w);
typedef struct kc__change {
  const char *name;
  const char *source; /* NULL: undefine */
  size_t len;
  bool changed; /* set by kc__define_batch */
  uint8_t lang; /* kc_language of source */
} kc__change;
/* fn (may be NULL): kc_define_file_ex's report of each change, called
 * after world_lock is released. */
kc_status kc__define_batch(kc_runtime *rt, const char *file, kc__change *items, size_t n, kc_change_fn fn,
                           void *user, size_t *changed, kc_world *new_world);
/* source_file.c, under world_lock: the names file's last load defined that
 * items lacks (pointers into the record, valid until kc__file_commit), and
 * the record of this load (made before anything changes, so it cannot
 * fail after), installed by kc__file_commit or freed by kc__file_abort. */
typedef struct kc__srcfile kc__srcfile;
kc_status kc__file_prepare(kc_runtime *rt, const char *file, const kc__change *items, size_t n,
                           const char ***gone, size_t *ngone, kc__srcfile **rec);
void kc__file_commit(kc_runtime *rt, kc__srcfile *rec);
void kc__file_abort(kc_runtime *rt, kc__srcfile *rec);
void kc__files_free(kc_runtime *rt);
/* Takes world_lock: whether a kc_define_file load defined name last, and
 * that file's name into buf (size bytes, cut short if need be). */
bool kc__file_of(kc_runtime *rt, const char *name, char *buf, size_t size);
/* Cuts a source file into its top-level definitions (source_file.c): names
 * and texts (after the #include and #pragma lines before them); free with
 * kc__free_changes. */
kc_status kc__split_file(kc_runtime *rt, const char *file, const char *text, size_t len, kc__change **out,
                         size_t *n);
/* The same for a file in language lang (kc_language; CUDA C++: extern "C"
 * blocks read through). */
kc_status kc__split_file_lang(kc_runtime *rt, const char *file, const char *text, size_t len, uint8_t lang,
                              kc__change **out, size_t *n);
void kc__free_changes(kc_runtime *rt, kc__change *v, size_t n);

#endif /* KC_CORE_TABLE_H */
