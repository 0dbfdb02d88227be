#!/usr/bin/env bash
# Exports published as versions (issue 41 item 3):
# 1. a job with `export { on: CHECKPOINT on: END }` publishes versions of RUN/checkpoints/exports as
#    it runs: at most `keep` of them, each with READY, `current` naming the final one, and the
#    run's report and last line naming it;
# 2. `syncopate export --into` killed with SIGKILL at 20 random moments while a reader polls
#    `current`: the reader never sees a partial version, and the next publish leaves no partial
#    directory behind.
# Usage: export_publish_test.sh BIN_DIR SOURCE_DIR PYTHON
set -euo pipefail
bin="$1"
src="$2"
python="${3:-/usr/bin/python3}"
tmp="$(mktemp -d)"
reader_pid=""
trap '[[ -n "$reader_pid" ]] && kill "$reader_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export PYTHONPATH="$src/python"

# 1. In-run exports of the default MLP, small: checkpoints every second.
sed -e 's/^seed: 1$/seed: 1\ncheckpoint_interval_seconds: 1\nexport { on: CHECKPOINT on: END keep: 2 }/' \
  "$src/examples/fashion_mnist_mlp.textproto" >"$tmp/job.textproto"
grep -q "export { on: CHECKPOINT" "$tmp/job.textproto" || fail "could not add export to the job"
# Slowed 4x so the run lasts several checkpoints and polls.
"$bin/syncopate" local --job="$tmp/job.textproto" --epochs=3 --train_limit=20000 --test_limit=2000 \
  --slowdowns=4,4,4,4 --run_dir="$tmp/run" >"$tmp/run.out" 2>&1 ||
  fail "the job failed: $(tail -3 "$tmp/run.out")"
exports="$tmp/run/checkpoints/exports"
[[ -L "$exports/current" ]] || fail "no $exports/current"
current="$(readlink "$exports/current")"
versions=($(cd "$exports" && ls -d [0-9]*))
echo "in-run exports: ${versions[*]}; current -> $current"
[[ ${#versions[@]} -eq 2 ]] || fail "keep: 2 but ${#versions[@]} versions"
published=$(grep -c "export published" "$tmp/run/logs/coordinator.log")
echo "published during the run and at its end: $published"
[[ $published -ge 2 ]] || fail "only $published export published (one during the run and the final one expected)"
[[ "${versions[-1]}" == "$current" ]] || fail "current is not the newest version"
[[ -f "$exports/$current/READY" && -f "$exports/$current/model.pt" ]] || fail "$current is incomplete"
grep -q "^export: $exports/$current (latest, version" "$tmp/run.out" ||
  fail "syncopate local did not name the export: $(tail -2 "$tmp/run.out")"
grep -q "latest export" "$tmp/run/report.md" || fail "report.md does not name the export"
# The final version holds the final parameters: what the last checkpoints hold.
"$bin/syncopate" export --from="$tmp/run/checkpoints" --out="$tmp/again" --notorch_formats >/dev/null 2>&1
for f in manifest.json dense.safetensors job.textproto; do
  cmp -s "$exports/$current/$f" "$tmp/again/$f" || fail "the final export's $f differs from an export of the last checkpoints"
done

# 2. Kill -9 at random moments; a reader polls `current` all along.
versions_dir="$tmp/versions"
"$python" "$src/tests/integration/export_reader_check.py" "$versions_dir" "$tmp/reader.stop" \
  >"$tmp/reader.out" 2>&1 &
reader_pid=$!
RANDOM=7
for i in $(seq 1 20); do
  "$bin/syncopate" export --from="$tmp/run/checkpoints" --into="$versions_dir" --keep=3 \
    >/dev/null 2>&1 &
  victim=$!
  sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
  [[ $((i % 4)) -eq 0 ]] && sleep 1  # some kills land late (in model.pt, the rename, the swap)
  kill -9 "$victim" 2>/dev/null || true
  wait "$victim" 2>/dev/null || true
done
"$bin/syncopate" export --from="$tmp/run/checkpoints" --into="$versions_dir" --keep=3 >/dev/null 2>&1 ||
  fail "a publish after the kills failed"
touch "$tmp/reader.stop"
wait "$reader_pid" || fail "the reader saw a partial version: $(cat "$tmp/reader.out")"
reader_pid=""
cat "$tmp/reader.out"
if ls -a "$versions_dir" | grep -q "partial"; then fail "partial directories left: $(ls -a "$versions_dir")"; fi
count=$(cd "$versions_dir" && ls -d [0-9]* | wc -l)
[[ $count -le 3 ]] || fail "--keep=3 but $count versions remain"
echo "export_publish_test: passed"
