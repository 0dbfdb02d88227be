#!/usr/bin/env bash
# Two CTR job specs against each other, teacher by teacher and seed by seed: the A/B a model
# change is decided by (ADR 0020). For each planted teacher it writes (once, shared with
# bench/ctr_quality.sh under bench-results/ctr_quality/data) a training file (--seed 1), a test
# file (--seed 2) and a validation file (--seed 3), then for each seed runs job A and job B with
# only their data paths and `seed:` changed, and reads the test AUC of the version each kept
# (chosen on the validation set). Prints each one's mean AUC and training examples/s with 95%
# intervals and B - A's interval (syncopate-seed-stats, paired by seed).
#
#   bench/ctr_ab.sh --a=JOB --b=JOB [--seeds=3] [--teachers=heavytail,longtail,segments,pairs]
#                   [--rows=400000] [BIN_DIR]   (default: build/bin)
# Per-run lines go to bench-results/ctr_ab/runs.tsv. ~1 minute per job, teacher and seed on the
# 2-core dev machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/bench/ctr_bench_lib.sh"
SEEDS=3
TEACHERS="heavytail,longtail,segments,pairs"
ROWS=400000
JOB_A=""
JOB_B=""
BIN="$ROOT/build/bin"
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
for arg in "$@"; do
  case "$arg" in
    --a=*) JOB_A="$(absolute "${arg#--a=}")" ;;
    --b=*) JOB_B="$(absolute "${arg#--b=}")" ;;
    --seeds=*) SEEDS="${arg#--seeds=}" ;;
    --teachers=*) TEACHERS="${arg#--teachers=}" ;;
    --rows=*) ROWS="${arg#--rows=}" ;;
    -*) echo "ctr_ab: unknown flag $arg" >&2; exit 2 ;;
    *) BIN="$(cd "$arg" && pwd)" ;;
  esac
done
[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || { echo "ctr_ab: --seeds must be a positive integer" >&2; exit 2; }
[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || { echo "ctr_ab: --rows must be a positive integer" >&2; exit 2; }
for job in "$JOB_A" "$JOB_B"; do
  [[ -n "$job" && -f "$job" ]] || { echo "ctr_ab: --a and --b must name job files" >&2; exit 2; }
  grep -q '^seed:' "$job" || { echo "ctr_ab: $job has no top-level 'seed:' line to vary" >&2; exit 2; }
  grep -q 'validation_path:' "$job" ||
    { echo "ctr_ab: $job has no dataset validation_path (the kept version needs one)" >&2; exit 2; }
done
DATA="$ROOT/bench-results/ctr_quality/data"
OUT="$ROOT/bench-results/ctr_ab"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'teacher\tseed\tconfig\tauc\texamples_per_second\n' >"$TSV"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; A $JOB_A; B $JOB_B" >&2
IFS=',' read -ra teacher_list <<<"$TEACHERS"
for teacher in "${teacher_list[@]}"; do
  data="$(ctr_bench_data "$BIN" "$DATA" "$teacher" "$ROWS")"
  for ((seed = 1; seed <= SEEDS; ++seed)); do
    for config in a b; do
      job="$JOB_A"
      [[ $config == b ]] && job="$JOB_B"
      ctr_bench_job "$job" "$data" "$seed" "$TMP/job.textproto"
      result="$(ctr_bench_run "$BIN" "$TMP/job.textproto" "$TMP/run-$teacher-$seed-$config")" ||
        { echo "ctr_ab: $config on $teacher seed $seed did not finish" >&2; exit 1; }
      read -r _ kept eps <<<"$result"
      printf '%s\t%s\t%s\t%s\t%s\n' "$teacher" "$seed" "$config" "$kept" "$eps" | tee -a "$TSV" >&2
      rm -rf "$TMP/run-$teacher-$seed-$config"
    done
  done
done
for teacher in "${teacher_list[@]}"; do
  echo "== $teacher (B - A)"
  { head -n 1 "$TSV"; awk -F'\t' -v t="$teacher" '$1 == t' "$TSV"; } >"$TMP/$teacher.tsv"
  "$BIN/syncopate-seed-stats" --tsv="$TMP/$teacher.tsv" --values=auc,examples_per_second --ref=a
done
