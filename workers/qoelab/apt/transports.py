"""NBD and iSCSI across the emulated link: the storage target in the server namespace, the
block-device layer (apt-bdl) in the client namespace, and the ``Transport`` the APT run drives.

Goodput is what the block-device layer counted as completed reads (the papers' completion hook),
from its reports every 100 ms; CPU is per process (the helper is the client side, the target the
storage side), since both sides share one host and /proc/stat would count them together. The
kernel's TCP work for the sessions runs in softirq context and is in neither figure.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from typing import Any

import psutil

from qoelab.apt.bdl import BlockDeviceLayer, Report
from qoelab.apt.trial import USER_HZ, Interval

NBD_PORT = 10809
ISCSI_PORT = 3260
REPORT_MS = 100
GRACE_S = 10.0  # how much later than asked an interval's last report may arrive
STALL_MIN_S = 30.0


def stall_timeout_s(readahead: int, rate_bps: float | None) -> float:
    """How long a session may owe reads without completing one before the trial calls it lost.

    A session's next reply can wait behind every byte in flight at the bottleneck (up to the
    read-ahead window), so the bound is four times the window's drain time, at least 30 s: 128 MB at
    200 Mbit/s drains in 5.4 s; a silent path or a hung target never completes one.
    """
    drain = 8 * readahead / rate_bps if rate_bps else 0.0
    return max(STALL_MIN_S, 4 * drain)


class BdlTransport:
    """The Transport of an APT run over a started block-device layer."""

    def __init__(self, bdl: BlockDeviceLayer, target_pid: int | None) -> None:
        self.bdl, self.target_pid = bdl, target_pid
        self.n_max = bdl.sessions
        self._t0: float | None = None  # report time of the run's start

    def set_active(self, n: int) -> None:
        if n != self.bdl.active or self.bdl.latest is None:
            self.bdl.set_active(n)

    def _baseline(self) -> Report:
        if self.bdl.latest is None:  # no report yet: wait for the first one
            for report in self.bdl.reports(time.monotonic() + GRACE_S):
                return report
            raise TimeoutError("the block-device layer sent no report")
        return self.bdl.latest

    def measure(self, seconds: float) -> Interval:
        first = self._baseline()
        if self._t0 is None:
            self._t0 = first.t
        seen = [first]
        deadline = time.monotonic() + seconds + GRACE_S
        for report in self.bdl.reports(deadline):
            if report.t <= seen[-1].t:
                continue  # read while set_active waited, before this interval began
            seen.append(report)
            if report.t - first.t >= seconds - 1e-6:
                break
        last = seen[-1]
        if last.t - first.t < seconds * 0.9:
            raise TimeoutError(
                f"the block-device layer reported {last.t - first.t:.1f} s of a {seconds:g} s interval"
            )
        return Interval(
            first.t - self._t0, last.t - first.t, last.total - first.total, per_second(seen, self._t0)
        )

    def cpu_ticks(self) -> dict[str, float] | None:
        out = {}
        for side, pid in (("client", self.bdl.pid), ("storage", self.target_pid)):
            if pid is None:
                return None
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                return None
            out[side] = (times.user + times.system) * USER_HZ
        return out


def per_second(reports: list[Report], t0: float) -> list[tuple[float, float]]:
    """Goodput over each whole second of run time the reports span: (second's end, bit/s)."""
    out: list[tuple[float, float]] = []
    anchor = reports[0]
    for r in reports[1:]:
        if int(r.t - t0 + 1e-6) > int(anchor.t - t0 + 1e-6) and r.t - anchor.t >= 0.5:
            out.append((round(r.t - t0, 3), 8 * (r.total - anchor.total) / (r.t - anchor.t)))
            anchor = r
    return out


@contextlib.contextmanager
def storage_session(params: Any, ctx: Any) -> Iterator[tuple[BdlTransport, dict[str, Any], dict[str, Any]]]:
    """Link, verification, target and block-device layer for one trial; all gone afterwards.

    Yields (transport, the link verification, provenance).
    """
    from qoelab.apt import targets
    from qoelab.emulation import linklog
    from qoelab.emulation.reuse import verify_condition
    from qoelab.emulation.topology import emulated_link

    profile = params.to_profile()
    prov: dict[str, Any] = {"phases": {}}
    clock = time.monotonic()
    link_log = ctx.workdir / linklog.ARTIFACT
    if profile.trace_provenance():  # a trace link's log, written at teardown (before the upload)
        ctx.add_artifact(link_log, "json")
    with emulated_link(
        profile, prefix=ctx.prefix, log_path=ctx.workdir / "linkemu.log", link_log=link_log
    ) as link:
        prov["phases"]["link_s"] = time.monotonic() - clock
        clock = time.monotonic()
        verification = verify_condition(link, 2.0, ctx.workdir.parent / "verified-links")
        prov["phases"]["verify_s"] = time.monotonic() - clock
        server = functools.partial(link.popen_in, "server")
        if params.transport == "nbd":
            target: Any = targets.nbd_target(
                server, link.server_ip, NBD_PORT, int(params.size), "memory", prefix=ctx.prefix,
                max_connections=None,
            )  # fmt: skip
            initiator = None
        else:
            target = targets.iscsi_target(
                server, None, link.server_ip, ISCSI_PORT, None, ctx.prefix, targets.free_control_port()
            )
            initiator = f"iqn.2026-11.org.qoelab:{ctx.prefix}-initiator"
        with target, _keep_log(target, ctx):
            first = params.n0 if params.mode == "apt" else params.sessions_opened()
            bdl = BlockDeviceLayer(
                params.transport, target.uri, params.sessions_opened(), min(first, params.sessions_opened()),
                stripe=int(params.stripe), request=int(params.request), readahead=int(params.readahead),
                report_ms=REPORT_MS, initiator=initiator, prefix=ctx.prefix,
                stall_timeout_s=stall_timeout_s(int(params.readahead), params.rate),
                popen=functools.partial(link.popen_in, "client"), log_path=ctx.workdir / "apt-bdl.log",
            )  # fmt: skip
            clock = time.monotonic()
            with bdl:
                prov["phases"]["sessions_s"] = time.monotonic() - clock
                prov["target"] = target.info
                prov["device_size"] = bdl.size
                yield BdlTransport(bdl, target.pid), verification, prov


@contextlib.contextmanager
def _keep_log(target: Any, ctx: Any) -> Iterator[None]:
    """The target's and the helper's logs go up with the trial (the target's own dir goes at stop)."""
    try:
        yield
    finally:
        (ctx.workdir / "target.log").write_text(target.log_text())
        for name in ("target.log", "apt-bdl.log"):
            if (ctx.workdir / name).is_file():
                ctx.add_artifact(ctx.workdir / name, "log")
