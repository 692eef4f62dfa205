/* SPDX-License-Identifier: MIT */
/*
 * loader.c -- the host backend's own loader of the relocatable objects
 * (ELF64 x86-64, `cc -c -fPIC`) its compiler makes. glibc's dlopen costs a
 * link and an unlink time that grows with every object already loaded, and
 * 3 to 5 mappings an object against the process's limit; this loader puts
 * an object's sections into blocks of the runtime's regions (arena.c):
 *   code block  text and read-only data, then a GOT (one slot per symbol
 *               reached through it) and PLT stubs (`jmp *slot(%rip)`) for
 *               the functions the object calls outside itself;
 *   data block  writable data and bss (zeroed), common symbols.
 * It applies the relocations itself and resolves external symbols by name:
 * a few helpers of its own (tcc's arithmetic helpers), then the C math
 * library with its dependencies (libm.so.6, which brings libc), then the
 * whole process (RTLD_DEFAULT, as dlopen's RTLD_LOCAL objects do), then
 * libgcc_s (gcc's arithmetic helpers).
 *
 * host_obj_plan checks a whole object without loading it: every offset,
 * index and string inside the bytes, every relocation of a kind it applies,
 * every external symbol found. A compile runs it (its failures are the
 * object's, remembered like a compile error); a link runs it again (on
 * bytes from the disk store too), then takes blocks and loads. Not
 * supported, with a message saying so: thread-local storage, constructors,
 * absolute 32-bit relocations (code that is not position-independent).
 * Unwind tables (.eh_frame) are not loaded.
 */
#include "backends/host/host.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <string.h>

/* --------------------------------------------------------- own helpers */

/* tcc calls these for conversions it does not inline; its libtcc1.a is
 * not linked into a relocatable object. */
static long long kc__h_fixdfdi(double x) { return (long long)x; }
static long long kc__h_fixsfdi(float x) { return (long long)x; }
static long long kc__h_fixxfdi(long double x) { return (long long)x; }
static unsigned long long kc__h_fixunsdfdi(double x) { return (unsigned long long)x; }
static unsigned long long kc__h_fixunssfdi(float x) { return (unsigned long long)x; }
static unsigned long long kc__h_fixunsxfdi(long double x) { return (unsigned long long)x; }
static double kc__h_floatundidf(unsigned long long x) { return (double)x; }
static float kc__h_floatundisf(unsigned long long x) { return (float)x; }
static long double kc__h_floatundixf(unsigned long long x) { return (long double)x; }

static const struct {
  const char *name;
  void (*fn)(void);
} own_helpers[] = {
    {"__fixdfdi", (void (*)(void))kc__h_fixdfdi},
    {"__fixsfdi", (void (*)(void))kc__h_fixsfdi},
    {"__fixxfdi", (void (*)(void))kc__h_fixxfdi},
    {"__fixunsdfdi", (void (*)(void))kc__h_fixunsdfdi},
    {"__fixunssfdi", (void (*)(void))kc__h_fixunssfdi},
    {"__fixunsxfdi", (void (*)(void))kc__h_fixunsxfdi},
    {"__floatundidf", (void (*)(void))kc__h_floatundidf},
    {"__floatundisf", (void (*)(void))kc__h_floatundisf},
    {"__floatundixf", (void (*)(void))kc__h_floatundixf},
};

static void *resolve(const host_state *s, const char *name) {
  for (size_t i = 0; i < sizeof own_helpers / sizeof *own_helpers; i++)
    if (!strcmp(own_helpers[i].name, name)) {
      void *p;
      memcpy(&p, &own_helpers[i].fn, sizeof p); /* a function's address as data */
      return p;
    }
  void *p = s->libm ? dlsym(s->libm, name) : NULL;
  if (!p) p = dlsym(RTLD_DEFAULT, name);
  if (!p && s->libgcc) p = dlsym(s->libgcc, name);
  return p;
}

/* --------------------------------------------------------------- plan */

