#!/usr/bin/env bash
# Installs onnxruntime-node (CPU; version in tests/export/package.json) into a cache directory
# (never the repository) and prints that directory; score_onnx.cjs runs with it. The package
# carries its CPU binaries; its install script only fetches the CUDA provider from GitHub, which
# this network cannot reach, so scripts are skipped. Idempotent: a second run with the same
# package.json does nothing (~0 s); concurrent runs wait for the one installing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOOLS="${SYNCOPATE_CACHE:-/var/cache/syncopate}/onnx-tools"
command -v npm >/dev/null || { echo "onnx_tools: npm is missing (apt-get install npm)" >&2; exit 1; }
mkdir -p "$TOOLS"
exec 9>"$TOOLS/.lock"
flock -w 600 9 || { echo "onnx_tools: timed out waiting for $TOOLS/.lock" >&2; exit 1; }
if ! cmp -s "$HERE/package.json" "$TOOLS/package.json" ||
   [[ ! -f $TOOLS/node_modules/onnxruntime-node/package.json ]]; then
  cp "$HERE/package.json" "$TOOLS/package.json"
  rm -f "$TOOLS/package-lock.json"
  (cd "$TOOLS" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
fi
echo "$TOOLS"
