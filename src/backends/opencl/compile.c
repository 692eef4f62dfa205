/* SPDX-License-Identifier: MIT */
/*
 * compile.c -- building a translation unit into a program binary: the
 * build, its log, the entry's check, the parameter probe's values, the
 * KC_LOCAL parameters and the binary (ocl_build_unit). The same function
 * runs in this process and in a compile helper (serve.c), so an artifact
 * and a failure's message and log are the same wherever it was built;
 * the backend's compile (ocl_compile, opencl.c) sends the unit where
 * helpers.c says and turns the result into the artifact and its signature.
 */
#include "backends/opencl/opencl.h"

#include <string.h>

char *ocl_build_log(const kc__bsvc *sv, cl_program prog, cl_device_id dev, kc__sb *log) {
  size_t n = 0;
  if (ocl.clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS || n == 0)
    return NULL;
  char *s = kc__bs_alloc(sv, n + 1);
  if (!s) return NULL;
  if (ocl.clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, s, NULL) != CL_SUCCESS) n = 0;
  s[n] = '\0';
  n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) s[--n] = '\0';
  if (log && n) {
    kc__sb_append(log, s, n);
    kc__sb_puts(log, "\n");
  }
  return s;
}

/* KC_LOCAL pointer parameters are sized per launch (KC_ARG_LOCAL): the
 * compiler's address qualifier says which pointers they are. Silent when
 * the platform keeps no argument info. */
static void ocl_local_params(cl_kernel k, const ocl_unit *u, uint8_t *local) {
  for (uint32_t i = 0; i < u->nparams; i++) {
    cl_kernel_arg_address_qualifier aq = 0;
    local[i] =
        u->is_buffer[i] &&
        ocl.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof aq, &aq, NULL) == CL_SUCCESS &&
        aq == CL_KERNEL_ARG_ADDRESS_LOCAL;
  }
}

/* Creates entry's kernel in prog and checks its parameter count. */
static kc_status ocl_check_entry(const kc__bsvc *sv, cl_program prog, const char *entry, uint32_t nparams,
                                 cl_kernel *out) {
  cl_int e;
  cl_kernel k = ocl.clCreateKernel(prog, entry, &e);
  if (!k) {
    if (e == CL_INVALID_KERNEL_NAME)
      return kc__bs_err(sv, KC_ECOMPILE,
                        "OpenCL program has no kernel named '%s' (declare it with KC_KERNEL void)", entry);
    return ocl_fail(sv, KC_ECOMPILE, "clCreateKernel", e);
  }
  cl_uint n = 0;
  e = ocl.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof n, &n, NULL);
  if (e == CL_SUCCESS && n != nparams) {
    ocl.clReleaseKernel(k);
    return kc__bs_err(sv, KC_ECOMPILE, "OpenCL kernel '%s' has %u parameters but kcache parsed %u", entry,
                      (unsigned)n, (unsigned)nparams);
  }
  *out = k;
  return KC_OK;
}

/* The program's one binary (it was built for one device). */
static kc_status ocl_binary(const kc__bsvc *sv, cl_program prog, const char *entry, ocl_result *r) {
  size_t bsize = 0;
  cl_int e = ocl.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bsize, &bsize, NULL);
  if (e != CL_SUCCESS) return ocl_fail(sv, KC_ECOMPILE, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)", e);
  if (bsize == 0)
    return kc__bs_err(sv, KC_ECOMPILE, "the OpenCL platform returned no program binary for kernel '%s'",
                      entry);
  unsigned char *bin = kc__bs_alloc(sv, bsize);
  if (!bin) return kc__bs_err(sv, KC_ENOMEM, "out of memory for a %zu-byte program binary", bsize);
  e = ocl.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
  if (e != CL_SUCCESS) {
    kc__bs_free(sv, bin);
    return ocl_fail(sv, KC_ECOMPILE, "clGetProgramInfo(CL_PROGRAM_BINARIES)", e);
  }
  r->bin = bin;
  r->size = bsize;
  return KC_OK;
}

/* PoCL (3.x, Debian 12's) names a directory of its kernel cache after the
 * kernel, and aborts the process at the kernel's first launch when the
 * name is too long for a directory (255 bytes, with its suffixes): such a
 * name is refused before PoCL sees it, at the compile and at the link. */
