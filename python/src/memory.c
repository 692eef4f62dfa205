/* SPDX-License-Identifier: MIT */
/*
 * memory.c -- kcache.Context (kc_context: finish, reset, destroy) and
 * kcache.Buffer (kc_buffer: device memory with blocking copies from and
 * to anything with the buffer protocol).
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
  if (!c->ctx) PyErr_SetString(PyExc_RuntimeError, "the kcache Context is destroyed");
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

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
static PyObject *context_get_native(KcContext *self, void *c) {
  (void)c;
  kc_context *x = ctx_of(self);
  return x ? PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)kc_context_native(x)) : NULL;
}
#endif

static PyMethodDef context_methods[] = {
    {"finish", (PyCFunction)context_finish, METH_NOARGS, "Waits for every launch and copy queued on it."},
    {"reset", (PyCFunction)context_reset, METH_NOARGS,
     "Drops every linked object like a device reset; compiled code is kept (the next launch relinks)."},
    {"destroy", (PyCFunction)context_destroy, METH_NOARGS, "Destroys the context and its buffers."},
    {"buffer", (PyCFunction)context_buffer, METH_O, "buffer(size_or_array) -> Buffer on this context"},
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"stream", (PyCFunction)(void (*)(void))context_stream, METH_VARARGS | METH_KEYWORDS,
     "stream(native=None) -> Stream: a new in-order queue on this context, or (native: a handle, an object "
     "with __cuda_stream__ or .int_ptr) the caller's queue wrapped."},
#endif
    {NULL, NULL, 0, NULL}};
static PyGetSetDef context_getset[] = {
    {"id", (getter)context_get_id, NULL, "the context's id", NULL},
    {"device", (getter)context_get_device, NULL, "the device ordinal it was created on", NULL},
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"native", (getter)context_get_native, NULL, "the native context (cl_context, CUcontext; 0 on the host)",
     NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcContext_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Context",
    .tp_basicsize = sizeof(KcContext),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A device session (kc_context): Runtime.create_context(device) or Runtime.context.",
    .tp_dealloc = (destructor)context_dealloc,
    .tp_methods = context_methods,
    .tp_getset = context_getset,
};

/* ----------------------------------------------------------------- buffer */

static kc_buffer *buf_of(KcBuffer *b) {
  if (!ctx_of(b->owner)) return NULL;
  if (!b->buf) PyErr_SetString(PyExc_RuntimeError, "the kcache Buffer is destroyed");
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
    if (PyObject_GetBuffer(what, &view, PyBUF_C_CONTIGUOUS) < 0) return -1;
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

static PyObject *buffer_write(KcBuffer *self, PyObject *args) {
  PyObject *src;
  Py_ssize_t off = 0;
  if (!PyArg_ParseTuple(args, "O|n:write", &src, &off)) return NULL;
  kc_buffer *b = buf_of(self);
  if (!b) return NULL;
  Py_buffer v;
  if (PyObject_GetBuffer(src, &v, PyBUF_C_CONTIGUOUS) < 0) return NULL;
  kc_status st = off < 0 ? KC_EINVAL : kc_buffer_write(b, (size_t)off, v.buf, (size_t)v.len);
  PyBuffer_Release(&v);
  if (st)
    return off < 0 ? PyErr_Format(PyExc_ValueError, "negative offset")
                   : kcpy_raise(self->owner->owner->rt, st, "write");
  Py_RETURN_NONE;
}

/* read(out=None, offset=0): fills `out` (a writable buffer) or returns a bytearray of the rest. */
static PyObject *buffer_read(KcBuffer *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"out", "offset", NULL};
  PyObject *out = Py_None;
  Py_ssize_t off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|On:read", kwlist, &out, &off)) return NULL;
  kc_buffer *b = buf_of(self);
  if (!b) return NULL;
  if (off < 0 || (size_t)off > self->size)
    return PyErr_Format(PyExc_ValueError, "offset %zd out of range", off);
  kc_status st;
  if (out == Py_None) {
    PyObject *ba = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(self->size - (size_t)off));
    if (!ba) return NULL;
    char *dst = PyByteArray_AS_STRING(ba);
    KCPY_NOGIL(self->owner->owner, st = kc_buffer_read(b, (size_t)off, dst, self->size - (size_t)off));
    if (st) {
      Py_DECREF(ba);
      return kcpy_raise(self->owner->owner->rt, st, "read");
    }
    return ba;
  }
  Py_buffer v;
  if (PyObject_GetBuffer(out, &v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return NULL;
  KCPY_NOGIL(self->owner->owner, st = kc_buffer_read(b, (size_t)off, v.buf, (size_t)v.len));
  PyBuffer_Release(&v);
  if (st) return kcpy_raise(self->owner->owner->rt, st, "read");
  return Py_NewRef(out);
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

static PyObject *buffer_get_size(KcBuffer *self, void *c) {
  (void)c;
  return PyLong_FromSize_t(self->buf ? self->size : 0);
}
static PyObject *buffer_get_context(KcBuffer *self, void *c) {
  (void)c;
  return Py_NewRef(self->owner);
}

static PyMethodDef buffer_methods[] = {
    {"write", (PyCFunction)buffer_write, METH_VARARGS,
     "write(src, offset=0): a blocking copy from src's bytes."},
    {"read", (PyCFunction)(void (*)(void))buffer_read, METH_VARARGS | METH_KEYWORDS,
     "read(out=None, offset=0): a blocking copy into out (returned), or a new bytearray."},
    {"destroy", (PyCFunction)buffer_destroy, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};
static PyGetSetDef buffer_getset[] = {{"size", (getter)buffer_get_size, NULL, "bytes", NULL},
                                      {"context", (getter)buffer_get_context, NULL, NULL, NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Buffer",
    .tp_basicsize = sizeof(KcBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffer(context, size_or_array): device memory (kc_buffer); an array's bytes are copied in.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)buffer_init,
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
};
