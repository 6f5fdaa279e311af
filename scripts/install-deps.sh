#!/usr/bin/env bash
# Install what qoelab needs on a Debian 12 host: Debian packages, the .venv, npm packages, the C
# emulator and the front-end build. Idempotent; each step is skipped when its inputs are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=.state
mkdir -p "$STATE"

# Debian packages. Lab tools: iproute2 (netns, tc), iperf3, ping, tshark; guests: QEMU, debootstrap
# (make vm-image), nftables (X2Go in VM mode: DNAT to the guest's sshd); remote desktops: TigerVNC,
# TightVNC viewer, Xspice (spiceqxl) + remote-viewer, X2Go server/client, xdotool, xsetroot (tests),
# ffmpeg (recordings); storage APT: nbdkit and tgt (NBD and iSCSI targets), libnbd-dev and libiscsi-dev
# (the apt-bdl helper), libiscsi-bin (iscsi-ls, iscsi-inq for checking a target by hand); offload
# emulation (VOSE): libssl-dev (the vose-pair helper's SHA-1 and AES), ethtool (checksum offload flags);
# thin-client Enhancement 1: clang, libbpf-dev, bpftool (workers/qoelab/thinclient/bpf);
# services: postgresql, redis; browser tests: chromium; build: gcc, make, python3-venv; wrk (the load
# generator of benchmarks/reliability); storage benchmark (thesis 001, workers/qoelab/storage): nfs-ganesha
# and nfs-ganesha-vfs (the NFSv4 target, no kernel nfsd here), fuse2fs (the export's ext4 image where
# loop mounts fail), libnfs-utils (nfs-ls/nfs-cp/nfs-cat: readiness and tests), swift, swift-proxy,
# swift-account, swift-container, swift-object (the Swift all-in-one target), memcached (tempauth keeps
# its tokens there), python3-swiftclient (the swift command: readiness and tests), rclone and fuse3 (Swift's
# client on the host, swift_client=host: workers/qoelab/storage/hostclient.py); nginx (the buffering
# proxy in front of gunicorn, scripts/nginx/: make demo starts its own, not the packaged site).
DEB_PACKAGES=(
  ca-certificates curl git make gcc libc6-dev pkg-config procps psmisc
  python3 python3-venv python3-dev
  iproute2 iperf3 iputils-ping tshark util-linux
  tigervnc-standalone-server x11vnc xtightvncviewer virt-viewer xserver-xspice
  x2goserver x2goserver-xsession pyhoca-cli openssh-server
  xdotool x11-apps x11-utils x11-xserver-utils ffmpeg socat spice-html5
  qemu-system-x86 qemu-utils debootstrap e2fsprogs nftables
  nbdkit tgt libnbd-dev libiscsi-dev libiscsi-bin libssl-dev ethtool
  postgresql postgresql-client redis-server redis-tools
  chromium xvfb fonts-dejavu-core wrk nginx
  clang libbpf-dev bpftool
  nfs-ganesha nfs-ganesha-vfs fuse2fs libnfs-utils memcached python3-swiftclient rclone fuse3
  swift swift-proxy swift-account swift-container swift-object
)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "qoelab needs these Debian packages: ${missing[*]}; run 'make demo' or 'make test' as root, or install them" >&2
    exit 1
  fi
  echo "==> installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$STATE/apt.log" 2>&1 \
    || { tail -30 "$STATE/apt.log" >&2; echo "apt-get install failed (log: $STATE/apt.log)" >&2; exit 1; }
  # Installing nginx starts Debian's default site on port 80: the host had no web server there before.
  if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now nginx >/dev/null 2>&1 && echo "==> stopped the nginx package's default site (qoelab runs its own)"
  fi
fi

# Python: one virtualenv for the worker library, the backend and the test tools. Use Debian's
# python3 so the venv works the same on every Debian 12 host.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
stamp="$STATE/venv.stamp"
want=$(cat workers/pyproject.toml backend/pyproject.toml | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> creating .venv and installing Python packages"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e ./workers -e './backend[test]'
  echo "$want" >"$stamp"
fi

# npm packages (lockfile) and the static front-end build.
if [ -f frontend/package.json ]; then
  fstamp="$STATE/frontend.stamp"
  fwant=$( (cat frontend/package-lock.json; find frontend/src frontend/build.mjs -type f 2>/dev/null | sort | xargs cat) | sha256sum | cut -c1-16)
  if [ ! -d frontend/dist ] || [ "$(cat "$fstamp" 2>/dev/null)" != "$fwant" ]; then
    echo "==> building the front end (npm ci)"
    (cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
    echo "$fwant" >"$fstamp"
  fi
fi

# The userspace link emulator (C, no dependencies).
if [ -f workers/csrc/Makefile ]; then
  make -s -C workers/csrc
fi
# The storage APT block-device layer helper (C, libnbd and libiscsi).
if [ -f workers/qoelab/apt/csrc/Makefile ]; then
  make -s -C workers/qoelab/apt/csrc
fi
# The VOSE record pair (C, libcrypto).
if [ -f workers/qoelab/vose/csrc/Makefile ]; then
  make -s -C workers/qoelab/vose/csrc
fi
# The thin-client replay pair (C, libc only).
if [ -f workers/qoelab/thinclient/csrc/Makefile ]; then
  make -s -C workers/qoelab/thinclient/csrc
fi
# The storage benchmark tool of thesis 001, run inside the client guest (C, glibc only: pthreads, libm).
if [ -f workers/qoelab/storage/csrc/Makefile ]; then
  make -s -C workers/qoelab/storage/csrc
fi
# Paper 002's Enhancement 1 as a BPF sock_ops program (clang -target bpf, libbpf headers).
if [ -f workers/qoelab/thinclient/bpf/Makefile ]; then
  make -s -C workers/qoelab/thinclient/bpf
fi
