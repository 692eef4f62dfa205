/* SPDX-License-Identifier: MIT */
/*
 * arrays.c -- host arrays as kernel arguments, whatever protocol they
 * offer: the buffer protocol (NumPy, array, bytearray, memoryview),
 * __array_interface__ (v3) and __dlpack__ on the CPU (PyTorch CPU tensors,
 * JAX CPU arrays, array-api-strict), read into one Py_buffer that the launch
 * path passes by pointer (host backend, interop.c: zero copy) or stages
 * through a buffer (args.c). The object that keeps the memory (the view's
 * exporter, the interface dict, the DLPack capsule) is the view's obj,
 * released after the launch.
 */
#include "kcpy.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int kcpy_dl_contiguous(const kcpy_dltensor *t) {
  int64_t want = 1;
  for (int32_t d = t->ndim - 1; t->strides && d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != want) return 0;
    if (__builtin_mul_overflow(want, t->shape[d], &want)) return 0; /* no such tensor */
  }
  return 1;
}

char kcpy_dl_kind(kcpy_dldtype d) {
  if (d.lanes != 1) return 0;
  return d.code == 2 ? 'f' : d.code <= 1 || d.code == 6 ? 'i' : 0;
}

int kcpy_err_translatable(void) {
  return PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
         PyErr_ExceptionMatches(PyExc_OverflowError) || PyErr_ExceptionMatches(PyExc_BufferError) ||
         PyErr_ExceptionMatches(PyExc_AttributeError);
}

PyObject *kcpy_err_take(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value && tb) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
}

void kcpy_err_chain(PyObject *cause) {
  if (!cause) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value) {
    PyException_SetCause(value, Py_NewRef(cause)); /* raise ... from cause */
    PyException_SetContext(value, Py_NewRef(cause));
  }
  PyErr_Restore(type, value, tb);
  Py_DECREF(cause);
}

static int view_error_as(PyObject *exc, KcKernel *k, uint32_t i, PyObject *o, const char *fmt, va_list ap) {
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  if (msg) {
    PyErr_Format(exc, "kernel '%U', argument %u '%s' (%s): %U (%.60R)", k->name, i + 1, k->p[i].name,
                 k->p[i].ctype, msg, o);
    Py_DECREF(msg);
  }
  return -1;
}

/* -1 with a TypeError naming kernel k's argument i (o) and saying why (fmt: PyUnicode_FromFormat's). */
static int view_error(KcKernel *k, uint32_t i, PyObject *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  view_error_as(PyExc_TypeError, k, i, o, fmt, ap);
  va_end(ap);
  return -1;
}

/* The same with a ValueError: an array whose description is impossible (a negative extent, a
 * size past the address space). */
static int view_value_error(KcKernel *k, uint32_t i, PyObject *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  view_error_as(PyExc_ValueError, k, i, o, fmt, ap);
  va_end(ap);
  return -1;
}

/* The byte size of a C-contiguous array of `n` extents (int64) of isz-byte elements into *bytes:
 * 0, or -1 when an extent is negative or the size does not fit a Py_ssize_t. The product of the
 * nonzero extents must fit too (strides are checked against it). */
static int array_bytes(const int64_t *shape, Py_ssize_t n, Py_ssize_t isz, Py_ssize_t *bytes, int64_t *bad) {
  Py_ssize_t nonzero = isz, count = isz;
  for (Py_ssize_t d = 0; d < n; d++) {
    int64_t e = shape[d];
    if (e < 0) return *bad = e, -1;
    if (e == 0) {
      count = 0;
      continue;
    }
    if ((uint64_t)e > (uint64_t)(PY_SSIZE_T_MAX / nonzero)) return *bad = e, -1;
    nonzero *= (Py_ssize_t)e;
    count *= (Py_ssize_t)e;
  }
  *bytes = count;
  return 0;
}

/* Fills view for n elements of itemsize bytes at p, held by holder (a new reference is taken). */
static void fill(Py_buffer *view, void *p, Py_ssize_t len, Py_ssize_t itemsize, int readonly,
                 PyObject *holder) {
  memset(view, 0, sizeof *view);
  view->buf = p;
  view->len = len;
  view->itemsize = itemsize;
  view->readonly = readonly;
  view->ndim = 1;
  view->obj = Py_NewRef(holder);
}

