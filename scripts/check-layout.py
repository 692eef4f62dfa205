#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/check-layout.py -- the house rules of doc/design.md, checked.

Fails (prints each breach, exits 1) on:

  * a cycle between files of src/: file A uses a function that file B
    defines and B (or a file B reaches) uses one that A defines. A file
    defines every function whose definition in it is not `static`; it uses
    a name that it calls (the name followed by "(") or takes the address of
    (the bare name), outside its own definitions' heads, not after "." or
    "->". Only .c files are counted, and there is no cycle to allow;
  * a read of the environment (getenv, kc__setting_raw) outside the files
    of ENV_READERS below: every KC_* setting is read once, into the
    resolved configuration (base/config.h);
  * a use, in a file under src/backends/ (the registry included), of a
    function defined under src/core/: what a backend needs of the core
    comes through backend.h's kc__bsvc;
  * a mutex, rwlock, condition variable or flock under src/ that the table
    "Every lock" of doc/locks.md does not list, and a lock that table lists
    and the code no longer has. The table's convention (it says it there
    too): a lock that is a field of a struct is `struct.field` in the first
    column (the struct's tag or typedef name: `kc_runtime.world_lock`); one
    at file scope (or a function's static) is its `name` in the first
    column and its file's `src/...` path in the row; a flock (flock() with
    any operation but a release, LOCK_UN) is the `function` that calls it
    and the function's file's `src/...` path, both in one row whose kind
    column says flock;
  * a file under src/ that the room table of doc/design.md (section 13,
    "Rooms") does not name, and a file that table names and that does not
    exist. The table names a file by its path in the first column, or by
    its name in the row of its folder; a `sub/` followed by "( ... )"
    names, inside the parentheses, files of that subfolder (`host/`
    (`host.c`; ...));
  * under src/cache/ or src/remote/, a name of the runtime, the code
    instance, the linked object or the backend table (kc_runtime, kc__ci,
    kc__linked, kc__backend); an include in the cache of anything but
    base/, cache/, kcache.h and the test-only testing/fault.h, in the
    remote tier of anything but base/, remote/, the entry codec
    (cache/codec.h, cache/format.h) and kcache.h;
  * a backend file (see above) that includes anything but src/backend.h,
    its own folder's headers and system headers;
  * a source file (C, shell, Python, CMake) without its SPDX licence line
    (MIT) in its first three lines.

Warns (prints, does not fail) on a function under src/ longer than
LONG_FN lines: the sizes of files and functions are no rule, the structure
is.

Run by scripts/test.sh (the lint suite): python3 scripts/check-layout.py
"""
import glob
import os
import re
import subprocess
import sys

LONG_FN = 100
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(root)
bad = []
warn = []

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


def functions(code):
    """(head start, body start, body end, head) of every top-level function
    body of stripped text, as offsets."""
    depth, start, head_from = 0, None, 0
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[head_from:i]
                if "(" in head and not re.search(r"=\s*$|\b(struct|union|enum)\b[^()]*$", head):
                    start = (head_from, i, head)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if start:
                    yield start[0], start[1], i, start[2]
                start, head_from = None, i + 1
        elif c == ";" and depth == 0:
            head_from = i + 1
        elif c == "\n" and depth == 0 and code[head_from:i].lstrip().startswith("#"):
            head_from = i + 1


def fn_name(head):
    """The name a function definition's head defines (None if none)."""
    head = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", head)
    m = re.search(r"([A-Za-z_]\w*)\s*\(", head)
    return m.group(1) if m else None


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def short(path):
    return path[4:] if path.startswith("src/") else path


sources = sorted(glob.glob("src/**/*.[ch]", recursive=True))
texts = {p: open(p, encoding="utf-8").read() for p in sources}
codes = {p: strip(t) for p, t in texts.items()}
fns = {p: list(functions(codes[p])) for p in sources}

# ------------------------------------------------ per file: the old checks

for path in sources:
    text, code = texts[path], codes[path]
    for hs, bs, be, head in fns[path]:
        n = code.count("\n", bs, be) + 1
        if n > LONG_FN:
            warn.append(f"{path}:{line_of(code, bs)}: {fn_name(head)} is {n} lines (over {LONG_FN}: "
                        f"would it read better as steps?)")
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
                bad.append(f"{path}:{line_of(text, m.start())}: includes \"{inc}\" (the cache sees only "
                           f"base/, cache/ and kcache.h; the remote tier base/, remote/, the codec and "
                           f"kcache.h)")
        for m in re.finditer(r"\b(kc_runtime|kc__ci|kc__linked|kc__backend)\b", code):
            bad.append(f"{path}:{line_of(text, m.start())}: names {m.group(0)} (the cache and remote "
                       f"tiers must not)")
    if path.startswith("src/backends/"):  # the registry and probe.c too
        folder = os.path.dirname(path)
        for m in re.finditer(r'^#include\s+"([^"]+)"', text, re.M):
            inc = m.group(1)
            own = os.path.normpath(os.path.join("src", inc))
            ok = inc == "backend.h" or os.path.exists(os.path.join(folder, inc)) or (
                os.path.dirname(own) == folder and os.path.exists(own))
            if not ok:
                bad.append(f"{path}:{line_of(text, m.start())}: includes \"{inc}\" (a backend includes "
                           f"only backend.h and its own folder's headers)")

# ------------------------------------------ the call graph between files

cfiles = [p for p in sources if p.endswith(".c")]
defined = {}  # name -> files that define it (not static)
for p in cfiles:
    for hs, bs, be, head in fns[p]:
        name = fn_name(head)
        if name and not re.search(r"\bstatic\b", head):
            defined.setdefault(name, set()).add(p)

# A header's static inline functions hide the calls in their bodies: a
# file that calls one uses what its body uses (through other inlines too).
IDENT = r"(?<![\w.>])([A-Za-z_]\w*)\b"
hfiles = [p for p in sources if p.endswith(".h")]
inline_body = {}  # name -> the bodies of the headers' static inline functions of that name
for p in hfiles:
    for hs, bs, be, head in fns[p]:
        name = fn_name(head)
        if name and re.search(r"\bstatic\b", head) and re.search(r"\binline\b", head):
            inline_body.setdefault(name, []).append((p, codes[p][bs:be]))
inline_calls = {}  # inline name -> the names defined in .c files that it calls, however deep


def calls_of(name, seen):
    if name in inline_calls:
        return inline_calls[name]
    out = set()
    seen.add(name)
    for h, body in inline_body[name]:
        for m in re.finditer(IDENT, body):
            n = m.group(1)
            if n in defined:
                out.add(n)
            elif n in inline_body and n not in seen:
                out |= calls_of(n, seen)
    inline_calls[name] = out
    return out


for name in inline_body:
    calls_of(name, set())

uses = {}  # (A, B) -> names: A uses functions B defines (through: "f via g", g a header's inline)
for p in cfiles:
    code = list(codes[p])
    for hs, bs, be, head in fns[p]:  # a definition's head is no use
        code[hs:bs] = " " * (bs - hs)
    code = "".join(code)
    mine = {fn_name(head) for hs, bs, be, head in fns[p]}
    for m in re.finditer(IDENT, code):
        n = m.group(1)
        for q in defined.get(n, ()):
            if q != p:
                uses.setdefault((p, q), set()).add(n)
        if n in inline_calls and n not in mine:
            for c in inline_calls[n]:
                for q in defined.get(c, ()):
                    if q != p:
                        uses.setdefault((p, q), set()).add(f"{c} via {n}")

graph = {}
for a, b in uses:
    graph.setdefault(a, set()).add(b)


def sccs(nodes):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for v0 in nodes:
        if v0 in index:
            continue
        work = [(v0, iter(sorted(graph.get(v0, ()))))]
        index[v0] = low[v0] = n
        n += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.add(x)
                        if x == v:
                            break
                    out.append(comp)
            elif w not in index:
                index[w] = low[w] = n
                n += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def path_between(a, b, within):
    """A shortest chain of uses a -> ... -> b inside the files within."""
    prev, todo = {a: None}, [a]
    for v in todo:
        if v == b:
            break
        for w in sorted(graph.get(v, ())):
            if w in within and w not in prev:
                prev[w] = v
                todo.append(w)
    chain, v = [], b
    while v is not None:
        chain.append(v)
        v = prev.get(v)
    return chain[::-1]


def edge_text(a, b):
    names = sorted(uses[(a, b)])
    more = f", +{len(names) - 2}" if len(names) > 2 else ""
    return f"{short(a)} -> {short(b)} ({', '.join(names[:2])}{more})"


comp_of = {}
for comp in sccs(cfiles):
    for v in comp:
        comp_of[v] = comp
on_cycle = {(a, b) for (a, b) in uses if len(comp_of[a]) > 1 and comp_of[a] is comp_of[b]}


for a, b in sorted(on_cycle):
    back = path_between(b, a, comp_of[a])
    ring = " -> ".join(short(x) for x in back)
    bad.append(f"cycle: {edge_text(a, b)}, and back: {ring} (a cycle between files of src/: "
               f"put what both need below both)")

for (a, b), names in sorted(uses.items()):
    if a.startswith("src/backends/") and b.startswith("src/core/"):
        for n in sorted(names):
            core = ", ".join(sorted(short(q) for q in defined[n]))
            bad.append(f"backend -> core: {short(a)} uses {n} (defined in {core}): a backend calls nothing "
                       f"of the core (what it needs comes through backend.h's kc__bsvc, or from below "
                       f"src/backends/)")

# -------------------------------------------- settings are read once

# Every KC_* setting is read once, into a resolved configuration
# (src/base/config.c reads the environment; src/core/config.c resolves it
# with the options and kcache.conf). No other file reads the environment,
# except for what is not a setting of kcache's, named here with why.
ENV_READERS = {
    "src/base/config.c": "the one reading of the KC_* variables",
    "src/base/settings.c": "defines kc__setting_raw, which config.c calls",
    "src/base/log.c": "$KC_LOG for the log of no runtime (a runtime's level is resolved once)",
    "src/core/config.c": "XDG_CACHE_HOME and HOME: the default cache directory, while resolving",
    "src/testing/fault.c": "fault-injection builds: $KC_FAULT_BACKTRACE",
    "src/backends/host/tools.c": "PATH: where the compiler is, as the shell finds it",
    "src/backends/host/sysinc.c": "CPATH and C_INCLUDE_PATH: the compiler's own search path",
    "src/backends/host/host.c": "TMPDIR: where the compiler writes",
    "src/backends/cuda/load.c": "CUDA_HOME and CUDA_PATH: where NVRTC is, read once when it is loaded",
    "src/backends/opencl/helpers.c": "POCL_KERNEL_CACHE: PoCL's own; off, helpers' binaries abort and builds link twice",
}
for path in (p for p in sources if p.endswith(".c")):
    for m in re.finditer(r"\b(getenv|secure_getenv|kc__setting_raw)\s*\(", codes[path]):
        if path not in ENV_READERS:
            bad.append(f"{path}:{line_of(codes[path], m.start())}: {m.group(1)}(): a setting is read once, "
                       f"into the resolved configuration (base/config.h): take it from there")
for path in ENV_READERS:
    if not os.path.exists(path) or not re.search(r"\b(getenv|kc__setting_raw)\s*\(", codes.get(path, "")):
        bad.append(f"scripts/check-layout.py: ENV_READERS names {path}, which reads no environment")

# ------------------------------------------------------- doc/locks.md

LOCK_TYPES = r"kc__mutex|pthread_mutex_t|pthread_rwlock_t|pthread_cond_t"
structs = {}  # struct name -> its fields
field_locks = []  # (struct.field, path, line)
scope_locks = []  # (name, path, line)
flocks = []  # (function, path, line)
for path in sources:
    code = codes[path]
    bodies = []  # (start, end, name)
    for m in re.finditer(r"\b(typedef\s+)?struct\s+(\w+)?\s*\{", code):
        depth, j = 0, m.end() - 1
        for j in range(m.end() - 1, len(code)):
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            if depth == 0:
                break
        name = m.group(2)
        if not name and m.group(1):
            t = re.match(r"\s*(\w+)", code[j + 1:])
            name = t.group(1) if t else None
        if name:
            bodies.append((m.end(), j, name))
            # the fields at this struct's own depth
            inner = re.sub(r"\{[^{}]*\}", " ", code[m.end():j])
            fields = set(re.findall(r"(\w+)\s*(?:\[[^\]]*\]\s*)*(?:[;,]|:\s*\d)", inner))
            fields |= set(re.findall(r"\(\s*\*\s*(\w+)\s*\)", inner))  # function pointers
            structs.setdefault(name, set()).update(fields)
    for m in re.finditer(r"(?<![\w*])(?:" + LOCK_TYPES + r")\s+(\w[^;()]*);", code):
        if re.search(r"\btypedef\s*$", code[max(0, m.start() - 20):m.start()]):
            continue
        names = [re.match(r"\s*\**\s*(\w+)", d).group(1) for d in m.group(1).split(",")]
        inside = [b for b in bodies if b[0] <= m.start() < b[1]]
        for d in names:
            if inside:
                s = min(inside, key=lambda b: b[1] - b[0])[2]
                field_locks.append((f"{s}.{d}", path, line_of(code, m.start())))
            elif not re.search(r"\bextern\b", code[code.rfind("\n", 0, m.start()) + 1:m.start()]):
                scope_locks.append((d, path, line_of(code, m.start())))
    for m in re.finditer(r"\bflock\s*\(([^;]*?)\)\s*[;!=)<>{]", code):
        # every flock() takes a lock but a release: one whose operation
        # names LOCK_UN and neither LOCK_EX nor LOCK_SH (an operation in a
        # variable or a macro counts as a lock taken)
        if re.search(r"\bLOCK_UN\b", m.group(1)) and not re.search(r"\bLOCK_(EX|SH)\b", m.group(1)):
            continue
        fn = [fn_name(h) for hs, bs, be, h in fns[path] if bs <= m.start() < be]
        flocks.append((fn[0] if fn else "?", path, line_of(code, m.start())))
    for m in re.finditer(r"\b(fcntl\s*\([^;]*F_(OFD_)?SETLKW?|lockf\s*\()", code):
        bad.append(f"{path}:{line_of(code, m.start())}: a record lock (fcntl/lockf): teach "
                   f"scripts/check-layout.py and doc/locks.md about it")

locks_md = open("doc/locks.md", encoding="utf-8").read()
sect = re.search(r"^## Every lock\n(.*?)(?=^## )", locks_md, re.M | re.S)
rows = []  # (first column's names, kind column, every name in the row)
for line in (sect.group(1) if sect else "").splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
    if len(cells) < 3 or set(cells[0]) <= set("- ") or cells[0] == "lock":
        continue
    rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1],
                 {re.sub(r"\(\)$", "", t) for t in re.findall(r"`([^`]+)`", line)}))
