#!/usr/bin/env bash
# Make a bare Debian 12 machine able to build and run docker/docker-compose.yml without a Docker
# engine or a registry: rootful podman + Debian's docker-compose 1.29. Idempotent; run as root.
#   1. podman's containers.conf drop-in: ulimits the sandbox allows, netavark (service-name DNS),
#      runc (crun fails on hybrid cgroups) — measured in ../shared/TOOLING.md;
#   2. localhost/debian:bookworm built by debootstrap (no registry to pull it from), the rootfs
#      tarball cached in $SYNCOPATE_CACHE so later runs only re-import it;
#   3. the podman API socket that docker-compose talks to.
# Prints `export DOCKER_HOST=...` on its last line.
set -euo pipefail

CACHE="${SYNCOPATE_CACHE:-/var/cache/syncopate}"
SOCKET="${PODMAN_SOCKET:-/run/podman/podman.sock}"
BASE_IMAGE="localhost/debian:bookworm"

log() { echo "podman-setup: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  log "needs root (rootful podman); run: sudo $0"
  exit 1
fi

packages=(podman runc conmon netavark aardvark-dns iptables fuse-overlayfs slirp4netns uidmap
          catatonit buildah debootstrap docker-compose curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The hard nofile limit is whatever this sandbox allows; podman's default asks for more and fails.
conf=/etc/containers/containers.conf.d/50-syncopate.conf
want="$(cat <<CONF
# Written by syncopate docker/podman-setup.sh
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]

[network]
network_backend = "netavark"

[engine]
runtime = "runc"
CONF
)"
if [[ ! -f $conf ]] || [[ "$(cat "$conf")" != "$want" ]]; then
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" >"$conf"
  log "wrote $conf"
  # A network backend switch needs a reset; only when nothing was ever created with CNI.
  if [[ "$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null)" != "netavark" ]]; then
    podman system reset --force >/dev/null 2>&1 || true
  fi
fi

if ! podman image exists "$BASE_IMAGE"; then
  mkdir -p "$CACHE"
  tarball="$CACHE/debian-bookworm-minbase.tar"
  if [[ ! -s $tarball ]]; then
    mirror="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
      2>/dev/null | grep -oE 'https?://[^ ]+' | head -1 || true)"
    mirror="${mirror:-http://deb.debian.org/debian}"
    rootfs="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
    log "debootstrap bookworm from $mirror (~30 s)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 || {
      log "debootstrap failed; see $CACHE/debootstrap.log"; rm -rf "$rootfs"; exit 1; }
    # The host's apt sources (same mirror) so `apt-get` inside builds works offline-from-registry.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  log "importing $tarball as $BASE_IMAGE"
  podman import --quiet "$tarball" "$BASE_IMAGE" >/dev/null
fi

# A service started from a directory that was deleted since (a removed checkout) answers pings
# but every container it starts fails ("write child: broken pipe": conmon cannot get its
# working directory). Replace such a service.
for pid in $(pgrep -f "podman system service .*unix://$SOCKET" || true); do
  if [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == *"(deleted)" ]]; then
    log "restarting the podman API service (its working directory was deleted)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$SOCKET"
  fi
done

if ! curl -fsS --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1; then
  mkdir -p "$(dirname "$SOCKET")"
  log "starting the podman API service on $SOCKET"
  mkdir -p "$CACHE"
  # From / so its working directory (inherited by every conmon it spawns) never disappears. The
  # subshell's own output goes nowhere too: the background job it forks would otherwise hold this
  # script's stdout open, and a caller reading it (`podman-setup.sh | tail -n 1`) would never see EOF.
  (cd / && setsid nohup podman system service --time=0 "unix://$SOCKET" </dev/null \
     >"$CACHE/podman-service.log" 2>&1 &) </dev/null >/dev/null 2>&1
  for _ in $(seq 1 50); do
    curl -fsS --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS --unix-socket "$SOCKET" http://d/_ping >/dev/null || {
    log "podman API did not come up; see $CACHE/podman-service.log"; exit 1; }
fi
echo "export DOCKER_HOST=unix://$SOCKET"
