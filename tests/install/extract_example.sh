#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# extract_example.sh README [NAME] -- prints one of README's example
# programs: the ```c block that follows the line
# "<!-- example program: NAME -->" (NAME: app.c by default). The tests
# compile exactly that text, so README cannot rot.
set -euo pipefail
name=${2:-app.c}
awk -v marker="<!-- example program: $name -->" '
  $0 == marker { armed = 1; next }
  armed && !inside && /^```c$/ { inside = 1; next }
  inside && /^```$/ { found = 1; exit }
  inside { print }
  END { if (!found) { print "extract_example.sh: no example program in README" > "/dev/stderr"; exit 1 } }
' "$1"
