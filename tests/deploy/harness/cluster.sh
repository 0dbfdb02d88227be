#!/usr/bin/env bash
# Three Kubernetes nodes in a box, for the multi-node tests: the control plane of control_plane.sh
# and three nodes of node.sh (kubelet, containerd, kube-proxy in iptables mode), each node in its
# own network namespace on an underlay bridge this script owns. Services get virtual IPs (a
# ClusterIP is DNATed by the kube-proxy of the client's node), and the cluster DNS answers them.
# NetworkPolicies are enforced (ingress) by netpol.py, a test fixture of ours (nftables in each
# node's namespace); the connections it refused: DIR/netpol/denied.txt ("SRC DST PORT" lines).
#
#   cluster.sh start       clean up whatever an earlier run left (clean), then start it all
#   cluster.sh dir         print the state directory: DIR/cp/kubeconfig is the admin kubeconfig,
#                          DIR/{cp,dns,node-N}/logs the logs
#   cluster.sh import IMAGE
#                          load a podman image into every node's containerd (no registry)
#   cluster.sh freeze N    node N stops answering, as a hung or cut-off machine does: its link to
#                          the underlay goes down, then its processes (kubelet, containerd,
#                          kube-proxy, the shims) and its containers are frozen (cgroup freezer)
#   cluster.sh thaw N      node N comes back: processes thawed, then the link up
#   cluster.sh stop        stop it all (node.sh stop in each node, then clean)
#   cluster.sh clean       remove every trace of a run, also of one killed with kill -9: its
#                          processes (containers included), network namespaces, bridge, cgroups,
#                          state directory
#
# Layout (fixed names: one cluster per machine at a time; callers hold the lock of
# kube_node_test.sh, /tmp/syncopate-kube-node-test.lock, for the cluster's whole life):
#   underlay bridge syncu0 on this host, 10.250.0.1/24: the API server and the DNS listen there
#   node N (1..3): network namespace syncnode-N, address 10.250.0.1N, pods on 10.244.N.0/24
#     (routes to the other nodes' pod subnets over the underlay; no masquerading between pods)
#
# Why the host stays untouched: kube-proxy's iptables rules and every sysctl it or the CNI plugin
# sets live in the node's network namespace (bridge-nf is per namespace on this kernel). The host
# gains only the bridge, its veths and the routes to the pod subnets, all gone with the bridge, and
# the kubelets' kernel tunables (KUBELET_SYSCTLS, global), which stop and clean put back. Each
# node runs in its own mount namespace (ip netns exec) with tmpfs over the host paths containerd,
# CNI and the kubelet would otherwise write (/run/netns, /run/containerd, /var/lib/cni,
# /var/log/pods, /var/log/containers): they vanish with the node's processes.
# Finding everything again after a kill -9: every process started here runs in the pids cgroup
# /syncopate-cluster (containerd's shims too); containers, which runc puts in /k8s.io/<id>, are
# found by the container ids in the nodes' containerd state.
# Needs root and ./dev k8s (kube-proxy included).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP="$HERE/control_plane.sh"
NODE="$HERE/node.sh"
NODES=(1 2 3)
UNDERLAY=syncu0
HOST_IP=10.250.0.1
CGROUP=syncopate-cluster
# A fixed place, so that a run after a kill -9 finds what the killed one left.
DIR="${SYNCOPATE_CLUSTER_DIR:-/tmp/syncopate-cluster}"

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

node_ip() { echo "10.250.0.1$1"; }
node_name() { echo "syncnode-$1"; }
subnet() { echo "10.244.$1.0/24"; }

# in_cgroup [--background] NAME COMMAND...: runs COMMAND in the pids (and freezer) cgroup
# /syncopate-cluster/NAME, so clean finds it again, without the caller's open files beyond
# stdin/out/err: a daemon must not hold the caller's lock (the tests' node lock on fd 9), or after
# a kill -9 of the test the rerun would wait for it. --background: do not wait for it ($! is its
# pid); not `in_cgroup ... &`, whose extra shell would keep the caller's files while it waits.
in_cgroup() {
  local background=false name h
  [[ $1 != --background ]] || { background=true; shift; }
  name="$1"
  shift
  for h in pids freezer; do mkdir -p "/sys/fs/cgroup/$h/$CGROUP/$name"; done
  (
    for h in pids freezer; do echo "$BASHPID" >"/sys/fs/cgroup/$h/$CGROUP/$name/cgroup.procs"; done
    for h in /proc/"$BASHPID"/fd/*; do
      h="${h##*/}"
      ((h <= 2 || h == 255)) || eval "exec $h>&-"
    done
    exec "$@"
  ) &
  $background || wait $!
}

