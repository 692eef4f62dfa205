/* SPDX-License-Identifier: MIT */
/*
 * log.c -- kcache's log routed to Python's logging.getLogger("kcache"):
 * the kc_log_fn every Runtime gets (unless Runtime(log="stderr")), a queue
 * of its messages, and their delivery to the logger.
 *
 * kcache calls its log sink from any thread, with or without the GIL, and
 * sometimes while it holds its own locks; Python code (a logging handler)
 * run from there could call kcache or wait for the GIL held by a thread
 * that waits for those locks. So the sink never runs Python: it copies the
 * message into a queue (a mutex and malloc only) and asks the interpreter
 * for a pending call (Py_AddPendingCall, which needs no GIL); the messages
 * reach the logger there, or sooner, when a call of the package returns
 * from a part of kcache that logs (kcpy_log_poll: compiles, defines, a
 * launch's slow path, errors, close), always outside kcache. After the
 * interpreter starts to exit (atexit), messages go to stderr as kcache's
 * own sink writes them.
 */
#include "kcpy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kcpy_msg {
  struct kcpy_msg *next;
  kc_log_level level;
  size_t len;
  char text[];
} kcpy_msg;

enum { KCPY_LOG_MAX = 4096 }; /* queued messages; more are counted and dropped */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static kcpy_msg *log_head, **log_tail = &log_head;
static size_t log_queued, log_dropped;
static int log_scheduled; /* a pending call is asked for (atomic) */
static int log_exiting; /* the interpreter is exiting: stderr from now on (atomic) */
int kcpy_log_nonempty; /* messages are queued (atomic; read by kcpy_log_poll) */

static const char *level_name(kc_log_level l) {
  return l == KC_LOG_ERROR ? "error" : l == KC_LOG_WARN ? "warning" : l == KC_LOG_INFO ? "info" : "debug";
}

static int log_pending(void *unused) {
  (void)unused;
  kcpy_log_drain();
  return 0;
}

void kcpy_log_sink(void *ud, kc_log_level level, const char *text) {
  (void)ud;
  if (__atomic_load_n(&log_exiting, __ATOMIC_ACQUIRE)) {
    fprintf(stderr, "kcache: %s: %s\n", level_name(level), text);
    return;
  }
  size_t n = strlen(text);
  kcpy_msg *m = malloc(sizeof *m + n + 1);
  pthread_mutex_lock(&log_mu);
  if (!m || log_queued >= KCPY_LOG_MAX) {
    log_dropped++;
    free(m);
  } else {
    m->next = NULL;
    m->level = level;
    m->len = n;
    memcpy(m->text, text, n + 1);
    *log_tail = m;
    log_tail = &m->next;
    log_queued++;
  }
  __atomic_store_n(&kcpy_log_nonempty, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&log_mu);
  if (!__atomic_exchange_n(&log_scheduled, 1, __ATOMIC_ACQ_REL) && Py_AddPendingCall(log_pending, NULL) < 0)
    __atomic_store_n(&log_scheduled, 0, __ATOMIC_RELEASE); /* the next message asks again */
}

static int py_level(kc_log_level l) {
  return l == KC_LOG_ERROR ? 40 : l == KC_LOG_WARN ? 30 : l == KC_LOG_INFO ? 20 : 10;
}

void kcpy_log_drain(void) {
  __atomic_store_n(&log_scheduled, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&log_mu);
  kcpy_msg *list = log_head;
  size_t dropped = log_dropped;
  log_head = NULL;
  log_tail = &log_head;
  log_queued = log_dropped = 0;
  __atomic_store_n(&kcpy_log_nonempty, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&log_mu);
  if (!list && !dropped) return;
  PyObject *et, *ev, *tb; /* a call that is raising keeps its exception */
  PyErr_Fetch(&et, &ev, &tb);
  PyObject *logging = PyImport_ImportModule("logging");
  PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "kcache") : NULL;
  Py_XDECREF(logging);
  if (!logger) PyErr_WriteUnraisable(NULL);
  int failed = !logger;
  for (kcpy_msg *m = list, *next; m; m = next) {
    next = m->next;
    if (!failed) {
      /* a compiler's log may hold bytes that are not UTF-8 */
      PyObject *text = PyUnicode_DecodeUTF8(m->text, (Py_ssize_t)m->len, "replace");
      PyObject *r = text ? PyObject_CallMethod(logger, "log", "iO", py_level(m->level), text) : NULL;
      Py_XDECREF(text);
      if (!r) {
        PyErr_WriteUnraisable(logger);
        failed = 1;
      }
      Py_XDECREF(r);
    }
    free(m);
  }
  if (dropped && !failed) {
    PyObject *r = PyObject_CallMethod(logger, "warning", "sn",
                                      "%d kcache log messages were dropped (more than 4096 waited for "
                                      "the interpreter)",
                                      (Py_ssize_t)dropped);
    if (!r) PyErr_WriteUnraisable(logger);
    Py_XDECREF(r);
  }
  Py_XDECREF(logger);
  PyErr_Restore(et, ev, tb);
}

/* _log_exit(): registered with atexit at import; messages after it go to stderr. */
PyObject *kcpy_log_exit(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  kcpy_log_drain();
  __atomic_store_n(&log_exiting, 1, __ATOMIC_RELEASE);
  kcpy_log_drain(); /* what came in between */
  Py_RETURN_NONE;
}

int kcpy_log_init(PyObject *module) {
  PyObject *fn = PyObject_GetAttrString(module, "_log_exit");
  PyObject *atexit = fn ? PyImport_ImportModule("atexit") : NULL;
  PyObject *r = atexit ? PyObject_CallMethod(atexit, "register", "O", fn) : NULL;
  Py_XDECREF(fn);
  Py_XDECREF(atexit);
  Py_XDECREF(r);
  return r ? 0 : -1;
}
