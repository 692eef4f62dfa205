/* SPDX-License-Identifier: MIT */
/*
 * args.c -- the launch path: grid and block geometry, the kernel's
 * parameter list cached per handle (read again only when the caller's
 * world changes), and the conversion of Python arguments to the
 * parameters' C types: ints range-checked for the parameter's size and
 * signedness, floats to float/double/half, kcache Buffers by handle,
 * host arrays (arrays.c: the buffer protocol, __array_interface__, a CPU
 * __dlpack__) staged through a buffer kept per parameter, or passed by
 * pointer where interop.c can.
 *
 * The cached path allocates nothing: values go into the caller's stack
 * slots, staging buffers are reused, and the result is None.
 */
#include "kcpy.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

int kcpy_dim3(PyObject *o, kc_dim3 *out, const char *what) {
  uint32_t v[3] = {1, 1, 1};
  Py_ssize_t n = 1;
  if (PyTuple_Check(o)) {
    n = PyTuple_GET_SIZE(o);
    if (n < 1 || n > 3) return PyErr_Format(PyExc_ValueError, "%s: 1 to 3 dimensions, not %zd", what, n), -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PyTuple_Check(o) ? PyTuple_GET_ITEM(o, i) : o;
    long long d = PyLong_AsLongLong(x);
    if (d == -1 && PyErr_Occurred()) return -1;
    if (d < 1 || d > UINT32_MAX)
      return PyErr_Format(PyExc_ValueError, "%s: each dimension must be 1 to 2**32-1, not %lld", what, d), -1;
    v[i] = (uint32_t)d;
  }
  *out = (kc_dim3){v[0], v[1], v[2]};
  return 0;
}

/* Whether a pointer type's text ("KC_GLOBAL const float *") points to
 * const: the word const before its last '*'. */
static int points_to_const(const char *type) {
  const char *star = strrchr(type, '*');
  for (const char *p = strstr(type, "const"); p && (!star || p < star); p = strstr(p + 5, "const")) {
    int start = p == type || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    int end = !(isalnum((unsigned char)p[5]) || p[5] == '_');
    if (start && end) return 1;
  }
  return 0;
}

/* The element type of a pointer type's text ("KC_GLOBAL const float *"):
 * its class and size for the scalars NumPy has, else 0 (void, char, a
 * specialization parameter, a struct, a pointer to pointer). */
static void pointee(const char *type, char *kind, uint8_t *size) {
  static const struct {
    const char *name;
    char kind;
    uint8_t size;
  } known[] = {{"float", 'f', 4},
               {"double", 'f', 8},
               {"half", 'f', 2},
               {"short", 'i', 2},
               {"ushort", 'i', 2},
               {"int", 'i', 4},
               {"uint", 'i', 4},
               {"unsigned", 'i', 4},
               {"long", 'i', 8},
               {"ulong", 'i', 8},
               {"int16_t", 'i', 2},
               {"uint16_t", 'i', 2},
               {"int32_t", 'i', 4},
               {"uint32_t", 'i', 4},
               {"int64_t", 'i', 8},
               {"uint64_t", 'i', 8},
               {"size_t", 'i', 8},
               {"ptrdiff_t", 'i', 8},
               {"unsigned int", 'i', 4},
               {"unsigned short", 'i', 2},
               {"unsigned long", 'i', 8},
               {"long long", 'i', 8},
               {"unsigned long long", 'i', 8}};
  char base[64];
  size_t n = 0;
  const char *star = strchr(type, '*');
  *kind = 0, *size = 0;
  if (!star || strchr(star + 1, '*')) return;
  for (const char *p = type; p < star;) {
    while (p < star && !(isalnum((unsigned char)*p) || *p == '_')) p++;
    const char *w = p;
    while (p < star && (isalnum((unsigned char)*p) || *p == '_')) p++;
    size_t wl = (size_t)(p - w);
    static const char *const skip[] = {"const",    "volatile",   "restrict", "KC_GLOBAL", "KC_CONSTANT",
                                       "__global", "__constant", "global",   "constant",  "signed"};
    int drop = wl == 0;
    for (size_t j = 0; !drop && j < sizeof skip / sizeof *skip; j++)
      drop = strlen(skip[j]) == wl && !memcmp(skip[j], w, wl);
    if (drop) continue;
    if (n + wl + 2 >= sizeof base) return;
    if (n) base[n++] = ' ';
    memcpy(base + n, w, wl), n += wl;
  }
  base[n] = 0;
  for (size_t j = 0; j < sizeof known / sizeof *known; j++)
    if (!strcmp(base, known[j].name)) *kind = known[j].kind, *size = known[j].size;
}

