/* SPDX-License-Identifier: MIT */
/*
 * kernel.c -- kcache.Kernel (kc_kernel: a name + specialization), its
 * launch configurations (k[grid, block], called through vectorcall),
 * the explicit launch(), introspection (source, code, params) and
 * kcache.BoundArgs (kc_args: arguments bound once, kc_launch_args).
 */
#include "kcpy.h"

#include <string.h>

PyObject *kcpy_kernel_new(KcRuntime *r, const char *name, const char *params) {
  KcKernel *k = PyObject_GC_New(KcKernel, &KcKernel_Type);
  if (!k) return NULL;
  memset((char *)k + sizeof(PyObject), 0, sizeof *k - sizeof(PyObject));
  PyObject_GC_Track(k);
  k->owner = (KcRuntime *)Py_NewRef(r);
  k->name = PyUnicode_FromString(name);
  k->params = PyUnicode_FromString(params);
  if (!k->name || !k->params) {
    Py_DECREF(k);
    return NULL;
  }
  kc_status st = kc_kernel_create(r->rt, name, params, &k->k);
  if (st) {
    Py_DECREF(k);
    return kcpy_raise(r->rt, st, NULL);
  }
  return (PyObject *)k;
}

static int kernel_traverse(KcKernel *self, visitproc visit, void *arg) {
  Py_VISIT(self->cfg);
  Py_VISIT(self->owner);
  return 0;
}

static int kernel_clear(KcKernel *self) {
  Py_CLEAR(self->cfg);
  return 0;
}

static void kernel_dealloc(KcKernel *self) {
  PyObject_GC_UnTrack(self);
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  if (self->owner && self->owner->rt) {
    for (int i = 0; i < KC_MAX_ARGS; i++) kcpy_stage_drop(&self->stage[i]);
    kc_kernel_destroy(self->k);
  }
  Py_CLEAR(self->cfg);
  Py_CLEAR(self->name);
  Py_CLEAR(self->params);
  Py_CLEAR(self->owner);
  PyObject_GC_Del(self);
}

static int kernel_open(KcKernel *k) { return kcpy_check_open(k->owner); }

/* ------------------------------------------------------- k[grid, block] */

static PyObject *config_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  KcConfig *c = (KcConfig *)self;
  if (kwnames && PyTuple_GET_SIZE(kwnames))
    return PyErr_Format(PyExc_TypeError, "a launch takes the kernel's arguments by position only");
  if (c->stream == Py_None && !c->shared)
    return kcpy_launch(c->k, NULL, &c->grid, &c->block, args, PyVectorcall_NARGS(nargsf));
  return kcpy_launch_ex(c->k, NULL, &c->grid, &c->block, args, PyVectorcall_NARGS(nargsf), c->stream,
                        c->shared);
}

static int config_traverse(KcConfig *self, visitproc visit, void *arg) {
  Py_VISIT(self->k);
  Py_VISIT(self->stream);
  return 0;
}

static int config_clear(KcConfig *self) {
  Py_CLEAR(self->k);
  Py_CLEAR(self->stream);
  return 0;
}

static void config_dealloc(KcConfig *self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->k);
  Py_CLEAR(self->stream);
  PyObject_GC_Del(self);
}

/* <kcache.LaunchConfig 'k' [T=float] grid=(8, 1, 1) block=(1, 1, 1)> (stream, shared when given) */
static PyObject *config_repr(KcConfig *self) {
  PyObject *extra = self->stream == Py_None && !self->shared
                        ? PyUnicode_FromString("")
                        : PyUnicode_FromFormat(" stream=%R shared=%u", self->stream, self->shared);
  if (!extra) return NULL;
  PyObject *label = kcpy_kernel_label(self->k);
  PyObject *r = label
                    ? PyUnicode_FromFormat("<kcache.LaunchConfig %U grid=(%u, %u, %u) block=(%u, %u, %u)%U>",
                                           label, self->grid.x, self->grid.y, self->grid.z, self->block.x,
                                           self->block.y, self->block.z, extra)
                    : NULL;
  Py_XDECREF(label);
  Py_DECREF(extra);
  return r;
}

