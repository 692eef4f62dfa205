# SPDX-License-Identifier: MIT
"""The documentation's Python examples run as written: README's blocks after
"<!-- python example: numpy -->" and "<!-- python example: opencl as
written -->", and doc/python.md's after "<!-- python example: files and
streams -->", so none can rot."""
import pathlib
import re

import pytest

import kcache

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PYTHON_DOC = ROOT / "doc" / "python.md"


def test_readme_numpy_example(capsys: pytest.CaptureFixture[str]) -> None:
    if not README.exists():
        pytest.skip("no README.md next to python/")
    m = re.search(r"<!-- python example: numpy -->\n```python\n(.*?)\n```", README.read_text(), re.S)
    assert m, "README has no Python example"
    if not kcache.backend_available("host")[0]:
        pytest.skip("host backend not available")
    exec(compile(m.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.endswith("as expected\n")
    assert out.split()[:2] == ["2", "float"]


def test_readme_opencl_as_written_example(capsys: pytest.CaptureFixture[str]) -> None:
    if not README.exists():
        pytest.skip("no README.md next to python/")
    m = re.search(r"<!-- python example: opencl as written -->\n```python\n(.*?)\n```", README.read_text(), re.S)
    assert m, "README has no OpenCL example"
    if not kcache.backend_available("opencl")[0]:
        pytest.skip("opencl backend not available")
    exec(compile(m.group(1), "README.md", "exec"), {})
    assert capsys.readouterr().out == "sum as expected\n"


def test_python_doc_median_filter_example(capsys: pytest.CaptureFixture[str]) -> None:
    if not PYTHON_DOC.exists():
        pytest.skip("no doc/python.md next to python/")
    m = re.search(r"<!-- python example: opencl median filter -->\n```python\n(.*?)\n```", PYTHON_DOC.read_text(),
                  re.S)
    assert m, "doc/python.md has no median filter example"
    if not kcache.backend_available("opencl")[0]:
        pytest.skip("opencl backend not available")
    exec(compile(m.group(1), "doc/python.md", "exec"), {})
    assert capsys.readouterr().out == "median filter as expected\n"


def test_readme_files_and_streams_example(capsys: pytest.CaptureFixture[str]) -> None:
    if not PYTHON_DOC.exists():
        pytest.skip("no doc/python.md next to python/")
    m = re.search(r"<!-- python example: files and streams -->\n```python\n(.*?)\n```", PYTHON_DOC.read_text(), re.S)
    assert m, "doc/python.md has no define_file / streams example"
    if not kcache.backend_available("host")[0] or not kcache.HAS_INTEROP:
        pytest.skip("host backend with streams not available")
    exec(compile(m.group(1), "doc/python.md", "exec"), {})
    assert capsys.readouterr().out.endswith(" 2 as expected\n")  # two compiles: before and after the reload
