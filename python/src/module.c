/* SPDX-License-Identifier: MIT */
/*
 * module.c -- kcache._kcache: the exception classes (one per kc_status,
 * with the library's message and compiler log attached), the Stats type,
 * and module initialization.
 */
#include "kcpy.h"

#include <string.h>

/* status -> Python class name; generated from KC_STATUS_MAP's order, so a
 * status added to the library without a class here fails the build. */
static const char *const class_names[KC__STATUS_COUNT] = {
    [KC_OK] = NULL,
    [KC_EINVAL] = "InvalidArgumentError",
    [KC_ENOMEM] = "OutOfMemoryError",
    [KC_ENOTFOUND] = "NotFoundError",
    [KC_ERECURSION] = "CallGraphRecursionError",
    [KC_ECOMPILE] = "CompileError",
    [KC_ELINK] = "LinkError",
    [KC_ELAUNCH] = "LaunchError",
    [KC_EARGS] = "ArgumentError",
    [KC_EUNAVAILABLE] = "UnavailableError",
    [KC_EDESTROYED] = "DestroyedError",
    [KC_EBUSY] = "BusyError",
    [KC_EIO] = "StoreIOError",
    [KC_EBACKEND] = "BackendError",
};
_Static_assert(KC__STATUS_COUNT == 14, "a kc_status was added: give it a class name above");

static PyObject *base_error;
static PyObject *errors[KC__STATUS_COUNT];

PyObject *kcpy_raise(const kc_runtime *rt, kc_status st, const char *what) {
  kcpy_log_poll(); /* what kcache logged on the way, before the error */
  if (st <= KC_OK || st >= KC__STATUS_COUNT) st = KC_EBACKEND;
  const char *msg = kc_errmsg(rt);
  if (!msg || !*msg) msg = kc_status_string(st);
  PyObject *text = what ? PyUnicode_FromFormat("%s: %s", what, msg) : PyUnicode_FromString(msg);
  if (!text) return NULL;
  PyObject *exc = PyObject_CallOneArg(errors[st], text);
  if (exc) {
    PyObject *status = PyLong_FromLong(st);
    PyObject *name = PyUnicode_FromString(kc_status_name(st));
    /* the log: the whole message, which holds the compiler's output after a compile failed */
    if (status && name && PyObject_SetAttrString(exc, "status", status) == 0 &&
        PyObject_SetAttrString(exc, "status_name", name) == 0 &&
        PyObject_SetAttrString(exc, "log", text) == 0)
      PyErr_SetObject(errors[st], exc);
    Py_XDECREF(status);
    Py_XDECREF(name);
    Py_DECREF(exc);
  }
  Py_DECREF(text);
  return NULL;
}

PyObject *kcpy_error_class(kc_status st) {
  return errors[st > KC_OK && st < KC__STATUS_COUNT ? st : KC_EBACKEND];
}

int kcpy_check_idle(KcRuntime *r, const char *what) {
  if (!r->inflight) return 0;
  PyErr_Format(errors[KC_EBUSY],
               "%s: %d call(s) on this Runtime are running (compiles or waits on other threads, or a "
               "launch whose arguments are being converted: code an argument runs cannot close what the "
               "launch uses)",
               what, r->inflight);
  return -1;
}

int kcpy_check_exports(Py_ssize_t exports, const char *what) {
  if (!exports) return 0;
  PyErr_Format(errors[KC_EBUSY],
               "%s: %zd export(s) of the memory it would free are alive (a memoryview, np.frombuffer or "
               "np.from_dlpack array of a Buffer): release them first (del the views)",
               what, exports);
  return -1;
}

int kcpy_check_open(KcRuntime *r) {
  if (r && r->rt) return 0;
  PyErr_SetString(errors[KC_EDESTROYED], "the kcache Runtime is closed");
  return -1;
}

/* ------------------------------------------------------------------ stats */

static PyStructSequence_Field stats_fields[] = {
#define KCPY_STAT(f) {#f, NULL},
#include "stats_fields.h"
#undef KCPY_STAT
    {NULL, NULL}};
static PyStructSequence_Desc stats_desc = {"kcache.Stats", "A snapshot of a runtime's counters (kc_stats).",
                                           stats_fields, sizeof stats_fields / sizeof *stats_fields - 1};
static PyTypeObject *stats_type;

int kcpy_stats_init_type(void) {
  stats_type = PyStructSequence_NewType(&stats_desc);
  return stats_type ? 0 : -1;
}

PyObject *kcpy_stats_new(const kc_stats *s) {
  PyObject *o = PyStructSequence_New(stats_type);
  if (!o) return NULL;
  Py_ssize_t i = 0;
#define KCPY_STAT(f) PyStructSequence_SetItem(o, i++, PyLong_FromUnsignedLongLong((unsigned long long)s->f));
#include "stats_fields.h"
#undef KCPY_STAT
  for (Py_ssize_t j = 0; j < i; j++)
    if (!PyStructSequence_GetItem(o, j)) {
      Py_DECREF(o);
      return NULL;
    }
  return o;
}

/* ----------------------------------------------------------------- module */

static PyObject *mod_backend_available(PyObject *self, PyObject *arg) {
  (void)self;
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  kc_backend_kind kind = !strcmp(name, "host")     ? KC_BACKEND_HOST
                         : !strcmp(name, "opencl") ? KC_BACKEND_OPENCL
                         : !strcmp(name, "cuda")   ? KC_BACKEND_CUDA
                                                   : KC_BACKEND_AUTO;
  if (kind == KC_BACKEND_AUTO) return PyErr_Format(PyExc_ValueError, "unknown backend '%s'", name);
  const char *why = NULL;
  int ok = kc_backend_available(kind, &why);
  return Py_BuildValue("(Os)", ok ? Py_True : Py_False, ok ? "" : (why ? why : ""));
}

