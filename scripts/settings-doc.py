#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The one table of kcache's settings, written from the code's table.

src/base/settings.h's KC__SETTINGS rows (name, kind, default, what it does)
are the source. This script writes them into
  doc/settings.md        the table, between its markers
  doc/man/kcache.1       the list in ENVIRONMENT, between its markers
and, with --check, writes nothing and says what differs (exit 1): the lint
(scripts/check-layout.py) runs it so, and also fails when a user document
names a setting ($KC_X or KC_X=...) that the table does not have.
`kcache -p` prints the same rows with their values in force.

Usage: scripts/settings-doc.py [--check]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- settings: begin (scripts/settings-doc.py) -->", "<!-- settings: end -->"
MAN_BEGIN, MAN_END = '.\\" settings: begin (scripts/settings-doc.py)', '.\\" settings: end'
KINDS = {
    "STR": "text",
    "TEXT": "text (may be empty)",
    "BOOL": "0 or 1",
    "U64": "whole number",
    "SIZE": "size (K, M, G, T)",
    "SECONDS": "seconds",
}


def rows():
    text = open(os.path.join(ROOT, "src/base/settings.h")).read()
    out = []
    for m in re.finditer(r'X\(\s*(\w+),\s*"(KC_\w+)",\s*(\w+),\s*(NULL|"(?:[^"\\]|\\.)*"),\s*'
                         r'"((?:[^"\\]|\\.)*)"\s*\)', text):
        default = None if m.group(4) == "NULL" else m.group(4)[1:-1]
        out.append((m.group(2), m.group(3), default, m.group(5).replace('\\"', '"')))
    if not out:
        sys.exit("settings-doc: no rows found in src/base/settings.h")
    return out


def md_table(rs):
    lines = ["| setting | kind | default | what it does |", "| --- | --- | --- | --- |"]
    for name, kind, default, doc in rs:
        d = "(none)" if default is None else "`%s`" % default if default else "(empty)"
        lines.append("| `%s` | %s | %s | %s |" % (name, KINDS.get(kind, kind), d, doc.replace("|", "\\|")))
    return "\n".join(lines)


def man_escape(s):
    s = s.replace("\\", "\\\\").replace("-", "\\-")
    return ("\\&" + s) if s.startswith((".", "'")) else s


def man_list(rs):
    out = []
    for name, kind, default, doc in rs:
        out.append(".TP")
        out.append(".B %s" % name)
        d = "" if default is None else " Default: %s." % (default or "empty")
        out.append(man_escape("%s (%s).%s" % (doc[0].upper() + doc[1:], KINDS.get(kind, kind), d)))
    return "\n".join(out)


def splice(path, begin, end, body):
    text = open(path).read()
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        sys.exit("settings-doc: %s lacks the markers %r ... %r" % (os.path.relpath(path, ROOT), begin, end))
    return text, text[:i + len(begin)] + "\n" + body + "\n" + text[j:]


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit(__doc__)
    rs = rows()
    stale = []
    for rel, b, e, body in (("doc/settings.md", BEGIN, END, md_table(rs)),
                            ("doc/man/kcache.1", MAN_BEGIN, MAN_END, man_list(rs))):
        path = os.path.join(ROOT, rel)
        old, new = splice(path, b, e, body)
        if old != new:
            if check:
                stale.append(rel)
            else:
                with open(path, "w") as f:
                    f.write(new)
                print("settings-doc: wrote %s" % rel)
    for rel in stale:
        print("settings-doc: %s does not match src/base/settings.h's table (scripts/settings-doc.py writes it)"
              % rel)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
