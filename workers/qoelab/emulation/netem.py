"""The ``netem`` backend: kernel sch_netem (+ tbf for rate) configured over netlink with pyroute2.

Per direction, on the egress of the sending side's veth::

    root netem (handle 1:)    delay, jitter, loss / Gilbert-Elliott, seed
      `- tbf (handle 10:)     rate, queue limit in bytes

Netem delays and drops first; the tbf child then serialises at the link rate with the configured
queue (netem's own limit only has to hold the packets in flight on the delay line). pyroute2's
netem encoder lacks 64-bit delays, the Gilbert-Elliott model, the delay distribution table and the
PRNG seed, so the netem message is built here with its own attribute map (``NetemTcMsg``); the
tbf child uses pyroute2's encoder.
"""

from __future__ import annotations

import errno
import math
import struct
from functools import cache
from statistics import NormalDist
from typing import Any

from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, nla
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import RTM_NEWQDISC, TC_H_ROOT
from pyroute2.netlink.rtnl.tcmsg import tcmsg

from qoelab.emulation.profile import RATE_MAX_BPS, Direction
from qoelab.errors import ParameterError

U32_MAX = 0xFFFFFFFF
NETEM_HANDLE = 0x10000  # 1:
NETEM_CHILD_CLASS = 0x10001  # 1:1, where the rate child hangs
TBF_HANDLE = 0x100000  # 10:
NETEM_DIST_SCALE = 8192  # include/uapi/linux/pkt_sched.h
NETEM_DIST_SIZE = 4096  # entries in iproute2's normal.dist
PSCHED_SHIFT = 6  # kernel ticks are 64 ns


class NetemUnavailable(RuntimeError):
    """The kernel has no sch_netem (the userspace backend has to be used)."""


class NetemTcMsg(tcmsg):
    """An RTM_NEWQDISC message whose TCA_OPTIONS is netem's full option set."""

    nla_map = (
        ("TCA_UNSPEC", "none"),
        ("TCA_KIND", "asciiz"),
        ("TCA_OPTIONS", "netem_options"),
        ("TCA_STATS", "stats"),
        ("TCA_XSTATS", "hex"),
        ("TCA_RATE", "hex"),
        ("TCA_FCNT", "hex"),
        ("TCA_STATS2", "hex"),
        ("TCA_STAB", "hex"),
    )

    class netem_options(nla):
        # struct tc_netem_qopt, then attributes (the kernel parses them after the struct).
        fields = (
            ("delay", "I"),  # ticks; TCA_NETEM_LATENCY64 (ns) takes precedence
            ("limit", "I"),
            ("loss", "I"),
            ("gap", "I"),
            ("duplicate", "I"),
            ("jitter", "I"),
        )
        nla_map = (
            ("TCA_NETEM_UNSPEC", "none"),
            ("TCA_NETEM_CORR", "netem_corr"),
            ("TCA_NETEM_DELAY_DIST", "cdata"),
            ("TCA_NETEM_REORDER", "netem_reorder"),
            ("TCA_NETEM_CORRUPT", "hex"),
            ("TCA_NETEM_LOSS", "netem_loss"),
            ("TCA_NETEM_RATE", "netem_rate"),
            ("TCA_NETEM_ECN", "uint32"),
            ("TCA_NETEM_RATE64", "uint64"),
            ("TCA_NETEM_PAD", "hex"),
            ("TCA_NETEM_LATENCY64", "int64"),
            ("TCA_NETEM_JITTER64", "int64"),
            ("TCA_NETEM_SLOT", "hex"),
            ("TCA_NETEM_SLOT_DIST", "hex"),
            ("TCA_NETEM_PRNG_SEED", "uint64"),
        )

        class netem_corr(nla):
            fields = (("delay_corr", "I"), ("loss_corr", "I"), ("dup_corr", "I"))

        class netem_reorder(nla):
            fields = (("probability", "I"), ("correlation", "I"))

        class netem_rate(nla):
            fields = (("rate", "I"), ("packet_overhead", "i"), ("cell_size", "I"), ("cell_overhead", "i"))

        class netem_loss(nla):
            nla_map = (
                ("NETEM_LOSS_UNSPEC", "none"),
                ("NETEM_LOSS_GI", "hex"),
                ("NETEM_LOSS_GE", "gemodel"),
            )

            class gemodel(nla):
                # kernel fields: p, r, h (delivery probability in bad), k1 (loss probability in good)
                fields = (("p", "I"), ("r", "I"), ("h", "I"), ("k1", "I"))


def percent_u32(pct: float) -> int:
    """Percent -> netem's u32 probability, rounded as tc's set_percent does."""
    return min(U32_MAX, max(0, int(round(pct / 100 * U32_MAX))))


def ns_to_ticks(ns: int) -> int:
    return min(U32_MAX, ns >> PSCHED_SHIFT)


@cache
def normal_dist_table() -> bytes:
    """Netem's delay table for a normal distribution (as iproute2's normal.dist), s16 values."""
    nd = NormalDist()
    values = []
    for i in range(NETEM_DIST_SIZE):
        x = nd.inv_cdf((i + 0.5) / NETEM_DIST_SIZE) * NETEM_DIST_SCALE
        values.append(max(-32768, min(32767, int(round(x)))))
    return struct.pack(f"={NETEM_DIST_SIZE}h", *values)