if not rows:
    bad.append("doc/locks.md: no table under \"## Every lock\"")


def listed(key, path=None, flock=False):
    for first, kind, names in rows:
        if flock:
            if "flock" in kind and key in names and path in names:
                return True
        elif key in first and (path is None or path in names):
            return True
    return False


for key, path, line in field_locks:
    if not listed(key):
        bad.append(f"{path}:{line}: the lock `{key}` is not in doc/locks.md's table \"Every lock\"")
for name, path, line in scope_locks:
    if not listed(name, path):
        bad.append(f"{path}:{line}: the lock `{name}` is not in doc/locks.md's table \"Every lock\" "
                   f"(its name in the first column, `{path}` in the row)")
for fn, path, line in flocks:
    if not listed(fn, path, flock=True):
        bad.append(f"{path}:{line}: the flock taken in {fn}() is not in doc/locks.md's table \"Every "
                   f"lock\" (a flock row naming `{fn}` and `{path}`)")
scope_names = {n for n, _, _ in scope_locks}
flock_fns = {(f, p) for f, p, _ in flocks}
for first, kind, names in rows:
    is_mutex = re.search(r"mutex|condition variable|rwlock", kind)
    for key in first:
        m = re.fullmatch(r"([A-Za-z_]\w*)\.([A-Za-z_]\w*)", key)
        if m and (m.group(1) in structs or is_mutex):
            if m.group(2) not in structs.get(m.group(1), ()):
                bad.append(f"doc/locks.md: lists `{key}`, which the code does not have")
        elif re.fullmatch(r"[A-Za-z_]\w*", key) and is_mutex and key not in scope_names:
            bad.append(f"doc/locks.md: lists the lock `{key}`, which the code does not have")
    if "flock" in kind and not any((n, p) in flock_fns for n in names for p in names):
        bad.append(f"doc/locks.md: the flock row {' '.join('`%s`' % k for k in first) or kind!r} names "
                   f"no function (with its src/ file) that takes a flock")

