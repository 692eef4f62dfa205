# SPDX-License-Identifier: MIT
"""The OpenCL compile helper the wheel carries: kcache/__init__.py points
KC_OPENCL_HELPER at the kcache-clc beside it, and an OpenCL runtime that is
asked for helpers (KC_OPENCL_HELPERS=1) builds in one, a child process of
this one, and the kernel it built runs; the helper is reaped at close.
(That a helper's artifact is byte for byte an in-process build's is
tests/scenario/test_clhelp.c's test_prepare_through_helpers.)"""
import os

import numpy as np
import pytest

import kcache

SRC = "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = 7.0f; }"


def helper_children():
    """This process's children that run kcache-clc."""
    me, found = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[1]) == me and comm.startswith("kcache-clc"):
            found.append(int(pid))
    return found


def test_the_package_carries_its_helper(monkeypatch):
    ok, why = kcache.backend_available("opencl")
    if not ok:
        pytest.skip(f"opencl backend not available here: {why}")
    clc = os.environ.get("KC_OPENCL_HELPER")
    assert clc and os.path.dirname(clc) == os.path.dirname(os.path.abspath(kcache.__file__))
    assert os.access(clc, os.X_OK)
    monkeypatch.setenv("KC_OPENCL_HELPERS", "1")
    with kcache.Runtime(backend="opencl", cache_disable=True) as rt:
        rt.define("k", SRC)
        y = np.zeros(4, np.float32)
        rt.kernel("k")[4, 1](y)
        assert list(y) == [7.0] * 4
        assert len(helper_children()) >= 1  # the build ran in a helper
    assert helper_children() == []  # reaped at close
