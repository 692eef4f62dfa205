#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# extract_example.sh README -- prints README's example program: the ```c
# block that follows the line "<!-- example program: app.c -->". The tests
# compile exactly that text, so README cannot rot.
set -euo pipefail
awk '
  /^<!-- example program: app.c -->$/ { armed = 1; next }
  armed && !inside && /^```c$/ { inside = 1; next }
  inside && /^```$/ { found = 1; exit }
  inside { print }
  END { if (!found) { print "extract_example.sh: no example program in README" > "/dev/stderr"; exit 1 } }
' "$1"
