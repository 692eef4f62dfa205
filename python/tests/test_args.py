# SPDX-License-Identifier: MIT
"""Arguments: scalars converted to the kernel's own parameter types, range
checks naming the argument, arrays through the buffer protocol (written
back unless read-only), kcache Buffers, and a cached launch that
allocates nothing."""
import array
import re
import gc
import sys

from typing import Any

import numpy as np
import pytest

import kcache

SRC_ALL = ("KC_KERNEL void every(KC_GLOBAL double *y, char c, short s, int i, long l, unsigned char uc, "
           "unsigned int ui, uint64_t ul, float f, double d) { if (kc_global_id(0) == 0) { "
           "y[0] = c; y[1] = s; y[2] = i; y[3] = (double)l; y[4] = uc; y[5] = ui; y[6] = (double)ul; "
           "y[7] = f; y[8] = d; } }")


def test_scalars_take_the_parameters_types(rt: kcache.Runtime) -> None:
    rt.define("every", SRC_ALL)
    k = rt.kernel("every")
    y = np.zeros(9, np.float64)
    k[1, 1](y, -128, -32768, -2**31, -2**53, 255, 2**32 - 1, 2**53, 0.1, 0.1)
    assert list(y[:7]) == [-128, -32768, -2**31, -2**53, 255, 2**32 - 1, 2**53]
    assert y[7] == np.float32(0.1)  # a Python float to a float parameter
    assert y[8] == 0.1
    k[1, 1](y, True, np.int16(3), np.int64(4), 5, np.uint8(6), 7, 8, 9, 10)  # index-able numbers and numpy scalars
    assert list(y) == [1, 3, 4, 5, 6, 7, 8, 9, 10]
    assert [p["ctype"] for p in k.params] == ["", "char", "short", "int", "long", "unsigned char",
                                              "unsigned int", "uint64_t", "float", "double"]


SRC_FAST = ("KC_KERNEL void fast(KC_GLOBAL double *y, int i, long l, unsigned int ui, float f, double d) { "
            "if (kc_global_id(0) == 0) { y[0] = i; y[1] = (double)l; y[2] = ui; y[3] = f; y[4] = d; } }")


@pytest.mark.parametrize("values", [
    (1, 2, 3, 0.5, 0.25),  # small ints, floats: converted inline by the cached launch
    (-2**30 + 1, -2**30 + 1, 2**30 - 1, -1.5, 1e300),  # the largest ints of one 30-bit digit
    (-2**31, -2**53, 2**32 - 1, 3, 4),  # several digits, ints for floats: the full path
    (True, np.int64(4), np.uint32(7), np.float32(9), 10),  # bool, NumPy scalars: the full path
])
def test_the_cached_launch_converts_as_the_full_path(rt: kcache.Runtime, values: tuple[Any, ...]) -> None:
    # a kcache Buffer and exact ints and floats take the inline conversion; an
    # array makes the whole launch take the full path: the two must agree
    rt.define("fast", SRC_FAST)
    k = rt.kernel("fast").compile()  # the parameter list read: the next launch is the cached one
    buf, y, out = rt.buffer(5 * 8), np.zeros(5, np.float64), np.zeros(5, np.float64)
    k[1, 1](buf, *values)
    k[1, 1](y, *values)
    rt.finish()
    buf.read(out)
    assert list(out) == list(y)
    assert list(y) == [int(values[0]), int(values[1]), int(values[2]), np.float32(values[3]), float(values[4])]


@pytest.mark.parametrize("index,value,name", [
    (1, 2**31, "'i' (int)"), (1, -2**31 - 1, "'i' (int)"), (3, -1, "'ui' (unsigned int)"),
    (3, -(2**29), "'ui' (unsigned int)"), (3, 2**32, "'ui' (unsigned int)"), (2, 2**70, "'l' (long)")])
