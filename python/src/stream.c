/* SPDX-License-Identifier: MIT */
/*
 * stream.c -- kcache.Stream (kc_stream: an in-order queue of one context,
 * made by kcache or wrapping the caller's native queue): synchronize,
 * wait, its native handle, the __cuda_stream__ protocol on CUDA, close
 * and the context manager. A launch takes one as stream= (kernel.c,
 * args.c) or as k[grid, block, stream].
 *
 * A Stream holds its Context (and so its Runtime). kcache destroys a
 * context's streams with it, and reuses their memory: every call checks
 * that the runtime is open and the context alive (its id unchanged) first.
 */
#include "kcpy.h"

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)

/* The kc_stream of a live Stream, else NULL with DestroyedError (or RuntimeError: runtime closed). */
kc_stream *kcpy_stream_of(KcStream *s) {
  KcContext *c = s->owner;
  if (kcpy_check_open(c->owner) < 0) return NULL;
  if (s->s && c->ctx && kc_context_id(c->ctx) == s->ctx_id) return s->s;
  PyErr_SetString(kcpy_error_class(KC_EDESTROYED),
                  s->s ? "the kcache Stream's context is destroyed" : "the kcache Stream is closed");
  return NULL;
}

/* The native handle of a stream object: __cuda_stream__ -> (version,
 * handle), a PyOpenCL-style .int_ptr, or an int. */
int kcpy_stream_handle(PyObject *o, void **out) {
  PyObject *h = NULL;
  if (PyLong_Check(o)) h = Py_NewRef(o);
  else if (PyObject_HasAttrString(o, "__cuda_stream__")) {
    PyObject *t = PyObject_CallMethod(o, "__cuda_stream__", NULL);
    if (!t) return -1;
    if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2) h = Py_NewRef(PyTuple_GET_ITEM(t, 1));
    Py_DECREF(t);
    if (!h) return PyErr_SetString(PyExc_TypeError, "__cuda_stream__ must return (version, handle)"), -1;
  } else if (PyObject_HasAttrString(o, "int_ptr")) {
    if (!(h = PyObject_GetAttrString(o, "int_ptr"))) return -1;
  } else
    return PyErr_Format(
               PyExc_TypeError,
               "a stream is a kcache Stream, an object with __cuda_stream__ or a raw handle (int), or "
               "a PyOpenCL CommandQueue (.int_ptr), not %s",
               Py_TYPE(o)->tp_name),
           -1;
  if (!PyLong_Check(h)) {
    PyErr_Format(PyExc_TypeError, "a stream's native handle must be an int, not %s", Py_TYPE(h)->tp_name);
    Py_DECREF(h);
    return -1;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(h);
  if (v == (unsigned long long)-1 && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_OverflowError)) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "a stream's native handle must be an int in [0, 2**64-1], not %R", h);
  }
  Py_DECREF(h);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = (void *)(uintptr_t)v;
  return 0;
}

PyObject *kcpy_stream_new(KcContext *c, PyObject *native) {
  if (kcpy_check_open(c->owner) < 0) return NULL;
  if (!c->ctx) return PyErr_Format(PyExc_RuntimeError, "the kcache Context is destroyed");
  void *h = NULL;
  if (native && native != Py_None && kcpy_stream_handle(native, &h) < 0) return NULL;
  kc_stream *st_s = NULL;
  int wrap = native && native != Py_None;
  kc_status st = wrap ? kc_stream_wrap(c->ctx, h, &st_s) : kc_stream_create(c->ctx, &st_s);
  if (st) return kcpy_raise(c->owner->rt, st, wrap ? "Stream (wrap)" : "Stream");
  KcStream *s = PyObject_New(KcStream, &KcStream_Type);
  if (!s) {
    kc_stream_destroy(st_s);
    return NULL;
  }
  s->owner = (KcContext *)Py_NewRef(c);
  s->s = st_s;
  s->ctx_id = kc_context_id(c->ctx);
  s->wrapped = wrap;
  /* a wrapped object (a CuPy or PyOpenCL stream) lives as long as the Stream: kcache does not
   * retain a CUstream */
  s->keep = wrap && !PyLong_Check(native) ? Py_NewRef(native) : NULL;
  s->weakrefs = NULL;
  return (PyObject *)s;
}

