#!/usr/bin/env bash
# Scenario: the default job trains to completion on three Kubernetes nodes, with Service virtual
# IPs. The cluster of cluster.sh (control plane, three kubelets with their own containerd and
# kube-proxy in iptables mode, each node in its own network namespace on an underlay bridge), the
# project image built with podman and imported into every node (no registry); `helm install
# --wait` of the chart's defaults (the default job: 4 workers, 2 shards, 8 epochs; workers and
# shards spread over nodes by the chart's default topologySpreadConstraints) with small CPU
# requests, held at its start (coordinator.holdStart) while the checks that need every process up
# run, then released (`syncopate release`): they never race the job's end. Checked:
#   - the workers run on >= 2 nodes, per-node counts (over the 3 nodes) differ by <= 1;
#   - the workers reach the coordinator through its ClusterIP: the Service has one, the workers'
#     DNS answers the coordinator's name with it, and on every node that runs a worker the
#     kernel's connection tracking shows a connection to VIP:7070 answered by the coordinator's
#     pod IP (kube-proxy's DNAT) and kube-proxy's rule for it counted packets;
#   - the chart's NetworkPolicy, enforced by cluster.sh's test-fixture enforcer (netpol.py): a
#     pod outside the release on each node opens no gRPC or metrics port of it (by pod IP or the
#     ClusterIP) and the servers' unauthenticated counters stay 0; a Prometheus-labelled pod in a
#     labelled `monitoring` namespace scrapes every pod's /metrics and opens no gRPC port; over
#     the whole run no connection between two pods of the release is refused;
#   - `helm test`: JOB_DONE, final accuracy >= MIN_ACCURACY; every Job Complete;
#   - the host's iptables/ip6tables rules (counters aside) and sysctls (volatile counters aside)
#     are the same before and after, and the run leaves no network namespace, link, cgroup or
#     state directory behind (cluster.sh clean also removes what a killed run left, at start).
# Needs root and ./dev k8s (kube-proxy included). 3.5-5 min on the shared 2-core machine with the
# image cached (docs/measurements/kubernetes.md). Exit 77 (ctest: skipped, with the reason) without root or the binaries.
#   tests/deploy/kube_cluster_test.sh [REPO_ROOT]
# Environment: MIN_ACCURACY (85), KEEP_LOGS_DIR (default ./kube-cluster-test-logs).
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
# shellcheck source=tests/deploy/kube_lib.sh
source "$ROOT/tests/deploy/kube_lib.sh"
kube_cluster_preflight kube_cluster_test

