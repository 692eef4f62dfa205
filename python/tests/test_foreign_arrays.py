# SPDX-License-Identifier: MIT
"""Host arrays that offer only __dlpack__ or only __array_interface__ (a
PyTorch or JAX CPU tensor, an array-api-strict array): on the host backend
passed by their own pointer (zero copy: the kernel sees the array's
address), on an OpenCL device that shares the host's memory used in place
too (kc_buffer_host), elsewhere staged and copied back; read-only, strided and
mistyped ones refused with the argument named."""
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import kcache

ADD = "KC_KERNEL void add1(KC_GLOBAL float *y) { y[kc_global_id(0)] += 1.0f; }"
SUM = "KC_KERNEL void sum(KC_GLOBAL const float *x, KC_GLOBAL float *y) { y[kc_global_id(0)] += x[kc_global_id(0)]; }"
ADDR = "KC_KERNEL void addr(KC_GLOBAL unsigned long long *y) { y[0] = (unsigned long long)(size_t)y; }"


class DLPackOnly:
    """Only the DLPack protocol (DLPack 1.0 capsules when asked, as PyTorch and NumPy give)."""

    def __init__(self, a: npt.NDArray[Any]) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.a.__dlpack_device__()


class LegacyDLPackOnly(DLPackOnly):
    """The pre-1.0 protocol: __dlpack__() takes no arguments (no read-only flag)."""

    def __dlpack__(self) -> Any:  # type: ignore[override]
        return self.a.__dlpack__()


class ArrayInterfaceOnly:
    def __init__(self, a: npt.NDArray[Any]) -> None:
        self.a = a

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return self.a.__array_interface__


WRAPPERS = [DLPackOnly, LegacyDLPackOnly, ArrayInterfaceOnly]


def test_wrappers_offer_no_buffer_protocol() -> None:
    for w in WRAPPERS:
        with pytest.raises(TypeError):
            memoryview(w(np.zeros(2, np.float32)))  # type: ignore[arg-type]


@pytest.mark.parametrize("wrap", WRAPPERS, ids=lambda w: w.__name__)
def test_protocol_only_arrays_work(rt: kcache.Runtime, wrap: Any) -> None:
    rt.define("add1", ADD)
    rt.define("sum", SUM)
    y = np.arange(8, dtype=np.float32)
    rt.kernel("add1")[8, 1](wrap(y))
    assert y.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]  # written in place (host) or copied back (staged)
    x = np.full(8, 10, np.float32)
    rt.kernel("sum")[8, 1](wrap(x), wrap(y))
    assert y.tolist() == [11, 12, 13, 14, 15, 16, 17, 18] and x.tolist() == [10] * 8


@pytest.mark.parametrize("wrap", WRAPPERS, ids=lambda w: w.__name__)
def test_zero_copy_on_the_host(wrap: Any) -> None:
    if not kcache.HAS_INTEROP:
        pytest.skip("arrays by pointer need the interop API")
    with kcache.Runtime(backend="host", cache_disable=True) as rt:
        rt.define("addr", ADDR)
        y = np.zeros(2, np.uint64)
        rt.kernel("addr")[1, 1](wrap(y))
        assert int(y[0]) == y.ctypes.data  # the kernel got the array's own memory


