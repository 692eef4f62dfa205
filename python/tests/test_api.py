# SPDX-License-Identifier: MIT
"""The package as a Python user meets it: a signature (inspect.signature)
and a docstring for every function and method, reprs that say the state
that matters, Buffer and Context as context managers, len(Buffer),
Buffer.read() into NumPy (tobytes() for bytes), booleans where booleans are
meant, and kcache's log in logging.getLogger("kcache") (with the opt-out)."""
import inspect
import logging
import re
import threading
import types
from typing import Any

import numpy as np
import pytest

import kcache
from kcache import _kcache

SCALE = "KC_KERNEL void scale(KC_GLOBAL float *y, float a) { y[kc_global_id(0)] *= a; }"

CLASSES = [
    kcache.Runtime,
    kcache.Context,
    kcache.Buffer,
    kcache.Kernel,
    kcache.LaunchConfig,
    kcache.BoundArgs,
    kcache.Pin,
]
if kcache.HAS_INTEROP:
    CLASSES.append(kcache.Stream)


def methods() -> list[tuple[str, Any]]:
    """Every function of the module and every method (not slot wrappers) of its classes."""
    out: list[tuple[str, Any]] = [
        (name, f) for name, f in vars(_kcache).items() if inspect.isbuiltin(f) or inspect.isroutine(f)
    ]
    for cls in CLASSES:
        for name, m in vars(cls).items():
            if isinstance(m, types.MethodDescriptorType):
                out.append((f"{cls.__name__}.{name}", getattr(cls, name)))
    return out


@pytest.mark.parametrize("name,fn", methods(), ids=[n for n, _ in methods()])
def test_every_function_has_a_signature_and_a_docstring(name: str, fn: Any) -> None:
    sig = inspect.signature(fn)  # raises ValueError without __text_signature__
    doc = inspect.getdoc(fn) or ""
    assert doc.strip(), f"{name} has no docstring"
    params = [p for p in sig.parameters.values() if p.name not in ("self", "module")]
    if params and not name.startswith("_") and ".__" not in name:
        assert "Args:" in doc, f"{name}{sig}: the docstring does not say its arguments"


