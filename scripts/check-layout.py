#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/check-layout.py -- the house rules of doc/design.md, checked.

  * no file under src/ above 600 lines;
  * no function under src/ above 80 lines, unless the comment just above it
    says why ("Longer than 80 lines ...");
  * nothing under src/cache/ or src/remote/ names the runtime, the code
    instance, the linked object or the backend table (kc_runtime, kc__ci,
    kc__linked, kc__backend); the cache includes only base/, cache/,
    kcache.h and the test-only testing/fault.h, the remote tier only base/,
    remote/, the entry codec (cache/codec.h, cache/format.h) and kcache.h;
  * every source file (C, shell, Python, CMake) opens with its SPDX licence
    line (MIT);
  * a backend file includes only src/backend.h, its own folder's headers
    and system headers (src/backends/registry.c, the engine's side of the
    table of backends, is no backend).

Prints each breach and exits 1 if there is one. Run by scripts/test.sh.
"""
import glob
import os
import re
import sys

MAX_FILE, MAX_FN = 600, 80
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(root)
bad = []


def strip(text):
    """Blanks comments, strings and character literals, keeping newlines."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(first line, last line, header) of every top-level function body."""
    code = strip(text)
    depth, start, head_from = 0, None, 0
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[head_from:i]
                if "(" in head and not re.search(r"=\s*$|\b(struct|union|enum)\b[^()]*$", head):
                    start = (code.count("\n", 0, i), head)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if start:
                    yield start[0], code.count("\n", 0, i), start[1]
                start, head_from = None, i + 1
        elif c == ";" and depth == 0:
            head_from = i + 1
        elif c == "\n" and depth == 0 and code[head_from:i].lstrip().startswith("#"):
            head_from = i + 1


for path in sorted(glob.glob("src/**/*.[ch]", recursive=True)):
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    if len(lines) - 1 > MAX_FILE:
        bad.append(f"{path}: {len(lines) - 1} lines (at most {MAX_FILE})")
    for first, last, head in functions(text):
        if last - first + 1 <= MAX_FN:
            continue
        sig = head.strip().split("\n")
        above = "\n".join(lines[max(0, first - len(sig) - 8):first])
        if not re.search(r"[Ll]onger than 80 lines", above):
            bad.append(f"{path}:{first + 1}: a function of {last - first + 1} lines "
                       f"with no comment saying why")
    if path.startswith(("src/cache/", "src/remote/")):
        for m in re.finditer(r"^#include\s+\"([^\"]+)\"", text, re.M):
            inc = m.group(1)
            # the cache never sees the remote tier (it drives it through
            # kc__cache_tier); the remote tier asks the codec about values
            own = "cache/" if path.startswith("src/cache/") else "remote/"
            allowed = inc.startswith(("base/", own)) or inc in ("kcache.h", "testing/fault.h")
            if own == "remote/" and inc in ("cache/codec.h", "cache/format.h"):
                allowed = True
            if not allowed:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: includes \"{inc}\" (the cache sees only base/, cache/ and "
                           f"kcache.h; the remote tier base/, remote/, the codec and kcache.h)")
        for m in re.finditer(r"\b(kc_runtime|kc__ci|kc__linked|kc__backend)\b", strip(text)):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path}:{line}: names {m.group(0)} (the cache and remote tiers must not)")
    # registry.c is the engine's side of the table of backends (it creates a
    # runtime to list devices): the one file in src/backends/ that is no backend.
    if path.startswith("src/backends/") and path != "src/backends/registry.c":
        folder = os.path.dirname(path)
        for m in re.finditer(r'^#include\s+"([^"]+)"', text, re.M):
            inc = m.group(1)
            own = os.path.normpath(os.path.join("src", inc))
            ok = inc == "backend.h" or os.path.exists(os.path.join(folder, inc)) or (
                os.path.dirname(own) == folder and os.path.exists(own))
            if not ok:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: includes \"{inc}\" (a backend includes only backend.h "
                           f"and its own folder's headers)")

import subprocess

tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()
for path in tracked:
    if path.startswith(("tests/fuzz/corpus/", "tests/fuzz/regress/", "bench/results/")):
        continue  # data: fuzz inputs kept byte for byte, benchmark logs
    name = os.path.basename(path)
    if not (re.search(r"\.(c|h|sh|py|cmake|map)$", name) or name in ("CMakeLists.txt", "run")):
        continue
    with open(path, encoding="utf-8", errors="replace") as f:
        head = "".join(f.readline() for _ in range(3))
    if "SPDX-License-Identifier: MIT" not in head:
        bad.append(f"{path}: no SPDX-License-Identifier: MIT line at the top")

for b in bad:
    print(b)
print(f"layout: {len(bad)} breaches" if bad else "layout: ok")
sys.exit(1 if bad else 0)