#define OCL_POCL_NAME_MAX 200u

kc_status ocl_name_check(const ocl_state *st, const kc__bsvc *sv, const char *entry) {
  if (!st->pocl || strlen(entry) <= OCL_POCL_NAME_MAX) return KC_OK;
  return kc__bs_err(sv, KC_EUNAVAILABLE,
                    "kernel name of %zu characters: PoCL aborts the process on kernel names that long "
                    "(its kernel cache makes a directory of the name); at most %u on PoCL",
                    strlen(entry), OCL_POCL_NAME_MAX);
}

#define OCL_BLANKS " \t\n\r\v\f" /* what separates options (PoCL and clang split on each) */

/* The word at or after p (its length in *len), NULL at the end. */
static const char *ocl_word(const char *p, size_t *len) {
  p += strspn(p, OCL_BLANKS);
  *len = strcspn(p, OCL_BLANKS);
  return *p ? p : NULL;
}

/* Whether the word w (len bytes) is "-D" or "-I" alone, whose argument is
 * the next word. */
static bool ocl_lone_flag(const char *w, size_t len) {
  return len == 2 && w[0] == '-' && (w[1] == 'D' || w[1] == 'I');
}

const char *ocl_relink_refused(const char *build_options, const char **why) {
  size_t n = strlen(OCL_OPTIONS), len;
  *why = "is not kcache's own options first";
  if (strncmp(build_options, OCL_OPTIONS, n) != 0 ||
      (build_options[n] && !strchr(OCL_BLANKS, build_options[n])))
    return build_options;
  const char *flag = NULL; /* a lone -D or -I, whose argument is the next word */
  for (const char *p = build_options + n; (p = ocl_word(p, &len)); p += len) {
    if (strcspn(p, "\"'\\") < len) {
      *why = "has a quote or backslash, which the platform parses its own way";
      return p;
    }
    if (memmem(p, len, "-cl-", 4)) { /* a platform may look for -cl-opt-disable and the like anywhere */
      *why = "names an option of the OpenCL compiler (-cl-...), which the link may need too";
      return p;
    }
    if (flag) flag = NULL; /* the argument */
    else if (ocl_lone_flag(p, len)) flag = p;
    else if (!(len > 2 && p[0] == '-' && (p[1] == 'D' || p[1] == 'I')) &&
             !(len == 2 && !strncmp(p, "-w", 2)) && !(len == 7 && !strncmp(p, "-Werror", 7))) {
      *why = "is not only of the compile";
      return p;
    }
  }
  *why = flag ? "has no argument" : NULL;
  return flag;
}

bool ocl_lone_flag_at_end(const char *options) {
  const char *last = NULL;
  size_t last_len = 0, len;
  for (const char *p = options ? options : ""; (p = ocl_word(p, &len)); p += len) last = p, last_len = len;
  return last && ocl_lone_flag(last, last_len);
}

bool ocl_links(ocl_state *st) {
  const kc__bsvc *sv = st->sv;
  if (!st->late_binaries || !st->pocl || !sv->writable || !sv->writable(sv)) return false;
  if (!st->relink_refused) return true;
  /* late binaries asked for (or PoCL's cache off), not to be had: said
   * once, at the first build that would have made them */
  const char *why = NULL;
  if (!kc__fetch_add_relaxed(&st->relink_said, 1) && ocl_relink_refused(st->build_options, &why))
    kc__log_to(
        sv->log, st->relink_asked ? KC_LOG_WARN : KC_LOG_INFO,
        "OpenCL: no late binaries (KC_OPENCL_LATE_BINARIES): the compile option \"%.*s\" %s; only -D and -I "
        "with their arguments, -w and -Werror are sure to build the same compiled, then linked, as built at "
        "once",
        (int)strcspn(st->relink_refused, OCL_BLANKS), st->relink_refused, why);
  return false;
}

/* obj (made from source) compiled, then linked into *prog. Counted as
 * one build. On a failure *prog is NULL and obj holds the log (a failed
 * compile), or *prog is the failed link's program (its log). */
