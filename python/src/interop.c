/* SPDX-License-Identifier: MIT */
/*
 * interop.c -- memory and streams that are not kcache's, through the
 * interop API of kcache.h (KC_ARG_DEVPTR, kc_stream_wrap, kc_launch_ex):
 *  - on the host backend, an array with the buffer protocol is passed by
 *    its own pointer (zero copy: the kernel reads and writes the array);
 *  - on CUDA, an object with __cuda_array_interface__ (CuPy, Numba,
 *    PyTorch) or __dlpack__ on a CUDA device is passed by its device
 *    pointer, with no copy;
 *  - a launch's stream= takes an object with __cuda_stream__ or a raw
 *    handle (CUstream, cl_command_queue), wrapped once per runtime.
 * Built only when kcache.h declares that API (KC_ARG_DEVPTR) and the library
 * implements it (KCPY_INTEROP, python/CMakeLists.txt); without it
 * arrays are staged through buffers (args.c) and stream= is refused.
 */
#include "kcpy.h"

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)

#include <stdlib.h>
#include <string.h>

/* The device pointer of a __cuda_array_interface__ dict: 1 found, 0 not one, -1 error. */
static int cai_pointer(PyObject *o, void **out, char *kind, Py_ssize_t *isz) {
  PyObject *cai = PyObject_GetAttrString(o, "__cuda_array_interface__");
  if (!cai) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1; /* KeyboardInterrupt ...: as it is */
    PyErr_Clear();
    return 0;
  }
  PyObject *data = PyDict_Check(cai) ? PyDict_GetItemString(cai, "data") : NULL;
  PyObject *strides = PyDict_Check(cai) ? PyDict_GetItemString(cai, "strides") : NULL;
  PyObject *ts = PyDict_Check(cai) ? PyDict_GetItemString(cai, "typestr") : NULL;
  const char *t = ts && PyUnicode_Check(ts) ? PyUnicode_AsUTF8(ts) : NULL;
  if (!t) PyErr_Clear();
  /* "<f4": byte order, kind (f, i, u, b ...), size */
  *kind = t && strlen(t) >= 3 ? (t[1] == 'f' ? 'f' : strchr("iub", t[1]) ? 'i' : 0) : 0;
  *isz = t && strlen(t) >= 3 ? atoi(t + 2) : 0;
  int rc = -1;
  if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1)
    PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ without a 'data' tuple");
  else if (strides && strides != Py_None)
    PyErr_SetString(PyExc_TypeError, "a strided CUDA array: pass a contiguous one (strides must be None)");
  else {
    unsigned long long p = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
    if (!(p == (unsigned long long)-1 && PyErr_Occurred())) *out = (void *)(uintptr_t)p, rc = 1;
  }
  Py_DECREF(cai);
  return rc;
}

/* 1 when o has the attribute, 0 when it has not (AttributeError), -1 for any other error. */
static int has_attr(PyObject *o, const char *name) {
  PyObject *a = PyObject_GetAttrString(o, name);
  if (a) return Py_DECREF(a), 1;
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
  PyErr_Clear();
  return 0;
}

/* The data pointer of a __dlpack__ tensor on a CUDA device: 1, 0, -1 as above. */
static int dlpack_pointer(PyObject *o, void **out, char *kind, Py_ssize_t *isz) {
  int has = has_attr(o, "__dlpack__");
  if (has > 0) has = has_attr(o, "__dlpack_device__");
  if (has <= 0) return has;
  /* only a tensor on a CUDA device is passed by pointer: a host one (NumPy
   * has __dlpack__ too) is staged like any buffer */
  PyObject *dev = PyObject_CallMethod(o, "__dlpack_device__", NULL);
  if (!dev) return -1;
  long type = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)) : -1;
  Py_DECREF(dev);
  if (type == -1 && PyErr_Occurred()) return -1;
  if (type != 2 && type != 13) return 0; /* kDLCUDA, kDLCUDAManaged */
  PyObject *cap = PyObject_CallMethod(o, "__dlpack__", NULL);
  if (!cap) return -1;
  int rc = -1;
  kcpy_dlmanaged *m = PyCapsule_IsValid(cap, "dltensor") ? PyCapsule_GetPointer(cap, "dltensor") : NULL;
  if (!m) PyErr_SetString(PyExc_TypeError, "__dlpack__ did not return a 'dltensor' capsule");
  else {
    kcpy_dltensor *t = &m->dl_tensor;
    if (t->device.device_type != 2 && t->device.device_type != 13)
      PyErr_Format(PyExc_TypeError, "a DLPack tensor on device type %d, not CUDA", t->device.device_type);
    else if (!kcpy_dl_contiguous(t))
      PyErr_SetString(PyExc_TypeError, "a strided DLPack tensor: pass a contiguous one");
    else {
      *out = (char *)t->data + t->byte_offset, rc = 1;
      *kind = kcpy_dl_kind(t->dtype);
      *isz = t->dtype.bits / 8;
    }
  }
  /* the capsule was not consumed: its destructor calls the tensor's
   * deleter; o (alive through the launch) keeps the memory */
  Py_DECREF(cap);
  return rc;
}