/* The fast path's conversion for a parameter (KCPY_FAST_*). */
static uint8_t fast_kind(const kcpy_param *p) {
  if (p->kind == KC_ARG_BUFFER) return KCPY_FAST_BUF;
  if (p->kind != KC_ARG_SCALAR) return KCPY_FAST_NONE;
  if (p->cls == KC_SCALAR_FLOAT) return p->size == 4 ? KCPY_FAST_F32 : p->size == 8 ? KCPY_FAST_F64 : 0;
  if (p->cls == KC_SCALAR_SINT) return p->size == 4 ? KCPY_FAST_I32 : p->size == 8 ? KCPY_FAST_I64 : 0;
  if (p->cls == KC_SCALAR_UINT) return p->size == 4 ? KCPY_FAST_U32 : 0;
  return KCPY_FAST_NONE;
}

/* Compiles for the caller's world with the GIL released, then copies each
 * parameter's info into the handle's cache. */
int kcpy_refresh(KcKernel *k, kc_world w) {
  kc_runtime *rt = k->owner->rt;
  kc_status st;
  KCPY_NOGIL(k->owner, st = kc_kernel_compile(k->k));
  kcpy_log_poll();
  if (st) return kcpy_raise(rt, st, NULL), -1;
  uint32_t n = 0;
  st = kc_kernel_param_count(k->k, &n);
  if (st) return kcpy_raise(rt, st, NULL), -1;
  for (uint32_t i = 0; i < n; i++) {
    kc_param_info info;
    st = kc_kernel_param(k->k, i, &info);
    if (st) return kcpy_raise(rt, st, NULL), -1;
    kcpy_param *p = &k->p[i];
    p->kind = info.kind;
    p->cls = info.scalar;
    p->size = info.arg_size;
    snprintf(p->name, sizeof p->name, "%s", info.name);
    snprintf(p->ctype, sizeof p->ctype, "%s", *info.ctype ? info.ctype : info.type);
    p->to_const = info.kind == KC_ARG_BUFFER && points_to_const(info.type);
    pointee(info.kind == KC_ARG_BUFFER ? info.type : "", &p->ekind, &p->esize);
    p->fast = fast_kind(p);
  }
  k->np = n;
  k->pworld = w;
  return 0;
}

static int arg_error(KcKernel *k, uint32_t i, const char *fmt, PyObject *o) {
  const kcpy_param *p = &k->p[i];
  PyObject *msg = PyUnicode_FromFormat(fmt, o);
  if (msg) {
    PyErr_Format(PyExc_TypeError, "kernel '%U', argument %u '%s' (%s): %U", k->name, i + 1, p->name, p->ctype,
                 msg);
    Py_DECREF(msg);
  }
  return -1;
}

int kcpy_check_elem(KcKernel *k, uint32_t i, char kind, Py_ssize_t itemsize, PyObject *o) {
  const kcpy_param *p = &k->p[i];
  if (kind == 'u') kind = 'i'; /* signedness is the kernel's business */
  if (!p->ekind || (kind == 'i' && itemsize == 1) || (kind == p->ekind && itemsize == p->esize)) return 0;
  const char *has = kind == 'f' ? "floating-point" : kind == 'i' ? "integer" : "unknown-type";
  const char *wants = p->ekind == 'f' ? "floating-point" : "integer";
  PyErr_Format(
      PyExc_TypeError,
      "kernel '%U', argument %u '%s' (%s): an array of %zd-byte %s elements for a pointer to %d-byte %s "
      "elements (%.60R): pass an array of the parameter's element type, or raw bytes (uint8)",
      k->name, i + 1, p->name, p->ctype, itemsize, has, (int)p->esize, wants, o);
  return -1;
}

