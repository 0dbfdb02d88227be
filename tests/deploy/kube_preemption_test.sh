#!/usr/bin/env bash
# Scenario: two training jobs share cluster.sh's three nodes (2 CPUs each); a high-priority
# release arrives while a low-priority one trains and preempts some of its workers, and both
# complete. Two PriorityClasses: training-preemptible (100) for the low release's workers,
# training-critical (1000) for everything else (the chart's per-component priorityClassName).
#   - release `lo` (namespace lo): the default job paced to >= 112 s, 4 workers requesting 1 CPU each
#     (4.2 of the 6 CPUs with the other pods' 50m);
#   - once it trains, release `hi` (namespace hi): the default job (8 epochs), 3 workers
#     requesting 1 CPU each, which fit only if the scheduler preempts low-priority workers.
# Checked: at least one of lo's workers is preempted (the scheduler's `Preempted` event, the pod
# deleted) and none of its other pods is; hi's workers all run; both jobs reach JOB_DONE with a
# final accuracy >= MIN_ACCURACY (`helm test` of each; the coordinator re-issues a preempted
# worker's leases, and lo's worker Job starts new pods that join once hi's end frees the CPUs);
# every Job of both Complete.
# Needs root and ./dev k8s (kube-proxy included). ~6.5 min on the shared 2-core machine with the
# image cached. Exit 77 (ctest: skipped, with the reason) without root or the binaries.
#   tests/deploy/kube_preemption_test.sh [REPO_ROOT]
# Environment: MIN_ACCURACY (85), KEEP_LOGS_DIR (default ./kube-preemption-test-logs).
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
# shellcheck source=tests/deploy/kube_lib.sh
source "$ROOT/tests/deploy/kube_lib.sh"
kube_cluster_preflight kube_preemption_test
kube_on_exit kube_cluster_teardown

kube_cluster_start
# Four volumes: two releases of two shards each.
"$ROOT/tests/deploy/harness/control_plane.sh" storage "$STATE/cp" local 1Gi 4 --default
k apply -f - >/dev/null <<EOF
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-preemptible}
value: 100
description: "workers of jobs that yield to others (kube_preemption_test)"
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-critical}
value: 1000
description: "coordinators, shards and high-priority workers (kube_preemption_test)"
EOF
# values FILE WORKERS WORKER_CLASS: the release's own values on top of kube_values.
values() {
  cat >"$1" <<EOF
coordinator: {priorityClassName: training-critical, lingerSeconds: 120}
shards: {priorityClassName: training-critical}
evaluator: {priorityClassName: training-critical}
workers:
  replicas: $2
  priorityClassName: $3
  resources: {requests: {cpu: "1", memory: 128Mi}}
EOF
}
# lo is paced (kube_paced): it lasts at least 1,875 x 60 ms = 112 s on any machine, so hi's
# install and the preemption fall inside it.
kube_paced "$tmp/paced.yaml" 60ms

rel=lo ns=lo
values "$tmp/lo.yaml" 4 training-preemptible
kube_install "$STATE/cp" "$TAG" "lo: paced to >= 112 s, 4 preemptible workers of 1 CPU" -f "$tmp/lo.yaml" \
  -f "$tmp/paced.yaml"
lo_pods="$(kn get pods -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.app\.kubernetes\.io/component} {.spec.nodeName}{"\n"}{end}')"
say "lo placement: $(tr '\n' ';' <<<"$lo_pods")"
[[ $(grep -c ' worker ' <<<"$lo_pods") == 4 ]] || fail "lo has not 4 workers running: $lo_pods"

rel=hi ns=hi
values "$tmp/hi.yaml" 3 training-critical
kube_install "$STATE/cp" "$TAG" "hi: 8 epochs, 3 critical workers of 1 CPU" -f "$tmp/hi.yaml"
hi_pods="$(kn get pods -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.app\.kubernetes\.io/component} {.spec.nodeName} {.status.phase}{"\n"}{end}')"
say "hi placement: $(tr '\n' ';' <<<"$hi_pods")"

# The victims: lo's pods the scheduler preempted (its `Preempted` events), all workers.
deadline=$((SECONDS + 120))
until preempted="$(k get events -n lo --field-selector reason=Preempted \
    -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}' | sort -u)"; [[ -n $preempted ]]; do
  ((SECONDS < deadline)) || fail "no lo pod was preempted: hi $(tr '\n' ';' <<<"$hi_pods")"
  sleep 2
done
k get events -n lo --field-selector reason=Preempted -o jsonpath='{range .items[*]}{.involvedObject.name}: {.message}{"\n"}{end}' \
  >"$LOGS/preempted.txt"
for pod in $preempted; do
  grep -q "^$pod worker " <<<"$lo_pods" || fail "lo's $pod was preempted and is not a worker: $(cat "$LOGS/preempted.txt")"
done
say "preempted from lo: $(tr '\n' ' ' <<<"$preempted")($(head -n 1 "$LOGS/preempted.txt"))"
# hi is not paced: its 3 workers ran (Running, or Succeeded if it already ended).
deadline=$((SECONDS + 300))
until [[ $(kn get pods -l app.kubernetes.io/component=worker -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
           grep -cE '^(Running|Succeeded)$') == 3 ]]; do
  ((SECONDS < deadline)) || fail "hi's 3 workers did not all run: $(kn get pods -o wide)"
  sleep 2
done
say "hi: 3 workers ran; lo: $(rel=lo; ns=lo; status | head -n 1)"

# Both `helm test`s first: each coordinator serves its final status for lingerSeconds (120 s
# here) after its end, and the first job's end can come long before the second's.
for rel in hi lo; do
  ns=$rel
  say "helm test $rel (waits for the end, reads the final status)"
  kube_helm_test "$MIN_ACCURACY"
  mv "$LOGS/helm-test.txt" "$LOGS/helm-test-$rel.txt"
  say "$rel: JOB_DONE, final test accuracy ${ACCURACY}%"
done
for rel in hi lo; do
  ns=$rel
  kube_check_completed
  say "$rel: all 5 Jobs Complete, every pod Succeeded (restarts: $RESTARTS)"
  printf '%s: %s\n' "$rel" "$SUMMARY" >>"$LOGS/result.txt"
  helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall $rel"
done
printf 'preempted from lo: %s\n' "$(tr '\n' ' ' <<<"$preempted")" >>"$LOGS/result.txt"
say "$(tr '\n' ' ' <"$LOGS/result.txt")"
say "PASS"
