/* SPDX-License-Identifier: MIT */
/*
 * runtime.c -- kcache.Runtime (kc_runtime: options, the function table,
 * worlds, pins, stats, collection) with its default context, and
 * kcache.Pin, the context manager of `with rt.pin():`.
 */
#include "kcpy.h"

#include <stdbool.h>
#include <string.h>

static int parse_backend(PyObject *o, kc_backend_kind *out) {
  const char *s = o && o != Py_None ? PyUnicode_AsUTF8(o) : "auto";
  if (!s) return -1;
  if (!strcmp(s, "auto")) *out = KC_BACKEND_AUTO;
  else if (!strcmp(s, "host")) *out = KC_BACKEND_HOST;
  else if (!strcmp(s, "opencl")) *out = KC_BACKEND_OPENCL;
  else if (!strcmp(s, "cuda")) *out = KC_BACKEND_CUDA;
  else {
    PyErr_Format(PyExc_ValueError, "backend must be 'auto', 'host', 'opencl' or 'cuda', not '%s'", s);
    return -1;
  }
  return 0;
}

static int parse_log_level(const char *s, kc_log_level *out) {
  static const char *const names[] = {"default", "error", "warn", "info", "debug"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, names[i])) return *out = (kc_log_level)i, 0;
  PyErr_Format(PyExc_ValueError, "log_level must be 'error', 'warn', 'info' or 'debug', not '%s'", s);
  return -1;
}

/* An optional int option as an unsigned in [0, max]: -1 with ValueError
 * (negative) or OverflowError (too large) naming it, TypeError for a non-int. */
static int parse_count(PyObject *o, const char *name, unsigned long long max, unsigned long long *out) {
  if (!o) return 0; /* not given: the default */
  PyObject *i = PyNumber_Index(o);
  if (!i) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "Runtime: %s must be an int, not %s", name, Py_TYPE(o)->tp_name);
    }
    return -1;
  }
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(i, &overflow);
  unsigned long long v = overflow > 0 ? PyLong_AsUnsignedLongLong(i) : (unsigned long long)s;
  Py_DECREF(i);
  if (s == -1 && !overflow && PyErr_Occurred()) return -1;
  if (overflow < 0 || (!overflow && s < 0)) {
    PyErr_Format(PyExc_ValueError, "Runtime: %s must be >= 0, not %R", name, o);
    return -1;
  }
  if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v > max) {
    PyErr_Clear();
    PyErr_Format(PyExc_OverflowError, "Runtime: %s must be at most %llu, not %R", name, max, o);
    return -1;
  }
  *out = v;
  return 0;
}

static int runtime_init(KcRuntime *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"backend",
                           "cache_dir",
                           "compile_options",
                           "host_cc",
                           "platform_index",
                           "device_name",
                           "cache_disable",
                           "cache_max_size",
                           "log_level",
                           "compile_timeout_ms",
                           "cache_shared",
                           "checked",
                           "log",
                           NULL};
  PyObject *backend = NULL, *max_size_o = NULL, *timeout_o = NULL;
  const char *cache_dir = NULL, *copts = NULL, *host_cc = NULL, *device = NULL, *level = NULL, *log = NULL;
  int platform = -1, disable = 0, shared = 0, checked = 0;
  unsigned long long max_size = 0, timeout = 0;
  /* once only: a second __init__ (open, or after close()) would leave every Kernel, Buffer, Context
   * and Stream made from the first one pointing into a runtime that is gone */
  if (self->initialized) {
    PyErr_SetString(PyExc_RuntimeError,
                    self->rt
                        ? "Runtime.__init__: this Runtime is initialized already"
                        : "Runtime.__init__: this Runtime was initialized before (a closed Runtime stays "
                          "closed): make a new one");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|Ozzzizp$OzOppz", kwlist, &backend, &cache_dir, &copts,
                                   &host_cc, &platform, &device, &disable, &max_size_o, &level, &timeout_o,
                                   &shared, &checked, &log))
    return -1;
  if (parse_count(max_size_o, "cache_max_size", UINT64_MAX, &max_size) < 0 ||
      parse_count(timeout_o, "compile_timeout_ms", UINT32_MAX, &timeout) < 0)
    return -1;
  if (platform < -1) { /* kc_options.platform_index: -1 is "the first platform with a device" */
    PyErr_Format(PyExc_ValueError,
                 "Runtime: platform_index must be >= 0, or -1 for the first platform with a "
                 "device, not %d",
                 platform);
    return -1;
  }
  if (log && strcmp(log, "logging") && strcmp(log, "stderr")) {
    PyErr_Format(PyExc_ValueError, "log must be 'logging' or 'stderr', not '%s'", log);
    return -1;
  }
  kc_options o;
  kc_options_init(&o);
  if (parse_backend(backend, &o.backend) < 0) return -1;
  if (level && parse_log_level(level, &o.log_level) < 0) return -1;
  o.cache_dir = cache_dir;
  o.compile_options = copts;
  o.host_cc = host_cc;
  o.platform_index = platform;
  o.device_name = device;
  o.cache_disable = disable;
  o.cache_max_size = max_size;
  o.compile_timeout_ms = (uint32_t)timeout;
  o.cache_shared = shared;
  o.checked = checked;
  /* threads of a Python program cannot keep a rule about when collect()
   * may run: cached launches are guarded, so it may run at any time */
  o.guard_launches = 1;
  /* kcache's messages go to logging.getLogger("kcache") (log.c), unless log="stderr" */
  if (!log || !strcmp(log, "logging")) o.log = kcpy_log_sink;
  kc_runtime *rt = NULL;
  kc_status st;
  self->initialized = 1; /* before the GIL is released: another thread's __init__ meanwhile is refused */
  Py_BEGIN_ALLOW_THREADS st = kc_runtime_create(&o, &rt);
  Py_END_ALLOW_THREADS if (st) {
    self->initialized = 0; /* nothing was made from it: a later __init__ may try again */
    return kcpy_raise(NULL, st, "Runtime"), -1;
  }
  kcpy_log_poll();
  st = kc_context_create(rt, 0, &self->dctx);
  if (st) {
    kcpy_raise(rt, st, "Runtime: the default context");
    kc_runtime_destroy(rt);
    self->initialized = 0;
    return -1;
  }
  self->rt = rt;
  const char *be = kc_runtime_backend(rt);
  self->backend = !strcmp(be, "host")   ? KCPY_BACKEND_HOST
                  : !strcmp(be, "cuda") ? KCPY_BACKEND_CUDA
                                        : KCPY_BACKEND_OPENCL;
  return 0;
}