# What this test may change on the host while it runs, and must not have changed after: firewall
# rules without their counters, sysctls without the volatile ones, network namespaces, links,
# cgroups of ours, and the host paths containerd, CNI and the kubelet write by default.
OURS='syncu0|syncn[0-9]|syncnode-|syncopate-cluster|10\.250\.0\.|10\.244\.[1-9]\.|10\.96\.|KUBE-'
host_state() {
  local out="$1"
  { iptables-save; ip6tables-save; } 2>/dev/null | sed -e 's/\[[0-9]*:[0-9]*\]//' -e '/^#/d' >"$out.rules"
  # Per-interface sysctls of interfaces that are not ours come and go with other people's
  # containers on this machine; ours must be gone.
  sysctl -a 2>/dev/null | grep -vE '^net\.ipv[46]\.(conf|neigh)\.[^.]+\.' >"$out.sysctl" || true
  sysctl -a 2>/dev/null | grep -E '^net\.ipv[46]\.(conf|neigh)\.(syncu0|syncn[0-9])\.' >>"$out.sysctl" || true
  {
    ip netns list | grep -E 'syncnode-' || true
    ip -o link show | grep -E 'syncu0|syncn[0-9]' || true
    find /sys/fs/cgroup -maxdepth 2 -name syncopate-cluster 2>/dev/null || true
    [[ ! -e $STATE ]] || echo "$STATE exists"
    find /run/netns -maxdepth 1 -name 'cni-*' 2>/dev/null || true  # podman's are netns-*; none yet on a fresh host
    ls /run/containerd /var/lib/cni /var/log/pods /var/log/containers 2>/dev/null || true
  } >"$out.left"
}
# Sysctls that change on their own (counters, entropy, last pid, the TCP Fast Open key the kernel
# makes at its first use): those that differ between two readings a second apart, plus the known
# ones (names, or prefixes ending in a dot).
volatile_sysctls() {
  local a b
  a="$(sysctl -a 2>/dev/null)"; sleep 1; b="$(sysctl -a 2>/dev/null)"
  { diff <(echo "$a") <(echo "$b") || true; } | sed -n 's/^[<>] \([^ ]*\) = .*/\1/p' | sort -u
  printf '%s\n' fs.dentry-state fs.file-nr fs.inode-nr fs.inode-state kernel.random.entropy_avail \
    kernel.random.uuid kernel.random.boot_id kernel.ns_last_pid kernel.pty.nr fs.aio-nr \
    net.netfilter.nf_conntrack_count fs.quota. net.ipv4.tcp_fastopen_key
}
# compare_host BEFORE AFTER: fails on a change of ours; reports, without failing, a change that is
# not ours (another test on this shared machine starting containers meanwhile).
compare_host() {
  local before="$1" after="$2" d
  d="$(diff "$before.rules" "$after.rules" || true)"
  if [[ -n $d ]]; then
    if grep -E '^[<>]' <<<"$d" | grep -qE "$OURS"; then fail "the host's firewall rules changed:
$d"; fi
    say "note: the host's firewall rules changed, not by this test (no rule of ours): $(grep -c '^[<>]' <<<"$d") lines"
  fi
  d="$(diff <(grep -vFf "$tmp/volatile" "$before.sysctl") <(grep -vFf "$tmp/volatile" "$after.sysctl") || true)"
  [[ -z $d ]] || fail "the host's sysctls changed:
$d"
  d="$(diff "$before.left" "$after.left" || true)"
  [[ -z $d ]] || fail "left behind on the host:
$d"
}

kube_on_exit kube_cluster_teardown

say "building $IMAGE with podman (docker/Dockerfile)"
kube_build_image "$IMAGE"

# What an earlier, killed run left is removed first (by cluster.sh start, and here before the
# host's state is read, so that the comparison is against a clean host).
"$CLUSTER" clean
volatile_sysctls >"$tmp/volatile"
host_state "$tmp/before"
say "three nodes (network namespaces on an underlay bridge; kubelet, containerd, kube-proxy each)"
"$CLUSTER" start
"$CLUSTER" import "$IMAGE"
say "image imported into the three nodes' containerd"

# For the NetworkPolicy checks, started before the release: a pod outside it on every node, and a
# Prometheus-labelled pod in a `monitoring` namespace labelled as the chart's default metricsFrom
# expects (Kubernetes sets kubernetes.io/metadata.name itself only from 1.21).
k create namespace "$ns" >/dev/null
k create namespace monitoring >/dev/null
k label namespace monitoring kubernetes.io/metadata.name=monitoring >/dev/null
probe_pod() {  # NAMESPACE NAME NODE LABEL
  k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1, labels: {$4}}
spec:
  nodeName: $3
  containers:
    - {name: probe, image: "$IMAGE", imagePullPolicy: Never, command: [sleep, "1800"],
       resources: {requests: {cpu: 10m, memory: 16Mi}}}
YAML
}
for n in 1 2 3; do probe_pod "$ns" "outsider-$n" "syncnode-$n" "role: outsider"; done
probe_pod monitoring prometheus syncnode-2 "app.kubernetes.io/name: prometheus"
# Held at its start (coordinator.holdStart) until the checks that need every process up are done:
# the default job ends in ~30 s here and sooner on a faster machine, before a scrape of its
# workers could run (2 runs of 2 on a quiet machine, issue 57).
kube_install_held "$STATE/cp" "$TAG" "the default job: 4 workers, 2 shards, 8 epochs, spread over nodes"

