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

Everything is in the C extension kcache._kcache, typed by _kcache.pyi
(the package is marked py.typed); doc/python.md is the guide.

HAS_INTEROP (bool): whether it was built with the interop API (host arrays
by pointer, CUDA arrays and streams; kcache.Stream exists only then).

The log: kcache's messages (compiles at log_level="info", warnings ...) go
to logging.getLogger("kcache") at the matching level; silence them with
logging.getLogger("kcache").setLevel(logging.ERROR) (or .disabled = True),
or keep kcache's own stderr lines with Runtime(log="stderr").

Importing the package changes nothing in os.environ: the OpenCL compile
helper the wheel carries (kcache-clc, beside the extension module) is found
by the library itself; $KC_OPENCL_HELPER, when set, still names another.

The package requires the GIL (it does not declare free-threading support:
a free-threaded interpreter re-enables the GIL when it imports it); threads
that pin different worlds work under the GIL.
"""
from ._kcache import (
    HAS_INTEROP,
    MAX_ARGS,
    BoundArgs,
    BoundLaunch,
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

__version__: str = library_version

__all__ = [
    "HAS_INTEROP",
    "MAX_ARGS",
    "BoundArgs",
    "BoundLaunch",
    "Buffer",
    "Context",
    "Kernel",
    "LaunchConfig",
    "FileLoad",
    "Pin",
    "Runtime",
    "Stats",
    "backend_available",
    "errors_by_status",
    "library_version",
    "KcacheError",
    "InvalidArgumentError",
    "OutOfMemoryError",
    "NotFoundError",
    "CallGraphRecursionError",
    "CompileError",
    "LinkError",
    "LaunchError",
    "ArgumentError",
    "UnavailableError",
    "DestroyedError",
    "BusyError",
    "StoreIOError",
    "BackendError",
]
if HAS_INTEROP:  # built with the interop API (kcache.h's streams)
    from ._kcache import Stream as Stream

    __all__ += ["Stream"]
