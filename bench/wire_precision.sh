#!/usr/bin/env bash
# The bfloat16 wire against float32 on one job, seed by seed in one run (issue 32 item 2, issue 43
# item 5; numbers in docs/measurements/wire-precision.md): the same job file with wire_precision
# WIRE_FLOAT32 and WIRE_BFLOAT16, alternated per seed, so both precisions of a seed share its
# initialisation, data order and the machine's load of the moment. Prints each one's final test
# accuracy and AUC, the test AUC of the version the validation set kept (kept_auc; the final AUC
# for a job without validation_path), training examples/s and wire bytes per example (mean and 95%
# interval over the seeds) and, against float32, the differences: Welch's interval, and the mean
# of the per-seed differences with its t interval (n - 1 df), the paired design the decision reads.
#
#   bench/wire_precision.sh [--seeds=5] [--first_seed=1] [--job=FILE] [BIN_DIR]
#                           (default: the default job, build/bin)
# Per-run lines go to bench-results/wire_precision/runs.tsv; --first_seed=N > 1 runs seeds N ..
# N + seeds - 1 and appends to it (to add seeds to an earlier run of the same job and binaries).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEEDS=5
FIRST_SEED=1
JOB="$ROOT/examples/fashion_mnist_mlp.textproto"
BIN="$ROOT/build/bin"
for arg in "$@"; do
  case "$arg" in
    --seeds=*) SEEDS="${arg#--seeds=}" ;;
    --first_seed=*) FIRST_SEED="${arg#--first_seed=}" ;;
    --job=*) JOB="$(cd "$(dirname "${arg#--job=}")" && pwd)/$(basename "${arg#--job=}")" ;;
    -*) echo "wire_precision: unknown flag $arg" >&2; exit 2 ;;
    *) BIN="$(cd "$arg" && pwd)" ;;
  esac
done
[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || { echo "wire_precision: --seeds must be a positive integer" >&2; exit 2; }
[[ "$FIRST_SEED" =~ ^[1-9][0-9]*$ ]] ||
  { echo "wire_precision: --first_seed must be a positive integer" >&2; exit 2; }
[[ -f "$JOB" ]] || { echo "wire_precision: no job file $JOB" >&2; exit 2; }
grep -q '^seed:' "$JOB" || { echo "wire_precision: $JOB has no top-level 'seed:' line to vary" >&2; exit 2; }
grep -q '^wire_precision:' "$JOB" && { echo "wire_precision: $JOB sets wire_precision itself" >&2; exit 2; }
OUT="$ROOT/bench-results/wire_precision"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
HEADER=$'seed\tconfig\taccuracy\tauc\tkept_auc\texamples_per_second\twire_bytes_per_example'
if ((FIRST_SEED == 1)); then
  echo "$HEADER" >"$TSV"
elif [[ "$(head -n 1 "$TSV" 2>/dev/null)" != "$HEADER" ]]; then
  echo "wire_precision: --first_seed=$FIRST_SEED appends to $TSV, which has no runs of this version" >&2
  exit 2
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; job $JOB" >&2
for ((seed = FIRST_SEED; seed < FIRST_SEED + SEEDS; ++seed)); do
  for precision in float32 bfloat16; do
    upper="$(tr '[:lower:]' '[:upper:]' <<<"$precision")"
    { sed "s/^seed:.*/seed: $seed/" "$JOB"; echo "wire_precision: WIRE_$upper"; } >"$TMP/job.textproto"
    # Run from the caller's directory: relative data paths in the job resolve as they would there.
    out="$(timeout 1800 "$BIN/syncopate" local --bin_dir="$BIN" --job="$TMP/job.textproto" \
      --run_dir="$TMP/run-$precision-$seed" 2>&1 | grep -E '^(done|kept):' || true)"
    line="$(grep '^done:' <<<"$out" || true)"
    acc="$(sed -n 's/^done: final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
    auc="$(sed -n 's/.*, AUC \([0-9.]*\),.*/\1/p' <<<"$line")"
    eps="$(sed -n 's/.* (\([0-9]*\) examples\/s training[,)].*/\1/p' <<<"$line")"
    bpe="$(sed -n 's/.*, \([0-9]*\) wire bytes\/example).*/\1/p' <<<"$line")"
    kept="$(grep '^kept:' <<<"$out" | sed -n 's/.*, AUC \([0-9.]*\),.*/\1/p' || true)"
    [[ -n "$acc" && -n "$auc" && -n "$eps" && -n "$bpe" ]] ||
      { echo "wire_precision: seed $seed $precision did not finish: $line" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$seed" "$precision" "$acc" "$auc" "${kept:-$auc}" "$eps" \
      "$bpe" | tee -a "$TSV" >&2
    rm -rf "$TMP/run-$precision-$seed"
  done
done
"$BIN/syncopate-seed-stats" --tsv="$TSV" --values=accuracy,auc,kept_auc,examples_per_second,wire_bytes_per_example \
  --ref=float32