# Spread: the workers' nodes.
placement="$(kn get pods -l "app.kubernetes.io/instance=$rel" -o wide --no-headers | awk '{print $1, $7}')"
say "placement: $(tr '\n' ' ' <<<"$placement")"
worker_nodes="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=worker" \
  -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}')"
counts="$(for node in $(k get nodes -o name); do grep -cx "${node#node/}" <<<"$worker_nodes" || true; done | sort -n | tr '\n' ' ')"
read -r -a c <<<"$counts"
used="$(sort -u <<<"$worker_nodes" | grep -c .)"
((used >= 2)) || fail "the workers run on $used node(s): $worker_nodes"
((c[-1] - c[0] <= 1)) || fail "per-node worker counts differ by more than 1: $counts"
say "workers on $used nodes, per-node counts $counts"

# The ClusterIP path: the Service's virtual IP, the workers' DNS answer, kube-proxy's DNAT.
vip="$(kn get service "$rel-syncopate-coordinator" -o jsonpath='{.spec.clusterIP}')"
[[ $vip =~ ^10\.96\. ]] || fail "the coordinator's Service has no cluster IP: '$vip'"
coordinator_ip="$(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=coordinator" \
  -o jsonpath='{.items[0].status.podIP}')"
for pod in $(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=worker" -o name); do
  answer="$(kn exec "$pod" -- getent hosts "$rel-syncopate-coordinator" | awk '{print $1}')"
  [[ $answer == "$vip" ]] || fail "$pod resolves the coordinator to '$answer', not its ClusterIP $vip"
done
for node in $(sort -u <<<"$worker_nodes"); do
  # dst=VIP dport=7070 in the original direction, src=the coordinator's pod IP in the reply one.
  grep -qE "dst=$vip .*dport=7070 .*src=$coordinator_ip " <(ip netns exec "$node" cat /proc/net/nf_conntrack) ||
    fail "no connection to $vip:7070 DNATed to $coordinator_ip in $node's connection tracking"
  packets="$(ip netns exec "$node" iptables-save -c -t nat |
    sed -n "s/^\[\([0-9]*\):[0-9]*\] -A KUBE-SERVICES -d $vip\/32 .*--dport 7070 .*-j KUBE-SVC-.*/\1/p" | head -n 1)"
  ((${packets:-0} > 0)) || fail "kube-proxy's rule for $vip:7070 in $node counted no packets"
done
say "workers reach the coordinator through its ClusterIP $vip (DNS answer; DNAT to $coordinator_ip on every worker's node)"

