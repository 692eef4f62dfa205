# SPDX-License-Identifier: MIT
"""Memory and streams that are not kcache's (built when kcache.h has the
interop API, kcache.HAS_INTEROP): host arrays passed by their own pointer
(zero copy), CUDA arrays by device pointer through __cuda_array_interface__
and __dlpack__ (CuPy, PyTorch), streams through __cuda_stream__; without
it, arrays are copies and stream=/shared= are refused."""
import sys

from typing import Any

import numpy as np
import pytest

import kcache

ALIAS = "KC_KERNEL void alias(KC_GLOBAL int *a, KC_GLOBAL const int *b) { a[0] = 5; a[1] = b[0]; }"


def test_host_arrays_are_the_kernels_memory(rt: kcache.Runtime) -> None:
    if rt.backend != "host":
        pytest.skip("zero copy is the host backend's")
    rt.define("alias", ALIAS)
    y = np.zeros(2, np.int32)
    rt.kernel("alias")[1, 1](y, y)  # both arguments are y's memory when nothing is copied
    if kcache.HAS_INTEROP:
        assert list(y) == [5, 5]
    else:
        assert list(y) == [5, 0]  # staged: b is a copy made before the launch


def test_streams_and_shared_memory_without_interop(rt: kcache.Runtime) -> None:
    if kcache.HAS_INTEROP:
        pytest.skip("this kcache has the interop API")
    rt.define("e", "KC_KERNEL void e(void) { }")
    with pytest.raises(NotImplementedError, match="no streams"):
        rt.kernel("e").launch(1, 1, stream=0)
    with pytest.raises(NotImplementedError, match="dynamic shared memory"):
        rt.kernel("e").launch(1, 1, shared=256)


def cupy_or_skip(rt: kcache.Runtime) -> Any:
    if rt.backend != "cuda":
        pytest.skip("CUDA arrays need the cuda backend")
    if not kcache.HAS_INTEROP:
        pytest.skip("device pointers need the interop API (kcache.HAS_INTEROP)")
    return pytest.importorskip("cupy")