enum { SEC_NONE, SEC_CODE, SEC_DATA };
#define HOST_OBJECT_MAX ((size_t)256 << 20) /* code, data: each at most (and every section) */

typedef struct host_plan {
  const host_state *s;
  kc_status st; /* of the object's faults */
  const char *what; /* what failed, for messages */
  const unsigned char *img;
  size_t size;
  const Elf64_Shdr *sh;
  unsigned nsh;
  const Elf64_Sym *sym;
  unsigned nsym;
  const char *str;
  size_t strsz;
  unsigned char *kind; /* per section: SEC_* */
  size_t *off; /* per section: offset in its block; per common symbol: in the data block */
  uint32_t *got; /* per symbol: GOT slot + 1, or 0 */
  uint32_t *plt; /* per symbol: PLT stub + 1, or 0 */
  void **ext; /* per undefined symbol: its address */
  size_t code_len, data_len, code_align, data_align, got_off, plt_off, ngot, nplt;
  size_t *coff; /* per symbol: offset of a common symbol in the data block */
  bool barrier_used; /* a loaded section refers to kc__barrier_fn: the kernel calls kc_barrier() */
} host_plan;

/* A fault of the object: "<what>: <msg>[: <detail>]", with the plan's status. */
static kc_status bad(const host_plan *p, const char *msg, const char *detail) {
  return kc__bs_err(p->s->sv, p->st, "%s: %s%s%s", p->what, msg, detail ? ": " : "", detail ? detail : "");
}

static const char *sym_name(const host_plan *p, const Elf64_Sym *y) {
  return y->st_name < p->strsz ? p->str + y->st_name : "?";
}

/* The ELF header, the section table, the symbol table and its strings. */
static kc_status plan_tables(host_plan *p) {
  Elf64_Ehdr eh;
  const Elf64_Ehdr *e = &eh;
  if (p->size < sizeof eh) return bad(p, "not an ELF64 x86-64 relocatable object", NULL);
  memcpy(&eh, p->img, sizeof eh);
  if (memcmp(e->e_ident, ELFMAG, SELFMAG) || e->e_ident[EI_CLASS] != ELFCLASS64 ||
      e->e_ident[EI_DATA] != ELFDATA2LSB || e->e_type != ET_REL || e->e_machine != EM_X86_64)
    return bad(p, "not an ELF64 x86-64 relocatable object", NULL);
  if (e->e_shentsize != sizeof(Elf64_Shdr) || !e->e_shnum || e->e_shoff > p->size ||
      (uint64_t)e->e_shnum * sizeof(Elf64_Shdr) > p->size - e->e_shoff)
    return bad(p, "truncated", "the section table lies outside the object");
  /* the tables are copied: the file need not align them (tcc does not) */
  p->nsh = e->e_shnum;
  Elf64_Shdr *sh = kc__bs_alloc(p->s->sv, p->nsh * sizeof *sh);
  if (!sh) return kc__bs_err(p->s->sv, KC_ENOMEM, "out of memory loading an object");
  memcpy(sh, p->img + e->e_shoff, p->nsh * sizeof *sh);
  p->sh = sh;
  for (unsigned i = 0; i < p->nsh; i++) {
    const Elf64_Shdr *h = &p->sh[i];
    if (h->sh_type != SHT_NOBITS && h->sh_type != SHT_NULL &&
        (h->sh_offset > p->size || h->sh_size > p->size - h->sh_offset))
      return bad(p, "truncated", "a section lies outside the object");
  }
  for (unsigned i = 0; i < p->nsh; i++) {
    const Elf64_Shdr *h = &p->sh[i];
    if (h->sh_type == SHT_SYMTAB) {
      if (p->sym || h->sh_entsize != sizeof(Elf64_Sym) || h->sh_link >= p->nsh || h->sh_size > (1u << 28))
        return bad(p, "damaged", "its symbol table is not one the loader reads");
      p->nsym = (unsigned)(h->sh_size / sizeof(Elf64_Sym));
      Elf64_Sym *sym = kc__bs_alloc(p->s->sv, (p->nsym ? p->nsym : 1) * sizeof *sym);
      if (!sym) return kc__bs_err(p->s->sv, KC_ENOMEM, "out of memory loading an object");
      memcpy(sym, p->img + h->sh_offset, p->nsym * sizeof *sym);
      p->sym = sym;
      const Elf64_Shdr *t = &p->sh[h->sh_link]; /* in the object: checked above */
      if (t->sh_type != SHT_STRTAB || !t->sh_size || p->img[t->sh_offset + t->sh_size - 1])
        return bad(p, "damaged", "its symbol names are not a string table");
      p->str = (const char *)p->img + t->sh_offset;
      p->strsz = t->sh_size;
    }
  }
  if (!p->sym) return bad(p, "damaged", "it has no symbol table");
  return KC_OK;
}

