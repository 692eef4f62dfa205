# SPDX-License-Identifier: MIT
"""Python code that runs inside a launch, and objects from elsewhere (bug
hunt of 2026-12-07): an argument's __float__ that closes the Runtime,
destroys a Buffer or launches the same kernel again; another thread's
launch while one waits on its stream; a Buffer of another (closed)
Runtime; exceptions raised by an argument's conversion; arrays of Python
objects; a Buffer made by __new__ alone. Each crashed the interpreter or
gave a wrong result without an error."""
import threading
from collections.abc import Callable

import numpy as np
import pytest

import kcache

SCALE = "KC_KERNEL void scale(KC_GLOBAL float *y, float a) { y[kc_global_id(0)] *= a; }"
COPY = (
    "KC_KERNEL void copy(KC_GLOBAL const float *x, KC_GLOBAL float *y, float a) {\n"
    "  y[kc_global_id(0)] = x[kc_global_id(0)] * a;\n}\n"
)


def test_buffer_of_another_runtime(backend: str) -> None:
    r1 = kcache.Runtime(backend=backend, cache_disable=True)
    b = r1.buffer(np.ones(4, np.float32))
    live = r1.buffer(np.ones(4, np.float32))
    with kcache.Runtime(backend=backend, cache_disable=True) as r2:
        r2.define("scale", SCALE)
        k = r2.kernel("scale")
        k[4, 1](r2.buffer(np.ones(4, np.float32)), 2.0)  # the cached path is ready
        with pytest.raises(TypeError, match="another kcache Runtime"):
            k[4, 1](live, 2.0)  # open, but not this kernel's
        r1.close()
        for _ in range(2):  # the cached launch's path, then the full one's
            with pytest.raises(TypeError, match="another kcache Runtime"):
                k[4, 1](b, 2.0)
        with pytest.raises(TypeError, match="another kcache Runtime"):
            k.bind(b, 2.0)
        own = r2.buffer(np.ones(4, np.float32))
        bound = k.bind(own, 2.0)
        with pytest.raises(TypeError, match="kernel's Runtime"):
            bound.set(0, b)
        bound.launch(4, 1)
        assert own.read(dtype=np.float32).tolist() == [2.0] * 4


def test_context_of_another_runtime(backend: str) -> None:
    r1 = kcache.Runtime(backend=backend, cache_disable=True)
    c1 = r1.create_context(0)
    with kcache.Runtime(backend=backend, cache_disable=True) as r2:
        r2.define("scale", SCALE)
        k = r2.kernel("scale")
        y = r2.buffer(np.ones(4, np.float32))
        k[4, 1](y, 2.0)
        with pytest.raises(TypeError, match="Context belongs to another kcache Runtime"):
            k.launch(4, 1, (y, 2.0), context=c1)  # open, but not the kernel's
        r1.close()  # its contexts' memory is freed: it crashed here
        for _ in range(2):
            with pytest.raises(TypeError, match="Context belongs to another kcache Runtime"):
                k.launch(4, 1, (y, 2.0), context=c1)
        with pytest.raises(TypeError, match="Context belongs to another kcache Runtime"):
            k.bind(y, 2.0, context=c1)
        assert y.read(dtype=np.float32).tolist() == [2.0] * 4


def test_close_or_destroy_inside_an_argument(rt: kcache.Runtime) -> None:
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    y = rt.buffer(np.ones(8, np.float32))
    other = rt.buffer(8)
    k[8, 1](y, 2.0)
    seen: list[str] = []

    class Closes:
        def __float__(self) -> float:
            acts: list[Callable[[], None]] = [rt.close, other.destroy]
            for act in acts:
                try:
                    act()
                    seen.append("done")
                except kcache.BusyError as e:
                    seen.append(str(e))
            return 3.0

    k[8, 1](y, Closes())  # the launch goes on: the close was refused
    assert len(seen) == 2 and all("running" in s for s in seen), seen
    assert not rt.closed and not other.destroyed
    assert y.read(dtype=np.float32).tolist() == [6.0] * 8
    bound = k.bind(y, 1.0)
    bound.set(1, Closes())  # the same in a bound argument
    bound.launch(8, 1)
    assert y.read(dtype=np.float32).tolist() == [18.0] * 8
    assert not rt.closed


def test_same_kernel_launched_inside_an_argument(rt: kcache.Runtime) -> None:
    # (only backends that stage arrays can fail this: on the host an array
    # is passed by its pointer, and the test passes with or without the fix)
    rt.define("copy", COPY)
    k = rt.kernel("copy")
    x = np.arange(8, dtype=np.float32) + 100
    x.setflags(write=False)  # staged where the backend stages (OpenCL)
    y = np.zeros(8, np.float32)
    k[8, 1](x, y, 1.0)

    class Launches:
        def __float__(self) -> float:
            big = np.arange(1 << 16, dtype=np.float32)
            big.setflags(write=False)
            out = np.zeros(1 << 16, np.float32)
            k[1 << 16, 1](big, out, 1.0)  # would regrow the staging buffer of x
            assert np.array_equal(out, big)
            return 2.0

    for _ in range(5):
        y[:] = 0
        k[8, 1](x, y, Launches())
        assert np.array_equal(y, x * 2), y


