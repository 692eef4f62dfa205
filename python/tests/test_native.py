# SPDX-License-Identifier: MIT
"""Kernels as they are written (issue 26): Runtime.define_file and
Runtime.define with language="opencl" or "cuda" take OpenCL C or CUDA C++
as written; the backend of that language compiles it, another raises
UnavailableError naming the language.

The transpose kernel is PyOpenCL's (examples/transpose.py,
https://github.com/inducer/pyopencl, MIT licence, Copyright (c) 2009-2024
Andreas Kloeckner and contributors), with BLOCK_SIZE written out as 16."""
import numpy as np

import pytest

import kcache

TRANSPOSE = """\
#define BLOCK_SIZE 16
#define A_BLOCK_STRIDE (BLOCK_SIZE * a_width)
#define A_T_BLOCK_STRIDE (BLOCK_SIZE * a_height)

__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, BLOCK_SIZE, 1)))
void transpose(
  __global float *a_t, __global float *a,
  unsigned a_width, unsigned a_height)
{
  int base_idx_a   =
    get_group_id(0) * BLOCK_SIZE +
    get_group_id(1) * A_BLOCK_STRIDE;
  int base_idx_a_t =
    get_group_id(1) * BLOCK_SIZE +
    get_group_id(0) * A_T_BLOCK_STRIDE;

  int glob_idx_a   = base_idx_a + get_local_id(0) + a_width * get_local_id(1);
  int glob_idx_a_t = base_idx_a_t + get_local_id(0) + a_height * get_local_id(1);

  __local float a_local[BLOCK_SIZE][BLOCK_SIZE+1];

  a_local[get_local_id(1)][get_local_id(0)] = a[glob_idx_a];

  barrier(CLK_LOCAL_MEM_FENCE);

  a_t[glob_idx_a_t] = a_local[get_local_id(0)][get_local_id(1)];
}
"""

SCALE = """\
float twice(float x) { return 2.0f * x; }

__kernel void scale(__global float *y, float s) {
  int i = get_global_id(0);
  y[i] = twice(s) + (float)i;
}
"""


def test_opencl_file_as_written(rt: kcache.Runtime, backend: str) -> None:
    r = rt.define_file("transpose.cl", TRANSPOSE, language="opencl")
    assert r.defined == ("BLOCK_SIZE", "A_BLOCK_STRIDE", "A_T_BLOCK_STRIDE", "transpose")
    k = rt.kernel("transpose")
    a = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    a_t = np.zeros((64, 32), np.float32)
    if backend != "opencl":
        with pytest.raises(kcache.UnavailableError, match=r"OpenCL C \(KC_LANG_OPENCL\)"):
            k[(4, 2), (16, 16)](a_t, a, np.uint32(64), np.uint32(32))
        return
    k[(4, 2), (16, 16)](a_t, a, np.uint32(64), np.uint32(32))
    assert np.array_equal(a_t, a.T)


def test_opencl_helper_redefined(rt: kcache.Runtime, backend: str) -> None:
    if backend != "opencl":
        pytest.skip("OpenCL C runs on the opencl backend")
    rt.define_file("scale.cl", SCALE, language="opencl")
    k = rt.kernel("scale")
    y = np.zeros(8, np.float32)
    k[8, 1](y, np.float32(3.0))
    assert list(y) == [6.0 + i for i in range(8)]
    rt.define("twice", "float twice(float x) { return 3.0f * x; }", language="opencl")
    k[8, 1](y, np.float32(3.0))
    assert list(y) == [9.0 + i for i in range(8)]
    # the same text in the same language is no change; the dialect's text
    # (KC_DEVICE) is another definition: a new world
    w = rt.world
    assert rt.define("twice", "float twice(float x) { return 3.0f * x; }", language="opencl") == w
    assert rt.define("twice", "KC_DEVICE float twice(float x) { return 3.0f * x; }") == w + 1


def test_cuda_refused_elsewhere(rt: kcache.Runtime, backend: str) -> None:
    if backend == "cuda":
        pytest.skip("compiled and launched by native_cuda (C)")
    rt.define("my_add", 'extern "C" __global__ void my_add(const float* x, float* y) { y[0] = x[0]; }',
              language="cuda")
    x = np.zeros(1, np.float32)
    with pytest.raises(kcache.UnavailableError, match=rf"CUDA C\+\+ \(KC_LANG_CUDA\), which the {backend} backend"):
        rt.kernel("my_add")[1, 1](x, x)


def test_unknown_language(rt: kcache.Runtime) -> None:
    with pytest.raises(ValueError, match="language must be"):
        rt.define("h", "float h(float x) { return x; }", language="glsl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="language must be"):
        rt.define_file("h.cl", "float h(float x) { return x; }", language="OpenCL")  # type: ignore[arg-type]
    assert rt.define("h", "KC_DEVICE float h(float x) { return x; }", language="dialect") >= 1
