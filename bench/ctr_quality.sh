#!/usr/bin/env bash
# CTR quality against a practitioner's PyTorch recipe, teacher by teacher (issue 33; numbers in
# docs/measurements/ctr-quality.md). For each planted teacher it
# writes (once, kept under bench-results/ctr_quality/data) a training file (--seed 1), a test file
# (--seed 2) and a validation file (--seed 3), then for each seed runs
#   - the CTR job (default examples/ctr_deepfm.textproto) with only its data paths and `seed:`
#     changed, and reads the test AUC of the version it kept (chosen on the validation set; its
#     final one for a job without validation_path);
#   - bench/reference_ctr.py --recipe=standard --val=... (Adam, rare values folded, missing
#     indicators) and reads the test AUC of the epoch the validation set kept.
# Prints each one's mean AUC and training examples/s with their 95% intervals and, against the
# reference, the interval of the difference (syncopate-seed-stats). The reference's examples/s
# are its training loop's alone (one process, one thread); the job's are the cluster's, its
# evaluations included, as a user runs it.
#
# --recipe=syncopate runs the reference with the job's own optimizer instead (reference_ctr.py's
# syncopate recipe at the job's learning rate, batch and epochs): the same model, data and
# update rule, so the examples/s compare one PyTorch process with the cluster (issue 32 item 4).
#
#   bench/ctr_quality.sh [--seeds=3] [--teachers=heavytail,longtail,segments,pairs] [--rows=400000]
#                        [--recipe=standard|syncopate] [--job=FILE] [BIN_DIR]   (default: build/bin)
# Per-run lines go to bench-results/ctr_quality/runs.tsv. Needs Debian's python3-torch
# (`./dev reference` installs it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/bench/ctr_bench_lib.sh"
SEEDS=3
TEACHERS="heavytail,longtail,segments,pairs"
ROWS=400000
RECIPE=standard
JOB="$ROOT/examples/ctr_deepfm.textproto"
BIN="$ROOT/build/bin"
for arg in "$@"; do
  case "$arg" in
    --seeds=*) SEEDS="${arg#--seeds=}" ;;
    --teachers=*) TEACHERS="${arg#--teachers=}" ;;
    --rows=*) ROWS="${arg#--rows=}" ;;
    --recipe=*) RECIPE="${arg#--recipe=}" ;;
    --job=*) JOB="$(cd "$(dirname "${arg#--job=}")" && pwd)/$(basename "${arg#--job=}")" ;;
    -*) echo "ctr_quality: unknown flag $arg" >&2; exit 2 ;;
    *) BIN="$(cd "$arg" && pwd)" ;;
  esac
done
[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || { echo "ctr_quality: --seeds must be a positive integer" >&2; exit 2; }
[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || { echo "ctr_quality: --rows must be a positive integer" >&2; exit 2; }
[[ "$RECIPE" == standard || "$RECIPE" == syncopate ]] ||
  { echo "ctr_quality: --recipe must be standard or syncopate" >&2; exit 2; }
[[ -f "$JOB" ]] || { echo "ctr_quality: no job file $JOB" >&2; exit 2; }
grep -q '^seed:' "$JOB" || { echo "ctr_quality: $JOB has no top-level 'seed:' line to vary" >&2; exit 2; }
grep -q 'train_path:' "$JOB" && grep -q 'test_path:' "$JOB" ||
  { echo "ctr_quality: $JOB has no dataset train_path / test_path to replace" >&2; exit 2; }
OUT="$ROOT/bench-results/ctr_quality"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'teacher\tseed\tconfig\tauc\texamples_per_second\n' >"$TSV"
reference_flags=(--recipe="$RECIPE")
if [[ "$RECIPE" == syncopate ]]; then
  lr="$(sed -n 's/^ *learning_rate: *//p' "$JOB" | head -n 1)"
  batch="$(sed -n 's/^global_batch: *//p' "$JOB")"
  [[ -n "$lr" && -n "$batch" ]] ||
    { echo "ctr_quality: --recipe=syncopate needs learning_rate: and global_batch: lines in $JOB" >&2; exit 2; }
  reference_flags+=(--lr="$lr" --batch="$batch")
  epochs="$(sed -n 's/^stop { epochs: \([0-9]*\) }.*/\1/p' "$JOB")"
  [[ -n "$epochs" ]] && reference_flags+=(--epochs="$epochs")
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; job $JOB; reference recipe $RECIPE" >&2
IFS=',' read -ra teacher_list <<<"$TEACHERS"
for teacher in "${teacher_list[@]}"; do
  data="$(ctr_bench_data "$BIN" "$OUT/data" "$teacher" "$ROWS")"
  for ((seed = 1; seed <= SEEDS; ++seed)); do
    ctr_bench_job "$JOB" "$data" "$seed" "$TMP/job.textproto"
    result="$(ctr_bench_run "$BIN" "$TMP/job.textproto" "$TMP/run-$teacher-$seed")" ||
      { echo "ctr_quality: $teacher seed $seed did not finish" >&2; exit 1; }
    read -r final kept eps <<<"$result"
    printf '%s\t%s\tsyncopate\t%s\t%s\n' "$teacher" "$seed" "$kept" "$eps" |
      tee -a "$TSV" >&2
    printf '%s\t%s\tsyncopate-last\t%s\t%s\n' "$teacher" "$seed" "$final" "$eps" | tee -a "$TSV" >&2
    result="$(timeout 1800 /usr/bin/python3 "$ROOT/bench/reference_ctr.py" "$data/train.tsv.gz" \
      "$data/test.tsv.gz" --val="$data/val.tsv.gz" "${reference_flags[@]}" --models=deepfm \
      --seed="$seed" | grep '^RESULT' || true)"
    reference="$(sed -n 's/.* kept_auc=\([0-9.]*\) .*/\1/p' <<<"$result")"
    eps="$(sed -n 's/.* training_examples_per_second=\([0-9]*\).*/\1/p' <<<"$result")"
    [[ -n "$reference" && -n "$eps" ]] || { echo "ctr_quality: the reference failed on $teacher seed $seed" >&2; exit 1; }
    printf '%s\t%s\treference\t%s\t%s\n' "$teacher" "$seed" "$reference" "$eps" | tee -a "$TSV" >&2
  done
done
for teacher in "${teacher_list[@]}"; do
  echo "== $teacher"
  { head -n 1 "$TSV"; awk -F'\t' -v t="$teacher" '$1 == t' "$TSV"; } >"$TMP/$teacher.tsv"
  "$BIN/syncopate-seed-stats" --tsv="$TMP/$teacher.tsv" --values=auc,examples_per_second \
    --ref=reference
done
