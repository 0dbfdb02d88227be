#!/usr/bin/env bash
# Scenario: a shard started with a --shard_id outside the job (shard 5 of a 2-shard job) is
# refused by the coordinator with INVALID_ARGUMENT, which retrying cannot fix: it exits 3 (a
# permanent refusal, runtime::kExitRefused) within seconds with one line that says why, instead of
# reconnecting forever (rpc::IsRetryable).
# Usage: shard_refusal_test.sh BIN_DIR
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
coordinator_pid=""
cleanup() {
  [[ -n $coordinator_pid ]] && kill "$coordinator_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin/syncopate-coordinator" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --ready_file="$tmp/coordinator.ready" >"$tmp/coordinator.log" 2>&1 &
coordinator_pid=$!
for _ in $(seq 1 100); do [[ -f "$tmp/coordinator.ready" ]] && break; sleep 0.1; done
port="$(sed -n 's/^grpc_port=//p' "$tmp/coordinator.ready")"
[[ -n $port ]] || fail "coordinator did not start: $(cat "$tmp/coordinator.log")"

set +e
timeout 30 "$bin/syncopate-shard" --shard_id=5 --coordinator="127.0.0.1:$port" \
  --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 >"$tmp/shard.out" 2>"$tmp/shard.err"
code=$?
set -e
[[ $code -ne 124 ]] || fail "the shard was still retrying after 30 s: $(tail -3 "$tmp/shard.err")"
[[ $code -eq 3 ]] || fail "the shard exited $code, want 3: $(tail -3 "$tmp/shard.err")"
# The last line is the reason, once; the log before it shows no reconnect attempt.
last="$(tail -n 1 "$tmp/shard.err")"
[[ $last == "syncopate-shard: the coordinator refused this shard: shard id 5 is outside [0, 2) for this job" ]] ||
  fail "last line: '$last'"
[[ $(grep -c "refused this shard" "$tmp/shard.err") -eq 1 ]] || fail "the reason appeared more than once"
echo "shard_refusal_test: 1 passed, 0 failed"