/* Whether a struct-module format holds Python objects ('O'), outside the
 * names of a struct's fields (":name:"). */
int kcpy_format_has_objects(const char *f) {
  for (int in_name = 0; f && *f; f++) {
    if (*f == ':') in_name = !in_name;
    else if (*f == 'O' && !in_name) return 1;
  }
  return 0;
}

int kcpy_check_view(KcKernel *k, uint32_t i, const Py_buffer *v, PyObject *o) {
  const char *f = v->format ? v->format : "B";
  if (kcpy_format_has_objects(f))
    return arg_error(k, i, "%R holds Python objects (dtype object), not values a kernel can read", o);
  while (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!') f++;
  char kind = 0;
  if (f[0] && !f[1]) {
    if (strchr("efd", f[0])) kind = 'f';
    else if (strchr("bhilqnBHILQN?c", f[0])) kind = 'i';
  }
  return kcpy_check_elem(k, i, kind, v->itemsize, o);
}

/* 16-bit IEEE half from a double (round to nearest even). */
uint16_t kcpy_to_half(double d) {
  float f = (float)d;
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static int convert_int(KcKernel *k, uint32_t i, PyObject *o, kcpy_val *v) {
  const kcpy_param *p = &k->p[i];
  if (PyFloat_Check(o)) return arg_error(k, i, "a float (%R) for an integer parameter", o);
  if (!PyLong_Check(o) && !PyIndex_Check(o)) return arg_error(k, i, "%R is not an integer", o);
  int over = 0;
  if (p->cls == KC_SCALAR_SINT) {
    long long x = PyLong_AsLongLongAndOverflow(o, &over);
    if (x == -1 && PyErr_Occurred()) return -1;
    long long lo = p->size >= 8 ? INT64_MIN : -(1ll << (p->size * 8 - 1));
    long long hi = p->size >= 8 ? INT64_MAX : (1ll << (p->size * 8 - 1)) - 1;
    if (over || x < lo || x > hi) return arg_error(k, i, "%R does not fit", o);
    if (p->size == 1) v->i8 = (int8_t)x;
    else if (p->size == 2) v->i16 = (int16_t)x;
    else if (p->size == 4) v->i32 = (int32_t)x;
    else v->i64 = x;
    return 0;
  }
  PyObject *idx = PyNumber_Index(o);
  if (!idx) return -1;
  unsigned long long x = 0;
  int neg = PyObject_RichCompareBool(idx, Py_False, Py_LT);
  if (neg == 0) {
    x = PyLong_AsUnsignedLongLong(idx);
    over = x == (unsigned long long)-1 && PyErr_Occurred();
    if (over) PyErr_Clear();
  }
  Py_DECREF(idx);
  if (neg < 0) return -1;
  if (neg || over || (p->size < 8 && x >> (p->size * 8))) return arg_error(k, i, "%R does not fit", o);
  if (p->size == 1) v->bytes[0] = (uint8_t)x;
  else if (p->size == 2) v->u16 = (uint16_t)x;
  else if (p->size == 4) v->i32 = (int32_t)(uint32_t)x;
  else v->i64 = (int64_t)x;
  return 0;
}

int kcpy_convert_scalar(KcKernel *k, uint32_t i, PyObject *o, kc_arg *a, kcpy_val *v) {
  const kcpy_param *p = &k->p[i];
  *a = (kc_arg){v, p->size, KC_ARG_SCALAR};
  if (p->cls == KC_SCALAR_FLOAT) {
    double d = PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o) : PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      /* a TypeError says it is no number; anything else (KeyboardInterrupt,
       * MemoryError, an error of its own __float__) goes up as it is */
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
      PyErr_Clear();
      return arg_error(k, i, "%R is not a number", o);
    }
    if (p->size == 4) v->f = (float)d;
    else if (p->size == 8) v->d = d;
    else if (p->size == 2) v->u16 = kcpy_to_half(d);
    else return arg_error(k, i, "a floating type of unexpected size (%R)", o);
    return 0;
  }
  if (p->cls == KC_SCALAR_SINT || p->cls == KC_SCALAR_UINT) return convert_int(k, i, o, v);
  /* a vector or a type kcache cannot size: the raw bytes of a buffer of the exact size */
  Py_buffer view;
  if (p->size > sizeof v->bytes)
    return arg_error(k, i, "a by-value type larger than 64 bytes: pass it in a buffer (%R)", o);
  if (p->size == 0 || PyObject_GetBuffer(o, &view, PyBUF_C_CONTIGUOUS) < 0) {
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError) &&
        !PyErr_ExceptionMatches(PyExc_BufferError))
      return -1;
    PyErr_Clear();
    return arg_error(k, i, "pass the value's bytes (%R is not usable for this type)", o);
  }
  int ok = (size_t)view.len == p->size;
  if (ok) memcpy(v->bytes, view.buf, p->size);
  PyBuffer_Release(&view);
  return ok ? 0 : arg_error(k, i, "%R has the wrong number of bytes", o);
}

