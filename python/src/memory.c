/* SPDX-License-Identifier: MIT */
/*
 * memory.c -- kcache.Context (kc_context: finish, reset, destroy; a
 * context manager) and kcache.Buffer (kc_buffer: device memory with
 * blocking copies from anything with the buffer protocol and into a
 * writable one, a new NumPy array when NumPy is importable, or bytes; len()
 * is its size; a context manager), with their reprs.
 */
#include "kcpy.h"

/* ---------------------------------------------------------------- context */

KcContext *kcpy_context_new(KcRuntime *r, int device) {
  if (kcpy_check_open(r) < 0) return NULL;
  KcContext *c = PyObject_New(KcContext, &KcContext_Type);
  if (!c) return NULL;
  c->owner = (KcRuntime *)Py_NewRef(r);
  c->ctx = device < 0 ? r->dctx : NULL;
  c->owned = device >= 0;
  c->device = device < 0 ? 0 : device;
  c->exports = 0;
  if (device >= 0) {
    kc_status st = kc_context_create(r->rt, device, &c->ctx);
    if (st) {
      Py_DECREF(c);
      return (KcContext *)kcpy_raise(r->rt, st, "create_context");
    }
  }
  return c;
}

/* The context's kc_context, or NULL with an exception if it (or its runtime) is gone. */
static kc_context *ctx_of(KcContext *c) {
  if (kcpy_check_open(c->owner) < 0) return NULL;
  if (!c->ctx) PyErr_SetString(kcpy_error_class(KC_EDESTROYED), "the kcache Context is destroyed");
  return c->ctx;
}

static void context_dealloc(KcContext *self) {
  if (self->owned && self->ctx && self->owner->rt) {
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    kcpy_streams_purge(self->owner, self->ctx);
#endif
    kc_context_destroy(self->ctx);
  }
  Py_CLEAR(self->owner);
  PyObject_Free(self);
}

static PyObject *context_finish(KcContext *self, PyObject *unused) {
  (void)unused;
  kc_context *c = ctx_of(self);
  if (!c) return NULL;
  kc_status st;
  KCPY_NOGIL(self->owner, st = kc_context_finish(c));
  if (st) return kcpy_raise(self->owner->rt, st, "finish");
  Py_RETURN_NONE;
}

static PyObject *context_reset(KcContext *self, PyObject *unused) {
  (void)unused;
  kc_context *c = ctx_of(self);
  if (!c) return NULL;
  kc_status st = kc_context_reset(c);
  if (st) return kcpy_raise(self->owner->rt, st, "reset");
  Py_RETURN_NONE;
}

static PyObject *context_destroy(KcContext *self, PyObject *unused) {
  (void)unused;
  if (!ctx_of(self)) return NULL;
  if (!self->owned)
    return PyErr_Format(PyExc_RuntimeError, "the default context is destroyed with its Runtime (close())");
  if (kcpy_check_idle(self->owner, "Context.destroy") < 0 ||
      kcpy_check_exports(self->exports, "Context.destroy") < 0)
    return NULL;
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  kcpy_streams_purge(self->owner, self->ctx);
#endif
  kc_context_destroy(self->ctx);
  self->ctx = NULL;
  Py_RETURN_NONE;
}

static PyObject *context_buffer(KcContext *self, PyObject *arg) {
  if (!ctx_of(self)) return NULL;
  return PyObject_CallFunctionObjArgs((PyObject *)&KcBuffer_Type, (PyObject *)self, arg, NULL);
}

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
static PyObject *context_stream(KcContext *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"native", NULL};
  PyObject *native = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:stream", kwlist, &native)) return NULL;
  return kcpy_stream_new(self, native);
}
#endif

static PyObject *context_get_id(KcContext *self, void *c) {
  (void)c;
  kc_context *x = ctx_of(self);
  return x ? PyLong_FromUnsignedLongLong(kc_context_id(x)) : NULL;
}

static PyObject *context_get_device(KcContext *self, void *c) {
  (void)c;
  return ctx_of(self) ? PyLong_FromLong(self->device) : NULL;
}

