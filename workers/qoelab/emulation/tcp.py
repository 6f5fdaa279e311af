"""The trial's TCP: congestion control, SACK, socket buffer ceilings and the RTO floor.

A new network namespace inherits the host's default congestion control (``bbr`` on the lab hosts),
while the papers used CUBIC (thesis ch. 4), NewReno (ch. 2) and Reno (paper 002). So every emulated
link sets the trial's TCP in **both** namespaces before anything connects, reads every value back
from the kernel and reports what it read (``EmulatedLink.tcp``, the ``tcp`` entry of the trial's
``link`` result). One mechanism for every job type: the fields live in ``LinkParams``.

* ``cc`` -> ``net.ipv4.tcp_congestion_control`` (per namespace since Linux 4.15);
* ``sack`` -> ``net.ipv4.tcp_sack``;
* ``rmem_max`` / ``wmem_max`` -> the third value of ``net.ipv4.tcp_rmem`` / ``tcp_wmem`` (the
  autotuning ceiling); ``None`` sizes it to the path (``auto_buffer_ceiling``);
* ``rto_min_s`` -> the ``rto_min`` metric of the route to the peer (``ip route ... rto_min``);
  ``None`` keeps the kernel's 200 ms.

Paper 002 (thin-client traffic over a WAN; ``seed-thinclient-tcp.md`` §7.3 maps its items to Linux)
adds knobs that ``None`` leaves at the namespace's own value (read back and recorded either way):

* ``recovery`` -> ``tcp_recovery`` (bit mask; 1 = RACK, 0 = RFC 6675 recovery for SACK flows);
* ``early_retrans`` -> ``tcp_early_retrans`` (only tail loss probes now: 0 off, 3/4 on);
* ``frto`` -> ``tcp_frto`` and ``timestamps`` -> ``tcp_timestamps`` (spurious-RTO detection and undo);
* ``thin_linear_timeouts``, ``slow_start_after_idle``, ``autocorking`` -> the sysctls of those names;
* ``notsent_lowat`` -> ``tcp_notsent_lowat`` (bytes of unsent data a socket may queue);
* ``no_metrics_save`` -> ``tcp_no_metrics_save`` (thesis 001's hosts: no cached per-path metrics);
* ``quickack`` -> the ``quickack 1`` feature of the **client's** route to the server: the receiver
  ACKs every segment (the paper turned delayed ACKs off). It shares that route with ``rto_min``.

Every sysctl is written inside the trial's namespaces only. One the kernel does not keep per
namespace (absent or read-only there, or a write that reaches the host's value) is refused with a
``ParameterError`` naming it, never set host-wide. ``counters`` reads a namespace's TCP MIB counters
(what ``nstat`` shows) so a trial can report RTOs, loss probes and retransmissions per run.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qoelab.errors import ParameterError
from qoelab.units import format_duration

if TYPE_CHECKING:
    from qoelab.emulation.profile import LinkProfile

DEFAULT_CC = "cubic"  # the thesis' chapter 4
_CC_NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")  # the kernel's TCP_CA_NAME_MAX is 16
CC_CAPABILITY_PREFIX = "tcp_cc."  # a worker reports tcp_cc.<name> for every algorithm it offers
AVAILABLE_PATH = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED_PATH = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
BUFFER_MIN, BUFFER_MAX = 8 * 1024, 1 << 30
RTO_MIN_MIN_S, RTO_MIN_MAX_S = 0.001, 10.0  # the kernel clamps rto_min to [jiffy, TCP_RTO_MAX]
KERNEL_RTO_MIN_S = 0.2  # TCP_RTO_MIN when the route sets none

# Linux's defaults for the two buffer triples (min, default, max); the ceiling is what we change.
BUFFER_DEFAULTS = {"rmem": (4096, 131072, 6291456), "wmem": (4096, 16384, 4194304)}
BUFFER_CAP = 256 * 2**20
UNSHAPED_RATE_BPS = 10e9  # what an unshaped link is sized for
NOTSENT_LOWAT_MAX = 2**32 - 1  # also the kernel's default: no limit on unsent data


@dataclass(frozen=True)
class Knob:
    """One optional sysctl of paper 002 (notes §7.3): its ``TcpSettings`` attribute and bounds."""

    attr: str
    sysctl: str  # under net/ipv4; also the field name a ParameterError carries
    lo: int
    hi: int
    boolean: bool = False
    meaning: str = ""  # said with the bound, so a refused value explains the scale
    unit: str = ""

    def bound(self) -> str:
        if self.boolean:
            return "must be a boolean (true or false)"
        return f"must be an integer from {self.lo} to {self.hi}{self.unit}{self.meaning}"

    def encode(self, value: int | bool) -> str:
        return str(int(value))

    def decode(self, raw: str) -> int | bool:
        return raw == "1" if self.boolean else int(raw)


KNOBS = (
    Knob("recovery", "tcp_recovery", 0, 7, meaning=" (a bit mask: 1 = RACK, 0 = RFC 6675 recovery)"),
    Knob("early_retrans", "tcp_early_retrans", 0, 4, meaning=" (now only TLP: 0 off, 3 or 4 on)"),
    Knob("frto", "tcp_frto", 0, 2),
    Knob("timestamps", "tcp_timestamps", 0, 2),
    Knob("thin_linear_timeouts", "tcp_thin_linear_timeouts", 0, 1, boolean=True),
    Knob("slow_start_after_idle", "tcp_slow_start_after_idle", 0, 1, boolean=True),
    Knob("autocorking", "tcp_autocorking", 0, 1, boolean=True),
    Knob("notsent_lowat", "tcp_notsent_lowat", 1, NOTSENT_LOWAT_MAX, unit=" bytes"),
    # Thesis 001 (Fig. 3.2): no per-destination metrics carried from one connection to the next.
    Knob("no_metrics_save", "tcp_no_metrics_save", 0, 1, boolean=True),
)

# The counters that tell what loss recovery did in a run (notes §7.1 item 4), as nstat names them.
COUNTER_KEYS = (
    "TcpExtTCPTimeouts",
    "TcpExtTCPSpuriousRTOs",
    "TcpExtTCPLossUndo",
    "TcpExtTCPLostRetransmit",
    "TcpExtTCPSackRecovery",
    "TcpExtTCPRenoRecovery",
    "TcpExtTCPSackRecoveryFail",
    "TcpExtTCPLossProbes",
    "TcpExtTCPSlowStartRetrans",
    "TcpRetransSegs",
    "TcpOutSegs",
)


class TcpUnavailable(ParameterError):
    """The worker's kernel does not offer the requested congestion control algorithm."""


