#!/usr/bin/env bash
# syncopate-seed-stats on a canned TSV: against --ref, Welch's line comes first (what
# tests/conformance/run.py reads), then the mean of the differences paired by seed with its t
# interval over the seeds both groups ran (seed 4 ran only in the reference, so n = 3): the
# differences 0.5, 0.3, 0.6 have mean 0.4667, standard deviation 0.1528 and t(0.975, 2) = 4.303,
# so the interval is 0.4667 ± 0.3795.
# Usage: seed_stats_test.sh PATH_TO_SYNCOPATE_SEED_STATS
set -euo pipefail
tool="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
printf 'seed\tconfig\tvalue\n1\ta\t1\n1\tb\t0.5\n2\ta\t2\n2\tb\t1.7\n3\ta\t3\n3\tb\t2.4\n4\ta\t4\n' \
  >"$tmp/runs.tsv"
out="$("$tool" --tsv="$tmp/runs.tsv" --values=value --ref=a)"
echo "$out"
grep -qF '  a - b: ' <<<"$out" || fail "no Welch line"
grep -qF '  a - b paired by seed (n=3): +0.4667 [+0.08721, +0.8461] (95%, t with n-1 df)' \
  <<<"$out" || fail "paired line differs"
[[ "$(grep -n 'a - b' <<<"$out" | head -n 1)" == *'(Welch 95%)'* ]] ||
  fail "the Welch line is not the first to name the two groups"
