/* SPDX-License-Identifier: MIT */
/*
 * codegen.c -- what the host backend writes around a kernel's C: the
 * dialect's prelude, the kernel's work item as a parameter (the entry
 * prologue) and the object's entry points (the epilogue).
 *
 * The execution model: a kernel runs a work group at a time. Its group
 * function (kc__group) loops over the group's work items with the ids as
 * loop variables and calls the kernel, inlined, with a pointer to the
 * item (struct kc__wi) as a hidden first parameter: the compiler sees the
 * kernel's body inside the loop over work items, so plain loops vectorize
 * across items (PoCL's work-group functions, done by the C compiler). A
 * second hidden parameter (struct kc__ids) gives the kernel the item's
 * ids as the loop's own int variables when every global id of the group
 * fits in int: then `(int)kc_global_id(0)` is the counter itself, whose
 * addresses the compiler sees affine (a size_t id cut to int is not, and
 * its loads become gathers or scalar); the group function has a second
 * copy of the loop, with the ids from the item's struct, for a group past
 * INT_MAX. The item's struct gets each item's ids only where the kernel
 * reads them there (that copy) or a helper may. The
 * entry prologue makes the hidden parameters: a function-like macro named
 * after the kernel adds it to the definition. Functions other than the
 * kernel (helpers, or functions of headers) reach the current item
 * through the thread (kc__wp_tls): the group function publishes its item
 * in the thread's slot (loader.c) once per group, so they read what the
 * kernel reads. The id macros pick the parameter where it is in scope
 * (_Generic on the name kc__wp: the parameter shadows a file-scope
 * function of that name), else the thread's slot.
 *
 * A kernel whose closure calls kc_barrier() is cut at its barriers into
 * loops over the group's items (split.c: kc__split), where that is
 * certain; else, or when what its items keep across barriers would not
 * fit the stack (HOST_SPLIT_MAX_BYTES), it runs its group's items as
 * fibers (exec.c): each barrier switches to the next item, and the group
 * goes on when every item has reached it. Groups run on the pool of
 * worker threads (exec.c, kc__par) when there is more than one; a kernel
 * with KC_LOCAL arrays (static storage in C: one per loaded object) is
 * loaded once per worker, so that groups that run at once never share
 * them (kc__copies).
 *
 * Entry points of the object, besides the hooks the loader sets:
 *   kc__run(l, argv, grid, block)      argv: a pointer to each argument's bytes
 *   kc__launch(l, ctx, grid, block, args, nargs)   kc_launch's own arguments,
 *       checked against the parameters (kinds and sizes compiled in)
 *   kc__group(args, gid, block, ngroups)   one group, for the pool
 *   kc__asize (sizeof the packed arguments), kc__copies, kc__nargs
 */
#include "backends/host/host.h"

#include <string.h>

