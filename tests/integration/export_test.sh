#!/usr/bin/env bash
# A trained model out of the cluster and back in (issue 41), as a user does it:
# 1. the built-in DeepFM trains on generated click logs; `syncopate export` of its latest and kept
#    versions; outside the cluster the Python package's key function equals the C++ one on every
#    key of a 50k-row file, the exported model (model.pt into syncopate.models) predicts every row
#    within 1e-5 of the C++ model over the same export (export_parity), and scores the test set
#    within 1e-6 of the cluster's evaluation (final and kept);
# 2. a PyTorch module nobody wrote for the examples (two sharded tables, BatchNorm) trains;
#    model.pt loads with load_state_dict(strict=True) into a fresh model() and scores within 1e-6;
# 3. a new job warm-starts from the DeepFM's export with another shard count and optimizer;
# 4. bad exports and warm starts are refused with one line and leave nothing behind.
# Usage: export_test.sh BIN_DIR SOURCE_DIR PYTHON
set -euo pipefail
bin="$1"
src="$2"
python="${3:-/usr/bin/python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export PYTHONPATH="$src/python"

"$bin/syncopate" datagen ctr --rows 20000 --out "$tmp/train.tsv" --seed 1 >/dev/null
"$bin/syncopate" datagen ctr --rows 50000 --out "$tmp/test.tsv" --seed 2 >/dev/null
"$bin/syncopate" datagen ctr --rows 5000 --out "$tmp/val.tsv" --seed 3 >/dev/null

# 1. The example's DeepFM, made small: 1 epoch of 20k rows, sync, kept on the validation set.
sed -e "s|data/ctr/train.tsv.gz|$tmp/train.tsv|" -e "s|data/ctr/test.tsv.gz|$tmp/test.tsv|" \
    -e "s|data/ctr/val.tsv.gz|$tmp/val.tsv|" -e "s|mode: MODE_AUTO|mode: MODE_SYNC|" \
    -e "s|eval { early_stop: true }||" "$src/examples/ctr_deepfm.textproto" >"$tmp/deepfm.textproto"
"$bin/syncopate" local --job="$tmp/deepfm.textproto" --epochs=1 --workers=2 --shards=2 \
  --run_dir="$tmp/deepfm" >"$tmp/deepfm.out" 2>&1 || fail "the DeepFM job failed: $(tail -3 "$tmp/deepfm.out")"
"$bin/syncopate" export --from="$tmp/deepfm/checkpoints" --out="$tmp/deepfm-export" \
  >"$tmp/export.out" 2>"$tmp/export.err" || fail "export failed: $(cat "$tmp/export.err")"
grep -q "^syncopate export: DEEPFM job 'ctr-deepfm' (latest" "$tmp/export.out" ||
  fail "export printed '$(cat "$tmp/export.out")'"
for f in manifest.json job.textproto dense.safetensors model.pt model.onnx; do
  [[ -f "$tmp/deepfm-export/$f" ]] || fail "the export has no $f"
done
"$bin/syncopate" export --from="$tmp/deepfm/checkpoints/kept" --out="$tmp/deepfm-kept" >/dev/null 2>&1 ||
  fail "export of kept/ failed"
"$bin/export_parity" keys "$tmp/test.tsv" "$tmp/keys.npy"
"$bin/export_parity" predict "$tmp/deepfm-export" "$tmp/test.tsv" "$tmp/latest.npy"
"$bin/export_parity" predict "$tmp/deepfm-kept" "$tmp/test.tsv" "$tmp/kept.npy"
"$python" "$src/tests/integration/export_check.py" builtin "$tmp/deepfm-export" \
  "$tmp/deepfm/report.json" "$tmp/test.tsv" "$tmp/keys.npy" "$tmp/latest.npy"
"$python" "$src/tests/integration/export_check.py" builtin "$tmp/deepfm-kept" \
  "$tmp/deepfm/report.json" "$tmp/test.tsv" "$tmp/keys.npy" "$tmp/kept.npy" --kept

# 2. A PyTorch module with two tables and BatchNorm.
cat >"$tmp/torch.textproto" <<JOB
job_id: "torch-ctr-bn"
model { kind: TORCH torch { module: "$src/tests/integration/testdata/ctr_bn_model.py" metric: AUC } }
dataset { kind: CRITEO train_path: "$tmp/train.tsv" test_path: "$tmp/test.tsv" }
optimizer { kind: ADAGRAD learning_rate: 0.05 }
global_batch: 256
num_workers: 2
num_shards: 2
mode: MODE_SYNC
stop { epochs: 1 }
block_size: 2048
seed: 3
JOB
"$bin/syncopate" local --job="$tmp/torch.textproto" --run_dir="$tmp/torch" >"$tmp/torch.out" 2>&1 ||
  fail "the PyTorch job failed: $(tail -3 "$tmp/torch.out")"
"$bin/syncopate" export --from="$tmp/torch/checkpoints" --out="$tmp/torch-export" >/dev/null 2>&1 ||
  fail "export of the PyTorch job failed"
"$python" "$src/tests/integration/export_check.py" torch "$tmp/torch-export" \
  "$tmp/torch/report.json" "$tmp/test.tsv" "$src/tests/integration/testdata/ctr_bn_model.py"

# 3. Warm start: the DeepFM again from its export, 3 shards, Adam, one global batch (512 examples):
# it starts where the export ended (its evaluation is within noise of the source's final AUC),
# while the same few steps from a fresh start are far below.
sed -e "s|kind: ADAGRAD|kind: ADAM|" -e "s|learning_rate: 0.1|learning_rate: 0.0005|" \
    "$tmp/deepfm.textproto" >"$tmp/fresh.textproto"
