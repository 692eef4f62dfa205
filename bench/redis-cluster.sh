#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/redis-cluster.sh -- a Redis Cluster of 3 primaries and 3 replicas on
# loopback for the benchmarks (kc_bench_fleet --url, kc_bench_remote --url),
# as the tests make one (tests/remote/rs.c): no persistence, node timeout
# 1000 ms.
#
#   bench/redis-cluster.sh start DIR [FIRST_PORT (7100)]   prints the URL
#   bench/redis-cluster.sh kill DIR N                      SIGKILL node N (0-5)
#   bench/redis-cluster.sh stop DIR
set -euo pipefail
cmd=${1:?start|kill|stop} dir=${2:?directory}
case $cmd in
start)
  port=${3:-7100}
  mkdir -p "$dir"
  hosts=()
  for i in 0 1 2 3 4 5; do
    p=$((port + i))
    mkdir -p "$dir/n$i"
    (cd "$dir/n$i" && redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
      --pidfile "$dir/n$i/pid" --logfile "$dir/n$i/log" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 >/dev/null)
    hosts+=("127.0.0.1:$p")
  done
  for i in 0 1 2 3 4 5; do
    for _ in $(seq 50); do redis-cli -p $((port + i)) ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1
  for _ in $(seq 100); do
    [[ $(redis-cli -p "$port" cluster info | tr -d '\r' | grep cluster_state) == cluster_state:ok ]] && break
    sleep 0.2
  done
  (IFS=,; echo "redis+cluster://${hosts[*]:0:3}")
  ;;
kill) kill -9 "$(cat "$dir/n${3:?node}/pid")" ;;
stop)
  for i in 0 1 2 3 4 5; do [[ -f $dir/n$i/pid ]] && kill "$(cat "$dir/n$i/pid")" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$dir"
  ;;
esac