void kcpy_stage_drop(kcpy_stage *s) {
  /* a buffer of a destroyed context is gone with it; its handle may be another buffer's by now */
  if (s->buf && kc_context_id(s->ctx) == s->ctx_id) kc_buffer_destroy(s->buf);
  s->buf = NULL;
  s->cap = 0;
}

/* An array for a pointer parameter: staged through this parameter's buffer. */
static int convert_array(KcKernel *k, kc_context *ctx, uint32_t i, PyObject *o, kc_arg *a, Py_buffer *view,
                         uint32_t *own) {
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  int fr = kcpy_foreign_arg(k, i, o, a, view);
  if (fr) return fr < 0 ? -1 : 0;
#endif
  int hv = kcpy_host_view(k, i, o, view);
  if (hv < 0) return -1;
  if (hv == 0)
    return arg_error(k, i,
                     "%R is neither a kcache Buffer nor a C-contiguous host array (the buffer protocol, "
                     "__array_interface__ or a CPU __dlpack__)",
                     o);
  kcpy_stage *s = &k->stage[i];
  size_t need = view->len ? (size_t)view->len : 1;
  kc_status st = KC_OK;
  uint64_t id = kc_context_id(ctx);
  /* OpenCL on a device that shares the host's memory (a CPU device): the
   * array itself, no copy in or out; the buffer is made for this launch
   * (the array may have changed since the last) and given back after it,
   * its read into the array the synchronization (kcpy_finish_views). A
   * read-only array is staged: the platform may write the memory back. */
  if (k->owner->backend == KCPY_BACKEND_OPENCL && !view->readonly && view->len && s->no_host_ctx != id) {
    kc_buffer *host; /* this launch's own (a launch of the same kernel from inside a conversion, or from
                      * another thread while this one waits, has its own): kcpy_finish_views finds it in
                      * the argument, which is not the staging buffer */
    if (kc_buffer_host(ctx, view->buf, (size_t)view->len, &host) == KC_OK) {
      *a = KC_ARG_BUF(host);
      return 0;
    }
    s->no_host_ctx = id; /* this device cannot (or its platform refused): staged from now on */
  }
  if (k->staging > 1) {
    /* another launch of k is between its conversion and its finish (this
     * one is nested in its conversion, or it waits on another thread): its
     * kernel reads `s`, so this launch stages through a buffer of its own,
     * destroyed in kcpy_finish_views (bit i of *own) */
    kc_buffer *t = NULL;
    st = kc_buffer_create(ctx, need, &t);
    if (!st && view->len) st = kc_buffer_write(t, 0, view->buf, (size_t)view->len);
    if (st) {
      if (t) kc_buffer_destroy(t);
      PyBuffer_Release(view);
      view->obj = NULL;
      return kcpy_raise(k->owner->rt, st, "staging an array argument"), -1;
    }
    *own |= 1u << i;
    *a = KC_ARG_BUF(t);
    return 0;
  }
  if (!s->buf || s->ctx != ctx || s->ctx_id != id || s->cap < need) {
    kcpy_stage_drop(s);
    st = kc_buffer_create(ctx, need, &s->buf);
    s->ctx = st ? NULL : ctx;
    s->ctx_id = id;
    s->cap = st ? 0 : need;
  }
  if (!st && view->len) st = kc_buffer_write(s->buf, 0, view->buf, (size_t)view->len);
  if (st) {
    PyBuffer_Release(view);
    view->obj = NULL;
    return kcpy_raise(k->owner->rt, st, "staging an array argument"), -1;
  }
  *a = KC_ARG_BUF(s->buf);
  return 0;
}

