"""Link profiles: what an emulated link does in each direction, parsed from human units.

A :class:`LinkProfile` holds two :class:`Direction` values, ``up`` (client -> server) and ``down``
(server -> client). Both backends (kernel netem and the userspace emulator) read the same profile,
so their semantics are fixed here and in ``docs/emulation.md``:

* ``rate_bps``: bottleneck rate in bit/s of IP packets (``None``: unshaped).
* ``delay_s``: one-way delay added to every packet.
* ``jitter_s``: with ``jitter_dist='uniform'`` each packet's delay is uniform on
  ``[delay - jitter, delay + jitter]``; with ``'normal'`` it is ``delay + N(0, jitter^2)``; negative
  delays count as zero. ``reorder=False`` keeps packets in order (a packet never leaves before the
  one sent before it), ``True`` lets a packet with a shorter delay overtake.
* ``loss_pct``: independent random loss; ``gemodel`` (Gilbert-Elliott) instead, as the four numbers
  of ``tc ... loss gemodel p r 1-h 1-k`` in percent: p = P(good -> bad), r = P(bad -> good),
  1-h = loss probability in the bad state, 1-k = loss probability in the good state.
* ``limit_pkts`` / ``limit_bytes``: the queue in front of the rate limiter (at most one is set);
  with neither, 1000 packets (netem's default).
* ``queue``: ``'fifo'`` (one drop-tail queue) or ``'prio'`` (userspace backend only, needs a rate):
  two strict-priority classes sharing that one limit; DSCP EF packets are served first and push
  low-class packets out of a full buffer (``docs/emulation.md``, "Two-class priority queue").
  ``'drophead'``, ``'codel'`` and ``'pie'`` (userspace backend only, need a rate, trace or outage)
  drop the oldest packet instead of the newest, or run CoDel (RFC 8289) or PIE (RFC 8033), with
  ``queue_target_s``, ``queue_interval_s`` (CoDel's interval, PIE's update period) and
  ``queue_max_burst_s`` (PIE's burst allowance); None = the RFC's default ("Queue disciplines").
* ``trace``: instead of a rate, the path of a Mahimahi-format trace (``qoelab.emulation.traces``)
  whose delivery opportunities the userspace backend replays in a loop ("Trace links").
* ``outage``: ``(on_s, off_s)``, a periodic schedule from the link's start: the userspace backend's
  rate stage serves nothing during each ``off_s`` and packets wait in the queue ("Outages").
  ``outage_windows``: ``((start_s, end_s), ...)`` instead, outages once at those times from the
  link's start (written ``10s-12s, 30s-35s``, or read from a file by ``qoelab link check``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from qoelab.emulation import traces
from qoelab.emulation.outages import OUTAGE_MAX_S, OUTAGE_MIN_S, OUTAGE_WINDOWS_MAX, parse_outages
from qoelab.emulation.tcp import (
    TcpSettings,
)
from qoelab.emulation.userspace import QUEUES
from qoelab.errors import ParameterError
from qoelab.units import (
    format_duration,
    format_rate,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
    require_ascii,
)

RATE_MIN_BPS = 8e3
RATE_MAX_BPS = 10e9
DELAY_MAX_S = 10.0
JITTER_MAX_S = 10.0
MTU_MIN, MTU_MAX = 576, 9000
LIMIT_PKTS_MAX = 1_000_000
LIMIT_BYTES_MAX = 1 << 30
JITTER_DISTS = ("uniform", "normal")
AQM_PARAM_MIN_S, AQM_PARAM_MAX_S = 1e-4, 60.0  # linkemu's bounds for target, interval, max_burst
# Which queue takes which parameter ("queue_max_burst_s" is PIE's MAX_BURST).
AQM_PARAMS = {"codel": ("queue_target_s", "queue_interval_s"),
              "pie": ("queue_target_s", "queue_interval_s", "queue_max_burst_s")}  # fmt: skip
# Default queue when none is given: 1000 packets, netem's (and a NIC's txqueuelen) default, which
# the userspace emulator uses too, so both backends queue alike.
DEFAULT_LIMIT_PKTS = 1000


@dataclass(frozen=True)
class Direction:
    """One direction of the link. Values are SI (bit/s, seconds, percent)."""

    rate_bps: float | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    jitter_dist: str = "uniform"
    reorder: bool = False
    loss_pct: float = 0.0
    gemodel: tuple[float, float, float, float] | None = None
    limit_pkts: int | None = None
    limit_bytes: int | None = None
    queue: str = "fifo"
    queue_target_s: float | None = None
    queue_interval_s: float | None = None
    queue_max_burst_s: float | None = None
    trace: str | None = None
    outage: tuple[float, float] | None = None
    outage_windows: tuple[tuple[float, float], ...] | None = None

    def validate(self, prefix: str = "") -> Direction:
        """Raise ParameterError naming the field (``prefix`` + name) and the bound; return self."""
        p = prefix
        if self.rate_bps is not None:
            _check_number(p + "rate", self.rate_bps)
            if self.rate_bps < RATE_MIN_BPS:
                raise ParameterError(
                    p + "rate",
                    f"must be at least {format_rate(RATE_MIN_BPS)}/s, got {format_rate(self.rate_bps)}/s",
                )
            if self.rate_bps > RATE_MAX_BPS:
                raise ParameterError(
                    p + "rate",
                    f"must be at most {format_rate(RATE_MAX_BPS)}/s, got {format_rate(self.rate_bps)}/s",
                )
        for name, value, hi in (
            ("delay", self.delay_s, DELAY_MAX_S),
            ("jitter", self.jitter_s, JITTER_MAX_S),
        ):
            _check_number(p + name, value)
            if value > hi:
                raise ParameterError(
                    p + name, f"must be at most {format_duration(hi)}, got {format_duration(value)}"
                )
        if self.jitter_dist not in JITTER_DISTS:
            raise ParameterError(
                p + "jitter_dist", f"must be one of {', '.join(JITTER_DISTS)}, got {self.jitter_dist!r}"
            )
        _check_percent(p + "loss", self.loss_pct)
        if self.gemodel is not None:
            if len(self.gemodel) != 4:
                raise ParameterError(p + "gemodel", "needs four percentages: p, r, 1-h, 1-k")
            for part, value in zip(("p", "r", "1-h", "1-k"), self.gemodel, strict=True):
                _check_percent(f"{p}gemodel.{part}", value)
            if self.loss_pct:
                raise ParameterError(p + "loss", "cannot be combined with gemodel (choose one loss model)")
        if self.limit_pkts is not None and self.limit_bytes is not None:
            raise ParameterError(p + "limit", "give the queue limit in packets or in bytes, not both")
        if self.limit_pkts is not None and not 1 <= self.limit_pkts <= LIMIT_PKTS_MAX:
            raise ParameterError(
                p + "limit", f"must be between 1 and {LIMIT_PKTS_MAX} packets, got {self.limit_pkts}"
            )
        if self.limit_bytes is not None and not MTU_MIN <= self.limit_bytes <= LIMIT_BYTES_MAX:
            raise ParameterError(
                p + "limit", f"must be between {MTU_MIN} and {LIMIT_BYTES_MAX} bytes, got {self.limit_bytes}"
            )
        if self.queue not in QUEUES:
            raise ParameterError(p + "queue", f"must be one of {', '.join(QUEUES)}, got {self.queue!r}")
        if self.queue == "prio" and self.rate_bps is None:
            raise ParameterError(
                p + "queue", "prio needs a rate: the priority queue is the one in front of the rate limiter"
            )
        if self.queue in ("drophead", "codel", "pie") and (
            self.rate_bps is None and self.trace is None and self.outage is None
        ):
            raise ParameterError(
                p + "queue",
                f"{self.queue} needs a rate, a trace or an outage: it is the queue in front of the link's "
                "rate stage",
            )
        for field in ("queue_target_s", "queue_interval_s", "queue_max_burst_s"):
            value = getattr(self, field)
            if value is None:
                continue
            name = p + field.removesuffix("_s")
            if field not in AQM_PARAMS.get(self.queue, ()):
                takers = " or ".join(q for q, fields in AQM_PARAMS.items() if field in fields)
                raise ParameterError(name, f"applies to the {takers} queue only (the queue is {self.queue})")
            _check_number(name, value)
            if not AQM_PARAM_MIN_S <= value <= AQM_PARAM_MAX_S:
                raise ParameterError(
                    name,
                    f"must be between {format_duration(AQM_PARAM_MIN_S)} and "
                    f"{format_duration(AQM_PARAM_MAX_S)}, got {format_duration(value)}",
                )
        if self.outage is not None:
            if len(self.outage) != 2:
                raise ParameterError(p + "outage", "needs two durations: on and off")
            for part, value in zip(("on", "off"), self.outage, strict=True):
                _check_number(f"{p}outage.{part}", value)
                if not OUTAGE_MIN_S <= value <= OUTAGE_MAX_S:
                    raise ParameterError(
                        f"{p}outage.{part}",
                        f"must be between {format_duration(OUTAGE_MIN_S)} and "
                        f"{format_duration(OUTAGE_MAX_S)}, got {format_duration(value)}",
                    )
            if self.trace is not None:
                raise ParameterError(
                    p + "outage",
                    "cannot be combined with a trace: put the outage in the trace "
                    "(qoelab link trace make onoff)",
                )
            if self.queue == "prio":
                raise ParameterError(p + "outage", "cannot be combined with the prio queue")
        if self.outage_windows is not None:
            self._check_windows(p + "outage")
        if self.trace is not None:
            if self.rate_bps is not None:
                raise ParameterError(
                    p + "trace", "give a rate or a trace for this direction, not both (the trace is its rate)"
                )
            if "," in self.trace:
                raise ParameterError(p + "trace", f"its path must not contain a comma: {self.trace!r}")
            try:
                traces.load_cached(self.trace)
            except traces.TraceError as err:
                raise ParameterError(p + "trace", str(err)) from None
        return self

    def _check_windows(self, field: str) -> None:
        windows = self.outage_windows or ()
        if not 1 <= len(windows) <= OUTAGE_WINDOWS_MAX:
            raise ParameterError(field, f"needs 1 to {OUTAGE_WINDOWS_MAX} windows, got {len(windows)}")
        last_end = 0.0
        for i, window in enumerate(windows, start=1):
            if len(window) != 2:
                raise ParameterError(field, f"window {i}: needs a start and an end")
            start, end = window
            _check_number(f"{field}.window{i}", start)
            _check_number(f"{field}.window{i}", end)
            if not end - start >= OUTAGE_MIN_S or end > OUTAGE_MAX_S:
                raise ParameterError(
                    field,
                    f"window {i} ({format_duration(start)}-{format_duration(end)}): must end at least "
                    f"{format_duration(OUTAGE_MIN_S)} after it starts, and by "
                    f"{format_duration(OUTAGE_MAX_S)}",
                )
            if start < last_end:
                raise ParameterError(
                    field,
                    f"window {i} starts at {format_duration(start)}, before the one above ends "
                    f"({format_duration(last_end)}): give them in order, apart",
                )
            last_end = end
        if self.outage is not None:
            raise ParameterError(field, "give a periodic outage (4s/1s) or outage windows, not both")
        if self.trace is not None:
            raise ParameterError(field, "cannot be combined with a trace: put the outage in the trace "
                                 "(qoelab link trace make csv, a rate of 0 in the outage rows)")  # fmt: skip
        if self.queue == "prio":
            raise ParameterError(field, "cannot be combined with the prio queue")

    def capacity_bps(self) -> float | None:
        """What the bottleneck offers on average: the rate, or the trace's mean (None: unshaped)."""
        if self.trace is not None:
            return traces.load_cached(self.trace).mean_bps
        return self.rate_bps

    def queue_limit_bytes(self, mtu: int) -> int:
        """The queue limit in bytes both backends use (packets count as full-size packets)."""
        if self.limit_bytes is not None:
            return self.limit_bytes
        return (self.limit_pkts or DEFAULT_LIMIT_PKTS) * mtu

    def mean_loss_pct(self) -> float:
        """Long-run loss rate in percent (the stationary Gilbert-Elliott loss when gemodel is set)."""
        if self.gemodel is None:
            return self.loss_pct
        p, r, bad_loss, good_loss = (x / 100 for x in self.gemodel)
        if p + r == 0:
            return good_loss * 100
        pi_bad = p / (p + r)
        return 100 * (pi_bad * bad_loss + (1 - pi_bad) * good_loss)

    def describe(self) -> str:
        if self.trace is not None:
            shown = f"trace {traces.load_cached(self.trace).name} (mean {format_rate(self.capacity_bps())})"
        else:
            shown = format_rate(self.rate_bps) if self.rate_bps else "unshaped"
        parts = [shown]
        parts.append(f"delay {format_duration(self.delay_s)}")
        if self.jitter_s:
            parts.append(f"jitter {format_duration(self.jitter_s)} {self.jitter_dist}")
        if self.gemodel:
            parts.append("loss GE(" + ",".join(f"{x:g}%" for x in self.gemodel) + ")")
        elif self.loss_pct:
            parts.append(f"loss {self.loss_pct:g}%")
        if self.queue != "fifo":
            parts.append(f"queue {self.queue}")
            parts += [
                f"{field.removeprefix('queue_').removesuffix('_s')} {format_duration(value)}"
                for field in AQM_PARAMS.get(self.queue, ())
                if (value := getattr(self, field)) is not None
            ]
        if self.outage:
            parts.append(
                f"outage {format_duration(self.outage[1])} every {format_duration(sum(self.outage))}"
            )
        if self.outage_windows:
            total = sum(end - start for start, end in self.outage_windows)
            parts.append(f"outages {len(self.outage_windows)} ({format_duration(total)} in all, the first "
                         f"at {format_duration(self.outage_windows[0][0])})")  # fmt: skip
        return ", ".join(parts)


