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
MIN_ACCURACY="${MIN_ACCURACY:-85}"
LOGS="${KEEP_LOGS_DIR:-$PWD/kube-node-test-logs}"
CP="$ROOT/tests/deploy/control_plane.sh"
NODE="$ROOT/tests/deploy/node.sh"
START=$SECONDS
say() { printf '[kube_node_test %4ds] %s\n' $((SECONDS - START)) "$*"; }
if [[ $(id -u) -ne 0 ]]; then echo "kube_node_test: SKIPPED: needs root (containerd, a bridge)" >&2; exit 77; fi
if ! "$CP" bin >/dev/null 2>&1; then
  echo "kube_node_test: SKIPPED: no Kubernetes binaries in the cache; build them once with ./dev k8s" >&2
  exit 77
fi
# One node per machine at a time (one bridge, one subnet): wait for another run to finish.
exec 9>/tmp/syncopate-kube-node-test.lock
flock -w 1500 9 || { echo "kube_node_test: another run held the node lock for 25 min" >&2; exit 1; }
TOOLS="$("$ROOT/tests/deploy/k8s_tools.sh")"
HELM="$TOOLS/layer/helm/helm"
KUBECTL="$TOOLS/layer/kubectl/kubectl"
TAG="kube-node-test-$$"
IMAGE="localhost/syncopate:$TAG"
rel=mnist
ns=syncopate
tmp="$(mktemp -d)"
mkdir -p "$LOGS"
cleanup() {
  local rc=$?
  set +e  # a failed command here must not skip stopping the node and the control plane
  trap - EXIT INT TERM
  say "collecting logs into $LOGS and tearing down (exit code so far $rc)"
  if [[ -f $tmp/cp/kubeconfig ]]; then
    k get pods -A -o wide >"$LOGS/pods.txt" 2>&1 || true
    k -n "$ns" get jobs -o wide >"$LOGS/jobs.txt" 2>&1 || true
    for pod in $(k -n "$ns" get pods -o name 2>/dev/null); do
      k -n "$ns" logs "$pod" --all-containers >"$LOGS/${pod#pod/}.log" 2>&1 || true
    done
  fi
  cp -r "$tmp/node/logs" "$LOGS/node" 2>/dev/null || true
  cp -r "$tmp/cp/logs" "$LOGS/control-plane" 2>/dev/null || true
  "$NODE" stop "$tmp/node" >/dev/null 2>&1 || true
  "$CP" stop "$tmp/cp" || true
  podman rmi "$IMAGE" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  say "done in $((SECONDS - START)) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { say "FAIL: $*"; exit 1; }
k() { "$KUBECTL" --kubeconfig="$tmp/cp/kubeconfig" "$@"; }
kn() { k -n "$ns" "$@"; }
helm() { "$HELM" --kubeconfig="$tmp/cp/kubeconfig" "$@" 2> >(grep -v 'found symbolic link' >&2); }

say "building $IMAGE with podman (docker/Dockerfile)"
# 9>&-: the podman service this may start outlives the test; with fd 9 it would hold the node
# lock forever and the next run would wait its 25 minutes (seen 2026-11-26: a 23-minute stall).
eval "$("$ROOT/docker/podman-setup.sh" 9>&- | tail -n 1)"
podman build --pull=never --format docker -f "$ROOT/docker/Dockerfile" -t "$IMAGE" "$ROOT" \
  >"$LOGS/build.log" 2>&1 || { tail -n 30 "$LOGS/build.log"; fail "image build failed"; }

say "control plane, then a node (kubelet + containerd + CNI + DNS)"
"$CP" start "$tmp/cp" >/dev/null
"$NODE" start "$tmp/node" "$tmp/cp"
"$NODE" import "$tmp/node" "$IMAGE"
say "image imported into the node's containerd"

# Checkpoint volumes: hostPath PersistentVolumes on the node (no provisioner here).
"$CP" storage "$tmp/cp" local 1Gi 2 --default

# The chart's defaults, with CPU requests a 2-core machine can schedule and a short linger.
cat >"$tmp/values.yaml" <<EOF
image: {repository: localhost/syncopate, tag: "$TAG", pullPolicy: Never}
coordinator:
  lingerSeconds: 60
  resources: {requests: {cpu: 50m, memory: 128Mi}}
shards:
  resources: {requests: {cpu: 50m, memory: 128Mi}}
workers:
  resources: {requests: {cpu: 50m, memory: 128Mi}}
evaluator:
  resources: {requests: {cpu: 50m, memory: 128Mi}}
test: {timeoutSeconds: 900}
EOF
say "helm install --wait (the default job: 4 workers, 2 shards, 8 epochs)"
helm install "$rel" "$ROOT/helm/syncopate" -n "$ns" --create-namespace -f "$tmp/values.yaml" \
  --wait --timeout 5m >"$LOGS/install.txt" || fail "helm install --wait: $(cat "$LOGS/install.txt")"
say "helm install --wait returned"

status() { kn exec "job/$rel-syncopate-coordinator" -- syncopate status --coordinator=127.0.0.1:7070 2>/dev/null; }
deadline=$((SECONDS + 600))
until status | grep -q 'JOB_RUNNING'; do
  ((SECONDS < deadline)) || { kn get pods -o wide; fail "the job never started running"; }
  sleep 3
done
say "training: $(status | head -n 1)"

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
helm test "$rel" -n "$ns" --logs --timeout 15m >"$LOGS/helm-test.txt" 2>&1 ||
  { tail -n 30 "$LOGS/helm-test.txt"; fail "helm test"; }
grep -q 'JOB_DONE' "$LOGS/helm-test.txt" || fail "helm test passed without JOB_DONE in its output"
accuracy="$(sed -n 's/^last evaluation: accuracy \([0-9.]*\)%.*(final).*/\1/p' "$LOGS/helm-test.txt" | tail -n 1)"
[[ -n $accuracy ]] || fail "no final accuracy in helm test's output"
awk -v a="$accuracy" -v m="$MIN_ACCURACY" 'BEGIN { exit !(a >= m) }' || fail "final accuracy ${accuracy}% < ${MIN_ACCURACY}%"
say "helm test: JOB_DONE, final test accuracy ${accuracy}%"

# Every Job completes (the coordinator after its linger), and nothing is started again.
for job in worker evaluator shard-0 shard-1 coordinator; do
  kn wait --for=condition=complete --timeout=180s "job/$rel-syncopate-$job" >/dev/null ||
    fail "Job $job not Complete: $(kn get job "$rel-syncopate-$job" -o jsonpath='{.status}')"
done
sleep 5
running="$(kn get pods -l "app.kubernetes.io/instance=$rel" --field-selector=status.phase!=Succeeded -o name | grep -v test-status || true)"
[[ -z $running ]] || fail "pods not Succeeded after the job: $running"
restarts="$(kn get pods -l "app.kubernetes.io/instance=$rel" -o jsonpath='{range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}')"
summary="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=coordinator" \
  -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.message}')"
[[ $summary == "job fashion-mnist-mlp JOB_DONE"* ]] || fail "coordinator termination message: '$summary'"
ls "$tmp"/cp/volumes/*/ | grep -q . || fail "no checkpoint files on the shards' volumes"
say "all 5 Jobs Complete, every pod Succeeded (restarts: $restarts)"
say "termination message: $summary"
printf '%s\n%s\n' "$summary" "$restarts" >"$LOGS/result.txt"

helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall"
say "PASS"
