#!/usr/bin/env bash
# A local cluster on loopback: one search-node per shard of an index plus the search-integrator.
# usage: scripts/cluster.sh start  --index DIR [--base-port P] [--build DIR] [--run-dir R]
#                                   [--cache-mb M] [--timeout-ms T] [--threads N]
#                                   [--node-args "ARGS"] [--integrator-args "ARGS"] [--secure]
#        scripts/cluster.sh stop   [--run-dir R]
#        scripts/cluster.sh status [--run-dir R]
# Ports from P (default 9200): HTTP P, integrator metrics P+1, node i ZeroMQ P+10+2i, node i
# metrics P+11+2i. Pid files, logs and cluster.env live in the run dir (default
# /tmp/gpu-search-cluster, or $SEARCH_RUN_DIR). start returns once /health is green; it refuses to
# start a second cluster over a live one. stop sends SIGTERM (the processes drain and exit 0),
# then SIGKILL after 15 s. --node-args / --integrator-args add flags to every search-node / to the
# integrator (split on spaces), e.g. --node-args "--scheduler cpu --gpu off".
# Plain mode (the default) is for one machine: everything on loopback, no keys. --secure runs
# docker/secrets-init.sh into RUN_DIR/secrets (a CA, the integrator's certificate, CURVE keys, an
# API key; kept on later starts) and starts the cluster with CURVE between the integrator and the
# nodes and HTTPS with API keys in front; the key to send is in RUN_DIR/api-key (0600) and the CA
# in RUN_DIR/secrets/ca.pem (docs/RELIABILITY.md, Security).
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=${1:-}
[ $# -gt 0 ] && shift
index="" base_port=9200 build=build run_dir=${SEARCH_RUN_DIR:-/tmp/gpu-search-cluster}
cache_mb=64 timeout_ms=500 threads=0 node_args="" integrator_args="" secure=0
while [ $# -gt 0 ]; do
  case "$1" in
    --index) index=$2; shift 2 ;;
    --base-port) base_port=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --run-dir) run_dir=$2; shift 2 ;;
    --cache-mb) cache_mb=$2; shift 2 ;;
    --timeout-ms) timeout_ms=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --node-args) node_args=$2; shift 2 ;;
    --integrator-args) integrator_args=$2; shift 2 ;;
    --secure) secure=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

die() { echo "cluster.sh: $*" >&2; exit 1; }
case "$cmd" in start | status)
  command -v curl >/dev/null || die "curl is needed to check the cluster's health (scripts/setup.sh installs it)" ;;
esac
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits until FILE holds a line with "event":"ready" (or the process dies).
wait_ready() {
  local log=$1 pidfile=$2 name=$3 i
  for i in $(seq 1 600); do
    grep -q '"event":"ready"' "$log" 2>/dev/null && return 0
    alive "$pidfile" || { tail -20 "$log" >&2; die "$name exited during startup (log: $log)"; }
    sleep 0.1
  done
  die "$name not ready after 60 s (log: $log)"
}

# /health of the integrator on port $1, over HTTPS with the API key when the run dir's cluster is
# secure (cluster.env's SECURE=1, or --secure while starting).
health() {
  local is_secure=0
  if [ "$secure" = 1 ] || grep -qs '^SECURE=1$' "$run_dir/cluster.env"; then is_secure=1; fi
  if [ "$is_secure" = 1 ]; then
    curl -sf --max-time 2 --cacert "$run_dir/secrets/ca.pem" \
      -H "Authorization: ApiKey $(tr -d '\n' <"$run_dir/api-key" | base64 -w0)" \
      "https://localhost:$1/health" 2>/dev/null || true
  else
    curl -sf --max-time 2 "http://127.0.0.1:$1/health" 2>/dev/null || true
  fi
}
# python3 (in scripts/setup.sh's list) reads the JSON: py EXPR evaluates EXPR with j = stdin's JSON.
py() { python3 -c "import json, sys; j = json.load(sys.stdin); print($1)" 2>/dev/null; }
health_status() { health "$1" | py 'j["status"]' || true; }

