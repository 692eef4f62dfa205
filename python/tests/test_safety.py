# SPDX-License-Identifier: MIT
"""Memory safety and silent wrong results (review 1: items 1, 2, 4, 5, 11, 12):
exported Buffer memory outliving destroy/close, zero copy into read-only
objects, staged arrays with stream=, the stream cache across contexts,
typedef'd scalars, DLPack devices and the element type of arrays."""
import gc

import numpy as np
import pytest

import kcache


def _interop() -> None:
    if not kcache.HAS_INTEROP:
        pytest.skip("needs the interop API")


def test_buffer_exports_refuse_destroy_and_close(backend: str) -> None:
    _interop()
    if backend != "host":
        pytest.skip("only host Buffers export their memory to the CPU")
    rt = kcache.Runtime(backend=backend, cache_disable=True)
    ctx = rt.create_context(0)
    b = ctx.buffer(64)
    mv = memoryview(b)
    with pytest.raises(kcache.BusyError, match="Buffer.destroy: 1 export"):
        b.destroy()
    with pytest.raises(kcache.BusyError, match="Context.destroy"):
        ctx.destroy()
    with pytest.raises(kcache.BusyError, match="close"):
        rt.close()
    mv[0:4] = b"abcd"  # still the buffer's live memory
    assert bytes(b.read()[:4]) == b"abcd"
    a = np.frombuffer(b, np.uint8)  # type: ignore[call-overload]  # NumPy types bytes-likes only
    t = np.from_dlpack(b)
    mv.release()
    with pytest.raises(kcache.BusyError, match="2 export"):
        b.destroy()
    del a
    gc.collect()
    with pytest.raises(kcache.BusyError, match="1 export"):
        b.destroy()
    del t
    gc.collect()
    b.destroy()  # the last view is gone: freed now
    d = rt.buffer(16)
    with memoryview(d) as v:
        v[0] = 1
    cap = d.__dlpack__()  # a capsule never consumed counts until it is freed
    with pytest.raises(kcache.BusyError):
        rt.close()
    del cap
    gc.collect()
    ctx.destroy()
    rt.close()


def test_read_only_array_for_a_writable_pointer(rt: kcache.Runtime) -> None:
    rt.define("w", "KC_KERNEL void w(KC_GLOBAL char *y) { y[kc_global_id(0)] = 'X'; }")
    rt.define("r", "KC_KERNEL void r(KC_GLOBAL const char *x, KC_GLOBAL char *y) "
              "{ y[kc_global_id(0)] = x[kc_global_id(0)]; }")
    s = bytes(b"hello")
    if rt.backend == "host" and kcache.HAS_INTEROP:
        # zero copy would write into the immutable bytes
        with pytest.raises(TypeError, match="argument 1 'y': a read-only array"):
            rt.kernel("w")[1, 4](s)
    else:
        rt.kernel("w")[1, 4](s)  # staged: the copy is written, not copied back
    assert s == b"hello"
    out = bytearray(5)
    rt.kernel("r")[1, 5](s, out)  # a pointer to const takes it
    assert out == b"hello"


def test_stream_cache_across_destroyed_contexts(rt: kcache.Runtime) -> None:
    _interop()
    if rt.backend != "host":
        pytest.skip("stream=0 is the host's stream (OpenCL: test_staged_arrays_on_an_opencl_stream)")
    rt.define("z", "KC_KERNEL void z(KC_GLOBAL int *y) { y[kc_global_id(0)] = 7; }")
    k = rt.kernel("z")
    for _ in range(20):  # more than the cache's 16 slots: destroy frees them
        c = rt.create_context(0)
        b = c.buffer(16)
        k.launch(grid=1, block=4, args=(b,), stream=0, context=c)
        assert np.frombuffer(b.read(), np.int32).tolist() == [7] * 4
        del b
        c.destroy()