const char host_prelude[] =
    "/* kcache host prelude: kernels are C11, run a work group at a time */\n"
    "#include <stddef.h>\n"
    "#include <stdint.h>\n"
    "#include <stdbool.h>\n"
    "#include <math.h>\n"
    "#define KC_BACKEND_HOST 1\n"
    "/* set by kcache when it loads the object: they report a NULL or empty\n"
    "   grid, and arguments that do not match the parameters */\n"
    "__attribute__((visibility(\"default\"))) int (*kc__on_bad_dims)(void *, const void *, const void *);\n"
    "struct kc__arg { const void *kc__p; unsigned long long kc__sig; }; /* kc_arg: ptr, then size | kind << "
    "32 */\n"
    "struct kc__buf { void *kc__h; const void *kc__ctx; };       /* kc_buffer's first two members */\n"
    "#define KC__SIG_BUFFER (2ull << 32)\n"
    "#define KC__SIG_SCALAR(size) ((1ull << 32) | (unsigned long long)(size))\n"
    "__attribute__((visibility(\"default\"))) int (*kc__on_bad_args)(void *, const void *, const void *, "
    "unsigned);\n"
    "#if defined(__GNUC__) && !defined(__TINYC__)\n"
    "#define KC_KERNEL static inline __attribute__((always_inline))\n"
    "#else\n"
    "#define KC_KERNEL static inline\n"
    "#endif\n"
    "#define KC_DEVICE static\n"
    "#define KC_GLOBAL\n"
    "#define KC_LOCAL static\n"
    "typedef unsigned int uint;\n"
    "typedef unsigned char uchar;\n"
    "typedef unsigned short ushort;\n"
    "typedef unsigned long ulong;\n"
    "/* the 2- and 4-lane vector types, as structs of x, y (z, w) aligned to their size\n"
    "   (as on OpenCL and CUDA; no arithmetic on them here), and half where C has it */\n"
    "#define KC__VEC(t) typedef struct { t x, y; } __attribute__((aligned(2 * sizeof(t)))) t##2; \\\n"
    "  typedef struct { t x, y, z, w; } __attribute__((aligned(4 * sizeof(t)))) t##4;\n"
    "KC__VEC(char) KC__VEC(uchar) KC__VEC(short) KC__VEC(ushort) KC__VEC(int) KC__VEC(uint)\n"
    "KC__VEC(long) KC__VEC(ulong) KC__VEC(float) KC__VEC(double)\n"
    "#undef KC__VEC\n"
    "#if defined(__FLT16_MAX__) && !defined(__TINYC__)\n"
    "typedef _Float16 half;\n"
    "#endif\n"
    "/* a work item: its ids in the group, the group's, the sizes, the group's scratch area */\n"
    "struct kc__wi { unsigned kc__lid[3], kc__grp[3], kc__lsz[3], kc__ngrp[3]; void *kc__scratch; };\n"
    "/* the thread's slot (loader.c), at %fs:0 + kc__it_off, which kcache's loader sets:\n"
    "   the item the thread runs, and the scratch area of its launch */\n"
    "struct kc__tls { const struct kc__wi *kc__item; void *kc__scratch; };\n"
    "__attribute__((visibility(\"hidden\"))) long kc__it_off = 0;\n"
    "static inline struct kc__tls *kc__tls_p(void) {\n"
    "  struct kc__tls *kc__p;\n"
    "  __asm__(\"movq %%fs:0, %0\\n\\taddq kc__it_off(%%rip), %0\" : \"=r\"(kc__p));\n"
    "  return kc__p;\n"
    "}\n"
    "static inline const struct kc__wi *kc__wp_tls(void) { return kc__tls_p()->kc__item; }\n"
    "/* the name the kernel's hidden parameter shadows; elsewhere, the thread's item */\n"
    "static inline const struct kc__wi *kc__wp(void) { return 0; }\n"
    "#define kc__cur (_Generic(kc__wp, const struct kc__wi *: kc__wp, default: kc__wp_tls()))\n"
    "/* the item's ids as the group loop's own int variables (kc__nar: the group's global ids\n"
    "   all fit in int), which the kernel gets as a second hidden parameter kc__id: the\n"
    "   compiler sees plain counters, whose addresses are affine, and vectorizes; elsewhere\n"
    "   (helpers, fibers, a group whose ids do not fit) the file's kc__id, kc__nar 0: the item */\n"
    "struct kc__ids { int kc__nar, kc__l0, kc__l1, kc__l2, kc__g0, kc__g1, kc__g2; };\n"
    "__attribute__((unused)) static const struct kc__ids kc__id = {0, 0, 0, 0, 0, 0, 0};\n"
    "#define KC__PICK(d, a, b, c) ((d) == 0 ? (a) : (d) == 1 ? (b) : (c))\n"
    "#define kc_scratch() (kc__cur->kc__scratch)\n" HOST_ID_MACROS
    "#define kc_group_id(d) ((size_t)kc__cur->kc__grp[(d)])\n"
    "#define kc_local_size(d) ((size_t)kc__cur->kc__lsz[(d)])\n"
    "#define kc_num_groups(d) ((size_t)kc__cur->kc__ngrp[(d)])\n"
    "#define kc_global_size(d) (kc_num_groups(d) * kc_local_size(d))\n"
    "/* a barrier: the item's fiber lets the group's others run up to it (exec.c); a\n"
    "   macro, not a function, so that only a unit that calls it refers to kc__barrier_fn\n"
    "   (loader.c refuses a call the unit's text did not show), whatever the compiler\n"
    "   keeps of unused inline functions */\n"
    "__attribute__((visibility(\"default\"))) void (*kc__barrier_fn)(void);\n"
    "#define kc_barrier() (__extension__({ struct kc__tls *kc__bt = kc__tls_p(); \\\n"
    "  const struct kc__wi *kc__bme = kc__bt->kc__item; kc__barrier_fn(); kc__bt->kc__item = kc__bme; }))\n";

/* What a kernel's closure uses, read from its text past the prelude (a
 * name in a comment or a string counts too: a needless fiber or copy, never
 * a missing one). */
static bool ident_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool mentions(const kc__tu *tu, const char *name) {
  size_t from = sizeof host_prelude - 1, n = strlen(name);
  if (!tu->text) return false; /* no text (a unit the fault tests make) */
  const char *t = tu->text + (tu->len > from ? from : tu->len), *end = tu->text + tu->len;
  for (const char *p = t; (p = memmem(p, (size_t)(end - p), name, n)); p += n)
    if ((p == t || !ident_char(p[-1])) && (p + n == end || !ident_char(p[n]))) return true;
  return false;
}

/* Past a comment that starts at p (a block or a line comment), or p. */
static const char *skip_comment(const char *p, const char *end) {
  if (p + 1 < end && p[0] == '/' && p[1] == '/') {
    while (p < end && *p != '\n') p++;
  } else if (p + 1 < end && p[0] == '/' && p[1] == '*') {
    const char *q = memmem(p + 2, (size_t)(end - p - 2), "*/", 2);
    p = q ? q + 2 : end;
  }
  return p;
}

/* Whether the declaration after a KC_LOCAL ending at p declares a pointer:
 * a `*` before its `;` (or, in a parameter list, its `,` or `)`), past
 * comments, line ends and bracketed sizes (`sh[N * 2]`). */
