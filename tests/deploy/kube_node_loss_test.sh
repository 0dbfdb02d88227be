#!/usr/bin/env bash
# Scenario: the node that runs both parameter shards and at least one worker is lost mid-job,
# and comes back after the job has moved on without it. On cluster.sh's three nodes: the default
# job (kube_lib.sh's values; every worker step at least 40 ms, so the job lasts >= 75 s on any
# machine, and a checkpoint every 5 s, so that the loss falls inside the job), nodeLoss.tolerationSeconds 30, both shards placed on syncnode-1 (a
# nodeSelector on a label only that node has when they are scheduled; the coordinator and the
# evaluator on syncnode-3), the workers spread as the chart spreads them. Once both shards have
# written a checkpoint, the label moves to the other two nodes and `cluster.sh freeze 1` cuts
# syncnode-1 off the underlay and freezes its kubelet, containerd, kube-proxy and containers (a
# machine that hangs or drops off the network: nothing is stopped, nothing answers). Checked:
#   - the node goes NotReady; after the tolerations its pods are deleted and their Jobs start
#     replacements on the other nodes; each new shard restores its checkpoint (the shards' volumes
#     are hostPath directories of this machine, which every node shares: a stand-in for network
#     storage) and training resumes within 120 s of the freeze (LOGS/timeline.txt);
#   - the node thaws while the job still runs: the stale shard processes, which still hold the
#     parameters of the moment they froze, find their checkpoint directories claimed by their
#     replacements and exit 4 (superseded) or, when their kubelet's SIGTERM comes first, 143;
#     never 0, which a shard's Job would count as its completion (LOGS/pod-watch.txt; a kubelet
#     may delete the pod without publishing its last state, and then no code is checked);
#   - checkpoint versions on disk stay monotone: the shards' volumes, sampled every second from
#     before the freeze to the end, gain only files whose version is above every file the volume
#     held before (LOGS/checkpoint-writes.txt). A stale shard's write, at its version of the
#     freeze, breaks that order unless its replacement had not yet passed that version (then
#     the replacement's next file does); the exit codes above say whether it wrote at all;
#   - `helm test`: JOB_DONE, final accuracy >= MIN_ACCURACY; every Job Complete; the node Ready.
# Needs root and ./dev k8s (kube-proxy included). ~5 min on the shared 2-core machine with the
# image cached (docs/measurements/kubernetes.md). Exit 77 (ctest: skipped, with the reason)
# without root or the binaries.
#   tests/deploy/kube_node_loss_test.sh [REPO_ROOT]
# Environment: MIN_ACCURACY (85), KEEP_LOGS_DIR (default ./kube-node-loss-test-logs).
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
# shellcheck source=tests/deploy/kube_lib.sh
source "$ROOT/tests/deploy/kube_lib.sh"
# Opt-in until a flake is understood: in 1 run of 6 (2026-12-02) the controller manager marked the
# frozen node NotReady but evicted none of its pods within 300 s (not diagnosed).
if [[ ${SYNCOPATE_NODE_LOSS_TEST:-} != 1 ]]; then
  echo "kube_node_loss_test: SKIPPED: opt-in (SYNCOPATE_NODE_LOSS_TEST=1): 1 run in 6 saw no eviction from the lost node within 300 s, not yet diagnosed" >&2
  exit 77
fi
kube_cluster_preflight kube_node_loss_test
LOST=1
LOST_NODE=syncnode-$LOST
TOLERATION_SECONDS=30
MAX_STALL_SECONDS=120
frozen=false watch_pid="" disk_pid="" nodes_pid=""
teardown() {
  local pid
  for pid in $watch_pid $disk_pid $nodes_pid; do kill "$pid" 2>/dev/null || true; done
  ! $frozen || "$CLUSTER" thaw "$LOST" || true
  kube_cluster_teardown
}
kube_on_exit teardown