static PyObject *context_get_destroyed(KcContext *self, void *c) {
  (void)c;
  return PyBool_FromLong(!self->ctx || !self->owner->rt);
}

static PyObject *context_get_runtime(KcContext *self, void *c) {
  (void)c;
  return Py_NewRef(self->owner);
}

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
static PyObject *context_get_native(KcContext *self, void *c) {
  (void)c;
  kc_context *x = ctx_of(self);
  return x ? PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)kc_context_native(x)) : NULL;
}
#endif

static PyObject *context_enter(KcContext *self, PyObject *unused) {
  (void)unused;
  return ctx_of(self) ? Py_NewRef(self) : NULL;
}

/* Leaving `with ctx:` destroys a context the caller made; the default one stays with its Runtime. */
static PyObject *context_exit(KcContext *self, PyObject *args) {
  (void)args;
  if (self->owned && self->ctx && self->owner->rt) {
    PyObject *r = context_destroy(self, NULL);
    if (!r) return NULL;
    Py_DECREF(r);
  }
  Py_RETURN_FALSE;
}

/* <kcache.Context backend='opencl' device=0 'pthread-...' id=2>, "default" for the runtime's own */
static PyObject *context_repr(KcContext *self) {
  KcRuntime *r = self->owner;
  if (!r->rt || !self->ctx)
    return PyUnicode_FromFormat("<kcache.Context device=%d %s>", self->device,
                                r->rt ? "destroyed" : "closed (its Runtime is closed)");
  const char *dev = kc_device_name(r->rt, self->device);
  return PyUnicode_FromFormat("<kcache.Context backend='%s' device=%d '%s' id=%llu%s>",
                              kc_runtime_backend(r->rt), self->device, dev ? dev : "?",
                              (unsigned long long)kc_context_id(self->ctx), self->owned ? "" : " default");
}

static PyMethodDef context_methods[] = {
    {"finish", (PyCFunction)context_finish, METH_NOARGS,
     "finish($self, /)\n--\n\n"
     "Waits for every launch and copy queued on the context (kc_context_finish; the GIL released).\n\n"
     "Raises:\n    LaunchError: a queued launch failed.\n    DestroyedError: the runtime is closed."},
    {"reset", (PyCFunction)context_reset, METH_NOARGS,
     "reset($self, /)\n--\n\n"
     "Drops every linked object, like a device reset (kc_context_reset); compiled code is kept and\n"
     "the next launch links it again."},
    {"destroy", (PyCFunction)context_destroy, METH_NOARGS,
     "destroy($self, /)\n--\n\n"
     "Destroys the context with its buffers and streams (kc_context_destroy).\n\n"
     "Raises:\n"
     "    RuntimeError: it is the runtime's default context (it goes with Runtime.close()), or it is\n"
     "        already destroyed.\n"
     "    BusyError: a view of one of its Buffers' memory is alive, or another thread is inside a\n"
     "        call on the runtime."},
    {"buffer", (PyCFunction)context_buffer, METH_O,
     "buffer($self, size_or_array, /)\n--\n\n"
     "Device memory on this context: Buffer(self, size_or_array).\n\n"
     "Args:\n"
     "    size_or_array: a size in bytes, or an object with the buffer protocol whose bytes are\n"
     "        copied in.\n\n"
     "Returns:\n    A Buffer.\n\n"
     "Raises:\n    OutOfMemoryError: the device has not that much.\n    DestroyedError: the context is "
     "gone."},
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"stream", (PyCFunction)(void (*)(void))context_stream, METH_VARARGS | METH_KEYWORDS,
     "stream($self, /, native=None)\n--\n\n"
     "An in-order queue on this context (kc_stream_create), or the caller's own wrapped.\n\n"
     "Args:\n"
     "    native: None for a new queue; else a handle (int), an object with __cuda_stream__, or a\n"
     "        PyOpenCL CommandQueue of kcache's context (.int_ptr), kept alive with the Stream.\n\n"
     "Returns:\n    A Stream (a context manager that closes it).\n\n"
     "Raises:\n    TypeError: native is none of those.\n    DestroyedError: the context is gone."},