/* __array_interface__: 1, 0 (none), -1. */
static int array_interface_view(KcKernel *k, uint32_t i, PyObject *o, Py_buffer *view) {
  PyObject *ai = PyObject_GetAttrString(o, "__array_interface__");
  if (!ai) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  int rc = -1;
  PyObject *data = PyDict_Check(ai) ? PyDict_GetItemString(ai, "data") : NULL;
  PyObject *shape = PyDict_Check(ai) ? PyDict_GetItemString(ai, "shape") : NULL;
  PyObject *ts = PyDict_Check(ai) ? PyDict_GetItemString(ai, "typestr") : NULL;
  PyObject *strides = PyDict_Check(ai) ? PyDict_GetItemString(ai, "strides") : NULL;
  PyObject *mask = PyDict_Check(ai) ? PyDict_GetItemString(ai, "mask") : NULL;
  const char *t = ts && PyUnicode_Check(ts) ? PyUnicode_AsUTF8(ts) : NULL;
  if (ts && !t) PyErr_Clear();
  Py_ssize_t isz = t && strlen(t) >= 3 ? atoi(t + 2) : 0;
  if (!PyDict_Check(ai) || !shape || !PyTuple_Check(shape) || !t || isz <= 0) {
    view_error(k, i, o, "__array_interface__ without a shape tuple and a typestr");
    goto out;
  }
  if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
    view_error(k, i, o, "__array_interface__'s data must be a (pointer, read_only) tuple");
    goto out;
  }
  if (mask && mask != Py_None) {
    view_error(k, i, o, "a masked array (__array_interface__'s mask)");
    goto out;
  }
  if (t[0] == '>' && isz > 1) {
    view_error(k, i, o, "a big-endian array (typestr %s): pass one in the machine's byte order", t);
    goto out;
  }
  if (t[1] == 'O') { /* the kernel would write raw bytes over the array's PyObject pointers */
    view_error(k, i, o, "an array of Python objects (typestr %s): pass one of numbers", t);
    goto out;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(shape), bytes = 0;
  if (n > 64) {
    view_value_error(k, i, o, "__array_interface__'s shape has %zd dimensions", n);
    goto out;
  }
  int64_t extents[64], bad = 0;
  for (Py_ssize_t d = 0; d < n; d++) {
    PyObject *ix = PyNumber_Index(PyTuple_GET_ITEM(shape, d));
    if (!ix) goto out;
    long long e = PyLong_AsLongLong(ix);
    Py_DECREF(ix);
    if (e == -1 && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto out;
      PyErr_Clear();
      view_value_error(k, i, o, "__array_interface__'s shape %R does not fit the address space", shape);
      goto out;
    }
    extents[d] = e;
  }
  if (array_bytes(extents, n, isz, &bytes, &bad) < 0) {
    if (bad < 0) view_value_error(k, i, o, "__array_interface__'s shape %R has a negative extent", shape);
    else view_value_error(k, i, o, "__array_interface__'s shape %R does not fit the address space", shape);
    goto out;
  }
  if (strides && strides != Py_None) { /* C-contiguous strides are allowed, others are not */
    Py_ssize_t want = isz;
    int contiguous = PyTuple_Check(strides) && PyTuple_GET_SIZE(strides) == n;
    for (Py_ssize_t d = n - 1; contiguous && d >= 0; d--) {
      Py_ssize_t e = (Py_ssize_t)extents[d];
      Py_ssize_t s = PyNumber_AsSsize_t(PyTuple_GET_ITEM(strides, d), NULL);
      if (PyErr_Occurred()) goto out;
      if (e != 1 && s != want) contiguous = 0;
      want *= e;
    }
    if (!contiguous) {
      view_error(k, i, o, "a strided array (__array_interface__'s strides): pass a C-contiguous one");
      goto out;
    }
  }
  unsigned long long p = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
  if (p == (unsigned long long)-1 && PyErr_Occurred()) goto out;
  int ro = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
  if (ro < 0) goto out;
  if (!p && bytes) {
    view_error(k, i, o, "__array_interface__'s data pointer is 0");
    goto out;
  }
  char kind = t[1] == 'f' ? 'f' : strchr("iub", t[1]) ? 'i' : 0;
  if (kcpy_check_elem(k, i, kind, isz, o) < 0) goto out;
  /* the dict holds nothing; the argument itself, alive through the launch, holds the memory */
  fill(view, (void *)(uintptr_t)p, bytes, isz, ro, ai);
  rc = 1;
out:
  Py_DECREF(ai);
  return rc;
}

/* __dlpack__ on the CPU: 1, 0 (none), -1. The capsule is kept unconsumed
 * as the view's obj: freeing it after the launch calls the producer's deleter. */
