# SPDX-License-Identifier: MIT
"""Misuse that crashed or went wrong silently (the Python bug hunt): a
Runtime initialized twice, a Pin left from another thread, Buffer.__dlpack__'s
arguments, more than 16 foreign streams, impossible array shapes, errors from
an argument's protocol methods, negative options and specialization values
that are not one value. Each is a clear exception now, never a crash."""
import ctypes
import sys
import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import kcache

SCALE = "KC_KERNEL void scale(KC_GLOBAL float *y, float a) { y[kc_global_id(0)] *= a; }"
TMPL = "KC_KERNEL void tmpl(KC_GLOBAL T *y) { y[kc_global_id(0)] = (T)N; }"


def _interop() -> None:
    if not kcache.HAS_INTEROP:
        pytest.skip("needs the interop API")


# ------------------------------------------------------------ Runtime.__init__


def test_runtime_is_initialized_once(backend: str) -> None:
    rt = kcache.Runtime(backend=backend, cache_disable=True)
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    y = np.ones(4, np.float32)
    with pytest.raises(RuntimeError, match="initialized already"):
        kcache.Runtime.__init__(rt, backend=backend, cache_disable=True)
    k[4, 1](y, 2.0)  # the first runtime is still the one
    rt.close()
    # a closed Runtime stays closed: its old Kernel would otherwise run in a new kc_runtime
    with pytest.raises(RuntimeError, match="initialized before"):
        kcache.Runtime.__init__(rt, backend=backend, cache_disable=True)
    assert rt.closed
    with pytest.raises(kcache.DestroyedError):
        k[4, 1](y, 2.0)
    assert y.tolist() == [2.0] * 4


def test_runtime_init_failure_may_be_retried() -> None:
    rt = kcache.Runtime.__new__(kcache.Runtime)
    with pytest.raises(ValueError, match="backend"):
        kcache.Runtime.__init__(rt, backend="nope")
    kcache.Runtime.__init__(rt, backend="host", cache_disable=True)  # nothing was made from the failed one
    assert not rt.closed
    rt.close()


# ------------------------------------------------------------------------ Pin


def _in_thread(fn: Any) -> BaseException | None:
    out: list[BaseException | None] = [None]

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out[0] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def test_pin_belongs_to_the_thread_that_entered_it(rt: kcache.Runtime) -> None:
    rt.define("f", "KC_DEVICE int f(void) { return 1; }")
    p = rt.pin()
    p.__enter__()
    old = p.world
    rt.define("f", "KC_DEVICE int f(void) { return 2; }")
    assert rt.current_world == old != rt.world
    e = _in_thread(lambda: p.__exit__(None, None, None))
    assert isinstance(e, kcache.BusyError) and "another thread" in str(e)
    assert rt.current_world == old  # this thread is still pinned, and the Pin says so
    assert repr(p) == f"<kcache.Pin world={old}>"
    e = _in_thread(p.__enter__)
    assert isinstance(e, kcache.BusyError)
    assert p.__exit__(None, None, None) is False  # the entering thread leaves it
    assert rt.current_world == rt.world and repr(p) == "<kcache.Pin not held>"
    assert p.__exit__(None, None, None) is False  # not held: nothing to do


def test_pin_is_not_reinitialized_while_held(rt: kcache.Runtime) -> None:
    with kcache.Runtime(backend="host", cache_disable=True) as other:
        p = rt.pin()
        with p:
            with pytest.raises(kcache.BusyError, match="held"):
                p.__init__(other)
            rt.define("g", "KC_DEVICE int g(void) { return 1; }")
            assert rt.current_world == p.world != rt.world
        assert rt.current_world == rt.world  # the exit unpinned rt, not `other`
        p.__init__(other)  # not held: allowed
        with p:
            assert other.current_world == p.world


# ----------------------------------------------------------- Buffer.__dlpack__