static void runtime_close_now(KcRuntime *self) {
  if (!self->rt || self->inflight || self->exports) return; /* callers check kcpy_check_idle, _exports */
  kc_runtime *rt = self->rt;
  self->rt = NULL; /* every object made from it sees it closed */
  self->dctx = NULL;
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  for (Py_ssize_t i = 0; i < self->nstreams; i++) kc_stream_destroy(self->streams[i].s);
  PyMem_Free(self->streams);
  self->streams = NULL;
  self->nstreams = self->streams_cap = 0;
#endif
  Py_BEGIN_ALLOW_THREADS kc_runtime_destroy(rt);
  Py_END_ALLOW_THREADS kcpy_log_poll();
}

static void runtime_dealloc(KcRuntime *self) {
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  runtime_close_now(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *runtime_close(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_idle(self, "close") < 0 || kcpy_check_exports(self->exports, "close") < 0) return NULL;
  runtime_close_now(self);
  Py_RETURN_NONE;
}

static PyObject *runtime_enter(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  return Py_NewRef(self);
}

static PyObject *runtime_exit(KcRuntime *self, PyObject *args) {
  (void)args;
  if (kcpy_check_idle(self, "close") < 0 || kcpy_check_exports(self->exports, "close") < 0) return NULL;
  runtime_close_now(self);
  Py_RETURN_FALSE;
}

/* The kc_language a `language=` argument names: None or "dialect",
 * "opencl", "cuda"; -1 with ValueError for anything else. */
static int language_of(const char *fn, const char *s, kc_language *out) {
  static const kc_language all[] = {KC_LANG_DIALECT, KC_LANG_OPENCL, KC_LANG_CUDA};
  *out = KC_LANG_DIALECT;
  if (!s) return 0;
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (!strcmp(s, kc_language_name(all[i]))) {
      *out = all[i];
      return 0;
    }
  PyErr_Format(PyExc_ValueError, "%s: language must be \"dialect\", \"opencl\" or \"cuda\", not \"%s\"", fn,
               s);
  return -1;
}

static PyObject *runtime_define(KcRuntime *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"name", "source", "language", NULL};
  const char *name, *src, *lang_name = NULL;
  kc_language lang;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|$z:define", kwlist, &name, &src, &lang_name) ||
      language_of("define", lang_name, &lang) < 0 || kcpy_check_open(self) < 0)
    return NULL;
  kc_world w = 0;
  kc_status st = kc_define_lang(self->rt, name, src, lang, &w);
  kcpy_log_poll();
  return st ? kcpy_raise(self->rt, st, NULL) : PyLong_FromUnsignedLongLong(w);
}

static PyObject *runtime_undefine(KcRuntime *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name || kcpy_check_open(self) < 0) return NULL;
  kc_world w = 0;
  kc_status st = kc_undefine(self->rt, name, &w);
  kcpy_log_poll();
  return st ? kcpy_raise(self->rt, st, NULL) : PyLong_FromUnsignedLongLong(w);
}

/* ------------------------------------------------------------ define_file */

static PyStructSequence_Field fileload_fields[] = {
    {"world", "the world the load is visible from (the current one if nothing changed)"},
    {"changed", "how many names it defined, redefined or undefined (kc_define_file's count)"},
    {"defined", "the names it defined that had no definition before (a tuple of str, in file order)"},
    {"redefined", "the names whose text changed (a tuple of str, in file order)"},
    {"undefined", "the names the file's last load defined that are gone (a tuple of str)"},
    {NULL, NULL}};
static PyStructSequence_Desc fileload_desc = {
    "kcache.FileLoad", "What Runtime.define_file did: (world, changed, defined, redefined, undefined).",
    fileload_fields, 5};
static PyTypeObject *fileload_type;