#ifdef KC_ARG_LOCAL_BYTES
/* An OpenCL KC_LOCAL pointer: its size in bytes for this launch. */
static int convert_local(KcKernel *k, uint32_t i, PyObject *o, kc_arg *a) {
  long long bytes = PyLong_Check(o) ? PyLong_AsLongLong(o) : -1;
  if (bytes == -1 && PyErr_Occurred()) PyErr_Clear();
  if (bytes < 1 || bytes > UINT32_MAX)
    return arg_error(k, i, "a KC_LOCAL pointer takes its size in bytes (an int >= 1), not %R", o);
  *a = KC_ARG_LOCAL_BYTES(bytes);
  return 0;
}
#endif

int kcpy_convert(KcKernel *k, kc_context *ctx, PyObject *const *args, uint32_t n, kc_arg *out, kcpy_val *vals,
                 Py_buffer *views, uint32_t *own) {
  int ex = 0;
  *own = 0;
  for (uint32_t i = 0; i < n; i++) {
    PyObject *o = args[i];
    views[i].obj = NULL;
    int rc;
    if (k->p[i].kind == KC_ARG_BUFFER) {
      if (Py_IS_TYPE(o, &KcBuffer_Type)) {
        /* a Buffer of another Runtime (closed or not) is refused before
         * kcache reads its handle: a closed one's memory is freed */
        KcBuffer *b = (KcBuffer *)o;
        rc = !b->owner                     ? arg_error(k, i, "%R was never initialised", o)
             : b->owner->owner != k->owner ? arg_error(k, i, "%R belongs to another kcache Runtime", o)
             : !b->buf || !b->owner->ctx   ? arg_error(k, i, "%R is destroyed", o)
                                           : 0;
        out[i] = KC_ARG_BUF(rc ? NULL : b->buf);
      } else rc = convert_array(k, ctx, i, o, &out[i], &views[i], own);
#ifdef KC_ARG_LOCAL_BYTES
    } else if (k->p[i].kind == KC_ARG_LOCAL) {
      rc = convert_local(k, i, o, &out[i]);
#endif
    } else rc = kcpy_convert_scalar(k, i, o, &out[i], &vals[i]);
    if (rc < 0) {
      kcpy_finish_views(k, i, out, views, *own, 0);
      return -1;
    }
    if (out[i].kind != KC_ARG_BUFFER && out[i].kind != KC_ARG_SCALAR) ex = 1;
  }
  return ex;
}