/* Which sections are loaded, and where in their block. */
static kc_status plan_sections(host_plan *p) {
  p->code_align = p->data_align = HOST_UNIT;
  for (unsigned i = 0; i < p->nsh; i++) {
    const Elf64_Shdr *h = &p->sh[i];
    if (h->sh_flags & SHF_TLS)
      return bad(p, "the object uses thread-local storage, which the host backend does not load", NULL);
    if (h->sh_type == SHT_INIT_ARRAY || h->sh_type == SHT_FINI_ARRAY || h->sh_type == SHT_PREINIT_ARRAY)
      return bad(p, "the object has constructors or destructors, which the host backend does not run", NULL);
    if (!(h->sh_flags & SHF_ALLOC) || (h->sh_type != SHT_PROGBITS && h->sh_type != SHT_NOBITS)) continue;
    size_t align = h->sh_addralign ? h->sh_addralign : 1;
    if (align & (align - 1) || align > 4096) return bad(p, "damaged", "a section's alignment is unusable");
    if (h->sh_size > HOST_OBJECT_MAX) return bad(p, "a section is larger than 256 MiB", NULL);
    bool data = h->sh_flags & SHF_WRITE;
    size_t *len = data ? &p->data_len : &p->code_len, *al = data ? &p->data_align : &p->code_align;
    if (align > *al) *al = align;
    p->kind[i] = data ? SEC_DATA : SEC_CODE;
    p->off[i] = (*len + align - 1) & ~(align - 1);
    *len = p->off[i] + h->sh_size;
  }
  return KC_OK;
}

/* Every symbol's name and section; common symbols get their place. */
static kc_status plan_symbols(host_plan *p) {
  for (unsigned i = 1; i < p->nsym; i++) {
    const Elf64_Sym *y = &p->sym[i];
    if (y->st_name >= p->strsz) return bad(p, "damaged", "a symbol's name lies outside its table");
    if (ELF64_ST_TYPE(y->st_info) == STT_TLS)
      return bad(p, "the object uses thread-local storage, which the host backend does not load", NULL);
    if (y->st_shndx == SHN_COMMON) {
      size_t align = y->st_value ? y->st_value : 1;
      if (align & (align - 1) || align > 4096 || y->st_size > HOST_OBJECT_MAX)
        return bad(p, "damaged", "a common symbol is unusable");
      if (align > p->data_align) p->data_align = align;
      p->coff[i] = (p->data_len + align - 1) & ~(align - 1);
      p->data_len = p->coff[i] + y->st_size;
    } else if (y->st_shndx != SHN_UNDEF && y->st_shndx != SHN_ABS && y->st_shndx >= p->nsh) {
      return bad(p, "damaged", "a symbol's section is not in the object");
    }
  }
  return KC_OK;
}

/* How many bytes relocation type t writes; 0: not one the loader applies. */
static unsigned reloc_width(unsigned t) {
  switch (t) {
  case R_X86_64_64:
  case R_X86_64_PC64:
  case R_X86_64_GOTOFF64:
  case R_X86_64_GOTPC64: return 8;
  case R_X86_64_PC32:
  case R_X86_64_PLT32:
  case R_X86_64_GOTPCREL:
  case R_X86_64_GOTPCRELX:
  case R_X86_64_REX_GOTPCRELX:
  case R_X86_64_GOTPC32: return 4;
  default: return 0;
  }
}

