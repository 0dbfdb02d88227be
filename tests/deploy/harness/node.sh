#!/usr/bin/env bash
# A real Kubernetes node on this machine for the control plane of control_plane.sh: kubelet 1.20
# (built from the same Debian source), Debian's containerd 1.6 + runc, the CNI bridge plugin, and
# a cluster DNS of our own (no CoreDNS package exists): dnsmasq answering from a hosts directory
# that a loop here fills from the API's Services and Endpoints every second.
#
#   node.sh start DIR CP_DIR [FLAGS]
#                              start containerd, the DNS and a kubelet registering as
#                              $SYNCOPATE_K8S_NODE (default syncopate-node) with the control plane
#                              started in CP_DIR; state and logs under DIR
#   node.sh import DIR IMAGE   load a podman image (or a docker-archive file of one) into the
#                              node's containerd (no registry)
#   node.sh pause FILE         build the pause image and save it as a docker-archive FILE
#   node.sh stop DIR           stop what `start DIR` started and remove the pods' network
#                              (the bridge and the pods' network namespaces)
#   node.sh dns DIR KUBECONFIG IP [--vip]
#                              only the DNS, on IP (state under DIR); --vip answers a Service with
#                              a cluster IP with that IP (kube-proxy's virtual IP), a headless one
#                              with its endpoints; `stop DIR` stops it
# FLAGS of start, for one node of several (cluster.sh runs each in its own network namespace):
#   --name NAME --subnet 10.244.N.0/24 --node-ip IP --kubeconfig FILE --cgroup-root /PATH
#   --dns IP      use the DNS on IP (one for the whole cluster) instead of starting one
#   --proxy       start kube-proxy (iptables mode) too: Services get their virtual IPs
#   --pause-tar FILE  the pause image from `node.sh pause FILE` instead of building it here
# With --node-ip the pods' subnet is routed by the caller: the pods' traffic is not masqueraded.
#
# What differs from a production node, on purpose (a shared machine): alone on the host (no
# --proxy), no kube-proxy (it would rewrite the machine's iptables and bridge sysctls), so Services
# get no virtual IP; the DNS answers a Service's name with its endpoints' pod IPs instead (the way
# a headless Service works), which is all the chart needs. The pod network is one bridge
# (syncopate0, 10.244.0.0/24) on this host. In its own network namespace (cluster.sh) a node runs
# kube-proxy, whose rules stay in that namespace. NetworkPolicies are not enforced (the bridge
# plugin has no policy engine).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP="$HERE/control_plane.sh"
NODE_NAME="${SYNCOPATE_K8S_NODE:-syncopate-node}"
BRIDGE=syncopate0
SUBNET=10.244.0.0/24
GATEWAY=10.244.0.1
# The range every node's pod subnet is in (kube-proxy: traffic from outside it is masqueraded).
CLUSTER_CIDR=10.244.0.0/16
PACKAGES=(containerd runc containernetworking-plugins dnsmasq-base iproute2)