kube_cluster_start
kube_install_shards_on "$LOST_NODE" "to lose" --set nodeLoss.tolerationSeconds="$TOLERATION_SECONDS"
# component=NAME pods: NAME NODE, one a line.
pods_of() {
  kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}'
}
old_shards="$(pods_of shard)"
old_workers="$(pods_of worker | awk -v n="$LOST_NODE" '$2 == n { print $1 }')"
[[ -n $old_workers ]] || fail "no worker on $LOST_NODE: $(pods_of worker | tr '\n' ' ')"

# Every change of every pod of the release, from here on: NAME NODE PHASE del=DELETION
# exit=CODES why=MESSAGE (the container's termination: its exit code and message). Wildcards,
# not {range}: kubectl's range fails on a pod without containerStatuses yet and ends the watch.
"$KUBECTL" --kubeconfig="$KUBECONFIG_FILE" -n "$ns" get pods -l "app.kubernetes.io/instance=$rel" -w \
  -o jsonpath='{.metadata.name} {.spec.nodeName} {.status.phase} del={.metadata.deletionTimestamp} exit={.status.containerStatuses[*].state.terminated.exitCode} why={.status.containerStatuses[*].state.terminated.message}{"\n"}' \
  >"$LOGS/pod-watch.txt" 2>&1 &
watch_pid=$!
# Every second: each shard's checkpoint files and claim in the two volumes (a shard's volume is
# whichever of the two its claim bound).
volumes=("$STATE"/cp/volumes/local-*)
(
  while :; do
    for v in "${volumes[@]}"; do
      for f in "$v"/shard-*-v*.ckpt; do
        [[ -e $f ]] && printf '%s %s %s\n' "$SECONDS" "${v##*/}" "${f##*/}"
      done
    done
    sleep 1
  done
) >"$LOGS/checkpoints.txt" 2>/dev/null &
disk_pid=$!

# Issue 57 item 2's evidence, every 2 s: each node's Ready condition (status, reason, last
# heartbeat) and the lost node's taints. The node lifecycle controller stops evicting in a zone
# where every node is NotReady (FullDisruption; with 3 nodes PartialDisruption needs more than 2
# unhealthy, so it cannot happen): if the other nodes' heartbeats lapse too, nothing is evicted.
(
  while :; do
    printf '%s ' "$SECONDS"
    k get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}@{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime} {end}' 2>&1
    printf 'taints(%s)=%s\n' "$LOST_NODE" "$(k get node "$LOST_NODE" -o jsonpath='{.spec.taints[*].key}' 2>&1)"
    sleep 2
  done
) >"$LOGS/nodes.txt" 2>/dev/null &
nodes_pid=$!
# Why no pod was evicted, if none was: the node samples above and the controller's zone states.
no_eviction_evidence() {
  echo "nodes (LOGS/nodes.txt, last 5):"
  tail -n 5 "$LOGS/nodes.txt"
  echo "node lifecycle controller:"
  grep -hE 'disruption mode|is now in state|NoExecute|Evict|MarkPodsNotReady' \
    "$STATE"/cp/logs/kube-controller-manager.log 2>/dev/null | tail -n 15 || true
}

kube_shards_checkpointed
kube_shards_label_elsewhere "$LOST_NODE"
# The examples and the elapsed seconds in a status line (the first line of `syncopate status`).
examples_in() { sed -n 's/.*, \([0-9]*\) examples,.*/\1/p' <<<"$1"; }
examples() { examples_in "$(status | head -n 1)"; }
elapsed() { sed -n 's/.*JOB_[A-Z]*, \([0-9.]*\) s,.*/\1/p' <<<"$1"; }
before="$(status | head -n 1)"
[[ $before == *JOB_RUNNING* ]] || fail "the job is not running when the node would be lost: $before"
e0="$(examples)"
say "both shards checkpointed: $before"

