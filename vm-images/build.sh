#!/bin/bash
# Build the qoelab guest: Debian 12 from Debian packages only (debootstrap), X at 800x600, openbox,
# chromium in kiosk mode, autologin, sshd + x2goserver, and a readiness line on the second serial port.
# Output (git-ignored): $OUT/{disk.qcow2,vmlinuz,initrd.img,manifest.json,rd-password,root-key}.
# Cached: skipped when $OUT/manifest.json records the same input hash (this script + packages.txt).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${QOELAB_VM_IMAGE_DIR:-$HERE/out}"
SUITE=bookworm
DISK_SIZE="${QOELAB_VM_DISK_SIZE:-4G}"  # virtual size; qcow2 only stores what is used
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

die() { echo "vm-image: $*" >&2; exit 1; }
[[ $EUID -eq 0 ]] || die "must run as root (debootstrap, chroot)"
for tool in debootstrap qemu-img qemu-system-x86_64 mkfs.ext4 sha256sum python3 ssh-keygen; do
    command -v "$tool" >/dev/null || die "missing $tool: apt-get install -y debootstrap qemu-utils qemu-system-x86 e2fsprogs python3"
done
QOELAB="$HERE/../.venv/bin/qoelab"  # the self-test boots the image as a trial would
[[ -x "$QOELAB" ]] || die "missing $QOELAB (the self-test runs qoelab vm prepare): run make deps first"

INPUT_HASH="$(cat "$HERE/build.sh" "$HERE/packages.txt" | sha256sum | cut -d' ' -f1)"
if [[ $FORCE -eq 0 && -f "$OUT/manifest.json" && -f "$OUT/disk.qcow2" ]] \
    && python3 -c 'import json,sys; m = json.load(open(sys.argv[1])); sys.exit(m["input_hash"] != sys.argv[2] or not m.get("selftest"))' \
        "$OUT/manifest.json" "$INPUT_HASH"; then
    echo "vm-image: up to date ($OUT, input hash ${INPUT_HASH:0:12})"
    exit 0
fi

# Reuse the mirror apt already uses on this host (deb822 or one-line format).
MIRROR="${QOELAB_DEBIAN_MIRROR:-}"
if [[ -z "$MIRROR" ]]; then
    MIRROR="$(grep -hE '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')"
    [[ -z "$MIRROR" ]] && MIRROR="$(grep -hE '^deb .*/debian/? ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | grep -v security | head -1 | awk '{print $2}')"
    [[ -z "$MIRROR" ]] && MIRROR=http://deb.debian.org/debian
fi