# ---------------------------------------------- doc/design.md's rooms

design = open("doc/design.md", encoding="utf-8").read()
sect = re.search(r"^### Rooms\n(.*?)(?=^Around it:|^###? )", design, re.M | re.S)
named, ghosts = set(), []
FILE = r"[\w./-]+\.(?:c|h|cmake|map)"
for line in (sect.group(1) if sect else "").splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
    if len(cells) < 2 or set(cells[0]) <= set("- "):
        continue
    folder = None
    for tok in re.findall(r"`([^`]+)`", cells[0]):
        if tok.endswith("/"):
            folder = tok.rstrip("/")
        elif os.path.exists(tok):
            named.add(tok)
            folder = folder or os.path.dirname(tok)
        else:
            ghosts.append(tok)
    if not folder:
        continue
    scopes, depth, pending, i, text = [(folder, -1)], 0, None, 0, cells[1]
    while i < len(text):
        c = text[i]
        if c == "`":
            j = text.find("`", i + 1)
            tok = text[i + 1:j] if j > 0 else ""
            i = j + 1 if j > 0 else len(text)
            if tok.endswith("/") and re.match(r"\s*\(", text[i:]):
                pending = os.path.join(scopes[-1][0], tok.rstrip("/"))
            elif re.fullmatch(FILE, tok):
                here = os.path.join(scopes[-1][0], tok)
                found = [q for q in (here, os.path.join("src", tok), os.path.join("include", tok))
                         if os.path.isfile(q)]
                named.update(found)
                if not found and "/" not in tok:
                    ghosts.append(here)
            continue
        if c == "(":
            depth += 1
            if pending:
                scopes.append((pending, depth))
                pending = None
        elif c == ")":
            if scopes[-1][1] == depth:
                scopes.pop()
            depth -= 1
        i += 1
