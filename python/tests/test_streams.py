# SPDX-License-Identifier: MIT
"""kcache.Stream (kc_stream): made on a context or wrapping the caller's
queue; launches on it through launch(stream=) and k[grid, block, stream];
ordering between two streams with wait; synchronize, close, the context
manager; the host backend's streams (each runs its launches on a thread of
its own) and its implicit one (the context's queue, synchronous)."""
import numpy as np
import pytest

import kcache

pytestmark = pytest.mark.skipif(not kcache.HAS_INTEROP, reason="streams need the interop API")

SLOW = """KC_KERNEL void slow(KC_GLOBAL volatile int *x, int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) acc = acc * 1664525 + 1013904223 + x[1];
  x[2] = acc;
  x[0] = 1;
}"""
COPY = "KC_KERNEL void copy(KC_GLOBAL int *x, KC_GLOBAL int *y) { y[0] = x[0] + 1; }"
FILL = "KC_KERNEL void fill(KC_GLOBAL float *y, float v) { y[kc_global_id(0)] = v; }"


def test_launches_on_a_stream(rt: kcache.Runtime) -> None:
    rt.define("fill", FILL)
    k = rt.kernel("fill")
    with rt.stream() as s:
        assert isinstance(s, kcache.Stream) and not s.closed and not s.wrapped
        assert s.context.id == rt.context.id
        assert isinstance(s.handle, int) and (s.handle != 0) == (rt.backend != "host")
        b = rt.buffer(4 * 16)
        k[16, 1, s](b, 3.0)  # the Numba/CuPy-like form
        s.synchronize()
        out = np.zeros(16, np.float32)
        b.read(out)
        assert list(out) == [3.0] * 16
        k.launch(16, 1, args=(b, 4.0), stream=s)
        assert s.wait(s) is s
        s.synchronize()
        b.read(out)
        assert list(out) == [4.0] * 16
        y = np.zeros(16, np.float32)
        k[16, 1, s](y, 5.0)  # an array: staged (OpenCL) or by pointer (host), finished when the call returns
        assert list(y) == [5.0] * 16
    assert s.closed
    with pytest.raises(kcache.DestroyedError, match="closed"):
        s.synchronize()
    with pytest.raises(kcache.DestroyedError, match="closed"):
        k[16, 1, s](y, 1.0)
    s.close()  # a second close does nothing


def test_bound_arguments_on_a_stream(rt: kcache.Runtime) -> None:
    rt.define("fill", FILL)
    b = rt.buffer(4 * 8)
    bound = rt.kernel("fill").bind(b, 8.0)
    s = rt.stream()
    bound.launch(8, 1, s)  # kc_launch_args_ex on the stream
    s.synchronize()
    out = np.zeros(8, np.float32)
    b.read(out)
    assert list(out) == [8.0] * 8
    bound.set(1, 9.0)
    bound.launch(8, 1, None)  # the context's own queue
    rt.finish()
    b.read(out)
    assert list(out) == [9.0] * 8
    with pytest.raises(kcache.InvalidArgumentError):
        bound.launch(8, 1, rt.create_context().stream())  # a stream of another context
    s.close()
    with pytest.raises(kcache.DestroyedError, match="closed"):
        bound.launch(8, 1, s)


def test_a_stream_of_another_context(rt: kcache.Runtime) -> None:
    ctx = rt.create_context()
    rt.define("fill", FILL)
    s = ctx.stream()
    b = ctx.buffer(16)
    rt.kernel("fill")[4, 1, s](b, 2.0)  # no context given: the stream's
    s.synchronize()
    out = np.zeros(4, np.float32)
    b.read(out)
    assert list(out) == [2.0] * 4
    with pytest.raises(kcache.InvalidArgumentError):
        rt.kernel("fill").launch(4, 1, args=(rt.buffer(16), 1.0), stream=s, context=rt.context)
    with pytest.raises(kcache.InvalidArgumentError, match="different contexts"):
        s.wait(rt.stream())
    ctx.destroy()  # destroys its streams with it
    assert s.closed
    with pytest.raises(kcache.DestroyedError, match="context is destroyed"):
        s.synchronize()
    s.close()


