#!/usr/bin/env bash
# A throwaway local 3-master Redis Cluster for tests and CI (no persistence).
#
#   scripts/redis-cluster.sh start <dir>        start 127.0.0.1:7101-7103, create the cluster, wait for cluster_state:ok
#   scripts/redis-cluster.sh stop <dir>         stop the servers started in <dir> (by their pid files, nothing else)
#   scripts/redis-cluster.sh start-node <dir> <port>
#                                               start one node again (after a kill): it rejoins with its node config
#
# <dir> holds the node configs, pid files and logs. Ports: REDIS_CLUSTER_BASE_PORT (default 7101).
# REDIS_CLUSTER_REPLICAS (default 0): replicas per master, on the ports after the masters'
# (1: 127.0.0.1:7101-7106). REDIS_CLUSTER_NODE_TIMEOUT (ms, default 5000): how soon a dead
# master is failed over. On success `start` prints the REDIS_CLUSTER_NODES value to use.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop <dir> | start-node <dir> <port>" >&2
  exit 2
fi

base=${REDIS_CLUSTER_BASE_PORT:-7101}
replicas=${REDIS_CLUSTER_REPLICAS:-0}
node_timeout=${REDIS_CLUSTER_NODE_TIMEOUT:-5000}
ports=()
for i in $(seq 0 $((3 * (1 + replicas) - 1))); do ports+=("$((base + i))"); done
nodes=$(printf '127.0.0.1:%s,' "${ports[@]}")
nodes=${nodes%,}

start_node() {
  local port=$1
  # --repl-diskless-sync-delay 0: a replica's full sync starts at once, not after 5 s.
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
    --cluster-enabled yes --cluster-config-file "nodes-$port.conf" --cluster-node-timeout "$node_timeout" \
    --save '' --appendonly no --maxmemory-policy noeviction --repl-diskless-sync-delay 0 \
    --daemonize yes --pidfile "$dir/redis-$port.pid" --logfile "$dir/redis-$port.log"
}

stop_cluster() {
  local pidfile pid pids=()
  for port in "${ports[@]}"; do
    pidfile="$dir/redis-$port.pid"
    [[ -f "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    # Only a redis-server we started: the pid file must still name a live redis-server.
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && grep -qa redis-server "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" && pids+=("$pid")
    fi
    rm -f "$pidfile"
  done
  # All at once: each server takes a moment to exit after SIGTERM.
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  done
}

case "$cmd" in
  start)
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
      echo "redis-cluster: redis-server and redis-cli are required" >&2
      exit 1
    }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    for port in "${ports[@]}"; do
      if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
        echo "redis-cluster: port $port is already in use (set REDIS_CLUSTER_BASE_PORT)" >&2
        exit 1
      fi
    done
    for port in "${ports[@]}"; do
      # A fresh cluster every time: stale node configs would keep an old cluster's identity.
      rm -f "$dir/nodes-$port.conf"
      start_node "$port"
    done
    for port in "${ports[@]}"; do
      for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
      redis-cli -p "$port" ping >/dev/null 2>&1 || {
        echo "redis-cluster: node $port did not come up (see $dir/redis-$port.log)" >&2
        stop_cluster
        exit 1
      }
    done
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") \
      --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 || {
      echo "redis-cluster: cluster create failed:" >&2
      cat "$dir/create.log" >&2
      stop_cluster
      exit 1
    }
    for _ in $(seq 1 100); do
      ok=0
      for port in "${ports[@]}"; do
        redis-cli -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && ok=$((ok + 1))
      done
      [[ $ok -eq ${#ports[@]} ]] && break
      sleep 0.1
    done
    if [[ $ok -ne ${#ports[@]} ]]; then
      echo "redis-cluster: cluster_state did not become ok" >&2
      stop_cluster
      exit 1
    fi
    # Replicas: ready once every master has a replica past its initial sync.
    if [[ $replicas -gt 0 ]]; then
      for _ in $(seq 1 200); do
        online=0
        for port in "${ports[@]}"; do
          redis-cli -p "$port" info replication 2>/dev/null | grep -q '^slave[0-9]*:.*state=online' && online=$((online + 1))
        done
        [[ $online -ge 3 ]] && break
        sleep 0.1
      done
      if [[ $online -lt 3 ]]; then
        echo "redis-cluster: the replicas did not finish their initial sync" >&2
        stop_cluster
        exit 1
      fi
    fi
    echo "$nodes"
    ;;
  start-node)
    port=${3:-}
    [[ -n "$port" && -f "$dir/nodes-$port.conf" ]] || {
      echo "redis-cluster: start-node needs the port of a node created in $dir" >&2
      exit 2
    }
    dir=$(cd "$dir" && pwd)
    start_node "$port"
    ;;
  stop)
    stop_cluster
    ;;
  *)
    echo "usage: $0 start|stop <dir> | start-node <dir> <port>" >&2
    exit 2
    ;;
esac
