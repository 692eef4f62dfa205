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
                           NULL};
  PyObject *backend = NULL;
  const char *cache_dir = NULL, *copts = NULL, *host_cc = NULL, *device = NULL, *level = NULL;
  int platform = -1, disable = 0, shared = 0, checked = 0;
  unsigned long long max_size = 0;
  unsigned int timeout = 0;
  if (self->rt) {
    PyErr_SetString(PyExc_RuntimeError, "Runtime already initialized");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|Ozzzizp$KzIpp", kwlist, &backend, &cache_dir, &copts, &host_cc,
                                   &platform, &device, &disable, &max_size, &level, &timeout, &shared,
                                   &checked))
    return -1;
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
  o.compile_timeout_ms = timeout;
  o.cache_shared = shared;
  o.checked = checked;
  /* threads of a Python program cannot keep a rule about when collect()
   * may run: cached launches are guarded, so it may run at any time */
  o.guard_launches = 1;
  kc_runtime *rt = NULL;
  kc_status st;
  Py_BEGIN_ALLOW_THREADS st = kc_runtime_create(&o, &rt);
  Py_END_ALLOW_THREADS if (st) return kcpy_raise(NULL, st, "Runtime"), -1;
  st = kc_context_create(rt, 0, &self->dctx);
  if (st) {
    kcpy_raise(rt, st, "Runtime: the default context");
    kc_runtime_destroy(rt);
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
  for (int i = 0; i < self->nstreams; i++) kc_stream_destroy(self->streams[i].s);
  self->nstreams = 0;
#endif
  Py_BEGIN_ALLOW_THREADS kc_runtime_destroy(rt);
  Py_END_ALLOW_THREADS
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

static PyObject *runtime_define(KcRuntime *self, PyObject *args) {
  const char *name, *src;
  if (!PyArg_ParseTuple(args, "ss:define", &name, &src) || kcpy_check_open(self) < 0) return NULL;
  kc_world w = 0;
  kc_status st = kc_define(self->rt, name, src, &w);
  return st ? kcpy_raise(self->rt, st, NULL) : PyLong_FromUnsignedLongLong(w);
}

static PyObject *runtime_undefine(KcRuntime *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name || kcpy_check_open(self) < 0) return NULL;
  kc_world w = 0;
  kc_status st = kc_undefine(self->rt, name, &w);
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

/* define_file(file, text=None): kc_define_file_ex. file names the file (a str
 * or path-like: the identity of its loads); text is its contents (str or
 * bytes), or None to read the file at that path. */
static PyObject *runtime_define_file(KcRuntime *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"file", "text", NULL};
  PyObject *file, *text = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:define_file", kwlist, &file, &text) ||
      kcpy_check_open(self) < 0)
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
    KCPY_NOGIL(self, st = kc_define_file_ex(self->rt, fname, t, len, on_change, &c, &changed, &w));
    if (st) kcpy_raise(self->rt, st, NULL);
    else out = fileload_new(w, changed, &c);
    PyMem_RawFree(c.buf);
  }
  Py_DECREF(fs);
  Py_XDECREF(name);
  Py_XDECREF(data);
  return out;
}

/* "K=V,K2=V2" from a string, a mapping, or keyword arguments. */
static PyObject *params_text(PyObject *params, PyObject *kw) {
  if (params && params != Py_None && PyUnicode_Check(params)) {
    if (kw && PyDict_GET_SIZE(kw))
      return PyErr_Format(PyExc_TypeError,
                          "give specialization parameters as a string or as keywords, not both");
    return Py_NewRef(params);
  }
  PyObject *d = params && params != Py_None ? params : kw;
  if (!d) return PyUnicode_FromString("");
  if (!PyDict_Check(d)) return PyErr_Format(PyExc_TypeError, "params must be a str or a dict");
  PyObject *parts = PyList_New(0), *k, *v;
  Py_ssize_t pos = 0;
  if (!parts) return NULL;
  while (PyDict_Next(d, &pos, &k, &v)) {
    PyObject *s = PyUnicode_FromFormat("%S=%S", k, v);
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
  if (st) return kcpy_raise(self->rt, st, NULL);
  return Py_BuildValue("(nK)", (Py_ssize_t)changed, (unsigned long long)w);
}

static PyObject *runtime_pin(KcRuntime *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self) < 0) return NULL;
  return PyObject_CallOneArg((PyObject *)&KcPin_Type, (PyObject *)self);
}

