/* SPDX-License-Identifier: MIT */
/*
 * bound.c -- kcache.BoundArgs: Kernel.bind(*args) checks and binds the
 * arguments once (kc_args_create); b.launch(grid, block) is
 * kc_launch_args (b.launch(grid, block, stream): kc_launch_args_ex), b.set(i, value) is kc_args_set. Pointer
 * parameters take kcache Buffers (an array cannot be copied back by a bound launch). b[grid, block] is a
 * kcache.BoundLaunch, which keeps the geometry too: calling it is kc_launch_args with nothing parsed.
 */
#include "kcpy.h"

static int bound_traverse(KcBound *self, visitproc visit, void *arg) {
  Py_VISIT(self->k);
  Py_VISIT(self->ctx);
  Py_VISIT(self->keep);
  return 0;
}

static void bound_dealloc(KcBound *self) {
  PyObject_GC_UnTrack(self);
  if (self->a && self->k && self->k->owner->rt) kc_args_destroy(self->a);
  Py_CLEAR(self->k);
  Py_CLEAR(self->ctx);
  Py_CLEAR(self->keep);
  PyObject_GC_Del(self);
}

/* Converts args for binding: arrays are refused. */
static int bind_convert(KcKernel *k, kc_context *ctx, PyObject *const *args, uint32_t n, kc_arg *a,
                        kcpy_val *v) {
  for (uint32_t i = 0; i < n; i++)
    if (k->p[i].kind == KC_ARG_BUFFER && !Py_IS_TYPE(args[i], &KcBuffer_Type))
      return PyErr_Format(PyExc_TypeError,
                          "kernel '%U', argument %u '%s': bound arguments take kcache Buffers", k->name,
                          i + 1, k->p[i].name),
             -1;
  Py_buffer views[KC_MAX_ARGS];
  uint32_t own; /* (no arrays: no staging) */
  kcpy_launch_begin(k); /* an argument's __float__ may run Python code (args.c) */
  int rc = kcpy_convert(k, ctx, args, n, a, v, views, &own);
  kcpy_launch_end(k);
  if (rc == 1) { /* a KC_LOCAL size or a raw pointer: only a launch (kc_launch_ex) takes those */
    kcpy_finish_views(k, n, a, views, own, 0);
    PyErr_Format(PyExc_TypeError,
                 "kernel '%U': bound arguments take kcache Buffers and numbers, not KC_LOCAL sizes or raw "
                 "pointers (pass those to a launch)",
                 k->name);
    return -1;
  }
  return rc;
}

PyObject *kernel_bind(KcKernel *self, PyObject *args, PyObject *kw);
PyObject *kernel_bind(KcKernel *self, PyObject *args, PyObject *kw) {
  PyObject *ctxo = NULL;
  if (kw && PyDict_GET_SIZE(kw)) {
    ctxo = PyDict_GetItemString(kw, "context");
    if (!ctxo || PyDict_GET_SIZE(kw) != 1 || !Py_IS_TYPE(ctxo, &KcContext_Type))
      return PyErr_Format(PyExc_TypeError, "bind(*args, context=None): context must be a kcache Context");
  }
  KcRuntime *r = self->owner;
  if (kcpy_check_open(r) < 0) return NULL;
  if (ctxo && ((KcContext *)ctxo)->owner != r)
    return PyErr_Format(PyExc_TypeError, "bind: the Context belongs to another kcache Runtime");
  KcContext *c = ctxo ? (KcContext *)Py_NewRef(ctxo) : kcpy_context_new(r, -1);
  if (!c) return NULL;
  kc_world w = kc_world_current(r->rt);
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if ((w != self->pworld && kcpy_refresh(self, w) < 0) || !c->ctx) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "the kcache Context is destroyed");
    Py_DECREF(c);
    return NULL;
  }
  if ((uint64_t)n != self->np) {
    Py_DECREF(c);
    return PyErr_Format(PyExc_TypeError, "kernel '%U' takes %u arguments, %zd given", self->name, self->np,
                        n);
  }
  kc_arg a[KC_MAX_ARGS];
  kcpy_val v[KC_MAX_ARGS];
  KcBound *b = NULL;
  if (bind_convert(self, c->ctx, &PyTuple_GET_ITEM(args, 0), (uint32_t)n, a, v) == 0)
    b = PyObject_GC_New(KcBound, &KcBound_Type);
  if (!b) {
    Py_DECREF(c);
    return NULL;
  }
  b->k = (KcKernel *)Py_NewRef(self);
  b->ctx = c;
  b->a = NULL;
  b->keep = PySequence_List(args);
  PyObject_GC_Track(b);
  if (!b->keep) return Py_DECREF(b), NULL;
  kc_status st = kc_args_create(self->k, c->ctx, a, (uint32_t)n, &b->a);
  if (st) {
    Py_DECREF(b);
    return kcpy_raise(r->rt, st, "bind");
  }
  return (PyObject *)b;
}