def is_cc_name(value: object) -> bool:
    """A congestion control name as the kernel spells them (cubic, reno, bbr, ...), nothing else."""
    return isinstance(value, str) and _CC_NAME.fullmatch(value) is not None


@dataclass(frozen=True)
class TcpSettings:
    """What a trial asks of TCP in both namespaces.

    ``None`` is the documented default for the buffers and ``rto_min_s``; for paper 002's knobs
    (``recovery`` ... ``notsent_lowat``) it leaves the namespace's own value, which is still read back.
    """

    cc: str = DEFAULT_CC
    sack: bool = True
    rmem_max: int | None = None
    wmem_max: int | None = None
    rto_min_s: float | None = None
    recovery: int | None = None
    early_retrans: int | None = None
    frto: int | None = None
    timestamps: int | None = None
    thin_linear_timeouts: bool | None = None
    slow_start_after_idle: bool | None = None
    autocorking: bool | None = None
    notsent_lowat: int | None = None
    no_metrics_save: bool | None = None
    quickack: bool = False

    def validate(self) -> TcpSettings:
        if not is_cc_name(self.cc):
            raise ParameterError(
                "tcp_cc", f"must be a congestion control name such as cubic or reno, got {self.cc!r}"
            )
        for name, value in (("tcp_rmem_max", self.rmem_max), ("tcp_wmem_max", self.wmem_max)):
            if value is not None and not BUFFER_MIN <= value <= BUFFER_MAX:
                raise ParameterError(name, f"must be {BUFFER_MIN} to {BUFFER_MAX} bytes, got {value}")
        if self.rto_min_s is not None and not RTO_MIN_MIN_S <= self.rto_min_s <= RTO_MIN_MAX_S:
            raise ParameterError(
                "rto_min",
                f"must be between {format_duration(RTO_MIN_MIN_S)} and {format_duration(RTO_MIN_MAX_S)}, "
                f"got {format_duration(self.rto_min_s)}",
            )
        for knob in KNOBS:
            value = getattr(self, knob.attr)
            if value is None:
                continue
            # bool is an int in Python: True must not pass as tcp_frto=1, nor 1 as a boolean.
            ok = isinstance(value, bool) if knob.boolean else (
                isinstance(value, int) and not isinstance(value, bool) and knob.lo <= value <= knob.hi
            )  # fmt: skip
            if not ok:
                raise ParameterError(knob.sysctl, f"{knob.bound()}, got {value!r}")
        if not isinstance(self.quickack, bool):
            raise ParameterError("tcp_quickack", f"must be a boolean (true or false), got {self.quickack!r}")
        return self

    def knobs_set(self) -> list[tuple[Knob, int | bool]]:
        """The paper-002 sysctls this trial sets (the rest keep the namespace's value)."""
        return [(k, getattr(self, k.attr)) for k in KNOBS if getattr(self, k.attr) is not None]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TcpSettings:
        # Results stored before a field existed lack its key: the dataclass default stands in.
        return cls(**(data or {})).validate()


