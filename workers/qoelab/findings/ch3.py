"""The findings of the thesis' chapter 3 (VOSE, §3.5-3.6, Figs. 3.5-3.12) as checks over ``vose`` results.

Source: ../shared/notes/seed-vose.md §3 (what the paper states) and §5 (the lab's version: records
over veth, AES-NI/SHA-NI or veth's offload flag as the "hardware"). Every trial is one stream; mode
and speedup make the points a check compares (``series_by``), and every other parameter that varies
(path, device, cpu_quota, record, wait, ...) is a scope judged on its own. Numbers are the per-trial
summaries (``throughput_bps``, ``cpu_sender``, ``cpu_receiver``: a core's busy share from
/proc/stat), mean and 95 % Student-t CI over the repetitions.

Ratios of means (a relative error, a share of the whole gain) are decided on a linear contrast of
the group means (Welch-Satterthwaite t interval) scaled by the reference mean, which must itself be
clear of zero: ``vose/hardware − 1 ≤ 3 %`` is ``vose − 1.03·hardware ≤ 0`` divided by the hardware
mean. A bound holds when the whole interval lies on its side, fails when the whole interval lies on
the other, and is inconclusive when the interval straddles it, as ``base.at_least``/``at_most``.
VOSE against the hardware is the exception where the rows allow it: runs of one repetition of a
benchmark file were made back to back, so the error is the mean of the paired errors (issue 32).

The paper's absolute numbers (1 Gbit/s, 1.5 GHz, 1.3-1.7×) belong to its 2009 hosts and are not
checked (seed notes §5.4 item 7): the checks test the shapes.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from qoelab.findings.base import (
    Check,
    Comparison,
    Report,
    Scope,
    Series,
    Stat,
    fmt_num,
    fmt_value,
    lower,
    mean_ci,
)
from qoelab.findings.ch3_stats import bounded, contrast, pairs, pct, scaled

GBIT = 1e9
TPUT = ("throughput_bps", "throughput (Gbit/s)", GBIT, " Gbit/s")

# §3.5.3: VOSE vs the hardware NIC, "average error" below 1 % (1 GbE) and below 3 % (10 GbE) for
# throughput. The lab takes the looser 3 %: its reference is a veth flag or AES-NI/SHA-NI on a
# shared host, closer to the paper's 10 GbE case, where the ends are CPU-bound.
MATCH_THROUGHPUT = 0.03
# §3.5.3: receiver CPU error below 1 % (1 GbE) / 5 % (10 GbE), sender CPU 3 % or less (1 GbE). The
# 10 GbE sender's 19 % gap came from the NIC driver's hand-off (ixgbe, Tables 3.1/3.2), which
# neither of the lab's references has, so 5 % applies to both ends.
MATCH_CPU = 0.05
MATCH_BOUNDS = {"throughput_bps": MATCH_THROUGHPUT, "cpu_sender": MATCH_CPU, "cpu_receiver": MATCH_CPU}
# metric -> (name, table quantity, scale, unit): the CPU metrics are a core's busy share (0-1).
MATCH_QUANTITIES = {
    "throughput_bps": ("throughput", TPUT[1], GBIT, " Gbit/s"),
    "cpu_sender": ("sender CPU", "sender CPU (% of a core)", 0.01, " %"),
    "cpu_receiver": ("receiver CPU", "receiver CPU (% of a core)", 0.01, " %"),
}
# Fig. 3.11: throughput "increases large when a speedup factor is set to 1.5-2" and the design rule
# is a TOE that finishes the checksum "within the half of the processing time of the software":
# read as speedup 2 reaching at least half of the whole gain from speedup 1 to inf.
HALF_GAIN_AT = 2.0
HALF_GAIN_SHARE = 0.5
# Fig. 3.11: it "hardly increases when the speedup factor is 3 or more": from speedup 3 to inf at
# most a fifth of the whole gain is left (a step a reader of the figure would call flat).
FLAT_FROM = 3.0
FLAT_TAIL_SHARE = 0.20
# Fig. 3.12: "SHA-1-only saturates at a speedup of about 10": at speedup 10 at least 95 % of the
# throughput at inf (5 % is within the run-to-run spread of one 10 s stream), and still rising
# before 10 (speedup 3 below speedup 10), else the plateau starts earlier than the paper says.
LEVEL_AT = 10.0
LEVEL_SHARE = 0.95
LEVEL_RISING_FROM = 3.0
# "Still rising" before 10, and a curve that rises at all: a gain of at least 5 % of the later
# point's throughput (a share with its interval), so a plateau decides instead of never separating.
RISE_MIN = 0.05
# Fig. 3.12: the devices that offload SHA-1 with AES (high throughput) and those without SHA-1.
SHA1_TOP = ("sha1_aes", "sha1_aes_cbc")
NO_SHA1 = ("aes_only", "aes_cbc")
IPSEC = ("aes_only", "aes_cbc", "sha1_only", "sha1_aes", "sha1_aes_cbc")
# The kernel path's "hardware" is veth's checksum offload flag: T = 0. A vose run there at speedup
# measured is speedup inf (qoelab.vose.trial.speedups), so both count as the hardware's speed.
KERNEL_T0 = ("measured", "inf")

# The thesis' VOSE waits in an RDTSC busy loop (Fig. 3.4, seed notes §1.5); the lab's ``wait: sleep``
# variant sleeps in clock_nanosleep, whose timer slack (a 10 us sleep returns about 61 us late here,
# docs/vose.md) replaces T. It cannot express the claim, so it decides nothing about it.
NOT_THE_THESIS_WAIT = {"sleep": "its clock_nanosleep waits for the timer's slack, not for T"}

KEEP = ("mode", "speedup")
VOSE_CURVE = ("vose", "inf")  # mode inf (skip, no wait) stands for speedup inf when a scope has none


# ---- comparisons ---------------------------------------------------------------------------------


def _parts(named: Sequence[tuple[str, Comparison]]) -> list[Comparison]:
    """Each part's comparison with its name; every failing part named in one contradiction."""
    out = [Comparison(c.outcome, f"{part}: {c.text}") for part, c in named]
    bad = [c for c in out if c.outcome == "contradicts"]
    if len(bad) > 1:
        merged = Comparison("contradicts", "; ".join(c.text for c in bad))
        return [merged, *(c for c in out if c.outcome != "contradicts")]
    return out