static bool declares_pointer(const char *p, const char *end, bool in_params) {
  while (p < end) {
    const char *q = skip_comment(p, end);
    if (q != p) {
      p = q;
      continue;
    }
    char c = *p;
    if (c == '*') return true;
    if (c == '[') { /* a size: its brackets, balanced */
      int depth = 0;
      do {
        depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
        p++;
      } while (p < end && depth > 0);
      continue;
    }
    if (strchr(";{}=()#\"'", c) || (c == ',' && in_params)) return false;
    p++;
  }
  return false;
}

/* Where the text past the prelude puts KC_LOCAL on a pointer (`KC_LOCAL
 * int *p`, `KC_LOCAL float sh[8], *p`, a parameter `KC_LOCAL float *q`, a
 * cast `(KC_LOCAL int *)`), outside comments, literals, preprocessor lines
 * and conditional groups (#if...#endif: such a line may be another
 * backend's); NULL where it does not. On OpenCL such a pointer is each
 * item's own, pointing into local memory; on the host KC_LOCAL is
 * `static`, so it would be one pointer for the group (a silent wrong
 * result), or not C. A typedef'd pointer (`KC_LOCAL fptr p`) is not seen. */
static const char *local_pointer(const kc__tu *tu) {
  size_t from = sizeof host_prelude - 1;
  if (!tu->text || tu->len <= from) return NULL;
  const char *p = tu->text + from, *end = tu->text + tu->len;
  bool line_start = true;
  int cond = 0, parens = 0; /* open #if groups; open parentheses */
  while (p < end) {
    char c = *p;
    const char *q = skip_comment(p, end);
    if (q != p) {
      p = q;
      continue;
    }
    if (c == '\n') {
      line_start = true;
      p++;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      p++;
    } else if (c == '#' && line_start) { /* a preprocessor line, with its splices and comments */
      const char *d = p + 1;
      while (d < end && (*d == ' ' || *d == '\t')) d++;
      if (end - d >= 2 && !memcmp(d, "if", 2)) cond++; /* #if, #ifdef, #ifndef */
      else if (end - d >= 5 && !memcmp(d, "endif", 5) && cond > 0) cond--;
      while (p < end && *p != '\n') {
        q = skip_comment(p, end);
        p = q != p ? q : p + (*p == '\\' && p + 1 < end ? 2 : 1);
      }
    } else if (c == '"' || c == '\'') {
      for (p++; p < end && *p != c && *p != '\n'; p++)
        if (*p == '\\' && p + 1 < end) p++;
      p += p < end && *p == c;
      line_start = false;
    } else if (ident_char(c)) {
      const char *w = p;
      while (p < end && ident_char(*p)) p++;
      line_start = false;
      if (p - w == 8 && !memcmp(w, "KC_LOCAL", 8) && !cond && declares_pointer(p, end, parens > 0)) return w;
    } else {
      parens += c == '(' ? 1 : c == ')' && parens > 0 ? -1 : 0;
      p++;
      line_start = false;
    }
  }
  return NULL;
}

/* Whether compile options (kc_options.compile_options, KC_HOST_OPT) may
 * define macros that jump, write, paste or name kc_barrier or KC_LOCAL,
 * which the text does not show: -include, -imacros, or a -D whose value
 * has such a word or an operator that writes (a plain -DN=64 does not). */
static bool options_hide_macros(const char *o) {
  if (!o) return false;
  if (strstr(o, "-include") || strstr(o, "-imacros")) return true;
  bool any_d = false;
  for (const char *p = o; (p = strstr(p, "-D")); p += 2) {
    if (p != o && p[-1] != ' ' && p[-1] != '\t') continue;
    any_d = true;
    const char *v = p + 2, *w = v;
    while (*w && *w != ' ' && *w != '\t') w++;
    const char *eq = memchr(v, '=', (size_t)(w - v));
    if (!eq) continue;
    for (const char *c = eq + 1; c < w; c++)
      if (*c == '=' || *c == '&' || *c == '#' || ((*c == '+' || *c == '-') && c + 1 < w && c[1] == *c))
        return true;
  }
  if (!any_d) return false;
  static const char *const words[] = {"return", "break", "continue", "goto", "kc_barrier", "KC_LOCAL"};
  for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
    size_t n = strlen(words[k]);
    for (const char *p = o; (p = strstr(p, words[k])); p += n)
      if ((p == o || !ident_char(p[-1])) && !ident_char(p[n])) return true;
  }
  return false;
}

kc_status host_entry_prologue(void *state, const kc__tu *tu, kc__sb *out) {
  (void)state;
  /* the hidden parameter: the kernel's definition (and only it: a call of
   * a kernel is not C on the other backends either) gets it first */
  if (tu->nparams)
    kc__sb_printf(
        out, "#define %s(...) %s(const struct kc__wi *kc__wp, const struct kc__ids kc__id, __VA_ARGS__)\n",
        tu->entry, tu->entry);
  else
    kc__sb_printf(out, "#define %s(...) %s(const struct kc__wi *kc__wp, const struct kc__ids kc__id)\n",
                  tu->entry, tu->entry);
  return KC_OK;
}