def test_stream_launch_beside_another_threads(rt: kcache.Runtime) -> None:
    # (staging backends only, as above; and a race: it failed in every run
    # before the fix, on PoCL, but a run that does not overlap would pass)
    if not kcache.HAS_INTEROP:
        pytest.skip("needs the interop API (streams)")
    rt.define(
        "slow",
        "KC_KERNEL void slow(KC_GLOBAL const float *x, KC_GLOBAL float *y, int n) {\n"
        "  int i = (int)kc_global_id(0);\n"
        "  if (i >= n) return;\n"
        "  float a = x[i];\n"
        "  for (int r = 0; r < 2000; r++) a = a * 1.0000001f;\n"
        "  y[i] = x[i] * 2.0f + 0.0f * a;\n}\n",
    )
    k = rt.kernel("slow")
    bad: list[str] = []

    def on_stream() -> None:
        s = rt.stream()
        for it in range(40):
            x = np.full(4096, 1.0, np.float32)
            x.setflags(write=False)
            y = np.zeros(4096, np.float32)
            k[64, 64, s](x, y, 4096)
            if not np.all(y == 2.0):
                bad.append(f"stream launch {it}: {np.unique(y)[:4]}")

    def plain() -> None:
        for it in range(160):
            n = 64 + (it * 997) % 8000
            x = np.full(n, 7.0, np.float32)
            x.setflags(write=False)
            y = np.zeros(n, np.float32)
            k[(n + 63) // 64, 64](x, y, n)
            if not np.all(y == 14.0):
                bad.append(f"plain launch {it}: {np.unique(y)[:4]}")

    ts = [threading.Thread(target=on_stream), threading.Thread(target=plain)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad, bad[:8]


class _Raises:
    def __init__(self, e: BaseException) -> None:
        self.e = e

    def __float__(self) -> float:
        raise self.e


@pytest.mark.parametrize("exc", [KeyboardInterrupt, MemoryError, ZeroDivisionError])
def test_an_arguments_own_exception_goes_up(rt: kcache.Runtime, exc: type[BaseException]) -> None:
    rt.define("scale", SCALE)
    k = rt.kernel("scale")
    y = rt.buffer(np.ones(4, np.float32))
    with pytest.raises(exc):
        k[4, 1](y, _Raises(exc()))
    bound = k.bind(y, 1.0)
    with pytest.raises(exc):
        bound.set(1, _Raises(exc()))
    with pytest.raises(TypeError, match="is not a number"):  # what is no number still says so
        k[4, 1](y, "x")
    k[4, 1](y, 2.0)
    assert y.read(dtype=np.float32).tolist() == [2.0] * 4


def test_arrays_of_python_objects_are_refused(rt: kcache.Runtime) -> None:
    rt.define("raw", "KC_KERNEL void raw(KC_GLOBAL unsigned char *y) { y[kc_global_id(0)] = 7; }")
    k = rt.kernel("raw")
    objs = np.array([object() for _ in range(4)], dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        k[4, 1](objs)
    b = rt.buffer(32)
    with pytest.raises(TypeError, match="Python objects"):
        b.read(dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        b.read(out=np.empty(4, dtype=object))
    with pytest.raises(TypeError, match="Python objects"):
        b.write(objs)
    with pytest.raises(TypeError, match="Python objects"):
        rt.buffer(objs)
    assert [repr(o)[:8] for o in objs] == ["<object "] * 4  # untouched


def test_bind_refuses_local_sizes(backend: str) -> None:
    if backend != "opencl":
        pytest.skip("KC_LOCAL sizes are OpenCL's")
    with kcache.Runtime(backend=backend, cache_disable=True) as rt:
        rt.define(
            "loc",
            "KC_KERNEL void loc(KC_GLOBAL float *y, KC_LOCAL float *t) {\n"
            "  t[kc_local_id(0)] = 1.0f;\n  y[kc_global_id(0)] = t[kc_local_id(0)];\n}\n",
        )
        k = rt.kernel("loc")
        y = rt.buffer(np.zeros(4, np.float32))
        with pytest.raises(TypeError, match="not KC_LOCAL sizes"):  # was a SystemError
            k.bind(y, 16)
        k[4, 4](y, 16)
        assert y.read(dtype=np.float32).tolist() == [1.0] * 4


def test_a_buffer_never_initialised() -> None:
    b = kcache.Buffer.__new__(kcache.Buffer)
    acts: list[Callable[[], object]] = [b.read, b.destroy, b.tobytes]
    for act in acts:
        with pytest.raises(kcache.DestroyedError, match="never initialised"):
            act()
    with pytest.raises(kcache.DestroyedError, match="never initialised"):
        _ = b.context
    assert len(b) == 0 and b.destroyed and "destroyed" in repr(b)
    if kcache.HAS_INTEROP:
        with pytest.raises(BufferError):
            b.__dlpack_device__()
        with pytest.raises(BufferError):
            b.__dlpack__()
