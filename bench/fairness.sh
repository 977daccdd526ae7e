#!/usr/bin/env bash
# The tenant-fairness benchmark: two tenants on one simulated fleet
# (bench/fairness/catalog: three workers), each with its own API key.
# "steady" runs STEADY_CLIENTS clients (4); "flood" runs FLOOD_CLIENTS,
# ten times that, enough to fill the fleet. Prompts of 2,000-2,200 tokens
# and 512 output tokens (WORKLOAD, LOADTEST_ARGS change them). Three runs,
# each on a fresh `switchyard dev`: steady alone, steady beside the flood
# with the gateway's flow control on (QUEUE_THRESHOLD, default 2; the
# reserve, QUEUE_RESERVE, default 0.1) and the same with it off. Writes
# bench/fairness/fairness.md and prints it.
#
# The fleet runs TIME_SCALE (10) times faster than model time, so every
# interval the services keep in wall time is scaled to match: the
# router scrapes every 1 s of model time (its production default) and the
# gateway's queue retries every 20 ms of model time (its default).
# Usage: bench/fairness.sh [DURATION (model time, default 300s)]; about
# 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-300s}
scale=${TIME_SCALE:-10}
threshold=${QUEUE_THRESHOLD:-2}
reserve=${QUEUE_RESERVE:-0.1}
scaled() { awk -v ms="$1" -v s="$scale" 'BEGIN { printf "%gms", ms / s }'; }
scrape=${SCRAPE_INTERVAL:-$(scaled 1000)}
retry=${QUEUE_RETRY_INTERVAL:-$(scaled 20)}
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
    --time-scale "$scale" --queue-threshold "$thr" --queue-reserve "$reserve" --queue-retry-interval "$retry" \
    --scrape-interval "$scrape" ${FLOW_ARGS:-} --sim-port 0 --log-level warn \
    --gateway-addr 127.0.0.1:0 --gateway-metrics-addr 127.0.0.1:0 --router-grpc-addr 127.0.0.1:0 \
    --router-http-addr 127.0.0.1:0 --policyd-grpc-addr 127.0.0.1:0 --policyd-http-addr 127.0.0.1:0 \
    --kvtracker-http-addr 127.0.0.1:0 --meter-http-addr 127.0.0.1:0 --redis-url none >"$work/dev-$name.log" 2>&1 &
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
    --label "$name" --out "$work/$name.json" --records "${RECORDS_DIR:-/dev/null}${RECORDS_DIR:+/$name.jsonl}" --html - --progress=false
  kill "$dev"; wait "$dev" 2>/dev/null || true
}

run alone "$threshold" 0
run flow-control "$threshold" "$flood_clients"
run no-flow-control 0 "$flood_clients"
go run ./bench/fairness/report "$work/alone.json" "$work/flow-control.json" "$work/no-flow-control.json" \
  >"$out/fairness.md"
cat "$out/fairness.md"