int kcpy_foreign_arg(KcKernel *k, uint32_t i, PyObject *o, kc_arg *a, Py_buffer *view) {
  void *p = NULL;
  int rc;
  view->obj = NULL;
  if (k->owner->backend == KCPY_BACKEND_HOST) {
    /* the buffer protocol, __array_interface__ or a CPU __dlpack__ (arrays.c) */
    rc = kcpy_host_view(k, i, o, view);
    if (rc <= 0) return rc; /* 0: args.c says why */
    if (view->readonly && !k->p[i].to_const) {
      PyErr_Format(PyExc_TypeError,
                   "kernel '%U', argument %u '%s': a read-only array for a pointer that is not to const: the "
                   "kernel would write into it (declare the parameter const, or pass a writable copy)",
                   k->name, i + 1, k->p[i].name);
      PyBuffer_Release(view);
      view->obj = NULL;
      return -1;
    }
    *a = KC_ARG_DEVPTR(view->buf); /* released after the launch, nothing copied back */
    return 1;
  }
  if (k->owner->backend != KCPY_BACKEND_CUDA) return 0;
  char kind = 0;
  Py_ssize_t isz = 0;
  rc = cai_pointer(o, &p, &kind, &isz);
  if (rc == 0) rc = dlpack_pointer(o, &p, &kind, &isz);
  if (rc == 1 && kcpy_check_elem(k, i, kind, isz, o) < 0) return -1;
  if (rc < 0) {
    /* "not such an array" said with the argument's name; KeyboardInterrupt, MemoryError ... as they are */
    if (!kcpy_err_translatable()) return -1;
    PyObject *value = kcpy_err_take();
    PyErr_Format(PyExc_TypeError, "kernel '%U', argument %u '%s': %S", k->name, i + 1, k->p[i].name,
                 value ? value : Py_None);
    kcpy_err_chain(value);
    return -1;
  }
  if (rc == 1) *a = KC_ARG_DEVPTR(p);
  return rc;
}

int kcpy_stream(KcRuntime *r, kc_context *ctx, PyObject *o, kc_stream **out) {
  *out = NULL;
  if (o == Py_None) return 0;
  if (Py_IS_TYPE(o, &KcStream_Type)) return (*out = kcpy_stream_of((KcStream *)o)) ? 0 : -1;
  void *native;
  if (kcpy_stream_handle(o, &native) < 0) return -1;
  uint64_t id = kc_context_id(ctx);
  for (Py_ssize_t i = 0; i < r->nstreams; i++)
    if (r->streams[i].native == native && r->streams[i].ctx == ctx && r->streams[i].ctx_id == id)
      return *out = r->streams[i].s, 0;
  /* each distinct handle is wrapped once and kept until the runtime closes (or the context is
   * destroyed): a launch elsewhere may still hold the kc_stream, and the handle may come again */
  if (r->nstreams == r->streams_cap) {
    Py_ssize_t cap = r->streams_cap ? r->streams_cap * 2 : 16;
    kcpy_stream_ref *grown = PyMem_Realloc(r->streams, (size_t)cap * sizeof *grown);
    if (!grown) return PyErr_NoMemory(), -1;
    r->streams = grown;
    r->streams_cap = cap;
  }
  kc_stream *s;
  kc_status st = kc_stream_wrap(ctx, native, &s);
  if (st) return kcpy_raise(r->rt, st, "stream"), -1;
  r->streams[r->nstreams++] = (kcpy_stream_ref){native, ctx, id, s};
  *out = s;
  return 0;
}

