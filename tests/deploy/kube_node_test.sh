#!/usr/bin/env bash
# Scenario: the default job trains to completion in real pods on Kubernetes. The control plane of
# control_plane.sh plus a real node (node.sh: kubelet 1.20, containerd 1.6, runc, the CNI bridge,
# a DNS fed from the API), the project image built with podman and imported into containerd (no
# registry); `helm install --wait` with the chart's defaults (the default job: 4 workers, 2 shards,
# 8 epochs of Fashion-MNIST) but small CPU requests for a 2-core machine; a 5th worker added
# mid-job (kubectl patch of the worker Job's parallelism) joins the running job; a pod without
# the join token is refused and counted; `helm test`
# reads the final status (JOB_DONE, final accuracy >= MIN_ACCURACY); every Job ends Complete, the
# coordinator's summary is its termination message, the shards' checkpoints are on their
# volumes; `helm uninstall` cleans up.
# Needs root (containerd, the bridge) and ./dev k8s. ~5-8 min on the shared 2-core machine (image
# cached; a cold image build adds minutes). Exit 77 (ctest: skipped) without root or the binaries.
#   tests/deploy/kube_node_test.sh [REPO_ROOT]
# Environment: MIN_ACCURACY (85), KEEP_LOGS_DIR (default ./kube-node-test-logs).
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
CP="$ROOT/tests/deploy/harness/control_plane.sh"
NODE="$ROOT/tests/deploy/harness/node.sh"
# shellcheck source=tests/deploy/kube_lib.sh
source "$ROOT/tests/deploy/kube_lib.sh"
kube_preflight kube_node_test "containerd, a bridge"
tmp="$(mktemp -d)"
KUBECONFIG_FILE="$tmp/cp/kubeconfig"
TMP_VALUES="$tmp/values.yaml"
mkdir -p "$LOGS"
teardown() {
  say "collecting logs into $LOGS, stopping the node and the control plane"
  kube_collect_logs
  cp -r "$tmp/node/logs" "$LOGS/node" 2>/dev/null || true
  cp -r "$tmp/cp/logs" "$LOGS/control-plane" 2>/dev/null || true
  "$NODE" stop "$tmp/node" >/dev/null 2>&1 || true
  "$CP" stop "$tmp/cp" || true
}
kube_on_exit teardown

say "building $IMAGE with podman (docker/Dockerfile)"
kube_build_image "$IMAGE"

say "control plane, then a node (kubelet + containerd + CNI + DNS)"
# 9>&-: the daemons must not hold the node lock, or a run after a kill -9 of this one waits for them.
"$CP" start "$tmp/cp" >/dev/null 9>&-
"$NODE" start "$tmp/node" "$tmp/cp" 9>&-
"$NODE" import "$tmp/node" "$IMAGE"
say "image imported into the node's containerd"

# Paced (kube_paced): the job lasts >= 1,875 x 30 ms = 56 s on any machine, so the fifth worker
# below joins it while it runs.
kube_paced "$tmp/paced.yaml" 30ms
kube_install "$tmp/cp" "$TAG" "the default job: 4 workers, 2 shards, 8 epochs, paced to >= 56 s" -f "$tmp/paced.yaml"

# A fifth worker, mid-job: the Job starts one more pod and the coordinator admits it.
kn patch job "$rel-syncopate-worker" --type=merge -p '{"spec":{"parallelism":5}}' >/dev/null
deadline=$((SECONDS + 180))
until [[ $(status | awk '$3 == "worker"' | wc -l) -ge 5 ]]; do
  if status | grep -q 'JOB_DONE\|JOB_FINISHING'; then fail "the job ended before the fifth worker joined"; fi
  ((SECONDS < deadline)) || fail "a fifth worker never joined: $(status)"
  sleep 2
done
say "a fifth worker joined the running job (parallelism 4 -> 5)"

# A stranger in the cluster: a pod of the same image, not of the release, without the token. The
# bridge network does not enforce the NetworkPolicy, so it reaches the coordinator; the join
# token refuses it (UNAUTHENTICATED: exit 3, a permanent refusal, with one line), and the refusal
# is counted.
kn run intruder --image="$IMAGE" --image-pull-policy=Never --restart=Never --command -- \
  syncopate-worker --coordinator="$rel-syncopate-coordinator:7070" --name=intruder >/dev/null
deadline=$((SECONDS + 120))
until [[ $(kn get pod intruder -o jsonpath='{.status.phase}') == Failed ]]; do
  ((SECONDS < deadline)) || fail "the intruder pod did not fail: $(kn get pod intruder -o wide)"
  sleep 2
done
kn logs intruder | grep -q 'missing join token' || fail "intruder: $(kn logs intruder | tail -n 3)"
code="$(kn get pod intruder -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')"
[[ $code == 3 ]] || fail "the intruder exited $code, want 3 (a permanent refusal)"
metrics="$(kn exec "job/$rel-syncopate-coordinator" -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/9100 &&
  printf "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n" >&3 && cat <&3')"
grep -q '^syncopate_coordinator_rejections_total{reason="unauthenticated",session="worker"} 1' <<<"$metrics" ||
  fail "expected exactly one refused worker session (the intruder's): $(grep rejections_total <<<"$metrics")
$(kn logs "job/$rel-syncopate-coordinator" | grep refused)"
kn delete pod intruder --wait=false >/dev/null
say "an intruder pod without the join token: refused (missing join token), exit 3, counted"

# A command that fails inside the coordinator's container (what an exec probe does while the
# coordinator exits) must not write the container's termination message: only PID 1 does.
kn exec "job/$rel-syncopate-coordinator" -- syncopate health --address=127.0.0.1:1 >/dev/null 2>&1 &&
  fail "syncopate health against a closed port succeeded"

say "helm test (waits for the end, reads the final status)"
kube_helm_test "$MIN_ACCURACY"
say "helm test: JOB_DONE, final test accuracy ${ACCURACY}%"

# Every Job completes (the coordinator after its linger), and nothing is started again.
kube_check_completed
ls "$tmp"/cp/volumes/*/ | grep -q . || fail "no checkpoint files on the shards' volumes"
say "all 5 Jobs Complete, every pod Succeeded (restarts: $RESTARTS)"
say "termination message: $SUMMARY"
printf '%s\n%s\n' "$SUMMARY" "$RESTARTS" >"$LOGS/result.txt"

helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall"
say "PASS"