def test_classes_have_signatures() -> None:
    assert str(inspect.signature(kcache.Buffer)) == "(context, size_or_array, /)"
    sig = inspect.signature(kcache.Runtime)
    assert list(sig.parameters)[:2] == ["backend", "cache_dir"]
    assert sig.parameters["log"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["log"].default == "logging"


def test_booleans_are_booleans(rt: kcache.Runtime) -> None:
    assert kcache.HAS_INTEROP is True or kcache.HAS_INTEROP is False
    assert rt.closed is False
    assert kcache.backend_available("host")[0] is True
    b = rt.buffer(4)
    assert b.destroyed is False
    b.destroy()
    assert b.destroyed is True


def test_reprs_say_the_state(rt: kcache.Runtime) -> None:
    r = repr(rt)
    assert r.startswith("<kcache.Runtime ") and f"backend='{rt.backend}'" in r
    assert f"device='{rt.devices[0]}'" in r and f"world={rt.world}" in r
    rt.define("scale", SCALE)
    assert f"world={rt.world}" in repr(rt)
    c = repr(rt.context)
    assert f"backend='{rt.backend}'" in c and "device=0" in c and f"id={rt.context.id}" in c and "default" in c
    b = rt.buffer(64)
    assert repr(b) == f"<kcache.Buffer size=64 backend='{rt.backend}' device=0 context={rt.context.id}>"
    b.destroy()
    assert repr(b) == "<kcache.Buffer destroyed (was 64 bytes)>"
    k = rt.kernel("scale", T="float")
    assert repr(k) == f"<kcache.Kernel 'scale' [T=float] backend='{rt.backend}'>"
    assert repr(rt.kernel("scale")[(8, 2), 4]) == "<kcache.LaunchConfig 'scale' grid=(8, 2, 1) block=(4, 1, 1)>"
    with rt.pin() as p:
        assert repr(p) == f"<kcache.Pin world={p.world}>"
    if kcache.HAS_INTEROP:
        with rt.stream() as s:
            assert repr(s).startswith(f"<kcache.Stream made backend='{rt.backend}' device=0 context=")
            assert re.fullmatch(r"<kcache.Stream made backend='\w+' device=0 context=\d+ handle=0x[0-9a-f]+>", repr(s))
        assert repr(s) == "<kcache.Stream made closed>"


def test_repr_of_a_closed_runtime(backend: str) -> None:
    rt = kcache.Runtime(backend=backend, cache_disable=True)
    ctx, b = rt.context, rt.buffer(8)
    rt.close()
    assert repr(rt) == "<kcache.Runtime closed>"
    assert "closed" in repr(ctx)
    assert repr(b) == "<kcache.Buffer destroyed (was 8 bytes)>"


def test_buffer_len_and_context_manager(rt: kcache.Runtime) -> None:
    with rt.buffer(np.arange(16, dtype=np.float32)) as b:
        assert len(b) == 64 == b.size
        assert not b.destroyed
    assert b.destroyed and len(b) == 0
    with pytest.raises(kcache.DestroyedError):
        b.read()
    with pytest.raises(kcache.DestroyedError):
        with b:
            pass


def test_buffer_read_gives_numpy_and_tobytes_gives_bytes(rt: kcache.Runtime) -> None:
    x = np.arange(8, dtype=np.float32)
    b = rt.buffer(x)
    u8 = b.read()
    assert isinstance(u8, np.ndarray) and u8.dtype == np.uint8 and u8.shape == (32,)
    f = b.read(dtype=np.float32)
    assert f.dtype == np.float32 and f.tolist() == x.tolist()
    assert b.read(offset=8, dtype="float32").tolist() == [2, 3, 4, 5, 6, 7]
    assert b.tobytes() == x.tobytes() and b.tobytes(offset=28) == x[7:].tobytes()
    out = np.zeros(4, np.float32)
    assert b.read(out) is out and out.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="whole number"):
        b.read(offset=2, dtype=np.float32)
    with pytest.raises(TypeError, match="not both"):
        b.read(out, dtype=np.float32)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="out of range"):
        b.read(offset=33)


def test_context_as_a_context_manager(rt: kcache.Runtime) -> None:
    with rt.create_context() as c:
        b = c.buffer(16)
        assert not c.destroyed and repr(c).endswith(f"id={c.id}>")
    assert c.destroyed and b.destroyed
    with pytest.raises(kcache.DestroyedError):
        c.finish()
    # the default context stays with its runtime
    with rt.context as d:
        pass
    assert not d.destroyed
    rt.context.finish()


def test_log_goes_to_the_kcache_logger(backend: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kcache")
    with kcache.Runtime(backend=backend, cache_disable=True, log_level="info") as rt:
        rt.define("scale", SCALE)
        y = np.ones(4, np.float32)
        rt.kernel("scale")[4, 1](y, 2.0)
    compiled = [r for r in caplog.records if r.name == "kcache" and "compiled kernel 'scale'" in r.getMessage()]
    assert len(compiled) == 1 and compiled[0].levelno == logging.INFO, caplog.text


def test_log_warnings_are_warnings(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("KC_LOG", "loud")
    with kcache.Runtime(backend="host", cache_disable=True):
        pass
    warned = [r for r in caplog.records if r.name == "kcache" and 'KC_LOG="loud"' in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING, caplog.text


def test_log_from_another_thread(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kcache")
    with kcache.Runtime(backend="host", cache_disable=True, log_level="info") as rt:
        rt.define("scale", SCALE)
        t = threading.Thread(target=lambda: rt.kernel("scale").compile())
        t.start()
        t.join()
    assert any("compiled kernel 'scale'" in r.getMessage() for r in caplog.records if r.name == "kcache")


def test_log_opt_out_to_stderr(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kcache")
    with kcache.Runtime(backend="host", cache_disable=True, log_level="info", log="stderr") as rt:
        rt.define("scale", SCALE)
        rt.kernel("scale").compile()
    assert "kcache: " in capfd.readouterr().err
    assert not [r for r in caplog.records if r.name == "kcache"]
    with pytest.raises(ValueError, match="log must be"):
        kcache.Runtime(backend="host", log="syslog")