sed -e "s|^model {|model {\n  warm_start { from: \"$tmp/deepfm-export\" }|" \
    "$tmp/fresh.textproto" >"$tmp/warm.textproto"
# A job of one global batch can end before its evaluator has joined (the coordinator asks for a
# final evaluation only from an evaluator it knows): such a run has no evaluation to compare, and
# is run again, at most three times.
for run in warm fresh; do
  for attempt in 1 2 3; do
    rm -rf "$tmp/$run"
    "$bin/syncopate" local --job="$tmp/$run.textproto" --epochs=1 --train_limit=512 --workers=2 \
      --shards=3 --run_dir="$tmp/$run" >"$tmp/$run.out" 2>&1 ||
      fail "the $run start failed: $(tail -3 "$tmp/$run.out")"
    grep -q '"final_auc"' "$tmp/$run/report.json" && break
    echo "the $run start ended before its evaluator joined (attempt $attempt)"
  done
  grep -q '"final_auc"' "$tmp/$run/report.json" || fail "the $run start was never evaluated"
done
grep -q "warm-started from $tmp/deepfm-export" "$tmp/warm/logs/shard-0.log" ||
  fail "shard 0 did not warm-start"
"$python" - "$tmp/deepfm/report.json" "$tmp/warm/report.json" "$tmp/fresh/report.json" <<'PY'
import json, sys
source, warm, fresh = (json.load(open(path))["final_auc"] for path in sys.argv[1:])
print(f"warm start: the source ended at AUC {source:.4f}; after 512 more examples the warm "
      f"start is at {warm:.4f}, a fresh start at {fresh:.4f}")
if warm < source - 0.01:
    sys.exit(f"FAIL: the warm-started job's AUC {warm:.4f} is far below the source's {source:.4f}")
if warm < fresh + 0.03:
    sys.exit(f"FAIL: the warm start ({warm:.4f}) is no better than a fresh start ({fresh:.4f})")
PY

# 4. Bad input: one line, a non-zero exit, nothing written at the destination.
expect_refusal() {
  local expected="$1" out="$2"; shift 2
  set +e
  "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
  local code=$?
  set -e
  [[ $code -ne 0 ]] || fail "'$*' exited 0"
  grep -v "^I[0-9]" "$tmp/bad.err" >"$tmp/bad.lines" || true
  [[ $(wc -l <"$tmp/bad.lines") -eq 1 ]] || fail "'$*' printed: $(cat "$tmp/bad.err")"
  grep -q -- "$expected" "$tmp/bad.lines" || fail "'$*': '$(cat "$tmp/bad.lines")' lacks '$expected'"
  [[ -z "$out" || ! -e "$out" ]] || fail "'$*' left $out behind"
  if ls -a "$(dirname "${out:-$tmp/x}")" | grep -q "\.partial-"; then fail "'$*' left a partial export"; fi
}
expect_refusal "exists" "" "$bin/syncopate" export --from="$tmp/deepfm/checkpoints" --out="$tmp/deepfm-export"
expect_refusal "no complete set of shard checkpoints" "$tmp/none" \
  "$bin/syncopate" export --from="$tmp" --out="$tmp/none"
expect_refusal "--from is required" "" "$bin/syncopate" export --out="$tmp/none"
# A truncated table chunk, a missing table chunk and an export of another model as warm starts.
cp -r "$tmp/deepfm-export" "$tmp/cut-export"
chunk="$(ls "$tmp"/cut-export/tables/deep/rows-*.npy | head -1)"
truncate -s -100 "$chunk"
sed -i "s|from: \"$tmp/deepfm-export\"|from: \"$tmp/cut-export\"|" "$tmp/warm.textproto"
expect_refusal "truncated" "" "$bin/syncopate" local --job="$tmp/warm.textproto" --epochs=1 \
  --workers=1 --shards=1 --run_dir="$tmp/cut-run"
cp -r "$tmp/deepfm-export" "$tmp/no-table"
rm "$tmp"/no-table/tables/wide/keys-00000.npy
sed -i "s|from: \"$tmp/cut-export\"|from: \"$tmp/no-table\"|" "$tmp/warm.textproto"
expect_refusal "keys-00000.npy" "" "$bin/syncopate" local --job="$tmp/warm.textproto" --epochs=1 \
  --workers=1 --shards=1 --run_dir="$tmp/no-table-run"
sed -i "s|from: \"$tmp/no-table\"|from: \"$tmp/torch-export\"|" "$tmp/warm.textproto"
expect_refusal "holds tensor" "" "$bin/syncopate" local --job="$tmp/warm.textproto" --epochs=1 \
  --workers=1 --shards=1 --run_dir="$tmp/other-run"
# A module whose state dict does not load back cannot export: a job that exports as it runs is
# refused at start, with the reason.
sed -e 's|^def model():|class Unloadable(torch.nn.Module):\n    pass\n\n\ndef model():|' \
    "$src/tests/integration/testdata/ctr_bn_model.py" >"$tmp/unloadable.py"
cat >>"$tmp/unloadable.py" <<'PY'


def _refuse(self, *args, **kwargs):
    raise RuntimeError("this module's state cannot be loaded back")


Tower.load_state_dict = _refuse
PY
sed -e "s|$src/tests/integration/testdata/ctr_bn_model.py|$tmp/unloadable.py|" \
    -e 's|^seed: 3$|seed: 3\nexport { on: END }|' "$tmp/torch.textproto" >"$tmp/unloadable.textproto"
expect_refusal "cannot export.*this module's state cannot be loaded back" "" "$bin/syncopate" local \
  --job="$tmp/unloadable.textproto" --run_dir="$tmp/unloadable-run"
echo "export_test: passed"
