"""The emulator's CPU and ceiling with and without ``--offload`` (issue 37, item 4), side by side.

Part of every run of ``run.py``:
- at 1 Gbit/s and 10, 50 and 100 ms one way, the same measurement (``measure_combo``) per-packet
  and with offload, alternating, so both modes meet the same host load;
- the unlimited ceiling: one TCP flow through linkemu in both modes, and through a plain veth pair
  with its offloads off and on (the kernel's own forwarding on the same host).
Targets: with offload, ≤ 30 % of a core at 1 Gbit/s and 10–100 ms, and a ceiling ≥ 50 % of the
veth pair's with offloads off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from probes import VethPair, iperf3_goodput

CPU_RATE_MBIT = 1000
CPU_DELAYS_MS = (10, 50, 100)
CPU_TARGET_PCT = 30.0
CEILING_SHARE = 0.5


def side_by_side(measure: Callable[..., Any], prefix: str, base_rtt: float) -> list[Any]:
    """Rows at 1 Gbit/s, no loss, per delay: per-packet, then with offload."""
    rows = []
    for delay in CPU_DELAYS_MS:
        for offload in (False, True):
            row = measure(prefix, CPU_RATE_MBIT, delay, 0.0, base_rtt, offload=offload)
            print(f"  side by side {delay} ms offload={offload}: goodput {row.goodput_pct:.1f} %, "
                  f"cpu {row.cpu_pct:.0f} %, late p99 {row.late_p99_us:.0f} us", flush=True)  # fmt: skip
            rows.append(row)
    return rows


def ceilings(unlimited: Callable[..., dict[str, float]], prefix: str, seconds: float = 8.0) -> dict[str, Any]:
    """Unlimited TCP goodput through linkemu in both modes and through a plain veth pair."""
    out: dict[str, Any] = {"linkemu": unlimited(prefix, offload=False)}
    out["linkemu_offload"] = unlimited(prefix, offload=True)
    for offloads in (False, True):
        with VethPair(prefix, offloads) as pair:
            tcp = iperf3_goodput(pair, seconds, 1.0)
        out[f"veth_offloads_{'on' if offloads else 'off'}_mbit"] = tcp["goodput_bps"] / 1e6
    print(f"ceilings: {out}", flush=True)
    return out


def verdicts(side: list[Any], ceil: dict[str, Any]) -> dict[str, bool]:
    """Whether each of item 4's targets is met by the offload rows and ceiling."""
    off = [r for r in side if r.offload]
    share = ceil["linkemu_offload"]["goodput_mbit"] / ceil["veth_offloads_off_mbit"]
    return {
        "cpu": bool(off) and all(r.cpu_pct <= CPU_TARGET_PCT for r in off),
        "goodput": bool(off) and all(r.goodput_target == "met" for r in off),
        "ceiling": share >= CEILING_SHARE,
    }


def render(side: list[Any], ceil: dict[str, Any], fmt_rate: Callable[[float], str]) -> list[str]:
    """The doc block's section on offload: the side-by-side table, the ceilings and the verdicts."""
    if not side or not ceil:
        return []
    ok = {k: "met" if v else "NOT MET" for k, v in verdicts(side, ceil).items()}
    lo, le = ceil["linkemu"], ceil["linkemu_offload"]
    veth_off, veth_on = ceil["veth_offloads_off_mbit"], ceil["veth_offloads_on_mbit"]
    out = [
        "### Offload (`link_offload`): CPU side by side",
        "",
        "The same measurement per-packet and with `--offload 1 --batch-us 400` (what `link_offload` "
        "runs), alternating, at 1 Gbit/s with no loss. With offload linkemu reads the sender's TSO "
        "super-packets, cuts them into wire-sized segments that meet the link one by one, and writes "
        "consecutive due segments as one; above 20 000 packets a second it sends at most every 400 µs, "
        "so packets leave up to that late (the late p99 column).",
        "",
        "| delay | mode | goodput | % of rate | goodput target | CPU | CPU ≤ 30 % | late p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in side:
        mode = "offload" if r.offload else "per packet"
        cpu_ok = "met" if r.cpu_pct <= CPU_TARGET_PCT else "NOT MET"
        out.append(
            f"| {r.delay_ms:g} ms | {mode} | {r.goodput_mbit:.3g} Mbit/s | {r.goodput_pct:.1f} % | "
            f"{r.goodput_target} | {r.cpu_pct:.0f} % | {cpu_ok if r.offload else '(not the target)'} | "
            f"{r.late_p99_us / 1e3:.2f} ms |"
        )
    share = le["goodput_mbit"] / veth_off
    out += [
        "",
        f"Ceilings (unlimited rate, one TCP flow, {fmt_rate(CPU_RATE_MBIT)} rows above for scale): "
        f"linkemu per packet **{lo['goodput_mbit']:.0f} Mbit/s** at {lo['cpu_pct']:.0f} % of a core; "
        f"with offload **{le['goodput_mbit']:.0f} Mbit/s** at {le['cpu_pct']:.0f} %; a plain veth pair "
        f"{veth_off:.0f} Mbit/s with its offloads off and {veth_on:.0f} Mbit/s with them on.",
        "",
        "Targets (issue 37, item 4), from this run:",
        f"- with offload, ≤ 30 % of a core at 1 Gbit/s and 10–100 ms: **{ok['cpu']}**;",
        f"- those rows' goodput target: **{ok['goodput']}**;",
        f"- ceiling with offload ≥ 50 % of the veth pair's with offloads off: {share * 100:.0f} %, "
        f"**{ok['ceiling']}**.",
        "",
    ]
    return out