def available_algorithms() -> list[str]:
    """The congestion control algorithms this kernel offers (built in or loaded)."""
    try:
        return AVAILABLE_PATH.read_text().split()
    except OSError:
        return []


def require_algorithm(cc: str) -> None:
    """Refuse an algorithm the kernel lacks, naming it, before anything is built."""
    offered = available_algorithms()
    if cc not in offered:
        raise TcpUnavailable(
            "tcp_cc",
            f"TCP congestion control {cc!r} is not available in this worker's kernel "
            f"(it offers {', '.join(offered) or 'none'})",
        )


def ensure_allowed(cc: str) -> bool:
    """Let namespaces use ``cc`` as their default; True when the host's list had to grow.

    Linux lets a namespace other than the host's pick only algorithms on the host's
    ``tcp_allowed_congestion_control`` list (EPERM otherwise), which holds just the host's default
    and reno out of the box (``reno bbr`` here): CUBIC must be added. Adding a name only lets
    unprivileged programs choose it too; nothing else on the host changes.
    """
    try:
        allowed = ALLOWED_PATH.read_text().split()
    except OSError:
        return False
    if cc in allowed:
        return False
    try:
        ALLOWED_PATH.write_text(" ".join([*allowed, cc]))
    except OSError as err:
        raise ParameterError(
            "tcp_cc",
            f"cannot add {cc!r} to net.ipv4.tcp_allowed_congestion_control ({err.strerror or err}); "
            "namespaces may use only the host's allowed algorithms: add it as root",
        ) from None
    return True


def capabilities() -> dict[str, bool]:
    """``{"tcp_cc.cubic": True, ...}`` for the heartbeat; the scheduler routes trials by these."""
    return {CC_CAPABILITY_PREFIX + name: True for name in available_algorithms()}


def auto_buffer_ceiling(profile: LinkProfile) -> int:
    """Twice the path's bandwidth-delay product plus its queue; never below Linux's defaults.

    Linux's default ceilings (tcp_wmem 4 MiB) cap one flow at about wmem/RTT, e.g. ~330 Mbit/s at
    100 ms: that would measure the host's defaults, not the emulated path (a tuned long-fat-network
    host is what the testbeds of the papers were).
    """
    rtt = profile.up.delay_s + profile.down.delay_s + profile.up.jitter_s + profile.down.jitter_s
    rate = max(d.capacity_bps() or UNSHAPED_RATE_BPS for d in (profile.up, profile.down))
    queue = max(d.queue_limit_bytes(profile.mtu) for d in (profile.up, profile.down))
    return int(min(BUFFER_CAP, 2 * rate / 8 * rtt + queue))


def sysctl_values(settings: TcpSettings, profile: LinkProfile) -> dict[str, str]:
    """The sysctl keys and values one namespace gets (``/proc/sys`` paths relative to net/ipv4)."""
    auto = auto_buffer_ceiling(profile)
    values = {"tcp_congestion_control": settings.cc, "tcp_sack": "1" if settings.sack else "0"}
    for kind, given in (("rmem", settings.rmem_max), ("wmem", settings.wmem_max)):
        lo, default, top = BUFFER_DEFAULTS[kind]
        ceiling = given if given is not None else max(top, auto)
        values[f"tcp_{kind}"] = f"{min(lo, ceiling)} {min(default, ceiling)} {ceiling}"
    for knob, value in settings.knobs_set():
        values[knob.sysctl] = knob.encode(value)
    return values


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys/net/ipv4") / key