PyTypeObject KcConfig_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.LaunchConfig",
    .tp_basicsize = sizeof(KcConfig),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)config_traverse,
    .tp_clear = (inquiry)config_clear,
    .tp_doc = "k[grid, block], k[grid, block, stream] or k[grid, block, stream, shared]: calling it with\n"
              "the kernel's arguments (by position) launches k with that geometry, on the runtime's\n"
              "default context (or the stream's), and returns None.\n\n"
              "Raises (when called):\n"
              "    TypeError: a wrong number of arguments, or one that does not convert to its parameter\n"
              "        (the message names the kernel, the argument and its C type).\n"
              "    CompileError: the kernel (or a function it calls) does not compile; .log holds the\n"
              "        compiler's output.\n"
              "    NotFoundError: the kernel or a function it calls is not defined.\n"
              "    LaunchError: the backend refused the launch.",
    .tp_dealloc = (destructor)config_dealloc,
    .tp_repr = (reprfunc)config_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(KcConfig, vectorcall),
};

/* shared= (dynamic shared memory in bytes): an int in [0, 2**32-1], else -1 with
 * TypeError, ValueError (negative) or OverflowError naming it. */
static int parse_shared(PyObject *o, unsigned *out) {
  PyObject *i = PyNumber_Index(o);
  if (!i) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "shared must be an int (bytes), not %s", Py_TYPE(o)->tp_name);
    }
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
  Py_DECREF(i);
  if (v == -1 && !overflow && PyErr_Occurred()) return -1;
  if (overflow < 0 || (!overflow && v < 0)) {
    PyErr_Format(PyExc_ValueError, "shared must be >= 0 bytes, not %R", o);
    return -1;
  }
  if (overflow > 0 || v > (long long)UINT32_MAX) {
    PyErr_Format(PyExc_OverflowError, "shared must be at most 2**32-1 bytes, not %R", o);
    return -1;
  }
  *out = (unsigned)v;
  return 0;
}

/* k[grid, block], k[grid, block, stream], k[grid, block, stream, shared]:
 * the same object again when the configuration is the last one's. */
static PyObject *kernel_subscript(KcKernel *self, PyObject *key) {
  Py_ssize_t n = PyTuple_Check(key) ? PyTuple_GET_SIZE(key) : 0;
  if (n < 2 || n > 4)
    return PyErr_Format(PyExc_TypeError, "use kernel[grid, block] or kernel[grid, block, stream, shared]");
  kc_dim3 g, b;
  if (kcpy_dim3(PyTuple_GET_ITEM(key, 0), &g, "grid") < 0 ||
      kcpy_dim3(PyTuple_GET_ITEM(key, 1), &b, "block") < 0)
    return NULL;
  PyObject *stream = n > 2 ? PyTuple_GET_ITEM(key, 2) : Py_None;
  unsigned shared = 0;
  if (n > 3 && parse_shared(PyTuple_GET_ITEM(key, 3), &shared) < 0) return NULL;
  KcConfig *c = (KcConfig *)self->cfg;
  if (c && !memcmp(&c->grid, &g, sizeof g) && !memcmp(&c->block, &b, sizeof b) && c->stream == stream &&
      c->shared == shared)
    return Py_NewRef(c);
  c = PyObject_GC_New(KcConfig, &KcConfig_Type);
  if (!c) return NULL;
  c->vectorcall = config_vectorcall;
  c->k = (KcKernel *)Py_NewRef(self);
  c->grid = g;
  c->block = b;
  c->stream = Py_NewRef(stream);
  c->shared = (unsigned)shared;
  PyObject_GC_Track(c);
  /* the kernel keeps the last one (a cycle kernel <-> config, which the
   * garbage collector breaks) */
  Py_XSETREF(self->cfg, Py_NewRef(c));
  return (PyObject *)c;
}

static PyMappingMethods kernel_mapping = {.mp_subscript = (binaryfunc)kernel_subscript};

static PyObject *kernel_launch(KcKernel *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"grid", "block", "args", "stream", "shared", "context", NULL};
  PyObject *grid, *block, *kargs = NULL, *stream = Py_None, *ctx = Py_None, *shared_o = NULL;
  unsigned shared = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOO:launch", kwlist, &grid, &block, &kargs, &stream,
                                   &shared_o, &ctx) ||
      (shared_o && parse_shared(shared_o, &shared) < 0))
    return NULL;
  kc_dim3 g, b;
  if (kcpy_dim3(grid, &g, "grid") < 0 || kcpy_dim3(block, &b, "block") < 0 || kernel_open(self) < 0)
    return NULL;
  if (ctx != Py_None && !Py_IS_TYPE(ctx, &KcContext_Type))
    return PyErr_Format(PyExc_TypeError, "context must be a kcache Context");
  PyObject *seq = kargs ? PySequence_Fast(kargs, "args must be a sequence") : PyTuple_New(0);
  if (!seq) return NULL;
  PyObject *r = kcpy_launch_ex(self, ctx == Py_None ? NULL : (KcContext *)ctx, &g, &b,
                               PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq), stream, shared);
  Py_DECREF(seq);
  return r;
}