PyObject *kcpy_c_launch_batch(PyObject *self, PyObject *const *args, Py_ssize_t n); /* bench.c */

static PyObject *mod_half_bits(PyObject *self, PyObject *arg) {
  (void)self;
  double d = PyFloat_AsDouble(arg);
  if (d == -1.0 && PyErr_Occurred()) return NULL;
  return PyLong_FromLong(kcpy_to_half(d));
}

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
PyObject *kcpy_foreign_pointer(PyObject *self, PyObject *o); /* interop.c */
#endif

static PyMethodDef mod_methods[] = {
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    {"_foreign_pointer", kcpy_foreign_pointer, METH_O,
     "_foreign_pointer($module, obj, /)\n--\n\n"
     "The CUDA device pointer obj would be passed as, or None when it would be staged (tests)."},
#endif
    {"_c_launch_batch", (PyCFunction)(void (*)(void))kcpy_c_launch_batch, METH_FASTCALL,
     "_c_launch_batch($module, kernel, batch, /, *args)\n--\n\n"
     "Nanoseconds per launch of a C loop of kc_launch (the benchmark's C side)."},
    {"_half_bits", mod_half_bits, METH_O,
     "_half_bits($module, x, /)\n--\n\nThe bits a `half` parameter gets for x (tests)."},
    {"_log_exit", kcpy_log_exit, METH_NOARGS,
     "_log_exit($module, /)\n--\n\n"
     "Delivers the queued log messages; later ones go to stderr (registered with atexit)."},
    {"backend_available", mod_backend_available, METH_O,
     "backend_available($module, name, /)\n--\n\n"
     "Whether a backend can run on this machine (kc_backend_available).\n\n"
     "Args:\n"
     "    name: 'host', 'opencl' or 'cuda'.\n\n"
     "Returns:\n"
     "    (available, why): a bool, and why not ('' when it is available).\n\n"
     "Raises:\n"
     "    ValueError: name is not one of the three."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "kcache._kcache",
                                    "The C extension behind the kcache package.", -1, mod_methods};

static int add_errors(PyObject *m) {
  base_error = PyErr_NewExceptionWithDoc("kcache.KcacheError",
                                         "A kcache call failed: .status (kc_status), .status_name "
                                         "(\"KC_ECOMPILE\"), .log (the library's message, with the "
                                         "compiler's log after a failed compile).",
                                         PyExc_RuntimeError, NULL);
  if (!base_error || PyModule_AddObjectRef(m, "KcacheError", base_error) < 0) return -1;
  PyObject *by_status = PyDict_New();
  if (!by_status) return -1;
  for (int st = 1; st < KC__STATUS_COUNT; st++) {
    char qual[96];
    snprintf(qual, sizeof qual, "kcache.%s", class_names[st]);
    PyObject *bases =
        st == KC_ENOMEM ? PyTuple_Pack(2, base_error, PyExc_MemoryError) : PyTuple_Pack(1, base_error);
    errors[st] = bases ? PyErr_NewExceptionWithDoc(qual, kc_status_string(st), bases, NULL) : NULL;
    Py_XDECREF(bases);
    PyObject *key = PyLong_FromLong(st);
    if (!errors[st] || !key || PyDict_SetItem(by_status, key, errors[st]) < 0 ||
        PyModule_AddObjectRef(m, class_names[st], errors[st]) < 0) {
      Py_XDECREF(key);
      Py_DECREF(by_status);
      return -1;
    }
    Py_DECREF(key);
  }
  return PyModule_AddObject(m, "errors_by_status", by_status) < 0 ? (Py_DECREF(by_status), -1) : 0;
}

PyMODINIT_FUNC PyInit__kcache(void) {
  PyTypeObject *types[] = {
    &KcRuntime_Type,
    &KcContext_Type,
    &KcBuffer_Type,
    &KcKernel_Type,
    &KcConfig_Type,
    &KcBound_Type,
    &KcBoundLaunch_Type,
    &KcPin_Type,
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
    &KcStream_Type,
#endif
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (PyType_Ready(types[i]) < 0) return NULL;
  if (kcpy_stats_init_type() < 0 || kcpy_fileload_init_type() < 0) return NULL;
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  if (kcpy_interop_init_types() < 0) return NULL;
#endif
  PyObject *m = PyModule_Create(&moddef);
  if (!m) return NULL;
  if (add_errors(m) < 0) goto fail;
  const char *names[] = {"Runtime",   "Context",     "Buffer", "Kernel", "LaunchConfig",
                         "BoundArgs", "BoundLaunch", "Pin",    "Stream"};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0) goto fail;
  if (PyModule_AddObjectRef(m, "Stats", (PyObject *)stats_type) < 0) goto fail;
  if (PyModule_AddObjectRef(m, "FileLoad", kcpy_fileload_type()) < 0) goto fail;
  if (PyModule_AddStringConstant(m, "library_version", kc_version()) < 0) goto fail;
  if (PyModule_AddIntConstant(m, "MAX_ARGS", KC_MAX_ARGS) < 0) goto fail;
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  const int interop = 1; /* arrays by pointer on host and CUDA, stream=, shared= (interop.c) */
#else
  const int interop = 0;
#endif
  if (PyModule_AddObjectRef(m, "HAS_INTEROP", interop ? Py_True : Py_False) < 0) goto fail;
  if (kcpy_log_init(m) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