int kcpy_fileload_init_type(void) {
  fileload_type = PyStructSequence_NewType(&fileload_desc);
  return fileload_type ? 0 : -1;
}

PyObject *kcpy_fileload_type(void) { return (PyObject *)fileload_type; }

/* The whole of the file at path (bytes), or NULL with OSError. */
static PyObject *read_path(PyObject *path) {
  PyObject *io = PyImport_ImportModule("io");
  PyObject *f = io ? PyObject_CallMethod(io, "open", "Os", path, "rb") : NULL;
  Py_XDECREF(io);
  if (!f) return NULL;
  PyObject *data = PyObject_CallMethod(f, "read", NULL);
  PyObject *closed = PyObject_CallMethod(f, "close", NULL);
  Py_DECREF(f);
  if (!closed) Py_CLEAR(data);
  Py_XDECREF(closed);
  if (data && !PyBytes_Check(data)) {
    Py_CLEAR(data);
    PyErr_SetString(PyExc_TypeError, "read() gave no bytes");
  }
  return data;
}

/* The names kc_define_file_ex reports, gathered without the GIL (raw
 * memory only): each is a kind byte, the name and its NUL. */
typedef struct {
  char *buf;
  size_t len, cap;
  bool failed;
} change_buf;

static void on_change(void *user, const char *name, kc_change_kind kind) {
  change_buf *c = user;
  size_t n = strlen(name) + 2;
  if (c->len + n > c->cap) {
    size_t cap = (c->cap ? c->cap * 2 : 256) + n;
    char *nb = PyMem_RawRealloc(c->buf, cap);
    if (!nb) {
      c->failed = true;
      return;
    }
    c->buf = nb, c->cap = cap;
  }
  c->buf[c->len] = (char)kind;
  memcpy(c->buf + c->len + 1, name, n - 1);
  c->len += n;
}

/* The names of one kind, as a tuple of str (NULL with an exception). */
static PyObject *change_names(const change_buf *c, kc_change_kind kind) {
  PyObject *list = PyList_New(0);
  for (size_t at = 0; list && at < c->len; at += strlen(c->buf + at + 1) + 2) {
    if (c->buf[at] != (char)kind) continue;
    PyObject *name = PyUnicode_FromString(c->buf + at + 1);
    if (!name || PyList_Append(list, name) < 0) Py_CLEAR(list);
    Py_XDECREF(name);
  }
  PyObject *t = list ? PyList_AsTuple(list) : NULL;
  Py_XDECREF(list);
  return t;
}

/* FileLoad(world, changed, defined, redefined, undefined). */
static PyObject *fileload_new(kc_world w, size_t changed, const change_buf *c) {
  if (c->failed) return PyErr_NoMemory();
  PyObject *out = PyStructSequence_New(fileload_type);
  if (!out) return NULL;
  PyStructSequence_SetItem(out, 0, PyLong_FromUnsignedLongLong(w));
  PyStructSequence_SetItem(out, 1, PyLong_FromSize_t(changed));
  for (int i = 0; i < 3; i++) PyStructSequence_SetItem(out, 2 + i, change_names(c, (kc_change_kind)(i + 1)));
  for (int i = 0; i < 5; i++)
    if (!PyStructSequence_GetItem(out, i)) {
      Py_DECREF(out);
      return NULL;
    }
  return out;
}

/* define_file(file, text=None, *, language=None): kc_define_file_lang. file names the file (a str
 * or path-like: the identity of its loads); text is its contents (str or
 * bytes), or None to read the file at that path. */
static PyObject *runtime_define_file(KcRuntime *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"file", "text", "language", NULL};
  PyObject *file, *text = Py_None;
  const char *lang_name = NULL;
  kc_language lang;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$z:define_file", kwlist, &file, &text, &lang_name) ||
      language_of("define_file", lang_name, &lang) < 0 || kcpy_check_open(self) < 0)
    return NULL;
  PyObject *fs = PyOS_FSPath(file), *name = NULL, *data = NULL, *out = NULL;
  if (!fs) return NULL;
  if (PyBytes_Check(fs)) name = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(fs));
  else name = Py_NewRef(fs);
  const char *fname = name ? PyUnicode_AsUTF8(name) : NULL;
  if (text == Py_None) data = fname ? read_path(fs) : NULL;
  else if (PyUnicode_Check(text)) data = PyUnicode_AsUTF8String(text);
  else if (PyBytes_Check(text)) data = Py_NewRef(text);
  else
    PyErr_Format(PyExc_TypeError, "define_file: text must be str or bytes (or None: read the file), not %s",
                 Py_TYPE(text)->tp_name);
  if (fname && data) {
    size_t changed = 0;
    kc_world w = 0;
    kc_status st;
    const char *t = PyBytes_AS_STRING(data);
    size_t len = (size_t)PyBytes_GET_SIZE(data);
    change_buf c = {0};
    KCPY_NOGIL(self, st = kc_define_file_lang(self->rt, fname, t, len, lang, on_change, &c, &changed, &w));
    kcpy_log_poll();
    if (st) kcpy_raise(self->rt, st, NULL);
    else out = fileload_new(w, changed, &c);
    PyMem_RawFree(c.buf);
  }
  Py_DECREF(fs);
  Py_XDECREF(name);
  Py_XDECREF(data);
  return out;
}

