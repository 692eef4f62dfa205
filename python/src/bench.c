/* SPDX-License-Identifier: MIT */
/*
 * bench.c -- kcache._kcache._c_launch_batch(kernel, batch, *args): the
 * benchmark's C side, so that Python launches and C launches are measured
 * in the same process and run. The arguments are converted once, by the
 * launch path's own conversion; then `batch` kc_launch calls run in a C
 * loop between two clock reads, exactly as a C program calls kcache (no
 * Python in the loop). Returns the nanoseconds per launch. Pointer
 * arguments must be kcache Buffers (arrays would be staged).
 */
#include "kcpy.h"

#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

PyObject *kcpy_c_launch_batch(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  (void)self;
  if (n < 2 || !Py_IS_TYPE(args[0], &KcKernel_Type))
    return PyErr_Format(PyExc_TypeError, "_c_launch_batch(kernel, batch, *args)");
  KcKernel *k = (KcKernel *)args[0];
  long batch = PyLong_AsLong(args[1]);
  if (batch < 1) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "batch must be >= 1");
  if (kcpy_check_open(k->owner) < 0) return NULL;
  kc_world w = kc_world_current(k->owner->rt);
  if (w != k->pworld && kcpy_refresh(k, w) < 0) return NULL;
  uint32_t na = (uint32_t)(n - 2);
  if (na != k->np) return PyErr_Format(PyExc_TypeError, "kernel takes %u arguments", k->np);
  for (uint32_t i = 0; i < na; i++)
    if (k->p[i].kind == KC_ARG_BUFFER && !Py_IS_TYPE(args[2 + i], &KcBuffer_Type))
      return PyErr_Format(PyExc_TypeError, "_c_launch_batch: pointer arguments must be kcache Buffers");
  kc_arg a[KC_MAX_ARGS];
  kcpy_val v[KC_MAX_ARGS];
  Py_buffer views[KC_MAX_ARGS];
  uint32_t own;
  kcpy_launch_begin(k);
  int rc = kcpy_convert(k, k->owner->dctx, args + 2, na, a, v, views, &own);
  kcpy_launch_end(k);
  if (rc < 0) return NULL;
  kcpy_finish_views(k, na, a, views, own, 0); /* Buffers only: no views */
  kc_dim3 one = {1, 1, 1};
  kc_context *ctx = k->owner->dctx;
  kc_status st = kc_launch(k->k, ctx, &one, &one, a, na); /* warm */
  double t0 = now_ns();
  for (long i = 0; i < batch && !st; i++) st = kc_launch(k->k, ctx, &one, &one, a, na);
  double t1 = now_ns();
  if (st) return kcpy_raise(k->owner->rt, st, NULL);
  return PyFloat_FromDouble((t1 - t0) / (double)batch);
}