def netem_limit_pkts(d: Direction) -> int:
    """Netem's own queue only holds the delay line: enough for the worst case, not a queue model."""
    bps = d.rate_bps or RATE_MAX_BPS
    in_flight = bps / 8 * (d.delay_s + 4 * d.jitter_s) / 64  # 64-byte packets: the worst case
    return int(min(10_000_000, math.ceil(in_flight) + 1000))


def refuse_prio(d: Direction) -> None:
    """The kernel backends build one drop-tail queue with a constant rate; refuse a profile that asks
    for two classes or for a trace."""
    if getattr(d, "trace", None) is not None:
        raise ParameterError(
            "trace", "needs the userspace backend: the kernel's netem and tbf have no trace replay"
        )
    if getattr(d, "outage", None) is not None:
        raise ParameterError("outage", "needs the userspace backend: the kernel's netem and tbf have none")
    if d.queue != "fifo":
        raise ParameterError(
            "queue",
            f"{d.queue!r} needs the userspace backend: the kernel backend has no two-class queue "
            "sharing one byte limit (a prio qdisc gives each band its own limit)",
        )


def netem_options(d: Direction, seed: int) -> dict[str, Any]:
    """The TCA_OPTIONS payload for one direction."""
    refuse_prio(d)
    delay_ns = int(round(d.delay_s * 1e9))
    jitter_ns = int(round(d.jitter_s * 1e9))
    attrs: list[list[Any]] = [
        ["TCA_NETEM_LATENCY64", delay_ns],
        ["TCA_NETEM_JITTER64", jitter_ns],
    ]
    if d.gemodel is not None:
        p, r, bad_loss, good_loss = d.gemodel
        ge = {
            "p": percent_u32(p),
            "r": percent_u32(r),
            "h": U32_MAX - percent_u32(bad_loss),  # tc takes 1-h, the kernel wants h
            "k1": percent_u32(good_loss),
        }
        attrs.append(["TCA_NETEM_LOSS", {"attrs": [["NETEM_LOSS_GE", ge]]}])
    if d.jitter_s and not d.reorder:
        # With a rate set, netem schedules each packet after the previous one, so jitter cannot
        # reorder; at 10 Gbit/s the added serialisation (1.2 us per 1500 bytes) is negligible.
        attrs.append(
            [
                "TCA_NETEM_RATE",
                {"rate": int(RATE_MAX_BPS / 8), "packet_overhead": 0, "cell_size": 0, "cell_overhead": 0},
            ]
        )
    attrs.append(["TCA_NETEM_PRNG_SEED", seed])
    if d.jitter_s and d.jitter_dist == "normal":
        attrs.append(["TCA_NETEM_DELAY_DIST", normal_dist_table()])
    return {
        "delay": ns_to_ticks(delay_ns),
        "limit": netem_limit_pkts(d),
        "loss": percent_u32(d.loss_pct) if d.gemodel is None else 0,
        "gap": 0,
        "duplicate": 0,
        "jitter": ns_to_ticks(jitter_ns),
        "attrs": attrs,
    }


def netem_message(index: int, d: Direction, seed: int) -> NetemTcMsg:
    """Build (and encode) the RTM_NEWQDISC message for the root netem qdisc on ``index``."""
    msg = NetemTcMsg()
    msg["family"] = 0
    msg["index"] = index
    msg["handle"] = NETEM_HANDLE
    msg["parent"] = TC_H_ROOT
    msg["attrs"] = [["TCA_KIND", "netem"], ["TCA_OPTIONS", netem_options(d, seed)]]
    msg.encode()
    return msg


def tbf_arguments(d: Direction, mtu: int) -> dict[str, Any]:
    """pyroute2 ``tc('add', 'tbf', ...)`` arguments for the rate child, or {} when unshaped."""
    refuse_prio(d)
    if d.rate_bps is None:
        return {}
    frame = mtu + 14
    # The bucket must hold at least one frame; 1 ms of data keeps fast links from timer-starving.
    burst = max(2 * frame, int(d.rate_bps / 8 * 1e-3))
    limit = max(d.queue_limit_bytes(mtu), frame)
    return {"rate": f"{int(d.rate_bps)}bit", "burst": burst, "limit": limit, "mtu": frame * 2}


def send_message(ipr: Any, msg: Any, msg_type: int, msg_flags: int) -> list[Any]:
    """Send a prebuilt message and wait for the kernel's answer (raises NetlinkError on refusal)."""

    # pyroute2 0.9's synchronous IPRoute.nlm_request looks up a status key it never sets; go
    # through its async core, which the sync API wraps anyway.
    async def request() -> list[Any]:
        response = await ipr.asyncore.nlm_request(msg, msg_type, msg_flags)
        return [m async for m in response]

    return ipr._run_with_cleanup(request)


def apply_direction(ipr: Any, index: int, d: Direction, mtu: int, seed: int) -> None:
    """Install netem (+ tbf) on the egress of interface ``index`` through the socket ``ipr``."""
    msg = netem_message(index, d, seed)
    try:
        send_message(ipr, msg, RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
    except NetlinkError as err:
        if err.code in (errno.ENOENT, errno.EOPNOTSUPP, errno.EINVAL):
            raise NetemUnavailable(
                f"the kernel refused a netem qdisc ({err}); sch_netem is not available"
            ) from err
        raise
    tbf = tbf_arguments(d, mtu)
    if tbf:
        ipr.tc("add", "tbf", index, parent=NETEM_CHILD_CLASS, handle=TBF_HANDLE, **tbf)
