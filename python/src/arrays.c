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
    want *= t->shape[d];
  }
  return 1;
}

char kcpy_dl_kind(kcpy_dldtype d) {
  if (d.lanes != 1) return 0;
  return d.code == 2 ? 'f' : d.code <= 1 || d.code == 6 ? 'i' : 0;
}

static int view_error(KcKernel *k, uint32_t i, PyObject *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (msg) {
    PyErr_Format(PyExc_TypeError, "kernel '%U', argument %u '%s' (%s): %U (%.60R)", k->name, i + 1,
                 k->p[i].name, k->p[i].ctype, msg, o);
    Py_DECREF(msg);
  }
  return -1;
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
  Py_ssize_t count = 1;
  Py_ssize_t n = PyTuple_GET_SIZE(shape);
  for (Py_ssize_t d = 0; d < n; d++) {
    Py_ssize_t e = PyNumber_AsSsize_t(PyTuple_GET_ITEM(shape, d), PyExc_OverflowError);
    if (e == -1 && PyErr_Occurred()) goto out;
    count *= e;
  }
  if (strides && strides != Py_None) { /* C-contiguous strides are allowed, others are not */
    Py_ssize_t want = isz;
    int contiguous = PyTuple_Check(strides) && PyTuple_GET_SIZE(strides) == n;
    for (Py_ssize_t d = n - 1; contiguous && d >= 0; d--) {
      Py_ssize_t e = PyNumber_AsSsize_t(PyTuple_GET_ITEM(shape, d), NULL);
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
  if (!p && count) {
    view_error(k, i, o, "__array_interface__'s data pointer is 0");
    goto out;
  }
  char kind = t[1] == 'f' ? 'f' : strchr("iub", t[1]) ? 'i' : 0;
  if (kcpy_check_elem(k, i, kind, isz, o) < 0) goto out;
  /* the dict holds nothing; the argument itself, alive through the launch, holds the memory */
  fill(view, (void *)(uintptr_t)p, count * isz, isz, ro, ai);
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
    /* e.g. NumPy's BufferError for a read-only array through the legacy protocol */
    PyObject *type_, *value, *tb;
    PyErr_Fetch(&type_, &value, &tb);
    view_error(k, i, o, "__dlpack__ failed: %S", value ? value : Py_None);
    Py_XDECREF(type_);
    Py_XDECREF(value);
    Py_XDECREF(tb);
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
  else if (!kcpy_dl_contiguous(t)) view_error(k, i, o, "a strided DLPack tensor: pass a C-contiguous one");
  else if (t->dtype.bits % 8 || !t->dtype.bits)
    view_error(k, i, o, "a DLPack tensor of %d-bit elements", (int)t->dtype.bits);
  else {
    Py_ssize_t isz = (Py_ssize_t)t->dtype.bits / 8 * (t->dtype.lanes ? t->dtype.lanes : 1), count = 1;
    for (int32_t d = 0; d < t->ndim; d++) count *= (Py_ssize_t)t->shape[d];
    if (kcpy_check_elem(k, i, kcpy_dl_kind(t->dtype), isz, o) == 0) {
      fill(view, (char *)t->data + t->byte_offset, count * isz, isz, ro, cap);
      rc = 1;
    }
  }
  Py_DECREF(cap);
  return rc;
}

int kcpy_host_view(KcKernel *k, uint32_t i, PyObject *o, Py_buffer *view) {
  view->obj = NULL;
  if (PyObject_CheckBuffer(o)) {
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
      PyErr_Clear();
      if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        view->obj = NULL;
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