log() { echo "node: $*" >&2; }
die() { log "$*"; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ctr_() { ctr --address "$DIR/run/containerd.sock" -n k8s.io "$@"; }

# supervise LOG COMMAND...: runs COMMAND (output appended to LOG) the way a node's systemd unit
# runs its kubelet (Restart=on-failure, RestartSec=1, a start limit): a kubelet 1.20 can exit
# fatally at its start on a busy machine ("Failed to start ContainerManager failed to get rootfs
# info: unable to find data in memory cache": cAdvisor's first housekeeping has not run yet,
# kubernetes/kubernetes#71704), and a real node restarts it. At most 3 restarts within the
# supervisor's life, each noted in LOG; SIGTERM is passed on and waited for.
supervise() {
  local log="$1" child=0 starts=0 rc
  shift
  trap 'kill -TERM "$child" 2>/dev/null; wait "$child" || true; exit 0' TERM INT
  while :; do
    "$@" >>"$log" 2>&1 &
    child=$!
    starts=$((starts + 1))
    rc=0
    wait "$child" || rc=$?
    if ((rc == 0 || starts > 3)); then
      echo "supervise: $1 exited with $rc after $starts start(s); not restarting" >>"$log"
      exit "$rc"
    fi
    echo "supervise: $1 exited with $rc; restarting in 1 s (start $((starts + 1)) of 4)" >>"$log"
    sleep 1
  done
}

# The pods' network namespaces: CNI's cni-* namespaces holding an address of SUBNET.
pod_netns() {
  local ns prefix="${SUBNET%.0/24}."
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
    if ip netns exec "$ns" ip -4 -o addr show 2>/dev/null | grep -qF " inet $prefix"; then
      echo "$ns"
    fi
  done
}

# Removes the pod network: the bridge, which detaches every pod still on it, and the pods' network
# namespaces (the kubelet is stopped before it tears them down, so they would otherwise leak). A
# namespace whose processes still run lives on until they exit, but reaches nothing.
remove_pod_network() {
  local ns
  ip link del "$BRIDGE" 2>/dev/null || true
  for ns in $(pod_netns); do ip netns del "$ns" 2>/dev/null || true; done
}

# The pause image (the pod sandbox): Kubernetes' own pause.c, compiled static into a scratch
# image, saved as the docker archive $1.
pause_tar() {
  local out="$1" bin build
  bin="$("$CP" bin)" || die "control plane not built (./dev k8s)"
  build="$(mktemp -d)"
  cp "$bin/pause" "$build/pause"
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$build/Containerfile"
  podman build --quiet -t localhost/pause:3.4.1 "$build" >/dev/null 2>&1
  rm -f "$out"
  podman save -q --format docker-archive -o "$out" localhost/pause:3.4.1 >/dev/null
  rm -rf "$build"
}

# The cluster DNS: every second, the Services and Endpoints of the API as hosts files. With vip=1,
# a Service with a cluster IP is answered with it (kube-proxy forwards it), a headless one with
# its endpoints; without, every Service with its endpoints.
dns_sync() {
  local kubeconfig="$1" kubectl="$2" vip="$3" out="$DIR/dns/hosts.d"
  while true; do
    "$kubectl" --kubeconfig="$kubeconfig" get services,endpoints -A -o json 2>/dev/null | VIP="$vip" python3 -c '
import json, os, sys
lines = []
items = json.load(sys.stdin)["items"]
vips = {}
for svc in items:
    if svc["kind"] == "Service" and svc["spec"].get("clusterIP", "None") != "None" and os.environ["VIP"] == "1":
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        vips[(ns, name)] = svc["spec"]["clusterIP"]
        lines.append(svc["spec"]["clusterIP"] + " " + name + "." + ns + ".svc.cluster.local")
for ep in items:
    if ep["kind"] != "Endpoints":
        continue
    ns, svc = ep["metadata"]["namespace"], ep["metadata"]["name"]
    for subset in ep.get("subsets") or []:
        for a in (subset.get("addresses") or []) + (subset.get("notReadyAddresses") or []):
            ip = a["ip"]
            if (ns, svc) not in vips:
                lines.append(ip + " " + svc + "." + ns + ".svc.cluster.local")
            if a.get("hostname"):
                lines.append(ip + " " + a["hostname"] + "." + svc + "." + ns + ".svc.cluster.local")
print("\n".join(sorted(set(lines))))' >"$DIR/dns/cluster.new" && mv "$DIR/dns/cluster.new" "$out/cluster"
    sleep 1
  done
}

# DNS on IP, answering only cluster names (no upstream: the pods need none), fed by dns_sync.
# --user=root: dnsmasq otherwise drops to "nobody", who cannot read a 0700 mktemp directory.
start_dns() {
  local kubeconfig="$1" ip="$2" vip="$3" kubectl
  kubectl="$("$HERE/../k8s_tools.sh")/layer/kubectl/kubectl"
  mkdir -p "$DIR"/{run,dns/hosts.d,logs}
  dnsmasq --keep-in-foreground --user=root --no-resolv --no-hosts --hostsdir="$DIR/dns/hosts.d" \
    --listen-address="$ip" --bind-interfaces --local-ttl=1 --domain-needed \
    --local=/cluster.local/ --pid-file="$DIR/run/dnsmasq.pid" >"$DIR/logs/dnsmasq.log" 2>&1 &
  echo $! >"$DIR/dnsmasq.pid"
  dns_sync "$kubeconfig" "$kubectl" "$vip" >"$DIR/logs/dns-sync.log" 2>&1 &
  echo $! >"$DIR/dns-sync.pid"
}

dns() {
  DIR="${1:?usage: node.sh dns DIR KUBECONFIG IP [--vip]}"
  local kubeconfig="${2:?}" ip="${3:?}" vip=0
  [[ ${4:-} == --vip ]] && vip=1
  "$CP" install "${PACKAGES[@]}"
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
  start_dns "$kubeconfig" "$ip" "$vip"
}

start() {
  DIR="${1:?usage: node.sh start DIR CP_DIR [FLAGS]}"
  local cp_dir="${2:?usage: node.sh start DIR CP_DIR [FLAGS]}" bin kubectl node_ip="" kubeconfig=""
  local dns="" proxy=0 cgroup_root="" masq=true pause_tar=""
  shift 2
  while (($#)); do
    case "$1" in
      --name) NODE_NAME="${2:?}"; shift 2 ;;
      --subnet) SUBNET="${2:?}"; GATEWAY="${SUBNET%.0/24}.1"; shift 2 ;;
      --node-ip) node_ip="${2:?}"; masq=false; shift 2 ;;
      --kubeconfig) kubeconfig="${2:?}"; shift 2 ;;
      --dns) dns="${2:?}"; shift 2 ;;
      --cgroup-root) cgroup_root="${2:?}"; shift 2 ;;
      --proxy) proxy=1; shift ;;
      --pause-tar) pause_tar="${2:?}"; shift 2 ;;
      *) die "start: unknown flag $1" ;;
    esac
  done
  bin="$("$CP" bin)" || die "control plane not built (./dev k8s)"
  [[ -x $bin/kubelet && -x $bin/pause ]] || die "no kubelet/pause in $bin (./dev k8s builds them)"
  ((proxy == 0)) || [[ -x $bin/kube-proxy ]] || die "no kube-proxy in $bin (./dev k8s builds it)"
  "$CP" install "${PACKAGES[@]}"
  kubectl="$("$HERE/../k8s_tools.sh")/layer/kubectl/kubectl"
  mkdir -p "$DIR"/{run,containerd,cni/net.d,kubelet,dns/hosts.d,logs}
  DIR="$(cd "$DIR" && pwd)"
  cp_dir="$(cd "$cp_dir" && pwd)"
  node_ip="${node_ip:-$GATEWAY}"
  kubeconfig="${kubeconfig:-$cp_dir/node.kubeconfig}"

  # A bridge already here is a node that was never stopped (its test killed before its cleanup).
  # Its pods may still run, on this bridge, with the addresses this node's fresh IPAM hands out
  # again: two pods answering for one IP, and a leftover pod of another release reaching this
  # coordinator with that release's join token. Seen 2026-11-26: a kube_node_test after a killed
  # one had two workers timed out as silent (their peer's packets went to the duplicate) and a
  # "wrong join token" refusal from a member's IP. Take the old network down first.
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "a previous node was not stopped: removing its bridge $BRIDGE" \
      "($(ip -o link show master "$BRIDGE" 2>/dev/null | wc -l) pod interfaces) and its pods' network"
  fi
  remove_pod_network
  # Pod network: a bridge we own, so DNS can listen on its gateway before the first pod exists.
  ip link add "$BRIDGE" type bridge
  ip addr replace "$GATEWAY/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  cat >"$DIR/cni/net.d/10-syncopate.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "syncopate",
 "plugins": [{"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": $masq, "hairpinMode": true,
              "ipam": {"type": "host-local", "subnet": "$SUBNET", "dataDir": "$DIR/cni/ipam",
                       "routes": [{"dst": "0.0.0.0/0"}]}},
             {"type": "loopback"}]}