static void stream_close_now(KcStream *s) {
  KcContext *c = s->owner;
  if (s->s && c->owner->rt && c->ctx && kc_context_id(c->ctx) == s->ctx_id) kc_stream_destroy(s->s);
  s->s = NULL;
}

static void stream_dealloc(KcStream *self) {
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  stream_close_now(self);
  Py_CLEAR(self->keep);
  Py_CLEAR(self->owner);
  PyObject_Free(self);
}

static PyObject *stream_close(KcStream *self, PyObject *unused) {
  (void)unused;
  if (self->s && kcpy_check_idle(self->owner->owner, "Stream.close") < 0) return NULL;
  stream_close_now(self);
  Py_RETURN_NONE;
}

static PyObject *stream_enter(KcStream *self, PyObject *unused) {
  (void)unused;
  return kcpy_stream_of(self) ? Py_NewRef(self) : NULL;
}

static PyObject *stream_exit(KcStream *self, PyObject *args) {
  (void)args;
  PyObject *r = stream_close(self, NULL);
  if (!r) return NULL;
  Py_DECREF(r);
  Py_RETURN_FALSE;
}

static PyObject *stream_synchronize(KcStream *self, PyObject *unused) {
  (void)unused;
  kc_stream *s = kcpy_stream_of(self);
  if (!s) return NULL;
  kc_status st;
  KCPY_NOGIL(self->owner->owner, st = kc_stream_sync(s));
  if (st) return kcpy_raise(self->owner->owner->rt, st, "Stream.synchronize");
  Py_RETURN_NONE;
}

static PyObject *stream_wait(KcStream *self, PyObject *other) {
  if (!Py_IS_TYPE(other, &KcStream_Type))
    return PyErr_Format(PyExc_TypeError, "Stream.wait takes a kcache Stream, not %s",
                        Py_TYPE(other)->tp_name);
  kc_stream *s = kcpy_stream_of(self), *o = s ? kcpy_stream_of((KcStream *)other) : NULL;
  if (!o) return NULL;
  kc_status st;
  /* the GIL released: on the host, waiting on the context's own queue waits in the call */
  KCPY_NOGIL(self->owner->owner, st = kc_stream_wait(s, o));
  if (st) return kcpy_raise(self->owner->owner->rt, st, "Stream.wait");
  return Py_NewRef(self);
}

static PyObject *stream_get_handle(KcStream *self, void *c) {
  (void)c;
  kc_stream *s = kcpy_stream_of(self);
  void *native = NULL;
  kc_status st = s ? kc_stream_get_native(s, &native) : KC_OK;
  if (!s) return NULL;
  if (st) return kcpy_raise(self->owner->owner->rt, st, "Stream.handle");
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)native);
}

/* __cuda_stream__() -> (0, handle): the CUDA stream protocol (version 0). */
static PyObject *stream_cuda_stream(PyObject *self, PyObject *unused) {
  (void)unused;
  PyObject *h = stream_get_handle((KcStream *)self, NULL);
  return h ? Py_BuildValue("(iN)", 0, h) : NULL;
}

static PyMethodDef cuda_stream_def = {"__cuda_stream__", stream_cuda_stream, METH_NOARGS,
                                      "(0, handle): the CUDA stream protocol"};

/* An attribute only on a CUDA stream, so that hasattr(s, "__cuda_stream__")
 * is true where the protocol means something. */
static PyObject *stream_get_cuda_stream(KcStream *self, void *c) {
  (void)c;
  if (self->owner->owner->backend != KCPY_BACKEND_CUDA)
    return PyErr_Format(PyExc_AttributeError, "__cuda_stream__: a %s stream is not a CUDA stream",
                        self->owner->owner->backend == KCPY_BACKEND_HOST ? "host" : "OpenCL");
  return PyCFunction_New(&cuda_stream_def, (PyObject *)self);
}