start() {
  [ -n "$index" ] || die "start needs --index DIR"
  [ -f "$index/manifest.json" ] || die "$index/manifest.json not found (build one with searchctl index)"
  local node_bin=$build/node/search-node integ_bin=$build/integrator/search-integrator
  [ -x "$node_bin" ] || die "$node_bin not built (cmake --build $build --target search-node)"
  [ -x "$integ_bin" ] || die "$integ_bin not built (cmake --build $build --target search-integrator)"
  mkdir -p "$run_dir"
  local running=()
  for f in "$run_dir"/*.pid; do [ -e "$f" ] && alive "$f" && running+=("$(basename "$f" .pid)"); done
  if [ ${#running[@]} -gt 0 ]; then
    echo "cluster.sh: already running (${running[*]}) in $run_dir; 'scripts/cluster.sh stop' first"
    status
    return 0
  fi
  rm -f "$run_dir"/*.pid "$run_dir/cluster.env"
  index=$(cd "$index" && pwd)
  local shards
  shards=$(py 'len(j["shards"])' <"$index/manifest.json") || die "cannot read $index/manifest.json"
  [ "$shards" -ge 1 ] || die "$index/manifest.json lists no shards"
  local endpoints="" i path share=""
  # Several nodes on this one host: none sets CPUs apart for its CPU workers (a hybrid node's
  # default, --tuning sched_cpu_cores, would put every node's workers on the same last CPUs).
  [ "$shards" -gt 1 ] && [[ " $node_args " != *"sched_cpu_cores="* ]] && share="--tuning sched_cpu_cores=0"
  local sec=$run_dir/secrets integ_secure=()
  if [ "$secure" = 1 ]; then
    local ctl=$build/tools/searchctl/searchctl names=""
    [ -x "$ctl" ] || die "$ctl not built (cmake --build $build --target searchctl): --secure makes keys with it"
    for ((i = 0; i < shards; i++)); do names+="${names:+ }node-$i=tcp://127.0.0.1:$((base_port + 10 + 2 * i))"; done
    SECRETS_DIR=$sec SEARCHCTL=$ctl SECRETS_NODES=$names SECRETS_HOSTS=localhost HTTP_URL="https://localhost:$base_port" \
      sh docker/secrets-init.sh >"$run_dir/secrets.log" 2>&1 || { cat "$run_dir/secrets.log" >&2; die "secrets-init.sh failed"; }
    local key
    key=$(sed -n 's/^api-key //p' "$run_dir/secrets.log")
    if [ -n "$key" ]; then (umask 077 && echo "$key" >"$run_dir/api-key"); fi
    [ -s "$run_dir/api-key" ] || die "no API key in $run_dir/api-key (remove $sec to make new secrets)"
    integ_secure=(--curve-key "$sec/integrator/curve.key" --curve-servers "$sec/integrator/curve-servers"
                  --tls-cert "$sec/integrator/tls.crt" --tls-key "$sec/integrator/tls.key"
                  --api-keys "$sec/integrator/api-keys")
  fi
  for ((i = 0; i < shards; i++)); do
    path=$(py "j['shards'][$i]['path']" <"$index/manifest.json")
    local zport=$((base_port + 10 + 2 * i)) mport=$((base_port + 11 + 2 * i)) node_secure=()
    [ "$secure" = 1 ] && node_secure=(--curve-key "$sec/node-$i/curve.key" --curve-clients "$sec/node-$i/curve-clients")
    nohup "$node_bin" --index "$index/$path" --listen "tcp://127.0.0.1:$zport" --metrics "127.0.0.1:$mport" \
      --threads "$threads" $share "${node_secure[@]}" $node_args >"$run_dir/node-$i.log" 2>&1 </dev/null &
    echo $! >"$run_dir/node-$i.pid"
    endpoints+="${endpoints:+,}tcp://127.0.0.1:$zport"
  done
  for ((i = 0; i < shards; i++)); do wait_ready "$run_dir/node-$i.log" "$run_dir/node-$i.pid" "node $i"; done
  nohup "$integ_bin" --shards "$endpoints" --index "$index" --http "127.0.0.1:$base_port" \
    --metrics "127.0.0.1:$((base_port + 1))" --cache-mb "$cache_mb" --timeout-ms "$timeout_ms" "${integ_secure[@]}" $integrator_args \
    >"$run_dir/integrator.log" 2>&1 </dev/null &
  echo $! >"$run_dir/integrator.pid"
  wait_ready "$run_dir/integrator.log" "$run_dir/integrator.pid" "integrator"
  cat >"$run_dir/cluster.env" <<ENV
INDEX=$index
SHARDS=$shards
HTTP_PORT=$base_port
METRICS_PORT=$((base_port + 1))
ENDPOINTS=$endpoints
SECURE=$secure
ENV
  for i in $(seq 1 300); do
    [ "$(health_status "$base_port")" = green ] && break
    sleep 0.1
  done
  [ "$(health_status "$base_port")" = green ] || { status; die "cluster not green after 30 s"; }
  if [ "$secure" = 1 ]; then
    echo "cluster.sh: $shards shard(s) + integrator up, secure: https://localhost:$base_port/ (run dir $run_dir)"
    echo "  curl --cacert $sec/ca.pem -H \"Authorization: ApiKey \$(tr -d '\\n' <$run_dir/api-key | base64 -w0)\" 'https://localhost:$base_port/search?q=...'"
  else
    echo "cluster.sh: $shards shard(s) + integrator up: http://127.0.0.1:$base_port/ (run dir $run_dir)"
    echo "cluster.sh: plain mode, loopback only; --secure turns on HTTPS, API keys and CURVE (docs/RELIABILITY.md, Security)"
  fi
}

stop() {
  local any=0 f name pid i
  # The integrator first (no new work reaches the nodes), then the nodes.
  for f in "$run_dir/integrator.pid" "$run_dir"/node-*.pid; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .pid)
    if alive "$f"; then
      pid=$(cat "$f")
      any=1
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid"
      for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "cluster.sh: $name ($pid) still running after 15 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      else
        echo "cluster.sh: $name ($pid) stopped"
      fi
    fi
    rm -f "$f"
  done
  [ $any -eq 1 ] || echo "cluster.sh: nothing running in $run_dir"
}

status() {
  local f name any=0
  for f in "$run_dir/integrator.pid" "$run_dir"/node-*.pid; do
    [ -e "$f" ] || continue
    any=1
    name=$(basename "$f" .pid)
    if alive "$f"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: NOT running (stale pid $(cat "$f"))"; fi
  done
  [ $any -eq 1 ] || { echo "cluster.sh: no cluster in $run_dir"; return 3; }
  if [ -f "$run_dir/cluster.env" ]; then
    local port
    port=$(sed -n 's/^HTTP_PORT=//p' "$run_dir/cluster.env")
    local h
    h=$(health "$port")
    if [ -n "$h" ]; then
      echo "$h" | py '"health: " + j["status"] + "\n" + "\n".join("  shard %s %s %s (last seen %s ms)" % (s["shard"], s["endpoint"], s["state"], s["last_seen_ms"]) for s in j["shards"])'
    else echo "health: integrator not answering on http://127.0.0.1:$port/health"; fi
  fi
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: scripts/cluster.sh start|stop|status [--index DIR] [--base-port P] [--build DIR] [--run-dir R] [--secure]" >&2
     exit 2 ;;
esac
