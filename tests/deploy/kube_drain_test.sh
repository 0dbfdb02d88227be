#!/usr/bin/env bash
# Scenario: `kubectl drain` of the node that runs both parameter shards, mid-job, keeps at most one
# shard down at a time (the chart's shard PodDisruptionBudget, minAvailable 1), and the job
# completes. On cluster.sh's three nodes: the default job (kube_lib.sh's values; every worker
# step at least 40 ms, so the job lasts >= 75 s on any machine, and a checkpoint every 5 s, so that
# the drain falls inside the job) with both shards
# placed on syncnode-1 (a nodeSelector on a label only that node has when they are scheduled; the
# coordinator and the evaluator on syncnode-3, since the coordinator has no budget and a drain
# would evict it; the workers spread as the chart spreads them). Once both shards have written a
# checkpoint, the label moves to the other two nodes (a nodeSelector is not enforced on running
# pods) and `kubectl drain syncnode-1` runs. Checked:
#   - every second while the drain runs, the shards up (a Ready pod not being deleted, or the
#     shard's pod Succeeded): never fewer than 1 of 2 (LOGS/availability.txt, one line a second);
#   - the budget was contended: the drain was refused at least one shard eviction ("would violate
#     the pod's disruption budget") and retried; it returned 0 within its timeout;
#   - afterwards both shards run on other nodes, and each new shard restored its checkpoint (the
#     shards' volumes are hostPath directories of this machine, which every node shares);
#   - `helm test`: JOB_DONE, final accuracy >= MIN_ACCURACY; every Job Complete;
#   - `kubectl uncordon` makes the node schedulable again.
# Needs root and ./dev k8s (kube-proxy included). 4-4.5 min on the shared 2-core machine with the
# image cached (docs/measurements/kubernetes.md). Exit 77 (ctest: skipped, with the reason) without
# root or the binaries.
#   tests/deploy/kube_drain_test.sh [REPO_ROOT]
# Environment: MIN_ACCURACY (85), KEEP_LOGS_DIR (default ./kube-drain-test-logs).
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
# shellcheck source=tests/deploy/kube_lib.sh
source "$ROOT/tests/deploy/kube_lib.sh"
kube_cluster_preflight kube_drain_test
DRAINED=syncnode-1
drain_pid=""
teardown() {
  [[ -z $drain_pid ]] || kill "$drain_pid" 2>/dev/null || true
  kube_cluster_teardown
}
kube_on_exit teardown

kube_cluster_start
kube_install_shards_on "$DRAINED" "to drain"
# One line a shard pod: ID NAME node=NODE PHASE del=DELETION-TIME ready=READY (the markers keep
# the columns when a field is empty).
shard_pods() {
  kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=shard" -o jsonpath="$(
    printf '%s' '{range .items[*]}{.metadata.labels.syncopate\.dev/shard-id} {.metadata.name} ' \
      'node={.spec.nodeName} {.status.phase} del={.metadata.deletionTimestamp} ' \
      'ready={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')"
}
first="$(shard_pods)"

# A checkpoint of each shard before the drain (the coordinator asks every 5 s), for the new
# shards to restore.
kube_shards_checkpointed
progress="$(status | head -n 1)"
[[ $progress == *JOB_RUNNING* ]] || fail "the job is not running when the drain would start: $progress"
say "both shards checkpointed: $progress"

kube_shards_label_elsewhere "$DRAINED"
say "kubectl drain $DRAINED (both shards, and the workers there)"
drain_start=$SECONDS
# The binary itself in the background (not the function k), so that $! is kubectl's pid.
"$KUBECTL" --kubeconfig="$KUBECONFIG_FILE" drain "$DRAINED" --ignore-daemonsets \
  --delete-emptydir-data --timeout=300s >"$LOGS/drain.txt" 2>&1 &
drain_pid=$!
# Every second while the drain runs: which shards are up. A shard is up while a pod of it is Ready
# and not being deleted (what the budget counts), or once its pod has Succeeded (the job's end).
max_down=0 down_seconds=0 samples=0
: >"$LOGS/availability.txt"
while kill -0 "$drain_pid" 2>/dev/null; do
  pods="$(shard_pods)" || { sleep 1; continue; }
  up="$(awk '($4 == "Running" && $5 == "del=" && $6 == "ready=True") || $4 == "Succeeded" {
    print $1 }' <<<"$pods" | sort -u | tr '\n' ' ')"
  down=$((2 - $(wc -w <<<"$up")))
  printf '%4d s down=%d up=[%s] %s\n' $((SECONDS - drain_start)) "$down" "$up" \
    "$(tr '\n' ';' <<<"$pods")" >>"$LOGS/availability.txt"
  ((down <= max_down)) || max_down=$down
  ((down == 0)) || down_seconds=$((down_seconds + 1))
  samples=$((samples + 1))
  sleep 1
done
drain_rc=0
wait "$drain_pid" || drain_rc=$?
drain_pid=""
drain_seconds=$((SECONDS - drain_start))
((drain_rc == 0)) || fail "kubectl drain exited $drain_rc after $drain_seconds s: $(tail -n 5 "$LOGS/drain.txt")"
((max_down <= 1)) || fail "$max_down shards down at once during the drain (LOGS/availability.txt):
$(grep 'down=2' "$LOGS/availability.txt" | head -n 5)"
refusals="$(grep -c "$rel-syncopate-shard-.*disruption budget" "$LOGS/drain.txt" || true)"
((refusals > 0)) || fail "the drain was never refused a shard eviction: the budget was not contended"
say "drain returned 0 in $drain_seconds s; $samples samples, a shard down in $down_seconds, never both; $refusals shard eviction(s) refused by the budget"

# The new shards: on other nodes, each from its checkpoint.
after="$(shard_pods)"
for id in 0 1; do
  old_pod="$(awk -v id="$id" '$1 == id { print $2 }' <<<"$first")"
  read -r _ pod node _ <<<"$(awk -v id="$id" -v old="$old_pod" '$1 == id && $2 != old && $5 == "del="' \
    <<<"$after" | tail -n 1)"
  node="${node#node=}"
  [[ -n $node && $node != "$DRAINED" ]] || fail "shard $id was not moved off $DRAINED: $after"
  restored="$(kn logs "$pod" | grep -o "shard $id restored version [0-9]*" || true)"
  [[ -n $restored ]] || fail "the new shard $id ($pod) restored no checkpoint: $(kn logs "$pod" | head -n 20)"
  say "shard $id: $pod on $node, $restored"
done

say "helm test (waits for the end, reads the final status)"
kube_helm_test "$MIN_ACCURACY"
say "helm test: JOB_DONE, final test accuracy ${ACCURACY}%"
kube_check_completed
say "all 5 Jobs Complete, every pod Succeeded (restarts: $RESTARTS)"
k uncordon "$DRAINED" >/dev/null
[[ -z $(k get node "$DRAINED" -o jsonpath='{.spec.unschedulable}') ]] || fail "$DRAINED still cordoned"
say "$DRAINED uncordoned"
printf '%s\ndrain %d s, max shards down %d, seconds with a shard down %d of %d, refusals %d\n%s\n' \
  "$SUMMARY" "$drain_seconds" "$max_down" "$down_seconds" "$samples" "$refusals" "$RESTARTS" >"$LOGS/result.txt"
helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall"
say "PASS"
