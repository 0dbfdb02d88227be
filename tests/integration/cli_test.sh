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
expect_usage_error "--teacher must be pairs, segments, longtail or heavytail" datagen ctr --rows=10 --out="$tmp/x" --teacher=zipf

# --help on every binary prints its usage and exits 0, as every command a user knows does.
for b in syncopate syncopate-coordinator syncopate-shard syncopate-worker; do
  "$(dirname "$bin")/$b" --help >"$tmp/help.out" 2>&1 || fail "$b --help exited non-zero"
  grep -q "^$b" "$tmp/help.out" || fail "$b --help printed no usage: $(head -n 3 "$tmp/help.out")"
done

# A service binary's bad flag: one line, exit non-zero (the evaluator's --nice, as an example).
set +e
"$(dirname "$bin")/syncopate-worker" --nice=20 >"$tmp/out" 2>"$tmp/err"
code=$?
set -e
[[ $code -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q -- "--nice must be in \[0, 19\]" "$tmp/err" ||
  fail "syncopate-worker --nice=20 exited $code with '$(cat "$tmp/err")'"

# `syncopate datagen ctr`: a gzip file of Criteo lines (40 tab-separated fields) and the report.
"$bin" datagen ctr --rows 2000 --out "$tmp/ctr.gz" --seed 3 >"$tmp/datagen.out" ||
  fail "datagen ctr exited non-zero: $(cat "$tmp/datagen.out")"
grep -q "^rows=2000 positive_rate=0\.[0-9]* bayes_auc=0\.[0-9]* bayes_logloss=" "$tmp/datagen.out" ||
  fail "datagen printed '$(cat "$tmp/datagen.out")'"
[[ $(gzip -dc "$tmp/ctr.gz" | wc -l) -eq 2000 ]] || fail "datagen wrote $(gzip -dc "$tmp/ctr.gz" | wc -l) lines"
gzip -dc "$tmp/ctr.gz" | awk -F'\t' 'NF != 40 || ($1 != 0 && $1 != 1) { bad = 1 } END { exit bad }' ||
  fail "datagen wrote a line without 40 fields and a 0/1 label"
# The second teacher writes the same format and names itself.
"$bin" datagen ctr --rows 500 --out "$tmp/segments.tsv" --teacher=segments >"$tmp/datagen.out" ||
  fail "datagen ctr --teacher=segments exited non-zero: $(cat "$tmp/datagen.out")"
grep -q "teacher=segments" "$tmp/datagen.out" || fail "datagen printed '$(cat "$tmp/datagen.out")'"
awk -F'\t' 'NF != 40 { bad = 1 } END { exit bad }' "$tmp/segments.tsv" ||
  fail "datagen --teacher=segments wrote a line without 40 fields"

# `syncopate sim` of the wide & deep example on that file: AUC is the job's quality and target.
sed -e "s|data/ctr/train.tsv.gz|$tmp/ctr.gz|" -e "s|data/ctr/test.tsv.gz|$tmp/ctr.gz|" \
  "$root/examples/ctr_wdl.textproto" >"$tmp/ctr_wdl.textproto"
"$bin" sim --job="$tmp/ctr_wdl.textproto" --sim="$root/examples/sim/scale.textproto" --epochs=1 \
  --policy=sync --target_auc=0.5 >"$tmp/sim.out" 2>&1 ||
  { cat "$tmp/sim.out"; fail "syncopate sim of a CTR job exited non-zero"; }
grep -q "^eval .* auc 0\.[0-9]*  accuracy" "$tmp/sim.out" || fail "sim printed no AUC: $(cat "$tmp/sim.out")"
grep -q "final auc 0\.[0-9]*, time to 0\.5000: " "$tmp/sim.out" ||
  fail "sim's summary lacks the final AUC: $(tail -n 1 "$tmp/sim.out")"

# A small job end to end: exit 0, both reports, an accuracy well above chance.
"$bin" local --job="$root/examples/fashion_mnist_mlp.textproto" --workers=2 --shards=1 \
  --epochs=1 --train_limit=4000 --test_limit=1000 --run_dir="$tmp/run" >"$tmp/local.out" 2>&1 ||
  { cat "$tmp/local.out"; fail "syncopate local exited non-zero"; }
grep -q "final test accuracy" "$tmp/local.out" || fail "no final accuracy line"
[[ -f "$tmp/run/report.md" ]] || fail "no report.md"
# The same run directory again: refused in one line (it would report the finished job at once).
expect_usage_error "holds another run" local --job="$root/examples/fashion_mnist_mlp.textproto" \
  --workers=2 --shards=1 --epochs=1 --train_limit=4000 --run_dir="$tmp/run"
# report.html: every chart, the curves drawn (report_html_render_test checks the pixels).
[[ -f "$tmp/run/report.html" ]] || fail "no report.html"
[[ $(grep -c '<figure id=' "$tmp/run/report.html") -eq 8 ]] || fail "report.html lacks charts"
grep -q '<polyline' "$tmp/run/report.html" || fail "report.html has no curves"
python3 - "$tmp/run/report.json" <<'PY' || fail "report.json check failed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["state"] == "JOB_DONE", r["state"]
assert r["final_accuracy"] > 0.6, r["final_accuracy"]
# report.json is syncopate.v1.RunReport in protobuf's JSON mapping: int64 values are strings.
assert int(r["examples"]) >= 4000, r["examples"]
assert len(r["workers"]) == 2 and all(int(w["examples"]) > 0 for w in r["workers"]), r["workers"]
for key in ("wall_seconds", "examples_per_second"):
    assert r[key] > 0, key
# What report.html plots: the sampled timeline and the shards' staleness histograms.
# At least the finished job's sample; a running one too unless the job ended between two polls
# of the launcher (this 4,000-example job trains in ~0.4 s on shared memory, 2026-12-07).
assert len(r["timeline"]) >= (2 if r["training_seconds"] >= 2 else 1), r["timeline"]
assert r["timeline"][-1]["examples"] == r["examples"], (r["timeline"][-1], r["examples"])
assert sum(int(b["count"]) for s in r["shards"] for b in s["staleness"]) > 0, r["shards"]
assert all(int(s["gradients"]["applied"]) > 0 for s in r["shards"]), r["shards"]
assert r["quality_metric"] == "accuracy", r["quality_metric"]
# Bytes per example (issue 32): the MLP moves its dense parameters each way once a step, so every
# worker's dense bytes dominate, sent about equals received (a pull per push, plus the first),
# nothing is sparse, and what the shards received is what the workers sent, up to the pushes made
# after the workers' last counted step report (reports after the stop are not counted; under the
# full suite's load the stop took up to 7 steps a worker to arrive, 2026-11-28). Every process is
# on this host, so the dense payloads take shared memory (ADR 0022): none on the wire, only the
# control plane's headers.
def payload(wire, direction):
    return int(wire.get(direction + "_dense", 0)) + int(wire.get(direction + "_shared", 0))
for w in r["workers"]:
    wire = {k: int(v) for k, v in w["wire"].items()}
    assert wire.get("sent_dense", 0) == 0 and wire.get("received_dense", 0) == 0, wire
    # Shared bytes: the gradients (float32) plus the requests posted to the doorbells (serialized
    # WorkerToShard messages of any length), so no multiple of 4 to check.
    assert wire["sent_shared"] > 0, wire
    assert 0.9 < wire["received_shared"] / wire["sent_shared"] < 1.5, wire
    assert wire.get("sent_sparse", 0) == 0 and wire.get("received_sparse", 0) == 0, wire
    assert wire["sent_header"] + wire["received_header"] < 0.01 * wire["sent_shared"], wire
    assert w["wire_bytes_per_example"] > 0, w
sent = sum(payload(w["wire"], "sent") for w in r["workers"])
received = sum(payload(s["wire"], "received") for s in r["shards"])
push = max(payload(w["wire"], "sent") / int(w["steps"]) for w in r["workers"])
assert abs(received - sent) <= 10 * len(r["workers"]) * push, (received, sent, push)
assert r["wire_bytes_per_example"] > 0, r["wire_bytes_per_example"]
PY
# Secure by default: `syncopate local` generates a join token per run and hands it to its children
# in a file. No process's argv or environment holds it; strangers without it are refused with
# UNAUTHENTICATED (a worker and a shard, each exiting 3, a permanent refusal, with one line) and
# counted.
bindir="$(dirname "$bin")"
"$bin" local --job="$root/examples/fashion_mnist_mlp.textproto" --workers=2 --shards=1 \
  --epochs=100000 --train_limit=2000 --test_limit=500 --run_dir="$tmp/secure" >"$tmp/secure.out" 2>&1 &
local_pid=$!
trap 'kill "$local_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 300); do grep -q '^join token in' "$tmp/secure.out" && break; sleep 0.1; done
grep -q "^join token in $tmp/secure/join_token " "$tmp/secure.out" ||
  fail "no join token line: $(cat "$tmp/secure.out")"
token="$(cat "$tmp/secure/join_token")"
[[ $token =~ ^[0-9a-f]{64}$ ]] || fail "generated token '$token' is not 64 hex characters"
[[ $(stat -c %a "$tmp/secure/join_token") == 600 ]] || fail "join_token file is not mode 0600"
address="$(sed -n 's/^coordinator at \([^;]*\);.*/\1/p' "$tmp/secure.out")"
coordinator_metrics="$(sed -n 's/.* coordinator=\(http[^ ]*\).*/\1/p' "$tmp/secure.out")"
children="$(ps -o pid= --ppid "$local_pid" | tr -d ' ')"
[[ $(wc -w <<<"$children") -ge 5 ]] || fail "expected 5 children of syncopate local, saw: $children"
# Every process on the machine, not just ours: the token appears in no command line...
for cmdline in /proc/[0-9]*/cmdline; do
  if tr '\0' ' ' <"$cmdline" 2>/dev/null | grep -qF "$token"; then
    fail "the join token is on the command line of $(tr '\0' ' ' <"$cmdline")"
  fi
done
# ...and in no environment of syncopate local or its children; but they do use the file.
for pid in $local_pid $children; do
  tr '\0' '\n' <"/proc/$pid/environ" | grep -qF "$token" && fail "the join token is in the environment of $pid"
  [[ $pid == "$local_pid" ]] && continue
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--join_token_file=$tmp/secure/join_token" ||
    fail "child $pid was not given the token file: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
done
expect_refused() {  # expect_refused WHAT EXPECTED COMMAND...: exit 3, one line naming the refusal
  local what="$1" expected="$2"; shift 2
  set +e
  timeout 30 "$@" >"$tmp/rogue.out" 2>"$tmp/rogue.err"
  local code=$?
  set -e
  [[ $code -eq 3 ]] || fail "$what: exit code $code, want 3: $(cat "$tmp/rogue.err")"
  grep -v '^[IW][0-9]\{4\} ' "$tmp/rogue.err" | grep -q "$expected" ||
    fail "$what: stderr lacks '$expected': $(cat "$tmp/rogue.err")"
}
expect_refused "worker without a token" "missing join token" \
  "$bindir/syncopate-worker" --coordinator="$address" --name=intruder --metrics_listen=127.0.0.1:0
printf 'guess\n' >"$tmp/wrong_token"
expect_refused "worker with a wrong token" "wrong join token" \
  "$bindir/syncopate-worker" --coordinator="$address" --name=intruder2 --metrics_listen=127.0.0.1:0 \
  --join_token_file="$tmp/wrong_token"
expect_refused "shard with a wrong token" "wrong join token" \
  "$bindir/syncopate-shard" --coordinator="$address" --shard_id=0 --listen=127.0.0.1:0 \
  --metrics_listen=127.0.0.1:0 --checkpoint_dir="$tmp/rogue-ckpt" --join_token_file="$tmp/wrong_token"
metrics="$(curl -sf "$coordinator_metrics")" || fail "cannot scrape $coordinator_metrics"
grep -q '^syncopate_coordinator_rejections_total{reason="unauthenticated",session="worker"} 2$' <<<"$metrics" ||
  fail "worker refusals not counted: $(grep rejections_total <<<"$metrics")"
grep -q '^syncopate_coordinator_rejections_total{reason="unauthenticated",session="shard"} 1$' <<<"$metrics" ||
  fail "shard refusal not counted: $(grep rejections_total <<<"$metrics")"
kill -INT "$local_pid"
set +e
wait "$local_pid"
code=$?
set -e
[[ $code -eq 130 ]] || fail "syncopate local exited $code after SIGINT, want 130: $(tail -n 5 "$tmp/secure.out")"
# The members were never refused: they trained with the generated token.
grep -q 'refused' "$tmp/secure/logs/shard-0.log" && fail "shard-0 refused a member: $(grep refused "$tmp/secure/logs/shard-0.log")"
grep -q 'examples' "$tmp/secure/report.md" || fail "no report after SIGINT"
# Opting out is explicit, and says so.
"$bin" local --job="$root/examples/fashion_mnist_mlp.textproto" --workers=1 --shards=1 --epochs=1 \
  --train_limit=1000 --test_limit=200 --evaluator=false --insecure_no_join_token \
  --run_dir="$tmp/insecure" >"$tmp/insecure.out" 2>&1 || fail "--insecure_no_join_token run failed: $(cat "$tmp/insecure.out")"
grep -q '^no join token: anyone' "$tmp/insecure.out" || fail "the opt-out does not say so"
[[ ! -e $tmp/insecure/join_token ]] || fail "--insecure_no_join_token wrote a token"

# `syncopate health` (the container HEALTHCHECK): 0 and SERVING for a live server, 1 when unreachable.
"$bindir/syncopate-coordinator" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --ready_file="$tmp/coordinator.ready" >"$tmp/coordinator.log" 2>&1 &
coordinator_pid=$!
trap 'kill "$coordinator_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [[ -f "$tmp/coordinator.ready" ]] && break; sleep 0.1; done
port="$(sed -n 's/^grpc_port=//p' "$tmp/coordinator.ready")"
[[ -n $port ]] || fail "coordinator did not write its ready file: $(cat "$tmp/coordinator.log")"
"$bin" health --address="127.0.0.1:$port" >"$tmp/health.out" || fail "health of a live coordinator"
grep -q "SERVING" "$tmp/health.out" || fail "health printed '$(cat "$tmp/health.out")'"
# A shard stopped by SIGTERM before its job ended exits 143, not 0: a shard's Kubernetes Job
# counts a pod that exits 0 as its completion (runtime::kExitInterrupted, ADR 0006).
"$bindir/syncopate-shard" --coordinator="127.0.0.1:$port" --shard_id=0 --listen=127.0.0.1:0 \
  --metrics_listen=127.0.0.1:0 --checkpoint_dir="$tmp/sigterm-ckpt" \
  --ready_file="$tmp/shard.ready" >"$tmp/shard.log" 2>&1 &
shard_pid=$!
trap 'kill "$coordinator_pid" "$shard_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do grep -q 'registered at' "$tmp/coordinator.log" && break; sleep 0.1; done
grep -q 'registered at' "$tmp/coordinator.log" || fail "the shard never registered: $(tail -n 5 "$tmp/shard.log")"
# expect_interrupted WHAT PID LOG: SIGTERM to PID, which must exit 143 within 30 s and say why in LOG.
expect_interrupted() {
  local what="$1" pid="$2" log="$3" code
  kill -TERM "$pid"
  set +e
  timeout 30 tail --pid="$pid" -f /dev/null
  wait "$pid"
  code=$?
  set -e
  [[ $code -eq 143 ]] || fail "a $what SIGTERMed mid-job exited $code, want 143: $(tail -n 3 "$log")"
  grep -q 'stopped before the job ended' "$log" || fail "the $what did not say why: $(tail -n 3 "$log")"
}
expect_interrupted shard "$shard_pid" "$tmp/shard.log"
# So does a worker, here while it waits for the job to start: a worker Job (a work queue) starts
# no new pod after its first success, so an evicted worker exiting 0 would go unreplaced.
"$bindir/syncopate-worker" --coordinator="127.0.0.1:$port" --name=sigterm-worker \
  --metrics_listen=127.0.0.1:0 >"$tmp/worker.log" 2>&1 &
worker_pid=$!
trap 'kill "$coordinator_pid" "$worker_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do grep -q 'sigterm-worker' "$tmp/coordinator.log" && break; sleep 0.1; done
grep -q 'sigterm-worker' "$tmp/coordinator.log" || fail "the worker never said hello: $(tail -n 5 "$tmp/worker.log")"
expect_interrupted worker "$worker_pid" "$tmp/worker.log"
kill "$coordinator_pid"
wait "$coordinator_pid" || true
set +e
"$bin" health --address="127.0.0.1:$port" --health_timeout_seconds=1 >/dev/null 2>&1
code=$?
set -e
[[ $code -eq 1 ]] || fail "health of a stopped server exited $code, want 1"

echo "cli_local_test: 1 passed, 0 failed"