# ---- rows -----------------------------------------------------------------------------------------


def _speed(v: Any) -> float | None:
    """A speedup parameter as a number: 'inf' is infinite; 'measured' (or none) is not a point."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v)
    return math.inf if v == "inf" else None


def _speed_label(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:g}"


def _mode(rows: Sequence[Mapping[str, Any]], mode: str) -> list[Mapping[str, Any]]:
    return [r for r in rows if r["params"].get("mode") == mode]


def _device(rows: Sequence[Mapping[str, Any]]) -> str:
    """The device the rows emulate: the kernel path's is the kernel's own TCP checksum."""
    kernel = "checksum (kernel)"
    names = {
        kernel if r["params"].get("path") == "kernel_csum" else str(r["params"].get("device")) for r in rows
    }
    return " / ".join(sorted(names)) or "–"


def _where(sc: Scope) -> str:
    return ", ".join(f"{k} {fmt_value(k, v)}" for k, v in sc.scope.items()) or "these runs"


def _values(rows: Sequence[Mapping[str, Any]], metric: str, scale: float = 1.0) -> list[float]:
    return [r["summary"][metric] / scale for r in rows if metric in r["summary"]]


def _stat(sc: Scope, rows: Sequence[Mapping[str, Any]], condition: str, series: str, metric: str,
          quantity: str, scale: float = 1.0) -> Stat:  # fmt: skip
    s = mean_ci(_values(rows, metric, scale))
    sc.record(condition, Series(series), quantity, s)
    return s


def curve(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[float, list[Mapping[str, Any]]], bool]:
    """vose rows by numeric speedup (inf included), ascending; mode inf rows (skip, no wait) stand for
    speedup inf when no vose row has it. Returns the points and whether that stand-in was used."""
    out: dict[float, list[Mapping[str, Any]]] = {}
    for r in _mode(rows, "vose"):
        x = _speed(r["params"].get("speedup"))
        if x is not None:
            out.setdefault(x, []).append(r)
    stand_in = math.inf not in out and bool(_mode(rows, "inf"))
    if stand_in:
        out[math.inf] = _mode(rows, "inf")
    return dict(sorted(out.items())), stand_in


def _at(x: float, stand_in: bool = False) -> str:
    return f"speedup {_speed_label(x)}" + (" (mode inf)" if stand_in and math.isinf(x) else "")


def _throughputs(sc: Scope, rows: Sequence[Mapping[str, Any]]) -> tuple[dict[float, Stat], dict, bool]:
    """Throughput (Gbit/s) at every point of the curve, recorded for the table."""
    points, stand_in = curve(rows)
    device = _device(rows)
    name, quantity, scale, _ = TPUT
    found = {x: _stat(sc, rs, _at(x, stand_in), device, name, quantity, scale) for x, rs in points.items()}
    return found, points, stand_in


def _missing(points: Mapping[float, Any], need: Sequence[float], device: str) -> list[str]:
    return [f"no {device} trials at {_at(x)}" for x in need if x not in points]


# ---- 1: VOSE at the hardware's speed matches the hardware ----------------------------------------------


def _matches_hardware(sc: Scope) -> tuple[list[Comparison], list[str]]:
    hardware = _mode(sc.rows, "hardware")
    kernel = any(r["params"].get("path") == "kernel_csum" for r in sc.rows)
    speeds = KERNEL_T0 if kernel else ("measured",)
    vose = [r for r in _mode(sc.rows, "vose") if r["params"].get("speedup") in speeds]
    device = _device(sc.rows)
    at = "speedup " + " or ".join(speeds)
    gaps = ["no hardware trials"] if not hardware else []
    gaps += [f"no vose trials at {at}"] if not vose else []
    if gaps:
        return [], gaps
    comps = []
    for metric, bound in MATCH_BOUNDS.items():
        what, label, scale, unit = MATCH_QUANTITIES[metric]
        h = _stat(sc, hardware, "mode hardware", device, metric, label, scale)
        v = _stat(sc, vose, f"mode vose, {at}", device, metric, label, scale)
        if not h.mean or h.mean <= 0:
            comps.append(Comparison("unclear", f"no hardware {what} to compare with at {_where(sc)}"))
            continue
        err, how = _match_error(vose, hardware, metric, scale, h.mean)
        sc.record("vose vs hardware", Series(device), f"relative error of {what} (%)", scaled(err, 0.01))
        c = bounded(err, f"vose's {what} error", _where(sc), -bound, bound, signed=True)
        means = f"vose {fmt_num(v.mean)}{unit} vs hardware {fmt_num(h.mean)}{unit}"
        if kernel:
            # T = 0: vose busy-waits nothing and runs the hardware's own configuration (veth's
            # offload on), so this is an A/A comparison: it measures run order and noise, not the
            # emulation (issue 32). Shown, never decisive.
            c = Comparison("unclear", f"an A/A comparison, not a test of the emulation (vose at T = 0 is "
                                      f"the hardware's configuration): {c.text}")  # fmt: skip
        wait = vose[0]["params"].get("wait")
        if wait in NOT_THE_THESIS_WAIT:
            why = f"{NOT_THE_THESIS_WAIT[wait]}, so it cannot test the claim"
            c = Comparison(
                "unclear",
                f"wait = {wait} is not the thesis' VOSE, which busy-waits (Fig. 3.4): {why}: {c.text}",
            )
        comps.append(Comparison(c.outcome, f"{c.text} ({means}; {how})"))
    return comps, []


def _match_error(vose: Sequence[Mapping[str, Any]], hardware: Sequence[Mapping[str, Any]], metric: str,
                 scale: float, hardware_mean: float) -> tuple[Stat, str]:  # fmt: skip
    """vose's relative error against the hardware and how it was formed: the mean of the paired
    errors (v − h) / h with a Student-t interval when two repetitions or more pair up (issue 32's
    paired design), else the difference of the means over the hardware's mean (Welch)."""
    both = [(v["summary"][metric], h["summary"][metric]) for v, h in pairs(vose, hardware)
            if metric in v["summary"] and h["summary"].get(metric, 0) > 0]  # fmt: skip
    if len(both) >= 2:
        left = len(vose) + len(hardware) - 2 * len(both)
        how = f"paired over {len(both)} repetitions" + (
            f", {left} runs without a partner left out" if left else ""
        )
        return mean_ci((v - h) / h for v, h in both), how
    diff = contrast([(1.0, _values(vose, metric, scale)), (-1.0, _values(hardware, metric, scale))])
    return scaled(diff, hardware_mean), "unpaired: difference of the means (Welch)"