/* The most bytes a split group keeps per item in all (struct kc__S, an
 * array on the stack): a larger group runs as fibers. */
#define HOST_SPLIT_MAX_BYTES (64u << 10)

/* The packed arguments (struct kc__a), kc__group and, with barriers, its
 * fibers' entry; split (non-NULL): kc__split (split.c), which the group
 * runs when what its items keep fits HOST_SPLIT_MAX_BYTES. */
static void emit_group(const kc__tu *tu, bool fibers, const kc__sb *split, bool int_ids, bool ids_out,
                       kc__sb *out) {
  uint32_t n = tu->nparams;
  kc__sb_puts(out, "struct kc__a {");
  for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, " %s kc__v%u;", tu->params[i].type, i);
  if (!n) kc__sb_puts(out, " char kc__none;");
  kc__sb_puts(out,
              " };\n"
              "__attribute__((visibility(\"default\"))) const unsigned kc__asize = sizeof(struct kc__a);\n");
  if (fibers) {
    /* each item a fiber (exec.c): it runs the kernel with its own item,
     * which it publishes in the thread's slot again after each barrier */
    kc__sb_puts(
        out, "__attribute__((visibility(\"default\"))) int (*kc__fibers)(void *, unsigned, void (*)(void *, "
             "unsigned), void *);\n"
             "__attribute__((visibility(\"default\"))) void *kc__hs;\n"
             "struct kc__f { const struct kc__a *kc__x; struct kc__wi kc__w; };\n"
             "static void kc__item(void *kc__u, unsigned kc__i) {\n"
             "  const struct kc__f *kc__f = kc__u;\n"
             "  struct kc__wi kc__w = kc__f->kc__w;\n"
             "  kc__w.kc__lid[0] = kc__i % kc__w.kc__lsz[0];\n"
             "  kc__w.kc__lid[1] = kc__i / kc__w.kc__lsz[0] % kc__w.kc__lsz[1];\n"
             "  kc__w.kc__lid[2] = kc__i / kc__w.kc__lsz[0] / kc__w.kc__lsz[1];\n"
             "  kc__tls_p()->kc__item = &kc__w;\n"
             "  const struct kc__a *kc__x = kc__f->kc__x;\n  (void)kc__x;\n  ");
    kc__sb_printf(out, "%s(&kc__w, kc__id", tu->entry);
    for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", kc__x->kc__v%u", i);
    kc__sb_puts(out, ");\n}\n");
  }
  if (split) {
    kc__sb_puts(out,
                "__attribute__((visibility(\"default\"))) int (*kc__split_bad)(void *, unsigned, int);\n");
    kc__sb_append(out, split->buf, split->len);
  }
  if (!fibers) {
    /* a group whose global ids do not all fit in int (a grid past 2^31
     * items) calls the kernel out of line: one copy of its body inlined in
     * a loop to optimize, not two (the rest of the longer cold compile is
     * the vectorizer's: doc/benchmarks.md) */
    kc__sb_puts(out, "__attribute__((noinline)) static void kc__wide(const struct kc__wi *kc__wp, const "
                     "struct kc__ids kc__i");
    for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", %s kc__v%u", tu->params[i].type, i);
    kc__sb_printf(out, ") {\n  %s(kc__wp, kc__i", tu->entry);
    for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", kc__v%u", i);
    kc__sb_puts(out, ");\n}\n");
  }
  /* The loop over a row of items tells the compiler that its iterations
   * carry no dependence it cannot see (gcc's ivdep, clang's
   * assume_safety): the items of a group run at once on every other
   * backend, so one item reading what another writes without a barrier
   * is a race there, and here too the compiler may then run items in
   * SIMD lanes. Without it gcc versions loops such as a stencil's for
   * aliasing and runs the scalar copy (2x slower: doc/benchmarks.md).
   * Not where the item's struct is written per item: a helper reads
   * it, which is a real dependence carried through memory. At file
   * scope: clang's warning for a row it does not vectorize is placed at
   * the function. */
  if (!fibers && !ids_out)
    kc__sb_puts(out, "#if defined(__clang__)\n"
                     "#define KC__ROW _Pragma(\"clang loop vectorize(assume_safety)\")\n"
                     "#pragma clang diagnostic ignored \"-Wpass-failed\" /* a row it does not vectorize */\n"
                     "#elif defined(__GNUC__) && !defined(__TINYC__)\n"
                     "#define KC__ROW _Pragma(\"GCC ivdep\")\n"
                     "#else\n"
                     "#define KC__ROW\n"
                     "#endif\n");
  else kc__sb_puts(out, "#define KC__ROW\n");
  kc__sb_puts(out,
              "static inline int kc__group_in(const struct kc__a *kc__x, const unsigned *kc__gid, "
              "const unsigned *kc__b, const unsigned *kc__ng) {\n"
              "  struct kc__tls *kc__t = kc__tls_p();\n"
              "  struct kc__wi kc__w = {{0, 0, 0}, {kc__gid[0], kc__gid[1], kc__gid[2]},\n"
              "                         {kc__b[0], kc__b[1], kc__b[2]}, {kc__ng[0], kc__ng[1], kc__ng[2]},\n"
              "                         kc__t->kc__scratch};\n"
              "  const struct kc__wi *kc__saved = kc__t->kc__item;\n");
  if ((split && int_ids) || !fibers)
    /* the group's global ids all fit in int: the loops' int variables are its ids */
    kc__sb_puts(
        out, "  const int kc__nar = (unsigned long long)kc__gid[0] * kc__b[0] + kc__b[0] <= 0x7fffffffu &&\n"
             "    (unsigned long long)kc__gid[1] * kc__b[1] + kc__b[1] <= 0x7fffffffu &&\n"
             "    (unsigned long long)kc__gid[2] * kc__b[2] + kc__b[2] <= 0x7fffffffu;\n");
  if (split)
    kc__sb_printf(
        out,
        "  if (kc__b[0] <= %uu && kc__b[1] <= %uu && kc__b[2] <= %uu &&\n"
        "      (unsigned long long)kc__b[0] * kc__b[1] * kc__b[2] <= %uu / sizeof(struct kc__S)) {\n"
        "    kc__t->kc__item = &kc__w; /* for functions other than the kernel */\n"
        "    /* (int ids: two copies of the kernel, with int global ids and without) */\n"
        "    int kc__r = %s;\n"
        "    kc__t->kc__item = kc__saved;\n"
        "    return kc__r;\n"
        "  }\n",
        HOST_SPLIT_MAX_BYTES, HOST_SPLIT_MAX_BYTES, HOST_SPLIT_MAX_BYTES, HOST_SPLIT_MAX_BYTES,
        int_ids ? "kc__nar ? kc__split(&kc__w, kc__x, 1) : kc__split(&kc__w, kc__x, 0)"
                : "kc__split(&kc__w, kc__x, 0)");
  if (fibers) {
    /* the item count in 64 bits: past 2^32 - 1 it is passed as that, which
     * kc__fibers refuses (a product in unsigned would wrap and run few) */
    kc__sb_puts(out, "  struct kc__f kc__f = {kc__x, kc__w};\n"
                     "  unsigned long long kc__n = (unsigned long long)kc__b[0] * kc__b[1] * kc__b[2];\n"
                     "  int kc__r = kc__fibers(kc__hs, kc__n > 0xffffffffu ? 0xffffffffu : (unsigned)kc__n, "
                     "kc__item, &kc__f);\n"
                     "  kc__t->kc__item = kc__saved;\n"
                     "  return kc__r;\n}\n");
  } else {
    /* the arguments as locals: the loop sees them invariant */
    for (uint32_t i = 0; i < n; i++)
      kc__sb_printf(out, "  %s kc__v%u = kc__x->kc__v%u;\n", tu->params[i].type, i, i);
    /* the item's ids in its struct only where a helper may read them, or
     * the kernel itself (kc__nar 0) */
    const char *store = "kc__w.kc__lid[0] = kc__l; kc__w.kc__lid[1] = kc__y; kc__w.kc__lid[2] = kc__z;";
    kc__sb_printf(
        out,
        "  (void)kc__x;\n"
        "  kc__t->kc__item = &kc__w; /* for functions other than the kernel */\n"
        "  if (kc__nar) {\n"
        "    const int kc__G0 = (int)(kc__gid[0] * kc__b[0]), kc__G1 = (int)(kc__gid[1] * kc__b[1]),\n"
        "              kc__G2 = (int)(kc__gid[2] * kc__b[2]);\n"
        "    /* the bounds as locals: a store of the kernel's through an int or\n"
        "       unsigned pointer may alias kc__b, and a bound read again after\n"
        "       it leaves the loop's trip count unknown (not vectorized) */\n"
        "    const int kc__B0 = (int)kc__b[0], kc__B1 = (int)kc__b[1], kc__B2 = (int)kc__b[2];\n"
        "    for (int kc__z = 0; kc__z < kc__B2; kc__z++)\n"
        "      for (int kc__y = 0; kc__y < kc__B1; kc__y++)\n"
        "        KC__ROW for (int kc__l = 0; kc__l < kc__B0; kc__l++) {\n"
        "          %s\n"
        "          const struct kc__ids kc__i = {1, kc__l, kc__y, kc__z, kc__G0 + kc__l, kc__G1 + kc__y,\n"
        "                                        kc__G2 + kc__z};\n"
        "          %s(&kc__w, kc__i",
        ids_out ? store : "", tu->entry);
    for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", kc__v%u", i);
    kc__sb_printf(out,
                  ");\n"
                  "        }\n"
                  "  } else\n"
                  "    for (unsigned kc__z = 0; kc__z < kc__b[2]; kc__z++)\n"
                  "      for (unsigned kc__y = 0; kc__y < kc__b[1]; kc__y++)\n"
                  "        for (unsigned kc__l = 0; kc__l < kc__b[0]; kc__l++) {\n"
                  "          %s\n"
                  "          kc__wide(&kc__w, kc__id",
                  store);
    for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", kc__v%u", i);
    kc__sb_puts(out, ");\n        }\n"
                     "  kc__t->kc__item = kc__saved;\n"
                     "  return 0;\n}\n");
  }
  kc__sb_puts(out, "__attribute__((visibility(\"default\"))) int kc__group(const void *kc__x, const unsigned "
                   "*kc__gid, const unsigned *kc__b, const unsigned *kc__ng) {\n"
                   "  return kc__group_in(kc__x, kc__gid, kc__b, kc__ng);\n}\n");
}