@dataclass(frozen=True)
class LinkProfile:
    """A two-way link: ``up`` is client -> server, ``down`` is server -> client.

    ``tcp`` is what both namespaces' TCP is set to (``qoelab.emulation.tcp``): not the link itself,
    but part of every condition, so it travels with the profile.

    ``offload`` (userspace backend only): the emulator's devices take TCP segmentation offload and
    it batches its writes at high packet rates, for a fraction of the CPU. Every packet still meets
    the link on its own (loss, queue, rate, records), but captures on the link's interfaces see
    super-packets, and at high rates packets leave up to ``OFFLOAD_BATCH_US`` late
    (docs/emulation.md, "Offload").
    """

    up: Direction
    down: Direction
    mtu: int = 1500
    seed: int = 1
    tcp: TcpSettings = TcpSettings()
    offload: bool = False

    def validate(self) -> LinkProfile:
        self.down.validate("")
        self.up.validate("up_")
        self.tcp.validate()
        if isinstance(self.mtu, bool) or not isinstance(self.mtu, int) or not MTU_MIN <= self.mtu <= MTU_MAX:
            raise ParameterError(
                "mtu", f"must be an integer between {MTU_MIN} and {MTU_MAX}, got {self.mtu!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ParameterError("seed", f"must be an integer between 0 and 2^63-1, got {self.seed!r}")
        if not isinstance(self.offload, bool):
            raise ParameterError("offload", f"must be true or false, got {self.offload!r}")
        return self

    @property
    def symmetric(self) -> bool:
        return self.up == self.down

    def trace_provenance(self) -> dict[str, dict[str, Any]]:
        """Per traced direction, the trace's name and checksum (empty: no trace)."""
        return {
            name: {"name": (t := traces.load_cached(d.trace)).name, "sha256": t.sha256}
            for name, d in (("down", self.down), ("up", self.up))
            if d.trace is not None
        }

    @property
    def needs_userspace(self) -> str:
        """Why only the userspace backend can carry this link ("" when any backend can)."""
        for d in (self.down, self.up):
            if d.trace is not None:
                return "a trace link (the kernel's netem and tbf have no trace replay)"
            if d.outage is not None or d.outage_windows is not None:
                return "an outage schedule (the kernel's netem and tbf have none)"
            if d.queue != "fifo":
                return f"the {d.queue} queue (the kernel backend has one drop-tail queue)"
        return ""

    def unimpaired(self) -> LinkProfile:
        """The same link with the emulator out of the way: no delay, jitter, loss or rate limit
        (a ``prio`` direction keeps its rate and limit: its queue feeds the rate stage)."""

        def clear(d: Direction) -> Direction:
            if d.queue == "prio":
                return Direction(rate_bps=d.rate_bps, limit_pkts=d.limit_pkts, limit_bytes=d.limit_bytes,
                                 queue=d.queue)  # fmt: skip
            return Direction()

        return replace(self, up=clear(self.up), down=clear(self.down))

    @classmethod
    def parse(
        cls,
        rate: object = None,
        delay: object = 0,
        jitter: object = 0,
        loss: object = 0,
        *,
        jitter_dist: str = "uniform",
        reorder: bool = False,
        gemodel: object = None,
        limit: object = None,
        queue: str = "fifo",
        queue_target: object = None,
        queue_interval: object = None,
        queue_max_burst: object = None,
        trace: object = None,
        up_trace: object = None,
        outage: object = None,
        up_rate: object = None,
        up_delay: object = None,
        up_jitter: object = None,
        up_loss: object = None,
        up_gemodel: object = None,
        up_limit: object = None,
        mtu: object = 1500,
        seed: object = 1,
        tcp: TcpSettings | None = None,
        offload: bool = False,
    ) -> LinkProfile:
        """Build a validated profile from human strings (``'10mbit'``, ``'25ms'``, ``'0.5%'``).

        The plain fields set both directions (``queue`` and ``trace`` too); ``up_*`` override the
        client -> server direction (``up_rate`` replaces the trace there, ``up_trace`` the rate).
        ``trace``: a name from the lab's trace library or a file's path.
        """
        down = Direction(
            rate_bps=None if rate in (None, "") else parse_rate(rate, "rate"),
            delay_s=parse_duration(delay, "delay"),
            jitter_s=parse_duration(jitter, "jitter"),
            jitter_dist=str(jitter_dist),
            reorder=bool(reorder),
            loss_pct=parse_percent(loss, "loss"),
            gemodel=parse_gemodel(gemodel, "gemodel"),
            **parse_limit(limit, "limit"),
            queue=str(queue),
            queue_target_s=_optional_duration(queue_target, "queue_target"),
            queue_interval_s=_optional_duration(queue_interval, "queue_interval"),
            queue_max_burst_s=_optional_duration(queue_max_burst, "queue_max_burst"),
            trace=_trace_path(trace, "trace"),
            **parse_outages(outage, "outage"),
        )
        down.validate("")
        up = down
        if up_rate not in (None, ""):
            up = replace(up, rate_bps=parse_rate(up_rate, "up_rate"), trace=None)
        if up_trace not in (None, ""):
            up = replace(up, trace=_trace_path(up_trace, "up_trace"), rate_bps=None)
        if up_delay not in (None, ""):
            up = replace(up, delay_s=parse_duration(up_delay, "up_delay"))
        if up_jitter not in (None, ""):
            up = replace(up, jitter_s=parse_duration(up_jitter, "up_jitter"))
        if up_loss not in (None, ""):
            up = replace(up, loss_pct=parse_percent(up_loss, "up_loss"), gemodel=None)
        if up_gemodel not in (None, ""):
            up = replace(up, gemodel=parse_gemodel(up_gemodel, "up_gemodel"), loss_pct=0.0)
        if up_limit not in (None, ""):
            up = replace(up, **parse_limit(up_limit, "up_limit"))
        mtu_, seed_ = _parse_int(mtu, "mtu"), _parse_int(seed, "seed")
        return cls(
            up=up, down=down, mtu=mtu_, seed=seed_, tcp=tcp or TcpSettings(), offload=offload
        ).validate()

    def to_json(self) -> dict[str, Any]:
        return {
            "up": asdict(self.up),
            "down": asdict(self.down),
            "mtu": self.mtu,
            "seed": self.seed,
            "tcp": self.tcp.to_json(),
            # only when on, so that every profile from before it keeps its JSON (and reuse keys)
            **({"offload": True} if self.offload else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> LinkProfile:
        if isinstance(data, str):
            data = json.loads(data)

        def direction(d: dict[str, Any]) -> Direction:
            d = dict(d)
            for key in ("gemodel", "outage"):
                if d.get(key) is not None:
                    d[key] = tuple(float(x) for x in d[key])
            if d.get("outage_windows") is not None:
                d["outage_windows"] = tuple((float(a), float(b)) for a, b in d["outage_windows"])
            try:
                return Direction(**d)
            except TypeError as exc:
                raise ParameterError("profile", f"not a link profile direction: {exc}") from None

        return cls(
            up=direction(data["up"]),
            down=direction(data["down"]),
            mtu=int(data.get("mtu", 1500)),
            seed=int(data.get("seed", 1)),
            tcp=TcpSettings.from_json(data.get("tcp")),
            offload=data.get("offload", False),
        ).validate()

    def summary(self) -> dict[str, Any]:
        """Flat configured values for tables and charts (down direction first, as users think)."""
        return {
            "rate_bps": self.down.rate_bps,
            "up_rate_bps": self.up.rate_bps,
            "delay_ms": self.down.delay_s * 1e3,
            "up_delay_ms": self.up.delay_s * 1e3,
            "rtt_ms": (self.down.delay_s + self.up.delay_s) * 1e3,
            "jitter_ms": self.down.jitter_s * 1e3,
            "loss_pct": self.down.mean_loss_pct(),
            "up_loss_pct": self.up.mean_loss_pct(),
            "mtu": self.mtu,
            "tcp_cc": self.tcp.cc,
            # A traced direction (no rate): which trace, by name and checksum, and what it offers.
            **{
                f"{key}{field}": value
                for key, d in (("trace", self.down), ("up_trace", self.up))
                if d.trace is not None
                for field, value in _trace_facts(d.trace).items()
            },
        }


def _trace_facts(path: str) -> dict[str, Any]:
    """Provenance of a trace: ``trace`` (its name), ``_sha256``, ``_mean_bps`` and ``_period_s``."""
    t = traces.load_cached(path)
    return {"": t.name, "_sha256": t.sha256, "_mean_bps": t.mean_bps, "_period_s": t.period_ms / 1000}


def _optional_duration(value: object, field: str) -> float | None:
    return None if value in (None, "") else parse_duration(value, field)


def _trace_path(value: object, field: str) -> str | None:
    """A trace's library name or path -> the file's absolute path (ParameterError naming ``field``)."""
    if value in (None, ""):
        return None
    try:
        return traces.resolve(str(value))
    except traces.TraceError as err:
        raise ParameterError(field, str(err)) from None


def _check_number(field: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(field, f"must be a number, got {value!r}")
    if math.isnan(value):
        raise ParameterError(field, "must be a number, got NaN")
    if math.isinf(value):
        raise ParameterError(field, f"must be finite, got {value!r}")
    if value < 0:
        raise ParameterError(field, f"must not be negative, got {value!r}")


def _check_percent(field: str, value: float) -> None:
    _check_number(field, value)
    if value > 100:
        raise ParameterError(field, f"must be at most 100 %, got {value:g} %")


def _parse_int(value: object, field: str) -> int:
    if isinstance(value, bool):
        raise ParameterError(field, f"must be an integer, got {value!r}")
    require_ascii(field, value)  # float() reads full-width digits
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(field, f"must be an integer, got {value!r}") from None
    if not as_float.is_integer():
        raise ParameterError(field, f"must be an integer, got {value!r}")
    return int(as_float)


def parse_gemodel(value: object, field: str = "gemodel") -> tuple[float, float, float, float] | None:
    """``'1%,30%'`` or ``'1%,30%,100%,0%'`` (p, r, 1-h, 1-k) -> four percentages.

    Missing values take netem's defaults: r = 100 - p, 1-h = 100 % (the bad state loses every
    packet), 1-k = 0 % (the good state loses none): the simple Gilbert model.
    """
    if value in (None, ""):
        return None
    items = [s for s in value.replace(" ", ",").split(",") if s] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not 1 <= len(items) <= 4:
        raise ParameterError(field, f"needs one to four percentages 'p,r,1-h,1-k', got {value!r}")
    names = ("p", "r", "1-h", "1-k")
    parsed = [parse_percent(x, f"{field}.{names[i]}") for i, x in enumerate(items)]
    defaults = [None, 100 - parsed[0], 100.0, 0.0]
    while len(parsed) < 4:
        parsed.append(defaults[len(parsed)])  # type: ignore[arg-type]
    return (parsed[0], parsed[1], parsed[2], parsed[3])


def parse_limit(value: object, field: str = "limit") -> dict[str, int | None]:
    """``'100pkt'`` or a bare integer -> packets; ``'64kb'`` / ``'90000b'`` -> bytes."""
    if value in (None, ""):
        return {"limit_pkts": None, "limit_bytes": None}
    text = str(value).strip().lower()
    # A bare number is a packet count (as tc's pfifo limit); a byte unit makes it bytes.
    in_packets = not text[-1:].isalpha() or text.endswith(("pkt", "p"))
    count = parse_size(value, field)
    if count < 1:
        raise ParameterError(field, f"must be at least 1, got {value!r}")
    return (
        {"limit_pkts": count, "limit_bytes": None}
        if in_packets
        else {"limit_pkts": None, "limit_bytes": count}
    )
