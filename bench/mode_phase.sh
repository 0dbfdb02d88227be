#!/usr/bin/env bash
# Where in the schedule does gba cost accuracy? (issue 43 item 4; ADR 0007 "The schedule's
# phase"; numbers in docs/measurements/gba-buffer-aware-look-ahead.md). Simulated runs of one
# straggler-bench scenario (examples/sim/bench_<scenario>.textproto) on the default MLP job of
# the bench (3 epochs), each seed in six configurations that differ only in when the shards run
# gba (SimSpec.mode_schedule switches every shard at a fraction of the run's global batches):
#   sync, gba                              the whole run
#   gba-first-half / gba-first-quarter     gba, then sync from 1/2 / 1/4 of the run
#   gba-second-half / gba-last-quarter     sync, then gba from 1/2 / 3/4 of the run
# Prints the accuracy and virtual wall time of each against sync (syncopate-seed-stats).
#
#   bench/mode_phase.sh [--seeds=12] [--scenario=b] [--job=FILE] [BIN_DIR]   (default build/bin)
# FILE: a job spec (e.g. a straggler bench's runs/b-sync-s1/job.textproto, as measured); by
# default the default job with 3 epochs, the bench's length.
# Each simulation takes ~5 s of one core; per-run lines go to bench-results/mode_phase/runs.tsv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEEDS=12
SCENARIO=b
BIN="$ROOT/build/bin"
JOB_FLAGS=(--epochs=3)
for arg in "$@"; do
  case "$arg" in
    --seeds=*) SEEDS="${arg#--seeds=}" ;;
    --scenario=*) SCENARIO="${arg#--scenario=}" ;;
    --job=*) JOB_FLAGS=(--job="$(cd "$(dirname "${arg#--job=}")" && pwd)/$(basename "${arg#--job=}")") ;;
    -*) echo "mode_phase: unknown flag $arg" >&2; exit 2 ;;
    *) BIN="$(cd "$arg" && pwd)" ;;
  esac
done
[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || { echo "mode_phase: --seeds must be a positive integer" >&2; exit 2; }
SPEC="$ROOT/examples/sim/bench_$SCENARIO.textproto"
[[ -f "$SPEC" ]] || { echo "mode_phase: no scenario '$SCENARIO' ($SPEC)" >&2; exit 2; }
OUT="$ROOT/bench-results/mode_phase"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'config\tseed\taccuracy\twall_seconds\n' >"$TSV"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (simulated time does not depend on it); scenario $SCENARIO" >&2

# config NAME POLICY [FRACTION MODE]...: the job in POLICY's mode, then MODE from FRACTION on.
config() {
  local name="$1" policy="$2" line acc wall
  shift 2
  cp "$SPEC" "$TMP/$name.textproto"
  while (($#)); do
    printf 'mode_schedule { at_fraction: %s mode: %s }\n' "$1" "$2" >>"$TMP/$name.textproto"
    shift 2
  done
  for ((seed = 1; seed <= SEEDS; ++seed)); do
    line="$(timeout 600 "$BIN/syncopate" sim --sim="$TMP/$name.textproto" --policy="$policy" \
      "${JOB_FLAGS[@]}" --seed="$seed" 2>&1 | tail -n 1)"
    acc="$(sed -n 's/.*final accuracy \([0-9.]*\),.*/\1/p' <<<"$line")"
    wall="$(sed -n 's/.*virtual wall time \([0-9.]*\) s,.*/\1/p' <<<"$line")"
    [[ -n "$acc" && -n "$wall" ]] || { echo "mode_phase: $name seed $seed: $line" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\n' "$name" "$seed" "$acc" "$wall" | tee -a "$TSV" >&2
  done
}
config sync sync
config gba gba
config gba-first-half gba 0.5 MODE_SYNC
config gba-first-quarter gba 0.25 MODE_SYNC
config gba-second-half sync 0.5 MODE_GBA
config gba-last-quarter sync 0.75 MODE_GBA
"$BIN/syncopate-seed-stats" --tsv="$TSV" --values=accuracy,wall_seconds --ref=sync