timeline() { printf '%4d s %s\n' $((SECONDS - t0)) "$*" | tee -a "$LOGS/timeline.txt"; }
: >"$LOGS/timeline.txt"
t0=$SECONDS
"$CLUSTER" freeze "$LOST"
frozen=true
timeline "freeze $LOST_NODE (shards: $(awk '{print $1}' <<<"$old_shards" | tr '\n' ' ')workers: $(tr '\n' ' ' <<<"$old_workers"))"
ready() { k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
until [[ $(ready "$LOST_NODE") != True ]]; do
  ((SECONDS - t0 < 180)) || fail "$LOST_NODE still Ready 180 s after the freeze"
  sleep 1
done
timeline "$LOST_NODE NotReady ($(ready "$LOST_NODE"))"
# The replacements: a shard pod of each id not in old_shards, Running, whose log says it restored.
restored=()
for id in 0 1; do
  until
    pod="$(kn get pods -l "app.kubernetes.io/instance=$rel,syncopate.dev/shard-id=$id" \
      -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{"\n"}{end}' |
      awk -v old="$old_shards" 'BEGIN { n = split(old, o, "\n"); for (i = 1; i <= n; i++) { split(o[i], f, " "); seen[f[1]] = 1 } }
        !($1 in seen) && $3 == "Running" { print $1, $2 }' | head -n 1)"
    [[ -n $pod ]] && kn logs "${pod% *}" 2>/dev/null | grep -q "shard $id restored version"
  do
    ((SECONDS - t0 < 300)) || fail "no replacement of shard $id restored within 300 s: $(kn get pods -o wide; no_eviction_evidence)"
    sleep 1
  done
  restored+=("$pod")
  timeline "shard $id replaced: ${pod% *} on ${pod#* }, $(kn logs "${pod% *}" | grep -o "shard $id restored version [0-9]*")"
done
for pod in "${restored[@]}"; do [[ ${pod#* } != "$LOST_NODE" ]] || fail "a replacement is on the lost node: $pod"; done
until [[ $(examples) -gt $((e0 + 10000)) ]]; do
  ((SECONDS - t0 < 300)) || fail "training did not resume within 300 s of the freeze: $(status | head -n 1)"
  sleep 1
done
stall=$((SECONDS - t0))
resumed="$(status | head -n 1)"
timeline "training resumed: $resumed"
((stall <= MAX_STALL_SECONDS)) || fail "training resumed $stall s after the freeze (> $MAX_STALL_SECONDS s)"
status | grep -q JOB_RUNNING || fail "the job ended before the node came back: the thaw would test nothing"

"$CLUSTER" thaw "$LOST"
frozen=false
t_thaw=$SECONDS
timeline "thaw $LOST_NODE"
until [[ $(ready "$LOST_NODE") == True ]]; do
  ((SECONDS - t_thaw < 180)) || fail "$LOST_NODE not Ready 180 s after the thaw"
  sleep 1
done
timeline "$LOST_NODE Ready"
# The stale pods go away once their kubelet has stopped them; their last status says how.
for pod in $(awk '{print $1}' <<<"$old_shards") $old_workers; do
  until ! kn get pod "$pod" >/dev/null 2>&1; do
    ((SECONDS - t_thaw < 180)) || fail "stale pod $pod still exists 180 s after the thaw"
    sleep 1
  done
done
timeline "stale pods gone"
# The shards' gradient counts (a stale worker's push from before the freeze is refused: the
# coordinator removed it as silent, so the shards answer not_member; or dropped as stale).
status >"$LOGS/status-after-thaw.txt" || true
kill "$watch_pid" 2>/dev/null || true
watch_pid=""
stale_exits=""
# The exit code of POD's last container termination the watch saw ("" if none).
last_exit() {
  awk -v p="$1" '$1 == p { for (i = 1; i <= NF; i++) if ($i ~ /^exit=[0-9]/) c = substr($i, 6) } END { print c }' \
    "$LOGS/pod-watch.txt"
}
# shellcheck disable=SC2013  # pod names have no spaces
for pod in $(awk '{print $1}' <<<"$old_shards"); do
  code="$(last_exit "$pod")"
  why="$(grep "^$pod " "$LOGS/pod-watch.txt" | grep -o 'superseded: .*' | tail -n 1 | cut -c 1-120 || true)"
  # A kubelet back from a lost node may delete a pod it has stopped without publishing the last
  # container state first (seen once in five runs): then no exit code is known, and what proves
  # the fence is the checkpoint order below.
  [[ -z $code || $code == 4 || $code == 143 ]] || fail "stale shard $pod exited $code, not 4 (superseded) or 143 (SIGTERM)"
  [[ $code != 4 || -n $why ]] || fail "stale shard $pod exited 4 without saying it was superseded"
  stale_exits+="$pod=${code:-unseen} "
  timeline "stale shard $pod exited ${code:-(not seen)}${why:+ ($why)}"
done
for pod in $old_workers; do
  code="$(last_exit "$pod")"
  timeline "stale worker $pod exited ${code:-(not seen)}"
done

# Workers the coordinator removed as stalled after the freeze (a healthy worker that could not step
# because a shard was away must not be: CoordinatorCore::TimeOutStalledWorkers).
kn logs "job/$rel-syncopate-coordinator" | grep 'made no step within\|registered at\|disconnected\|left:' \
  >"$LOGS/coordinator-membership.txt" || true
stalled_removals="$(grep -c 'made no step within' "$LOGS/coordinator-membership.txt" || true)"
timeline "workers removed as stalled: $stalled_removals"

say "helm test (waits for the end, reads the final status)"
kube_helm_test "$MIN_ACCURACY"
say "helm test: JOB_DONE, final test accuracy ${ACCURACY}%"
kube_check_completed
kill "$disk_pid" 2>/dev/null || true
disk_pid=""
# Per volume, in the order the files first appeared (sampled every second): each new checkpoint
# file has a higher version than every file the volume held before. A stale shard's write (at its
# version of the freeze) breaks that order unless its replacement had not yet passed that version.
awk '{ v = $3; sub(/.*-v/, "", v); sub(/\.ckpt$/, "", v); v += 0
       if (!(($2, $3) in seen)) { seen[$2, $3] = 1; print $1, $2, v } }' "$LOGS/checkpoints.txt" |
  sort -k2,2 -k1,1n -k3,3n >"$LOGS/checkpoint-writes.txt"
[[ -s $LOGS/checkpoint-writes.txt ]] || fail "no checkpoint was sampled"
regress="$(awk '{ if ($2 != d) { d = $2; top = -1 } if ($3 <= top) print; if ($3 > top) top = $3 }' "$LOGS/checkpoint-writes.txt")"
[[ -z $regress ]] || fail "a checkpoint appeared with a version not above its volume's newest (LOGS/checkpoint-writes.txt): $regress"
say "checkpoint versions on disk monotone: $(wc -l <"$LOGS/checkpoint-writes.txt") files appeared over the run, each above its volume's newest; last: $(awk '{ last[$2] = $3 } END { for (d in last) printf "%s v%d ", d, last[d] }' "$LOGS/checkpoint-writes.txt")"
# The time the loss added, estimated: the job's end minus when it would have ended at the rate it
# kept after resuming (from the freeze on, the examples left at that rate).
total="$(sed -n 's/.* after \([0-9.]*\) s: \([0-9]*\) examples.*/\1 \2/p' <<<"$SUMMARY")"
added="$(awk -v end="${total% *}" -v n="${total#* }" -v tf="$(elapsed "$before")" -v ef="$e0" \
  -v tr="$(elapsed "$resumed")" -v er="$(examples_in "$resumed")" \
  'BEGIN { rate = (n - er) / (end - tr); printf "%.0f s (job %.1f s; %.0f examples/s after the resume)", end - (tf + (n - ef) / rate), end, rate }')"
say "time added by the loss, estimated: $added"
printf '%s\nstall %d s (freeze to training resumed), toleration %d s; added ~%s; stale shards: %s; stalled removals %s\n%s\n' \
  "$SUMMARY" "$stall" "$TOLERATION_SECONDS" "$added" "$stale_exits" "$stalled_removals" "$RESTARTS" >"$LOGS/result.txt"
cat "$LOGS/timeline.txt" >>"$LOGS/result.txt"
helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall"
say "PASS"
