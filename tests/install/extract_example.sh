#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# extract_example.sh FILE [NAME] -- prints one of the example programs of
# FILE (README.md, or a page of doc/ such as doc/interop.md): the ```c
# block that follows the line "<!-- example program: NAME -->" (NAME:
# app.c by default). The tests compile exactly that text, so the
# documentation cannot rot.
set -euo pipefail
name=${2:-app.c}
awk -v marker="<!-- example program: $name -->" -v name="$name" -v file="$1" '
  $0 == marker { armed = 1; next }
  armed && !inside && /^```c$/ { inside = 1; next }
  inside && /^```$/ { found = 1; exit }
  inside { print }
  END { if (!found) { print "extract_example.sh: no example program " name " in " file > "/dev/stderr"; exit 1 } }
' "$1"
