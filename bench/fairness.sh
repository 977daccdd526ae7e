#!/usr/bin/env bash
# The tenant-fairness benchmark: two tenants on one simulated fleet
# (bench/fairness/catalog: three workers), each with its own API key.
# "steady" runs STEADY_CLIENTS clients (4); "flood" runs FLOOD_CLIENTS,
# ten times that, enough to fill the fleet. Prompts of 2,000-2,200 tokens
# and 512 output tokens (WORKLOAD, LOADTEST_ARGS change them). Three runs,
# each on a fresh `switchyard dev`: steady alone, steady beside the flood
# with the gateway's flow control on (QUEUE_THRESHOLD, default 2) and the
# same with it off. Writes bench/fairness/fairness.md and prints it.
# Usage: bench/fairness.sh [DURATION (model time, default 300s)]; about
# 7 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-300s}
scale=${TIME_SCALE:-10}
threshold=${QUEUE_THRESHOLD:-2}
workload=${WORKLOAD:-control}
steady_clients=${STEADY_CLIENTS:-4}
flood_clients=${FLOOD_CLIENTS:-$((10 * steady_clients))}
out=bench/fairness
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s build

run() { # name threshold flood-clients
  local name=$1 thr=$2 flood=$3
  bin/switchyard dev --policies "$out/catalog" --auth --tenants steady,flood --keys-file "$work/keys.env" \
    --time-scale "$scale" --queue-threshold "$thr" --scrape-interval "${SCRAPE_INTERVAL:-250ms}" --sim-port 0 --log-level warn \
    --gateway-addr 127.0.0.1:0 --gateway-metrics-addr 127.0.0.1:0 --router-grpc-addr 127.0.0.1:0 \
    --router-http-addr 127.0.0.1:0 --policyd-grpc-addr 127.0.0.1:0 --policyd-http-addr 127.0.0.1:0 \
    --kvtracker-http-addr 127.0.0.1:0 >"$work/dev-$name.log" 2>&1 &
  local dev=$!
  local url=""
  for _ in $(seq 1 200); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*/v1' "$work/dev-$name.log" | head -1 || true)
    [ -n "$url" ] && [ -s "$work/keys.env" ] && break
    sleep 0.2
  done
  if [ -z "$url" ]; then cat "$work/dev-$name.log"; kill "$dev"; exit 1; fi
  local steady flood_key
  steady=$(sed -n 's/^steady=//p' "$work/keys.env")
  flood_key=$(sed -n 's/^flood=//p' "$work/keys.env")
  local tenants=(--tenant "steady:key-env=STEADY_KEY:concurrency=$steady_clients")
  [ "$flood" -gt 0 ] && tenants+=(--tenant "flood:key-env=FLOOD_KEY:concurrency=$flood")
  STEADY_KEY=$steady FLOOD_KEY=$flood_key bin/loadtest run --url "$url" --time-scale "$scale" \
    --requests 0 --duration "$duration" --workload "$workload" ${LOADTEST_ARGS:---prompt-tokens 2000-2200 --output-tokens 512} "${tenants[@]}" \
    --label "$name" --out "$work/$name.json" --records - --html - --progress=false
  kill "$dev"; wait "$dev" 2>/dev/null || true
}

run alone "$threshold" 0
run flow-control "$threshold" "$flood_clients"
run no-flow-control 0 "$flood_clients"
go run ./bench/fairness/report "$work/alone.json" "$work/flow-control.json" "$work/no-flow-control.json" \
  >"$out/fairness.md"
cat "$out/fairness.md"
