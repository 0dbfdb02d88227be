#!/usr/bin/env bash
# A real Kubernetes control plane for the deploy tests: etcd (Debian's etcd-server 3.4) plus
# kube-apiserver, kube-controller-manager and kube-scheduler built from Debian bookworm's
# Kubernetes 1.20.2 source (`apt-get source kubernetes`; no Debian or npm package ships them).
#
#   control_plane.sh build        build the three binaries, a kubelet and a kube-proxy once into
#                                 the cache (~14 + 8 + 11 min of one niced core, 2.2 GB of build
#                                 tree deleted afterwards); only what the cache lacks is built (a
#                                 cache from before kube-proxy builds just kube-proxy); a second
#                                 run with every binary present does nothing
#   control_plane.sh bin [NAME...]
#                                 print the cached binary directory; exit 1 if the control plane,
#                                 the kubelet or one of the NAMEs (e.g. kube-proxy) is not built
#   control_plane.sh start DIR [--address IP] [--node NAME]...
#                                 start etcd + the three on loopback ports (state, logs and a
#                                 kubeconfig under DIR); ready in ~6 s; prints the kubeconfig path.
#                                 --address: the API server binds and advertises IP instead of
#                                 127.0.0.1 (cluster.sh: an underlay bridge's address). --node:
#                                 a kubelet identity and DIR/node-NAME.kubeconfig for each NAME
#                                 (default: the one node $SYNCOPATE_K8S_NODE, DIR/node.kubeconfig);
#                                 DIR/kube-proxy.kubeconfig is always written
#   control_plane.sh stop DIR     stop what `start DIR` started (SIGTERM, then SIGKILL after 10 s)
#   control_plane.sh storage DIR CLASS SIZE COUNT [--default] [--rwx]
#                                 a StorageClass without a provisioner and COUNT hostPath
#                                 PersistentVolumes of SIZE in it (under DIR/volumes), for claims;
#                                 --rwx makes them ReadWriteMany (one node: a hostPath is shared)
#   control_plane.sh install PACKAGE...   install missing Debian packages (used by node.sh)
#
# Cache: ${SYNCOPATE_CACHE:-/var/cache/syncopate}/kubernetes-<Debian source version>/bin; never in
# the repository or a build directory. The recipe and its pitfalls (docs/operations.md has more):
#   - Debian's source package is `kubernetes` (binary: kubernetes-client only); it needs a deb-src
#     entry. We use a private apt configuration under the cache (Dir::Etc::SourceList and
#     Dir::State::Lists), so the machine's sources.list is never touched.
#   - Only the upstream orig tarball is used: Debian's patches concern kubectl's printing.
#   - Go 1.19 (golang-go) with the vendored github.com/modern-go/reflect2 v1.0.1 builds but
#     panics at run time (Go >= 1.18 changed the runtime's map internals); Debian's
#     golang-github-modern-go-reflect2-dev (v1.0.2) replaces the vendored copy.
#   - GOFLAGS=-tags=providerless drops the cloud providers (less to build, nothing to reach);
#     CGO_ENABLED=0 makes static binaries; -p=1 keeps it to one core on a shared machine.
set -euo pipefail

CACHE="${SYNCOPATE_CACHE:-/var/cache/syncopate}"
# The bookworm source version (bookworm's only one; a newer upload would change the cache key).
DEB_VERSION="${SYNCOPATE_K8S_DEB_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}"
UPSTREAM="1.20.2"
KEY="kubernetes-${DEB_VERSION}"
BIN="$CACHE/$KEY/bin"
# The control plane, and a kubelet for node.sh (built from the same tree: ~8 min more).
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
# Built by `build` too, but not needed by `start` or a one-node test: kube-proxy for the
# multi-node harness (cluster.sh).
EXTRA_COMPONENTS=(kube-proxy)
# The name of the one node a kubelet (node.sh) may register as.
NODE_NAME="${SYNCOPATE_K8S_NODE:-syncopate-node}"
BUILD_PACKAGES=(golang-go golang-github-modern-go-reflect2-dev make rsync gcc libc6-dev)
RUN_PACKAGES=(etcd-server openssl)