int kcpy_finish_views(KcKernel *k, uint32_t n, const kc_arg *a, Py_buffer *views, uint32_t own,
                      int copy_back) {
  int rc = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!views[i].obj) continue;
    if (own >> i & 1) { /* staged through this launch's own buffer */
      kc_buffer *t = (kc_buffer *)(uintptr_t)a[i].ptr;
      if (copy_back && !rc && !views[i].readonly && views[i].len && !k->p[i].to_const) {
        kc_status st = kc_buffer_read(t, 0, views[i].buf, (size_t)views[i].len);
        if (st) rc = -1, kcpy_raise(k->owner->rt, st, "copying an array argument back");
      }
      kc_buffer_destroy(t);
    } else if (a[i].kind == KC_ARG_BUFFER && a[i].ptr != k->stage[i].buf) {
      /* the array itself (kc_buffer_host): the read into it waits for the kernel, whatever failed, so
       * that no kernel outlives the call that lent it the array (after a failed launch there is none
       * to wait for, and the read costs nothing) */
      kc_buffer *host = (kc_buffer *)(uintptr_t)a[i].ptr;
      kc_status st = kc_buffer_read(host, 0, views[i].buf, (size_t)views[i].len);
      if (st && copy_back && !rc) rc = -1, kcpy_raise(k->owner->rt, st, "finishing with an array argument");
      kc_buffer_destroy(host);
    } else if (copy_back && !rc && !views[i].readonly && views[i].len && a[i].kind == KC_ARG_BUFFER &&
               !k->p[i].to_const) {
      kc_status st = kc_buffer_read(k->stage[i].buf, 0, views[i].buf, (size_t)views[i].len);
      if (st) rc = -1, kcpy_raise(k->owner->rt, st, "copying an array argument back");
    }
    PyBuffer_Release(&views[i]);
  }
  return rc;
}

/* The launch path before the launch itself: the context, the parameter
 * list of the caller's world, the argument count, the conversion. */
static kc_context *prepare(KcKernel *k, KcContext *c, PyObject *const *args, Py_ssize_t n, kc_arg *a,
                           kcpy_val *v, Py_buffer *views, uint32_t *own, int *ex) {
  KcRuntime *r = k->owner;
  if (!r->rt) return kcpy_check_open(r), NULL;
  if (c && c->owner != r) /* its kc_context is another runtime's, freed if that one is closed */
    return PyErr_Format(PyExc_TypeError, "kernel '%U': the Context belongs to another kcache Runtime",
                        k->name),
           NULL;
  kc_context *ctx = c ? c->ctx : r->dctx;
  if (!ctx) return PyErr_Format(PyExc_RuntimeError, "the kcache Context is destroyed"), NULL;
  kc_world w = kc_world_current(r->rt);
  if (w != k->pworld && kcpy_refresh(k, w) < 0) return NULL;
  if ((uint64_t)n != k->np)
    return PyErr_Format(PyExc_TypeError, "kernel '%U' takes %u arguments, %zd given", k->name, k->np, n),
           NULL;
  int rc = kcpy_convert(k, ctx, args, (uint32_t)n, a, v, views, own);
  *ex = rc == 1;
  return rc < 0 ? NULL : ctx;
}

/* An exact int of at most one machine word in *x: 1, else 0 (the full path converts it). */
static inline int small_int(PyObject *o, long long *x) {
  if (!PyLong_CheckExact(o)) return 0;
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact((PyLongObject *)o)) return 0;
  *x = (long long)PyUnstable_Long_CompactValue((PyLongObject *)o);
  return 1;
#elif PY_VERSION_HEX >= 0x030B0000 /* cpython/longintrepr.h: one 30-bit digit and the sign in ob_size */
  Py_ssize_t size = Py_SIZE(o);
  if (size < -1 || size > 1) return 0;
  *x = (long long)size * (long long)((PyLongObject *)o)->ob_digit[0];
  return 1;
#else
  int over = 0;
  *x = PyLong_AsLongLongAndOverflow(o, &over);
  return !over && !(*x == -1 && PyErr_Occurred());
#endif
}