# ---- 2: the checksum device's gain is made by speedup 2 ----------------------------------------------


def _checksum_gain(sc: Scope) -> tuple[list[Comparison], list[str]]:
    tput, points, _ = _throughputs(sc, sc.rows)
    device = _device(sc.rows)
    gaps = _missing(points, (1.0, math.inf), device)
    if gaps:
        return [], gaps + _missing(points, (HALF_GAIN_AT, FLAT_FROM), device)
    software = _mode(sc.rows, "software")
    if software:
        # Speedup 1 must be the software checksum: if the emulated device time is off (timed apart
        # from the stream it misses the data's trip through the cache), the curve is shifted and
        # cannot place the gain; that is the lab's calibration, not the thesis' claim (issue 32).
        sw = _values(software, TPUT[0], GBIT)
        ref = statistics.fmean(sw)
        err = scaled(contrast([(1.0, _values(points[1.0], TPUT[0], GBIT)), (-1.0, sw)]), ref)
        sc.record(
            "speedup 1 vs software", Series(device), "relative error of throughput (%)", scaled(err, 0.01)
        )
        lim = MATCH_THROUGHPUT
        off = bounded(err, "vose at speedup 1 against software", _where(sc), -lim, lim, signed=True)
        if off.outcome == "contradicts":
            return [
                Comparison(
                    "unclear",
                    f"the curve does not start at software's throughput, so it cannot "
                    f"place the gain (the device time is mis-calibrated): {off.text}",
                )
            ], []
    low, top = tput[1.0], tput[math.inf]
    whole = lower(low, top, "speedup 1", "speedup inf", _where(sc), " Gbit/s")
    if whole.outcome == "contradicts":
        return [Comparison("contradicts", f"no gain from speedup 1 to inf: {whole.text}")], []
    if whole.outcome == "unclear":
        noise = f"the whole gain from speedup 1 to inf is within noise: {whole.text}"
        return [Comparison("unclear", noise)], []
    assert low.mean is not None and top.mean is not None
    gain = top.mean - low.mean
    v = {x: _values(rs, TPUT[0], GBIT) for x, rs in points.items()}
    named = []
    # (part, from, to, bounds): the share of the whole gain made between two speedups.
    for part, a, b, bounds in (
        (f"speedup 1 → {HALF_GAIN_AT:g}", 1.0, HALF_GAIN_AT, {"low": HALF_GAIN_SHARE}),
        (f"speedup {FLAT_FROM:g} → inf", FLAT_FROM, math.inf, {"high": FLAT_TAIL_SHARE}),
    ):
        if a in points and b in points:
            share = scaled(contrast([(1.0, v[b]), (-1.0, v[a])]), gain)
            sc.record(part, Series(device), "share of the gain 1 → inf (%)", scaled(share, 0.01))
            named.append((part, bounded(share, "share of the whole gain", _where(sc), **bounds)))
    return _parts(named), _missing(points, (HALF_GAIN_AT, FLAT_FROM), device)