# The processes of every cgroup under /syncopate-cluster, and all their descendants (a shim's
# containers keep the shim as parent).
our_pids() {
  local roots
  roots="$(find "/sys/fs/cgroup/pids/$CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)"
  [[ -n $roots ]] || return 0
  ps -e -o pid=,ppid= | awk -v roots="$roots" '
    BEGIN { n = split(roots, r, "\n"); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END { changed = 1
          while (changed) { changed = 0
            for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
          for (p in keep) if (p in parent) print p }'
}

# The containers' cgroup directories (runc: /k8s.io/<id> in every hierarchy) of the nodes.
container_cgroups() {
  local bundle
  for bundle in "$DIR"/node-*/run/containerd/io.containerd.runtime.v2.task/k8s.io/*; do
    [[ -d $bundle ]] || continue
    find /sys/fs/cgroup/*/k8s.io -maxdepth 1 -name "${bundle##*/}" -type d 2>/dev/null
  done
}

# The kernel tunables the kubelet sets on the host at its start (kubelet 1.20's
# setupKernelTunables: they are not per network namespace): saved by start, put back by clean.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
                 kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
save_host_sysctls() {
  local key
  for key in "${KUBELET_SYSCTLS[@]}"; do echo "$key=$(sysctl -n "$key")"; done >"$DIR/host-sysctls"
}
restore_host_sysctls() {
  local line
  [[ -f $DIR/host-sysctls ]] || return 0
  while read -r line; do sysctl -q -w "$line" >/dev/null || log "could not restore $line"; done \
    <"$DIR/host-sysctls"
}

clean() {
  local n pids cg
  for _ in $(seq 1 20); do
    pids="$(our_pids)"
    for cg in $(container_cgroups); do pids+=" $(tr '\n' ' ' <"$cg/cgroup.procs" 2>/dev/null)"; done
    [[ -n ${pids// /} ]] || break
    # Thaw first: a frozen process cannot die (cluster.sh freeze, or a freeze the test left).
    find "/sys/fs/cgroup/freezer/$CGROUP" -name freezer.state -exec sh -c 'echo THAWED >"$1"' _ {} \; 2>/dev/null || true
    for cg in $(container_cgroups); do
      [[ ! -f $cg/freezer.state ]] || echo THAWED >"$cg/freezer.state" 2>/dev/null || true
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.5
  done
  [[ -z ${pids// /} ]] || log "processes survived SIGKILL: $pids"
  for cg in $(container_cgroups); do rmdir "$cg" 2>/dev/null || true; done
  find /sys/fs/cgroup/*/"$CGROUP" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  for n in "${NODES[@]}"; do ip netns del "$(node_name "$n")" 2>/dev/null || true; done
  ip link del "$UNDERLAY" 2>/dev/null || true
  restore_host_sysctls
  rm -rf "$DIR"
}

start() {
  local n m names=() dir="$DIR"
  "$CP" bin kube-proxy >/dev/null || die "kube-proxy not built: run ./dev k8s"
  "$CP" install nftables
  clean
  mkdir -p "$dir"
  save_host_sysctls

  ip link add "$UNDERLAY" type bridge
  ip addr add "$HOST_IP/24" dev "$UNDERLAY"
  ip link set "$UNDERLAY" up
  for n in "${NODES[@]}"; do
    local ns
    ns="$(node_name "$n")"
    names+=(--node "$ns")
    ip netns add "$ns"
    ip link add "syncn$n" type veth peer name eth0 netns "$ns"
    ip link set "syncn$n" master "$UNDERLAY" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(node_ip "$n")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$HOST_IP"
    for m in "${NODES[@]}"; do
      ((m == n)) || ip -n "$ns" route add "$(subnet "$m")" via "$(node_ip "$m")"
    done
    # The host answers the pods (API server, DNS) through the node that owns their subnet.
    ip route add "$(subnet "$n")" via "$(node_ip "$n")" dev "$UNDERLAY"
  done

  in_cgroup cp "$CP" start "$dir/cp" --address "$HOST_IP" "${names[@]}" >/dev/null
  in_cgroup dns "$NODE" dns "$dir/dns" "$dir/cp/kubeconfig" "$HOST_IP" --vip
  # The pause image (the pod sandbox), built once for the three nodes.
  "$NODE" pause "$dir/pause.tar"
  local pids=() rc=0
  for n in "${NODES[@]}"; do
    local ns
    ns="$(node_name "$n")"
    # One mount namespace for the node's processes (the kubelet's volume mounts must be seen by
    # containerd), with the host paths they would write covered by tmpfs. Not `ip netns exec`: it
    # remounts /sys, and the kubelet then finds no cgroup mounts ("mountpoint for cpu not found").
    # shellcheck disable=SC2016
    in_cgroup --background "node-$n" unshare --mount --propagation slave nsenter --net="/run/netns/$ns" bash -c '
      set -e
      for d in /run/netns /run/containerd /var/lib/cni /var/log/pods /var/log/containers; do
        [[ -d $d ]] || mkdir -p "$d"
        mount -t tmpfs -o mode=0755 tmpfs "$d"
      done
      exec "$@"' _ "$NODE" start "$dir/node-$n" "$dir/cp" --name "$ns" --subnet "$(subnet "$n")" \
        --node-ip "$(node_ip "$n")" --kubeconfig "$dir/cp/node-$ns.kubeconfig" --dns "$HOST_IP" \
        --proxy --pause-tar "$dir/pause.tar" >"$dir/node-$n.start.log" 2>&1
    pids+=($!)
  done
  for n in "${!pids[@]}"; do
    wait "${pids[$n]}" || { rc=1; cat "$dir/node-${NODES[$n]}.start.log" >&2; }
  done
  ((rc == 0)) || die "a node did not start (logs in $dir/node-*/logs)"
  # The NetworkPolicy enforcer (a test fixture: netpol.py), on this host, loading its nftables
  # table into the three node namespaces.
  local kubectl node_dirs=()
  kubectl="$("$HERE/../k8s_tools.sh")/layer/kubectl/kubectl"
  for n in "${NODES[@]}"; do node_dirs+=(--node-dir "$dir/node-$n"); done
  mkdir -p "$dir/netpol/logs"
  in_cgroup --background netpol python3 "$HERE/netpol.py" --kubeconfig "$dir/cp/kubeconfig" --kubectl "$kubectl" \
    --netns "$(printf 'syncnode-%s,' "${NODES[@]}" | sed 's/,$//')" --denied "$dir/netpol/denied.txt" \
    "${node_dirs[@]}" >"$dir/netpol/logs/netpol.log" 2>&1
  log "3 nodes Ready: $(printf '%s ' "${names[@]/--node/}")(API https://$HOST_IP, DNS $HOST_IP)"
}

import_image() {
  local image="${1:?usage: cluster.sh import IMAGE}" dir="$DIR" n
  local pids=() rc=0
  podman save -q --format docker-archive -o "$dir/image.tar" "$image" >/dev/null
  for n in "${NODES[@]}"; do "$NODE" import "$dir/node-$n" "$dir/image.tar" & pids+=($!); done
  for n in "${pids[@]}"; do wait "$n" || rc=1; done
  rm -f "$dir/image.tar"
  ((rc == 0)) || die "importing $image failed"
}

# The freezer.state files of node N: its own processes' cgroup and its containers'.
node_freezers() {
  local n="$1" bundle
  echo "/sys/fs/cgroup/freezer/$CGROUP/node-$n/freezer.state"
  for bundle in "$DIR/node-$n"/run/containerd/io.containerd.runtime.v2.task/k8s.io/*; do
    [[ -d $bundle ]] || continue
    [[ ! -f /sys/fs/cgroup/freezer/k8s.io/${bundle##*/}/freezer.state ]] ||
      echo "/sys/fs/cgroup/freezer/k8s.io/${bundle##*/}/freezer.state"
  done
}

freeze() {
  local n="${1:?usage: cluster.sh freeze N}" f
  [[ -d $DIR/node-$n ]] || die "no node $n running"
  # The link first: nothing the node does while it is being frozen reaches the others.
  ip link set "syncn$n" down
  for f in $(node_freezers "$n"); do echo FROZEN >"$f"; done
  for f in $(node_freezers "$n"); do
    for _ in $(seq 1 50); do [[ $(cat "$f") == FROZEN ]] && break; sleep 0.1; done
    [[ $(cat "$f") == FROZEN ]] || die "$f did not freeze: $(cat "$f")"
  done
  log "$(node_name "$n") frozen and cut off ($(node_freezers "$n" | wc -l) cgroups)"
}

thaw() {
  local n="${1:?usage: cluster.sh thaw N}" f
  for f in $(node_freezers "$n"); do echo THAWED >"$f"; done
  ip link set "syncn$n" up
  log "$(node_name "$n") thawed and reconnected"
}

stop() {
  local dir="$DIR" n
  for n in "${NODES[@]}"; do
    [[ -d $dir/node-$n ]] || continue
    ip netns exec "$(node_name "$n")" "$NODE" stop "$dir/node-$n" >/dev/null 2>&1 &
  done
  wait || true
  [[ -d $dir/dns ]] && "$NODE" stop "$dir/dns" >/dev/null 2>&1
  [[ -d $dir/cp ]] && "$CP" stop "$dir/cp"
  clean
}

case "${1:-}" in
  start) start ;;
  import) shift; import_image "$@" ;;
  freeze) shift; freeze "$@" ;;
  thaw) shift; thaw "$@" ;;
  stop) stop ;;
  clean) clean ;;
  dir) echo "$DIR" ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
