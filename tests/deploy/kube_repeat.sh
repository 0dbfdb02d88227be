#!/usr/bin/env bash
# Repeats one Kubernetes scenario test until it fails or has passed RUNS times in a row, and
# reports the count: how a flaky scenario earns its place in CI (issue 57: the node-loss test
# runs in CI once it passes >= 10 times in a row under the machine's usual load).
#
#   tests/deploy/kube_repeat.sh TEST [--runs=10] [REPO_ROOT]     (./dev kube-repeat TEST ...)
#
# TEST is a scenario's name (kube_node_loss_test, kube_cluster_test, ...). Each run's output goes
# to bench-results/kube-repeat/TEST/run-K.log and its kept logs (the test's KEEP_LOGS_DIR) to
# run-K-logs/; a summary line per run to bench-results/kube-repeat/TEST/runs.tsv. Exit 0 when
# every run passed, 1 at the first failure (the run's tail printed), 77 when the test skips.
set -euo pipefail
TEST="${1:?usage: kube_repeat.sh TEST [--runs=N] [REPO_ROOT]}"
shift
RUNS=10
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for arg in "$@"; do
  case "$arg" in
    --runs=*) RUNS="${arg#--runs=}" ;;
    -*) echo "kube_repeat: unknown flag $arg" >&2; exit 2 ;;
    *) ROOT="$(cd "$arg" && pwd)" ;;
  esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "kube_repeat: --runs must be a positive integer" >&2; exit 2; }
SCRIPT="$ROOT/tests/deploy/$TEST.sh"
[[ $TEST =~ ^kube_[a-z_]+_test$ && -f $SCRIPT ]] ||
  { echo "kube_repeat: no scenario $TEST (tests/deploy/kube_*_test.sh)" >&2; exit 2; }
OUT="$ROOT/bench-results/kube-repeat/$TEST"
mkdir -p "$OUT"
printf 'run\tresult\tseconds\tload_before\n' >"$OUT/runs.tsv"
for ((run = 1; run <= RUNS; run++)); do
  load="$(cut -d' ' -f1 /proc/loadavg)"
  start=$SECONDS
  code=0
  SYNCOPATE_NODE_LOSS_TEST=1 KEEP_LOGS_DIR="$OUT/run-$run-logs" \
    timeout 1800 bash "$SCRIPT" "$ROOT" >"$OUT/run-$run.log" 2>&1 || code=$?
  seconds=$((SECONDS - start))
  if ((code == 77)); then
    tail -n 1 "$OUT/run-$run.log" >&2
    exit 77
  fi
  result=pass
  ((code == 0)) || result="fail($code)"
  printf '%d\t%s\t%d\t%s\n' "$run" "$result" "$seconds" "$load" >>"$OUT/runs.tsv"
  echo "$TEST run $run of $RUNS: $result in $seconds s (load $load before)"
  if ((code != 0)); then
    tail -n 25 "$OUT/run-$run.log" >&2
    echo "$TEST: $((run - 1)) of $RUNS passed in a row, then run $run failed (logs in $OUT)"
    exit 1
  fi
done
echo "$TEST: $RUNS of $RUNS passed in a row (logs in $OUT)"