EOF

  cat >"$DIR/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd"
state = "$DIR/run/containerd"
[grpc]
  address = "$DIR/run/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:3.4.1"
  # This machine refuses negative oom_score_adj values (EIO), which the kubelet asks for pause
  # containers (-998) and Guaranteed pods: clamp them to containerd's own (0), as rootless setups do.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
  setsid containerd --config "$DIR/containerd.toml" </dev/null >"$DIR/logs/containerd.log" 2>&1 &
  echo $! >"$DIR/containerd.pid"
  for _ in $(seq 1 100); do ctr_ version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr_ version >/dev/null 2>&1 || die "containerd did not start (log: $DIR/logs/containerd.log)"
  if [[ -z $pause_tar ]]; then
    pause_tar="$DIR/pause.tar"
    pause_tar "$pause_tar"
  fi
  ctr_ images import "$pause_tar" >/dev/null

  if [[ -z $dns ]]; then
    start_dns "$cp_dir/kubeconfig" "$GATEWAY" "$proxy"
    dns="$GATEWAY"
  fi

  local port
  port="$(free_port)"  # a free loopback port is free on the bridge address too
  cat >"$DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $port
readOnlyPort: 0
# Only the API server's client certificate (logs, exec), authorized by the API server.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $cp_dir/pki/kubelet-client-ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
clusterDNS: [$dns]
clusterDomain: cluster.local
resolvConf: /dev/null
# A shared disk: never garbage-collect other people's images, never evict for disk pressure.
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi"}
serializeImagePulls: false
EOF
  local extra=()
  [[ -z $cgroup_root ]] || extra+=(--cgroup-root="$cgroup_root")
  : >"$DIR/logs/kubelet.log"
  supervise "$DIR/logs/kubelet.log" \
    "$bin/kubelet" --config="$DIR/kubelet.yaml" --kubeconfig="$kubeconfig" "${extra[@]}" \
    --hostname-override="$NODE_NAME" --node-ip="$node_ip" --root-dir="$DIR/kubelet" \
    --cert-dir="$DIR/kubelet/pki" --container-runtime=remote \
    --container-runtime-endpoint="unix://$DIR/run/containerd.sock" \
    --runtime-request-timeout=5m --oom-score-adj=0 </dev/null &
  echo $! >"$DIR/kubelet.pid"
  if ((proxy)); then
    # iptables mode, in this node's network namespace only. The conntrack flags at 0 keep it off
    # the kernel's global conntrack table size and this namespace's timeouts; no OOM score
    # (this machine refuses negative ones).
    "$bin/kube-proxy" --kubeconfig="$cp_dir/kube-proxy.kubeconfig" --hostname-override="$NODE_NAME" \
      --bind-address="$node_ip" --cluster-cidr="$CLUSTER_CIDR" --proxy-mode=iptables \
      --conntrack-max-per-core=0 --conntrack-min=0 --conntrack-tcp-timeout-established=0 \
      --conntrack-tcp-timeout-close-wait=0 --oom-score-adj=0 \
      --metrics-bind-address="$node_ip:10249" --healthz-bind-address="$node_ip:10256" \
      >"$DIR/logs/kube-proxy.log" 2>&1 &
    echo $! >"$DIR/kube-proxy.pid"
  fi
  local deadline=$((SECONDS + 120))
  until [[ $("$kubectl" --kubeconfig="$cp_dir/kubeconfig" get node "$NODE_NAME" \
              -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; do
    if ((SECONDS > deadline)); then
      # The reason, not a goroutine dump: the fatal lines, the supervisor's notes, the last errors.
      grep -E '^(F[0-9]{4} |supervise: )' "$DIR/logs/kubelet.log" >&2 || true
      grep -E '^E[0-9]{4} ' "$DIR/logs/kubelet.log" | tail -n 5 >&2 || true
      die "node $NODE_NAME not Ready after 120 s (logs in $DIR/logs)"
    fi
    sleep 1
  done
  log "node $NODE_NAME Ready (kubelet on $node_ip:$port, pods on $SUBNET, DNS $dns$( ((proxy)) && echo ", kube-proxy"))"
}

import_image() {
  DIR="${1:?usage: node.sh import DIR IMAGE}"
  local image="${2:?usage: node.sh import DIR IMAGE}"
  if [[ -f $image ]]; then
    ctr_ images import "$image" >/dev/null
    return
  fi
  rm -f "$DIR/image.tar"
  podman save -q --format docker-archive -o "$DIR/image.tar" "$image" >/dev/null
  ctr_ images import "$DIR/image.tar" >/dev/null
  rm -f "$DIR/image.tar"
}

stop() {
  DIR="${1:?usage: node.sh stop DIR}"
  local name pid
  for name in kube-proxy kubelet dns-sync dnsmasq; do
    [[ -f $DIR/$name.pid ]] || continue
    pid="$(cat "$DIR/$name.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$DIR/$name.pid"
  done
  # A kubelet its supervisor did not get to stop within those 5 s.
  pkill -KILL -f -- "--root-dir=$DIR/kubelet( |$)" 2>/dev/null || true
  # The pods' containers and sandboxes (their network namespaces), then containerd.
  if [[ -S $DIR/run/containerd.sock ]]; then
    for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true; done
    sleep 1
    for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks rm -f "$task" >/dev/null 2>&1 || true; done
    for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers rm "$c" >/dev/null 2>&1 || true; done
  fi
  if [[ -f $DIR/containerd.pid ]]; then
    pid="$(cat "$DIR/containerd.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$DIR/containerd.pid"
  fi
  # The pods' log directories the kubelet wrote on the host (/var/log/pods/<ns>_<pod>_<uid>,
  # linked from /var/log/containers): it removes them only for pods it saw deleted, so a node
  # stopped with pods on it (every test run) left them behind: this node's pods', and the links
  # left dangling.
  local pod
  for pod in "$DIR"/kubelet/pods/*; do
    if [[ -d $pod ]]; then rm -rf /var/log/pods/*_"$(basename "$pod")"; fi
  done
  find /var/log/containers -maxdepth 1 -xtype l -delete 2>/dev/null || true
  # Leftover mounts of the kubelet and containerd under DIR, then the pod network.
  { grep -o " $DIR/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # (A DNS-only directory has no pod network.)
  [[ ! -d $DIR/cni ]] || remove_pod_network
}

case "${1:-}" in
  start) shift; start "$@" ;;
  import) shift; import_image "$@" ;;
  stop) shift; stop "$@" ;;
  dns) shift; dns "$@" ;;
  pause) shift; pause_tar "${1:?usage: node.sh pause FILE}" ;;
  *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
