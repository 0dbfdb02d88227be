#!/usr/bin/env bash
# Where a step's cost goes (issue 51 item 1): trains the same build under several variants,
# alternating them run by run so the machine's drift falls on every variant alike, and prints per
# variant the training examples/s, the CPU seconds each class of process used (coordinator,
# shards, workers, evaluator: the kernel's accounting at reaping, `syncopate local`'s "cpu:"
# line), the CPU microseconds per training example, and the context switches per 64-example
# step. A variant is NAME=FLAGS: FLAGS go to `syncopate local` (e.g. `tiny=--job=FILE`,
# `wire=--shared_memory=false`; a --job there replaces --job below); the job's seed is the run's
# number.
#
#   bench/step_cost.sh [--runs=K] [--job=FILE] [--bin=BIN_DIR] NAME=FLAGS [NAME=FLAGS ...]
#     --runs  runs per variant (default 3); --job the default job file (default: the default job)
#     --bin   the build's bin/ (default build/bin)
# Per-run lines go to bench-results/step_cost/runs.tsv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=3
JOB="$ROOT/examples/fashion_mnist_mlp.textproto"
BIN="$ROOT/build/bin"
NAMES=()
FLAGS=()
for arg in "$@"; do
  case "$arg" in
    --runs=*) RUNS="${arg#--runs=}" ;;
    --job=*) JOB="${arg#--job=}" ;;
    --bin=*) BIN="$(cd "${arg#--bin=}" && pwd)" ;;
    -*) echo "step_cost: unknown flag $arg" >&2; exit 2 ;;
    *=*) NAMES+=("${arg%%=*}"); FLAGS+=("${arg#*=}") ;;
    *) echo "step_cost: a variant is NAME=FLAGS, got '$arg'" >&2; exit 2 ;;
  esac
done
[[ ${#NAMES[@]} -ge 1 ]] || { echo "usage: bench/step_cost.sh [--runs=K] [--job=FILE] [--bin=DIR] NAME=FLAGS ..." >&2; exit 2; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "step_cost: --runs must be a positive integer" >&2; exit 2; }
[[ -f "$JOB" ]] || { echo "step_cost: no job file $JOB" >&2; exit 2; }
[[ -x "$BIN/syncopate" ]] || { echo "step_cost: no $BIN/syncopate (./dev build first)" >&2; exit 2; }

OUT="$ROOT/bench-results/step_cost"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'variant\trun\texamples_per_second\taccuracy\tcoordinator_s\tshard_s\tworker_s\tevaluator_s\tus_per_example\tvoluntary\tinvoluntary\texamples\n' >"$TSV"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" >&2

# class_seconds LINE CLASS: the CPU seconds the "cpu:" line gives CLASS (0 if absent).
class_seconds() { sed -n "s/.*[:,] $2 \([0-9.]*\) s.*/\1/p" <<<"$1" | head -n 1 | grep . || echo 0; }

for ((run = 1; run <= RUNS; ++run)); do
  for v in "${!NAMES[@]}"; do
    # A variant's own --job=FILE replaces the default job; either way the seed is the run's.
    job="$JOB"
    flags=()
    for word in ${FLAGS[$v]}; do
      if [[ $word == --job=* ]]; then job="${word#--job=}"; else flags+=("$word"); fi
    done
    [[ -f "$job" ]] || { echo "step_cost: no job file $job" >&2; exit 2; }
    sed "s/^seed:.*/seed: $run/" "$job" >"$TMP/job.textproto"
    log="$(cd "$TMP" && timeout 900 "$BIN/syncopate" local --bin_dir="$BIN" --job="$TMP/job.textproto" \
      "${flags[@]}" 2>&1)" || true
    done_line="$(grep '^done:' <<<"$log" || true)"
    cpu="$(grep '^cpu:' <<<"$log" || true)"
    eps="$(sed -n 's/.* (\([0-9]*\) examples\/s training[,)].*/\1/p' <<<"$done_line")"
    acc="$(sed -n 's/^done: final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$done_line")"
    examples="$(sed -n 's/.*, \([0-9]*\) examples in .*/\1/p' <<<"$done_line")"
    [[ -n "$eps" && -n "$acc" && -n "$cpu" ]] || { echo "step_cost: run $run of ${NAMES[$v]} did not finish: $(tail -n 3 <<<"$log")" >&2; exit 1; }
    us="$(sed -n 's/.* \([0-9.]*\) us\/example.*/\1/p' <<<"$cpu")"
    vol="$(sed -n 's/.*context switches \([0-9]*\) voluntary.*/\1/p' <<<"$cpu")"
    invol="$(sed -n 's/.* \([0-9]*\) involuntary.*/\1/p' <<<"$cpu")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${NAMES[$v]}" "$run" "$eps" "$acc" \
      "$(class_seconds "$cpu" coordinator)" "$(class_seconds "$cpu" shard)" \
      "$(class_seconds "$cpu" worker)" "$(class_seconds "$cpu" evaluator)" "$us" "$vol" "$invol" \
      "$examples" >>"$TSV"
    echo "run $run ${NAMES[$v]}: $eps examples/s, $acc%; $cpu" >&2
  done
done

# Means per variant; per 64-example step: CPU ms and context switches (examples / 64 steps).
awk -F'\t' -v names="${NAMES[*]}" '
  NR > 1 { n[$1]++; eps[$1] += $3; acc[$1] += $4; co[$1] += $5; sh[$1] += $6; wo[$1] += $7;
           ev[$1] += $8; us[$1] += $9; vol[$1] += $10; inv[$1] += $11; ex[$1] += $12;
           lo[$1] = (n[$1] == 1 || $3 < lo[$1]) ? $3 : lo[$1]; hi[$1] = ($3 > hi[$1]) ? $3 : hi[$1]; }
  END {
    split(names, order, " ");
    printf "| variant | examples/s, mean (range) | / first | accuracy %% | CPU-s coordinator / shards / workers / evaluator | CPU ms per 64-example step | context switches per step (vol + invol) |\n";
    printf "|---|---|---|---|---|---|---|\n";
    for (i = 1; i in order; ++i) {
      v = order[i];
      if (!(v in n)) continue;
      steps = ex[v] / 64;
      printf "| %s | %.0f (%.0f-%.0f) | %.2f | %.2f | %.1f / %.1f / %.1f / %.1f | %.2f | %.1f + %.1f |\n",
        v, eps[v] / n[v], lo[v], hi[v], (eps[v] / n[v]) / (eps[order[1]] / n[order[1]]), acc[v] / n[v],
        co[v] / n[v], sh[v] / n[v], wo[v] / n[v], ev[v] / n[v], 64 * us[v] / n[v] / 1000,
        vol[v] / steps, inv[v] / steps;
    }
  }' "$TSV"