def test_dlpack_copy_and_device(rt: kcache.Runtime) -> None:
    _interop()
    b = rt.buffer(np.zeros(8, np.uint8))
    if rt.backend == "opencl":
        with pytest.raises(BufferError):
            b.__dlpack__()
        b.write(np.full(8, 3, np.uint8))
        c = np.from_dlpack(b, device="cpu")  # dl_device=(1, 0): a copy in host memory
        assert c.tolist() == [3] * 8
        with pytest.raises(BufferError, match="copy=False"):
            np.from_dlpack(b, device="cpu", copy=False)
        return
    if rt.backend != "host":
        pytest.skip("NumPy reads host DLPack tensors only")
    view = np.from_dlpack(b)
    view2 = np.from_dlpack(b, copy=False)
    copy = np.from_dlpack(b, copy=True)
    assert copy.flags.writeable and not np.shares_memory(copy, view)
    b.write(np.full(8, 7, np.uint8))
    assert view.tolist() == view2.tolist() == [7] * 8  # the buffer's memory
    assert copy.tolist() == [0] * 8  # a copy made before the write
    with pytest.raises(BufferError, match=r"dl_device=\(2, 0\)"):
        b.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream"):
        b.__dlpack__(stream=5)
    with pytest.raises(TypeError):
        b.__dlpack__(1)  # type: ignore[call-arg]  # keyword-only
    with pytest.raises(TypeError):
        b.__dlpack__(bogus=4)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="dl_device"):
        b.__dlpack__(dl_device="cpu")  # type: ignore[arg-type]
    assert "dltensor_versioned" in repr(b.__dlpack__(max_version=(1, 0)))
    assert '"dltensor"' in repr(b.__dlpack__())
    assert b.__dlpack__(dl_device=(1, 0), copy=False) is not None  # its own device: no copy needed
    del view, view2
    b.destroy()  # a copy is not an export: only the views held the buffer
    assert copy.tolist() == [0] * 8


# ------------------------------------------------------------ foreign streams


def test_more_than_16_foreign_streams(rt: kcache.Runtime) -> None:
    _interop()
    if rt.backend == "host":
        pytest.skip("host streams have no handle of their own (0)")
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    streams = [rt.stream() for _ in range(40)]
    y = rt.buffer(np.ones(4, np.float32))
    for s in streams:
        k[4, 1, s.handle](y, 2.0)  # each handle wrapped once by the runtime
    for s in streams:
        k[4, 1, s.handle](y, 0.5)  # and found again
    rt.finish()
    assert y.read(dtype=np.float32).tolist() == [1.0] * 4


# ----------------------------------------------------------- array shapes


class ArrayInterface:
    """Only __array_interface__ (version 3), over the memory of a real array."""

    def __init__(self, keep: npt.NDArray[Any], shape: tuple[int, ...], typestr: str = "<f4") -> None:
        self.keep = keep
        self.__array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (keep.ctypes.data, False),
            "version": 3,
        }


def test_array_interface_impossible_shapes(rt: kcache.Runtime) -> None:
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    mem = np.ones(4, np.float32)
    for shape in ((-1,), (2**61, 16), (4, -2), (2**40, 2**40)):
        with pytest.raises(ValueError, match="argument 1 'y'"):
            k[1, 1](ArrayInterface(mem, shape), 2.0)
    # objects (typestr O): the kernel would write raw bytes over their PyObject pointers
    with pytest.raises(TypeError, match="Python objects"):
        k[1, 1](ArrayInterface(mem, (2,), "|O8"), 2.0)
    k[4, 1](ArrayInterface(mem, (4,)), 2.0)  # a good one still works
    assert mem.tolist() == [2.0] * 4


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class HandMadeDLPack:
    """A legacy DLPack producer whose tensor (float32, CPU) has the shape given."""

    def __init__(self, keep: npt.NDArray[Any], shape: list[int]) -> None:
        self.keep = keep
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.t = DLTensor(keep.ctypes.data, 1, 0, len(shape), 2, 32, 1,
                          ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)), None, 0, None, None)

    def __dlpack__(self, **kw: Any) -> Any:
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.t), b"dltensor", None)  # no destructor: the memory is self's

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_dlpack_impossible_shapes(rt: kcache.Runtime) -> None:
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    mem = np.ones(4, np.float32)
    for shape in ([-1], [2**61, 16], [4, -2]):
        with pytest.raises(ValueError, match="argument 1 'y'"):
            k[1, 1](HandMadeDLPack(mem, shape), 2.0)
    k[4, 1](HandMadeDLPack(mem, [4]), 2.0)
    assert mem.tolist() == [2.0] * 4


# ------------------------------------------- errors from protocol methods


class RaisingDLPack:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __dlpack__(self, **kw: Any) -> Any:
        raise self.exc

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_protocol_errors_go_up_unchanged(rt: kcache.Runtime) -> None:
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    with pytest.raises(KeyboardInterrupt):
        k[1, 1](RaisingDLPack(KeyboardInterrupt()), 2.0)
    with pytest.raises(MemoryError):
        k[1, 1](RaisingDLPack(MemoryError()), 2.0)
    # "not such an array" is still said naming the argument, the producer's error as its cause
    with pytest.raises(TypeError, match="argument 1 'y'.*__dlpack__ failed") as e:
        k[1, 1](RaisingDLPack(BufferError("no export")), 2.0)
    assert isinstance(e.value.__cause__, BufferError)