#endif
    {"__enter__", (PyCFunction)context_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns the context.\n\nRaises:\n    RuntimeError: it is destroyed."},
    {"__exit__", (PyCFunction)context_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\n"
     "Destroys the context (see destroy()), unless it is the runtime's default context, which stays\n"
     "with its Runtime; returns False."},
    {NULL, NULL, 0, NULL}};
static PyGetSetDef context_getset[] = {
    {"id", (getter)context_get_id, NULL, "The context's id (kc_context_id), never reused.", NULL},
    {"device", (getter)context_get_device, NULL, "The device index it was created on.", NULL},
    {"destroyed", (getter)context_get_destroyed, NULL, "Whether it (or its runtime) is gone (bool).", NULL},
    {"runtime", (getter)context_get_runtime, NULL, "The Runtime it belongs to.", NULL},
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"native", (getter)context_get_native, NULL,
     "The native context as an int: cl_context, CUcontext; 0 on the host.", NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcContext_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Context",
    .tp_basicsize = sizeof(KcContext),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A device session (kc_context): Runtime.create_context(device), or Runtime.context (the\n"
              "default one). A context manager: leaving the block destroys a context made by\n"
              "create_context.",
    .tp_dealloc = (destructor)context_dealloc,
    .tp_repr = (reprfunc)context_repr,
    .tp_methods = context_methods,
    .tp_getset = context_getset,
};

/* ----------------------------------------------------------------- buffer */

static kc_buffer *buf_of(KcBuffer *b) {
  if (!b->owner) /* made by Buffer.__new__ alone */
    return PyErr_SetString(kcpy_error_class(KC_EDESTROYED), "the kcache Buffer was never initialised"), NULL;
  if (!ctx_of(b->owner)) return NULL;
  if (!b->buf) PyErr_SetString(kcpy_error_class(KC_EDESTROYED), "the kcache Buffer is destroyed");
  return b->buf;
}

static int buffer_init(KcBuffer *self, PyObject *args, PyObject *kw) {
  PyObject *ctx, *what;
  if (self->buf || (kw && PyDict_GET_SIZE(kw)))
    return PyErr_SetString(PyExc_TypeError, "Buffer(context, size_or_array)"), -1;
  if (!PyArg_ParseTuple(args, "O!O:Buffer", &KcContext_Type, &ctx, &what)) return -1;
  Py_XSETREF(self->owner, (KcContext *)Py_NewRef(ctx));
  kc_context *c = ctx_of(self->owner);
  if (!c) return -1;
  Py_buffer view = {0};
  size_t size;
  if (PyObject_CheckBuffer(what)) {
    if (PyObject_GetBuffer(what, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (kcpy_format_has_objects(view.format)) {
      PyBuffer_Release(&view);
      return PyErr_SetString(PyExc_TypeError,
                             "Buffer: the array holds Python objects (dtype object), not values"),
             -1;
    }
    size = (size_t)view.len;
  } else {
    Py_ssize_t n = PyNumber_AsSsize_t(what, PyExc_OverflowError);
    if (n < 0) return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "negative size"), -1);
    size = (size_t)n;
  }
  kc_status st = kc_buffer_create(c, size, &self->buf);
  if (!st && view.obj) st = kc_buffer_write(self->buf, 0, view.buf, size);
  if (view.obj) PyBuffer_Release(&view);
  if (st) return kcpy_raise(self->owner->owner->rt, st, "Buffer"), -1;
  self->size = size;
  return 0;
}

static void buffer_dealloc(KcBuffer *self) {
  if (self->buf && self->owner && self->owner->ctx && self->owner->owner->rt) kc_buffer_destroy(self->buf);
  Py_CLEAR(self->owner);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *buffer_write(KcBuffer *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"src", "offset", NULL};
  PyObject *src;
  Py_ssize_t off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n:write", kwlist, &src, &off)) return NULL;
  kc_buffer *b = buf_of(self);
  if (!b) return NULL;
  Py_buffer v;
  if (PyObject_GetBuffer(src, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
  if (kcpy_format_has_objects(v.format)) { /* their pointers are no data for a kernel */
    PyBuffer_Release(&v);
    return PyErr_Format(PyExc_TypeError, "write: src holds Python objects (dtype object), not values");
  }
  kc_status st = off < 0 ? KC_EINVAL : kc_buffer_write(b, (size_t)off, v.buf, (size_t)v.len);
  PyBuffer_Release(&v);
  if (st)
    return off < 0 ? PyErr_Format(PyExc_ValueError, "negative offset")
                   : kcpy_raise(self->owner->owner->rt, st, "write");
  Py_RETURN_NONE;
}

/* numpy, imported at the first read() that needs it; Py_None when it is not installed. */
static PyObject *numpy_module;

static PyObject *numpy_or_none(void) {
  if (!numpy_module) {
    numpy_module = PyImport_ImportModule("numpy");
    if (!numpy_module) {
      if (!PyErr_ExceptionMatches(PyExc_ImportError)) return NULL;
      PyErr_Clear();
      numpy_module = Py_NewRef(Py_None);
    }
  }
  return numpy_module;
}

/* A new object of n bytes to read into: a NumPy array of dtype (uint8 when
 * None), else (no NumPy) a bytearray; NULL with an exception. */
static PyObject *new_target(PyObject *dtype, size_t n, const char *what) {
  PyObject *np = numpy_or_none();
  if (!np) return NULL;
  if (np == Py_None) {
    if (dtype != Py_None)
      return PyErr_Format(PyExc_ImportError, "%s: dtype= needs NumPy, which is not installed", what);
    return PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n);
  }
  PyObject *dt = dtype == Py_None ? PyObject_CallMethod(np, "dtype", "s", "uint8")
                                  : PyObject_CallMethod(np, "dtype", "O", dtype);
  if (!dt) return NULL;
  PyObject *isz = PyObject_GetAttrString(dt, "itemsize");
  Py_ssize_t itemsize = isz ? PyLong_AsSsize_t(isz) : -1;
  Py_XDECREF(isz);
  PyObject *out = NULL;
  if (itemsize <= 0) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: dtype %R has no size", what, dt);
  } else if (n % (size_t)itemsize)
    PyErr_Format(PyExc_ValueError, "%s: %zu bytes are not a whole number of %R elements (%zd bytes each)",
                 what, n, dt, itemsize);
  else out = PyObject_CallMethod(np, "empty", "nO", (Py_ssize_t)(n / (size_t)itemsize), dt);
  Py_DECREF(dt);
  return out;
}

static PyObject *buffer_read(KcBuffer *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"out", "offset", "dtype", NULL};
  PyObject *out = Py_None, *dtype = Py_None;
  Py_ssize_t off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|On$O:read", kwlist, &out, &off, &dtype)) return NULL;
  kc_buffer *b = buf_of(self);
  if (!b) return NULL;
  if (off < 0 || (size_t)off > self->size)
    return PyErr_Format(PyExc_ValueError, "offset %zd out of range (the buffer has %zu bytes)", off,
                        self->size);
  if (out != Py_None && dtype != Py_None)
    return PyErr_Format(PyExc_TypeError, "read: give out= or dtype=, not both (out has its own type)");
  PyObject *target = out != Py_None ? Py_NewRef(out) : new_target(dtype, self->size - (size_t)off, "read");
  if (!target) return NULL;
  Py_buffer v;
  if (PyObject_GetBuffer(target, &v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
    Py_DECREF(target);
    return NULL;
  }
  if (kcpy_format_has_objects(v.format)) { /* raw bytes over its PyObject pointers would crash it */
    PyBuffer_Release(&v);
    Py_DECREF(target);
    return PyErr_Format(PyExc_TypeError,
                        "read: %s holds Python objects (dtype object): read into an array "
                        "of values",
                        out != Py_None ? "out" : "the dtype");
  }
  kc_status st;
  KCPY_NOGIL(self->owner->owner, st = kc_buffer_read(b, (size_t)off, v.buf, (size_t)v.len));
  PyBuffer_Release(&v);
  if (st) {
    Py_DECREF(target);
    return kcpy_raise(self->owner->owner->rt, st, "read");
  }
  return target;
}

static PyObject *buffer_tobytes(KcBuffer *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"offset", NULL};
  Py_ssize_t off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|n:tobytes", kwlist, &off)) return NULL;
  kc_buffer *b = buf_of(self);
  if (!b) return NULL;
  if (off < 0 || (size_t)off > self->size)
    return PyErr_Format(PyExc_ValueError, "offset %zd out of range (the buffer has %zu bytes)", off,
                        self->size);
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(self->size - (size_t)off));
  if (!out) return NULL;
  char *dst = PyBytes_AS_STRING(out);
  kc_status st;
  KCPY_NOGIL(self->owner->owner, st = kc_buffer_read(b, (size_t)off, dst, self->size - (size_t)off));
  if (st) {
    Py_DECREF(out);
    return kcpy_raise(self->owner->owner->rt, st, "tobytes");
  }
  return out;
}

