#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/python-test.sh -- the Python package's suite (scripts/test.sh python):
# makes build-python/venv (pip: scikit-build-core, pytest, numpy), builds the
# wheel with `pip wheel` (CMake through scikit-build-core, libkcache linked
# statically), checks that the extension needs no libkcache at run time,
# installs the wheel and runs python/tests with pytest from outside the
# tree (so the installed package is what is tested). Log: build-python/pytest.log.
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
"$vpy" -m pip install -q --disable-pip-version-check scikit-build-core pytest numpy >"$out/pip-deps.log" 2>&1 ||
  { cat "$out/pip-deps.log"; exit 1; }

rm -rf "$out/dist"
"$vpy" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$out/dist" . \
  >"$out/wheel.log" 2>&1 || { tail -40 "$out/wheel.log"; exit 1; }
whl=$(ls "$out"/dist/kcache_jit-*.whl)
echo "python-test: built $(basename "$whl")"
# the wheel must work without an installed kcache: no libkcache in the extension's needs
rm -rf "$out/whl-check" && mkdir -p "$out/whl-check"
"$vpy" -m zipfile -e "$whl" "$out/whl-check"
so=$(ls "$out"/whl-check/kcache/_kcache*.so)
if readelf -d "$so" | grep -q 'NEEDED.*libkcache'; then
  echo "python-test: $so needs libkcache.so (it must link libkcache statically)" >&2
  exit 1
fi
"$vpy" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$whl" >"$out/install.log" 2>&1 ||
  { cat "$out/install.log"; exit 1; }
cd "$out" # not the source tree: the installed package is imported
"$vpy" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" "$@" 2>&1 | tee "$out/pytest.log"
exit "${PIPESTATUS[0]}"