static PyObject *bound_launch(KcBound *self, PyObject *const *args, Py_ssize_t n) {
  if (n != 2 && n != 3) return PyErr_Format(PyExc_TypeError, "launch(grid, block, stream=None)");
  kc_dim3 g, b;
  if (kcpy_dim3(args[0], &g, "grid") < 0 || kcpy_dim3(args[1], &b, "block") < 0) return NULL;
  if (kcpy_check_open(self->k->owner) < 0) return NULL;
  kc_status st;
  if (n == 3 && args[2] != Py_None) {
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    /* on a stream: kc_launch_args_ex (the stream must be of the bound context) */
    if (!self->ctx->ctx) return PyErr_Format(PyExc_RuntimeError, "the kcache Context is destroyed");
    kc_launch_config cfg;
    kc_launch_config_init(&cfg);
    cfg.grid = g;
    cfg.block = b;
    kcpy_launch_begin(self->k); /* a stream object's attributes may run Python code */
    int rc = kcpy_stream(self->k->owner, self->ctx->ctx, args[2], &cfg.stream);
    kcpy_launch_end(self->k);
    if (rc < 0) return NULL;
    st = kc_launch_args_ex(self->a, &cfg);
#else
    return PyErr_Format(PyExc_NotImplementedError, "stream: this kcache has no streams (kc_stream_wrap)");
#endif
  } else st = kc_launch_args(self->a, &g, &b);
  if (st) return kcpy_raise(self->k->owner->rt, st, NULL);
  Py_RETURN_NONE;
}

static PyObject *bound_set(KcBound *self, PyObject *const *args, Py_ssize_t n) {
  if (n != 2) return PyErr_Format(PyExc_TypeError, "set(index, value)");
  Py_ssize_t i = PyNumber_AsSsize_t(args[0], PyExc_IndexError);
  if (i == -1 && PyErr_Occurred()) return NULL;
  KcKernel *k = self->k;
  if (kcpy_check_open(k->owner) < 0) return NULL;
  if (i < 0 || i >= PyList_GET_SIZE(self->keep) || (uint64_t)i >= k->np)
    return PyErr_Format(PyExc_IndexError, "argument index %zd out of range", i);
  kc_arg a;
  kcpy_val v;
  if (k->p[i].kind == KC_ARG_BUFFER) {
    const KcBuffer *nb = (const KcBuffer *)args[1];
    if (!Py_IS_TYPE(args[1], &KcBuffer_Type) || !nb->buf || !nb->owner || nb->owner->owner != k->owner ||
        !nb->owner->ctx)
      return PyErr_Format(
          PyExc_TypeError,
          "argument %zd '%s': bound arguments take live kcache Buffers of the kernel's Runtime", i + 1,
          k->p[i].name);
    a = KC_ARG_BUF(nb->buf);
  } else {
    kcpy_launch_begin(k); /* __float__ may run Python code that would close the runtime */
    int rc = kcpy_convert_scalar(k, (uint32_t)i, args[1], &a, &v);
    kcpy_launch_end(k);
    if (rc < 0) return NULL;
  }
  kc_status st = kc_args_set(self->a, (uint32_t)i, a);
  if (st) return kcpy_raise(k->owner->rt, st, "set");
  PyList_SetItem(self->keep, i, Py_NewRef(args[1]));
  Py_RETURN_NONE;
}

/* <kcache.BoundArgs 'k' [T=float] 3 args context=1> */
static PyObject *bound_repr(KcBound *self) {
  PyObject *label = kcpy_kernel_label(self->k);
  if (!label) return NULL;
  PyObject *r = !self->k->owner->rt || !self->ctx->ctx
                    ? PyUnicode_FromFormat("<kcache.BoundArgs %U closed>", label)
                    : PyUnicode_FromFormat("<kcache.BoundArgs %U %zd args context=%llu>", label,
                                           PyList_GET_SIZE(self->keep),
                                           (unsigned long long)kc_context_id(self->ctx->ctx));
  Py_DECREF(label);
  return r;
}

static PyMethodDef bound_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))bound_launch, METH_FASTCALL,
     "launch($self, grid, block, stream=None, /)\n--\n\n"
     "Launches the kernel with the bound arguments (kc_launch_args; on a stream kc_launch_args_ex).\n\n"
     "Args:\n"
     "    grid, block: an int or a tuple of 1 to 3 ints each.\n"
     "    stream: a Stream or native queue of the bound context, or None.\n\n"
     "Raises:\n"
     "    CompileError, NotFoundError: the kernel does not compile at the caller's world.\n"
     "    ArgumentError: the kernel's parameters changed since bind() (a redefinition).\n"
     "    LaunchError: the backend refused the launch."},
    {"set", (PyCFunction)(void (*)(void))bound_set, METH_FASTCALL,
     "set($self, index, value, /)\n--\n\n"
     "Replaces one bound argument (kc_args_set).\n\n"
     "Args:\n"
     "    index: the argument's position, from 0.\n"
     "    value: a live Buffer for a pointer, a number for a scalar.\n\n"
     "Raises:\n    IndexError: no such argument.\n    TypeError: a value that does not convert."},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------ b[grid, block] */

