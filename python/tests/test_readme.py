# SPDX-License-Identifier: MIT
"""README's Python example runs as written (the block after
"<!-- python example: numpy -->"), so the README cannot rot."""
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