def _field(key: str) -> str:
    return "tcp_cc" if key == "tcp_congestion_control" else key


def _read_own(keys: list[str]) -> dict[str, str | None]:
    """The values this thread's own namespace (the host's, for a worker) has for ``keys``."""
    out: dict[str, str | None] = {}
    for key in keys:
        try:
            out[key] = _sysctl_path(key).read_text()
        except OSError:
            out[key] = None
    return out


def apply(ns: str, settings: TcpSettings, profile: LinkProfile) -> None:
    """Write the trial's TCP sysctls inside namespace ``ns`` (this thread enters it, no fork).

    A sysctl the kernel keeps host-wide is invisible or read-only inside a namespace (``tcp_mem``,
    ``net.core.rmem_max`` here); both are refused naming the field. The host's values are also
    compared before and after, so a kernel that let a namespace write a host-wide value cannot
    silently change the host: the old value is put back and the setting refused.
    """
    from qoelab.emulation.system import in_netns

    values = sysctl_values(settings, profile)
    host_before = _read_own(list(values))
    with in_netns(ns):
        for key, value in values.items():
            path = _sysctl_path(key)
            if not path.exists():
                raise ParameterError(
                    _field(key),
                    f"net.ipv4.{key} does not exist in a network namespace on this kernel "
                    f"({os.uname().release}): it is absent or host-wide only, so it cannot be set per trial",
                )
            try:
                path.write_text(value)
            except OSError as err:
                why = err.strerror or str(err)
                # EPERM on the algorithm means "not on the host's allowed list", not "host-wide".
                if err.errno in (errno.EACCES, errno.EPERM) and key != "tcp_congestion_control":
                    why += " (read-only in a namespace: this kernel keeps it host-wide)"
                raise ParameterError(
                    _field(key), f"cannot set net.ipv4.{key}={value} in namespace {ns}: {why}"
                ) from None
    host_after = _read_own(list(values))
    changed = [k for k in values if host_after[k] != host_before[k]]
    for key in changed:
        with contextlib.suppress(OSError):
            _sysctl_path(key).write_text(host_before[key] or "")
    if changed:
        raise ParameterError(
            _field(changed[0]),
            f"net.ipv4.{changed[0]} is not per network namespace on this kernel: setting it in {ns} "
            "changed the host's value (put back); refusing to set it per trial",
        )


def route_to(ns: str, dst: str, ifname: str | None = None, gateway: str | None = None,
             rto_min_s: float | None = None, quickack: bool = False) -> None:  # fmt: skip
    """Add (or replace) a route in ``ns``, with the trial's ``rto_min`` and ``quickack`` metrics.

    A replace sets the route's whole metrics list, so both must be given in the one call.
    """
    from qoelab.emulation.system import iproute_in

    net = ipaddress.ip_network(dst, strict=False)
    with iproute_in(ns) as ipr:
        kwargs: dict[str, Any] = {"dst": str(net.network_address), "dst_len": net.prefixlen}
        if gateway:
            kwargs["gateway"] = gateway
        if ifname:
            kwargs["oif"] = ipr.link_lookup(ifname=ifname)[0]
        metrics: dict[str, int] = {}
        if rto_min_s is not None:
            # The kernel takes RTAX_RTO_MIN in milliseconds (iproute2's "rto_min 50ms").
            metrics["rto_min"] = max(1, round(rto_min_s * 1e3))
        if quickack:
            metrics["quickack"] = 1  # RTAX_QUICKACK: iproute2's "quickack 1"
        if metrics:
            kwargs["metrics"] = metrics
        ipr.route("replace", **kwargs)