void kcpy_streams_purge(KcRuntime *r, kc_context *ctx) {
  Py_ssize_t n = 0;
  for (Py_ssize_t i = 0; i < r->nstreams; i++)
    if (r->streams[i].ctx != ctx) r->streams[n++] = r->streams[i];
  r->nstreams = n; /* the kc_streams themselves go with the context */
}

#endif /* KC_ARG_DEVPTR */

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
/* kcache Buffers exported: the buffer protocol on the host backend (the
 * buffer's own memory, kc_buffer_native), __cuda_array_interface__ on
 * CUDA (its device pointer, as bytes). */
/* One export of b's memory made (+1) or released (-1): counted in b, its
 * Context and its Runtime, whose destroy/close refuse while any is alive. */
static void export_count(KcBuffer *b, int d) {
  b->exports += d;
  b->owner->exports += d;
  b->owner->owner->exports += d;
}

static int buffer_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  KcBuffer *b = (KcBuffer *)self;
  void *p = b->buf && b->owner->ctx && b->owner->owner->rt ? kc_buffer_native(b->buf) : NULL;
  if (!p || b->owner->owner->backend != KCPY_BACKEND_HOST) {
    PyErr_SetString(PyExc_BufferError, "only a live host-backend kcache Buffer exports its memory");
    view->obj = NULL;
    return -1;
  }
  if (PyBuffer_FillInfo(view, self, p, (Py_ssize_t)b->size, 0, flags) < 0) return -1;
  export_count(b, 1);
  return 0;
}

static void buffer_releasebuffer(PyObject *self, Py_buffer *view) {
  (void)view;
  export_count((KcBuffer *)self, -1);
}

static PyBufferProcs buffer_procs = {.bf_getbuffer = buffer_getbuffer,
                                     .bf_releasebuffer = buffer_releasebuffer};

static PyObject *buffer_get_cai(PyObject *self, void *c) {
  (void)c;
  KcBuffer *b = (KcBuffer *)self;
  void *p = b->buf && b->owner->ctx && b->owner->owner->rt ? kc_buffer_native(b->buf) : NULL;
  if (!p || b->owner->owner->backend != KCPY_BACKEND_CUDA)
    return PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__: not a live CUDA kcache Buffer");
  return Py_BuildValue("{s(n)sss(KO)sisO}", "shape", (Py_ssize_t)b->size, "typestr", "|u1", "data",
                       (unsigned long long)(uintptr_t)p, Py_False, "version", 3, "strides", Py_None);
}