static PyObject *stream_get_context(KcStream *self, void *c) {
  (void)c;
  return Py_NewRef(self->owner);
}
static PyObject *stream_get_closed(KcStream *self, void *c) {
  (void)c;
  KcContext *x = self->owner;
  return PyBool_FromLong(!(self->s && x->owner->rt && x->ctx && kc_context_id(x->ctx) == self->ctx_id));
}
static PyObject *stream_get_wrapped(KcStream *self, void *c) {
  (void)c;
  return PyBool_FromLong(self->wrapped);
}

/* <kcache.Stream made backend='opencl' device=0 context=1 handle=0x...>, or closed */
static PyObject *stream_repr(KcStream *self) {
  KcContext *x = self->owner;
  int live = self->s && x->owner->rt && x->ctx && kc_context_id(x->ctx) == self->ctx_id;
  const char *how = self->wrapped ? "wrapped" : "made";
  if (!live) return PyUnicode_FromFormat("<kcache.Stream %s closed>", how);
  void *native = NULL;
  if (kc_stream_get_native(self->s, &native) != KC_OK) native = NULL;
  /* the handle through snprintf: PyUnicode_FromFormat takes no %llx before Python 3.12 */
  char handle[32];
  snprintf(handle, sizeof handle, "0x%llx", (unsigned long long)(uintptr_t)native);
  return PyUnicode_FromFormat("<kcache.Stream %s backend='%s' device=%d context=%llu handle=%s>", how,
                              kc_runtime_backend(x->owner->rt), x->device, (unsigned long long)self->ctx_id,
                              handle);
}

static PyMethodDef stream_methods[] = {
    {"synchronize", (PyCFunction)stream_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\n"
     "Waits until everything queued on the stream is done (kc_stream_sync; the GIL released).\n\n"
     "Raises:\n    LaunchError: a queued launch failed.\n    DestroyedError: the stream is closed."},
    {"wait", (PyCFunction)stream_wait, METH_O,
     "wait($self, other, /)\n--\n\n"
     "Work queued on this stream from now on starts after everything queued on `other` so far\n"
     "(kc_stream_wait; both of one context; on the host a wait in this stream's queue, or, when\n"
     "this is the context's own queue (native=0), in the call, the GIL released).\n\n"
     "Args:\n    other: a Stream of the same context.\n\n"
     "Returns:\n    The stream.\n\n"
     "Raises:\n    TypeError: other is not a Stream.\n    InvalidArgumentError: of another context."},
    {"close", (PyCFunction)stream_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "Destroys the stream after what it queued is done (kc_stream_destroy); a wrapped native queue\n"
     "stays its owner's. Closing a closed stream does nothing."},
    {"__enter__", (PyCFunction)stream_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns the stream.\n\nRaises:\n    DestroyedError: it is closed."},
    {"__exit__", (PyCFunction)stream_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nCloses the stream; returns False."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef stream_getset[] = {
    {"handle", (getter)stream_get_handle, NULL,
     "The native queue as an int: cl_command_queue, CUstream; 0 on the host and for CUDA's legacy\n"
     "stream.",
     NULL},
    {"__cuda_stream__", (getter)stream_get_cuda_stream, NULL,
     "CUDA streams only: () -> (0, handle), the CUDA stream protocol.", NULL},
    {"context", (getter)stream_get_context, NULL, "The Context it queues on.", NULL},
    {"closed", (getter)stream_get_closed, NULL, "Closed, or its context destroyed (bool).", NULL},
    {"wrapped", (getter)stream_get_wrapped, NULL, "Whether it wraps the caller's native queue (bool).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcStream_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Stream",
    .tp_basicsize = sizeof(KcStream),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An in-order queue of one context (Context.stream, Runtime.stream): OpenCL a command queue, "
              "CUDA a stream, the host a queue run by a thread of its own (native=0: the context's own, "
              "synchronous queue). Pass it as launch(..., stream=s) or "
              "k[grid, block, s]; a context manager that closes it.",
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_repr = (reprfunc)stream_repr,
    .tp_methods = stream_methods,
    .tp_getset = stream_getset,
    .tp_weaklistoffset = offsetof(KcStream, weakrefs),
};

#endif
