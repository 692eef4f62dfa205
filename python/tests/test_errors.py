# SPDX-License-Identifier: MIT
"""Errors: every kc_status is an exception class carrying the library's
message (the compiler's log after a failed compile), and bad input from
Python is refused with a clear message, never a crash."""
from collections.abc import Callable

import numpy as np
import pytest

import kcache


def test_every_status_has_a_class() -> None:
    names = {c.__name__ for c in kcache.errors_by_status.values()}
    assert len(kcache.errors_by_status) == 13 and len(names) == 13
    for st, cls in kcache.errors_by_status.items():
        assert issubclass(cls, kcache.KcacheError) and issubclass(cls, RuntimeError)
        assert getattr(kcache, cls.__name__) is cls
    assert issubclass(kcache.OutOfMemoryError, MemoryError)


def test_undefined_kernel(rt: kcache.Runtime) -> None:
    k = rt.kernel("nothere")
    with pytest.raises(kcache.NotFoundError) as e:
        k[1, 1]()
    assert e.value.status_name == "KC_ENOTFOUND" and e.value.status == 3 and "nothere" in str(e.value)


def test_compile_error_carries_the_log(rt: kcache.Runtime) -> None:
    rt.define("bad", "KC_KERNEL void bad(KC_GLOBAL int *y) { y[0] = nope_undeclared; }")
    k = rt.kernel("bad")
    for _ in range(2):  # remembered: the same error again without compiling again
        with pytest.raises(kcache.CompileError) as e:
            k[1, 1](np.zeros(1, np.int32))
        assert "nope_undeclared" in e.value.log and e.value.status_name == "KC_ECOMPILE"
    assert rt.stats().compile_failures == 1


def test_recursion_and_bad_definitions(rt: kcache.Runtime) -> None:
    rt.define("r", "KC_KERNEL void r(KC_GLOBAL int *y) { r(y); }")
    with pytest.raises(kcache.CallGraphRecursionError):
        rt.kernel("r")[1, 1](np.zeros(1, np.int32))
    with pytest.raises(kcache.InvalidArgumentError, match="reserved|kc_"):
        rt.define("kc_x", "KC_DEVICE int kc_x(void) { return 1; }")
    with pytest.raises(kcache.NotFoundError):
        rt.undefine("never_defined")
    with pytest.raises(kcache.InvalidArgumentError):
        rt.kernel("k", "T")  # not KEY=VALUE
    with pytest.raises(TypeError):
        rt.kernel("k", "T=int", T="int")


def test_undefine_returns_a_world(rt: kcache.Runtime) -> None:
    w = rt.define("u", "KC_KERNEL void u(void) { }")
    assert rt.undefine("u") == w + 1
    with pytest.raises(kcache.NotFoundError):
        rt.kernel("u")[1, 1]()


def test_geometry_and_launch_options(rt: kcache.Runtime) -> None:
    rt.define("e", "KC_KERNEL void e(void) { }")
    k = rt.kernel("e")
    k[(2, 2), (1, 1, 1)]()
    k.launch(grid=(1, 2, 3), block=1)
    for g in [0, (1, 2, 3, 4), (), -1, 2**32]:
        with pytest.raises(ValueError):
            k[g, 1]  # type: ignore[index]
    with pytest.raises(TypeError):
        k[1]  # type: ignore[index]
    if not kcache.HAS_INTEROP:
        with pytest.raises(NotImplementedError, match="shared"):
            k.launch(1, 1, shared=1024)
        with pytest.raises(NotImplementedError, match="stream"):
            k.launch(1, 1, stream=object())
        return
    if rt.backend == "opencl":  # OpenCL sizes local memory per KC_LOCAL parameter instead
        with pytest.raises(kcache.InvalidArgumentError, match="KC_LOCAL"):
            k.launch(1, 1, shared=1024)
    else:
        k.launch(1, 1, shared=1024)
    with pytest.raises(TypeError, match="__cuda_stream__ or a raw handle"):
        k.launch(1, 1, stream=object())


def test_closed_runtime(backend: str) -> None:
    r = kcache.Runtime(backend=backend, cache_disable=True)
    r.define("e", "KC_KERNEL void e(void) { }")
    k = r.kernel("e")
    launch = k[1, 1]
    ctx = r.context
    r.close()
    assert r.closed
    calls: list[Callable[[], object]] = [
        lambda: launch(), lambda: r.define("a", "KC_DEVICE int a(void) { return 0; }"), lambda: r.stats(),
        lambda: k.source, lambda: ctx.finish(), lambda: r.pin()]
    for f in calls:
        with pytest.raises(kcache.DestroyedError):
            f()
    r.close()  # twice is fine
    del k, launch, ctx  # and their handles are not destroyed again


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="backend must be"):
        kcache.Runtime(backend="fpga")
    with pytest.raises(ValueError, match="log_level"):
        kcache.Runtime(backend="host", log_level="loud")
    with pytest.raises(TypeError):
        kcache.Runtime(backend="host", nonsense=1)  # type: ignore[call-arg]
    ok, why = kcache.backend_available("cuda")
    assert isinstance(ok, bool) and isinstance(why, str)


def test_bound_arguments_refuse_arrays(rt: kcache.Runtime) -> None:
    rt.define("s", "KC_KERNEL void s(KC_GLOBAL float *y, float a) { y[0] = a; }")
    with pytest.raises(TypeError, match="kcache Buffers"):
        rt.kernel("s").bind(np.zeros(1, np.float32), 1.0)
    b = rt.kernel("s").bind(rt.buffer(4), 1.0)
    with pytest.raises(IndexError):
        b.set(2, 1.0)
    with pytest.raises(TypeError, match="does not fit|not a number"):
        b.set(1, "x")


def test_checked_mode_names_the_argument(backend: str) -> None:
    # checked mode (kc_options.checked): a write past a buffer's end is a LaunchError naming it
    with kcache.Runtime(backend=backend, cache_disable=True, checked=True) as r:
        r.define("over", "KC_KERNEL void over(KC_GLOBAL float *y) { y[kc_global_id(0) + 16] = 1.0f; }")
        b = r.buffer(64)
        with pytest.raises(kcache.LaunchError, match="wrote outside its buffer"):
            r.kernel("over")[1, 1](b)
            r.finish()