static bool is_got(unsigned t) {
  return t == R_X86_64_GOTPCREL || t == R_X86_64_GOTPCRELX || t == R_X86_64_REX_GOTPCRELX;
}

/* One relocation: in bounds, of a kind applied, against a symbol there;
 * notes the GOT slots and PLT stubs it needs and resolves what is external. */
static kc_status plan_one(host_plan *p, const Elf64_Rela *r, const Elf64_Shdr *target) {
  unsigned t = ELF64_R_TYPE(r->r_info), i = ELF64_R_SYM(r->r_info);
  if (t == R_X86_64_NONE) return KC_OK;
  unsigned w = reloc_width(t);
  char why[256];
  if (!w) {
    snprintf(why, sizeof why, "relocation type %u%s is not one the host backend's loader applies", t,
             t == R_X86_64_32 || t == R_X86_64_32S ? " (absolute 32-bit: not position-independent code)"
                                                   : "");
    return bad(p, why, NULL);
  }
  if (i >= p->nsym || !i) return bad(p, "damaged", "a relocation names no symbol of the object");
  if (r->r_offset > target->sh_size || w > target->sh_size - r->r_offset)
    return bad(p, "damaged", "a relocation lies outside its section");
  const Elf64_Sym *y = &p->sym[i];
  bool undef = y->st_shndx == SHN_UNDEF;
  if (!strcmp(sym_name(p, y), "kc__barrier_fn")) p->barrier_used = true;
  if (!undef && y->st_shndx < p->nsh && p->kind[y->st_shndx] == SEC_NONE)
    return bad(p, "damaged", "a relocation refers to a section that is not loaded");
  if (undef && !p->ext[i]) {
    p->ext[i] = resolve(p->s, sym_name(p, y));
    if (!p->ext[i] && ELF64_ST_BIND(y->st_info) != STB_WEAK) {
      snprintf(why, sizeof why, "undefined symbol '%.100s' (not in the C library, libm or the process)",
               sym_name(p, y));
      return bad(p, why, NULL);
    }
  }
  if (is_got(t) && !p->got[i]) p->got[i] = (uint32_t)++p->ngot;
  if (undef && (t == R_X86_64_PLT32 || t == R_X86_64_PC32)) {
    if (t == R_X86_64_PC32 && ELF64_ST_TYPE(y->st_info) == STT_OBJECT) {
      snprintf(why, sizeof why, "a direct reference to the external data '%.100s' (compile with -fPIC)",
               sym_name(p, y));
      return bad(p, why, NULL);
    }
    if (!p->plt[i]) {
      p->plt[i] = (uint32_t)++p->nplt;
      if (!p->got[i]) p->got[i] = (uint32_t)++p->ngot;
    }
  }
  return KC_OK;
}

static kc_status plan_relocs(host_plan *p) {
  for (unsigned k = 0; k < p->nsh; k++) {
    const Elf64_Shdr *h = &p->sh[k];
    if (h->sh_type == SHT_REL) return bad(p, "damaged", "REL relocations (without addends) on x86-64");
    if (h->sh_type != SHT_RELA) continue;
    if (h->sh_info >= p->nsh || p->kind[h->sh_info] == SEC_NONE) continue; /* unwind tables, debug info */
    if (h->sh_entsize != sizeof(Elf64_Rela) || h->sh_link >= p->nsh ||
        p->sh[h->sh_link].sh_type != SHT_SYMTAB)
      return bad(p, "damaged", "a relocation table is not one the loader reads");
    for (size_t j = 0; j < h->sh_size / sizeof(Elf64_Rela); j++) {
      Elf64_Rela r; /* copied: the file need not align it */
      memcpy(&r, p->img + h->sh_offset + j * sizeof r, sizeof r);
      kc_status e = plan_one(p, &r, &p->sh[h->sh_info]);
      if (e) return e;
    }
  }
  if (p->code_len > HOST_OBJECT_MAX || p->data_len > HOST_OBJECT_MAX)
    return bad(p, "its code or its data is larger than 256 MiB", NULL);
  p->got_off = (p->code_len + 7) & ~(size_t)7;
  p->plt_off = p->got_off + 8 * p->ngot;
  p->code_len = p->plt_off + 8 * p->nplt;
  return KC_OK;
}

