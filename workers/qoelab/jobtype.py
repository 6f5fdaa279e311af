"""What a job type is, what a runner receives and what it returns.

A job type is declared once, in ``qoelab/jobs/<name>.py``, as a :class:`JobType`: its parameter
schema, required worker capabilities and the probes that report them, runner, cleanup of leftovers,
summary metrics, charts and tables. The backend reads the same declaration (it is plain data), so a
new job type needs no backend migration.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from qoelab.estimate import Estimate


@dataclass(frozen=True)
class Metric:
    """A per-trial summary value the job type reports, e.g. ``tcp_down_bps``."""

    name: str
    label: str
    unit: str = ""
    group: str = ""  # the selectors' heading for it (a job type's family); "" stands alone


@dataclass(frozen=True)
class ChartSpec:
    """A preset dashboard chart: summary metric ``y`` against parameter ``x``.

    ``series`` splits points by another parameter; ``facet`` draws one panel per value of a third
    parameter (the thesis' "(a) 1 Mbit/s, (b) 10 Mbit/s"; None = one panel with every trial);
    ``identity`` draws y = x (configured vs measured). ``x_scale``/``y_scale`` divide values for
    display (1e6 shows bit/s as Mbit/s).
    """

    key: str
    title: str
    x: str
    y: str
    series: str | None = None
    log_x: bool = False
    log_y: bool = False
    x_label: str = ""
    y_label: str = ""
    x_scale: float = 1.0
    y_scale: float = 1.0
    identity: bool = False
    # "summary" (per-trial values), "samples" (per-event values), "series" (a time series per trial)
    # or "curve" (per-trial curves: x and y read from the same samples)
    source: str = "summary"
    facet: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """A preset results table in a paper's layout (thesis 001's Tables 6.1-6.3): a row per
    ``row_label`` of a trial's resolved parameters, a column per ``column_label``, each cell the mean
    (95 % CI) of summary metric ``y`` over the trials that fall in it. ``reference`` holds the
    paper's value per (row, column), shown beside; ``rows`` and ``columns`` fix the order (labels
    not listed follow in the order met)."""

    key: str
    title: str
    y: str
    row_label: Callable[[dict[str, Any]], str]
    column_label: Callable[[dict[str, Any]], str]
    rows: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    reference: Mapping[tuple[str, str], float] = field(default_factory=dict)
    reference_title: str = ""
    digits: int = 0
    # only trials whose resolved parameters hold these values (e.g. family = postmark)
    where: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Sample:
    """One per-event row (RD: one screen update). ``values`` are numbers keyed by name."""

    kind: str
    index: int
    values: dict[str, float | int | str | None]


@dataclass
class SeriesPoint:
    """One point of a per-trial time series (APT goodput per step, VOSE CPU per second)."""

    name: str
    t: float
    value: float


@dataclass
class ArtifactFile:
    path: Path
    kind: str  # pcap, video, log, json, ...


@dataclass
class TrialResult:
    summary: dict[str, float] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    series: list[SeriesPoint] = field(default_factory=list)
    artifacts: list[ArtifactFile] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    link: dict[str, Any] = field(default_factory=dict)  # the link verification of this trial

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "samples": [{"kind": s.kind, "index": s.index, "values": s.values} for s in self.samples],
            "series": [{"name": p.name, "t": p.t, "value": p.value} for p in self.series],
            "provenance": self.provenance,
            "link": self.link,
        }


@dataclass
class TrialContext:
    """What a runner gets besides its parameters."""

    trial_id: str
    workdir: Path
    prefix: str  # short per-trial name prefix for namespaces/devices, so leftovers can be found
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("qoelab.trial"))
    deadline: float | None = None  # time.monotonic() value after which the runner should stop
    artifacts: list[ArtifactFile] = field(default_factory=list)
    # Saves another trial's packet capture at the given path (a job parameter ``trial:N``): the
    # worker fetches it from the backend, a local run has none (it takes a file instead).
    fetch_capture: Callable[[int, Path], None] | None = None
    # Sends a live session's report to the backend and returns its answer (the worker's client; a
    # local run has none and reads the backend's address from the environment).
    report_live: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def add_artifact(self, path: Path, kind: str) -> None:
        self.artifacts.append(ArtifactFile(Path(path), kind))

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


@dataclass
class HostProbe:
    """What ``capabilities.detect()`` has found so far; a job type's probes add their flags to it.

    Every flag that is False carries a reason (``set`` fills one in), which the CLI and the worker
    log print. Probes run in the order job types list them, so a probe may read a flag an earlier
    one set (the storage benchmark's reads ``vm``).
    """

    caps: dict[str, bool]
    reasons: dict[str, str]

    def set(self, name: str, ok: bool, why: str = "") -> None:
        self.caps[name] = ok
        if not ok:
            self.reasons[name] = why or "not available"

    @staticmethod
    def missing(programs: tuple[str, ...]) -> list[str]:
        """Those of ``programs`` the lab's one tool lookup does not find (``emulation.system.find_tool``:
        PATH, then the sbin directories a worker's PATH may lack)."""
        from qoelab.emulation.system import find_tool
        from qoelab.errors import MissingToolError

        out = []
        for program in programs:
            try:
                find_tool(program)
            except MissingToolError:
                out.append(program)
        return out


def resolve(ref: str) -> Callable[..., Any]:
    """The function a ``"package.module:function"`` reference names, imported on first use.

    Probes and cleanups are declared by reference so that reading the registry (the backend does, at
    start-up) does not import every engine: an engine is loaded when a worker first needs it.
    """
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ImportError(f"{ref!r} does not name a function: {err}") from err


@dataclass(frozen=True)
class Cleanup:
    """How to remove what a killed trial of this job type left behind, found by name prefix.

    ``remove`` names (``"module:function"``) a function of the prefix that returns what it removed.
    Cleanups run in two rounds around the link's own (namespaces, devices, the emulator):
    ``after_link=False`` for what lives inside the namespaces (sessions, guests), ``True`` for what
    must wait until the processes in them are gone (files, cgroups).
    """

    remove: str
    after_link: bool = False


@dataclass(frozen=True)
class JobType:
    name: str
    title: str
    description: str
    params: type[BaseModel]
    requires: frozenset[str]
    run: Callable[[BaseModel, TrialContext], TrialResult]
    metrics: tuple[Metric, ...] = ()
    charts: tuple[ChartSpec, ...] = ()
    tables: tuple[TableSpec, ...] = ()
    timeout_s: int = 600  # hard limit per trial attempt
    max_attempts: int = 2
    # Its trials record sessions (videos) that a rating campaign can show evaluators.
    stimuli: bool = False
    # Made by the lab itself (live_session: one per live rating slot), not offered in the New-sweep form.
    internal: bool = False
    # Capabilities one trial needs, from its parameters (e.g. only its protocol's tools); at least
    # ``requires``. Without it every trial needs exactly ``requires``.
    requires_for: Callable[[Any], frozenset[str]] | None = None
    # Parameters that name another trial's capture as ``trial:N`` (thinclient_tcp's ``trace``): the
    # backend checks that the trial exists, belongs to the researcher and has one.
    capture_params: tuple[str, ...] = ()
    # Parameters that do not apply to a point (e.g. storage_apt's ``sessions`` outside fixed mode):
    # a sweep drops them from that point's trials and creates points that become equal only once.
    inapplicable: Callable[[Any], frozenset[str]] | None = None
    # The probes that report the capabilities above, as "module:function" of a HostProbe
    # (qoelab.capabilities runs every job type's, each once, in order), and the cleanups of a killed
    # trial's leftovers (qoelab.runner.cleanup_prefix).
    probes: tuple[str, ...] = ()
    cleanups: tuple[Cleanup, ...] = ()
    # The findings report that judges its results, as "module:REPORT" (a qoelab.findings.base.Report;
    # qoelab.findings reads every job type's).
    reports: tuple[str, ...] = ()
    # Its papers' experiments at two sizes, as "module:CHAPTER" (a qoelab.preset.Chapter; the
    # Reproduce page and `qoelab sweep run --preset` read every job type's through qoelab.presets).
    presets: str = ""
    # How long its trials take here, from this lab's past ones (the Reproduce page's estimate);
    # None: the median wall time of its past trials (qoelab.estimate.median_wall_time).
    estimate: Estimate | None = None
    # Its command-line entries, each "module:register" of a function that adds subcommands to the
    # `qoelab` parser (qoelab.cli adds every job type's, each once).
    cli: tuple[str, ...] = ()
    # Command lines that show how to run it, listed under `qoelab --help` ("qoelab run …" ones under
    # `qoelab run --help` too).
    examples: tuple[str, ...] = ()

    def stored_params(self, params: BaseModel) -> dict[str, Any]:
        """The validated parameters as the backend stores a trial's (SI values, JSON), without the
        ones that do not apply to this point: what a result row carries as ``params``."""
        out = params.model_dump(mode="json")
        for name in self.inapplicable(params) if self.inapplicable else ():
            out.pop(name, None)
        return out

    def trial_requires(self, params: BaseModel) -> frozenset[str]:
        """What a worker must report to run this trial; a link's TCP algorithm is one of them, and a
        trace link, an outage schedule or a queue other than drop-tail need the userspace emulator."""
        from qoelab.emulation.tcp import CC_CAPABILITY_PREFIX

        needs = self.requires | (self.requires_for(params) if self.requires_for else frozenset())
        if (
            getattr(params, "link_trace", None)
            or getattr(params, "up_link_trace", None)
            or getattr(params, "outage", None)
            or getattr(params, "queue", "fifo") != "fifo"
        ):
            needs |= {"userspace_link"}  # only the userspace emulator has them (LinkProfile.needs_userspace)
        cc = getattr(params, "tcp_cc", None)
        return needs | {CC_CAPABILITY_PREFIX + cc} if cc else needs