def test_cuda_array_interface_and_stream(rt: kcache.Runtime) -> None:
    cp = cupy_or_skip(rt)
    rt.define("dbl", "KC_KERNEL void dbl(KC_GLOBAL float *y, int n) "
              "{ size_t i = kc_global_id(0); if (i < (size_t)n) y[i] *= 2.0f; }")
    y = cp.arange(256, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    rt.kernel("dbl").launch(2, 128, args=(y, 256), stream=s)
    s.synchronize()
    assert cp.asnumpy(y).tolist() == [2.0 * i for i in range(256)]


def test_dlpack(rt: kcache.Runtime) -> None:
    cupy_or_skip(rt)
    torch = pytest.importorskip("torch")
    rt.define("inc", "KC_KERNEL void inc(KC_GLOBAL float *y) { y[kc_global_id(0)] += 1.0f; }")
    t = torch.zeros(64, device="cuda")
    rt.kernel("inc")[1, 64](t)
    rt.finish()
    assert t.sum().item() == 64.0


def test_host_buffer_exports_its_memory(rt: kcache.Runtime) -> None:
    if rt.backend != "host" or not kcache.HAS_INTEROP:
        pytest.skip("a Buffer's memory is exported on the host backend with the interop API")
    b = rt.buffer(np.arange(4, dtype=np.float32))
    view = np.frombuffer(b, np.float32)  # type: ignore[call-overload]  # no copy: the buffer's memory
    rt.define("dbl", "KC_KERNEL void dbl(KC_GLOBAL float *y) { y[kc_global_id(0)] *= 2.0f; }")
    rt.kernel("dbl")[4, 1](b)
    assert view.tolist() == [0, 2, 4, 6]


def test_cuda_buffer_exports_its_device_pointer(rt: kcache.Runtime) -> None:
    cp = cupy_or_skip(rt)
    b = rt.buffer(np.arange(4, dtype=np.float32))
    y = cp.asarray(b).view(cp.float32)  # through __cuda_array_interface__, no copy
    assert cp.asnumpy(y).tolist() == [0, 1, 2, 3]


def test_buffers_export_nothing_without_interop(rt: kcache.Runtime) -> None:
    if kcache.HAS_INTEROP:
        pytest.skip("this kcache has the interop API")
    with pytest.raises(TypeError):
        memoryview(rt.buffer(16))
    assert not hasattr(rt.buffer(16), "__cuda_array_interface__")


def test_host_scratch_and_opencl_local_memory(rt: kcache.Runtime) -> None:
    if not kcache.HAS_INTEROP or rt.backend == "cuda":
        pytest.skip("dynamic shared memory through the interop API, host and OpenCL here")
    y = np.zeros(4, np.int32)
    if rt.backend == "host":
        rt.define("sc", "KC_KERNEL void sc(KC_GLOBAL int *y) { int *s = (int *)kc_scratch(); "
                  "s[0] = 41; y[kc_global_id(0)] = s[0] + 1; }")
        rt.kernel("sc").launch(4, 1, args=(y,), shared=64)
    else:
        rt.define("lm", "KC_KERNEL void lm(KC_GLOBAL int *y, KC_LOCAL int *s) { s[0] = 41; "
                  "y[kc_global_id(0)] = s[0] + 1; }")
        k = rt.kernel("lm")
        assert k.params[1]["kind"] == "local"
        k[4, 1](y, 64)  # a KC_LOCAL pointer takes its size in bytes
        with pytest.raises(TypeError, match="size in bytes"):
            k[4, 1](y, 0)
    assert list(y) == [42] * 4


def test_foreign_stream_handle_on_opencl(rt: kcache.Runtime) -> None:
    if not kcache.HAS_INTEROP or rt.backend != "opencl":
        pytest.skip("an OpenCL queue of kcache's context through the interop API")
    cl = pytest.importorskip("pyopencl")
    # a raw handle of another context is refused with the library's reason, not a crash
    other = cl.CommandQueue(cl.Context([cl.get_platforms()[0].get_devices()[0]]))
    rt.define("e", "KC_KERNEL void e(void) { }")
    with pytest.raises(kcache.KcacheError):
        rt.kernel("e").launch(1, 1, stream=other.int_ptr)


class CudaArrayInterface:
    # the protocol is a dict (numba.cuda's spec, version 3); what CuPy, Numba and PyTorch expose
    def __init__(self, **cai: object) -> None:
        self.__cuda_array_interface__ = cai


def test_cuda_protocols_parsing() -> None:
    if not kcache.HAS_INTEROP:
        pytest.skip("device pointers need the interop API")
    fp = kcache._kcache._foreign_pointer
    assert fp(np.zeros(4, np.float32)) is None  # NumPy's __dlpack__ is on the CPU: staged, not a device pointer
    assert fp(CudaArrayInterface(shape=(4,), typestr="<f4", data=(0x7F0000001000, False), version=3)) == 0x7F0000001000
    assert fp(CudaArrayInterface(shape=(4,), typestr="<f4", data=(4096, False), strides=None, version=3)) == 4096
    with pytest.raises(TypeError, match="strided"):
        fp(CudaArrayInterface(shape=(4,), typestr="<f4", data=(4096, False), strides=(8,), version=3))
    with pytest.raises(TypeError, match="'data'"):
        fp(CudaArrayInterface(shape=(4,), typestr="<f4", version=3))
    assert fp(object()) is None


def test_host_buffer_dlpack_export(rt: kcache.Runtime) -> None:
    if not kcache.HAS_INTEROP:
        pytest.skip("Buffer export needs the interop API")
    b = rt.buffer(np.arange(4, dtype=np.float32))
    if rt.backend != "host":
        if rt.backend == "opencl":
            with pytest.raises(BufferError):
                np.from_dlpack(b)
        pytest.skip("NumPy takes host DLPack tensors only")
    assert b.__dlpack_device__() == (1, 0)
    refs = sys.getrefcount(b)
    a = np.from_dlpack(b)  # no copy: the buffer's own memory, as bytes
    assert a.dtype == np.uint8 and a.shape == (16,)
    rt.define("dbl", "KC_KERNEL void dbl(KC_GLOBAL float *y) { y[kc_global_id(0)] *= 2.0f; }")
    rt.kernel("dbl")[4, 1](b)
    assert a.view(np.float32).tolist() == [0, 2, 4, 6]
    assert sys.getrefcount(b) == refs + 1  # the tensor keeps the Buffer alive
    del a
    assert sys.getrefcount(b) == refs