static PyObject *buffer_destroy(KcBuffer *self, PyObject *unused) {
  (void)unused;
  kc_buffer *b = buf_of(self);
  if (!b || kcpy_check_idle(self->owner->owner, "Buffer.destroy") < 0 ||
      kcpy_check_exports(self->exports, "Buffer.destroy") < 0)
    return NULL;
  kc_buffer_destroy(b);
  self->buf = NULL;
  Py_RETURN_NONE;
}

static PyObject *buffer_enter(KcBuffer *self, PyObject *unused) {
  (void)unused;
  return buf_of(self) ? Py_NewRef(self) : NULL;
}

/* Leaving `with buf:` destroys it (nothing to do when its context or runtime went first). */
static PyObject *buffer_exit(KcBuffer *self, PyObject *args) {
  (void)args;
  if (self->buf && self->owner->ctx && self->owner->owner->rt) {
    PyObject *r = buffer_destroy(self, NULL);
    if (!r) return NULL;
    Py_DECREF(r);
  }
  Py_RETURN_FALSE;
}

static int buffer_live(const KcBuffer *b) { return b->buf && b->owner->ctx && b->owner->owner->rt; }

static Py_ssize_t buffer_len(KcBuffer *self) { return buffer_live(self) ? (Py_ssize_t)self->size : 0; }

