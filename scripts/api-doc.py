#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The C API reference, written from include/kcache.h's own comments.

kcache.h is the specification: every public function is declared there with
the comment that says what it does. This script writes doc/api.md from it:
one section per part of the header (its "/* ---- part ---- */" lines), and
in each, every declaration of a kc_ function or macro with the comment
above it, in the header's order, and an index of every function at the top.
With --check it writes nothing and fails (exit 1) when doc/api.md is not
what it would write, or when a public function has no comment; the lint
(scripts/check-layout.py) runs it so.

Usage: scripts/api-doc.py [--check]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "include/kcache.h")
OUT = os.path.join(ROOT, "doc/api.md")
PART = re.compile(r"^/\* -+ (.+?) \*/$")
DECL = re.compile(r"^(?:#define (kc_\w+)\(|[A-Za-z_][\w \*]*?\b(kc_\w+)\s*\()")


def comment_text(lines):
    """The text of a /* ... */ block, its leading stars and indent taken off."""
    out = []
    for i, line in enumerate(lines):
        s = line.strip()
        if i == 0:
            s = s[2:].lstrip()
        if s.endswith("*/"):
            s = s[:-2]
        s = s.rstrip()
        if s.startswith("* ") or s == "*":
            s = s[2:]
        elif s.startswith("*"):
            s = s[1:]
        out.append(s)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def parse():
    lines = open(HEADER).read().split("\n")
    parts = []  # (title, [(names, decl lines, comment lines)])
    part = ("version", [])  # what comes before the header's first part
    parts.append(part)
    i = 0
    pending = None  # the last comment block and where it ended
    depth = 0  # inside a struct or enum body: its fields are not declarations
    while i < len(lines):
        line = lines[i]
        m = PART.match(line)
        if m:
            part = (m.group(1), [])
            parts.append(part)
            pending = None
            i += 1
            continue
        if line.lstrip().startswith("/*") and depth == 0:
            j = i
            while "*/" not in lines[j]:
                j += 1
            pending = (comment_text(lines[i:j + 1]), j, [])
            i = j + 1
            continue
        if line.startswith("typedef") and depth == 0:
            # a type declared between a comment and the functions it is for: shown with them
            j, d2 = i, 0
            while True:
                code = re.sub(r"/\*.*?\*/|//.*", "", lines[j])
                d2 += code.count("{") - code.count("}")
                if d2 == 0 and ";" in code:
                    break
                j += 1
            if pending and pending[1] == i - 1:
                pending = (pending[0], j, pending[2] + lines[i:j + 1])
            else:
                pending = None
            i = j + 1
            continue
        if line.strip() == 'extern "C" {' or (line.strip() == "}" and lines[i - 1].startswith("#if")):
            i += 1  # the C++ linkage block around the whole header
            continue
        code = re.sub(r"/\*.*?\*/|//.*", "", line)
        depth += code.count("{") - code.count("}")
        d = DECL.match(line) if part and depth == 0 else None
        if d and not line.startswith("typedef"):
            j = i
            if line.startswith("#define"):
                while lines[j].endswith("\\"):
                    j += 1
            else:
                while ";" not in lines[j] and "{" not in lines[j]:
                    j += 1
            decl = lines[i:j + 1]
            name = d.group(1) or d.group(2)
            own = pending if pending and pending[1] == i - 1 else None
            if own is None and part[1] and part[1][-1][3] == i - 1:
                # right under the previous declaration: one group, one comment
                part[1][-1][0].append(name)
                part[1][-1][1].extend(decl)
                part[1][-1][3] = j
            else:
                part[1].append([[name], (own[2] if own else []) + decl, own[0] if own else [], j])
            pending = None
            i = j + 1
            continue
        i += 1
    return parts


def render(parts):
    out = ["# The C API", "",
           "Every function and macro of `include/kcache.h`, with the header's own words, part by part",
           "(written by `scripts/api-doc.py` from the header; the lint fails when it differs). The",
           "header is the specification: types, struct fields and the rules that hold for every",
           "call (status codes, struct sizes, thread safety) are in it, above what is listed here.",
           "The guide to using them is [guide.md](guide.md).", ""]
    anchors = {}
    for title, decls in parts:
        if not decls:
            continue
        a = re.sub(r"[^a-z0-9 -]", "", title.lower()).strip().replace(" ", "-")
        anchors[title] = a
    out.append("| part | functions |")
    out.append("| --- | --- |")
    for title, decls in parts:
        if decls:
            names = [n for d in decls for n in d[0]]
            out.append("| [%s](#%s) | %s |" % (title, anchors[title], ", ".join("`%s`" % n for n in names)))
    out.append("")
    for title, decls in parts:
        if not decls:
            continue
        out.append("## %s" % title)
        out.append("")
        for names, decl, text, _ in decls:
            out.append("### " + ", ".join("`%s`" % n for n in names))
            out.append("")
            out.append("```c")
            out.extend(decl)
            out.append("```")
            out.append("")
            if text:
                out.extend(text)
                out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit(__doc__)
    parts = parse()
    bad = ["api-doc: include/kcache.h: %s has no comment above it" % ", ".join(d[0])
           for _, decls in parts for d in decls if not d[2]]
    text = render(parts)
    header = re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S)
    for f in sorted(set(re.findall(r"\b(kc_[a-z0-9_]+)\s*\(", header))):
        if "`%s`" % f not in text:
            bad.append("api-doc: include/kcache.h declares %s, which doc/api.md would not list" % f)
    old = open(OUT).read() if os.path.exists(OUT) else ""
    if old != text:
        if check:
            bad.append("api-doc: doc/api.md is not what include/kcache.h says (scripts/api-doc.py writes it)")
        else:
            with open(OUT, "w") as f:
                f.write(text)
            print("api-doc: wrote doc/api.md")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
