# SPDX-License-Identifier: MIT
"""The C suite's scenarios (tests/scenario/test_core.c) from Python: compile
once then hit the fast path, an unrelated definition, a callee
redefinition, a pinned thread keeping its world, a context reset
relinking without compiling, specializations, bound arguments."""
import threading
import time

import pathlib

import numpy as np
import numpy.typing as npt

import pytest

import kcache

SRC_H1 = "KC_DEVICE float h(float x) { return x + 1.0f; }"
SRC_H2 = "KC_DEVICE float h(float x) { return x + 2.0f; }"
SRC_K = "KC_KERNEL void k(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }"
SRC_K2 = "KC_KERNEL void k2(KC_GLOBAL float *y) { y[kc_global_id(0)] = 7.0f; }"
N = 16


def run(k: kcache.Kernel, n: int = N) -> npt.NDArray[np.float32]:
    y = np.zeros(n, np.float32)
    k[n, 1](y)
    return y


def define_k(rt: kcache.Runtime) -> kcache.Kernel:
    rt.define("h", SRC_H1)
    rt.define("k", SRC_K)
    return rt.kernel("k")


def test_first_launch_compiles_once(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    s0 = rt.stats()
    assert (s0.compiles, s0.links, s0.code_instances) == (0, 0, 0)
    assert np.array_equal(run(k), np.arange(N, dtype=np.float32) + 1)
    s1 = rt.stats()
    assert (s1.compiles, s1.links) == (1, 1)
    assert run(k)[3] == 4.0
    s2 = rt.stats()
    assert s2.compiles == 1 and s2.links == 1
    assert s2.fast_hits == s1.fast_hits + 1
    assert s2.slow_lookups == s1.slow_lookups
    assert isinstance(s2, kcache.Stats) and s2.world == rt.world


def test_unrelated_definition_costs_no_compile(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    run(k)
    w0 = rt.world
    w1 = rt.define("u", "KC_DEVICE float u(float x) { return 3.0f * x; }")
    assert w1 == w0 + 1 == rt.world
    s0 = rt.stats()
    assert run(k)[2] == 3.0
    s = rt.stats()
    assert s.compiles == 1 and s.links == 1
    assert s.slow_lookups == s0.slow_lookups and s.fast_hits == s0.fast_hits + 1  # no slow path at all


def test_callee_redefinition_recompiles_dependents_only(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    rt.define("k2", SRC_K2)
    k2 = rt.kernel("k2")
    assert run(k)[0] == 1.0 and run(k2)[0] == 7.0
    assert rt.stats().compiles == 2
    rt.define("h", SRC_H2)
    assert run(k)[5] == 7.0
    assert run(k2)[0] == 7.0
    assert rt.stats().compiles == 3  # k again, not k2
    assert rt.define("h", SRC_H2) == rt.world  # identical text: no new world


def test_pinned_thread_keeps_old_world(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    run(k)
    pinned, redefined, done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def worker() -> None:
        with rt.pin() as p:
            seen["world"] = p.world
            pinned.set()
            redefined.wait(30)
            seen["value"] = run(k)[0]
            seen["current"] = rt.current_world
        seen["after"] = run(k)[0]
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    assert pinned.wait(30)
    rt.define("h", SRC_H2)
    redefined.set()
    t.join(60)
    assert done.is_set()
    assert seen["value"] == 1.0  # the pinned world's h
    assert seen["current"] == seen["world"] < rt.world
    assert seen["after"] == 2.0  # unpinned: the latest
    assert run(k)[0] == 2.0


def test_pins_nest(rt: kcache.Runtime) -> None:
    with rt.pin() as a:
        rt.define("x", "KC_DEVICE int x(void) { return 1; }")
        with rt.pin() as b:
            assert b.world == a.world
        assert rt.current_world == a.world
    assert rt.current_world == rt.world


def test_context_reset_relinks_without_compiling(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    run(k)
    rt.context.reset()
    assert run(k)[1] == 2.0
    s = rt.stats()
    assert s.compiles == 1 and s.links == 2


def test_second_context_shares_code(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    run(k)
    c = rt.create_context()
    y = np.zeros(N, np.float32)
    k.launch(N, 1, args=(y,), context=c)
    c.finish()
    assert y[4] == 5.0
    assert rt.stats().compiles == 1 and rt.stats().links == 2
    c.destroy()


def test_specializations_by_keywords_and_string(rt: kcache.Runtime) -> None:
    rt.define("fill", "KC_KERNEL void fill(KC_GLOBAL T *y, T v) { y[kc_global_id(0)] = v * SCALE; }")
    kf = rt.kernel("fill", T="float", SCALE=2)
    kd = rt.kernel("fill", "T=double,SCALE=3")
    ki = rt.kernel("fill", {"T": "int", "SCALE": 1})
    yf, yd, yi = np.zeros(4, np.float32), np.zeros(4, np.float64), np.zeros(4, np.int32)
    kf[4, 1](yf, 1.5)
    kd[4, 1](yd, 0.25)
    ki[4, 1](yi, -7)
    assert list(yf) == [3.0] * 4 and list(yd) == [0.75] * 4 and list(yi) == [-7] * 4
    assert rt.stats().compiles == 3
    assert rt.kernel("fill", SCALE=2, T="float").code["id"] == kf.code["id"]


def test_bound_arguments(rt: kcache.Runtime) -> None:
    rt.define("axpy", "KC_KERNEL void axpy(KC_GLOBAL float *y, float a, int n) "
              "{ size_t i = kc_global_id(0); if (i < (size_t)n) y[i] += a; }")
    k = rt.kernel("axpy")
    buf = rt.buffer(np.zeros(8, np.float32))
    b = k.bind(buf, 1.0, 8)
    b.launch(8, 1)
    b.launch(8, 1)
    b.set(1, 0.5)
    b.launch(8, 1)
    rt.finish()
    out = np.zeros(8, np.float32)
    buf.read(out)
    assert list(out) == [2.5] * 8
    s = rt.stats()
    assert s.compiles == 1 and s.fast_hits >= 2
    # b[grid, block] keeps the geometry: go() launches with nothing parsed;
    # set() changes what the next call launches with
    go = b[4, 1]
    assert isinstance(go, kcache.BoundLaunch) and "grid=(4, 1, 1) block=(1, 1, 1)" in repr(go)
    go()
    b.set(1, 2.0)
    go()
    rt.finish()
    buf.read(out)
    assert list(out) == [5.0] * 4 + [2.5] * 4
    with pytest.raises(TypeError, match="no arguments"):
        go(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"bound\[grid, block\]"):
        b[4]  # type: ignore[index]
    with pytest.raises((TypeError, ValueError)):
        b[0, 1]
    # a redefinition that changes the parameters: the bound launch says so
    rt.define("axpy", "KC_KERNEL void axpy(KC_GLOBAL float *y, float a) { y[kc_global_id(0)] += a; }")
    with pytest.raises(kcache.ArgumentError):
        go()


def test_kernel_source_and_code(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    src = k.source
    assert src.index("h(float x)") < src.index("void k(")
    c = k.code
    assert c["min_world"] <= rt.world and c["max_world"] is None and len(c["artifact"]) > 0
    rt.define("h", SRC_H2)
    assert "x + 2.0f" in k.source
    assert k.code["id"] != c["id"]


def test_disk_cache_between_runtimes(backend: str, tmp_path: pathlib.Path) -> None:
    for i in range(2):
        with kcache.Runtime(backend=backend, cache_dir=str(tmp_path)) as r:
            define_k(r)
            assert run(r.kernel("k"))[0] == 1.0
            s = r.stats()
            assert r.cache_dir is not None
            assert (s.compiles, s.disk_hits) == ((1, 0) if i == 0 else (0, 1))


def test_collect(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    run(k)
    rt.define("h", SRC_H2)
    run(k)
    info = rt.collect()
    assert info["code_instances"] == 1
    assert rt.stats().collected == 1


def test_collect_while_threads_launch_and_define(backend: str) -> None:
    # one thread redefines h (a macro, so compiles see it or not), one
    # collects without pause, two launch: every launch gives a version that
    # was defined between its start and its end, never an error
    with kcache.Runtime(backend=backend, cache_disable=True) as r:
        r.define("VER", "#define VER 1")
        r.define("kv", "KC_KERNEL void kv(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)VER; }")
        issued, done, stop, errors, launches = [1], [1], threading.Event(), [], [0]

        def definer() -> None:
            v = 1
            while not stop.is_set():
                v += 1
                issued[0] = v
                r.define("VER", "#define VER %d" % v)
                done[0] = v
                time.sleep(0.02)

        def collector() -> None:
            while not stop.is_set():
                r.collect()

        def launcher() -> None:
            k = r.kernel("kv")
            last = 0
            try:
                while not stop.is_set():
                    lo = done[0]
                    v = int(run(k, 4)[0])
                    hi = issued[0]
                    if not (lo <= v <= hi and v >= last):
                        errors.append("saw %d, defined %d..%d, before %d" % (v, lo, hi, last))
                    last = v
                    launches[0] += 1
            except Exception as e:  # noqa: BLE001 -- the test reports any failure
                errors.append(repr(e))

        threads = [threading.Thread(target=f) for f in (definer, collector, launcher, launcher)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        assert launches[0] > 0 and done[0] > 2
        r.collect()
        assert r.stats().definitions == 2


def test_compiles_release_the_gil(backend: str) -> None:
    # while one thread compiles, another runs Python: its first clock
    # reading comes early in the compile, not after it
    with kcache.Runtime(backend=backend, cache_disable=True) as r:
        r.define("slow", "KC_KERNEL void slow(KC_GLOBAL float *y) { y[0] = 1.0f; }")
        k = r.kernel("slow")
        started, done = threading.Event(), threading.Event()
        window = []

        def compile_it() -> None:
            started.set()
            t0 = time.perf_counter()
            k.compile()
            window.append(t0)
            done.set()

        t = threading.Thread(target=compile_it)
        t.start()
        started.wait(30)
        ticks = []
        while not done.is_set():
            ticks.append(time.perf_counter())
        t.join()
        assert r.stats().compiles == 1
        compile_s = r.stats().compile_ns / 1e9
        # held, the GIL would let this thread read the clock only after the compile
        assert ticks and ticks[0] - window[0] < compile_s / 2, (ticks[0] - window[0], compile_s)


def test_staged_arrays_across_context_lifetimes(rt: kcache.Runtime) -> None:
    k = define_k(rt)
    for _ in range(3):  # each new context may reuse the destroyed one's memory
        c = rt.create_context()
        y = np.zeros(N, np.float32)
        k.launch(N, 1, args=(y,), context=c)
        assert y[2] == 3.0
        c.destroy()
    assert run(k)[2] == 3.0
    with pytest.raises(RuntimeError, match="destroyed"):
        k.launch(N, 1, args=(np.zeros(N, np.float32),), context=c)
    del k