/* kc__grid (every group of a launch: here, or on the pool) and kc__run. */
static void emit_grid(const kc__tu *tu, kc__sb *out) {
  uint32_t n = tu->nparams;
  /* kc__u: unused, so that both callers pass l, grid and block on in the
   * registers they arrived in; KC__NOIPA keeps the parameters as written
   * (gcc would otherwise clone the function without the unused ones) */
  kc__sb_puts(out, "#if defined(__GNUC__) && !defined(__clang__) && !defined(__TINYC__)\n"
                   "#define KC__NOIPA __attribute__((noipa))\n"
                   "#else\n"
                   "#define KC__NOIPA __attribute__((noinline))\n"
                   "#endif\n"
                   "/* the pool (exec.c), set by kcache when it loads the object */\n"
                   "__attribute__((visibility(\"default\"))) int (*kc__par)(void *, const void *, "
                   "const unsigned *, const unsigned *);\n"
                   "KC__NOIPA static int kc__grid(void *kc__l, const void *kc__u, "
                   "const unsigned *kc__g, const unsigned *kc__b");
  for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", %s kc__v%u", tu->params[i].type, i);
  kc__sb_puts(
      out,
      ") {\n"
      "  (void)kc__u;\n"
      "  if (!(kc__g && kc__b && kc__g[0] && kc__g[1] && kc__g[2] && kc__b[0] && kc__b[1] && kc__b[2]))\n"
      "    return kc__on_bad_dims ? kc__on_bad_dims(kc__l, kc__g, kc__b) : 1;\n"
      "  struct kc__a kc__x = {");
  for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, "%skc__v%u", i ? ", " : "", i);
  if (!n) kc__sb_puts(out, "0");
  kc__sb_puts(out, "};\n"
                   "  static const unsigned kc__g0[3] = {0, 0, 0};\n"
                   "  if ((kc__g[0] | kc__g[1] | kc__g[2]) == 1 && !KC__COPIES) return kc__group_in(&kc__x, "
                   "kc__g0, kc__b, kc__g);\n"
                   "  if (kc__par) return kc__par(kc__l, &kc__x, kc__g, kc__b);\n"
                   "  unsigned kc__gid[3];\n"
                   "  for (kc__gid[2] = 0; kc__gid[2] < kc__g[2]; kc__gid[2]++)\n"
                   "    for (kc__gid[1] = 0; kc__gid[1] < kc__g[1]; kc__gid[1]++)\n"
                   "      for (kc__gid[0] = 0; kc__gid[0] < kc__g[0]; kc__gid[0]++) {\n"
                   "        int kc__r = kc__group_in(&kc__x, kc__gid, kc__b, kc__g);\n"
                   "        if (kc__r) return kc__r;\n"
                   "      }\n"
                   "  return 0;\n}\n");

  kc__sb_puts(out, "__attribute__((visibility(\"default\"))) int kc__run(void *kc__l, void *const *kc__a, "
                   "const unsigned *kc__g, const unsigned *kc__b) {\n"
                   "  return kc__grid(kc__l, kc__a, kc__g, kc__b");
  for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", *(%s*)kc__a[%u]", tu->params[i].type, i);
  kc__sb_puts(out, ");\n}\n");
}