@pytest.mark.parametrize("wrap", WRAPPERS + [lambda a: a], ids=lambda w: getattr(w, "__name__", "ndarray"))
def test_in_place_on_an_opencl_cpu_device(wrap: Any) -> None:
    # a device that shares the host's memory (PoCL's CPU device) uses the array itself
    # (kc_buffer_host), at any alignment: the kernel sees the array's own address
    ok, why = kcache.backend_available("opencl")
    if not ok:
        pytest.skip(f"opencl backend not available here: {why}")
    with kcache.Runtime(backend="opencl", cache_disable=True) as rt:
        if not rt.devices[0].startswith(("pthread", "cpu")):
            pytest.skip(f"not PoCL's CPU device: {rt.devices[0]}")
        rt.define("addr", ADDR)
        rt.define("sum", SUM)
        raw = np.zeros(64, np.uint8)
        for off in (0, 8):
            y = raw[off:off + 16].view(np.uint64)
            rt.kernel("addr")[1, 1](wrap(y))
            assert int(y[0]) == y.ctypes.data  # the kernel got the array's own memory
        x, s = np.full(8, 10, np.float32), np.arange(1, 9, dtype=np.float32)
        for _ in range(2):  # the second launch sees the first's writes, and the array's own
            rt.kernel("sum")[8, 1](wrap(x), wrap(s))
        assert s.tolist() == [21, 22, 23, 24, 25, 26, 27, 28] and x.tolist() == [10] * 8
        ro = np.ones(4, np.float32)
        ro.flags.writeable = False
        s4 = np.zeros(4, np.float32)
        rt.kernel("sum")[4, 1](ro, s4)  # a read-only array is staged: never written back
        assert s4.tolist() == [1] * 4 and ro.tolist() == [1] * 4


def test_read_only_arrays_only_for_const_pointers(rt: kcache.Runtime) -> None:
    rt.define("add1", ADD)
    rt.define("sum", SUM)
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    y = np.zeros(4, np.float32)
    rt.kernel("sum")[4, 1](ArrayInterfaceOnly(ro), y)  # const float *: fine
    rt.kernel("sum")[4, 1](DLPackOnly(ro), y)
    assert y.tolist() == [2] * 4
    if rt.backend == "host" and kcache.HAS_INTEROP:
        for w in (ArrayInterfaceOnly, DLPackOnly):
            with pytest.raises(TypeError, match="read-only"):
                rt.kernel("add1")[4, 1](w(ro))
    # the legacy protocol cannot say read-only: NumPy refuses to export it, and kcache says so
    with pytest.raises(TypeError, match="argument 1 'y'.*__dlpack__ failed"):
        rt.kernel("add1")[4, 1](LegacyDLPackOnly(ro))
    assert ro.tolist() == [1] * 4


@pytest.mark.parametrize("wrap", WRAPPERS, ids=lambda w: w.__name__)
def test_strided_and_mistyped_arrays_are_refused(rt: kcache.Runtime, wrap: Any) -> None:
    rt.define("add1", ADD)
    with pytest.raises(TypeError, match="argument 1 'y'.*(strided|C-contiguous)"):
        rt.kernel("add1")[4, 1](wrap(np.zeros(8, np.float32)[::2]))
    with pytest.raises(TypeError, match="argument 1 'y'.*8-byte floating-point elements"):
        rt.kernel("add1")[4, 1](wrap(np.zeros(4, np.float64)))


def test_not_an_array(rt: kcache.Runtime) -> None:
    rt.define("add1", ADD)
    with pytest.raises(TypeError, match="__array_interface__ or a CPU __dlpack__"):
        rt.kernel("add1")[4, 1](object())


def test_array_api_strict(rt: kcache.Runtime) -> None:
    """A real library whose arrays offer only __dlpack__ (no buffer protocol)."""
    xp = pytest.importorskip("array_api_strict")
    rt.define("sum", SUM)
    x = xp.asarray([1.0, 2.0, 3.0, 4.0], dtype=xp.float32)
    y = xp.zeros(4, dtype=xp.float32)
    rt.kernel("sum")[4, 1](x, y)
    assert np.from_dlpack(y).tolist() == [1, 2, 3, 4]


def test_jax_cpu_arrays(rt: kcache.Runtime) -> None:
    """JAX CPU arrays (__dlpack__ only; immutable, so for const pointers)."""
    jnp = pytest.importorskip("jax.numpy")
    rt.define("sum", SUM)
    x = jnp.arange(4, dtype=jnp.float32)
    y = np.zeros(4, np.float32)
    rt.kernel("sum")[4, 1](x, y)
    assert y.tolist() == [0, 1, 2, 3]