# The chart's NetworkPolicy, enforced by netpol.py (cluster.sh): no pod outside the release opens a
# gRPC or metrics port of it, on its own node or another, by pod IP or the Service's IP; the
# Prometheus pod opens every /metrics and no gRPC port.
k -n "$ns" wait --for=condition=Ready pod/outsider-1 pod/outsider-2 pod/outsider-3 --timeout=120s >/dev/null
k -n monitoring wait --for=condition=Ready pod/prometheus --timeout=120s >/dev/null
# reachable NAMESPACE POD IP:PORT...: the targets the pod can open (3 s each, all at once).
reachable() {
  local where=(-n "$1" "$2")
  shift 2
  # shellcheck disable=SC2016
  k exec "${where[@]}" -- bash -c 'for t in "$@"; do
    (timeout 3 bash -c "exec 3<>/dev/tcp/${t%:*}/${t#*:}" 2>/dev/null && echo "$t") & done; wait' _ "$@"
}
members="$(kn get pods -l "app.kubernetes.io/instance=$rel" -o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP} {.spec.containers[0].ports[?(@.name=="metrics")].containerPort}{"\n"}{end}')"
grpc=("$vip:7070" "$coordinator_ip:7070")
for ip in $(kn get pods -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=shard" -o jsonpath='{.items[*].status.podIP}'); do
  grpc+=("$ip:7071")
done
mapfile -t metrics < <(awk '{print $2 ":" $3}' <<<"$members")
for n in 1 2 3; do
  open="$(reachable "$ns" "outsider-$n" "${grpc[@]}" "${metrics[@]}")"
  [[ -z $open ]] || fail "outsider-$n (on syncnode-$n, outside the release) opened: $open"
done
open="$(reachable monitoring prometheus "${grpc[@]}")"
[[ -z $open ]] || fail "the Prometheus pod opened gRPC ports: $open"
while read -r pod ip port; do
  # shellcheck disable=SC2016
  # Up to 3 attempts a second apart, as Prometheus itself scrapes again: one attempt was once
  # reset mid-request (exit 141, SIGPIPE) on the loaded machine.
  for attempt in 1 2 3; do
    body="$(k -n monitoring exec prometheus -- bash -c 'exec 3<>/dev/tcp/$0/$1 &&
      printf "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n" >&3 && timeout 5 cat <&3' "$ip" "$port")" && break
    ((attempt < 3)) || fail "the Prometheus pod could not scrape $pod ($ip:$port) in 3 attempts"
    sleep 1
  done
  grep -q '^# HELP' <<<"$body" || fail "no metrics from $pod ($ip:$port): $(head -n 3 <<<"$body")"
  # Nothing outside the release reached a gRPC port: its servers refused no unauthenticated hello.
  bad="$(grep 'rejections_total{reason="unauthenticated"' <<<"$body" | awk '$2 != 0')" || true
  [[ -z $bad ]] || fail "$pod counted unauthenticated hellos: $bad"
done <<<"$members"
say "NetworkPolicy: outsiders on all 3 nodes open no gRPC or metrics port (${#grpc[@]} gRPC, ${#metrics[@]} metrics targets each); Prometheus scrapes all $(grep -c . <<<"$members") pods' /metrics and opens no gRPC port; unauthenticated hellos 0"

status | head -n 1 | grep -q 'JOB_WAITING (held' || fail "the job was not held through the checks: $(status | head -n 1)"
kube_release
say "helm test (waits for the end, reads the final status)"
kube_helm_test "$MIN_ACCURACY"
say "helm test: JOB_DONE, final test accuracy ${ACCURACY}%"
kube_check_completed
say "all 5 Jobs Complete, every pod Succeeded (restarts: $RESTARTS)"
# A whole run under the policy: no connection between two pods of the release was refused (the
# enforcer's record of refusals, "SRC DST PORT"), and the outsiders' were.
sleep 2
member_ips="$(kn get pods -l "app.kubernetes.io/instance=$rel" -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}'; awk '{print $2}' <<<"$members")"
denied="$(cat "$STATE/netpol/denied.txt" 2>/dev/null || true)"
inside="$(awk 'NR == FNR { m[$1] = 1; next } ($1 in m) && ($2 in m)' <(grep . <<<"$member_ips") - <<<"$denied")"
[[ -z $inside ]] || fail "the policy refused connections between the release's own pods: $inside"
[[ -n $denied ]] || fail "the enforcer recorded no refusal, not even the outsiders'"
say "NetworkPolicy over the whole run: 0 refused connections between the release's pods; $(grep -c . <<<"$denied") refused (source, destination, port) from outside"
printf '%s\n%s\n%s\n' "$SUMMARY" "$RESTARTS" "$placement" >"$LOGS/result.txt"
helm uninstall "$rel" -n "$ns" --wait >/dev/null || fail "helm uninstall"

# Stop here rather than in cleanup, to compare the host with its state before the cluster.
kube_cluster_teardown
host_state "$tmp/after"
compare_host "$tmp/before" "$tmp/after"
say "the host's firewall rules and sysctls are as before; nothing left behind"
say "PASS"