/* kc__launch's checks and loads, one argument after another, each check
 * its own branch (kinds, sizes, a NULL pointer, a buffer's context): the
 * form for compilers and targets without AVX2 (tcc), and for one argument,
 * where it is no longer than the packed form. */
static void emit_launch_chain(const kc__tu *tu, kc__sb *out) {
  uint32_t n = tu->nparams;
  for (uint32_t i = 0; i < n; i++) {
    const char *t = tu->params[i].type;
    kc__sb_printf(out, "  const void *kc__p%u = kc__x[%u].kc__p;\n", i, i);
    if (tu->params[i].is_buffer)
      kc__sb_printf(out,
                    "  if (kc__x[%u].kc__sig != KC__SIG_BUFFER || !kc__p%u ||\n"
                    "      ((const struct kc__buf *)kc__p%u)->kc__ctx != kc__c) goto kc__bad;\n"
                    "  %s kc__v%u = *(%s const *)&((const struct kc__buf *)kc__p%u)->kc__h;\n",
                    i, i, i, t, i, t, i);
    else
      kc__sb_printf(out,
                    "  if (kc__x[%u].kc__sig != KC__SIG_SCALAR(sizeof(%s)) || !kc__p%u) goto kc__bad;\n"
                    "  %s kc__v%u = *(%s const *)kc__p%u;\n",
                    i, t, i, t, i, t, i);
  }
}