void host_plan_free(const host_state *s, host_plan *p) {
  if (p) {
    kc__bs_free(s->sv, p->kind);
    kc__bs_free(s->sv, (void *)p->sh);
    kc__bs_free(s->sv, (void *)p->sym);
  }
  kc__bs_free(s->sv, p);
}

static unsigned find_global(const host_plan *p, const char *name);

/* Checks bytes as an object to load; st: the status of its failures
 * (KC_ECOMPILE for a compile's, KC_ELINK for a link's). KC_ENOMEM: out of
 * memory (not the object's fault). */
kc_status host_plan_make(const host_state *s, const void *bytes, size_t size, kc_status st, const char *what,
                         host_plan **out) {
  *out = NULL;
  host_plan *p = kc__bs_calloc(s->sv, sizeof *p);
  if (!p) return kc__bs_err(s->sv, KC_ENOMEM, "out of memory loading an object");
  p->s = s;
  p->st = st;
  p->what = what;
  p->img = bytes;
  p->size = size;
  kc_status e = plan_tables(p);
  if (e) {
    host_plan_free(s, p);
    return e;
  }
  /* one allocation for the tables per section and per symbol */
  size_t n =
      p->nsh * (sizeof *p->off + 1) + p->nsym * (2 * sizeof(uint32_t) + sizeof(void *) + sizeof(size_t));
  char *m = kc__bs_calloc(s->sv, n + 64);
  if (!m) {
    host_plan_free(s, p);
    return kc__bs_err(s->sv, KC_ENOMEM, "out of memory loading an object");
  }
  p->kind = (unsigned char *)m; /* freed through kind */
  char *q = m + ((p->nsh + 7) & ~(size_t)7);
  p->off = (size_t *)q;
  q += p->nsh * sizeof *p->off;
  p->coff = (size_t *)q;
  q += p->nsym * sizeof *p->coff;
  p->ext = (void **)q;
  q += p->nsym * sizeof *p->ext;
  p->got = (uint32_t *)q;
  p->plt = p->got + p->nsym;
  e = plan_sections(p);
  if (!e) e = plan_symbols(p);
  if (!e) e = plan_relocs(p);
  /* A kernel's unit has kc__fibers where kcache saw kc_barrier() in its
   * text, and runs its groups with barriers then. A call the text does not
   * show (a macro from a header on disk) would run as a no-op: refused. */
  if (!e && p->barrier_used && !find_global(p, "kc__fibers"))
    e = bad(p,
            "the kernel calls kc_barrier() where kcache does not see it (a macro from a header on disk?), "
            "so its work items would not wait at it on the host backend",
            "write kc_barrier() in the kernel's text or in a header defined with kc_define");
  if (e) {
    host_plan_free(s, p);
    return e;
  }
  *out = p;
  return KC_OK;
}

/* The index of the defined global symbol `name`, or 0. */
static unsigned find_global(const host_plan *p, const char *name) {
  for (unsigned i = 1; i < p->nsym; i++) {
    const Elf64_Sym *y = &p->sym[i];
    if (ELF64_ST_BIND(y->st_info) != STB_LOCAL && y->st_shndx != SHN_UNDEF && !strcmp(sym_name(p, y), name))
      return i;
  }
  return 0;
}

/* The file bytes of global `name`: at least `need` of them in a section
 * with contents (zeros for one without: tcc puts a constant 0 in .bss);
 * NULL if not. */