def test_an_int_that_does_not_fit_with_a_buffer(rt: kcache.Runtime, index: int, value: int, name: str) -> None:
    # the same errors when every other argument is one the cached launch converts inline
    rt.define("fast", SRC_FAST)
    args = [rt.buffer(5 * 8), 0, 0, 0, 0.0, 0.0]
    args[index] = value
    k = rt.kernel("fast").compile()
    with pytest.raises(TypeError, match=re.escape(f"kernel 'fast', argument {index + 1} {name}: {value} does not fit")):
        k[1, 1](*args)


@pytest.mark.parametrize("index,value,name", [
    (1, 128, "'c' (char)"), (2, -32769, "'s' (short)"), (3, 2**31, "'i' (int)"), (4, 2**63, "'l' (long)"),
    (5, -1, "'uc' (unsigned char)"), (5, 256, "'uc' (unsigned char)"), (6, 2**32, "'ui' (unsigned int)"),
    (7, -1, "'ul' (uint64_t)"), (7, 2**64, "'ul' (uint64_t)")])
def test_an_int_that_does_not_fit_names_the_argument(rt: kcache.Runtime, index: int, value: int, name: str) -> None:
    rt.define("every", SRC_ALL)
    args = [np.zeros(9), 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0]
    args[index] = value
    with pytest.raises(TypeError, match=re.escape(f"kernel 'every', argument {index + 1} {name}: {value} does not fit")):
        rt.kernel("every")[1, 1](*args)


def test_wrong_kinds_are_refused(rt: kcache.Runtime) -> None:
    rt.define("every", SRC_ALL)
    k = rt.kernel("every")
    good = [np.zeros(9), 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0]
    with pytest.raises(TypeError, match="argument 4 'i' \\(int\\): a float"):
        k[1, 1](*good[:3], 1.5, *good[4:])
    with pytest.raises(TypeError, match="argument 9 'f' \\(float\\): 'x' is not a number"):
        k[1, 1](*good[:8], "x", 0.0)
    with pytest.raises(TypeError, match="argument 1 'y'.*neither a kcache Buffer nor"):
        k[1, 1](3, *good[1:])
    with pytest.raises(TypeError, match="takes 10 arguments, 2 given"):
        k[1, 1](good[0], 1)
    with pytest.raises(TypeError, match="by position only"):
        k[1, 1](*good, y=1)  # type: ignore[call-arg]


def test_half_and_vectors(rt: kcache.Runtime) -> None:
    if rt.backend == "host":
        pytest.skip("half and float4 are OpenCL types")
    rt.define("v", "KC_KERNEL void v(KC_GLOBAL float *y, float4 a) { y[0] = a.x + a.y + a.z + a.w; }")
    y = np.zeros(1, np.float32)
    rt.kernel("v")[1, 1](y, np.array([1, 2, 3, 4], np.float32))
    rt.finish()
    assert y[0] == 10.0
    with pytest.raises(TypeError, match="wrong number of bytes"):
        rt.kernel("v")[1, 1](y, np.array([1, 2], np.float32))


def test_arrays_through_the_buffer_protocol(rt: kcache.Runtime) -> None:
    rt.define("inc", "KC_KERNEL void inc(KC_GLOBAL int *y, KC_GLOBAL const int *x) "
              "{ size_t i = kc_global_id(0); y[i] += x[i]; }")
    k = rt.kernel("inc")
    y = array.array("i", [1, 2, 3, 4])
    x = bytes(np.array([10, 20, 30, 40], np.int32))  # read-only: never written back
    k[4, 1](y, x)
    assert list(y) == [11, 22, 33, 44]
    m = memoryview(bytearray(np.array([0, 0, 0, 0], np.int32).tobytes()))
    k[4, 1](m, x)
    assert np.frombuffer(m, np.int32).tolist() == [10, 20, 30, 40]
    big = np.zeros(1000, np.int32)
    k[1000, 1](big, np.ones(1000, np.int32))  # a larger array grows the staging buffer
    assert big.sum() == 1000
    with pytest.raises(TypeError, match="C-contiguous"):
        k[2, 1](np.zeros((4, 4), np.int32)[:, 0], x)


