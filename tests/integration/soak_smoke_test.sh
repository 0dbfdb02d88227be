#!/usr/bin/env bash
# Scenario: the soak driver on a tiny cluster (3 workers, 2 shards) samples, kills and restarts
# a worker every 3 s, and on SIGTERM stops every child, prints its summary and exits 3: the
# machinery of `./dev soak` in ~15 s (the 10-minute run itself is never part of ./dev test).
# Usage: soak_smoke_test.sh BIN_DIR
set -euo pipefail
out="$(mktemp -d)"
fail() {
  echo "FAIL: $*" >&2
  tail -30 "$out/soak.out" >&2 || true
  exit 1
}
# The soak stops its own children on SIGTERM; the trap only covers this script failing early.
soak_pid=""
cleanup() {
  [[ -z $soak_pid ]] || kill "$soak_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

"$1/syncopate-soak" --duration=10m --warmup=2s --kill_every=3s --workers=3 --shards=2 \
  --stragglers=1 --out="$out/out" >"$out/soak.out" 2>&1 &
soak_pid=$!
# Wait (bounded) for two kills, i.e. a cluster that started, trained and took its faults.
for _ in $(seq 1 300); do
  [[ $(grep -c "killed and restarted" "$out/soak.out" || true) -ge 2 ]] && break
  kill -0 "$soak_pid" 2>/dev/null || fail "the soak ended on its own"
  sleep 0.1
done
[[ $(grep -c "killed and restarted" "$out/soak.out" || true) -ge 2 ]] || fail "no two kills in 30 s"
kill -TERM "$soak_pid"
set +e
for _ in $(seq 1 300); do kill -0 "$soak_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$soak_pid" 2>/dev/null && fail "the soak still ran 30 s after SIGTERM"
wait "$soak_pid"
code=$?
set -e
soak_pid=""
[[ $code -eq 3 ]] || fail "the soak exited $code after SIGTERM, want 3"
grep -q "soak: INTERRUPTED" "$out/soak.out" || fail "no interruption verdict"
grep -q "| shard-1 longest stall |" "$out/soak.out" || fail "no summary table"
[[ -s "$out/out/summary.md" && $(wc -l <"$out/out/timeline.csv") -ge 3 ]] ||
  fail "no summary.md or timeline.csv"
# Every child is gone: nothing runs with the soak's run directory on its command line.
if pgrep -f -- "$out/out/run" >/dev/null; then fail "children left: $(pgrep -af -- "$out/out/run")"; fi
echo "PASS: $(grep -c 'killed and restarted' "$out/soak.out") kills, exit 3 on SIGTERM, no children left"