START=$(date +%s)
WORK="$(mktemp -d "${TMPDIR:-/var/tmp}/qoelab-vm-image.XXXXXX")"
ROOT="$WORK/root"
SELFTEST_PID=""
SELFTEST_PENDING=0
rollback() {  # the new image failed its self-test or the build was stopped during it: the old one back
    rm -rf "$OUT"
    [[ -e "$OUT.old" ]] && mv "$OUT.old" "$OUT"
    SELFTEST_PENDING=0
}
cleanup() {
    if [[ -n "$SELFTEST_PID" ]]; then  # qoelab stops its QEMU and drops its namespace on SIGTERM
        kill "$SELFTEST_PID" 2>/dev/null
        wait "$SELFTEST_PID" 2>/dev/null
    fi
    (( SELFTEST_PENDING )) && rollback
    for m in dev/pts dev proc sys; do mountpoint -q "$ROOT/$m" 2>/dev/null && umount -l "$ROOT/$m"; done
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "vm-image: debootstrap $SUITE from $MIRROR"
debootstrap --variant=minbase --include=ca-certificates,locales "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -30 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }

mount -t proc proc "$ROOT/proc"
mount -t sysfs sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
# No daemon may start inside the build chroot.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"; chmod 755 "$ROOT/usr/sbin/policy-rc.d"
cat >"$ROOT/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
SRC
SECURITY="$(grep -hE '^URIs:.*debian-security' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')"
[[ -n "$SECURITY" ]] && echo "deb $SECURITY $SUITE-security main" >>"$ROOT/etc/apt/sources.list"

PKGS="$(sed -e 's/#.*//' "$HERE/packages.txt" | xargs)"
echo "vm-image: apt-get install $PKGS"
chroot "$ROOT" /bin/bash -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -q && \
    apt-get install -y -q --no-install-recommends $PKGS && apt-get clean" >"$WORK/apt.log" 2>&1 \
    || { tail -40 "$WORK/apt.log" >&2; die "apt-get install in the guest failed"; }
rm -f "$ROOT/usr/sbin/policy-rc.d"

# --- guest configuration -------------------------------------------------------------------------
echo qoelab-guest >"$ROOT/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 qoelab-guest\n' >"$ROOT/etc/hosts"
printf '/dev/vda / ext4 defaults,noatime 0 1\n' >"$ROOT/etc/fstab"
echo 'C.UTF-8 UTF-8' >"$ROOT/etc/locale.gen"

# Fixed guest address on its own /24 behind the tap in the server namespace (see docs/vm.md).
cat >"$ROOT/etc/systemd/network/10-qoelab.network" <<'NET'
[Match]
Name=en* eth*
[Network]
Address=10.213.0.2/24
Gateway=10.213.0.1
NET
chroot "$ROOT" systemctl enable systemd-networkd ssh >/dev/null 2>&1

# The benchmark account: autologin into X, and X2Go logins (password in $OUT/rd-password, root-only).
PASSWORD="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
chroot "$ROOT" useradd -m -s /bin/bash -G dialout,video,audio rd
echo "rd:$PASSWORD" | chroot "$ROOT" chpasswd
chroot "$ROOT" passwd -l root >/dev/null
# Root logs in by key only (sshd's default prohibit-password): the storage benchmark's client runs
# mounts, iscsiadm and drop_caches in the guest. The private key stays in $OUT/root-key (root-only).
ssh-keygen -q -t ed25519 -N "" -C qoelab-worker -f "$WORK/root-key"
install -d -m 700 "$ROOT/root/.ssh"
install -m 600 "$WORK/root-key.pub" "$ROOT/root/.ssh/authorized_keys"

# Xorg runs via the setuid wrapper from a service (no logind seat needed).
printf 'allowed_users=anybody\nneeds_root_rights=yes\n' >"$ROOT/etc/X11/Xwrapper.config"
mkdir -p "$ROOT/etc/X11/xorg.conf.d"
cat >"$ROOT/etc/X11/xorg.conf.d/10-qoelab.conf" <<'XORG'
Section "Device"
    Identifier "card0"
    Driver "modesetting"
EndSection
Section "Screen"
    Identifier "screen0"
    Device "card0"
    DefaultDepth 24
    SubSection "Display"
        Depth 24
        Modes "800x600"
        Virtual 800 600
    EndSubSection
EndSection
Section "ServerFlags"
    Option "BlankTime" "0"
    Option "StandbyTime" "0"
    Option "SuspendTime" "0"
    Option "OffTime" "0"
EndSection
XORG

# The kiosk session: URL from the kernel command line (qoelab.url=...), readiness line on ttyS1 once
# the browser window is mapped (the host waits for it instead of sleeping).
# The start page waits for the trial's page server (10.213.0.1:8080 on the tap, started by the worker)
# and then opens its first page. A guest restored from a snapshot is sitting on this page, so one
# snapshot serves every trial whatever its pages (no disk sharing such as virtio-9p, which would also
# block QEMU from saving the VM's state).
mkdir -p "$ROOT/usr/local/share/qoelab"
cat >"$ROOT/usr/local/share/qoelab/wait.html" <<'WAIT'
<!doctype html>
<html><head><meta charset="utf-8"><title>qoelab: waiting for pages</title>
<style>body{margin:0;background:#e8e8e8;font:20px sans-serif;color:#333}p{margin:80px 40px}</style>
</head><body><p>qoelab guest: waiting for the trial's page server at <b>10.213.0.1:8080</b>&hellip;</p>
<script>
const base = "http://10.213.0.1:8080/";
async function poll() {
  try {
    await fetch(base + "page1.html", {mode: "no-cors", cache: "no-store"});
    location.replace(base + "page1.html");
  } catch (e) {
    setTimeout(poll, 200);
  }
}
poll();
</script></body></html>
WAIT
cat >"$ROOT/usr/local/bin/qoelab-session" <<'SESSION'
#!/bin/sh
url=file:///usr/local/share/qoelab/wait.html
for arg in $(cat /proc/cmdline); do
    case "$arg" in qoelab.url=*) url="${arg#qoelab.url=}" ;; esac
done
# Each step of the kiosk's start is said on ttyS1 (QOELAB-STEP <step> <uptime>), so a guest that never
# shows its page is reported with the step it did not reach (qoelab.vm.guest).
step() { echo "QOELAB-STEP $1 $(cut -d' ' -f1 /proc/uptime)" >/dev/ttyS1; }
step x-server
xset s off -dpms
xsetroot -solid black
openbox &
# The browser only once the window manager is up (it sets _NET_SUPPORTING_WM_CHECK on the root).
i=0
while [ $i -lt 60 ] && ! xprop -root _NET_SUPPORTING_WM_CHECK 2>/dev/null | grep -q 'window id'; do
    sleep 0.5; i=$((i + 1))
done
[ $i -lt 60 ] && step window-manager
qoelab-kiosk-browser console /tmp/qoelab-chromium "$url" &
browser=$!
# Poll rather than `xdotool search --sync`: that exits with an X error when one of chromium's
# startup windows vanishes mid-search, and the ready line was then never written.
while kill -0 "$browser" 2>/dev/null; do
    if xdotool search --onlyvisible --class chromium >/dev/null 2>&1; then
        echo "QOELAB-READY $(cut -d' ' -f1 /proc/uptime)" >/dev/ttyS1
        break
    fi
    sleep 0.5
done
wait "$browser"
SESSION
chmod 755 "$ROOT/usr/local/bin/qoelab-session"
# The browser with the namespace mode's flags (qoelab.rd.desktop.CHROMIUM_FLAGS): both modes render
# the same pages the same way. Used by the autologin session and by X2Go sessions.
cat >"$ROOT/usr/local/bin/qoelab-kiosk-browser" <<'BROWSER'
#!/bin/sh
# usage: qoelab-kiosk-browser ROLE PROFILE_DIR URL   (ROLE: console or x2go, named in its reports)
start_browser() {
    exec chromium --no-sandbox --test-type --disable-gpu --disable-background-networking --disable-component-update \
        --disable-features=Translate,MediaRouter,OptimizationHints,WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup \
        --disable-session-crashed-bubble --ipc-connection-timeout=600 --enable-logging=stderr \
        --disable-smooth-scrolling --noerrdialogs --no-first-run --no-default-browser-check \
        --password-store=basic --kiosk --window-size=800,600 --window-position=0,0 \
        $ipc --user-data-dir="$1" "$2"
}
# A start that never shows its page is restarted: the window stayed "Untitled" and blank when Chromium's
# children ended themselves before the browser reached them (docs/vm.md, "Why the guest's browser
# stalled"; --ipc-connection-timeout above is the cure, this the safety net). Every qoelab page's
# title starts with "qoelab", so a browser whose window has shown no such title STALL_S after it was
# mapped (or that mapped none within MAP_S) is restarted, twice at most; each restart is reported
# on ttyS1 next to the ready line, and so is giving up (qoelab.vm.bench reads both, by role).
# Times are guest uptime.
role="$1"; profile="$2"; url="$3"
# qoelab.ipc_timeout=N on the kernel command line overrides the flag above (the last one counts):
# a benchmark boots with Chromium's own 15 s to show the stall on purpose (benchmarks/vm_reliability).
ipc=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in qoelab.ipc_timeout=*) ipc="--ipc-connection-timeout=${arg#qoelab.ipc_timeout=}" ;; esac
done
STALL_S=${QOELAB_BROWSER_STALL_S:-90}
MAP_S=${QOELAB_BROWSER_MAP_S:-240}
uptime_s() { cut -d. -f1 /proc/uptime; }
for attempt in 1 2 3; do
    rm -rf "$profile"
    # Its log (INFO and up) to a file beside the profile, for diagnosis: a child that ended itself
    # says "Terminating current process after N seconds with no connection" there.
    start_browser "$profile" "$url" >"$profile.log" 2>&1 </dev/null &
    pid=$!
    deadline=$(($(uptime_s) + MAP_S)); mapped=0
    while kill -0 "$pid" 2>/dev/null; do
        if xdotool search --onlyvisible --name '^qoelab' >/dev/null 2>&1; then
            [ -w /dev/ttyS1 ] && echo "QOELAB-PAGE-SHOWN $role $attempt $(cut -d' ' -f1 /proc/uptime)" >/dev/ttyS1
            wait "$pid"; exit $?
        fi
        if [ "$mapped" = 0 ] && xdotool search --onlyvisible --class chromium >/dev/null 2>&1; then
            mapped=1; deadline=$(($(uptime_s) + STALL_S))
        fi
        [ "$(uptime_s)" -ge "$deadline" ] && break
        sleep 0.5
    done
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
    pkill -KILL -f -- "--user-data-dir=$profile" 2>/dev/null
    wait "$pid" 2>/dev/null
    [ "$attempt" = 3 ] && break
    [ -w /dev/ttyS1 ] && echo "QOELAB-BROWSER-RESTART $role $attempt $(cut -d' ' -f1 /proc/uptime)" >/dev/ttyS1