static PyObject *kernel_compile(KcKernel *self, PyObject *unused) {
  (void)unused;
  if (kernel_open(self) < 0) return NULL;
  kc_world w = kc_world_current(self->owner->rt);
  return kcpy_refresh(self, w) < 0 ? NULL : Py_NewRef(self);
}

static PyObject *kernel_get_source(KcKernel *self, void *c) {
  (void)c;
  if (kernel_open(self) < 0) return NULL;
  char *s = NULL;
  kc_status st = kc_kernel_source(self->k, &s);
  if (st) return kcpy_raise(self->owner->rt, st, NULL);
  PyObject *o = PyUnicode_FromString(s);
  kc_free(self->owner->rt, s);
  return o;
}

static PyObject *kernel_get_code(KcKernel *self, void *c) {
  (void)c;
  if (kernel_open(self) < 0) return NULL;
  kc_code_info ci;
  kc_status st;
  KCPY_NOGIL(self->owner, st = kc_kernel_code(self->k, &ci));
  if (st) return kcpy_raise(self->owner->rt, st, NULL);
  PyObject *max =
      ci.max_world == KC_WORLD_FOREVER ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(ci.max_world);
  if (!max) return NULL;
  return Py_BuildValue("{sKsNsKsy#sK}", "min_world", (unsigned long long)ci.min_world, "max_world", max, "id",
                       (unsigned long long)ci.id, "artifact", (const char *)ci.artifact,
                       (Py_ssize_t)ci.artifact_size, "compile_ns", (unsigned long long)ci.compile_ns);
}

static PyObject *kernel_get_params(KcKernel *self, void *c) {
  (void)c;
  if (kernel_open(self) < 0) return NULL;
  kc_status st;
  KCPY_NOGIL(self->owner, st = kc_kernel_compile(self->k));
  if (st) return kcpy_raise(self->owner->rt, st, NULL);
  uint32_t n;
  if ((st = kc_kernel_param_count(self->k, &n))) return kcpy_raise(self->owner->rt, st, NULL);
  static const char *const cls[] = {"buffer", "int", "uint", "float", "bytes"};
  PyObject *l = PyList_New(n);
  for (uint32_t i = 0; l && i < n; i++) {
    kc_param_info p;
    if ((st = kc_kernel_param(self->k, i, &p))) {
      Py_DECREF(l);
      return kcpy_raise(self->owner->rt, st, NULL);
    }
    PyObject *t =
        Py_BuildValue("{sssssssIss}", "name", p.name, "type", p.type, "ctype", p.ctype, "size", p.arg_size,
                      "kind", p.kind == 4 /* KC_ARG_LOCAL */ ? "local" : cls[p.scalar < 5 ? p.scalar : 4]);
    if (!t) Py_CLEAR(l);
    else PyList_SET_ITEM(l, i, t);
  }
  return l;
}

static PyObject *kernel_get_name(KcKernel *self, void *c) {
  (void)c;
  return Py_NewRef(self->name);
}
static PyObject *kernel_get_spec(KcKernel *self, void *c) {
  (void)c;
  return Py_NewRef(self->params);
}

PyObject *kcpy_kernel_label(KcKernel *k) {
  return PyUnicode_GET_LENGTH(k->params) ? PyUnicode_FromFormat("'%U' [%U]", k->name, k->params)
                                         : PyUnicode_FromFormat("'%U'", k->name);
}

/* <kcache.Kernel 'k' [T=float] backend='host'>, "closed" once its runtime is */
static PyObject *kernel_repr(KcKernel *self) {
  PyObject *label = kcpy_kernel_label(self);
  if (!label) return NULL;
  PyObject *r = self->owner->rt
                    ? PyUnicode_FromFormat("<kcache.Kernel %U backend='%s'>", label,
                                           kc_runtime_backend(self->owner->rt))
                    : PyUnicode_FromFormat("<kcache.Kernel %U closed (its Runtime is closed)>", label);
  Py_DECREF(label);
  return r;
}