static PyGetSetDef buffer_interop_getset[] = {
    {"__cuda_array_interface__", buffer_get_cai, NULL, "CUDA: the buffer's device memory, as bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyObject *kcpy_buffer_dlpack(PyObject *self, PyObject *args, PyObject *kw);
PyObject *kcpy_buffer_dlpack_device(PyObject *self, PyObject *unused);

int kcpy_interop_init_types(void) {
  KcBuffer_Type.tp_as_buffer = &buffer_procs;
  if (PyType_Ready(&KcBuffer_Type) < 0) return -1;
  for (PyGetSetDef *g = buffer_interop_getset; g->name; g++) {
    PyObject *d = PyDescr_NewGetSet(&KcBuffer_Type, g);
    if (!d || PyDict_SetItemString(KcBuffer_Type.tp_dict, g->name, d) < 0) {
      Py_XDECREF(d);
      return -1;
    }
    Py_DECREF(d);
  }
  static PyMethodDef methods[] = {
      {"__dlpack__", (PyCFunction)(void (*)(void))kcpy_buffer_dlpack, METH_VARARGS | METH_KEYWORDS,
       "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
       "The buffer's memory as a one-dimensional uint8 DLPack tensor (the array API's protocol):\n"
       "no copy on the host and CUDA (np.from_dlpack(buf) is a view), or a copy in host memory.\n"
       "Waits first for what is queued on the buffer's context (kc_context_finish), unless\n"
       "stream=-1.\n\n"
       "Args:\n"
       "    stream: None; on CUDA also -1 (no wait), 1, 2 or a CUstream (an int).\n"
       "    max_version: (major, minor): (1, 0) or later gives a DLPack 1.0 (\"dltensor_versioned\")\n"
       "        capsule, None or older a legacy (\"dltensor\") one.\n"
       "    dl_device: None or the buffer's own (__dlpack_device__()), or (1, 0): the CPU, a copy\n"
       "        for a CUDA or OpenCL buffer.\n"
       "    copy: True: always a copy (in host memory: on the host, or with dl_device=(1, 0));\n"
       "        False: never one; None: one only if dl_device needs it.\n\n"
       "Raises:\n"
       "    BufferError: a destroyed buffer; an OpenCL buffer without dl_device=(1, 0); a\n"
       "        dl_device it cannot reach; a copy needed and copy=False; copy=True on CUDA without\n"
       "        dl_device=(1, 0); a stream with a CPU tensor.\n"
       "    TypeError: a positional or unknown argument, or one of the wrong type.\n"
       "    ValueError: a stream of 0 or below -1."},
      {"__dlpack_device__", kcpy_buffer_dlpack_device, METH_NOARGS,
       "__dlpack_device__($self, /)\n--\n\n"
       "(device_type, device_id): (1, 0) for kDLCPU on the host, (2, device) for kDLCUDA.\n\n"
       "Raises:\n    BufferError: an OpenCL buffer, or one destroyed."},
      {NULL, NULL, 0, NULL}};
  for (PyMethodDef *m = methods; m->ml_name; m++) {
    PyObject *d = PyDescr_NewMethod(&KcBuffer_Type, m);
    if (!d || PyDict_SetItemString(KcBuffer_Type.tp_dict, m->ml_name, d) < 0) {
      Py_XDECREF(d);
      return -1;
    }
    Py_DECREF(d);
  }
  PyType_Modified(&KcBuffer_Type);
  return 0;
}
#endif

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
/* _foreign_pointer(obj) -> the device pointer kcache would pass for obj on
 * CUDA, or None when it would stage obj instead (tests of the protocols'
 * parsing on machines without a GPU). */
PyObject *kcpy_foreign_pointer(PyObject *self, PyObject *o) {
  (void)self;
  void *p = NULL;
  char kind;
  Py_ssize_t isz;
  int rc = cai_pointer(o, &p, &kind, &isz);
  if (rc == 0) rc = dlpack_pointer(o, &p, &kind, &isz);
  if (rc < 0) return NULL;
  return rc ? PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p) : Py_NewRef(Py_None);
}
#endif

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
/* Buffer.__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None), as the
 * array API's DLPack protocol has it: the buffer's memory as a one-dimensional uint8 tensor, in a
 * legacy "dltensor" capsule, or a "dltensor_versioned" one (DLPack 1.0) when max_version is
 * (1, 0) or later. Without a copy it is the buffer's own memory (kDLCPU on the host, kDLCUDA on
 * CUDA) and holds a reference to the Buffer, counted as an export, until its deleter runs; with
 * copy=True on the host, or dl_device=(1, 0) for a CUDA or OpenCL buffer, it is a copy in host
 * memory (kc_buffer_read; DLPack 1.0's "is copied" flag set), the Buffer's no more. */
typedef struct { /* DLManagedTensor */
  kcpy_dltensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(void *self);
} kcpy_dllegacy;

typedef struct {
  union {
    kcpy_dllegacy legacy;
    kcpy_dlversioned versioned;
  } m; /* first: the capsule's pointer is the struct's */
  KcBuffer *owner; /* the Buffer whose memory it is (an export), or NULL for a copy */
  void *copy; /* the copy's memory (PyMem_Raw), or NULL */
  int64_t shape[1];
} kcpy_dlexport;

static void dlexport_delete(void *self) { /* the deleter of either layout: self is the export */
  kcpy_dlexport *t = self;
  if (t->owner) {
    PyGILState_STATE g = PyGILState_Ensure();
    export_count(t->owner, -1);
    Py_DECREF((PyObject *)t->owner);
    PyGILState_Release(g);
  }
  PyMem_RawFree(t->copy);
  PyMem_RawFree(t);
}

static void dlcapsule_destructor(PyObject *cap) {
  /* consumed: renamed "used_dltensor" ("used_dltensor_versioned"), the consumer's to delete */
  const char *name = PyCapsule_GetName(cap);
  if (!name || (strcmp(name, "dltensor") && strcmp(name, "dltensor_versioned"))) return;
  kcpy_dlexport *t = PyCapsule_GetPointer(cap, name);
  if (t) dlexport_delete(t);
}

static int buffer_device(KcBuffer *b, void **p, int32_t *type) {
  *p = b->buf && b->owner->ctx && b->owner->owner->rt ? kc_buffer_native(b->buf) : NULL;
  int be = b->owner ? b->owner->owner->backend : -1; /* (no owner: never initialised) */
  *type = be == KCPY_BACKEND_HOST ? 1 : be == KCPY_BACKEND_CUDA ? 2 : 0;
  if (*p && *type) return 0;
  PyErr_SetString(PyExc_BufferError, "__dlpack__: only a live host or CUDA kcache Buffer exports its memory");
  return -1;
}

/* DLPack's device_id: 0 for the host (kDLCPU), the CUDA device ordinal of the Buffer's context. */
static int32_t buffer_device_id(const KcBuffer *b) {
  return b->owner->owner->backend == KCPY_BACKEND_CUDA ? b->owner->device : 0;
}

/* A (int, int) tuple such as max_version and dl_device: 0, or -1 with TypeError. */
static int int_pair(PyObject *o, const char *what, long long *a, long long *b) {
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: %s must be None or a tuple of two ints, not %.60R", what, o);
    return -1;
  }
  long long v[2];
  for (int i = 0; i < 2; i++) {
    PyObject *ix = PyNumber_Index(PyTuple_GET_ITEM(o, i));
    v[i] = ix ? PyLong_AsLongLong(ix) : -1;
    Py_XDECREF(ix);
    if (v[i] == -1 && PyErr_Occurred()) {
      if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "__dlpack__: %s must be None or a tuple of two ints, not %.60R", what,
                     o);
      }
      return -1;
    }
  }
  *a = v[0], *b = v[1];
  return 0;
}