typedef struct KcBoundLaunch {
  PyObject ob_base;
  vectorcallfunc vectorcall;
  KcBound *b;
  kc_dim3 grid, block;
} KcBoundLaunch;

static PyObject *boundlaunch_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                        PyObject *kwnames) {
  (void)args;
  KcBoundLaunch *l = (KcBoundLaunch *)self;
  if (PyVectorcall_NARGS(nargsf) || (kwnames && PyTuple_GET_SIZE(kwnames)))
    return PyErr_Format(PyExc_TypeError, "a BoundLaunch takes no arguments (BoundArgs.set changes them)");
  KcBound *b = l->b;
  if (kcpy_check_open(b->k->owner) < 0) return NULL;
  kc_status st = kc_launch_args(b->a, &l->grid, &l->block);
  if (st) return kcpy_raise(b->k->owner->rt, st, NULL);
  Py_RETURN_NONE;
}

static int boundlaunch_traverse(KcBoundLaunch *self, visitproc visit, void *arg) {
  Py_VISIT(self->b);
  return 0;
}

static void boundlaunch_dealloc(KcBoundLaunch *self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->b);
  PyObject_GC_Del(self);
}

/* <kcache.BoundLaunch 'k' [T=float] grid=(8, 1, 1) block=(1, 1, 1)> */
static PyObject *boundlaunch_repr(KcBoundLaunch *self) {
  PyObject *label = kcpy_kernel_label(self->b->k);
  if (!label) return NULL;
  PyObject *r = PyUnicode_FromFormat("<kcache.BoundLaunch %U grid=(%u, %u, %u) block=(%u, %u, %u)>", label,
                                     self->grid.x, self->grid.y, self->grid.z, self->block.x, self->block.y,
                                     self->block.z);
  Py_DECREF(label);
  return r;
}

PyTypeObject KcBoundLaunch_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.BoundLaunch",
    .tp_basicsize = sizeof(KcBoundLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)boundlaunch_traverse,
    .tp_doc = "b[grid, block] for BoundArgs b: calling it with no arguments launches the kernel with the\n"
              "bound arguments and that geometry (kc_launch_args), with nothing parsed again; b.set()\n"
              "changes what the next call launches with.\n\n"
              "Raises (when called):\n"
              "    CompileError, NotFoundError: the kernel does not compile at the caller's world.\n"
              "    ArgumentError: the kernel's parameters changed since bind() (a redefinition).\n"
              "    LaunchError: the backend refused the launch.",
    .tp_dealloc = (destructor)boundlaunch_dealloc,
    .tp_repr = (reprfunc)boundlaunch_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(KcBoundLaunch, vectorcall),
};

/* b[grid, block]: a BoundLaunch (a stream: b.launch(grid, block, stream)). */
static PyObject *bound_subscript(KcBound *self, PyObject *key) {
  if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 2)
    return PyErr_Format(PyExc_TypeError,
                        "use bound[grid, block] (on a stream: bound.launch(grid, block, stream))");
  kc_dim3 g, b;
  if (kcpy_dim3(PyTuple_GET_ITEM(key, 0), &g, "grid") < 0 ||
      kcpy_dim3(PyTuple_GET_ITEM(key, 1), &b, "block") < 0)
    return NULL;
  KcBoundLaunch *l = PyObject_GC_New(KcBoundLaunch, &KcBoundLaunch_Type);
  if (!l) return NULL;
  l->vectorcall = boundlaunch_vectorcall;
  l->b = (KcBound *)Py_NewRef(self);
  l->grid = g;
  l->block = b;
  PyObject_GC_Track(l);
  return (PyObject *)l;
}

static PyMappingMethods bound_mapping = {.mp_subscript = (binaryfunc)bound_subscript};

PyTypeObject KcBound_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.BoundArgs",
    .tp_basicsize = sizeof(KcBound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Arguments bound once to a kernel and a context (Kernel.bind): b.launch(grid, block), or\n"
              "go = b[grid, block] and then go(), which keeps the geometry too.",
    .tp_as_mapping = &bound_mapping,
    .tp_traverse = (traverseproc)bound_traverse,
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_repr = (reprfunc)bound_repr,
    .tp_methods = bound_methods,
};