if not sect:
    bad.append("doc/design.md: no \"### Rooms\" table")
for path in sorted(glob.glob("src/**/*", recursive=True)):
    if os.path.isfile(path) and path not in named:
        bad.append(f"{path}: not in doc/design.md's room table (section 13): add it to its folder's row")
for g in ghosts:
    bad.append(f"doc/design.md: the room table names {g}, which does not exist")

# ------------------------------------------------ the settings table

# doc/settings.md and the man page's list are written from settings.h's
# table (scripts/settings-doc.py); a user document may name, as a setting
# ($KC_X, KC_X=...), only a row of that table.
for gen in ("scripts/settings-doc.py", "scripts/api-doc.py"):  # doc/settings.md, doc/api.md
    sd = subprocess.run([sys.executable, gen, "--check"], capture_output=True, text=True)
    if sd.returncode != 0:
        bad.extend(x for x in (sd.stdout + sd.stderr).splitlines() if x.strip())
setting_names = set(re.findall(r'X\(\s*\w+,\s*"(KC_\w+)"', open("src/base/settings.h").read()))
USER_DOCS = ["README.md", "include/kcache.h", "doc/man/kcache.1", "python/README.md"] + [
    d for d in sorted(glob.glob("doc/*.md")) if d not in ("doc/testing.md", "doc/design.md")]
