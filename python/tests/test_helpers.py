# SPDX-License-Identifier: MIT
"""The OpenCL compile helper the wheel carries (kcache-clc, beside the
extension module): importing kcache changes nothing in os.environ, the
library finds the helper beside itself, and an OpenCL runtime that is asked
for helpers (KC_OPENCL_HELPERS=1) builds in one, a child process of this one
running that very file, and the kernel it built runs; the helper is reaped
at close. (That a helper's artifact is byte for byte an in-process build's
is tests/scenario/test_clhelp.c's test_prepare_through_helpers.)"""
import os
import subprocess
import sys

import numpy as np
import pytest

import kcache

SRC = "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = 7.0f; }"


def helper_children() -> list[int]:
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


def test_import_leaves_the_environment_alone() -> None:
    code = (
        "import os, sys; before = dict(os.environ); import kcache; "
        "sys.exit(0 if dict(os.environ) == before else 'import kcache changed os.environ: ' + "
        "repr(set(os.environ.items()) ^ set(before.items())))"
    )
    env = {k: v for k, v in os.environ.items() if k != "KC_OPENCL_HELPER"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_package_carries_its_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    ok, why = kcache.backend_available("opencl")
    if not ok:
        pytest.skip(f"opencl backend not available here: {why}")
    here = os.path.dirname(os.path.abspath(kcache.__file__))
    if not any(f.startswith("kcache_jit-") and f.endswith(".dist-info") for f in os.listdir(os.path.dirname(here))):
        pytest.skip("kcache is imported from a build tree, not an installed wheel")
    clc = os.path.join(here, "kcache-clc")
    assert os.access(clc, os.X_OK), f"the wheel carries no kcache-clc beside the module ({here})"
    monkeypatch.delenv("KC_OPENCL_HELPER", raising=False)
    monkeypatch.setenv("KC_OPENCL_HELPERS", "1")
    with kcache.Runtime(backend="opencl", cache_disable=True) as rt:
        rt.define("k", SRC)
        y = np.zeros(4, np.float32)
        rt.kernel("k")[4, 1](y)
        assert list(y) == [7.0] * 4
        children = helper_children()
        assert len(children) >= 1  # the build ran in a helper
        # ... and the helper is the wheel's, found by the library beside itself
        assert {os.path.realpath(f"/proc/{p}/exe") for p in children} == {os.path.realpath(clc)}
    assert helper_children() == []  # reaped at close