def test_buffers(rt: kcache.Runtime) -> None:
    b = rt.buffer(np.arange(4, dtype=np.float32))
    assert b.size == 16
    rt.define("dbl", "KC_KERNEL void dbl(KC_GLOBAL float *y) { y[kc_global_id(0)] *= 2.0f; }")
    rt.kernel("dbl")[4, 1](b)
    rt.finish()
    assert np.frombuffer(b.read(), np.float32).tolist() == [0, 2, 4, 6]
    b.write(np.array([5], np.float32), 4)
    out = np.zeros(4, np.float32)
    assert b.read(out) is out and out.tolist() == [0, 5, 4, 6]
    with pytest.raises(kcache.InvalidArgumentError):
        b.write(np.zeros(8, np.float32))
    b.destroy()
    with pytest.raises(RuntimeError, match="destroyed"):
        b.read()


def test_cached_launch_allocates_nothing(rt: kcache.Runtime) -> None:
    rt.define("z", "KC_KERNEL void z(KC_GLOBAL float *y, float a, int n) { (void)y; (void)a; (void)n; }")
    k = rt.kernel("z")
    y = np.zeros(4, np.float32)
    buf = rt.buffer(4 * 4)
    launch = k[1, 1]
    # warm both paths first: what a backend's first launches of an array
    # keep for good (CUDA: 23 blocks on an H200 after one launch) is not
    # per launch; 2000 launches that each kept one would be 2000
    for _ in range(50):
        launch(y, 1.0, 3)
        launch(buf, 1.0, 3)
    assert k[1, 1] is launch  # the same geometry: the same object
    refs = sys.getrefcount(y), sys.getrefcount(buf)
    gc.disable()
    try:
        before = sys.getallocatedblocks()
        for _ in range(2000):
            launch(buf, 1.0, 3)
        after = sys.getallocatedblocks()
        for _ in range(2000):  # a NumPy array too (by pointer on the host, staged elsewhere)
            launch(y, 1.0, 3)
        after_array = sys.getallocatedblocks()
    finally:
        gc.enable()
    assert after - before < 10
    assert after_array - after < 10
    for _ in range(100):
        launch(y, 2.5, 7)
    assert (sys.getrefcount(y), sys.getrefcount(buf)) == refs
    rt.finish()


def test_half_conversion_matches_numpy() -> None:
    # what a `half` parameter gets (no device here takes half parameters): numpy's float16 bits
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000),
                             [0.0, -0.0, 1.0, 65504.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 2.9e-8, 6.1e-5,
                              float("inf"), float("-inf"), 0.1, 1 / 3]])
    with np.errstate(over="ignore"):
        want = np.array(values).astype(np.float16).view(np.uint16)
    for v, w in zip(values, want):
        assert kcache._kcache._half_bits(float(v)) == int(w), v
    assert kcache._kcache._half_bits(float("nan")) & 0x7C00 == 0x7C00


def test_struct_by_value(rt: kcache.Runtime) -> None:
    # a struct's bytes (a NumPy structured scalar laid out like C), sized by the code itself
    rt.define("P", "typedef struct { char c; long l; int i; float f; } P;")
    rt.define("sp", "KC_KERNEL void sp(KC_GLOBAL float *y, P p) { y[0] = (float)p.c + (float)p.l + (float)p.i + p.f; }")
    k = rt.kernel("sp")
    assert k.params[1]["size"] == 24 and k.params[1]["kind"] == "bytes"
    pt = np.dtype([("c", "i1"), ("l", "i8"), ("i", "i4"), ("f", "f4")], align=True)
    assert pt.itemsize == 24
    p = np.zeros(1, pt)
    p[0] = (1, 20, 300, 0.5)
    y = np.zeros(1, np.float32)
    k[1, 1](y, p)
    rt.finish()
    assert y[0] == 321.5
    with pytest.raises(TypeError, match="wrong number of bytes"):
        k[1, 1](y, b"\0" * 8)
