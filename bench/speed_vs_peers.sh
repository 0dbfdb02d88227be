#!/usr/bin/env bash
# Issue 51's goals in one run (docs/measurements/throughput.md, "Against the peers"): seed by
# seed, the same machine, peers at their best (TOOLING.md: OpenBLAS with this machine's
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE pins unset in the peer's command alone):
#   mlp      the default job (syncopate local's defaults)   vs one PyTorch process, same MLP, G,
#            optimizer and schedule (bench/torch_peers.py --processes=1)
#   module   the default MLP as a PyTorch module through the cluster (examples/torch/mlp.py)
#            vs PyTorch DDP-gloo with the job's worker count (torch_peers.py --processes=N)
#   deepfm   examples/ctr_deepfm.textproto in sync on generated click data (400k rows) vs the
#            same model and recipe in one PyTorch process (reference_ctr.py --recipe=syncopate)
# and the ceiling: 2 x one core's compute-only rate of the default MLP (syncopate-perf-bench
# --only=compute) at the batch each worker process computes (G / processes) and at G / N.
# Prints examples/s per config (mean and range over seeds), accuracy / AUC, and the ratios,
# paired by seed.
#
#   bench/speed_vs_peers.sh [--seeds=3] [--epochs=8] [--skip=module,deepfm] [BIN_DIR]
# Per-run lines go to bench-results/speed_vs_peers/runs.tsv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEEDS=3
EPOCHS=8
SKIP=""
BIN="$ROOT/build/bin"
for arg in "$@"; do
  case "$arg" in
    --seeds=*) SEEDS="${arg#--seeds=}" ;;
    --epochs=*) EPOCHS="${arg#--epochs=}" ;;
    --skip=*) SKIP="${arg#--skip=}" ;;
    -*) echo "speed_vs_peers: unknown flag $arg" >&2; exit 2 ;;
    *) BIN="$(cd "$arg" && pwd)" ;;
  esac
