#!/usr/bin/env bash
# Simulator vs reality (issue 12, docs/simulation.md "Validation"): for every run of a real
# straggler bench (`./dev bench` or syncopate-straggler-bench --out=DIR), simulate the same job
# (the run's own job.textproto: model, optimizer, epochs, evaluation interval), the same policy
# and seed with examples/sim/bench_<scenario>.textproto, then print one markdown row per
# scenario x policy: wall time and final accuracy, real against simulated, with the verdicts of
# the issue's goal (mean wall within 20%; mean accuracy inside the real seeds' range).
#
#   bench/sim_validation.sh BENCH_OUT [SYNCOPATE_BINARY] [POLICIES]
#     BENCH_OUT  a finished bench's --out directory (results.json and runs/<s>-<p>-s<seed>/)
#     POLICIES   comma-separated, default sync,gba,auto
# One simulation at a time (each takes a few seconds); the per-run numbers go to
# BENCH_OUT/sim_validation.tsv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: bench/sim_validation.sh BENCH_OUT [SYNCOPATE_BINARY] [POLICIES]}"
SIM="${2:-$ROOT/build/bin/syncopate}"
POLICIES="${3:-sync,gba,auto}"
RESULTS="$OUT/results.json"
[[ -f "$RESULTS" ]] || { echo "sim_validation: no $RESULTS (has the bench finished?)" >&2; exit 1; }
command -v jq >/dev/null || { echo "sim_validation: needs jq (apt-get install jq)" >&2; exit 1; }
TARGET="$(jq -r '.config.target_accuracy' "$RESULTS")"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# Scenario c slows worker 3 over the middle third of the mean no-straggler sync run, counted from
# the worker's start of training (bench/straggler_bench.cc); the simulated window is the same,
# shifted by the spec's startup.
spec_for() {
  local scenario="$1" spec="$ROOT/examples/sim/bench_$1.textproto"
  if [[ "$scenario" != c ]]; then
    echo "$spec"
    return
  fi
  local mean startup
  mean="$(jq '[.runs[] | select(.scenario == "a" and .policy == "sync") | .wall_seconds]
              | if length > 0 then add / length else 60 end' "$RESULTS")"
  startup="$(sed -n 's/^startup_seconds: *//p' "$spec")"
  grep -v '^slowdowns' "$spec" >"$TMP/bench_c.textproto"
  awk -v m="$mean" -v s="${startup:-0}" 'BEGIN {
    printf "slowdowns { workers: [3] factor: 4 start_seconds: %.3f end_seconds: %.3f }\n",
           s + m / 3, s + 2 * m / 3 }' >>"$TMP/bench_c.textproto"
  echo "$TMP/bench_c.textproto"
}

TSV="$OUT/sim_validation.tsv"
printf 'scenario\tpolicy\tseed\treal_wall\treal_accuracy\tsim_wall\tsim_accuracy\n' >"$TSV"
jq -r --arg policies "$POLICIES" '
  ($policies | split(",")) as $p
  | .runs[] | select(.finished and (.scenario | test("^[abcd]$")) and (.policy | IN($p[])))
  | [.scenario, .policy, .seed, .wall_seconds, .final_quality] | @tsv' "$RESULTS" |
  while IFS=$'\t' read -r scenario policy seed wall accuracy; do
    job="$OUT/runs/$scenario-$policy-s$seed/job.textproto"
    line="$("$SIM" sim --job="$job" --sim="$(spec_for "$scenario")" --policy="$policy" \
      --seed="$seed" --target_accuracy="$TARGET" 2>/dev/null | tail -n 1)"
    sim_wall="$(sed -n 's/.*virtual wall time \([0-9.]*\) s.*/\1/p' <<<"$line")"
    sim_accuracy="$(sed -n 's/.*final accuracy \([0-9.]*\),.*/\1/p' <<<"$line")"
    [[ -n "$sim_wall" ]] || { echo "sim_validation: $scenario $policy $seed: $line" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scenario" "$policy" "$seed" "$wall" "$accuracy" \
      "$sim_wall" "$sim_accuracy" | tee -a "$TSV" >&2
  done

echo "| scenario | policy | seeds | real wall: mean (range) | simulated wall: mean (range) | sim / real | wall within 20% | real accuracy: mean (range) | simulated accuracy: mean (range) | accuracy in real range |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk -F'\t' 'NR > 1 {
    k = $1 " " $2
    if (!(k in n)) { order[++cells] = k; rmin[k] = smin[k] = amin[k] = bmin[k] = 1e9;
                     rmax[k] = smax[k] = amax[k] = bmax[k] = -1e9 }
    n[k]++; rw[k] += $4; sw[k] += $6; ra[k] += $5; sa[k] += $7
    if ($4 < rmin[k]) rmin[k] = $4; if ($4 > rmax[k]) rmax[k] = $4
    if ($6 < smin[k]) smin[k] = $6; if ($6 > smax[k]) smax[k] = $6
    if ($5 < amin[k]) amin[k] = $5; if ($5 > amax[k]) amax[k] = $5
    if ($7 < bmin[k]) bmin[k] = $7; if ($7 > bmax[k]) bmax[k] = $7
  }
  END {
    for (i = 1; i <= cells; i++) {
      k = order[i]; split(k, sp, " ")
      r = rw[k] / n[k]; s = sw[k] / n[k]; a = ra[k] / n[k]; b = sa[k] / n[k]
      printf "| %s | %s | %d | %.1f s (%.1f-%.1f) | %.1f s (%.1f-%.1f) | %.2f | %s | %.2f%% (%.2f-%.2f) | %.2f%% (%.2f-%.2f) | %s |\n",
        sp[1], sp[2], n[k], r, rmin[k], rmax[k], s, smin[k], smax[k], s / r,
        (s / r >= 0.8 && s / r <= 1.2) ? "yes" : "no",
        100 * a, 100 * amin[k], 100 * amax[k], 100 * b, 100 * bmin[k], 100 * bmax[k],
        (b >= amin[k] && b <= amax[k]) ? "yes" : "no"
    }
  }' "$TSV"
