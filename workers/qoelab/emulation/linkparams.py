"""The link parameters every job type shares (``LinkParams``): a sweep's vocabulary for the emulated
link, validated at submit with the worker's own parsers and bounds, and turned into a
``LinkProfile`` (``qoelab.emulation.profile``) on the worker."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from qoelab import params
from qoelab.emulation import traces
from qoelab.emulation.outages import parse_outages
from qoelab.emulation.profile import (
    AQM_PARAM_MAX_S,
    AQM_PARAM_MIN_S,
    AQM_PARAMS,
    DELAY_MAX_S,
    JITTER_MAX_S,
    MTU_MAX,
    MTU_MIN,
    RATE_MAX_BPS,
    RATE_MIN_BPS,
    Direction,
    LinkProfile,
    parse_gemodel,
    parse_limit,
)
from qoelab.emulation.tcp import (
    BUFFER_MAX,
    BUFFER_MIN,
    DEFAULT_CC,
    RTO_MIN_MAX_S,
    RTO_MIN_MIN_S,
    TcpSettings,
    is_cc_name,
)
from qoelab.errors import ParameterError
from qoelab.units import format_rate, parse_rate


class LinkParams(BaseModel):
    """The link parameters every job type embeds (subclass it), so sweeps share one vocabulary.

    Values arrive as human strings or SI numbers; ``to_profile()`` gives the validated profile.
    """

    model_config = ConfigDict(extra="forbid")

    rate: params.Rate(RATE_MIN_BPS, RATE_MAX_BPS) | None = Field(  # type: ignore[valid-type]
        default=None, description="bottleneck rate, both directions (e.g. 10mbit); empty = unshaped"
    )
    delay: params.Duration(0.0, DELAY_MAX_S) = Field(default=0.0, description="one-way delay (e.g. 25ms)")  # type: ignore[valid-type]
    jitter: params.Duration(0.0, JITTER_MAX_S) = Field(default=0.0, description="delay variation")  # type: ignore[valid-type]
    jitter_dist: Literal["uniform", "normal"] = "uniform"
    reorder: bool = Field(default=False, description="let jittered packets overtake each other")
    loss: params.Percent() = Field(default=0.0, description="random loss per packet (e.g. 0.5%)")  # type: ignore[valid-type]
    gemodel: str | None = Field(default=None, description="Gilbert-Elliott loss 'p,r,1-h,1-k' in %")
    limit: str | int | None = Field(default=None, description="queue limit: 100pkt or 64kb")
    up_rate: params.Rate(RATE_MIN_BPS, RATE_MAX_BPS) | None = None  # type: ignore[valid-type]
    up_delay: params.Duration(0.0, DELAY_MAX_S) | None = None  # type: ignore[valid-type]
    up_jitter: params.Duration(0.0, JITTER_MAX_S) | None = None  # type: ignore[valid-type]
    up_loss: params.Percent() | None = None  # type: ignore[valid-type]
    # Not "trace": thinclient_tcp's ``trace`` is the captured traffic it replays, and a name keeps
    # one meaning across job types (tests/workers/test_link_field_meanings.py).
    link_trace: str | None = Field(
        default=None,
        description="a Mahimahi trace replayed as both directions' capacity instead of a rate: a name "
        "from the lab's trace library (qoelab link trace info)",
    )
    up_link_trace: str | None = Field(default=None, description="the client -> server direction's trace")
    outage: str | None = Field(
        default=None,
        description="outages of both directions, packets waiting through them: periodic ON/OFF (4s/1s: "
        "up 4 s, down 1 s) or windows from the link's start (10s-12s, 30s-35s)",
    )
    # After the rate, the traces and the outage: the queue's validators read them.
    queue: Literal["fifo", "drophead", "codel", "pie", "prio"] = Field(
        default="fifo",
        description="the queue in front of the rate, both directions: fifo (drop-tail, in packets or "
        "bytes as limit says), drophead (drops the oldest), codel (RFC 8289), pie (RFC 8033), prio (DSCP "
        "EF first); all but fifo run in the userspace emulator and need a rate, trace or outage",
    )
    queue_target: params.Duration(AQM_PARAM_MIN_S, AQM_PARAM_MAX_S) | None = Field(  # type: ignore[valid-type]
        default=None, description="CoDel's target delay (default 5ms) or PIE's reference delay (15ms)"
    )
    queue_interval: params.Duration(AQM_PARAM_MIN_S, AQM_PARAM_MAX_S) | None = Field(  # type: ignore[valid-type]
        default=None, description="CoDel's interval (default 100ms) or PIE's update period (15ms)"
    )
    queue_max_burst: params.Duration(AQM_PARAM_MIN_S, AQM_PARAM_MAX_S) | None = Field(  # type: ignore[valid-type]
        default=None, description="PIE's burst allowance (default 150ms)"
    )
    mtu: int = Field(default=1500, ge=MTU_MIN, le=MTU_MAX)
    link_offload: bool = Field(
        default=False,
        description="the userspace emulator takes TCP segmentation offload and batches writes at high "
        "packet rates: a fraction of the CPU at 1 Gbit/s, every packet still judged on its own, but "
        "captures on the link see super-packets, and above ~240 Mbit/s packets leave up to 0.4 ms late",
    )
    # TCP in both namespaces (qoelab.emulation.tcp). A worker offers an algorithm when its kernel
    # does (capability tcp_cc.<name>), so the pattern only keeps the name a name.
    tcp_cc: str = Field(
        default=DEFAULT_CC,
        description="TCP congestion control in both namespaces: any the worker's kernel offers "
        "(reno, cubic, bbr, ...); the thesis used cubic (ch. 4) and NewReno = reno (ch. 2)",
    )
    tcp_sack: bool = Field(default=True, description="TCP selective acknowledgements (net.ipv4.tcp_sack)")
    tcp_rmem_max: params.Bytes(BUFFER_MIN, BUFFER_MAX) | None = Field(  # type: ignore[valid-type]
        default=None,
        description="receive buffer ceiling (tcp_rmem max, e.g. 512kb); empty = twice the path's BDP",
    )
    tcp_wmem_max: params.Bytes(BUFFER_MIN, BUFFER_MAX) | None = Field(  # type: ignore[valid-type]
        default=None,
        description="send buffer ceiling (tcp_wmem max, e.g. 512kb); empty = twice the path's BDP",
    )
    rto_min: params.Duration(RTO_MIN_MIN_S, RTO_MIN_MAX_S) | None = Field(  # type: ignore[valid-type]
        default=None, description="minimum retransmission timeout (route option); empty = the kernel's 200ms"
    )

    @field_validator("outage")
    @classmethod
    def _outage_in_bounds(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        try:
            Direction(rate_bps=RATE_MIN_BPS, **parse_outages(value)).validate("")
        except ParameterError as err:
            raise ValueError(f"{err.field}: {err.message}") from None
        return value

    @field_validator("queue")
    @classmethod
    def _queue_has_a_rate_stage(cls, value: str, info: Any) -> str:
        """Every queue but fifo is the queue of the rate stage, which a direction has with a rate, a
        trace or an outage (the up direction inherits the down one's unless overridden)."""
        data = info.data
        has_stage = any(data.get(k) not in (None, "") for k in ("rate", "link_trace", "outage"))
        if value != "fifo" and not has_stage:
            need = "a rate" if value == "prio" else "a rate, a link_trace or an outage"
            raise ValueError(f"{value} needs {need}: it is the queue in front of the link's rate stage")
        return value

    @field_validator("queue_target", "queue_interval", "queue_max_burst")
    @classmethod
    def _queue_takes_it(cls, value: float | None, info: Any) -> float | None:
        queue = info.data.get("queue", "fifo")
        if value is not None and info.field_name + "_s" not in AQM_PARAMS.get(queue, ()):
            takers = " or ".join(q for q, fields in AQM_PARAMS.items() if info.field_name + "_s" in fields)
            raise ValueError(f"applies to the {takers} queue only (queue is {queue})")
        return value

    def queue_settings(self) -> dict[str, Any]:
        """``queue`` and its parameters for ``LinkProfile.parse``."""
        return {
            "queue": self.queue,
            "queue_target": self.queue_target,
            "queue_interval": self.queue_interval,
            "queue_max_burst": self.queue_max_burst,
        }

    @field_validator("limit", "gemodel")
    @classmethod
    def _parses_within_bounds(cls, value: object, info: Any) -> object:
        """The queue limit and the loss model are checked at submit, with the worker's own parsers
        and bounds: ``-1`` or ``99999999999999999999pkt`` were accepted and failed on the worker."""
        if value in (None, ""):
            return value
        name = info.field_name
        try:
            fields = parse_limit(value, name) if name == "limit" else {"gemodel": parse_gemodel(value, name)}
            Direction(**fields).validate("")
        except ParameterError as err:
            raise ValueError(err.message) from None
        return value

    @field_validator("link_trace", "up_link_trace")
    @classmethod
    def _trace_loads(cls, value: str | None, info: Any) -> str | None:
        """A library trace is read and checked at submit: a bad line is refused here, naming it.
        An uploaded one (``upload:N``) was checked when it was uploaded; the backend checks that it
        is the researcher's, and the worker fetches it. No paths: a path would let a sweep read
        (and echo in errors) any file of a worker. A rate set for the same direction is refused with
        it; a job type's default rate (a paper's 10 Mbit/s, say) gives way to the trace
        (``link_rates``)."""
        if value in (None, ""):
            return None
        if not traces.UPLOAD_REF.fullmatch(value.strip()):
            try:
                traces.load_cached(traces.resolve(value, library_only=True))
            except traces.TraceError as err:
                raise ValueError(f"{err} (or upload:N, a trace you uploaded)") from None
        rate_field = "rate" if info.field_name == "link_trace" else "up_rate"
        rate = info.data.get(rate_field)
        if rate is not None and rate != cls._default_rate(rate_field):
            raise ValueError(
                "give a rate or a trace for this direction, not both "
                f"({rate_field} is {format_rate(rate)}/s; leave it empty)"
            )
        return value.strip()

    @classmethod
    def _default_rate(cls, name: str) -> float | None:
        default = cls.model_fields[name].default
        return None if default in (None, "") else parse_rate(default, name)

    def link_rates(self) -> dict[str, Any]:
        """``rate``, ``up_rate``, ``trace`` and ``up_trace`` for ``LinkProfile.parse``: a traced
        direction's rate is the trace (its default rate left out)."""
        return {
            "rate": None if self.link_trace else self.rate,
            "up_rate": None if self.up_link_trace else self.up_rate,
            "trace": self.link_trace,
            "up_trace": self.up_link_trace,
        }

    @field_validator("tcp_cc")
    @classmethod
    def _cc_is_a_name(cls, value: str) -> str:
        if not is_cc_name(value):
            raise ValueError(f"must be a congestion control name such as cubic or reno, got {value!r}")
        return value

    def tcp_settings(self) -> TcpSettings:
        return TcpSettings(
            cc=self.tcp_cc,
            sack=self.tcp_sack,
            rmem_max=None if self.tcp_rmem_max is None else int(self.tcp_rmem_max),
            wmem_max=None if self.tcp_wmem_max is None else int(self.tcp_wmem_max),
            rto_min_s=self.rto_min,
        ).validate()

    def to_profile(self, seed: int = 1) -> LinkProfile:
        return LinkProfile.parse(
            **self.link_rates(),
            delay=self.delay,
            jitter=self.jitter,
            loss=self.loss,
            jitter_dist=self.jitter_dist,
            reorder=self.reorder,
            gemodel=self.gemodel,
            limit=self.limit,
            **self.queue_settings(),
            outage=self.outage,
            up_delay=self.up_delay,
            up_jitter=self.up_jitter,
            up_loss=self.up_loss,
            mtu=self.mtu,
            seed=seed,
            tcp=self.tcp_settings(),
            offload=self.link_offload,
        )