/* The signature of argument i as the packed check expects it. */
static void emit_sig(const kc__tu *tu, uint32_t i, kc__sb *out) {
  if (tu->params[i].is_buffer) kc__sb_puts(out, "(long long)KC__SIG_BUFFER");
  else kc__sb_printf(out, "(long long)KC__SIG_SCALAR(sizeof(%s))", tu->params[i].type);
}

/* kc__launch's checks packed (n >= 2, AVX2): the kc_args read two at a
 * time as 32-byte vectors of {pointer, size | kind << 32} pairs and
 * compared in one go against the kernel's packed signature, whose pointer
 * lanes are 0; a lane that compares equal is a good signature or a NULL
 * pointer, so after flipping the signature lanes (kc__P) every lane of a
 * good pair is 0, and one vptest of the OR of all pairs checks every kind,
 * size and pointer with one branch. An odd count's last vector is the last
 * two arguments (the one before it checked twice: never a read past the
 * array). What is left per argument is each buffer's context (a load and a
 * compare that the pair cannot hold); the values are loaded after every
 * check. Exactly the chain's conditions: a launch that fails here fails
 * there, with kc__bad's message. The empty asm keeps gcc from turning the
 * flip into a blend of two constants. */
static void emit_launch_packed(const kc__tu *tu, kc__sb *out) {
  uint32_t n = tu->nparams, m = (n + 1) / 2;
  kc__sb_puts(out, "  static const kc__v4 kc__P = {0, -1, 0, -1};\n");
  for (uint32_t j = 0; j < m; j++) {
    uint32_t a = 2 * j < n - 1 ? 2 * j : n - 2; /* the pair's first argument */
    kc__sb_printf(out, "  static const kc__v4 kc__E%u = {0, ", j);
    emit_sig(tu, a, out);
    kc__sb_puts(out, ", 0, ");
    emit_sig(tu, a + 1, out);
    kc__sb_printf(out,
                  "};\n"
                  "  kc__v4 kc__a%u;\n"
                  "  __builtin_memcpy(&kc__a%u, kc__x + %u, sizeof kc__a%u);\n"
                  "  kc__v4 kc__c%u = kc__a%u == kc__E%u;\n"
                  "  __asm__(\"\" : \"+x\"(kc__c%u));\n",
                  j, j, a, j, j, j, j, j);
  }
  kc__sb_puts(out, "  kc__v4 kc__d = ");
  for (uint32_t j = 0; j < m; j++) kc__sb_printf(out, "%s(kc__c%u ^ kc__P)", j ? " | " : "", j);
  kc__sb_puts(out, ";\n  if (!__builtin_ia32_ptestz256(kc__d, kc__d)) goto kc__bad;\n");
  for (uint32_t i = 0; i < n; i++) {
    kc__sb_printf(out, "  const void *kc__p%u = kc__x[%u].kc__p;\n", i, i);
    if (tu->params[i].is_buffer)
      kc__sb_printf(out, "  if (((const struct kc__buf *)kc__p%u)->kc__ctx != kc__c) goto kc__bad;\n", i);
  }
  for (uint32_t i = 0; i < n; i++) {
    const char *t = tu->params[i].type;
    if (tu->params[i].is_buffer)
      kc__sb_printf(out, "  %s kc__v%u = *(%s const *)&((const struct kc__buf *)kc__p%u)->kc__h;\n", t, i, t,
                    i);
    else kc__sb_printf(out, "  %s kc__v%u = *(%s const *)kc__p%u;\n", t, i, t, i);
  }
}

/* kc__launch, which checks kc_launch's own arguments, and its cold
 * mismatch report kc__bad. */
static void emit_launch(const kc__tu *tu, kc__sb *out) {
  uint32_t n = tu->nparams;
  /* the mismatch report takes kc__launch's own parameters: a plain jump */
  kc__sb_puts(out,
              "KC__NOIPA __attribute__((cold)) static int kc__bad(void *kc__l, const void *kc__c, "
              "const unsigned *kc__g, const unsigned *kc__b, const struct kc__arg *kc__x, unsigned kc__n) {\n"
              "  (void)kc__g; (void)kc__b;\n"
              "  return kc__on_bad_args ? kc__on_bad_args(kc__l, kc__c, kc__x, kc__n) : 1;\n}\n");
  if (n >= 2)
    kc__sb_puts(out, "#if defined(__AVX2__) && defined(__GNUC__) && !defined(__TINYC__)\n"
                     "#define KC__PACKED 1\n"
                     "typedef long long kc__v4 __attribute__((vector_size(32)));\n"
                     "#endif\n");
  kc__sb_puts(
      out, "__attribute__((visibility(\"default\"))) int kc__launch(void *kc__l, const void *kc__c, "
           "const unsigned *kc__g, const unsigned *kc__b, const struct kc__arg *kc__x, unsigned kc__n) {\n");
  if (!n) {
    kc__sb_puts(out, "  (void)kc__c; (void)kc__x;\n  if (kc__n) goto kc__bad;\n");
  } else {
    kc__sb_printf(out, "  if (kc__n != %uu || !kc__x) goto kc__bad;\n", n);
    if (n >= 2) {
      kc__sb_puts(out, "#ifdef KC__PACKED\n");
      emit_launch_packed(tu, out);
      kc__sb_puts(out, "#else\n");
    }
    emit_launch_chain(tu, out);
    if (n >= 2) kc__sb_puts(out, "#endif\n");
  }
  kc__sb_puts(out, "  return kc__grid(kc__l, kc__c, kc__g, kc__b");
  for (uint32_t i = 0; i < n; i++) kc__sb_printf(out, ", kc__v%u", i);
  kc__sb_puts(out, ");\nkc__bad:\n"
                   "  return kc__bad(kc__l, kc__c, kc__g, kc__b, kc__x, kc__n);\n}\n");
}

