#!/usr/bin/env bash
# Runs test/e2e/rolling-restart-keepalive.test.ts RUNS times in a row (default 10), each a fresh
# cluster (two kas replicas behind haproxy in TCP mode, 8 keep-alive API clients every 40 ms,
# every replica restarted with SIGTERM), and stops at the first run that loses a request.
# E2E_ROLLING_RESTARTS (default 1) sets the rolling restarts within each run.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
log="$(mktemp -d)"
for n in $(seq 1 "$runs"); do
  if npx vitest run test/e2e/rolling-restart-keepalive.test.ts >"$log/run-$n.txt" 2>&1; then
    echo "run $n/$runs: $(grep -o '[0-9]* rolling restarts\?: [0-9]* requests, [0-9]* failed' "$log/run-$n.txt")"
  else
    echo "run $n/$runs FAILED: $(grep -o '[0-9]* rolling restarts\?: [0-9]* requests, [0-9]* failed' "$log/run-$n.txt" || true); output in $log/run-$n.txt"
    exit 1
  fi
done
echo "$runs runs in a row, no request lost"