done
[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || { echo "speed_vs_peers: --seeds must be a positive integer" >&2; exit 2; }
skipped() { [[ ",$SKIP," == *",$1,"* ]]; }
OUT="$ROOT/bench-results/speed_vs_peers"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'seed\tconfig\texamples_per_second\tquality\n' >"$TSV"
# A peer at its best: this machine's OpenBLAS pins removed from its environment alone.
peer() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE timeout 1800 /usr/bin/python3 "$@"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" | tee -a "$TSV" >&2; }
cpus="$(nproc)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $cpus cores, $(grep -o -m1 'avx512f' /proc/cpuinfo || echo 'no avx512')" >&2

# syncopate_run SEED CONFIG JOB [FLAGS...]: one `syncopate local` run; records examples/s and the
# final accuracy (AUC for a CTR job).
syncopate_run() {
  local seed="$1" config="$2" job="$3" line eps q
  shift 3
  line="$(cd "$TMP" && timeout 1800 "$BIN/syncopate" local --bin_dir="$BIN" --job="$job" \
    --run_dir="$TMP/run-$config-$seed" "$@" 2>&1 | grep '^done:' || true)"
  eps="$(sed -n 's/.* (\([0-9]*\) examples\/s training[,)].*/\1/p' <<<"$line")"
  if [[ $config == deepfm* ]]; then
    q="$(sed -n 's/.*, AUC \([0-9.]*\), loss.*/\1/p' <<<"$line")"
  else
    q="$(sed -n 's/^done: final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
  fi
  [[ -n "$eps" && -n "$q" ]] || { echo "speed_vs_peers: seed $seed $config did not finish: $line" >&2; exit 1; }
  record "$seed" "$config" "$eps" "$q"
}

# The ceiling: one core's compute-only rate at the two batches.
workers="$(sed -n 's/^num_workers: *//p' "$ROOT/examples/fashion_mnist_mlp.textproto")"
rate_at() {
  "$BIN/syncopate-perf-bench" --only=compute --local_batch="$1" 2>/dev/null |
    sed -n 's/.* \([0-9][0-9]*\) examples\/s;.*<- dispatched.*/\1/p'
}
per_worker=$((256 / workers))
# syncopate local's default: one worker process per core (ADR 0023; the default job's 4 workers
# divide over 1, 2 or 4 cores evenly).
per_process=$((256 / (cpus < workers ? cpus : workers)))
compute_worker="$(rate_at "$per_worker")"
compute_process="$(rate_at "$per_process")"
echo "compute only, one core: $compute_worker examples/s at batch $per_worker, $compute_process at batch $per_process" >&2

if ! skipped deepfm; then
  DATA="$OUT/ctr-data"
  mkdir -p "$DATA"
  for part in train:400000:1 test:50000:2 val:50000:3; do
    IFS=: read -r name rows seed <<<"$part"
    [[ -f "$DATA/$name.tsv.gz" ]] ||
      "$BIN/syncopate" datagen ctr --rows="$rows" --out="$DATA/$name.tsv.gz" --seed="$seed" >/dev/null
  done
fi

for ((seed = 1; seed <= SEEDS; ++seed)); do
  sed -e "s/^seed:.*/seed: $seed/" -e "s/^stop.*/stop { epochs: $EPOCHS }/" \
    "$ROOT/examples/fashion_mnist_mlp.textproto" >"$TMP/mlp.textproto"
  syncopate_run "$seed" mlp-syncopate "$TMP/mlp.textproto"
  line="$(peer "$ROOT/bench/torch_peers.py" --processes=1 --seed="$seed" --epochs="$EPOCHS" 2>&1 | tail -n 1)"
  record "$seed" mlp-pytorch "$(sed -n 's/.*: \([0-9]*\) examples\/s training.*/\1/p' <<<"$line")" \
    "$(sed -n 's/.*final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
  if ! skipped module; then
    sed -e "s/^seed:.*/seed: $seed/" -e "s/^stop.*/stop { epochs: $EPOCHS }/" \
      -e "s|\"examples/torch/mlp.py\"|\"$ROOT/examples/torch/mlp.py\"|" \
      "$ROOT/examples/torch/mlp.textproto" >"$TMP/torch.textproto"
    syncopate_run "$seed" module-syncopate "$TMP/torch.textproto"
    line="$(peer "$ROOT/bench/torch_peers.py" --processes="$workers" --seed="$seed" --epochs="$EPOCHS" 2>&1 | tail -n 1)"
    record "$seed" module-ddp "$(sed -n 's/.*: \([0-9]*\) examples\/s training.*/\1/p' <<<"$line")" \
      "$(sed -n 's/.*final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
  fi
  if ! skipped deepfm; then
    sed -e "s/^seed:.*/seed: $seed/" -e "s|data/ctr/|$DATA/|g" \
      "$ROOT/examples/ctr_deepfm.textproto" >"$TMP/deepfm.textproto"
    syncopate_run "$seed" deepfm-syncopate "$TMP/deepfm.textproto" --mode=sync
    line="$(peer "$ROOT/bench/reference_ctr.py" "$DATA/train.tsv.gz" "$DATA/test.tsv.gz" \
      --recipe=syncopate --models=deepfm --seed="$seed" 2>&1 | grep '^RESULT' | tail -n 1)"
    record "$seed" deepfm-pytorch "$(sed -n 's/.*training_examples_per_second=\([0-9]*\).*/\1/p' <<<"$line")" \
      "$(sed -n 's/.*final_auc=\([0-9.]*\).*/\1/p' <<<"$line")"
  fi
done

awk -F'\t' -v cw="$compute_worker" -v cp="$compute_process" -v bw="$per_worker" -v bp="$per_process" '
  NR > 1 { eps[$2, $1] = $3; q[$2, $1] = $4; seen[$2] = 1; seeds[$1] = 1 }
  function stats(config,   s, n, lo, hi, v, sq) {
    n = 0; s = 0; sq = 0; lo = ""; hi = "";
    for (seed in seeds) if ((config, seed) in eps) { v = eps[config, seed]; n++; s += v; lo = (lo == "" || v < lo) ? v : lo; hi = (hi == "" || v > hi) ? v : hi; sq += q[config, seed] }
    return n == 0 ? "-" : sprintf("%.0f (%.0f-%.0f); quality %.4g", s / n, lo, hi, sq / n);
  }
  function ratio(a, b,   n, s, lo, hi, r, seed) {
    n = 0; s = 0; lo = ""; hi = "";
    for (seed in seeds) if ((a, seed) in eps && (b, seed) in eps && eps[b, seed] > 0) {
      r = eps[a, seed] / eps[b, seed]; n++; s += r; lo = (lo == "" || r < lo) ? r : lo; hi = (hi == "" || r > hi) ? r : hi }
    return n == 0 ? "-" : sprintf("%.2f (%.2f-%.2f over %d seeds)", s / n, lo, hi, n);
  }
  function mean(config,   n, s, seed) { n = 0; s = 0; for (seed in seeds) if ((config, seed) in eps) { n++; s += eps[config, seed] } return n ? s / n : 0 }
  END {
    for (c in seen) printf "%-18s %s\n", c, stats(c);
    printf "\nmlp: syncopate / one pytorch process  %s\n", ratio("mlp-syncopate", "mlp-pytorch");
    printf "mlp: syncopate / (2 x compute-only at batch %d = %.0f)  %.2f;  at batch %d (%.0f)  %.2f\n",
      bp, 2 * cp, mean("mlp-syncopate") / (2 * cp), bw, 2 * cw, mean("mlp-syncopate") / (2 * cw);
    if ("module-syncopate" in seen) printf "module: syncopate / ddp-gloo  %s\n", ratio("module-syncopate", "module-ddp");
    if ("deepfm-syncopate" in seen) printf "deepfm: syncopate / one pytorch process  %s\n", ratio("deepfm-syncopate", "deepfm-pytorch");
  }' "$TSV"