static PyObject *runtime_create_context(KcRuntime *self, PyObject *args) {
  int device = 0;
  if (!PyArg_ParseTuple(args, "|i:create_context", &device) || kcpy_check_open(self) < 0) return NULL;
  return (PyObject *)kcpy_context_new(self, device);
}

static PyObject *runtime_buffer(KcRuntime *self, PyObject *args, PyObject *kw) {
  if (kcpy_check_open(self) < 0) return NULL;
  PyObject *ctx = (PyObject *)kcpy_context_new(self, -1);
  PyObject *ctx_args = ctx ? PyTuple_New(PyTuple_GET_SIZE(args) + 1) : NULL;
  if (!ctx_args) {
    Py_XDECREF(ctx);
    return NULL;
  }
  PyTuple_SET_ITEM(ctx_args, 0, ctx);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
    PyTuple_SET_ITEM(ctx_args, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
  PyObject *b = PyObject_Call((PyObject *)&KcBuffer_Type, ctx_args, kw);
  Py_DECREF(ctx_args);
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

static PyMethodDef runtime_methods[] = {
    {"close", (PyCFunction)runtime_close, METH_NOARGS, "Destroys the runtime and everything made from it."},
    {"__enter__", (PyCFunction)runtime_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)runtime_exit, METH_VARARGS, NULL},
    {"define", (PyCFunction)runtime_define, METH_VARARGS,
     "define(name, source) -> world: defines or redefines a function; the world it is visible from."},
    {"undefine", (PyCFunction)runtime_undefine, METH_O, "undefine(name) -> world"},
    {"define_file", (PyCFunction)(void (*)(void))runtime_define_file, METH_VARARGS | METH_KEYWORDS,
     "define_file(file, text=None) -> FileLoad(world, changed, defined, redefined, undefined): defines every "
     "top-level definition of a "
     "source file in one world (kc_define_file); a reload changes only what differs and undefines the "
     "names that are gone. text: str or bytes, or None to read the file at path `file`."},
    {"kernel", (PyCFunction)(void (*)(void))runtime_kernel, METH_VARARGS | METH_KEYWORDS,
     "kernel(name, params=None, **params) -> Kernel: params as \"T=float,N=4\", a dict, or keywords."},
    {"stats", (PyCFunction)runtime_stats, METH_NOARGS, "stats() -> Stats"},
    {"collect", (PyCFunction)runtime_collect, METH_NOARGS, "collect() -> dict: kc_collect"},
    {"refresh", (PyCFunction)runtime_refresh, METH_NOARGS,
     "refresh() -> (changed, world): kc_refresh: ends the code that read a header on disk that changed"},
    {"pin", (PyCFunction)runtime_pin, METH_NOARGS,
     "pin() -> Pin: `with rt.pin() as p:` pins the thread's world."},
    {"create_context", (PyCFunction)runtime_create_context, METH_VARARGS,
     "create_context(device=0) -> Context"},
    {"buffer", (PyCFunction)(void (*)(void))runtime_buffer, METH_VARARGS | METH_KEYWORDS,
     "buffer(size_or_array) -> Buffer on the default context (an array's bytes are copied in)."},
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"stream", (PyCFunction)(void (*)(void))runtime_stream, METH_VARARGS | METH_KEYWORDS,
     "stream(native=None, context=None) -> Stream on the context (default: the default context): a new "
     "queue, or the caller's native one wrapped (a handle, __cuda_stream__ or .int_ptr)."},
#endif
    {"finish", (PyCFunction)runtime_finish, METH_NOARGS, "Waits for the default context's launches."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef runtime_getset[] = {
    {"backend", (getter)runtime_get_backend, NULL, "'host', 'opencl' or 'cuda'", NULL},
    {"world", (getter)runtime_get_world, NULL, "the latest world", NULL},
    {"current_world", (getter)runtime_get_current_world, NULL, "the calling thread's world", NULL},
    {"cache_dir", (getter)runtime_get_cache_dir, NULL, "the disk cache's directory, or None", NULL},
    {"devices", (getter)runtime_get_devices, NULL, "the backend's device names", NULL},
    {"context", (getter)runtime_get_context, NULL, "the default context (device 0)", NULL},
    {"closed", (getter)runtime_get_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcRuntime_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Runtime",
    .tp_basicsize = sizeof(KcRuntime),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Runtime(backend='auto', cache_dir=None, compile_options=None, host_cc=None, platform_index=-1, "
        "device_name=None, cache_disable=False, *, cache_max_size=0, log_level=None, "
        "compile_timeout_ms=0, cache_shared=False, checked=False): a kcache runtime (one function table, one "
        "backend) "
        "and its default context. A context manager: leaving it closes the runtime.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)runtime_init,
    .tp_dealloc = (destructor)runtime_dealloc,
    .tp_methods = runtime_methods,
    .tp_getset = runtime_getset,
    .tp_weaklistoffset = offsetof(KcRuntime, weakrefs),
};

/* -------------------------------------------------------------------- pin */

typedef struct KcPin {
  PyObject ob_base;
  KcRuntime *owner;
  kc_world world;
  int held;
} KcPin;

static int pin_init(KcPin *self, PyObject *args, PyObject *kw) {
  PyObject *r;
  if (!PyArg_ParseTuple(args, "O!:Pin", &KcRuntime_Type, &r) || (kw && PyDict_GET_SIZE(kw))) return -1;
  Py_XSETREF(self->owner, (KcRuntime *)Py_NewRef(r));
  return 0;
}

static void pin_dealloc(KcPin *self) {
  Py_CLEAR(self->owner);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *pin_enter(KcPin *self, PyObject *unused) {
  (void)unused;
  if (kcpy_check_open(self->owner) < 0) return NULL;
  kc_status st = kc_pin(self->owner->rt, &self->world);
  if (st) return kcpy_raise(self->owner->rt, st, "pin");
  self->held++;
  return Py_NewRef(self);
}

static PyObject *pin_exit(KcPin *self, PyObject *args) {
  (void)args;
  if (kcpy_check_open(self->owner) < 0) return NULL;
  if (self->held) {
    self->held--;
    kc_status st = kc_unpin(self->owner->rt);
    if (st) return kcpy_raise(self->owner->rt, st, "unpin");
  }
  Py_RETURN_FALSE;
}

static PyMethodDef pin_methods[] = {{"__enter__", (PyCFunction)pin_enter, METH_NOARGS, NULL},
                                    {"__exit__", (PyCFunction)pin_exit, METH_VARARGS, NULL},
                                    {NULL, NULL, 0, NULL}};

static PyObject *pin_get_world(KcPin *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(self->world);
}
static PyGetSetDef pin_getset[] = {{"world", (getter)pin_get_world, NULL, "the pinned world", NULL},
                                   {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcPin_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Pin",
    .tp_basicsize = sizeof(KcPin),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pin(runtime): `with rt.pin() as p:` pins the calling thread to the latest world (kc_pin) "
              "until the block ends; p.world is that world.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)pin_init,
    .tp_dealloc = (destructor)pin_dealloc,
    .tp_methods = pin_methods,
    .tp_getset = pin_getset,
};
