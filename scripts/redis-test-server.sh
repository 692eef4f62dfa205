#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/redis-test-server.sh -- a throwaway Redis for trying the remote
# tier by hand (the tests and the benchmark start their own): no
# persistence, loopback only, a free port, memory bounded and LRU as a cache
# should be.
#
#   eval "$(scripts/redis-test-server.sh start)"   # sets KC_REMOTE, KC_REDIS_TEST_DIR
#   scripts/demo.sh; build/cli/kcache remote ls
#   scripts/redis-test-server.sh stop               # uses $KC_REDIS_TEST_DIR
set -euo pipefail
cmd=${1:-}
case $cmd in
start)
  command -v redis-server >/dev/null || { echo "redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
  dir=$(mktemp -d "${TMPDIR:-/tmp}/kc-redis-XXXXXX")
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --maxmemory 256mb --maxmemory-policy allkeys-lru \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.05
  done
  echo "export KC_REMOTE=redis://127.0.0.1:$port KC_REDIS_TEST_DIR=$dir"
  ;;
stop)
  dir=${2:-${KC_REDIS_TEST_DIR:-}}
  [[ -n $dir && -f $dir/redis.pid ]] || { echo "usage: $0 stop DIR (or set KC_REDIS_TEST_DIR)" >&2; exit 2; }
  kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
  rm -rf "$dir"
  echo "unset KC_REMOTE KC_REDIS_TEST_DIR"
  ;;
*)
  echo "usage: $0 start | stop [DIR]" >&2
  exit 2
  ;;
esac