/* One argument the fast path converts inline: 1 done, 0 for the full path. */
static inline int fast_arg(const KcRuntime *r, const kcpy_param *p, PyObject *o, kc_arg *a, kcpy_val *v) {
  long long x;
  switch (p->fast) {
  case KCPY_FAST_BUF: {
    /* a live Buffer of this Runtime (the full path says what is wrong with any other) */
    const KcBuffer *b = (const KcBuffer *)o;
    if (!Py_IS_TYPE(o, &KcBuffer_Type) || !b->buf || !b->owner || b->owner->owner != r || !b->owner->ctx)
      return 0;
    *a = KC_ARG_BUF(b->buf);
    return 1;
  }
  case KCPY_FAST_F32:
    if (!PyFloat_CheckExact(o)) return 0;
    v->f = (float)PyFloat_AS_DOUBLE(o);
    break;
  case KCPY_FAST_F64:
    if (!PyFloat_CheckExact(o)) return 0;
    v->d = PyFloat_AS_DOUBLE(o);
    break;
  case KCPY_FAST_I32:
    if (!small_int(o, &x) || x < INT32_MIN || x > INT32_MAX) return 0;
    v->i32 = (int32_t)x;
    break;
  case KCPY_FAST_U32:
    if (!small_int(o, &x) || x < 0 || x > UINT32_MAX) return 0;
    v->i32 = (int32_t)(uint32_t)x;
    break;
  case KCPY_FAST_I64:
    if (!small_int(o, &x)) return 0;
    v->i64 = x;
    break;
  default: return 0;
  }
  *a = (kc_arg){v, p->size, KC_ARG_SCALAR};
  return 1;
}

/* The full path: any argument (arrays staged or by pointer, conversions
 * with their errors), kc_launch_ex where an argument needs it. */
static PyObject *launch_full_in(KcKernel *k, KcContext *c, const kc_dim3 *grid, const kc_dim3 *block,
                                PyObject *const *args, Py_ssize_t n) {
  kc_arg a[KC_MAX_ARGS];
  kcpy_val v[KC_MAX_ARGS];
  Py_buffer views[KC_MAX_ARGS];
  uint32_t own;
  int ex;
  kc_context *ctx = prepare(k, c, args, n, a, v, views, &own, &ex);
  if (!ctx) return NULL;
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  kc_status st;
  if (ex) { /* raw pointers and local memory: only kc_launch_ex takes them */
    kc_launch_config cfg;
    kc_launch_config_init(&cfg);
    cfg.grid = *grid;
    cfg.block = *block;
    st = kc_launch_ex(k->k, ctx, &cfg, a, (uint32_t)n);
  } else st = kc_launch(k->k, ctx, grid, block, a, (uint32_t)n);
#else
  (void)ex;
  kc_status st = kc_launch(k->k, ctx, grid, block, a, (uint32_t)n);
#endif
  if (kcpy_finish_views(k, (uint32_t)n, a, views, own, st == KC_OK) < 0) return NULL;
  if (st) return kcpy_raise(k->owner->rt, st, NULL);
  kcpy_log_poll();
  Py_RETURN_NONE;
}

static PyObject *launch_full(KcKernel *k, KcContext *c, const kc_dim3 *grid, const kc_dim3 *block,
                             PyObject *const *args, Py_ssize_t n) {
  if (!k->owner->rt) return kcpy_check_open(k->owner), NULL;
  kcpy_launch_begin(k);
  PyObject *res = launch_full_in(k, c, grid, block, args, n);
  kcpy_launch_end(k);
  return res;
}

/* The cached launch: the parameter list of the caller's world already read
 * and every argument one that converts inline (fast_arg), straight to
 * kc_launch; anything else goes the full path, which converts it all again. */
PyObject *kcpy_launch(KcKernel *k, KcContext *c, const kc_dim3 *grid, const kc_dim3 *block,
                      PyObject *const *args, Py_ssize_t n) {
  KcRuntime *r = k->owner;
  kc_context *ctx = c ? c->ctx : r->dctx;
  if (!r->rt || !ctx || (c && c->owner != r) || (uint64_t)n != k->np || kc_world_current(r->rt) != k->pworld)
    return launch_full(k, c, grid, block, args, n);
  kc_arg a[KC_MAX_ARGS];
  kcpy_val v[KC_MAX_ARGS];
  for (Py_ssize_t i = 0; i < n; i++)
    if (!fast_arg(r, &k->p[i], args[i], &a[i], &v[i])) return launch_full(k, c, grid, block, args, n);
  kc_status st = kc_launch(k->k, ctx, grid, block, a, (uint32_t)n);
  if (st) return kcpy_raise(r->rt, st, NULL);
  Py_RETURN_NONE;
}