static int dlpack_view(KcKernel *k, uint32_t i, PyObject *o, Py_buffer *view) {
  PyObject *fn = PyObject_GetAttrString(o, "__dlpack__");
  if (!fn) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  PyObject *dev = PyObject_CallMethod(o, "__dlpack_device__", NULL);
  long type =
      dev && PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)) : -1;
  Py_XDECREF(dev);
  if (!dev || (type == -1 && PyErr_Occurred())) {
    Py_DECREF(fn);
    if (!dev) return -1;
    return view_error(k, i, o, "__dlpack_device__ must return (device_type, device_id)");
  }
  if (type != 1 && type != 3) { /* kDLCPU, kDLCUDAHost (pinned host memory) */
    Py_DECREF(fn);
    return view_error(k, i, o,
                      "a DLPack tensor on device type %ld, not the CPU: the %s backend takes host memory "
                      "here",
                      type, kc_runtime_backend(k->owner->rt));
  }
  /* DLPack 1.0 first (it says read-only), else the legacy capsule */
  PyObject *kw = Py_BuildValue("{s(ii)}", "max_version", 1, 0), *noargs = PyTuple_New(0);
  PyObject *cap = kw && noargs ? PyObject_Call(fn, noargs, kw) : NULL;
  if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    cap = PyObject_CallNoArgs(fn);
  }
  Py_XDECREF(kw);
  Py_XDECREF(noargs);
  Py_DECREF(fn);
  if (!cap) {
    /* e.g. NumPy's BufferError for a read-only array through the legacy protocol: said with the
     * argument's name; anything else (KeyboardInterrupt, MemoryError ...) goes up as it is */
    if (!kcpy_err_translatable()) return -1;
    PyObject *value = kcpy_err_take();
    view_error(k, i, o, "__dlpack__ failed: %S", value ? value : Py_None);
    kcpy_err_chain(value);
    return -1;
  }
  kcpy_dltensor *t = NULL;
  int ro = 0;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    kcpy_dlversioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m && m->major == 1) t = &m->dl_tensor, ro = (int)(m->flags & 1);
    else if (m) {
      Py_DECREF(cap);
      return view_error(k, i, o, "a DLPack %u.%u tensor (this kcache reads 1.x)", m->major, m->minor);
    }
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    kcpy_dlmanaged *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m) t = &m->dl_tensor;
  }
  int rc = -1;
  if (!t) view_error(k, i, o, "__dlpack__ did not return a DLPack capsule");
  else if (t->device.device_type != 1 && t->device.device_type != 3)
    view_error(k, i, o, "a DLPack tensor on device type %d, not the CPU", (int)t->device.device_type);
  else if (t->dtype.bits % 8 || !t->dtype.bits)
    view_error(k, i, o, "a DLPack tensor of %d-bit elements", (int)t->dtype.bits);
  else {
    Py_ssize_t isz = (Py_ssize_t)t->dtype.bits / 8 * (t->dtype.lanes ? t->dtype.lanes : 1), bytes = 0;
    int64_t bad = 0;
    /* the shape first: the size (and the contiguity check's products) must fit */
    if (t->ndim < 0 || (t->ndim && !t->shape))
      view_value_error(k, i, o, "a DLPack tensor of %d dimensions without a shape", (int)t->ndim);
    else if (array_bytes(t->shape, t->ndim, isz, &bytes, &bad) < 0)
      view_value_error(k, i, o,
                       bad < 0 ? "a DLPack tensor with a negative extent (%lld)"
                               : "a DLPack tensor whose size does not fit the address space (extent %lld)",
                       (long long)bad);
    else if (!kcpy_dl_contiguous(t)) view_error(k, i, o, "a strided DLPack tensor: pass a C-contiguous one");
    else if (kcpy_check_elem(k, i, kcpy_dl_kind(t->dtype), isz, o) == 0) {
      fill(view, (char *)t->data + t->byte_offset, bytes, isz, ro, cap);
      rc = 1;
    }
  }
  Py_DECREF(cap);
  return rc;
}

int kcpy_host_view(KcKernel *k, uint32_t i, PyObject *o, Py_buffer *view) {
  view->obj = NULL;
  if (PyObject_CheckBuffer(o)) {
    /* only the errors that say "not such a view" (NumPy's ValueError for a strided or read-only
     * array, BufferError) are read as a no; anything else (KeyboardInterrupt from a __buffer__,
     * MemoryError) goes up as it is */
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
      view->obj = NULL;
      if (!kcpy_err_translatable()) return -1;
      PyErr_Clear();
      if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        view->obj = NULL;
        if (!kcpy_err_translatable()) return -1;
        PyErr_Clear();
        return 0; /* not C-contiguous: the caller says so */
      }
    }
    if (kcpy_check_view(k, i, view, o) < 0) {
      PyBuffer_Release(view);
      view->obj = NULL;
      return -1;
    }
    return 1;
  }
  int rc = array_interface_view(k, i, o, view);
  return rc ? rc : dlpack_view(k, i, o, view);
}