kc_status host_epilogue(void *state, const kc__tu *tu, kc__sb *out) {
  const kc__bsvc *sv = ((host_state *)state)->sv;
  const char *lp = local_pointer(tu);
  if (lp) {
    size_t n = 0;
    while (lp + n < tu->text + tu->len && n < 60 && !strchr(";=),\n", lp[n])) n++;
    return kc__bs_err(sv, KC_ECOMPILE,
                      "'%s': KC_LOCAL on a pointer (`%.*s`) is not supported by the host backend, where "
                      "KC_LOCAL makes one array for a work group: declare the KC_LOCAL array and index it, "
                      "or point into it with a plain pointer (a KC_LOCAL pointer parameter is OpenCL's: "
                      "on the host, kc_scratch() is the group's scratch area)",
                      tu->entry, (int)n, lp);
  }
  /* KC_LOCAL arrays are static: a copy of the object for each thread, also
   * where a header on disk or a compile option may declare one through a
   * macro. A kc_barrier() that only such a macro shows is refused when the
   * object is loaded (loader.c: it calls kc__barrier_fn without
   * kc__fibers). */
  const host_state *hs = state;
  bool hidden = host_includes_from_disk(tu) || options_hide_macros(hs->compile_options) ||
                options_hide_macros(hs->opt_flags);
  bool fibers = mentions(tu, "kc_barrier"), local = mentions(tu, "KC_LOCAL"), copies = local || hidden;
  if (copies && !local)
    kc__log_to(sv->log, KC_LOG_DEBUG,
               "host: '%s' loads a copy of its object for each thread: a header on disk or a compile "
               "option may declare KC_LOCAL arrays",
               tu->entry);
  /* (tu->text is out's buffer: read before anything is appended to out,
   * which may move it) */
  kc__sb split;
  kc__sb_init(&split, &sv->heap);
  bool is_split = false, int_ids = false;
  if (fibers) {
    /* with barriers: split at them where that is certain, else fibers */
    const char *why = NULL;
    unsigned nbar = 0;
    if (hidden) /* macros kcache cannot read: the split would not see their jumps, writes or barriers */
      why = "an #include of a header on disk, or compile options that define macros, which kcache does not "
            "read";
    else is_split = host_split_emit(sv, tu, &split, &why, &nbar, &int_ids);
    /* out of memory: no fibers instead, a unit no compile with memory
     * makes (it would be stored under a key of its own) */
    if (split.failed || (!is_split && why && !strcmp(why, "out of memory"))) {
      kc__sb_free(&split);
      return kc__bs_err(sv, KC_ENOMEM, "out of memory generating the code of '%s'", tu->entry);
    }
    if (is_split)
      kc__log_to(sv->log, KC_LOG_DEBUG,
                 "host: '%s' runs its work groups as loops over their items, split at %u barrier%s",
                 tu->entry, nbar, nbar == 1 ? "" : "s");
    else
      kc__log_to(sv->log, KC_LOG_DEBUG, "host: '%s' runs its work items as fibers at kc_barrier(): %s",
                 tu->entry, why ? why : "?");
  }
  int ids_out = fibers ? 0 : host_ids_outside(sv, tu);
  if (ids_out < 0) {
    kc__sb_free(&split);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory generating the code of '%s'", tu->entry);
  }
  kc__sb_printf(out, "#undef %s\n#define KC__COPIES %d\n", tu->entry, copies);
  emit_group(tu, fibers, is_split ? &split : NULL, int_ids, ids_out, out);
  kc__sb_free(&split);
  emit_grid(tu, out);
  emit_launch(tu, out);
  kc__sb_printf(out,
                "__attribute__((visibility(\"default\"))) const unsigned kc__nargs = %u;\n"
                "/* 2: KC_LOCAL arrays are static, so one copy of the object for each thread that runs\n"
                "   groups at once; 1: one for all (never 0: read-only data, not bss) */\n"
                "__attribute__((visibility(\"default\"))) const unsigned kc__copies = %u;\n",
                tu->nparams, copies ? 2u : 1u);
  kc__probe_emit(out, tu, KC__PROBE_C); /* the compiler's sizes and alignments */
  return out->failed ? kc__bs_err(((host_state *)state)->sv, KC_ENOMEM,
                                  "out of memory building the source of '%s'", tu->entry)
                     : KC_OK;
}