/* 0, or -1 with ValueError when s (a specialization parameter's name or value, or the whole
 * string) holds a NUL (which would end the C string early) or, with syntax, a ',' or '=' (which
 * the "K=V,K2=V2" syntax of kc_kernel_create reads as its own: a value "4,M=5" would add a
 * parameter M). key: the parameter whose value s is, or NULL. */
static int params_check(PyObject *s, const char *what, PyObject *key, int syntax) {
  static const Py_UCS4 bad[] = {0, ',', '='};
  for (int i = 0; i < (syntax ? 3 : 1); i++) {
    Py_ssize_t at = PyUnicode_FindChar(s, bad[i], 0, PyUnicode_GET_LENGTH(s), 1);
    if (at == -2) return -1;
    if (at < 0) continue;
    const char *name = i == 0 ? "a NUL character" : i == 1 ? "','" : "'='";
    if (key)
      PyErr_Format(PyExc_ValueError,
                   "kernel: the value of specialization parameter %R (%R) contains %s: give each "
                   "parameter its own keyword or dict entry",
                   key, s, name);
    else PyErr_Format(PyExc_ValueError, "kernel: the %s %R contains %s", what, s, name);
    return -1;
  }
  return 0;
}

/* "K=V,K2=V2" from a string, a mapping, or keyword arguments. */
static PyObject *params_text(PyObject *params, PyObject *kw) {
  if (params && params != Py_None && PyUnicode_Check(params)) {
    if (kw && PyDict_GET_SIZE(kw))
      return PyErr_Format(PyExc_TypeError,
                          "give specialization parameters as a string or as keywords, not both");
    if (params_check(params, "specialization", NULL, 0) < 0) return NULL;
    return Py_NewRef(params);
  }
  PyObject *d = params && params != Py_None ? params : kw;
  if (!d) return PyUnicode_FromString("");
  if (!PyDict_Check(d)) return PyErr_Format(PyExc_TypeError, "params must be a str or a dict");
  PyObject *parts = PyList_New(0), *k, *v;
  Py_ssize_t pos = 0;
  if (!parts) return NULL;
  while (PyDict_Next(d, &pos, &k, &v)) {
    /* each key and value stays one: a ',' or '=' in one would add or change parameters */
    /* True and False are C's 1 and 0 (str() would define N as True); None is no value */
    if (v == Py_None) {
      PyErr_Format(PyExc_TypeError, "kernel: specialization parameter %R is None: give it a value", k);
      Py_DECREF(parts);
      return NULL;
    }
    PyObject *ks = PyObject_Str(k), *vs = !ks               ? NULL
                                          : PyBool_Check(v) ? PyUnicode_FromString(v == Py_True ? "1" : "0")
                                                            : PyObject_Str(v);
    PyObject *s = vs && params_check(ks, "specialization parameter name", NULL, 1) == 0 &&
                          params_check(vs, NULL, ks, 1) == 0
                      ? PyUnicode_FromFormat("%U=%U", ks, vs)
                      : NULL;
    Py_XDECREF(ks);
    Py_XDECREF(vs);
    if (!s || PyList_Append(parts, s) < 0) {
      Py_XDECREF(s);
      Py_DECREF(parts);
      return NULL;
    }
    Py_DECREF(s);
  }
  PyObject *sep = PyUnicode_FromString(",");
  PyObject *out = sep ? PyUnicode_Join(sep, parts) : NULL;
  Py_XDECREF(sep);
  Py_DECREF(parts);
  return out;
}

static PyObject *runtime_kernel(KcRuntime *self, PyObject *args, PyObject *kw) {
  const char *name;
  PyObject *params = NULL;
  if (!PyArg_ParseTuple(args, "s|O:kernel", &name, &params) || kcpy_check_open(self) < 0) return NULL;
  PyObject *text = params_text(params, kw);
  if (!text) return NULL;
  const char *p = PyUnicode_AsUTF8(text);
  PyObject *k = p ? kcpy_kernel_new(self, name, p) : NULL;
  Py_DECREF(text);
  return k;
}

static PyObject *runtime_stats(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  kc_stats s;
  kc_status st = kc_stats_get(self->rt, &s);
  return st ? kcpy_raise(self->rt, st, NULL) : kcpy_stats_new(&s);
}

static PyObject *runtime_collect(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  kc_collect_info ci;
  kc_status st = kc_collect(self->rt, &ci);
  kcpy_log_poll();
  if (st) return kcpy_raise(self->rt, st, NULL);
  return Py_BuildValue("{sKsKsK}", "code_instances", (unsigned long long)ci.code_instances, "linked",
                       (unsigned long long)ci.linked, "definitions", (unsigned long long)ci.definitions);
}

static PyObject *runtime_refresh(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  size_t changed = 0;
  kc_world w = 0;
  kc_status st;
  KCPY_NOGIL(self, st = kc_refresh(self->rt, &changed, &w));
  kcpy_log_poll();
  if (st) return kcpy_raise(self->rt, st, NULL);
  return Py_BuildValue("(nK)", (Py_ssize_t)changed, (unsigned long long)w);
}

