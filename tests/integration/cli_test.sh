#!/usr/bin/env bash
# Runs the CLI as a user does. Usage: cli_test.sh SYNCOPATE_BINARY REPO_ROOT
set -euo pipefail
bin="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# One line and a non-zero exit code for each kind of bad input at start.
expect_usage_error() {
  local expected="$1"; shift
  set +e
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local code=$?
  set -e
  [[ $code -ne 0 ]] || fail "'$*' exited 0"
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "'$*' printed more than one line: $(cat "$tmp/err")"
  grep -q -- "$expected" "$tmp/err" || fail "'$*': '$(cat "$tmp/err")' lacks '$expected'"
}
expect_usage_error "unknown mode 'bogus'" local --mode=bogus
expect_usage_error "global_batch" local --global_batch=2 --workers=4
expect_usage_error "--slowdowns" local --slowdowns=1,0.5
expect_usage_error "Unknown command line flag" local --no_such_flag
printf 'job_id: "x"\nglobal_batch: "many"\n' >"$tmp/bad.textproto"
expect_usage_error "line 2" local --job="$tmp/bad.textproto"
expect_usage_error "unknown command" launch
expect_usage_error "--rows" datagen ctr --out="$tmp/x.gz"
expect_usage_error "--out" datagen ctr --rows=10
expect_usage_error "unknown kind 'images'" datagen images --rows=10 --out="$tmp/x"
expect_usage_error "no-such-dir" datagen ctr --rows=10 --out="$tmp/no-such-dir/x.gz"

# `syncopate datagen ctr`: a gzip file of Criteo lines (40 tab-separated fields) and the report.
"$bin" datagen ctr --rows 2000 --out "$tmp/ctr.gz" --seed 3 >"$tmp/datagen.out" ||
  fail "datagen ctr exited non-zero: $(cat "$tmp/datagen.out")"
grep -q "^rows=2000 positive_rate=0\.[0-9]* bayes_auc=0\.[0-9]* bayes_logloss=" "$tmp/datagen.out" ||
  fail "datagen printed '$(cat "$tmp/datagen.out")'"
[[ $(gzip -dc "$tmp/ctr.gz" | wc -l) -eq 2000 ]] || fail "datagen wrote $(gzip -dc "$tmp/ctr.gz" | wc -l) lines"
gzip -dc "$tmp/ctr.gz" | awk -F'\t' 'NF != 40 || ($1 != 0 && $1 != 1) { bad = 1 } END { exit bad }' ||
  fail "datagen wrote a line without 40 fields and a 0/1 label"

# A small job end to end: exit 0, both reports, an accuracy well above chance.
"$bin" local --job="$root/examples/fashion_mnist_mlp.textproto" --workers=2 --shards=1 \
  --epochs=1 --train_limit=4000 --test_limit=1000 --run_dir="$tmp/run" >"$tmp/local.out" 2>&1 ||
  { cat "$tmp/local.out"; fail "syncopate local exited non-zero"; }
grep -q "final test accuracy" "$tmp/local.out" || fail "no final accuracy line"
[[ -f "$tmp/run/report.md" ]] || fail "no report.md"
python3 - "$tmp/run/report.json" <<'PY' || fail "report.json check failed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["state"] == "JOB_DONE", r["state"]
assert r["final_accuracy"] > 0.6, r["final_accuracy"]
assert r["examples"] >= 4000, r["examples"]
assert len(r["workers"]) == 2 and all(w["examples"] > 0 for w in r["workers"]), r["workers"]
for key in ("wall_seconds", "examples_per_second"):
    assert r[key] > 0, key
PY
# `syncopate health` (the container HEALTHCHECK): 0 and SERVING for a live server, 1 when unreachable.
bindir="$(dirname "$bin")"
"$bindir/syncopate-coordinator" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --ready_file="$tmp/coordinator.ready" >"$tmp/coordinator.log" 2>&1 &
coordinator_pid=$!
trap 'kill "$coordinator_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [[ -f "$tmp/coordinator.ready" ]] && break; sleep 0.1; done
port="$(sed -n 's/^grpc_port=//p' "$tmp/coordinator.ready")"
[[ -n $port ]] || fail "coordinator did not write its ready file: $(cat "$tmp/coordinator.log")"
"$bin" health --address="127.0.0.1:$port" >"$tmp/health.out" || fail "health of a live coordinator"
grep -q "SERVING" "$tmp/health.out" || fail "health printed '$(cat "$tmp/health.out")'"
kill "$coordinator_pid"
wait "$coordinator_pid" || true
set +e
"$bin" health --address="127.0.0.1:$port" --health_timeout_seconds=1 >/dev/null 2>&1
code=$?
set -e
[[ $code -eq 1 ]] || fail "health of a stopped server exited $code, want 1"

echo "cli_local_test: 1 passed, 0 failed"
