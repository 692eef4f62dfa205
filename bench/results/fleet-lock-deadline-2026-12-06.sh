#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 25 item 3's single-flight measurement: 32 nodes (processes, each its
# own disk cache) cold-start the same 50 kernels at once against one local
# redis-server, with the library's default settings, three builds in turn:
#   before:    main at 244bce0 (every command under the 5 ms timeout)
#   lock-only: da770f6 (SET NX and the polls under KC_REMOTE_LOCK_DEADLINE_MS,
#              250 ms; the first read and the uploads under 5 ms)
#   after:     this branch (also a read that missed 5 ms goes on with 250 ms
#              on a new connection, and the uploads have 250 ms)
# Each tree was exported with git archive into build-before/ and
# build-lockonly/ (ignored), with this branch's bench/kc_bench_remote.c (for
# --fleet), and built with cmake --build B --target kc_bench_remote.
# Run from the repository root:
#   sh bench/results/fleet-lock-deadline-2026-12-06.sh ROUND VARIANT...
# (the log: round 1 of before, lock-only, after; then, the machine cooled
# down, round 2 of lock-only and after: "before" alone took 409 s of both
# cores at a load average near 50, which the other work here shares)
set -u
i=$1
shift
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores shared with other work, $(redis-server --version | cut -d' ' -f1-3)"
echo "# after = branch cluster at $(git rev-parse --short HEAD)"
echo "# each run: env -u KC_REMOTE_TIMEOUT_MS -u KC_REMOTE_LOCK_DEADLINE_MS BIN --fleet 32 50 --runs 1"
for w in "$@"; do
  {
    case $w in
      before) BIN=build-before/b/bench/kc_bench_remote ;;
      lock-only) BIN=build-lockonly/b/bench/kc_bench_remote ;;
      after) BIN=build/bench/kc_bench_remote ;;
    esac
    echo "## $w, round $i ($BIN): load average before it $(cut -d' ' -f1-3 /proc/loadavg)"
    env -u KC_REMOTE_TIMEOUT_MS -u KC_REMOTE_LOCK_DEADLINE_MS timeout 600 $BIN --fleet 32 50 --runs 1 \
      2>/tmp/fleet-$w-$i.err | grep -v '^fleet:'
    echo "   nodes that warned of a failure: $(grep -c 'after 3 failures' /tmp/fleet-$w-$i.err)," \
      "of those a timeout: $(grep 'after 3 failures' /tmp/fleet-$w-$i.err | grep -c 'no answer within')," \
      "waits given up (compiled without the lock): $(grep -c 'compiled without it' /tmp/fleet-$w-$i.err)"
  }
done