PyObject *kernel_bind(KcKernel *self, PyObject *args, PyObject *kw); /* bound.c */

static PyMethodDef kernel_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))kernel_launch, METH_VARARGS | METH_KEYWORDS,
     "launch($self, /, grid, block, args=(), stream=None, shared=0, context=None)\n--\n\n"
     "Launches the kernel: k[grid, block](*args) with every option spelled out (kc_launch_ex).\n\n"
     "Args:\n"
     "    grid: work groups (blocks) per dimension: an int or a tuple of 1 to 3 ints.\n"
     "    block: work items (threads) per group, the same way.\n"
     "    args: the kernel's arguments, in order: kcache Buffers or host arrays for pointers (see\n"
     "        doc/python.md), Python or NumPy numbers for scalars.\n"
     "    stream: a Stream, an object with __cuda_stream__, a PyOpenCL queue, a native handle, or\n"
     "        None for the context's own queue.\n"
     "    shared: dynamic shared memory in bytes (CUDA; the host's kc_scratch()).\n"
     "    context: the Context (default: the stream's, else the runtime's default context).\n\n"
     "Raises:\n"
     "    TypeError: a wrong number of arguments, or one that does not convert.\n"
     "    ValueError: a grid or block dimension out of range, a negative shared.\n"
     "    CompileError, NotFoundError: the kernel does not compile (the message says why).\n"
     "    LaunchError: the backend refused the launch.\n"
     "    NotImplementedError: stream= or shared= in a build without the interop API."},
    {"compile", (PyCFunction)kernel_compile, METH_NOARGS,
     "compile($self, /)\n--\n\n"
     "Compiles for the calling thread's world without launching (the GIL released).\n\n"
     "Returns:\n    The kernel.\n\n"
     "Raises:\n    CompileError, NotFoundError: as a launch would."},
    {"bind", (PyCFunction)(void (*)(void))kernel_bind, METH_VARARGS | METH_KEYWORDS,
     "bind($self, /, *args, context=None)\n--\n\n"
     "Checks and binds arguments once (kc_args_create): b.launch(grid, block) then launches with no\n"
     "conversion at all.\n\n"
     "Args:\n"
     "    args: the kernel's arguments; pointer parameters take kcache Buffers (not arrays).\n"
     "    context: the Context (default: the runtime's default context).\n\n"
     "Returns:\n    BoundArgs.\n\n"
     "Raises:\n    TypeError: a wrong number of arguments, an array for a pointer, a value that does not\n"
     "        convert."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef kernel_getset[] = {
    {"source", (getter)kernel_get_source, NULL,
     "The translation unit compiled at the caller's world (str): the kernel and its closure.", NULL},
    {"code", (getter)kernel_get_code, NULL,
     "The code instance at the caller's world (compiling it first): a dict of min_world, max_world\n"
     "(None: still valid), id, artifact (bytes) and compile_ns.",
     NULL},
    {"params", (getter)kernel_get_params, NULL,
     "The parameters at the caller's world (compiling first): a list of dicts of name, type, ctype,\n"
     "size and kind ('buffer', 'int', 'uint', 'float', 'bytes' or 'local').",
     NULL},
    {"name", (getter)kernel_get_name, NULL, "The kernel's name.", NULL},
    {"specialization", (getter)kernel_get_spec, NULL, "The specialization as given: \"K=V,...\" (str).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject KcKernel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcache.Kernel",
    .tp_basicsize = sizeof(KcKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)kernel_traverse,
    .tp_clear = (inquiry)kernel_clear,
    .tp_doc = "A kernel name and specialization (Runtime.kernel). k[grid, block](*args) launches it\n"
              "(k[grid, block, stream] and k[grid, block, stream, shared] too): k[...] is a\n"
              "LaunchConfig, kept for the next launch with the same geometry.",
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_repr = (reprfunc)kernel_repr,
    .tp_as_mapping = &kernel_mapping,
    .tp_methods = kernel_methods,
    .tp_getset = kernel_getset,
    .tp_weaklistoffset = offsetof(KcKernel, weakrefs),
};
