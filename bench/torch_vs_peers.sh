#!/usr/bin/env bash
# The default job's MLP four ways, seed by seed in one run (issue 30 items 3 and 6; numbers in
# docs/measurements/pytorch-workers.md): Syncopate with PyTorch workers (examples/torch/mlp.py),
# Syncopate with its built-in C++ MLP (the default job), one PyTorch process and PyTorch DDP over
# gloo with as many processes as the job has workers (bench/torch_peers.py: the same module,
# optimizer, schedule and global batch). Prints each one's final test accuracy and training
# examples/s (mean and 95% interval over the seeds) and, against the PyTorch-worker cluster,
# Welch intervals of the accuracy differences and the examples/s ratios paired by seed.
#
#   bench/torch_vs_peers.sh [--seeds=5] [--epochs=8] [BIN_DIR]     (BIN_DIR: default build/bin)
# Per-run lines go to bench-results/torch_vs_peers/runs.tsv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEEDS=5
EPOCHS=8
BIN="$ROOT/build/bin"
for arg in "$@"; do
  case "$arg" in
    --seeds=*) SEEDS="${arg#--seeds=}" ;;
    --epochs=*) EPOCHS="${arg#--epochs=}" ;;
    -*) echo "torch_vs_peers: unknown flag $arg" >&2; exit 2 ;;
    *) BIN="$(cd "$arg" && pwd)" ;;
  esac
done
OUT="$ROOT/bench-results/torch_vs_peers"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TSV="$OUT/runs.tsv"
printf 'seed\tconfig\texamples_per_second\taccuracy\n' >"$TSV"
workers="$(sed -n 's/^num_workers: *//p' "$ROOT/examples/torch/mlp.textproto")"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" >&2
for ((seed = 1; seed <= SEEDS; ++seed)); do
  sed -e "s/^seed:.*/seed: $seed/" -e "s/^stop.*/stop { epochs: $EPOCHS }/" \
    -e "s|\"examples/torch/mlp.py\"|\"$ROOT/examples/torch/mlp.py\"|" \
    "$ROOT/examples/torch/mlp.textproto" >"$TMP/torch.textproto"
  sed -e "s/^seed:.*/seed: $seed/" -e "s/^stop.*/stop { epochs: $EPOCHS }/" \
    "$ROOT/examples/fashion_mnist_mlp.textproto" >"$TMP/cpp.textproto"
  for config in torch cpp; do
    line="$(timeout 1800 "$BIN/syncopate" local --bin_dir="$BIN" --job="$TMP/$config.textproto" \
      --run_dir="$TMP/run-$config-$seed" 2>&1 | grep '^done:' || true)"
    eps="$(sed -n 's/.* (\([0-9]*\) examples\/s training[,)].*/\1/p' <<<"$line")"
    acc="$(sed -n 's/^done: final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
    [[ -n "$eps" && -n "$acc" ]] || { echo "torch_vs_peers: seed $seed $config did not finish: $line" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\n' "$seed" "syncopate-$config" "$eps" "$acc" | tee -a "$TSV" >&2
  done
  for processes in 1 "$workers"; do
    line="$(timeout 1800 /usr/bin/python3 "$ROOT/bench/torch_peers.py" --processes="$processes" \
      --seed="$seed" --epochs="$EPOCHS" 2>&1 | tail -n 1)"
    eps="$(sed -n 's/.*: \([0-9]*\) examples\/s training.*/\1/p' <<<"$line")"
    acc="$(sed -n 's/.*final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")"
    [[ -n "$eps" && -n "$acc" ]] || { echo "torch_vs_peers: seed $seed pytorch-$processes failed: $line" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\n' "$seed" "pytorch-$processes" "$eps" "$acc" | tee -a "$TSV" >&2
  done
done
"$BIN/syncopate-seed-stats" --tsv="$TSV" --values=accuracy,examples_per_second --ref=syncopate-torch
