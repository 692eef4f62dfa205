# SPDX-License-Identifier: MIT
"""README's Python examples run as written (the blocks after
"<!-- python example: numpy -->" and "<!-- python example: files and
streams -->"), so the README cannot rot."""
import pathlib
import re

import pytest

import kcache

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_numpy_example(capsys):
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


def test_readme_files_and_streams_example(capsys):
    if not README.exists():
        pytest.skip("no README.md next to python/")
    m = re.search(r"<!-- python example: files and streams -->\n```python\n(.*?)\n```", README.read_text(), re.S)
    assert m, "README has no define_file / streams example"
    if not kcache.backend_available("host")[0] or not kcache.HAS_INTEROP:
        pytest.skip("host backend with streams not available")
    exec(compile(m.group(1), "README.md", "exec"), {})
    assert capsys.readouterr().out.endswith(" 2 as expected\n")  # two compiles: before and after the reload
