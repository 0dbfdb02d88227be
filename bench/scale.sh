#!/usr/bin/env bash
# `./dev scale`: checkpoints and exports at a real table's size, on this machine (issue 41 item 2).
# 1. A shard holding an Adagrad table of ROWS x 16 (more than 2 GiB of state: one protobuf message
#    cannot hold it) checkpoints in format 2 and a fresh shard restores it, rows checked.
# 2. EXPORT_ROWS rows of a dim-16 table in 3 shards' files export with `syncopate export` (peak
#    memory measured by /usr/bin/time) and read back with numpy.load(mmap_mode="r").
# Usage: scale.sh BIN_DIR SOURCE_DIR [--rows=20000000] [--export_rows=30000000] [--dir=DIR]
# Needs ~14 GiB of memory for step 1 at the default rows, and ~6 GB of disk under DIR.
set -euo pipefail
bin="$1"; src="$2"; shift 2
rows=20000000
export_rows=30000000
dir="${TMPDIR:-/tmp}/syncopate-scale"
for arg in "$@"; do
  case "$arg" in
    --rows=*) rows="${arg#*=}" ;;
    --export_rows=*) export_rows="${arg#*=}" ;;
    --dir=*) dir="${arg#*=}" ;;
    *) echo "scale.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
rm -rf "$dir"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "== a shard of $rows rows x 16, Adagrad"
"$bin/syncopate-checkpoint-bench" --mode=shard --rows="$rows" --dir="$dir/shard"
rm -rf "$dir/shard"
echo "== export of $export_rows rows x 16 from 3 shards' files"
"$bin/syncopate-checkpoint-bench" --mode=write --rows="$export_rows" --shards=3 --dir="$dir/ckpt"
du -sh "$dir/ckpt" | sed 's/^/checkpoint files: /'
/usr/bin/time -f "export_seconds=%e export_peak_rss_kib=%M" \
  "$bin/syncopate" export --from="$dir/ckpt" --out="$dir/export" --notorch_formats
du -sh "$dir/export" | sed 's/^/export: /'
/usr/bin/python3 - "$dir/export" "$export_rows" <<'PY'
import json, sys
import numpy as np
directory, rows = sys.argv[1], int(sys.argv[2])
manifest = json.load(open(f"{directory}/manifest.json"))
table = manifest["tables"][0]
count, previous = 0, None
for chunk in table["chunks"]:
    keys = np.load(f"{directory}/{chunk['keys']}", mmap_mode="r")
    values = np.load(f"{directory}/{chunk['rows']}", mmap_mode="r")
    assert isinstance(keys, np.memmap) and isinstance(values, np.memmap), "not memory-mapped"
    assert keys.shape[0] == values.shape[0] == int(chunk["count"]) and values.shape[1] == 16
    assert values.nbytes <= 1 << 30, f"a chunk of {values.nbytes} bytes"
    assert np.all(keys[1:] > keys[:-1]) and (previous is None or keys[0] > previous)
    # Row i is key i's: element j is (key % 1000003) + j / 2 (bench/checkpoint_scale.cc).
    sample = np.arange(0, len(keys), 9973)
    expected = (keys[sample] % np.uint64(1000003)).astype(np.float32)
    assert np.array_equal(values[sample, 3], expected + np.float32(1.5))
    previous = keys[-1]
    count += len(keys)
assert count == rows == int(table["count"]), (count, rows, table["count"])
print(f"numpy: {len(table['chunks'])} chunks memory-mapped, {count} rows in key order, rows match their keys")
PY