# ---- 3: SHA-1 must be offloaded (with AES) for the top ------------------------------------------------


def _sha1_needed(sc: Scope) -> tuple[list[Comparison], list[str]]:
    at: dict[str, Stat] = {}
    gaps = []
    for device in IPSEC:
        points, stand_in = curve([r for r in sc.rows if r["params"].get("device") == device])
        if math.inf in points:
            at[device] = _stat(sc, points[math.inf], _at(math.inf, stand_in), device, *TPUT[:3])
        else:
            gaps.append(f"no {device} trials at speedup inf")
    pairs = [(no, top) for top in SHA1_TOP for no in NO_SHA1] + [("sha1_only", "sha1_aes")]
    where_ = ", ".join(["speedup inf", *([_where(sc)] if sc.scope else [])])
    comps = [lower(at[a], at[b], a, b, where_, " Gbit/s") for a, b in pairs if a in at and b in at]
    return comps, gaps


# ---- 4: SHA1-only levels off near speedup 10 ---------------------------------------------------------


def _whole_gain(points: Mapping[float, Sequence[Mapping[str, Any]]]) -> Stat | None:
    """A device's gain from speedup 1 to inf as a share of inf's throughput: the share of the
    software record's time its offloaded work takes (time per record = rest + T / speedup)."""
    if 1.0 not in points or math.inf not in points:
        return None
    top = mean_ci(_values(points[math.inf], TPUT[0], GBIT)).mean
    return _gain(points, 1.0, math.inf, top) if top else None


