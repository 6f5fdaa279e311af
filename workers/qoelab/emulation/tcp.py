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
"""

from __future__ import annotations

import contextlib
import ipaddress
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


class TcpUnavailable(ParameterError):
    """The worker's kernel does not offer the requested congestion control algorithm."""


def is_cc_name(value: object) -> bool:
    """A congestion control name as the kernel spells them (cubic, reno, bbr, ...), nothing else."""
    return isinstance(value, str) and _CC_NAME.fullmatch(value) is not None


@dataclass(frozen=True)
class TcpSettings:
    """What a trial asks of TCP in both namespaces (``None``: the documented default)."""

    cc: str = DEFAULT_CC
    sack: bool = True
    rmem_max: int | None = None
    wmem_max: int | None = None
    rto_min_s: float | None = None

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
        return self

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TcpSettings:
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
    rate = max(d.rate_bps or UNSHAPED_RATE_BPS for d in (profile.up, profile.down))
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
    return values


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys/net/ipv4") / key


def apply(ns: str, settings: TcpSettings, profile: LinkProfile) -> None:
    """Write the trial's TCP sysctls inside namespace ``ns`` (this thread enters it, no fork)."""
    from qoelab.emulation.system import in_netns

    values = sysctl_values(settings, profile)
    with in_netns(ns):
        for key, value in values.items():
            try:
                _sysctl_path(key).write_text(value)
            except OSError as err:
                raise ParameterError(
                    "tcp_cc" if key == "tcp_congestion_control" else key,
                    f"cannot set net.ipv4.{key}={value} in namespace {ns}: {err.strerror or err}",
                ) from None


def route_to(ns: str, dst: str, ifname: str | None = None, gateway: str | None = None,
             rto_min_s: float | None = None) -> None:  # fmt: skip
    """Add (or replace) a route in ``ns``, with the trial's ``rto_min`` metric when it sets one."""
    from qoelab.emulation.system import iproute_in

    net = ipaddress.ip_network(dst, strict=False)
    with iproute_in(ns) as ipr:
        kwargs: dict[str, Any] = {"dst": str(net.network_address), "dst_len": net.prefixlen}
        if gateway:
            kwargs["gateway"] = gateway
        if ifname:
            kwargs["oif"] = ipr.link_lookup(ifname=ifname)[0]
        if rto_min_s is not None:
            # The kernel takes RTAX_RTO_MIN in milliseconds (iproute2's "rto_min 50ms").
            kwargs["metrics"] = {"rto_min": max(1, round(rto_min_s * 1e3))}
        ipr.route("replace", **kwargs)


def read_back(ns: str, peer: str) -> dict[str, Any]:
    """What the kernel in ``ns`` really has: the sysctls and the route to ``peer``'s RTO floor."""
    from qoelab.emulation.system import in_netns, iproute_in

    raw: dict[str, str] = {}
    with in_netns(ns):
        for key in ("tcp_congestion_control", "tcp_sack", "tcp_rmem", "tcp_wmem"):
            with contextlib.suppress(OSError):
                raw[key] = _sysctl_path(key).read_text().strip()
    rto_ms: int | None = None
    with iproute_in(ns) as ipr:
        for route in ipr.route("get", dst=peer):
            metrics = route.get_attr("RTA_METRICS")
            if metrics is not None:
                rto_ms = metrics.get_attr("RTAX_RTO_MIN")
    rmem, wmem = (raw.get(k, "").split() for k in ("tcp_rmem", "tcp_wmem"))
    return {
        "cc": raw.get("tcp_congestion_control"),
        "sack": raw.get("tcp_sack") == "1" if "tcp_sack" in raw else None,
        "rmem": [int(x) for x in rmem] or None,
        "wmem": [int(x) for x in wmem] or None,
        "rmem_max": int(rmem[-1]) if rmem else None,
        "wmem_max": int(wmem[-1]) if wmem else None,
        "rto_min_ms": rto_ms if rto_ms is not None else KERNEL_RTO_MIN_S * 1e3,
        "rto_min_source": "route" if rto_ms is not None else "kernel default",
    }


def mismatches(settings: TcpSettings, profile: LinkProfile, got: dict[str, Any]) -> list[str]:
    """Differences between what was asked and what one namespace reads back (empty: all applied)."""
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
    return out