done
[ -w /dev/ttyS1 ] && echo "QOELAB-BROWSER-GAVE-UP $role 3 $(cut -d' ' -f1 /proc/uptime)" >/dev/ttyS1
exit 1
BROWSER
# X2Go session command (pyhoca-cli -c qoelab-x2go-kiosk): the same start page inside the X2Go agent.
# python-x2go only runs commands `which` finds on the server and mangles any containing '/'.
# A browser that ends ends the session: it says so on ttyS1 with its exit status, the guest's free
# memory and the browser's last words (the host puts them in the trial's error, qoelab.vm.bench).
cat >"$ROOT/usr/local/bin/qoelab-x2go-kiosk" <<'X2GO'
#!/bin/sh
profile="/tmp/qoelab-x2go-chromium-$$"
qoelab-kiosk-browser x2go "$profile" file:///usr/local/share/qoelab/wait.html
rc=$?
if [ -w /dev/ttyS1 ]; then
    avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
    last=$(tail -n 3 "$profile.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)
    echo "QOELAB-X2GO-BROWSER-EXIT $rc $(cut -d' ' -f1 /proc/uptime) available_mb=$avail $last" >/dev/ttyS1
fi
exit $rc
X2GO
chmod 755 "$ROOT/usr/local/bin/qoelab-kiosk-browser" "$ROOT/usr/local/bin/qoelab-x2go-kiosk"
# nxagent with an image rate limit above any link rate: its documented "no limit" default holds back
# pages drawn at link ADSL for ~4 s (docs/rd-benchmark.md, "X2Go's silent gap"). Keep in step with
# qoelab.vm.bench.GUEST_X2GO_IRLIMIT.
echo 'X2GO_NXAGENT_DEFAULT_OPTIONS+=" -irlimit 1000000"' >>"$ROOT/etc/x2go/x2goagent.options"
cat >"$ROOT/etc/systemd/system/qoelab-kiosk.service" <<'UNIT'
[Unit]
Description=qoelab kiosk (autologin X session of user rd)
After=systemd-user-sessions.service local-fs.target dbus.service systemd-logind.service
[Service]
User=rd
WorkingDirectory=/home/rd
ExecStart=/usr/bin/xinit /usr/local/bin/qoelab-session -- :0 vt7 -nolisten tcp -noreset -keeptty
Restart=on-failure
[Install]
WantedBy=multi-user.target
UNIT
chroot "$ROOT" systemctl enable qoelab-kiosk.service >/dev/null 2>&1
# x2goserver.service runs x2gocleansessions, which starts perl's x2golistsessions_sql every 2 s: under
# TCG each start takes seconds, so it held about one of the guest's two vCPUs all the time, in VNC and
# SPICE trials too, and the X2Go session's browser missed its start deadline (docs/vm.md). It only
# tidies up dead sessions: it runs when the guest's CPUs have nothing else to do.
mkdir -p "$ROOT/etc/systemd/system/x2goserver.service.d"
cat >"$ROOT/etc/systemd/system/x2goserver.service.d/qoelab-idle.conf" <<'IDLE'
[Service]
Nice=19
CPUSchedulingPolicy=idle
IDLE
chroot "$ROOT" systemctl set-default multi-user.target >/dev/null 2>&1
# Fewer units that only cost boot time under TCG.
chroot "$ROOT" systemctl mask apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer \
    fstrim.timer >/dev/null 2>&1 || true

# --- export: kernel/initrd, package list, disk -----------------------------------------------------
mkdir -p "$OUT.new"
cp "$(ls "$ROOT"/boot/vmlinuz-* | sort -V | tail -1)" "$OUT.new/vmlinuz"
cp "$(ls "$ROOT"/boot/initrd.img-* | sort -V | tail -1)" "$OUT.new/initrd.img"
chroot "$ROOT" dpkg-query -W -f '${Package}\t${Version}\n' >"$OUT.new/packages.tsv"
echo -n "$PASSWORD" >"$OUT.new/rd-password"; chmod 600 "$OUT.new/rd-password"
install -m 600 "$WORK/root-key" "$OUT.new/root-key"
for m in dev/pts dev proc sys; do umount -l "$ROOT/$m"; done
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*_*

mkfs.ext4 -q -F -L qoelab-root -d "$ROOT" "$WORK/disk.raw" "$DISK_SIZE"
qemu-img convert -O qcow2 -c "$WORK/disk.raw" "$OUT.new/disk.qcow2"

# --- manifest, install --------------------------------------------------------------------------
END=$(date +%s)
python3 - "$OUT.new" "$INPUT_HASH" "$SUITE" "$MIRROR" "$START" "$END" "$DISK_SIZE" <<'PY'
import hashlib, json, os, sys
out, input_hash, suite, mirror, start, end, disk_size = sys.argv[1:]
def sha(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
files = {n: {"sha256": sha(os.path.join(out, n)), "bytes": os.path.getsize(os.path.join(out, n))}
         for n in ("disk.qcow2", "vmlinuz", "initrd.img")}
pkgs = dict(line.split("\t", 1) for line in open(os.path.join(out, "packages.tsv")).read().splitlines())
json.dump({"format": 1, "input_hash": input_hash, "suite": suite, "mirror": mirror,
           "built_at": int(end), "build_seconds": int(end) - int(start), "disk_virtual_size": disk_size,
           "files": files, "packages": pkgs, "selftest": None},
          open(os.path.join(out, "manifest.json"), "w"), indent=1, sort_keys=True)
PY
# The new image goes in place before its self-test (the guest's saved state refers to its disk by
# path); the old one waits beside it and comes back if the self-test fails or is interrupted.
rm -rf "$OUT.old"
[[ -e "$OUT" ]] && mv "$OUT" "$OUT.old"
mv "$OUT.new" "$OUT"
SELFTEST_PENDING=1

# --- self-test: the new image boots once (TCG, which every host has) and its kiosk shows the start page
# An image that a package update broke fails here, at build time, never at a trial's. The self-test
# is `qoelab vm prepare`: it boots the guest as a trial would (in a private namespace, its NIC on a
# tap with nothing behind it), waits until the guest says its browser shows a qoelab page and the
# screen is painted, and saves that state. The host's first VM-mode trial (under TCG) then restores
# it instead of booting a second time.
echo "vm-image: self-test: booting the new image (TCG) to its start page and saving it (qoelab vm prepare)"
"$QOELAB" vm prepare --accel tcg --image-dir "$OUT" --json >"$WORK/selftest.json" 2>"$WORK/selftest.err" &
SELFTEST_PID=$!
wait "$SELFTEST_PID" && rc=0 || rc=$?
SELFTEST_PID=""
if (( rc != 0 )); then
    rollback
    die "self-test: the new image did not show its start page ($(tail -3 "$WORK/selftest.err" | tr '\n' ' ')); not installed"
fi
python3 - "$OUT/manifest.json" "$WORK/selftest.json" <<'PY'
import json, sys
path, selftest = sys.argv[1:]
manifest, done = json.load(open(path)), json.load(open(selftest))
manifest["selftest"] = {"accel": done["accel"], "page_shown_s": done["boot_to_ready_s"],
                        "snapshot": done["key"], "by": "qoelab vm prepare"}
json.dump(manifest, open(path + ".new", "w"), indent=1, sort_keys=True)
PY
mv "$OUT/manifest.json.new" "$OUT/manifest.json"
SELFTEST_PENDING=0
rm -rf "$OUT.old"
echo "vm-image: self-test passed: start page shown $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["boot_to_ready_s"])' "$WORK/selftest.json") s after QEMU started; the guest's state is saved"

echo "vm-image: built $OUT in $((END - START)) s, self-test included $(( $(date +%s) - START )) s ($(du -sh "$OUT/disk.qcow2" | cut -f1) disk)"