def _sha1_not_heaviest(sc: Scope, sha1_points: Mapping[float, Any]) -> Comparison | None:
    """The claim's premise (§3.6.2: "SHA-1 is the heaviest"), measured on this host: offloading
    SHA-1 alone must gain more than offloading AES alone. Where it gains less beyond both intervals,
    the knee's place follows from the host's cost split, not from the method, so it cannot be tested."""
    aes = [r for r in sc.rows if r["params"].get("device") == "aes_only"]
    s, a = _whole_gain(sha1_points), _whole_gain(curve(aes)[0])
    if s is None or a is None:
        return None
    c = lower(scaled(s, 0.01), scaled(a, 0.01), "SHA1-only", "AES-only", _where(sc), " %")
    if c.outcome != "supports":
        return None
    return Comparison(
        "unclear",
        "SHA-1 is not the heaviest piece of a record on this host, the thesis' premise for a knee at "
        f"{LEVEL_AT:g} (§3.6.2): the gain from speedup 1 to inf as a share of inf's throughput, "
        + c.text.removeprefix("SHA1-only is lower: "),
    )


def _sha1_only_levels(sc: Scope) -> tuple[list[Comparison], list[str]]:
    sha1 = [r for r in sc.rows if r["params"].get("device") == "sha1_only"]
    if not sha1:
        return [], ["no sha1_only trials"]
    tput, points, _ = _throughputs(sc, sha1)
    device = _device(sha1)
    gaps = _missing(points, (LEVEL_RISING_FROM, LEVEL_AT, math.inf), device)
    premise = _sha1_not_heaviest(sc, points)
    if premise is not None:
        return [premise], gaps
    named = []
    if LEVEL_AT in points and math.inf in points and tput[math.inf].mean:
        top = tput[math.inf].mean
        v10, vinf = (_values(points[x], TPUT[0], GBIT) for x in (LEVEL_AT, math.inf))
        # speedup 10 over inf ≥ 95 %: the contrast m10 − 0.95·m_inf ≥ 0, read as a share of m_inf.
        ratio = scaled(contrast([(1.0, v10), (-LEVEL_SHARE, vinf)]), top, LEVEL_SHARE)
        sc.record(
            f"speedup {LEVEL_AT:g} ÷ inf", Series(device), "throughput share of inf (%)", scaled(ratio, 0.01)
        )
        level = bounded(ratio, f"throughput at {LEVEL_AT:g} over inf's", _where(sc), low=LEVEL_SHARE)
        named.append((f"levelled off by speedup {LEVEL_AT:g}", level))
    if LEVEL_RISING_FROM in points and LEVEL_AT in points and tput[LEVEL_AT].mean:
        a, b = LEVEL_RISING_FROM, LEVEL_AT
        rising = bounded(
            _gain(points, a, b, tput[b].mean), f"gain from {a:g} to {b:g}", _where(sc), low=RISE_MIN
        )
        named.append((f"still rising from {a:g} to {b:g}", rising))
    if 1.0 in points and math.inf in points and tput[math.inf].mean:
        # A curve flat from speedup 1 has no knee to place: SHA-1 alone is too small a part of a
        # record on this CPU for its offload to matter (docs/vose.md). The lab cannot reproduce the
        # claim's condition, so neither part decides it (issue 32).
        whole = _gain(points, 1.0, math.inf, tput[math.inf].mean)
        if whole.has_ci and whole.ci_high is not None and whole.ci_high < RISE_MIN:
            flat = bounded(whole, "gain from 1 to inf", _where(sc), low=RISE_MIN)
            return [Comparison("unclear", f"a flat curve, no knee to place: {flat.text}")], gaps
    return _parts(named), gaps