for doc in USER_DOCS:
    if not os.path.exists(doc):
        continue
    text = open(doc, encoding="utf-8").read()
    for m in re.finditer(r"(?:\$\{?(KC_[A-Z0-9_]+)|\b(KC_[A-Z0-9_]+)=)", text):
        n = m.group(1) or m.group(2)
        if n not in setting_names:
            bad.append(f"{doc}:{text.count(chr(10), 0, m.start()) + 1}: names the setting {n}, which "
                       f"src/base/settings.h's table lacks (add a row, or name it as a test knob in "
                       f"doc/testing.md)")

# ------------------------------------------------ one version number

# CMakeLists.txt's project version is the version: kcache.h's, the Python
# package's and the man page's say the same.
ver = re.search(r"project\(kcache VERSION (\d+\.\d+\.\d+)", open("CMakeLists.txt").read()).group(1)
for path, pat in (("include/kcache.h", r'#define KC_VERSION_STRING "([^"]+)"'),
                  ("pyproject.toml", r'^version = "([^"]+)"'),
                  ("doc/man/kcache.1", r'^\.TH KCACHE 1 "[^"]*" "kcache ([^"]+)"')):
    m = re.search(pat, open(path).read(), re.M)
    if not m or m.group(1) != ver:
        bad.append(f"{path}: says version {m.group(1) if m else '(none)'}, CMakeLists.txt {ver}")

# ----------------------------------------------------- licence lines

tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()
for path in tracked:
    if path.startswith(("tests/fuzz/corpus/", "tests/fuzz/regress/", "bench/results/")):
        continue  # data: fuzz inputs kept byte for byte, benchmark logs
    name = os.path.basename(path)
    if not (re.search(r"\.(c|h|sh|py|cmake|map)$", name) or name in ("CMakeLists.txt", "run")):
        continue
    if not os.path.exists(path):
        continue  # deleted in the working tree, not yet in the index
    with open(path, encoding="utf-8", errors="replace") as f:
        head = "".join(f.readline() for _ in range(3))
    if "SPDX-License-Identifier: MIT" not in head:
        bad.append(f"{path}: no SPDX-License-Identifier: MIT line at the top")

for w in warn:
    print("warning:", w)
for b in bad:
    print(b)
print(f"layout: {len(bad)} breaches" if bad else "layout: ok")
sys.exit(1 if bad else 0)
