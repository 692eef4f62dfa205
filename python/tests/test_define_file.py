# SPDX-License-Identifier: MIT
"""Runtime.define_file (kc_define_file): a whole source file in one world;
a reload changes only what differs (only the kernels that reach a changed
function recompile) and undefines the names that are gone; a malformed
file raises with the line and changes nothing."""
import numpy as np
import pathlib

import pytest

import kcache

FILE = """\
// two helpers and two kernels, one per helper
KC_DEVICE float h(float x) { return x + 1.0f; }
KC_DEVICE float g(float x) { return x * 2.0f; }
KC_DEVICE float h(float x);  /* a prototype: dropped */

KC_KERNEL void kh(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }
KC_KERNEL void kg(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = g((float)i); }
"""
N = 8


def run(k: kcache.Kernel) -> list[float]:
    y = np.zeros(N, np.float32)
    k[N, 1](y)
    return [float(v) for v in y]


def test_load_then_reload_one_function(rt: kcache.Runtime) -> None:
    r = rt.define_file("kernels.c", FILE)
    assert isinstance(r, kcache.FileLoad)
    assert tuple(r) == (r.world, r.changed, r.defined, r.redefined, r.undefined)
    assert r.world == rt.world and r.changed == 4
    assert r.defined == ("h", "g", "kh", "kg") and r.redefined == r.undefined == ()
    kh, kg = rt.kernel("kh"), rt.kernel("kg")
    assert run(kh) == [i + 1.0 for i in range(N)]
    assert run(kg) == [i * 2.0 for i in range(N)]
    assert rt.stats().compiles == 2
    # the same text again: nothing changed, no new world
    again = rt.define_file("kernels.c", FILE.encode())  # bytes work too
    assert again.changed == 0 and again.world == r.world == rt.world
    assert again.defined == again.redefined == again.undefined == ()
    # h edited: only kh, which reaches it, compiles again
    r2 = rt.define_file("kernels.c", FILE.replace("x + 1.0f", "x + 5.0f"))
    assert r2.changed == 1 and r2.world == r.world + 1 == rt.world
    assert r2.redefined == ("h",) and r2.defined == r2.undefined == ()
    assert run(kg) == [i * 2.0 for i in range(N)]
    assert rt.stats().compiles == 2  # kg's code still serves
    assert run(kh) == [i + 5.0 for i in range(N)]
    assert rt.stats().compiles == 3


def test_a_removed_name_is_undefined(rt: kcache.Runtime) -> None:
    rt.define_file("kernels.c", FILE)
    kg = rt.kernel("kg")
    assert run(kg)[1] == 2.0
    r = rt.define_file("kernels.c", FILE.replace(FILE.splitlines()[-1], ""))  # kg gone
    assert r.changed == 1 and r.undefined == ("kg",) and r.defined == r.redefined == ()
    with pytest.raises(kcache.NotFoundError, match="kg"):
        run(kg)
    assert run(rt.kernel("kh"))[1] == 2.0  # the rest stays


def test_a_malformed_file_raises_and_changes_nothing(rt: kcache.Runtime) -> None:
    r = rt.define_file("kernels.c", FILE)
    stats = rt.stats()
    bad = FILE + "#ifdef FAST\nKC_DEVICE float f(float x) { return x; }\n#endif\n"
    with pytest.raises(kcache.InvalidArgumentError, match=r"kernels\.c:8:.*#define, #include and #pragma") as e:
        rt.define_file("kernels.c", bad.replace("x + 1.0f", "x + 9.0f"))
    assert e.value.status_name == "KC_EINVAL" and "kernels.c:8" in e.value.log
    assert rt.world == r.world and rt.stats().defines == stats.defines
    assert run(rt.kernel("kh"))[0] == 1.0  # h was not redefined
    with pytest.raises(kcache.InvalidArgumentError, match="two definitions|twice|defined"):
        rt.define_file("kernels.c", FILE + "KC_DEVICE float g(float x) { return x; }\n")
    assert rt.world == r.world


def test_a_file_read_from_its_path(rt: kcache.Runtime, tmp_path: pathlib.Path) -> None:
    p = tmp_path / "k.cl"
    p.write_text(FILE)
    r = rt.define_file(p)  # a path-like: read, and named by its path
    assert r.changed == 4
    assert run(rt.kernel("kg"))[3] == 6.0
    assert rt.define_file(str(p)).changed == 0  # the same file, by the same name
    with pytest.raises(FileNotFoundError):
        rt.define_file(tmp_path / "missing.c")
    with pytest.raises(TypeError, match="str or bytes.*not int"):
        rt.define_file("x.c", 42)  # type: ignore[arg-type]
    with pytest.raises(kcache.InvalidArgumentError, match="empty"):
        rt.define_file("", FILE)
