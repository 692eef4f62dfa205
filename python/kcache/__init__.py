# SPDX-License-Identifier: MIT
"""kcache: a world-age JIT kernel cache (host C, OpenCL, CUDA) with a fast launch.

    import numpy as np, kcache
    with kcache.Runtime(backend="host") as rt:
        rt.define("scale", "KC_KERNEL void scale(KC_GLOBAL float *y, float a) "
                           "{ y[kc_global_id(0)] *= a; }")
        y = np.ones(8, np.float32)
        rt.kernel("scale")[8, 1](y, 2.0)     # y is now all 2.0
        rt.define_file("k.c")                # every definition of a source file: FileLoad(world, changed, defined, redefined, undefined)
        with rt.stream() as s:               # kcache.Stream (kc_stream)
            rt.kernel("scale")[8, 1, s](y, 2.0)
            s.synchronize()

Everything is in the C extension kcache._kcache. HAS_INTEROP: whether it was
built with the interop API (host arrays by pointer, CUDA arrays and streams). The package requires the
GIL (it does not declare free-threading support: a free-threaded
interpreter re-enables the GIL when it imports it); threads that pin
different worlds work under the GIL.
"""
import os as _os

# The OpenCL compile helper the wheel carries (kcache-clc, next to this
# file): PoCL builds one program at a time per process, so a runtime with
# more than one compile thread builds in helper processes. An explicit
# $KC_OPENCL_HELPER wins.
_clc = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "kcache-clc")
if "KC_OPENCL_HELPER" not in _os.environ and _os.access(_clc, _os.X_OK):
    _os.environ["KC_OPENCL_HELPER"] = _clc
del _clc

from ._kcache import (  # noqa: F401,E402
    HAS_INTEROP,
    MAX_ARGS,
    BoundArgs,
    Buffer,
    Context,
    Kernel,
    LaunchConfig,
    FileLoad,
    Pin,
    Runtime,
    Stats,
    backend_available,
    errors_by_status,
    library_version,
    KcacheError,
    InvalidArgumentError,
    OutOfMemoryError,
    NotFoundError,
    CallGraphRecursionError,
    CompileError,
    LinkError,
    LaunchError,
    ArgumentError,
    UnavailableError,
    DestroyedError,
    BusyError,
    StoreIOError,
    BackendError,
)

try:  # built with the interop API (kcache.h's streams)
    from ._kcache import Stream  # noqa: F401
except ImportError:
    pass

__version__ = library_version