static PyObject *buffer_get_size(KcBuffer *self, void *c) {
  (void)c;
  return PyLong_FromSsize_t(buffer_len(self));
}
static PyObject *buffer_get_context(KcBuffer *self, void *c) {
  (void)c;
  if (!self->owner) return buf_of(self), NULL; /* never initialised: says so */
  return Py_NewRef(self->owner);
}
static PyObject *buffer_get_destroyed(KcBuffer *self, void *c) {
  (void)c;
  return PyBool_FromLong(!buffer_live(self));
}

/* <kcache.Buffer size=256 backend='host' device=0 context=1>, or destroyed */
static PyObject *buffer_repr(KcBuffer *self) {
  if (!buffer_live(self))
    return PyUnicode_FromFormat("<kcache.Buffer destroyed (was %zu bytes)>", self->size);
  KcContext *c = self->owner;
  return PyUnicode_FromFormat("<kcache.Buffer size=%zu backend='%s' device=%d context=%llu>", self->size,
                              kc_runtime_backend(c->owner->rt), c->device,
                              (unsigned long long)kc_context_id(c->ctx));
}

static PySequenceMethods buffer_sequence = {.sq_length = (lenfunc)buffer_len};

static PyMethodDef buffer_methods[] = {
    {"write", (PyCFunction)(void (*)(void))buffer_write, METH_VARARGS | METH_KEYWORDS,
     "write($self, /, src, offset=0)\n--\n\n"
     "A blocking copy of src's bytes into the buffer at offset (kc_buffer_write).\n\n"
     "Args:\n"
     "    src: an object with the buffer protocol (a NumPy array, bytes, bytearray ...), C-contiguous.\n"
     "    offset: where in the buffer, in bytes.\n\n"
     "Raises:\n"
     "    InvalidArgumentError: it does not fit.\n"
     "    ValueError: a negative offset.\n"
     "    DestroyedError: the buffer, its context or its runtime is gone."},
    {"read", (PyCFunction)(void (*)(void))buffer_read, METH_VARARGS | METH_KEYWORDS,
     "read($self, /, out=None, offset=0, *, dtype=None)\n--\n\n"
     "A blocking copy of the buffer's bytes from offset (kc_buffer_read; the GIL released).\n\n"
     "Args:\n"
     "    out: a writable, C-contiguous object with the buffer protocol to fill (as many bytes as it\n"
     "        holds); it is returned.\n"
     "    offset: where in the buffer, in bytes.\n"
     "    dtype: without out: the NumPy dtype of the new array (default uint8).\n\n"
     "Returns:\n"
     "    out; else, when NumPy is installed, a new one-dimensional NumPy array of dtype holding\n"
     "    the bytes from offset to the end; without NumPy, a bytearray. tobytes() gives bytes.\n\n"
     "Raises:\n"
     "    InvalidArgumentError: out holds more than the buffer has from offset.\n"
     "    ValueError: an offset out of range, or a size that is not whole elements of dtype.\n"
     "    ImportError: dtype given without NumPy.\n"
     "    DestroyedError: the buffer, its context or its runtime is gone."},
    {"tobytes", (PyCFunction)(void (*)(void))buffer_tobytes, METH_VARARGS | METH_KEYWORDS,
     "tobytes($self, /, offset=0)\n--\n\n"
     "The buffer's bytes from offset to the end, as bytes (a blocking copy).\n\n"
     "Args:\n    offset: where in the buffer to start, in bytes.\n\n"
     "Returns:\n    bytes.\n\n"
     "Raises:\n"
     "    ValueError: an offset out of range.\n"
     "    DestroyedError: the buffer, its context or its runtime is gone."},
    {"destroy", (PyCFunction)buffer_destroy, METH_NOARGS,
     "destroy($self, /)\n--\n\n"
     "Frees the memory now (kc_buffer_destroy); len() is 0 afterwards.\n\n"
     "Raises:\n"
     "    BusyError: a view of its memory (memoryview, np.frombuffer, np.from_dlpack) is alive.\n"
     "    DestroyedError: it is already destroyed."},
    {"__enter__", (PyCFunction)buffer_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns the buffer.\n\nRaises:\n    DestroyedError: it is destroyed."},
    {"__exit__", (PyCFunction)buffer_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\n"
     "Destroys the buffer (see destroy()); returns False."},
    {NULL, NULL, 0, NULL}};
static PyGetSetDef buffer_getset[] = {
    {"size", (getter)buffer_get_size, NULL, "Its size in bytes (0 once destroyed); len(buf) too.", NULL},
    {"context", (getter)buffer_get_context, NULL, "The Context it lives on.", NULL},
    {"destroyed", (getter)buffer_get_destroyed, NULL, "Whether it (or its context or runtime) is gone.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Buffer",
    .tp_basicsize = sizeof(KcBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffer(context, size_or_array, /)\n--\n\n"
              "Device memory on a context (kc_buffer_create); Runtime.buffer and Context.buffer make one.\n"
              "A kernel's pointer parameter takes it by handle, with no copy. len(buf) is its size in\n"
              "bytes. A context manager: leaving the block destroys it.\n\n"
              "Args:\n"
              "    context: the Context.\n"
              "    size_or_array: a size in bytes, or an object with the buffer protocol (C-contiguous)\n"
              "        whose bytes are copied in.\n\n"
              "Raises:\n"
              "    OutOfMemoryError: the device has not that much.\n"
              "    ValueError: a negative size.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)buffer_init,
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_repr = (reprfunc)buffer_repr,
    .tp_as_sequence = &buffer_sequence,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
};