def _gain(points: dict[float, list[Any]], a: float, b: float, ref: float) -> Stat:
    """(throughput at ``b`` − at ``a``) as a share of ``ref`` (b's mean), with its interval."""
    va, vb = (_values(points[x], TPUT[0], GBIT) for x in (a, b))
    return scaled(contrast([(1.0, vb), (-1.0, va)]), ref)


# ---- 5: full offload keeps rising ---------------------------------------------------------------------


def _not_falling(a: Stat, b: Stat, a_name: str, b_name: str, where_: str) -> Comparison:
    """Does ``b`` not fall below ``a``? It falls only when b's whole interval lies below a's."""
    if a.n == 0 or b.n == 0:
        return Comparison("unclear", f"no result for {a_name if a.n == 0 else b_name} at {where_}")
    if not (a.has_ci and b.has_ci):
        few = " and ".join(f"{nm} (n = {s.n})" for nm, s in ((a_name, a), (b_name, b)) if not s.has_ci)
        return Comparison("unclear", f"n < 2 for {few} at {where_}, so no confidence interval")
    assert a.ci_low is not None and b.ci_high is not None
    shown = f"{a_name} {fmt_num(a.mean)} Gbit/s → {b_name} {fmt_num(b.mean)} Gbit/s at {where_}"
    if b.ci_high < a.ci_low:
        return Comparison("contradicts", f"throughput falls: {shown}")
    return Comparison("supports", f"no fall beyond the 95 % CIs: {shown}")


def _keeps_rising(sc: Scope) -> tuple[list[Comparison], list[str]]:
    tput, points, _ = _throughputs(sc, sc.rows)
    xs = list(points)
    named = [
        (
            f"step {_speed_label(a)} → {_speed_label(b)}",
            _not_falling(tput[a], tput[b], _at(a), _at(b), _where(sc)),
        )
        for a, b in itertools.pairwise(xs)
    ]
    if LEVEL_AT in points and math.inf in points:
        top = lower(tput[LEVEL_AT], tput[math.inf], _at(LEVEL_AT), _at(math.inf), _where(sc), " Gbit/s")
        named.append((f"inf above {LEVEL_AT:g}", top))
    return _parts(named), _missing(points, (LEVEL_AT, math.inf), _device(sc.rows))


# ---- 6: the receiver gains more than the sender -------------------------------------------------------


def _per_bit(r: Mapping[str, Any], side: str) -> float | None:
    """Core-seconds per bit, in ns: the end's busy share over the stream's throughput."""
    cpu, tput = r["summary"].get(f"cpu_{side}"), r["summary"].get("throughput_bps")
    return None if cpu is None or not tput else cpu / tput * 1e9


def _receiver_over_sender(r: Mapping[str, Any]) -> float | None:
    cpu_s, cpu_r = r["summary"].get("cpu_sender"), r["summary"].get("cpu_receiver")
    return None if cpu_r is None or not cpu_s else cpu_r / cpu_s