const void *host_plan_bytes(const host_plan *p, const char *name, size_t need) {
  static const unsigned char zeros[4096];
  unsigned i = find_global(p, name);
  if (!i) return NULL;
  const Elf64_Sym *y = &p->sym[i];
  if (y->st_shndx >= p->nsh || p->kind[y->st_shndx] == SEC_NONE) return NULL;
  const Elf64_Shdr *h = &p->sh[y->st_shndx];
  if (y->st_value > h->sh_size || need > h->sh_size - y->st_value || y->st_size < need) return NULL;
  if (h->sh_type == SHT_NOBITS) return need <= sizeof zeros ? zeros : NULL;
  return p->img + h->sh_offset + y->st_value;
}

/* --------------------------------------------------------------- load */

typedef struct host_where {
  uintptr_t code, data; /* where the blocks' bytes run */
  char *code_wr, *data_wr; /* where they are written */
} host_where;

/* The run address of symbol i (NULL for a weak one not found). */
static uintptr_t sym_value(const host_plan *p, const host_where *w, unsigned i) {
  const Elf64_Sym *y = &p->sym[i];
  if (y->st_shndx == SHN_UNDEF) return (uintptr_t)p->ext[i];
  if (y->st_shndx == SHN_ABS) return (uintptr_t)y->st_value;
  if (y->st_shndx == SHN_COMMON) return w->data + p->coff[i];
  return (p->kind[y->st_shndx] == SEC_CODE ? w->code : w->data) + p->off[y->st_shndx] + y->st_value;
}

static void put(char *at, uint64_t v, unsigned width) {
  if (width == 8) memcpy(at, &v, 8);
  else {
    uint32_t v32 = (uint32_t)v;
    memcpy(at, &v32, 4);
  }
}

/* Applies one relocation that plan_one accepted. */
static kc_status apply_one(const host_state *s, const host_plan *p, const host_where *w, unsigned tsec,
                           const Elf64_Rela *r) {
  unsigned t = ELF64_R_TYPE(r->r_info), i = ELF64_R_SYM(r->r_info);
  if (t == R_X86_64_NONE) return KC_OK;
  bool code = p->kind[tsec] == SEC_CODE;
  uintptr_t P = (code ? w->code : w->data) + p->off[tsec] + r->r_offset;
  char *at = (code ? w->code_wr : w->data_wr) + p->off[tsec] + r->r_offset;
  uintptr_t got = w->code + p->got_off, S = sym_value(p, w, i);
  uint64_t A = (uint64_t)r->r_addend, v;
  if ((t == R_X86_64_PLT32 || t == R_X86_64_PC32) && p->plt[i])
    S = w->code + p->plt_off + 8 * (p->plt[i] - 1);
  if (is_got(t)) S = got + 8 * (p->got[i] - 1);
  switch (t) {
  case R_X86_64_64: v = S + A; break;
  case R_X86_64_GOTOFF64: v = S + A - got; break;
  case R_X86_64_GOTPC32:
  case R_X86_64_GOTPC64: v = got + A - P; break;
  default: v = S + A - P; break; /* PC32, PLT32, PC64, the GOTPCRELs */
  }
  unsigned width = reloc_width(t);
  if (width == 4 && (int64_t)v != (int32_t)v)
    return kc__bs_err(s->sv, KC_ELINK, "%s: a relocation against '%.100s' is out of range of its code",
                      p->what, sym_name(p, &p->sym[i]));
  put(at, v, width);
  return KC_OK;
}

