#!/usr/bin/env bash
# End to end (issue 16 item 4, docs/operations.md "Performance against the machine's ceilings"):
# trains the same job with two or more builds, alternating them run by run so that the machine's
# drift falls on every build alike, and prints per build the training examples/s and the final
# test accuracy (mean and 95% Student-t interval over the runs; run r uses job seed r), each
# build's examples/s against the first one's, and the parallel efficiency of the last build
# against the machine's ceiling: cores x one core's compute-only rate for the same model and
# local batch (syncopate-perf-bench --only=compute, measured at the start of the same run).
#
#   bench/end_to_end.sh [--runs=K] [--job=FILE] BIN_DIR [BIN_DIR ...]
#     BIN_DIR  a build's bin/ (syncopate and its siblings); the first is the reference
#     --runs   runs per build (default 3), --job the job (default the default job)
# Per-run lines go to bench-results/end_to_end/runs.tsv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=3
JOB="$ROOT/examples/fashion_mnist_mlp.textproto"
BINS=()
for arg in "$@"; do
  case "$arg" in
    --runs=*) RUNS="${arg#--runs=}" ;;
    --job=*) JOB="${arg#--job=}" ;;
    -*) echo "end_to_end: unknown flag $arg" >&2; exit 2 ;;
    *) BINS+=("$(cd "$arg" && pwd)") ;;
  esac
done
[[ ${#BINS[@]} -ge 1 ]] || { echo "usage: bench/end_to_end.sh [--runs=K] [--job=FILE] BIN_DIR [BIN_DIR ...]" >&2; exit 2; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "end_to_end: --runs must be a positive integer" >&2; exit 2; }
[[ -f "$JOB" ]] || { echo "end_to_end: no job file $JOB" >&2; exit 2; }
grep -q '^seed:' "$JOB" || { echo "end_to_end: $JOB has no top-level 'seed:' line to vary" >&2; exit 2; }

OUT="$ROOT/bench-results/end_to_end"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'build\trun\texamples_per_second\taccuracy\twire_bytes_per_example\n' >"$TSV"

LAST="${BINS[-1]}"
compute="$("$LAST/syncopate-perf-bench" --only=compute 2>/dev/null |
  sed -n 's/.* \([0-9][0-9]*\) examples\/s;.*<- dispatched.*/\1/p')"
[[ -n "$compute" ]] || { echo "end_to_end: syncopate-perf-bench --only=compute printed no dispatched rate" >&2; exit 1; }
cores="$(nproc)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $cores cores" >&2

for ((run = 1; run <= RUNS; ++run)); do
  sed "s/^seed:.*/seed: $run/" "$JOB" >"$TMP/job.textproto"
  for b in "${!BINS[@]}"; do
    bin="${BINS[$b]}"
    line="$(cd "$TMP" && timeout 600 "$bin/syncopate" local --bin_dir="$bin" --job="$TMP/job.textproto" 2>&1 | grep '^done:' || true)"
    eps="$(sed -n 's/.* (\([0-9]*\) examples\/s training[,)].*/\1/p' <<<"$line")"
    acc="$(sed -n 's/^done: final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
    # Builds before the wire was counted print no bytes per example: "-".
    bpe="$(sed -n 's/.*, \([0-9]*\) wire bytes\/example).*/\1/p' <<<"$line")"
    [[ -n "$eps" && -n "$acc" ]] || { echo "end_to_end: run $run of $bin did not finish: $line" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$b" "$run" "$eps" "$acc" "${bpe:--}" >>"$TSV"
    echo "run $run build $b ($bin): $eps examples/s, $acc%, ${bpe:--} wire bytes/example" >&2
  done
done

# Mean and the 95% Student-t half-width (two-sided quantiles for 1-10 degrees of freedom, then
# the normal's).
awk -F'\t' -v compute="$compute" -v cores="$cores" -v nbins="${#BINS[@]}" -v bins="${BINS[*]}" '
  function t95(df,   q) {
    split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228", q, " ");
    return df <= 10 ? q[df] : 1.96;
  }
  function ci(sum, sq, n,   mean, sd) {
    mean = sum / n;
    if (n < 2) return sprintf("%.0f", mean);
    sd = sqrt((sq - n * mean * mean) / (n - 1));
    return sprintf("%.0f [%.0f, %.0f]", mean, mean - t95(n - 1) * sd / sqrt(n), mean + t95(n - 1) * sd / sqrt(n));
  }
  function ci2(sum, sq, n,   mean, sd) {
    mean = sum / n;
    if (n < 2) return sprintf("%.2f", mean);
    sd = sqrt((sq - n * mean * mean) / (n - 1));
    return sprintf("%.2f [%.2f, %.2f]", mean, mean - t95(n - 1) * sd / sqrt(n), mean + t95(n - 1) * sd / sqrt(n));
  }
  NR > 1 { n[$1]++; s[$1] += $3; q[$1] += $3 * $3; a[$1] += $4; aq[$1] += $4 * $4;
           if ($5 != "-") { w[$1] += $5; wn[$1]++; } }
  END {
    split(bins, names, " ");
    printf "| build | examples/s, mean [95%%] | / build 0 | final accuracy %% | wire bytes/example |\n|---|---|---|---|---|\n";
    for (b = 0; b < nbins; ++b) {
      printf "| %d: %s | %s | %.2f | %s | %s |\n", b, names[b + 1], ci(s[b], q[b], n[b]),
             (s[b] / n[b]) / (s[0] / n[0]), ci2(a[b], aq[b], n[b]),
             (wn[b] > 0 ? sprintf("%.0f", w[b] / wn[b]) : "-");  # unparenthesised, ">" redirects
    }
    last = nbins - 1;
    printf "\nceiling: %d cores x %.0f examples/s (one core, compute only, dispatched kernels) = %.0f; build %d reaches %.0f%% of it\n",
           cores, compute, cores * compute, last, 100 * (s[last] / n[last]) / (cores * compute);
  }' "$TSV"