def _receiver_gains_more(sc: Scope) -> tuple[list[Comparison], list[str]]:
    sw, hw = _mode(sc.rows, "software"), _mode(sc.rows, "hardware")
    gaps = (["no software trials"] if not sw else []) + (["no hardware trials"] if not hw else [])
    if gaps:
        return [], gaps
    device = _device(sc.rows)
    change = {}
    for side in ("sender", "receiver"):
        quantity = f"{side} CPU per bit (ns/bit)"
        per = {}
        for mode, rows in (("software", sw), ("hardware", hw)):
            per[mode] = mean_ci(v for v in (_per_bit(r, side) for r in rows) if v is not None)
            sc.record(f"mode {mode}", Series(device), quantity, per[mode])
        s, h = per["software"], per["hardware"]
        if s.mean and h.mean is not None:
            change[side] = h.mean / s.mean - 1
            rel = Stat(min(s.n, h.n), 100 * change[side], None, None)  # of the means: no interval
            sc.record("software → hardware", Series(device), f"{side}'s change of CPU per bit (%)", rel)
    q = {}
    for mode, rows in (("software", sw), ("hardware", hw)):
        q[mode] = mean_ci(v for v in (_receiver_over_sender(r) for r in rows) if v is not None)
        sc.record(f"mode {mode}", Series(device), "receiver ÷ sender CPU", q[mode])
    c = lower(q["hardware"], q["software"], "hardware", "software", f"{_where(sc)} (receiver ÷ sender CPU)")
    if len(change) == 2:
        shares = (
            f"{pct(change['receiver'], True)} on the receiver, {pct(change['sender'], True)} on the sender"
        )
        c = Comparison(c.outcome, f"{c.text}; CPU per bit with hardware: {shares}")
    return [c], []