static PyObject *launch_ex_in(KcKernel *k, KcContext *c, const kc_dim3 *grid, const kc_dim3 *block,
                              PyObject *const *args, Py_ssize_t n, PyObject *stream, unsigned shared);

PyObject *kcpy_launch_ex(KcKernel *k, KcContext *c, const kc_dim3 *grid, const kc_dim3 *block,
                         PyObject *const *args, Py_ssize_t n, PyObject *stream, unsigned shared) {
  if (stream == Py_None && !shared) return kcpy_launch(k, c, grid, block, args, n);
  if (!k->owner->rt) return kcpy_check_open(k->owner), NULL;
  kcpy_launch_begin(k);
  PyObject *res = launch_ex_in(k, c, grid, block, args, n, stream, shared);
  kcpy_launch_end(k);
  return res;
}

static PyObject *launch_ex_in(KcKernel *k, KcContext *c, const kc_dim3 *grid, const kc_dim3 *block,
                              PyObject *const *args, Py_ssize_t n, PyObject *stream, unsigned shared) {
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  if (Py_IS_TYPE(stream, &KcStream_Type)) {
    KcContext *sc = ((KcStream *)stream)->owner;
    if (sc->owner != k->owner)
      return PyErr_Format(kcpy_error_class(KC_EINVAL), "kernel '%U': the stream belongs to another Runtime",
                          k->name);
    if (!c) c = sc; /* the stream's context */
  }
  kc_arg a[KC_MAX_ARGS];
  kcpy_val v[KC_MAX_ARGS];
  Py_buffer views[KC_MAX_ARGS];
  uint32_t own;
  int ex;
  kc_context *ctx = prepare(k, c, args, n, a, v, views, &own, &ex);
  if (!ctx) return NULL;
  kc_launch_config cfg;
  kc_launch_config_init(&cfg);
  cfg.grid = *grid;
  cfg.block = *block;
  cfg.shared_bytes = shared;
  /* staged arrays are copied on the context's own queue: the copy back, and
   * the next launch's copy into the same staging buffer, wait for the
   * kernel on the caller's stream (a staged launch on a stream is blocking);
   * on CUDA the launch also waits for the copy in (cuMemcpyHtoD from
   * pageable memory may return before its DMA is done, on the legacy stream).
   * On the host an array is passed by its pointer and the stream's thread
   * runs the kernel: the launch waits for it too, as the array's view is
   * released when the call returns */
  int staged = 0;
  for (Py_ssize_t i = 0; i < n; i++)
    staged |= views[i].obj && (a[i].kind == KC_ARG_BUFFER || k->owner->backend == KCPY_BACKEND_HOST);
  kc_status st = kcpy_stream(k->owner, ctx, stream, &cfg.stream) < 0 ? KC__STATUS_COUNT : KC_OK;
  if (st == KC_OK && staged && cfg.stream && k->owner->backend == KCPY_BACKEND_CUDA)
    st = kc_context_finish(ctx);
  if (st == KC_OK) st = kc_launch_ex(k->k, ctx, &cfg, a, (uint32_t)n);
  if (st == KC_OK && staged && cfg.stream) KCPY_NOGIL(k->owner, st = kc_stream_sync(cfg.stream));
  if (kcpy_finish_views(k, (uint32_t)n, a, views, own, st == KC_OK) < 0 || st == KC__STATUS_COUNT)
    return NULL;
  if (st) return kcpy_raise(k->owner->rt, st, NULL);
  kcpy_log_poll();
  Py_RETURN_NONE;
#else
  (void)c, (void)grid, (void)block, (void)args, (void)n;
  if (stream != Py_None)
    return PyErr_Format(
        PyExc_NotImplementedError,
        "stream=: this kcache has no streams (kc_stream_wrap); it launches on the context's queue");
  return PyErr_Format(
      PyExc_NotImplementedError,
      "shared=%u: this kcache has no dynamic shared memory (kc_launch_ex); declare it in the kernel", shared);
#endif
}