class RaisingCudaArrayInterface:
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        raise KeyboardInterrupt


class RaisingDLPackAttribute:
    @property
    def __dlpack__(self) -> Any:
        raise KeyboardInterrupt

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


def test_cuda_protocol_errors_go_up_unchanged() -> None:
    _interop()
    fp = kcache._kcache._foreign_pointer  # how a CUDA launch reads its arguments
    with pytest.raises(KeyboardInterrupt):
        fp(RaisingCudaArrayInterface())
    with pytest.raises(KeyboardInterrupt):
        fp(RaisingDLPackAttribute())
    assert fp(object()) is None


@pytest.mark.skipif(sys.version_info < (3, 12), reason="__buffer__ in Python needs 3.12")
def test_buffer_protocol_errors_go_up_unchanged(rt: kcache.Runtime) -> None:
    class RaisingBuffer:
        def __buffer__(self, flags: int) -> memoryview:
            raise KeyboardInterrupt

    rt.define("scale", SCALE)
    with pytest.raises(KeyboardInterrupt):
        rt.kernel("scale")[1, 1](RaisingBuffer(), 2.0)


# ------------------------------------------------------------ negative numbers


def test_negative_options_are_refused(backend: str) -> None:
    with pytest.raises(ValueError, match="compile_timeout_ms"):
        kcache.Runtime(backend=backend, cache_disable=True, compile_timeout_ms=-1)
    with pytest.raises(ValueError, match="cache_max_size"):
        kcache.Runtime(backend=backend, cache_disable=True, cache_max_size=-1)
    with pytest.raises(ValueError, match="platform_index"):
        kcache.Runtime(backend=backend, cache_disable=True, platform_index=-5)
    with pytest.raises(OverflowError, match="compile_timeout_ms"):
        kcache.Runtime(backend=backend, cache_disable=True, compile_timeout_ms=2**32)
    with pytest.raises(TypeError, match="cache_max_size"):
        kcache.Runtime(backend=backend, cache_disable=True, cache_max_size="1G")  # type: ignore[arg-type]
    with kcache.Runtime(backend=backend, cache_disable=True, platform_index=-1, compile_timeout_ms=2**32 - 1,
                        cache_max_size=2**64 - 1) as rt:
        rt.define("e", "KC_KERNEL void e(KC_GLOBAL float *y) { }")
        k = rt.kernel("e")
        with pytest.raises(ValueError, match="shared"):
            k.launch(1, 1, (bytearray(4),), shared=-1)
        with pytest.raises(ValueError, match="shared"):
            k[1, 1, None, -1]
        with pytest.raises(OverflowError, match="shared"):
            k.launch(1, 1, (bytearray(4),), shared=2**32)


# ---------------------------------------------------------- specialization


def test_specialization_values_are_one_value(rt: kcache.Runtime) -> None:
    rt.define("tmpl", TMPL)
    for kw in ({"T": "float", "N": "4,M=5"}, {"T": "float,N=7", "N": "4"}, {"T": "float", "N": "a=b"},
               {"T": "float", "N": "4\x00"}):
        with pytest.raises(ValueError, match="specialization parameter 'N'|specialization parameter 'T'"):
            rt.kernel("tmpl", **kw)
    with pytest.raises(ValueError, match="name"):
        rt.kernel("tmpl", {"T": "float", "N,M": 4})
    with pytest.raises(ValueError, match="NUL"):
        rt.kernel("tmpl", "T=float,N=4\x00,M=5")
    k = rt.kernel("tmpl", T="float", N=4)
    assert k.specialization == "T=float,N=4"
    y = np.zeros(2, np.float32)
    k[2, 1](y)
    assert y.tolist() == [4.0, 4.0]
    assert rt.kernel("tmpl", "T=float,N=4,M=5").specialization == "T=float,N=4,M=5"  # the string form as written
    # True and False are 1 and 0 (they were "True", which no compiler knows); None is refused
    assert rt.kernel("tmpl", T="float", N=True).specialization == "T=float,N=1"
    assert rt.kernel("tmpl", {"T": "float", "N": False}).specialization == "T=float,N=0"
    with pytest.raises(TypeError, match="'N' is None"):
        rt.kernel("tmpl", T="float", N=None)