/* The sections' bytes, the GOT, the PLT stubs, then every relocation. */
static kc_status fill(const host_state *s, const host_plan *p, const host_where *w, bool data_zero) {
  if (!data_zero) memset(w->data_wr, 0, p->data_len);
  for (unsigned i = 0; i < p->nsh; i++) {
    if (p->kind[i] == SEC_NONE) continue;
    char *to = (p->kind[i] == SEC_CODE ? w->code_wr : w->data_wr) + p->off[i];
    if (p->sh[i].sh_type == SHT_NOBITS) {
      if (p->kind[i] == SEC_CODE) memset(to, 0, p->sh[i].sh_size); /* the data block is zero already */
    } else memcpy(to, p->img + p->sh[i].sh_offset, p->sh[i].sh_size);
  }
  for (unsigned i = 1; i < p->nsym; i++) {
    if (p->got[i]) put(w->code_wr + p->got_off + 8 * (p->got[i] - 1), sym_value(p, w, i), 8);
    if (p->plt[i]) { /* jmp *slot(%rip); int3; int3 */
      size_t at = p->plt_off + 8 * (p->plt[i] - 1), slot = p->got_off + 8 * (p->got[i] - 1);
      int32_t disp = (int32_t)((int64_t)slot - (int64_t)(at + 6));
      unsigned char stub[8] = {0xff, 0x25, 0, 0, 0, 0, 0xcc, 0xcc};
      memcpy(stub + 2, &disp, 4);
      memcpy(w->code_wr + at, stub, 8);
    }
  }
  for (unsigned k = 0; k < p->nsh; k++) {
    const Elf64_Shdr *h = &p->sh[k];
    if (h->sh_type != SHT_RELA || h->sh_info >= p->nsh || p->kind[h->sh_info] == SEC_NONE) continue;
    for (size_t j = 0; j < h->sh_size / sizeof(Elf64_Rela); j++) {
      Elf64_Rela r;
      memcpy(&r, p->img + h->sh_offset + j * sizeof r, sizeof r);
      kc_status e = apply_one(s, p, w, h->sh_info, &r);
      if (e) return e;
    }
  }
  return KC_OK;
}

static uintptr_t align_up(uintptr_t v, size_t a) { return (v + a - 1) & ~(uintptr_t)(a - 1); }

kc_status host_plan_load(host_state *s, const host_plan *p, host_image *im) {
  size_t cpad = p->code_align - HOST_UNIT, dpad = p->data_len ? p->data_align - HOST_UNIT : 0;
  kc_status st = host_arena_take(s, p->code_len + cpad, p->data_len ? p->data_len + dpad : 0, &im->blk);
  if (st) return st;
  host_where w;
  w.code = align_up((uintptr_t)im->blk.code_run, p->code_align);
  w.code_wr = im->blk.code_wr + (w.code - (uintptr_t)im->blk.code_run);
  w.data = align_up((uintptr_t)im->blk.data, p->data_align);
  w.data_wr = (char *)w.data;
  st = fill(s, p, &w, im->blk.data_fresh);
  if (st) {
    host_arena_give(s, &im->blk);
    return st;
  }
  im->code = w.code;
  im->data = w.data;
  return KC_OK;
}

void *host_plan_addr(const host_plan *p, const host_image *im, const char *name, bool writable) {
  unsigned i = find_global(p, name);
  if (!i) return NULL;
  const Elf64_Sym *y = &p->sym[i];
  host_where w = {.code = im->code, .data = im->data};
  if (y->st_shndx == SHN_COMMON) /* in the data block, aligned as it says: plan_symbols placed it */
    return writable && y->st_size >= sizeof(void *) && !(sym_value(p, &w, i) & (sizeof(void *) - 1))
               ? (void *)sym_value(p, &w, i)
               : NULL;
  if (y->st_shndx == SHN_ABS || y->st_shndx >= p->nsh || p->kind[y->st_shndx] == SEC_NONE) return NULL;
  const Elf64_Shdr *h = &p->sh[y->st_shndx];
  /* a writable one: pointer-sized, in a data section; an entry point: in
   * executable code; either wholly inside its section */
  size_t need = writable ? sizeof(void *) : 1;
  if (writable ? p->kind[y->st_shndx] != SEC_DATA || y->st_size < need : !(h->sh_flags & SHF_EXECINSTR))
    return NULL;
  if (y->st_value > h->sh_size || need > h->sh_size - y->st_value) return NULL;
  uintptr_t at = sym_value(p, &w, i);
  return writable && (at & (sizeof(void *) - 1)) ? NULL : (void *)at; /* a hook is written as a pointer */
}