PyObject *kcpy_buffer_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy_o = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &max_version, &dl_device,
                                   &copy_o))
    return NULL;
  KcBuffer *b = (KcBuffer *)self;
  long long major = 0, minor = 0, want_type = 0, want_id = 0, sv = 0;
  if (max_version != Py_None && int_pair(max_version, "max_version", &major, &minor) < 0) return NULL;
  if (dl_device != Py_None && int_pair(dl_device, "dl_device", &want_type, &want_id) < 0) return NULL;
  int copy = copy_o == Py_None ? -1 : PyObject_IsTrue(copy_o); /* -1: a copy only if needed */
  if (copy_o != Py_None && copy < 0) return NULL;
  if (stream != Py_None) {
    PyObject *ix = PyNumber_Index(stream);
    sv = ix ? PyLong_AsLongLong(ix) : -1;
    Py_XDECREF(ix);
    if (sv == -1 && PyErr_Occurred()) {
      if (PyErr_ExceptionMatches(PyExc_TypeError))
        PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be None or an int, not %s",
                     Py_TYPE(stream)->tp_name);
      return NULL;
    }
  }
  if (!(b->buf && b->owner->ctx && b->owner->owner->rt && kc_buffer_native(b->buf))) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: the kcache Buffer is destroyed (or its context or runtime)");
    return NULL;
  }
  int be = b->owner->owner->backend;
  int32_t own_type = be == KCPY_BACKEND_HOST ? 1 : be == KCPY_BACKEND_CUDA ? 2 : 0; /* 0: no DLPack device */
  int32_t own_id = buffer_device_id(b);
  int copied; /* the tensor is a copy in host memory */
  if (dl_device == Py_None || (own_type && want_type == own_type && want_id == own_id)) {
    if (!own_type) {
      PyErr_SetString(PyExc_BufferError,
                      "__dlpack__: an OpenCL Buffer's memory has no DLPack device: ask for a "
                      "copy in host memory with dl_device=(1, 0)");
      return NULL;
    }
    copied = copy == 1;
    if (copied && own_type != 1) {
      PyErr_SetString(PyExc_BufferError,
                      "__dlpack__: copy=True: kcache copies a CUDA Buffer to the host only "
                      "(dl_device=(1, 0))");
      return NULL;
    }
  } else if (want_type == 1 && want_id == 0) { /* kDLCPU: a copy in host memory */
    if (copy == 0) {
      PyErr_Format(PyExc_BufferError,
                   "__dlpack__: the Buffer's memory is on the %s device: the CPU (dl_device=(1, 0)) needs a "
                   "copy, and copy=False",
                   kc_runtime_backend(b->owner->owner->rt));
      return NULL;
    }
    copied = 1;
  } else {
    PyErr_Format(
        PyExc_BufferError,
        "__dlpack__: dl_device=(%lld, %lld): the Buffer's memory is on (%d, %d) and kcache copies it "
        "to the CPU (1, 0) only",
        want_type, want_id, (int)own_type, (int)own_id);
    return NULL;
  }
  int32_t out_type = copied ? 1 : own_type;
  if (stream != Py_None && out_type == 1) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: stream must be None for a tensor in host memory (kDLCPU)");
    return NULL;
  }
  if (stream != Py_None && (sv == 0 || sv < -1)) {
    PyErr_Format(PyExc_ValueError, "__dlpack__: stream must be None, -1, 1, 2 or a CUDA stream, not %lld",
                 sv);
    return NULL;
  }
  /* what was queued on the buffer's context (its own queue and its streams) is done before the
   * consumer reads, unless it says it synchronizes itself (stream=-1) */
  kc_context *ctx = b->owner->ctx;
  if (!(stream != Py_None && sv == -1)) {
    kc_status st;
    KCPY_NOGIL(b->owner->owner, st = kc_context_finish(ctx));
    if (st) return kcpy_raise(b->owner->owner->rt, st, "__dlpack__");
  }
  void *p = b->buf && b->owner->ctx && b->owner->owner->rt ? kc_buffer_native(b->buf) : NULL;
  if (!p) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: the kcache Buffer is destroyed (or its context or runtime)");
    return NULL;
  }
  kcpy_dlexport *t = PyMem_RawCalloc(1, sizeof *t);
  if (!t) return PyErr_NoMemory();
  t->shape[0] = (int64_t)b->size;
  if (copied) {
    t->copy = PyMem_RawMalloc(b->size ? b->size : 1);
    kc_status st = KC_OK;
    if (t->copy && b->size) KCPY_NOGIL(b->owner->owner, st = kc_buffer_read(b->buf, 0, t->copy, b->size));
    if (!t->copy || st) {
      dlexport_delete(t);
      return st ? kcpy_raise(b->owner->owner->rt, st, "__dlpack__ (copy)") : PyErr_NoMemory();
    }
    p = t->copy;
  }
  kcpy_dltensor dt = {p, {out_type, copied ? 0 : own_id}, 1, {1 /* kDLUInt */, 8, 1}, t->shape, NULL, 0};
  int versioned = major >= 1;
  if (versioned)
    t->m.versioned = (kcpy_dlversioned){1, 0, t, dlexport_delete, copied ? 2u /* is copied */ : 0u, dt};
  else t->m.legacy = (kcpy_dllegacy){dt, t, dlexport_delete};
  if (!copied) {
    t->owner = (KcBuffer *)Py_NewRef(self);
    export_count(b, 1);
  }
  PyObject *cap = PyCapsule_New(t, versioned ? "dltensor_versioned" : "dltensor", dlcapsule_destructor);
  if (!cap) dlexport_delete(t);
  return cap;
}

PyObject *kcpy_buffer_dlpack_device(PyObject *self, PyObject *unused) {
  (void)unused;
  void *p;
  int32_t type;
  if (buffer_device((KcBuffer *)self, &p, &type) < 0) return NULL;
  return Py_BuildValue("(ii)", type, buffer_device_id((KcBuffer *)self));
}
#endif