static cl_int ocl_compile_link(ocl_state *st, cl_program obj, cl_device_id dev, cl_program *prog) {
  *prog = NULL;
  kc__fetch_add_relaxed(&st->builds, 1);
  cl_int e = ocl.clCompileProgram(obj, 1, &dev, st->build_options, 0, NULL, NULL, NULL, NULL);
  if (e != CL_SUCCESS) return e == CL_COMPILE_PROGRAM_FAILURE ? CL_BUILD_PROGRAM_FAILURE : e;
  cl_program p = ocl.clLinkProgram(st->compile_ctx, 1, &dev, NULL, 1, &obj, NULL, NULL, &e);
  if (!p) return e == CL_SUCCESS ? CL_LINK_PROGRAM_FAILURE : e;
  *prog = p;
  return e;
}

/* obj (compiled, where ocl_links) linked a second time: the program kept
 * for launches, whose binary is fetched after its first launch
 * (programs.c); NULL if the link fails (then the first link's program is
 * kept, as without). Made after the first link's binary was fetched, so
 * that the stored bytes are those of a program linked once. */
static cl_program ocl_link_late(ocl_state *st, cl_program obj, cl_device_id dev) {
  cl_int e;
  cl_program late = ocl.clLinkProgram(st->compile_ctx, 1, &dev, NULL, 1, &obj, NULL, NULL, &e);
  if (late && e != CL_SUCCESS) {
    ocl.clReleaseProgram(late);
    late = NULL;
  }
  return late;
}

kc_status ocl_build_unit(ocl_state *st, const ocl_unit *u, ocl_result *r, kc__sb *log) {
  const kc__bsvc *sv = st->sv;
  cl_device_id dev = st->devices[0];
  memset(r, 0, sizeof *r);
  kc_status named = ocl_name_check(st, sv, u->entry);
  if (named) return named;

  cl_int e;
  const char *text = u->text;
  size_t len = u->len;
  cl_program prog = ocl.clCreateProgramWithSource(st->compile_ctx, 1, &text, &len, &e);
  if (!prog) return ocl_fail(sv, KC_ECOMPILE, "clCreateProgramWithSource", e);

  cl_program obj = NULL; /* what was compiled, where it is then linked */
  if (ocl_links(st)) {
    /* compiled, then linked twice (late binaries: programs.c) */
    obj = prog;
    e = ocl_compile_link(st, obj, dev, &prog);
    if (!prog) prog = obj, obj = NULL; /* its log says why */
  } else {
    e = ocl_build(st, prog, dev);
  }
  if (obj) kc__bs_free(sv, ocl_build_log(sv, obj, dev, log)); /* the compile's warnings, then the link's */
  char *blog = ocl_build_log(sv, prog, dev, log);
  kc_status s = KC_OK;
  if (e != CL_SUCCESS) {
    if (e == CL_BUILD_PROGRAM_FAILURE || e == CL_COMPILE_PROGRAM_FAILURE)
      s = kc__bs_err(sv, KC_ECOMPILE, "OpenCL build of kernel '%s' failed:\n%s", u->entry,
                     blog ? blog : "(no build log)");
    else
      s = kc__bs_err(sv, KC_ECOMPILE, "OpenCL build of kernel '%s' failed: %s (%d)%s%s", u->entry,
                     ocl_errname(e), (int)e, blog ? "\n" : "", blog ? blog : "");
    goto done;
  }

  cl_kernel k = NULL;
  if ((s = ocl_check_entry(sv, prog, u->entry, u->nparams, &k)) != KC_OK) goto done;
  /* the sizes and alignments of by-value parameters, from the compiler */
  s = ocl_probe_read(st, prog, k, u, r);
  ocl_local_params(k, u, r->local);
  ocl.clReleaseKernel(k);
  if (!s) s = ocl_binary(sv, prog, u->entry, r);
  if (!s) {
    r->prog = prog;
    r->late = obj ? ocl_link_late(st, obj, dev) : NULL;
    prog = NULL;
  }

done:
  kc__bs_free(sv, blog);
  if (prog) ocl.clReleaseProgram(prog);
  if (obj) ocl.clReleaseProgram(obj);
  return s;
}