log() { echo "control_plane: $*" >&2; }
die() { log "$*"; exit 1; }

# built [NAME...]: the control plane, the kubelet, pause and the NAMEs are all in the cache.
built() {
  local c
  for c in "${COMPONENTS[@]}" pause "$@"; do [[ -x $BIN/$c ]] || return 1; done
}

install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  [[ $(id -u) -eq 0 ]] || die "missing Debian packages; as root: apt-get install -y ${missing[*]}"
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Debian mirror this machine already uses (first URI of the main archive), for the deb-src line.
debian_mirror() {
  local uri
  uri="$(grep -hoE '^(URIs:|deb)\s+[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
           /etc/apt/sources.list.d/*.list 2>/dev/null | grep -v security | awk '{print $2}' | head -n 1)"
  echo "${uri:-http://deb.debian.org/debian}"
}

build() {
  local c missing=()
  for c in "${COMPONENTS[@]}" "${EXTRA_COMPONENTS[@]}"; do [[ -x $BIN/$c ]] || missing+=("$c"); done
  if ((${#missing[@]} == 0)) && [[ -x $BIN/pause ]]; then
    log "already built: $BIN"
    return 0
  fi
  install_packages "${BUILD_PACKAGES[@]}"
  local work="$CACHE/$KEY/work" started=$SECONDS
  rm -rf "$work"
  mkdir -p "$work/apt/lists/partial" "$BIN"
  echo "deb-src $(debian_mirror) bookworm main" >"$work/apt/sources.list"
  local apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
                  -o "Dir::State::Lists=$work/apt/lists" -o "APT::Sandbox::User=root")
  log "fetching Debian's kubernetes $DEB_VERSION source (34 MB)"
  apt-get "${apt_opts[@]}" -qq update
  (cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "kubernetes=$DEB_VERSION" >/dev/null) \
    || die "apt-get source kubernetes=$DEB_VERSION failed (set SYNCOPATE_K8S_DEB_VERSION to the version apt-cache showsrc kubernetes lists)"
  tar -xzf "$work"/kubernetes_*.orig.tar.gz -C "$work"
  local src="$work/kubernetes-$UPSTREAM"
  [[ -d $src ]] || die "unexpected tarball layout in $work"
  # reflect2 v1.0.1 (vendored) breaks under Go >= 1.18; Debian ships v1.0.2.
  rm -rf "$src/vendor/github.com/modern-go/reflect2"
  mkdir -p "$src/vendor/github.com/modern-go/reflect2"
  find /usr/share/gocode/src/github.com/modern-go/reflect2 -maxdepth 1 -type f \
    \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' -exec cp {} "$src/vendor/github.com/modern-go/reflect2/" \;
  ((${#missing[@]} > 0)) || missing=(kubelet)  # only pause is missing: any one target gives the tree
  log "building ${missing[*]} (one core; ~14 min for the control plane, ~8 for the kubelet, ~11 for kube-proxy; log: $work/build.log)"
  local what
  what="$(printf 'cmd/%s ' "${missing[@]}")"
  if ! (cd "$src" && env GOFLAGS="-p=1 -tags=providerless" CGO_ENABLED=0 GOCACHE="$work/gocache" \
          GOPATH="$work/gopath" nice -n 19 make WHAT="${what% }" >"$work/build.log" 2>&1); then
    tail -n 30 "$work/build.log" >&2
    die "build failed (full log: $work/build.log)"
  fi
  for c in "${missing[@]}"; do
    install -m 0755 "$src/_output/local/bin/linux/amd64/$c" "$BIN/$c"
  done
  # The pod sandbox's process (node.sh makes the pause image from it): Kubernetes' own pause.c.
  gcc -Os -static -DVERSION=3.4.1 -o "$BIN/pause" "$src/build/pause/linux/pause.c" ||
    die "cannot compile pause.c"
  "$BIN/kube-apiserver" --version >"$CACHE/$KEY/VERSION"
  # The tree (2.2 GB) is only needed again to build more binaries from it.
  [[ -n ${SYNCOPATE_K8S_KEEP_WORK:-} ]] || rm -rf "$work"
  log "built in $(((SECONDS - started) / 60)) min: $BIN ($(cat "$CACHE/$KEY/VERSION"))"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits up to $2 seconds for `$1` (a command) to succeed.
wait_for() {
  local cmd="$1" deadline=$((SECONDS + $2))
  until eval "$cmd" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.3
  done
}

start() {
  local dir="${1:?usage: control_plane.sh start DIR [--address IP] [--node NAME]...}" address=127.0.0.1
  local nodes=()
  shift
  while (($#)); do
    case "$1" in
      --address) address="${2:?}"; shift 2 ;;
      --node) nodes+=("${2:?}"); shift 2 ;;
      *) die "start: unknown flag $1" ;;
    esac
  done
  built || die "not built: run 'tests/deploy/harness/control_plane.sh build' or './dev k8s-build' first"
  install_packages "${RUN_PACKAGES[@]}"
  mkdir -p "$dir/pki" "$dir/etcd" "$dir/logs"
  dir="$(cd "$dir" && pwd)"
  local etcd_port peer_port api_port
  etcd_port="$(free_port)"; peer_port="$(free_port)"; api_port="$(free_port)"
  # Service-account signing key and the API server's serving certificate (self-signed, loopback).
  openssl genrsa -out "$dir/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kube-apiserver" \
    -addext "subjectAltName=IP:$address,IP:127.0.0.1,DNS:localhost" \
    -keyout "$dir/pki/apiserver.key" -out "$dir/pki/apiserver.crt" 2>/dev/null
  # The client certificate the API server presents to kubelets (logs, exec), from a CA that
  # node.sh's kubelet trusts.
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kubelet-client-ca" \
    -keyout "$dir/pki/kubelet-client-ca.key" -out "$dir/pki/kubelet-client-ca.crt" 2>/dev/null
  openssl req -new -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
    -keyout "$dir/pki/apiserver-kubelet-client.key" -out "$dir/pki/apiserver-kubelet-client.csr" 2>/dev/null
  openssl x509 -req -in "$dir/pki/apiserver-kubelet-client.csr" -CA "$dir/pki/kubelet-client-ca.crt" \
    -CAkey "$dir/pki/kubelet-client-ca.key" -CAcreateserial -days 2 \
    -out "$dir/pki/apiserver-kubelet-client.crt" 2>/dev/null
  # Static token authentication: one admin (system:masters) for helm/kubectl, and one identity
  # each for the controller manager and the scheduler (their built-in RBAC roles apply).
  # And one per kubelet (node.sh): user system:node:<name> in group system:nodes, which the Node
  # authorizer and the NodeRestriction admission plugin expect; and one for kube-proxy (the
  # built-in binding gives user system:kube-proxy the role system:node-proxier).
  local admin_token cm_token sched_token proxy_token node_tokens=() i one_node=false
  admin_token="$(openssl rand -hex 16)"; cm_token="$(openssl rand -hex 16)"; sched_token="$(openssl rand -hex 16)"
  proxy_token="$(openssl rand -hex 16)"
  ((${#nodes[@]} > 0)) || { nodes=("$NODE_NAME"); one_node=true; }
  for i in "${!nodes[@]}"; do node_tokens+=("$(openssl rand -hex 16)"); done
  {
    echo "$admin_token,admin,admin,system:masters"
    echo "$cm_token,system:kube-controller-manager,system:kube-controller-manager"
    echo "$sched_token,system:kube-scheduler,system:kube-scheduler"
    echo "$proxy_token,system:kube-proxy,system:kube-proxy"
    for i in "${!nodes[@]}"; do
      echo "${node_tokens[$i]},system:node:${nodes[$i]},system:node:${nodes[$i]},system:nodes"
    done
  } >"$dir/pki/tokens.csv"
  chmod 600 "$dir/pki/tokens.csv" "$dir/pki/"*.key
  kubeconfig() {  # kubeconfig TOKEN FILE
    cat >"$2" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$address:$api_port", certificate-authority: "$dir/pki/apiserver.crt"}
users:
- name: user
  user: {token: "$1"}
contexts:
- name: local
  context: {cluster: local, user: user, namespace: default}
current-context: local
EOF
    chmod 600 "$2"
  }
  kubeconfig "$admin_token" "$dir/kubeconfig"
  kubeconfig "$cm_token" "$dir/controller-manager.kubeconfig"
  kubeconfig "$sched_token" "$dir/scheduler.kubeconfig"
  kubeconfig "$proxy_token" "$dir/kube-proxy.kubeconfig"
  if $one_node; then
    kubeconfig "${node_tokens[0]}" "$dir/node.kubeconfig"
  else
    for i in "${!nodes[@]}"; do kubeconfig "${node_tokens[$i]}" "$dir/node-${nodes[$i]}.kubeconfig"; done
  fi

  etcd --name=syncopate-test --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="syncopate-test=http://127.0.0.1:$peer_port" \
    >"$dir/logs/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address="$address" --secure-port="$api_port" --advertise-address="$address" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
    --token-auth-file="$dir/pki/tokens.csv" --authorization-mode=Node,RBAC \
    --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
    --kubelet-client-certificate="$dir/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$dir/pki/apiserver-kubelet-client.key" --kubelet-preferred-address-types=InternalIP,Hostname \
    --enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,ResourceQuota,NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    >"$dir/logs/kube-apiserver.log" 2>&1 &
  echo $! >"$dir/kube-apiserver.pid"
  echo "$api_port" >"$dir/api_port"
  local kubectl_cmd="curl -sf --cacert '$dir/pki/apiserver.crt' -H 'Authorization: Bearer $admin_token' https://$address:$api_port/readyz"
  if ! wait_for "$kubectl_cmd" 60; then
    tail -n 20 "$dir/logs/kube-apiserver.log" >&2
    stop "$dir"
    die "kube-apiserver not ready after 60 s (logs in $dir/logs)"
  fi
  "$BIN/kube-controller-manager" --kubeconfig="$dir/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --port=0 --leader-elect=false \
    --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/apiserver.crt" \
    --use-service-account-credentials=true --controllers='*,-csrsigning' \
    >"$dir/logs/kube-controller-manager.log" 2>&1 &
  echo $! >"$dir/kube-controller-manager.pid"
  "$BIN/kube-scheduler" --kubeconfig="$dir/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --port=0 --leader-elect=false \
    >"$dir/logs/kube-scheduler.log" 2>&1 &
  echo $! >"$dir/kube-scheduler.pid"
  echo "$dir/kubeconfig"
}

stop() {
  local dir="${1:?usage: control_plane.sh stop DIR}" name pid deadline
  # Reverse start order: the controllers first, etcd last.
  for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    [[ -f $dir/$name.pid ]] || continue
    pid="$(cat "$dir/$name.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/$name.pid"
  done
}

storage() {
  local dir="${1:?}" class="${2:?}" size="${3:?}" count="${4:?}" default=false access=ReadWriteOnce i
  local kubectl flag
  shift 4
  for flag in "$@"; do
    case "$flag" in
      --default) default=true ;;
      --rwx) access=ReadWriteMany ;;
      *) echo "control_plane.sh storage: unknown flag $flag" >&2; return 2 ;;
    esac
  done
  kubectl="$("$(dirname "${BASH_SOURCE[0]}")/../k8s_tools.sh")/layer/kubectl/kubectl"
  "$kubectl" --kubeconfig="$dir/kubeconfig" apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $class
  annotations: {storageclass.kubernetes.io/is-default-class: "$default"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
YAML
  for i in $(seq 1 "$count"); do
    # World-writable: hostPath volumes get no fsGroup ownership, and pods run as uid 10001.
    mkdir -p "$dir/volumes/$class-$i" && chmod 0777 "$dir/volumes/$class-$i"
    "$kubectl" --kubeconfig="$dir/kubeconfig" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $class-$i}
spec:
  capacity: {storage: $size}
  accessModes: [$access]
  storageClassName: $class
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $dir/volumes/$class-$i}
YAML
  done
}

case "${1:-}" in
  build) build ;;
  storage) shift; storage "$@" ;;
  install) shift; install_packages "$@" ;;
  bin) shift; built "$@" && echo "$BIN" || exit 1 ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