def test_a_stream_of_another_runtime(backend: str) -> None:
    with kcache.Runtime(backend=backend, cache_disable=True) as a, \
            kcache.Runtime(backend=backend, cache_disable=True) as b:
        a.define("fill", FILL)
        with pytest.raises(kcache.InvalidArgumentError, match="another Runtime"):
            a.kernel("fill")[1, 1, b.stream()](a.buffer(4), 1.0)
        with pytest.raises(kcache.InvalidArgumentError, match="another Runtime"):
            a.stream(context=b.context)
        with pytest.raises(TypeError, match="kcache Stream, not int"):
            a.stream().wait(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="__cuda_stream__ or a raw handle.*not str"):
            a.stream(native="queue")


def test_two_streams_ordered_by_wait(rt: kcache.Runtime) -> None:
    if rt.backend == "cuda":
        pytest.skip("two real queues: OpenCL and the host here")
    rt.define("slow", SLOW)
    rt.define("copy", COPY)
    slow, copy = rt.kernel("slow").compile(), rt.kernel("copy").compile()
    x, y = rt.buffer(np.zeros(4, np.int32)), rt.buffer(np.zeros(4, np.int32))
    a, b = rt.stream(), rt.stream()
    assert a.handle != b.handle or rt.backend == "host"  # the host's queues show no handle
    for _ in range(2):
        x.write(np.zeros(4, np.int32))
        slow.launch(1, 1, args=(x, 20_000_000), stream=a)  # tens of ms on PoCL
        b.wait(a)  # without it, copy runs beside slow (PoCL, the host) and sees x[0] == 0
        copy[1, 1, b](x, y)
        b.synchronize()
        out = np.zeros(4, np.int32)
        y.read(out)
        assert out[0] == 2
        a.synchronize()


def test_host_streams_and_the_implicit_one(rt: kcache.Runtime) -> None:
    if rt.backend != "host":
        pytest.skip("the host backend")
    s, t = rt.stream(), rt.stream(native=0)  # a queue of kcache's own, and the context's queue
    assert s.handle == 0 and t.handle == 0 and t.wrapped
    assert not hasattr(s, "__cuda_stream__")
    with pytest.raises(kcache.InvalidArgumentError, match="implicit"):
        rt.stream(native=1234)
    rt.define("fill", FILL)
    y = np.zeros(4, np.float32)
    rt.kernel("fill")[4, 1, t.wait(s)](y, 6.0)  # runs to completion in the call
    assert list(y) == [6.0] * 4

    class CudaStreamLike:  # the __cuda_stream__ protocol's shape: (version, handle)
        def __init__(self, ret: object) -> None:
            self.ret = ret

        def __cuda_stream__(self) -> object:
            return self.ret
    u = rt.stream(native=CudaStreamLike((0, 0)))  # the host's stream is handle 0
    assert u.wrapped and u.handle == 0
    with pytest.raises(TypeError, match=r"\(version, handle\)"):
        rt.stream(native=CudaStreamLike(0))
    with pytest.raises(kcache.InvalidArgumentError, match="implicit"):
        rt.stream(native=CudaStreamLike((0, 4096)))


def test_a_pyopencl_queue_wrapped(rt: kcache.Runtime) -> None:
    if rt.backend != "opencl":
        pytest.skip("a cl_command_queue of kcache's context")
    cl = pytest.importorskip("pyopencl")
    q = cl.CommandQueue(cl.Context.from_int_ptr(rt.context.native))
    s = rt.stream(native=q)  # .int_ptr
    assert s.wrapped and s.handle == q.int_ptr and not hasattr(s, "__cuda_stream__")
    rt.define("fill", FILL)
    b = rt.buffer(4 * 8)
    rt.kernel("fill")[8, 1, s](b, 7.0)
    q.finish()  # PyOpenCL's own wait covers the launch: it is its queue
    out = np.zeros(8, np.float32)
    b.read(out)
    assert list(out) == [7.0] * 8
    s.close()
    q.finish()  # the queue stays PyOpenCL's
    other = cl.CommandQueue(cl.Context([cl.get_platforms()[0].get_devices()[0]]))
    with pytest.raises(kcache.InvalidArgumentError):
        rt.stream(native=other)


def test_cuda_stream_protocol(rt: kcache.Runtime) -> None:
    if rt.backend != "cuda":
        pytest.skip("CUDA streams")
    s = rt.stream()
    version, handle = s.__cuda_stream__()
    assert version == 0 and handle == s.handle != 0
    t = rt.stream(native=s)  # anything with __cuda_stream__ wraps, a kcache Stream too
    assert t.wrapped and t.handle == s.handle
    rt.define("fill", FILL)
    b = rt.buffer(16)
    rt.kernel("fill")[4, 1, t](b, 1.0)
    t.synchronize()