/* Loads an object into the runtime's regions and gives it its hooks: the
 * services' reports of bad dimensions and arguments, the thread's slot, the
 * pool, the fibers and the barrier (s->hooks: exec.c's). what starts the
 * messages of the object's faults (KC_ELINK). */
kc_status host_image_load(host_state *s, const void *bytes, size_t size, const char *what, host_image *im) {
  const kc__bsvc *sv = s->sv;
  memset(im, 0, sizeof *im);
  host_plan *p;
  kc_status st = host_plan_make(s, bytes, size, KC_ELINK, what, &p);
  if (st) return st;
  st = host_plan_load(s, p, im);
  if (st) {
    host_plan_free(s, p);
    return st;
  }
  typedef kc_status (*bad_dims_fn)(const kc__blinked *, const kc_dim3 *, const kc_dim3 *);
  typedef kc_status (*bad_args_fn)(const kc__blinked *, const kc_context *, const kc_arg *, uint32_t);
  typedef int (*par_fn)(void *, const void *, const unsigned *, const unsigned *);
  typedef int (*fibers_fn)(void *, unsigned, void (*)(void *, unsigned), void *);
  bad_dims_fn *on_bad_dims = host_plan_addr(p, im, "kc__on_bad_dims", true);
  bad_args_fn *on_bad_args = host_plan_addr(p, im, "kc__on_bad_args", true);
  par_fn *par = host_plan_addr(p, im, "kc__par", true);
  void (**barrier)(void) = host_plan_addr(p, im, "kc__barrier_fn", true);
  fibers_fn *fibers = host_plan_addr(p, im, "kc__fibers", true); /* only with barriers */
  void **hs = host_plan_addr(p, im, "kc__hs", true);
  typedef int (*split_bad_fn)(void *, unsigned, int);
  split_bad_fn *split_bad = host_plan_addr(p, im, "kc__split_bad", true); /* only when split */
  long *it_off = host_plan_addr(p, im, "kc__it_off", true);
  const void *copies = host_plan_bytes(p, "kc__copies", sizeof(unsigned)); /* (read-only data) */
  unsigned copies_v = 0; /* copied out: damaged bytes may put it anywhere */
  if (copies) memcpy(&copies_v, copies, sizeof copies_v);
  const void *nargs = host_plan_bytes(p, "kc__nargs", sizeof(unsigned));
  if (nargs) memcpy(&im->nargs, nargs, sizeof im->nargs);
  bool needs_copies = copies_v == 2;
  im->group = host_plan_addr(p, im, "kc__group", false);
  im->run = host_plan_addr(p, im, "kc__run", false);
  im->entry = host_plan_addr(p, im, "kc__launch", false);
  host_plan_free(s, p);
  if (!on_bad_dims || !on_bad_args || !par || !barrier || !it_off || !copies || !im->group || !im->run ||
      !im->entry || !nargs || im->nargs > KC_MAX_ARGS || (fibers != NULL) != (hs != NULL) ||
      (split_bad && !hs)) {
    host_arena_give(s, &im->blk);
    return kc__bs_err(sv, KC_ELINK, "%s lacks kcache's trampoline", what);
  }
  *on_bad_dims = sv->bad_dims;
  *on_bad_args = sv->bad_args;
  *par = s->hooks.par;
  *barrier = s->hooks.barrier;
  if (fibers) *fibers = s->hooks.fibers, *hs = s;
  if (split_bad) *split_bad = s->hooks.split_bad;
  *it_off = s->tp_off;
  im->needs_copies = needs_copies;
  return KC_OK;
}

void host_loader_open(host_state *s) {
  s->libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  s->libgcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
}

void host_loader_close(host_state *s) {
  if (s->libm) dlclose(s->libm);
  if (s->libgcc) dlclose(s->libgcc);
  s->libm = s->libgcc = NULL;
}