def test_staged_arrays_on_an_opencl_stream(rt: kcache.Runtime) -> None:
    _interop()
    if rt.backend != "opencl":
        pytest.skip("a cl_command_queue of kcache's context")
    cl = pytest.importorskip("pyopencl")
    clctx = cl.Context.from_int_ptr(rt.context.native)
    q = cl.CommandQueue(clctx, clctx.devices[0])
    rt.define("slow", "KC_KERNEL void slow(KC_GLOBAL const uint *x, KC_GLOBAL uint *y, int n) {"
              " int i = kc_global_id(0); uint a = x[i];"
              " for (int j = 0; j < n; j++) a = a * 1103515245u + 12345u;"
              " y[i] = a; }")
    k = rt.kernel("slow")
    n = 100000
    for r in range(3):
        x = np.arange(64, dtype=np.uint32) + r
        want = x.copy()
        for _ in range(n):
            want = want * np.uint32(1103515245) + np.uint32(12345)
        y = np.zeros(64, np.uint32)
        k.launch(grid=1, block=64, args=(x, y, n), stream=q.int_ptr)
        assert y.tolist() == want.tolist()  # the copy back waited for the kernel on the stream


def test_typedef_scalars(rt: kcache.Runtime) -> None:
    rt.define("real", "typedef float real;")
    rt.define("t", "KC_KERNEL void t(KC_GLOBAL float *y, real a) { y[kc_global_id(0)] = a; }")
    rt.define("u", "typedef unsigned int count_t; /* typedef double count_t; */\n"
              "typedef count_t n_t;\n"
              "typedef struct { float a; } box;\n"
              "KC_KERNEL void u(KC_GLOBAL float *y, n_t n, box b) { y[kc_global_id(0)] = (float)n + b.a; }")
    y = np.zeros(4, np.float32)
    k = rt.kernel("t")
    assert k.params[1]["kind"] == "float" and k.params[1]["ctype"] == "float"
    k[4, 1](y, 2.5)
    assert y.tolist() == [2.5] * 4
    u = rt.kernel("u")
    assert u.params[1]["kind"] == "uint" and u.params[1]["size"] == 4
    assert u.params[2]["kind"] == "bytes"  # a struct stays raw bytes
    u[4, 1](y, 3, np.array([0.5], np.float32))
    assert y.tolist() == [3.5] * 4
    with pytest.raises(TypeError, match="argument 2 'n'.*does not fit"):
        u[4, 1](y, -1, np.array([0.5], np.float32))


def test_array_element_type_checked(rt: kcache.Runtime) -> None:
    rt.define("f", "KC_KERNEL void f(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f; }")
    rt.define("v", "KC_KERNEL void v(KC_GLOBAL void *y) { ((KC_GLOBAL char *)y)[kc_global_id(0)] = 1; }")
    k = rt.kernel("f")
    for bad in (np.zeros(4, np.int64), np.zeros(4, np.float64), np.zeros(4, np.int32)):
        with pytest.raises(TypeError, match="kernel 'f', argument 1 'y'.*for a pointer to 4-byte floating-point"):
            k[4, 1](bad)
        assert not bad.any()
    y = np.zeros(4, np.float32)
    k[4, 1](y)
    assert y.tolist() == [1.0] * 4
    raw = np.zeros(16, np.uint8)  # raw bytes fit any pointer
    k[4, 1](raw)
    assert raw.view(np.float32).tolist() == [1.0] * 4
    anything = np.zeros(4, np.int64)
    rt.kernel("v")[4, 1](anything)  # void *: anything
    assert anything.view(np.uint8)[:4].tolist() == [1] * 4


def test_dlpack_device(rt: kcache.Runtime) -> None:
    _interop()
    b = rt.buffer(16)
    if rt.backend == "host":
        assert b.__dlpack_device__() == (1, 0)  # kDLCPU
    elif rt.backend == "cuda":
        c = rt.create_context(0)
        assert c.buffer(16).__dlpack_device__() == (2, c.device)  # kDLCUDA, the context's ordinal
    else:
        pytest.skip("OpenCL memory has no DLPack device")
    assert rt.context.device == 0