static PyObject *runtime_pin(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  return PyObject_CallOneArg((PyObject *)&KcPin_Type, (PyObject *)self);
}

static PyObject *runtime_create_context(KcRuntime *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"device", NULL};
  int device = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|i:create_context", kwlist, &device) ||
      kcpy_check_open(self) < 0)
    return NULL;
  return (PyObject *)kcpy_context_new(self, device);
}

static PyObject *runtime_buffer(KcRuntime *self, PyObject *what) {
  if (kcpy_check_open(self) < 0) return NULL;
  PyObject *ctx = (PyObject *)kcpy_context_new(self, -1);
  PyObject *b = ctx ? PyObject_CallFunctionObjArgs((PyObject *)&KcBuffer_Type, ctx, what, NULL) : NULL;
  Py_XDECREF(ctx);
  return b;
}

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
static PyObject *runtime_stream(KcRuntime *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"native", "context", NULL};
  PyObject *native = Py_None, *ctx = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:stream", kwlist, &native, &ctx) ||
      kcpy_check_open(self) < 0)
    return NULL;
  if (ctx != Py_None && !Py_IS_TYPE(ctx, &KcContext_Type))
    return PyErr_Format(PyExc_TypeError, "context must be a kcache Context");
  if (ctx != Py_None && ((KcContext *)ctx)->owner != self)
    return PyErr_Format(kcpy_error_class(KC_EINVAL), "stream: the context belongs to another Runtime");
  KcContext *c = ctx == Py_None ? kcpy_context_new(self, -1) : (KcContext *)Py_NewRef(ctx);
  PyObject *s = c ? kcpy_stream_new(c, native) : NULL;
  Py_XDECREF(c);
  return s;
}
#endif

static PyObject *runtime_finish(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  kc_status st;
  KCPY_NOGIL(self, st = kc_context_finish(self->dctx));
  if (st) return kcpy_raise(self->rt, st, NULL);
  Py_RETURN_NONE;
}

static PyObject *runtime_get_backend(KcRuntime *self, void *c) {
  (void)c;
  return kcpy_check_open(self) < 0 ? NULL : PyUnicode_FromString(kc_runtime_backend(self->rt));
}
static PyObject *runtime_get_world(KcRuntime *self, void *c) {
  (void)c;
  return kcpy_check_open(self) < 0 ? NULL : PyLong_FromUnsignedLongLong(kc_world_latest(self->rt));
}
static PyObject *runtime_get_current_world(KcRuntime *self, void *c) {
  (void)c;
  return kcpy_check_open(self) < 0 ? NULL : PyLong_FromUnsignedLongLong(kc_world_current(self->rt));
}
static PyObject *runtime_get_cache_dir(KcRuntime *self, void *c) {
  (void)c;
  if (kcpy_check_open(self) < 0) return NULL;
  const char *d = kc_cache_dir(self->rt);
  return d ? PyUnicode_FromString(d) : Py_NewRef(Py_None);
}
static PyObject *runtime_get_devices(KcRuntime *self, void *c) {
  (void)c;
  if (kcpy_check_open(self) < 0) return NULL;
  int n = kc_device_count(self->rt);
  PyObject *l = PyList_New(0);
  for (int i = 0; l && i < n; i++) {
    PyObject *s = PyUnicode_FromString(kc_device_name(self->rt, i));
    if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
    Py_XDECREF(s);
  }
  return l;
}
static PyObject *runtime_get_context(KcRuntime *self, void *c) {
  (void)c;
  return kcpy_check_open(self) < 0 ? NULL : (PyObject *)kcpy_context_new(self, -1);
}
static PyObject *runtime_get_closed(KcRuntime *self, void *c) {
  (void)c;
  return PyBool_FromLong(self->rt == NULL);
}

/* <kcache.Runtime backend='opencl' device='pthread-...' world=3>, or <kcache.Runtime closed> */
static PyObject *runtime_repr(KcRuntime *self) {
  if (!self->rt) return PyUnicode_FromString("<kcache.Runtime closed>");
  const char *dev = kc_device_name(self->rt, 0), *dir = kc_cache_dir(self->rt);
  return PyUnicode_FromFormat("<kcache.Runtime backend='%s' device='%s' world=%llu cache_dir=%s%s%s>",
                              kc_runtime_backend(self->rt), dev ? dev : "?",
                              (unsigned long long)kc_world_latest(self->rt), dir ? "'" : "",
                              dir ? dir : "None", dir ? "'" : "");
}

