"""A client and a server network namespace joined by an emulated link, built and always torn down.

::

    <prefix>c (client, 198.18.0.1/30, <prefix>-c)  ==link==  <prefix>s (server, 198.18.0.2/30, <prefix>-s)

With the ``netem`` backend the link is a veth pair with netem + tbf on each side's egress; with
``userspace`` it is the C emulator (``userspace.UserspaceLink``) between one TUN device in each
namespace. Later job types attach a VM on the server side through the ``server_side`` hook: a
context manager factory called with the built link and exited before teardown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pyroute2 import netns
from pyroute2.netlink.exceptions import NetlinkError

from qoelab.emulation import netem, tcp
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.system import (
    check_prefix,
    create_netns,
    iproute_in,
    marked_env,
    new_prefix,
    ns_exec_argv,
    require_net_admin,
)
from qoelab.errors import ParameterError, QoelabError

log = logging.getLogger("qoelab.emulation")

CLIENT_IP = "198.18.0.1"
SERVER_IP = "198.18.0.2"
PREFIXLEN = 30
BACKENDS = ("auto", "netem", "userspace")
# "veth": a veth pair with tbf rate limiting only. Never chosen automatically and refused for
# profiles with delay, jitter or loss: it tests the plumbing (namespaces, verification, cleanup) on
# kernels without sch_netem, and it is VOSE's unshaped path (no emulator process on the cores).
PLUMBING_BACKEND = "veth"


class LinkError(QoelabError):
    """The emulated link could not be built; the message says why in one sentence."""


@dataclass
class EmulatedLink:
    """A built link. Use :func:`emulated_link` to get one; it cleans up after itself."""

    prefix: str
    profile: LinkProfile
    backend: str
    client_ns: str
    server_ns: str
    client_if: str
    server_if: str
    client_ip: str = CLIENT_IP
    server_ip: str = SERVER_IP
    backend_reason: str = ""
    emulator: Any = None  # the UserspaceLink with the userspace backend
    emulator_stats: dict[str, Any] = field(default_factory=dict)
    processes: list[subprocess.Popen] = field(default_factory=list)
    tcp: dict[str, Any] = field(default_factory=dict)  # asked for and read back, per namespace
    switches: list[dict[str, Any]] = field(default_factory=list)  # profile changes while it ran

    def ns(self, which: str) -> str:
        """``'client'``/``'server'`` (or a namespace name) -> the namespace name."""
        if which in ("client", "c"):
            return self.client_ns
        if which in ("server", "s"):
            return self.server_ns
        if which in (self.client_ns, self.server_ns):
            return which
        raise ValueError(f"not a namespace of this link: {which!r}")

    def popen_in(self, which: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` inside a namespace; it is killed at teardown if still running."""
        kwargs.setdefault("env", marked_env(self.prefix))
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(ns_exec_argv(self.ns(which), argv), **kwargs)
        self.processes.append(proc)
        return proc

    def run_in(
        self, which: str, argv: Sequence[str], timeout: float = 60, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside a namespace to completion, capturing text output."""
        proc = self.popen_in(which, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise LinkError(f"{argv[0]} did not finish within {timeout:g} s in {self.ns(which)}") from None
        finally:
            self.processes.remove(proc)
        result = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
        if check and proc.returncode != 0:
            raise LinkError(f"{argv[0]} failed in {self.ns(which)}: {(err or out).strip()[-300:]}")
        return result

    def add_route(self, which: str, dst: str, via: str | None = None) -> None:
        """Route ``dst`` (e.g. a VM subnet behind the server) inside a namespace, with the RTO floor."""
        gateway = via or self.peer_ip(which)
        tcp.route_to(self.ns(which), dst, gateway=gateway, rto_min_s=self.profile.tcp.rto_min_s)

    def peer_ip(self, which: str) -> str:
        return self.server_ip if self.ns(which) == self.client_ns else self.client_ip

    def set_profile(self, profile: LinkProfile, reason: str = "") -> dict[str, Any]:
        """Change the link's conditions while it runs (the userspace backend): from the next
        packet on, both directions follow ``profile``; the MTU and the TCP settings stay. Each
        change is recorded in ``switches`` (and ``describe()``) with its time on the monotonic
        clock of the packet records and the wall clock."""
        if self.backend != "userspace" or self.emulator is None:
            raise LinkError(
                f"changing a running link needs the userspace backend (this one is {self.backend})"
            )
        if profile.mtu != self.profile.mtu:
            raise ParameterError(
                "mtu", f"cannot change while the link runs ({self.profile.mtu} -> {profile.mtu})"
            )
        # TCP settings and offload belong to the namespaces and devices, which stay as they are.
        profile = dataclasses.replace(profile.validate(), tcp=self.profile.tcp, offload=self.profile.offload)
        ack = self.emulator.set_profile(profile)
        entry = {"t_mono_s": ack["t_ns"] / 1e9, "t_unix": time.time(), "reason": reason,
                 "profile": profile.summary()}  # fmt: skip
        self.switches.append(entry)
        self.profile = profile
        log.info("%s: link now %s (%s)", self.prefix, profile.down.describe(), reason or "no reason given")
        return entry

    @contextlib.contextmanager
    def switched(self, profile: LinkProfile, reason: str) -> Iterator[dict[str, Any]]:
        """``profile`` for the ``with`` block (e.g. ``link.profile.unimpaired()`` for a reheat),
        then back to the profile before it, even when the block fails."""
        before = self.profile
        entry = self.set_profile(profile, reason)
        try:
            yield entry
        finally:
            self.set_profile(before, f"end of {reason}")

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "backend_reason": self.backend_reason,
            "prefix": self.prefix,
            "client_ns": self.client_ns,
            "server_ns": self.server_ns,
            "client_if": self.client_if,
            "server_if": self.server_if,
            "client_ip": self.client_ip,
            "server_ip": self.server_ip,
            "mtu": self.profile.mtu,
            "tcp": self.tcp,
            **({"offload": True} if self.profile.offload and self.backend == "userspace" else {}),
            **({"switches": self.switches} if self.switches else {}),
            # Which trace each traced direction replays, by name and checksum (provenance).
            **({"traces": traced} if (traced := self.profile.trace_provenance()) else {}),
        }

    def _stop_processes(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 2
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes.clear()


@cache
def probe_netem() -> tuple[bool, str]:
    """Try a netem qdisc on a veth in a throwaway namespace, once per process."""
    try:
        require_net_admin()
    except QoelabError as err:
        return False, str(err)
    name = new_prefix("qlp")[:9] + "p"
    try:
        create_netns(name)
        with iproute_in(name) as ipr:
            ipr.link("add", ifname="probe0", kind="veth", peer="probe1")
            index = ipr.link_lookup(ifname="probe0")[0]
            netem.apply_direction(ipr, index, LinkProfile.parse(delay="1ms").down, 1500, 1)
        return True, "sch_netem works"
    except netem.NetemUnavailable:
        return False, "sch_netem not available in this kernel"
    except (OSError, NetlinkError) as err:
        return False, f"cannot probe sch_netem: {err}"
    finally:
        with contextlib.suppress(OSError):
            netns.remove(name)


def userspace_available() -> tuple[bool, str]:
    try:
        from qoelab.emulation import userspace
    except ImportError as err:
        return False, f"the userspace link is not available (qoelab.emulation.userspace: {err})"
    try:
        return userspace.available()
    except Exception as err:  # a broken build must not take the worker down
        return False, f"the userspace link cannot run: {err}"


def choose_backend(requested: str = "auto") -> tuple[str, str]:
    """Return (backend, reason). ``auto`` prefers netem, else the userspace link."""
    if requested == PLUMBING_BACKEND:
        return PLUMBING_BACKEND, "plain veth with tbf (rate only), for tests"
    if requested not in BACKENDS:
        raise LinkError(f"backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    if requested in ("auto", "netem"):
        ok, why = probe_netem()
        if ok:
            return "netem", "sch_netem works"
        if requested == "netem":
            raise LinkError(f"the netem backend was requested but {why}")
        ok_u, why_u = userspace_available()
        if not ok_u:
            raise LinkError(f"no link backend works here: {why}; {why_u}")
        return "userspace", f"{why}: using the userspace link"
    ok_u, why_u = userspace_available()
    if not ok_u:
        raise LinkError(f"the userspace backend was requested but {why_u}")
    return "userspace", "userspace link requested"


def _configure_side(ns: str, ifname: str, address: str, mtu: int) -> int:
    with iproute_in(ns) as ipr:
        lo = ipr.link_lookup(ifname="lo")
        if lo:
            ipr.link("set", index=lo[0], state="up")
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            raise LinkError(f"interface {ifname} did not appear in namespace {ns}")
        index = found[0]
        ipr.link("set", index=index, mtu=mtu)
        ipr.addr("add", index=index, address=address, prefixlen=PREFIXLEN)
        ipr.link("set", index=index, state="up")
        return index


def _build_veth(link: EmulatedLink) -> tuple[int, int]:
    with iproute_in(link.client_ns) as ipr:
        ipr.link(
            "add",
            ifname=link.client_if,
            kind="veth",
            peer={"ifname": link.server_if, "net_ns_fd": link.server_ns},
        )
    ci = _configure_side(link.client_ns, link.client_if, link.client_ip, link.profile.mtu)
    si = _configure_side(link.server_ns, link.server_if, link.server_ip, link.profile.mtu)
    return ci, si


def _build_plumbing(link: EmulatedLink) -> None:
    for d in (link.profile.up, link.profile.down):
        if d.delay_s or d.jitter_s or d.loss_pct or d.gemodel:
            raise LinkError(
                "the veth test backend only shapes rate; use netem or userspace for delay and loss"
            )
    ci, si = _build_veth(link)
    for ns, index, d in ((link.client_ns, ci, link.profile.up), (link.server_ns, si, link.profile.down)):
        tbf = netem.tbf_arguments(d, link.profile.mtu)
        if tbf:
            with iproute_in(ns) as ipr:
                ipr.tc("add", "tbf", index, **tbf)


def _build_netem(link: EmulatedLink) -> None:
    ci, si = _build_veth(link)
    # Each side shapes what it sends: the client's egress is "up", the server's is "down".
    with iproute_in(link.client_ns) as ipr:
        netem.apply_direction(ipr, ci, link.profile.up, link.profile.mtu, link.profile.seed)
    with iproute_in(link.server_ns) as ipr:
        netem.apply_direction(ipr, si, link.profile.down, link.profile.mtu, link.profile.seed + 1)


def records_paths(packet_records: Path) -> tuple[Path, Path]:
    """(up, down) record files for ``emulated_link(packet_records=...)``: down is the path itself
    (server -> client, the direction a thin client's screen updates take), up is ``<stem>.up<suffix>``."""
    return packet_records.with_name(f"{packet_records.stem}.up{packet_records.suffix}"), packet_records


def _build_userspace(link: EmulatedLink, log_path: Path | None, packet_records: Path | None = None) -> None:
    from qoelab.emulation.userspace import UserspaceLink

    up, down = records_paths(packet_records) if packet_records is not None else (None, None)
    link.emulator = UserspaceLink(
        link.client_ns,
        link.server_ns,
        link.client_if,
        link.server_if,
        link.profile,
        log_path=log_path,
        records_up=up,
        records_down=down,
    )
    link.emulator.start()
    _configure_side(link.client_ns, link.client_if, link.client_ip, link.profile.mtu)
    _configure_side(link.server_ns, link.server_if, link.server_ip, link.profile.mtu)


def teardown(link: EmulatedLink) -> list[str]:
    """Stop everything the link started and remove its namespaces; return what cleanup removed."""
    from qoelab.emulation.cleanup import cleanup_leftovers

    link._stop_processes()
    if link.emulator is not None:
        try:
            link.emulator_stats = dict(link.emulator.stop() or {})
        except Exception as err:  # keep tearing down; cleanup below kills what is left
            log.warning("%s: stopping the userspace link failed: %s", link.prefix, err)
        link.emulator = None
    return cleanup_leftovers(link.prefix)


@contextlib.contextmanager
def emulated_link(
    profile: LinkProfile,
    prefix: str | None = None,
    backend: str = "auto",
    log_path: Path | None = None,
    server_side: Callable[[EmulatedLink], AbstractContextManager[Any]] | None = None,
    packet_records: Path | None = None,
    link_log: Path | None = None,
) -> Iterator[EmulatedLink]:
    """Build the two namespaces and the link, yield it, and always tear everything down.

    ``link_log``: for a trace link, the per-millisecond log (``qoelab.emulation.linklog``) is
    written there after teardown (from packet records kept beside it for the purpose, unless
    ``packet_records`` asks for them anyway); nothing is written for a link without a trace.

    ``packet_records`` (userspace backend only): linkemu writes one record per packet of the down
    direction to this path and of the up direction to ``<stem>.up<suffix>`` (:func:`records_paths`;
    read them with ``qoelab.emulation.records.read``). They are complete once the link is torn down.

    Teardown runs on success, exceptions, KeyboardInterrupt and SystemExit (SIGTERM handlers
    should raise SystemExit); a SIGKILLed owner leaves leftovers that ``cleanup_leftovers`` finds
    by prefix.
    """
    require_net_admin()
    profile.validate()
    tcp.require_algorithm(profile.tcp.cc)
    if tcp.ensure_allowed(profile.tcp.cc):
        log.info("added %s to the host's net.ipv4.tcp_allowed_congestion_control", profile.tcp.cc)
    prefix = check_prefix(prefix or new_prefix())
    if backend == "auto" and (why := profile.needs_userspace):
        backend = "userspace"  # netem would refuse it: say so in the log, not as a failure
        log.info("%s: %s needs the userspace link", prefix, why)
    chosen, reason = choose_backend(backend)
    if packet_records is not None and chosen != "userspace":
        raise LinkError(f"packet records need the userspace backend, but this link uses {chosen}")
    logged = link_log is not None and chosen == "userspace" and bool(profile.trace_provenance())
    scratch = None
    if logged and packet_records is None:
        packet_records = scratch = link_log.with_name(f"{link_log.stem}.records")  # type: ignore[union-attr]
    if chosen == "userspace" and backend == "auto":
        log.warning("%s", reason)
    link = EmulatedLink(
        prefix=prefix,
        profile=profile,
        backend=chosen,
        client_ns=f"{prefix}c",
        server_ns=f"{prefix}s",
        client_if=f"{prefix}-c",
        server_if=f"{prefix}-s",
        backend_reason=reason,
    )
    # SIGINT during setup must not skip the teardown below; restore the handler once inside.
    try:
        for name in (link.client_ns, link.server_ns):
            if os.path.exists(f"/run/netns/{name}"):
                raise LinkError(
                    f"namespace {name} already exists; run 'qoelab link cleanup --prefix {prefix}'"
                )
            create_netns(name)
            tcp.apply(name, profile.tcp, profile)
        if chosen == "netem":
            _build_netem(link)
        elif chosen == PLUMBING_BACKEND:
            _build_plumbing(link)
        else:
            _build_userspace(link, log_path, packet_records)
        link.tcp = _settle_tcp(link)
        log.info("%s: %s link up (%s)", prefix, chosen, profile.down.describe())
        with server_side(link) if server_side else contextlib.nullcontext():
            yield link
    except NetlinkError as err:
        raise LinkError(f"building the link failed: {err}") from err
    finally:
        with _signals_deferred():
            removed = teardown(link)
        log.debug("%s: removed %s", prefix, removed)
        if logged and packet_records is not None:
            _write_link_log(link, link_log, packet_records, scratch is not None)  # type: ignore[arg-type]


def _write_link_log(link: EmulatedLink, path: Path, packet_records: Path, scratch: bool) -> None:
    """The trace link's per-millisecond log from its packet records; a failure is logged, not
    raised (the trial's own result stands without it)."""
    from qoelab.emulation import linklog

    up, down = records_paths(packet_records)
    t0 = {d: int((link.emulator_stats.get(d) or {}).get("trace_t0_ns") or 0) for d in ("up", "down")}
    try:
        linklog.write(path, linklog.build(link.profile, {"up": up, "down": down}, t0))
    except (OSError, ValueError) as err:
        log.warning("%s: the link log could not be written: %s", link.prefix, err)
    finally:
        if scratch:
            for f in (up, down):
                f.unlink(missing_ok=True)


def _settle_tcp(link: EmulatedLink) -> dict[str, Any]:
    """Set the route metrics to the peer, read both namespaces back, refuse a mismatch."""
    settings = link.profile.tcp
    out: dict[str, Any] = {"requested": settings.to_json()}
    sides = (("client", link.client_ns, link.client_if), ("server", link.server_ns, link.server_if))
    for side, ns, ifname in sides:
        peer = link.peer_ip(ns)
        # Delayed ACKs are the receiver's: only the client, which receives the screen, gets quickack.
        quickack = settings.quickack and side == "client"
        if settings.rto_min_s is not None or quickack:
            tcp.route_to(ns, f"{peer}/32", ifname=ifname, rto_min_s=settings.rto_min_s, quickack=quickack)
        got = tcp.read_back(ns, peer)
        wrong = tcp.mismatches(settings, link.profile, got, side=side)
        if wrong:
            raise LinkError(f"the TCP settings did not take in namespace {ns}: {'; '.join(wrong)}")
        out[side] = got
    # One line for tables: both sides agree on what was set (checked above) and start from the same
    # kernel defaults otherwise, so the client's values stand for both; quickack is the client's own.
    keys = ("cc", "sack", "rmem_max", "wmem_max", "rto_min_ms", *(k.attr for k in tcp.KNOBS), "quickack")
    out.update({k: out["client"][k] for k in keys})
    return out


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while tearing down so a second Ctrl-C cannot leave half a link."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    old = {s: signal.signal(s, lambda n, _f: pending.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if pending:
            os.kill(os.getpid(), pending[0])