CHECKS: tuple[Check, ...] = (
    Check(
        name="vose_matches_hardware",
        title="VOSE at the hardware's speed matches the hardware",
        claim="VOSE with the device's time set to the hardware's reproduces hardware offloading: average "
        'error below 1-3 % in throughput and below 1-5 % in CPU utilisation ("VOSE correctly emulates the '
        'offloading effect of TCP checksum calculations"). Checked per scope: vose at speedup measured '
        "(path kernel_csum: the offload flag is T = 0, so speedup inf or measured, the hardware's own "
        "configuration: shown as an A/A comparison, never decisive) against mode hardware, "
        f"relative error of the mean within ±{100 * MATCH_THROUGHPUT:g} % for throughput and "
        f"±{100 * MATCH_CPU:g} % for each end's CPU, whole 95 % CI inside; the mean of the paired errors "
        "where a benchmark file made the runs of a repetition back to back.",
        figure="§3.5.3, Figs. 3.5-3.10",
        x="mode",
        protocols=(),
        run=_matches_hardware,
        series_by=KEEP,
        among={"mode": ("hardware", "vose")},
    ),
    Check(
        name="checksum_gain_by_2x",
        title="A checksum device twice the software's speed gives most of the gain",
        claim='Throughput "increases large when a speedup factor is set to 1.5-2" and "hardly increases '
        'when the speedup factor is 3 or more" (design rule: a TOE that finishes the checksum "within the '
        'half of the processing time of the software"). Checked: of the gain from speedup 1 to inf, at '
        f"least {100 * HALF_GAIN_SHARE:g} % is reached at speedup {HALF_GAIN_AT:g} and at most "
        f"{100 * FLAT_TAIL_SHARE:g} % is left above speedup {FLAT_FROM:g}. A curve whose speedup 1 is "
        f"more than {100 * MATCH_THROUGHPUT:g} % from the software run (the emulated time mis-calibrated) "
        "cannot place the gain: inconclusive.",
        figure="Fig. 3.11, §3.5.4",
        x="speedup",
        protocols=(),
        run=_checksum_gain,
        series_by=KEEP,
        among={"device": ("checksum",), "mode": (*VOSE_CURVE, "software")},
    ),
    Check(
        name="sha1_needed_for_top",
        title="Only devices that offload SHA-1 with AES reach the top",
        claim='"SHA1-AES-CBC and SHA1-AES give high throughput"; AES-only, AES-CBC and even SHA1-only stay '
        'below 1 Gbit/s: SHA-1 offloading is "absolutely necessary", yet offloading only the heaviest '
        "piece is not enough. Checked at speedup inf: sha1_aes and sha1_aes_cbc above aes_only and "
        "aes_cbc, sha1_only below sha1_aes (the paper's 1 Gbit/s line belongs to its host: not checked).",
        figure="Fig. 3.12, §3.6.2",
        x="device",
        protocols=(),
        run=_sha1_needed,
        series_by=KEEP,
        among={"path": ("app",), "device": IPSEC, "mode": VOSE_CURVE, "speedup": ("inf",)},
    ),
    Check(
        name="sha1_only_levels_off_near_10",
        title="SHA1-only stops gaining at about speedup 10",
        claim='"SHA-1-only saturates at a speedup of about 10": faster hardware "is simply worthless" '
        f"for that device. Checked: throughput at speedup {LEVEL_AT:g} at least {100 * LEVEL_SHARE:g} % of "
        f"inf's, and a gain of at least {100 * RISE_MIN:g} % from speedup {LEVEL_RISING_FROM:g} to "
        f"{LEVEL_AT:g} (it still rises before 10); a curve that gains less than that from 1 to inf has no "
        "knee: inconclusive. The claim rests on SHA-1 being the heaviest piece of a record: where offloading "
        "SHA-1 alone gains less from speedup 1 to inf than offloading AES alone (AES-only runs in the same "
        "results), the knee's place is the host's cost split, not the method's: inconclusive.",
        figure="Fig. 3.12, §3.6.2",
        x="speedup",
        protocols=(),
        run=_sha1_only_levels,
        series_by=(*KEEP, "device"),
        # AES-only's curve measures the claim's premise (SHA-1 the heaviest piece): see _sha1_not_heaviest.
        among={"path": ("app",), "device": ("sha1_only", "aes_only"), "mode": VOSE_CURVE},
        requires={"device": ("sha1_only",)},
    ),
    Check(
        name="full_offload_keeps_rising",
        title="Full offload keeps gaining with the speedup",
        claim='SHA1-AES-CBC (full offloading) throughput "always increases as the speedup factor '
        "increases\". Checked: no step from one speedup to the next falls (the later point's whole CI "
        f"below the earlier one's), and speedup inf above speedup {LEVEL_AT:g}.",
        figure="Fig. 3.12, §3.6.2",
        x="speedup",
        protocols=(),
        run=_keeps_rising,
        series_by=KEEP,
        among={"path": ("app",), "device": ("sha1_aes_cbc",), "mode": VOSE_CURVE},
    ),
    Check(
        name="receiver_gains_more",
        title="Checksum offload helps the receiver more than the sender",
        claim="Offloading cuts receiver CPU by about 35-45 % (above 1 GHz), while at 1.5 GHz or less it "
        "raises the sender's load with the higher throughput: checksum offload helps \"the receiver more "
        "than the sender\". Checked on the kernel's TCP checksum at each cpu_quota, hardware vs software: "
        "CPU per bit (busy share ÷ throughput) falls more, relatively, on the receiver, i.e. the per-trial "
        "receiver ÷ sender CPU ratio (throughput cancels) is lower with hardware.",
        figure="§3.5.4, Figs. 3.7, 3.9 (3.8, 3.10)",
        x="mode",
        protocols=(),
        run=_receiver_gains_more,
        series_by=KEEP,
        among={"path": ("kernel_csum",), "mode": ("software", "hardware")},
    ),
)

# The thesis' own number or statement per check (the findings table's "paper" column).
PAPER_VALUES: dict[str, str] = {
    "vose_matches_hardware": "error below 1-3 % in throughput, 1-5 % in CPU (checksum, NIC offload)",
    "checksum_gain_by_2x": "large gain at speedup 1.5-2, hardly any from 3 on (Fig. 3.11)",
    "sha1_needed_for_top": "only SHA1-AES(-CBC) reach high throughput; the other devices stay < 1 Gbit/s",
    "sha1_only_levels_off_near_10": "SHA1-only saturates at speedup ≈ 10",
    "full_offload_keeps_rising": "SHA1-AES-CBC always rises with the speedup",
    "receiver_gains_more": "receiver CPU -35-45 % with offload above 1 GHz; the sender gains less",
}

REPORT = Report(
    "ch3",
    "Thesis chapter 3 (§3.5-3.6): VOSE, offload engines emulated in software",
    CHECKS,
    PAPER_VALUES,
    # Throughput and CPU share are the host CPU's (the ends are CPU-bound on one veth pair), so each
    # machine's runs are judged apart.
    host_bound=True,
)