static PyMethodDef runtime_methods[] = {
    {"close", (PyCFunction)runtime_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "Destroys the runtime and everything made from it (kc_runtime_destroy): its contexts, buffers,\n"
     "kernels and streams. Closing a closed runtime does nothing.\n\n"
     "Raises:\n"
     "    BusyError: another thread is inside a call on this runtime (a compile, a wait), or a view\n"
     "        of one of its Buffers' memory (a memoryview, np.frombuffer, np.from_dlpack) is alive."},
    {"__enter__", (PyCFunction)runtime_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns the runtime.\n\nRaises:\n    DestroyedError: it is closed."},
    {"__exit__", (PyCFunction)runtime_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\n"
     "Closes the runtime (see close()); returns False.\n\n"
     "Raises:\n    BusyError: as close()."},
    {"define", (PyCFunction)(void (*)(void))runtime_define, METH_VARARGS | METH_KEYWORDS,
     "define($self, /, name, source, *, language=None)\n--\n\n"
     "Defines or redefines a function, kernel, type or header (kc_define_lang).\n\n"
     "Kernels that call `name` compile again at their next launch; the others keep their code.\n"
     "Text identical to the visible definition changes nothing.\n\n"
     "Args:\n"
     "    name: the name the source defines (it must mention it).\n"
     "    source: its source text in the kernel dialect (KC_KERNEL, KC_DEVICE, KC_GLOBAL ...),\n"
     "        or in the language named by `language`.\n"
     "    language: None or \"dialect\" (kcache's dialect), \"opencl\" (OpenCL C as written, for\n"
     "        the opencl backend) or \"cuda\" (CUDA C++ as written, for the cuda backend); another\n"
     "        backend's compile of it raises UnavailableError.\n\n"
     "Returns:\n"
     "    The world from which the definition is visible (int).\n\n"
     "Raises:\n"
     "    InvalidArgumentError: a reserved name (kc_, KC_, a keyword) or a source that does not\n"
     "        mention it.\n"
     "    ValueError: an unknown language.\n"
     "    DestroyedError: the runtime is closed."},
    {"undefine", (PyCFunction)runtime_undefine, METH_O,
     "undefine($self, name, /)\n--\n\n"
     "Ends the visible definition of name (kc_undefine); kernels that call it stop compiling.\n\n"
     "Args:\n    name: a defined name.\n\n"
     "Returns:\n"
     "    The new world (int).\n\n"
     "Raises:\n"
     "    NotFoundError: name has no visible definition.\n"
     "    DestroyedError: the runtime is closed."},
    {"define_file", (PyCFunction)(void (*)(void))runtime_define_file, METH_VARARGS | METH_KEYWORDS,
     "define_file($self, /, file, text=None, *, language=None)\n--\n\n"
     "Defines every top-level definition of a source file in one world (kc_define_file_lang).\n\n"
     "Loading the same file again changes only what differs (only the kernels that reach an edited\n"
     "definition compile again) and undefines the names that are gone.\n\n"
     "Args:\n"
     "    file: the file's name, a str or path-like: the identity of its loads.\n"
     "    text: its contents (str or bytes), or None to read the file at path `file`.\n"
     "    language: as for define: \"opencl\" for an OpenCL C file as written (a .cl file of\n"
     "        PyOpenCL's), \"cuda\" for CUDA C++ (a CuPy RawModule's code); None or \"dialect\":\n"
     "        kcache's dialect. Never guessed from the file's name.\n\n"
     "Returns:\n"
     "    FileLoad(world, changed, defined, redefined, undefined).\n\n"
     "Raises:\n"
     "    InvalidArgumentError: a malformed file, with its name and line; nothing is defined.\n"
     "    OSError: text is None and the file cannot be read.\n"
     "    TypeError: text is neither str, bytes nor None.\n"
     "    ValueError: an unknown language."},
    {"kernel", (PyCFunction)(void (*)(void))runtime_kernel, METH_VARARGS | METH_KEYWORDS,
     "kernel($self, name, params=None, /, **specialization)\n--\n\n"
     "A handle on a kernel and a specialization (kc_kernel_create); nothing compiles yet.\n\n"
     "Args:\n"
     "    name: the kernel's name (defined now or later).\n"
     "    params: the specialization as \"T=float,N=4\" or a dict; or give it as keywords\n"
     "        (rt.kernel(\"k\", T=\"float\", N=4)), not both.\n\n"
     "Returns:\n"
     "    A Kernel: k[grid, block](*args) launches it.\n\n"
     "Raises:\n"
     "    InvalidArgumentError: a malformed name or specialization.\n"
     "    ValueError: a parameter's name or value (dict or keywords) holds ',' or '=' (the\n"
     "        string's own syntax), or a NUL character.\n"
     "    TypeError: params is neither a str nor a dict, or given both ways."},
    {"stats", (PyCFunction)runtime_stats, METH_NOARGS,
     "stats($self, /)\n--\n\n"
     "A snapshot of the runtime's counters (kc_stats_get).\n\n"
     "Returns:\n    Stats, every kc_stats counter by name (compiles, launches, disk_hits ...)."},
    {"collect", (PyCFunction)runtime_collect, METH_NOARGS,
     "collect($self, /)\n--\n\n"
     "Frees the code, linked objects and definitions no live world can reach (kc_collect). Safe\n"
     "from any thread at any time: the package's runtimes guard their launches.\n\n"
     "Returns:\n    {'code_instances': n, 'linked': n, 'definitions': n}: what was freed."},
    {"refresh", (PyCFunction)runtime_refresh, METH_NOARGS,
     "refresh($self, /)\n--\n\n"
     "Ends the code that read a header on disk that changed since (kc_refresh).\n\n"
     "Returns:\n    (changed, world): how many headers changed, and the world now."},
    {"pin", (PyCFunction)runtime_pin, METH_NOARGS,
     "pin($self, /)\n--\n\n"
     "A Pin: `with rt.pin() as p:` keeps the calling thread in the latest world (kc_pin) until the\n"
     "block ends, whatever other threads define; p.world is that world."},
    {"create_context", (PyCFunction)(void (*)(void))runtime_create_context, METH_VARARGS | METH_KEYWORDS,
     "create_context($self, /, device=0)\n--\n\n"
     "A new context on a device of the runtime's backend (kc_context_create).\n\n"
     "Args:\n    device: the device's index in rt.devices.\n\n"
     "Returns:\n    A Context (a context manager that destroys it).\n\n"
     "Raises:\n    InvalidArgumentError: no such device."},
    {"buffer", (PyCFunction)runtime_buffer, METH_O,
     "buffer($self, size_or_array, /)\n--\n\n"
     "Device memory on the default context (Buffer(rt.context, size_or_array)).\n\n"
     "Args:\n"
     "    size_or_array: a size in bytes, or an object with the buffer protocol whose bytes are\n"
     "        copied in.\n\n"
     "Returns:\n    A Buffer.\n\n"
     "Raises:\n    OutOfMemoryError: the device has not that much.\n    ValueError: a negative size."},
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"stream", (PyCFunction)(void (*)(void))runtime_stream, METH_VARARGS | METH_KEYWORDS,
     "stream($self, /, native=None, context=None)\n--\n\n"
     "An in-order queue on a context (kc_stream_create), or the caller's own queue wrapped\n"
     "(kc_stream_wrap).\n\n"
     "Args:\n"
     "    native: None for a new queue; else a handle (int), an object with __cuda_stream__, or a\n"
     "        PyOpenCL CommandQueue of kcache's context (.int_ptr), kept alive with the Stream.\n"
     "    context: the Context (default: the runtime's default context).\n\n"
     "Returns:\n    A Stream (a context manager that closes it).\n\n"
     "Raises:\n"
     "    TypeError: native is none of those.\n"
     "    InvalidArgumentError: the context belongs to another runtime."},
#endif
    {"finish", (PyCFunction)runtime_finish, METH_NOARGS,
     "finish($self, /)\n--\n\n"
     "Waits for every launch and copy queued on the default context (the GIL released).\n\n"
     "Raises:\n    LaunchError: a queued launch failed."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef runtime_getset[] = {
    {"backend", (getter)runtime_get_backend, NULL, "The backend in use: 'host', 'opencl' or 'cuda'.", NULL},
    {"world", (getter)runtime_get_world, NULL, "The latest world (int).", NULL},
    {"current_world", (getter)runtime_get_current_world, NULL,
     "The calling thread's world: its pinned one, else the latest (int).", NULL},
    {"cache_dir", (getter)runtime_get_cache_dir, NULL, "The disk cache's directory, or None when it is off.",
     NULL},
    {"devices", (getter)runtime_get_devices, NULL,
     "The backend's device names (list of str); device 0 is the one the runtime compiles for.", NULL},
    {"context", (getter)runtime_get_context, NULL,
     "The default context (device 0), destroyed with the runtime.", NULL},
    {"closed", (getter)runtime_get_closed, NULL, "Whether close() ran (bool).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcRuntime_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Runtime",
    .tp_basicsize = sizeof(KcRuntime),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Runtime(backend='auto', cache_dir=None, compile_options=None, host_cc=None, platform_index=-1, "
        "device_name=None, cache_disable=False, *, cache_max_size=0, log_level=None, compile_timeout_ms=0, "
        "cache_shared=False, checked=False, log='logging')\n--\n\n"
        "A kcache runtime (kc_runtime_create): one function table, one backend, and its default\n"
        "context (device 0). A context manager: leaving the block closes it.\n\n"
        "Args:\n"
        "    backend: 'auto' (CUDA, else OpenCL, else host), 'host', 'opencl' or 'cuda'.\n"
        "    cache_dir: the disk cache's directory (None: $KC_CACHE_DIR, else ~/.cache/kcache).\n"
        "    compile_options: options appended to the backend's compiler's.\n"
        "    host_cc: the host backend's C compiler (None: $KC_HOST_CC, else cc).\n"
        "    platform_index: OpenCL: the platform (-1: the first with a device).\n"
        "    device_name: OpenCL: a device whose name contains this.\n"
        "    cache_disable: no disk cache, whatever the environment says.\n"
        "    cache_max_size: the disk cache's bound in bytes (0: $KC_CACHE_MAXSIZE, kcache.conf, 1 GiB).\n"
        "    log_level: 'error', 'warn', 'info' or 'debug' (None: $KC_LOG, else 'warn'): which of\n"
        "        kcache's messages are made.\n"
        "    compile_timeout_ms: kill a compiler that runs longer (0: 120 s).\n"
        "    cache_shared: the disk cache is a store its group shares.\n"
        "    checked: checked mode (buffer bounds and launch geometry checked at each launch).\n"
        "    log: 'logging' (the default): kcache's messages go to logging.getLogger('kcache') at\n"
        "        the matching level; 'stderr': kcache writes them to the process's stderr itself.\n\n"
        "A Runtime is initialized once: __init__ again (open, or after close()) raises RuntimeError.\n\n"
        "Raises:\n"
        "    UnavailableError: the backend asked for cannot run here (the message says why).\n"
        "    ValueError: an unknown backend, log_level or log; a negative cache_max_size or\n"
        "        compile_timeout_ms; a platform_index below -1.\n"
        "    OverflowError: compile_timeout_ms above 2**32-1, cache_max_size above 2**64-1.\n"
        "    RuntimeError: __init__ on a Runtime initialized before.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)runtime_init,
    .tp_dealloc = (destructor)runtime_dealloc,
    .tp_repr = (reprfunc)runtime_repr,
    .tp_methods = runtime_methods,
    .tp_getset = runtime_getset,
    .tp_weaklistoffset = offsetof(KcRuntime, weakrefs),
};

/* -------------------------------------------------------------------- pin */

/* A pin is the calling thread's (kc_pin): a Pin belongs to the thread that
 * entered it until that thread leaves it as often as it entered it. */
typedef struct KcPin {
  PyObject ob_base;
  KcRuntime *owner;
  kc_world world;
  int held; /* how many times `thread` entered it and has not left */
  unsigned long thread; /* PyThread_get_thread_ident() of the thread that holds it (held > 0) */
} KcPin;

/* BusyError when the pin is held by a thread other than the caller's. */
static int pin_check_thread(KcPin *self, const char *what) {
  if (!self->held || self->thread == PyThread_get_thread_ident()) return 0;
  PyErr_Format(kcpy_error_class(KC_EBUSY),
               "Pin.%s: the pin is held by another thread (ident %lu): a pin is the thread's that entered "
               "it, and only that thread can leave it",
               what, self->thread);
  return -1;
}

static int pin_init(KcPin *self, PyObject *args, PyObject *kw) {
  PyObject *r;
  if (!PyArg_ParseTuple(args, "O!:Pin", &KcRuntime_Type, &r)) return -1;
  if (kw && PyDict_GET_SIZE(kw)) {
    PyErr_SetString(PyExc_TypeError, "Pin() takes no keyword arguments");
    return -1;
  }
  if (self->held) {
    PyErr_Format(kcpy_error_class(KC_EBUSY), "Pin.__init__: the pin is held (leave its with block first)");
    return -1;
  }
  Py_XSETREF(self->owner, (KcRuntime *)Py_NewRef(r));
  return 0;
}

static void pin_dealloc(KcPin *self) {
  Py_CLEAR(self->owner);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *pin_enter(KcPin *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self->owner) < 0 || pin_check_thread(self, "__enter__") < 0) return NULL;
  kc_world w;
  kc_status st = kc_pin(self->owner->rt, &w);
  if (st) return kcpy_raise(self->owner->rt, st, "pin");
  if (!self->held) self->thread = PyThread_get_thread_ident();
  self->world = w;
  self->held++;
  return Py_NewRef(self);
}

static PyObject *pin_exit(KcPin *self, PyObject *args) {
  (void)args;
  if (!self->held) Py_RETURN_FALSE; /* never entered, or left already */
  if (pin_check_thread(self, "__exit__") < 0) return NULL; /* nothing changes */
  if (!self->owner->rt) { /* closed: its pins ended with it (kc_pin) */
    self->held = 0;
    Py_RETURN_FALSE;
  }
  kc_status st = kc_unpin(self->owner->rt);
  if (st) return kcpy_raise(self->owner->rt, st, "unpin"); /* still held */
  self->held--;
  Py_RETURN_FALSE;
}

static PyObject *pin_repr(KcPin *self) {
  if (!self->held) return PyUnicode_FromString("<kcache.Pin not held>");
  return PyUnicode_FromFormat("<kcache.Pin world=%llu>", (unsigned long long)self->world);
}

static PyMethodDef pin_methods[] = {
    {"__enter__", (PyCFunction)pin_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\n"
     "Pins the calling thread to the latest world (kc_pin); returns the Pin. The Pin is that\n"
     "thread's until it leaves it as often as it entered it.\n\n"
     "Raises:\n"
     "    DestroyedError: the runtime is closed.\n"
     "    BusyError: another thread holds this Pin, or this thread pins another runtime."},
    {"__exit__", (PyCFunction)pin_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\n"
     "Unpins (kc_unpin); returns False. A Pin not held (or whose runtime is closed) is left as is.\n\n"
     "Raises:\n    BusyError: another thread holds the Pin (nothing changes)."},
    {NULL, NULL, 0, NULL}};

static PyObject *pin_get_world(KcPin *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(self->world);
}
static PyGetSetDef pin_getset[] = {
    {"world", (getter)pin_get_world, NULL, "The pinned world (0 before the with block).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcPin_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Pin",
    .tp_basicsize = sizeof(KcPin),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pin(runtime, /)\n--\n\n"
              "`with rt.pin() as p:` pins the calling thread to the latest world (kc_pin) until the\n"
              "block ends; p.world is that world.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)pin_init,
    .tp_dealloc = (destructor)pin_dealloc,
    .tp_repr = (reprfunc)pin_repr,
    .tp_methods = pin_methods,
    .tp_getset = pin_getset,
};
