#!/usr/bin/env bash
# A STEP_HOOK for bench/scripts/bench_hybrid.sh: the host's TCP counters (/proc/net/netstat and snmp) and
# the integrator's /metrics at the start and the end of a step's measured seconds, in
# OUT_DIR/net-SERIES-RATE.0 and .1 (bench/scripts/net_delta.py prints what changed).
# usage (bench_hybrid.sh calls it): step_net_hook.sh NODE_PID SERIES RATE SECONDS OUT_DIR
set -u
[ $# -eq 5 ] || { echo "usage: $0 NODE_PID SERIES RATE SECONDS OUT_DIR" >&2; exit 2; }
f=$5/net-$2-$3
snap() {
  cat /proc/net/netstat /proc/net/snmp
  curl -s --max-time 2 "http://127.0.0.1:${INT_METRICS_PORT:-7703}/metrics" | grep -v '^#'
}
snap >"$f.0"
sleep "$4"
snap >"$f.1"