def read_back(ns: str, peer: str) -> dict[str, Any]:
    """What the kernel in ``ns`` really has: the sysctls and the route to ``peer``'s metrics.

    Every knob is reported, set or not (``None``: the kernel lacks that sysctl in a namespace).
    """
    from qoelab.emulation.system import in_netns, iproute_in

    keys = ["tcp_congestion_control", "tcp_sack", "tcp_rmem", "tcp_wmem", *(k.sysctl for k in KNOBS)]
    raw: dict[str, str] = {}
    with in_netns(ns):
        for key in keys:
            with contextlib.suppress(OSError):
                raw[key] = _sysctl_path(key).read_text().strip()
    rto_ms: int | None = None
    quickack = False
    with iproute_in(ns) as ipr:
        for route in ipr.route("get", dst=peer):
            metrics = route.get_attr("RTA_METRICS")
            if metrics is not None:
                rto_ms = metrics.get_attr("RTAX_RTO_MIN")
                quickack = bool(metrics.get_attr("RTAX_QUICKACK"))
    rmem, wmem = (raw.get(k, "").split() for k in ("tcp_rmem", "tcp_wmem"))
    out = {
        "cc": raw.get("tcp_congestion_control"),
        "sack": raw.get("tcp_sack") == "1" if "tcp_sack" in raw else None,
        "rmem": [int(x) for x in rmem] or None,
        "wmem": [int(x) for x in wmem] or None,
        "rmem_max": int(rmem[-1]) if rmem else None,
        "wmem_max": int(wmem[-1]) if wmem else None,
        "rto_min_ms": rto_ms if rto_ms is not None else KERNEL_RTO_MIN_S * 1e3,
        "rto_min_source": "route" if rto_ms is not None else "kernel default",
    }
    for knob in KNOBS:
        out[knob.attr] = knob.decode(raw[knob.sysctl]) if knob.sysctl in raw else None
    out["quickack"] = quickack
    return out


def mismatches(
    settings: TcpSettings, profile: LinkProfile, got: dict[str, Any], side: str = "client"
) -> list[str]:
    """Differences between what was asked and what one namespace reads back (empty: all applied).

    Knobs left ``None`` are not compared; ``quickack`` is asked of the client's route only.
    """
    want = sysctl_values(settings, profile)
    out = []
    if got.get("cc") != settings.cc:
        out.append(f"tcp_cc is {got.get('cc')!r}, not {settings.cc!r}")
    if got.get("sack") is not settings.sack:
        out.append(f"tcp_sack is {got.get('sack')}, not {settings.sack}")
    for kind in ("rmem", "wmem"):
        if got.get(kind) != [int(x) for x in want[f"tcp_{kind}"].split()]:
            out.append(f"tcp_{kind} is {got.get(kind)}, not {want[f'tcp_{kind}']}")
    if settings.rto_min_s is not None and got.get("rto_min_ms") != max(1, round(settings.rto_min_s * 1e3)):
        out.append(f"rto_min is {got.get('rto_min_ms')} ms, not {settings.rto_min_s * 1e3:g} ms")
    for knob, value in settings.knobs_set():
        if got.get(knob.attr) != value:
            out.append(f"{knob.sysctl} is {got.get(knob.attr)!r}, not {value!r}")
    if settings.quickack and side == "client" and got.get("quickack") is not True:
        out.append("the route to the server lacks quickack 1")
    return out


def _read_mib(path: Path, groups: tuple[str, ...]) -> dict[str, int]:
    """nstat-style names (``TcpExtTCPTimeouts``) from a /proc/net MIB file's header/value line pairs."""
    out: dict[str, int] = {}
    lines = path.read_text().splitlines()
    for header, values in zip(lines[::2], lines[1::2], strict=False):
        group, _, names = header.partition(":")
        if group not in groups:
            continue
        for name, value in zip(names.split(), values.partition(":")[2].split(), strict=False):
            out[group + name] = int(value)
    return out


def counters(ns: str | None) -> dict[str, int]:
    """Namespace ``ns``'s TCP counters (``Tcp*`` from /proc/net/snmp, ``TcpExt*`` from netstat).

    ``None`` reads this thread's own namespace (the host's, for a worker). Read through
    /proc/thread-self: /proc/self/net is the *main* thread's namespace, and ``in_netns`` moves only
    this thread.
    """
    from qoelab.emulation.system import in_netns

    base = Path("/proc/thread-self/net")
    with in_netns(ns) if ns is not None else contextlib.nullcontext():
        return {**_read_mib(base / "snmp", ("Tcp",)), **_read_mib(base / "netstat", ("TcpExt",))}


def counter_delta(
    before: dict[str, int], after: dict[str, int], keys: tuple[str, ...] | list[str] | None = COUNTER_KEYS
) -> dict[str, int]:
    """How much each counter in ``keys`` (None: every one ``after`` has) grew between two reads.

    A key the kernel does not have (absent from ``after``) is left out rather than reported as 0.
    """
    names = list(after) if keys is None else [k for k in keys if k in after]
    return {k: after[k] - before.get(k, 0) for k in names}
