"""Run one claimed trial: plain code, no Celery, so tests call it directly.

``run_trial`` gets the claim answer of the backend, runs the job type's runner in a fresh work
directory under a per-trial name prefix, uploads the artifacts (always including the trial log)
and reports the outcome with ``finish``. Whatever happens, the work directory and everything
created under the prefix (namespaces, links, processes) is removed before it returns.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import re
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import psutil

from qoelab.errors import QoelabError
from qoelab.jobtype import ArtifactFile, JobType, TrialContext, TrialResult, resolve
from qoelab.params import validate_params

log = logging.getLogger("qoelab.runner")

# The runner's own deadline plus this much before the alarm interrupts it: runners that watch
# ctx.time_left() get the chance to stop cleanly first.
DEADLINE_GRACE_S = 15.0
# Per-trial prefixes become namespace/interface names (<prefix>-c must fit IFNAMSIZ) and select what
# cleanup removes, so a malformed one (say "" or "q") could wipe unrelated objects: refuse it.
PREFIX_RE = re.compile(r"^q[a-z0-9]{1,12}$")
LOG_FORMAT = "%(asctime)s %(levelname)s trial=%(trial_id)s %(name)s: %(message)s"


class Reporter(Protocol):
    def upload_artifact(self, trial_id: int | str, path: Path, kind: str) -> Any: ...

    def finish(
        self,
        trial_id: int | str,
        status: str,
        error: str = "",
        result: dict[str, Any] | None = None,
        retryable: bool = False,
    ) -> Any: ...


class TrialTimeout(QoelabError):
    """The runner went past the trial's time limit."""


class _TrialIdFilter(logging.Filter):
    def __init__(self, trial_id: str) -> None:
        super().__init__()
        self.trial_id = trial_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.trial_id = self.trial_id
        return True


def default_job_lookup(name: str) -> JobType:
    from qoelab import jobs

    return jobs.get(name)


def cleanup_prefix(prefix: str) -> list[str]:
    """Remove what trials left under ``prefix``: what lives inside the namespaces first (each job
    type's cleanups: remote-desktop processes, session files, guests and their overlays), then the
    link's namespaces, devices and emulators, then what had to wait for those processes to go
    (storage targets' files, VOSE's CPU quotas). Each cleanup runs once, in registry order."""
    from qoelab import jobs
    from qoelab.emulation.cleanup import cleanup_leftovers as cleanup_link

    cleanups = list(dict.fromkeys(c for job in jobs.REGISTRY.values() for c in job.cleanups))
    removed: list[str] = []
    for c in (c for c in cleanups if not c.after_link):
        removed += resolve(c.remove)(prefix) or []
    removed += cleanup_link(prefix) or []
    for c in (c for c in cleanups if c.after_link):
        removed += resolve(c.remove)(prefix) or []
    return removed


@contextlib.contextmanager
def _alarm(seconds: float | None, limit_s: float) -> Iterator[None]:
    """Interrupt the runner with TrialTimeout after ``seconds`` (main thread only: SIGALRM)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise TrialTimeout(f"the trial ran past its time limit of {limit_s:g} s and was stopped")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _kill_new_children(before: set[int]) -> None:
    """Kill processes the runner started and left running (iperf3 servers, captures)."""
    try:
        me = psutil.Process()
        left = [p for p in me.children(recursive=True) if p.pid not in before]
    except psutil.Error:
        return
    for p in left:
        with contextlib.suppress(psutil.Error):
            log.warning("killing leftover process %s (%s)", p.pid, " ".join(p.cmdline())[:120])
            p.kill()
    psutil.wait_procs(left, timeout=5)


def _utcnow() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _fetch_link_traces(client: Any, trial_id: int, params: dict[str, Any], tlog: logging.Logger) -> None:
    """Fetch the uploaded link traces (``upload:N``) the trial names into this host's upload folder,
    every time: ids belong to one backend's database, so a file kept from another must not serve."""
    from qoelab.emulation import traces

    for field in ("link_trace", "up_link_trace"):
        ref = str(params.get(field) or "").strip()
        if not traces.UPLOAD_REF.fullmatch(ref):
            continue
        if not hasattr(client, "fetch_link_trace"):
            raise QoelabError(f"{field}: {ref} is fetched from the backend by a worker; a local run names a "
                              "library trace or a file")  # fmt: skip
        name, text = client.fetch_link_trace(trial_id, int(ref.removeprefix("upload:")))
        path = traces.store_upload(ref, name, text)
        tlog.info("%s: %s fetched as %s (sha256 %s)", field, ref, path, traces.load(path).sha256[:12])


def run_trial(
    claim: dict[str, Any],
    workdir_root: Path,
    client: Reporter,
    *,
    host_facts: dict[str, Any] | None = None,
    get_job: Callable[[str], JobType] = default_job_lookup,
    cleanup: Callable[[str], None] = cleanup_prefix,
) -> str:
    """Run the claimed trial and report it; returns the status sent with ``finish``.

    ``claim`` is the backend's claim answer ``{id, job_type, params, timeout_s, prefix, attempt}``;
    ``host_facts`` (from ``capabilities.detect()``) go into the trial's provenance.
    """
    trial_id = str(claim["id"])
    prefix = str(claim.get("prefix", ""))
    attempt = int(claim.get("attempt", 1))
    timeout_s = float(claim.get("timeout_s") or 600)
    workdir = Path(workdir_root) / f"trial-{trial_id}-{attempt}"
    started = time.monotonic()
    started_at = _utcnow()

    tlog = logging.getLogger(f"qoelab.trial.{trial_id}")
    tlog.setLevel(logging.DEBUG)
    id_filter = _TrialIdFilter(trial_id)
    # Every qoelab logger (emulation, jobs) writes into the trial log while the trial runs; a pool
    # process runs one trial at a time, so nothing else's lines end up there.
    qoelab_logger = logging.getLogger("qoelab")
    old_level = qoelab_logger.level
    if qoelab_logger.getEffectiveLevel() > logging.INFO:
        qoelab_logger.setLevel(logging.INFO)

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    log_path = workdir / f"trial-{trial_id}.log"
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(id_filter)
    qoelab_logger.addHandler(handler)

    status, error, retryable = "failed", "", False
    result = TrialResult()
    params_resolved: dict[str, Any] | None = None
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    ctx = TrialContext(
        trial_id=trial_id, workdir=workdir, prefix=prefix, log=tlog, deadline=started + timeout_s
    )
    if hasattr(client, "download_capture"):
        ctx.fetch_capture = functools.partial(client.download_capture, trial_id)
    if hasattr(client, "live_report"):
        ctx.report_live = functools.partial(client.live_report, trial_id)
    job_name = str(claim.get("job_type", ""))
    try:
        tlog.info("trial %s attempt %s: job %s, prefix %s, limit %g s", trial_id, attempt, job_name,
                  prefix, timeout_s)  # fmt: skip
        try:
            if not PREFIX_RE.match(prefix):
                raise QoelabError(
                    f"the backend sent an unusable name prefix {prefix!r} (q + 1-12 letters/digits)"
                )
            try:
                job = get_job(job_name)
            except KeyError as err:
                raise QoelabError(f"this worker does not know the job type: {err.args[0]}") from None
            _fetch_link_traces(client, trial_id, dict(claim.get("params") or {}), tlog)
            params = validate_params(job.params, dict(claim.get("params") or {}))
            params_resolved = params.model_dump(mode="json")
            tlog.info("resolved parameters: %s", params_resolved)
            with _alarm(timeout_s + DEADLINE_GRACE_S, timeout_s):
                result = job.run(params, ctx)
            if not isinstance(result, TrialResult):
                raise TypeError(f"job {job_name} returned {type(result).__name__}, not TrialResult")
            status = "succeeded"
            tlog.info("succeeded: %s", result.summary)
        except QoelabError as err:
            error = str(err)
            # An error class may declare itself transient (a busy resource): the backend retries it.
            retryable = bool(getattr(err, "retryable", False))
            tlog.error("failed: %s%s", error, " (transient: may be retried)" if retryable else "")
        except Exception as err:
            error = f"internal error: {type(err).__name__}: {err}"
            tlog.error("failed with %s\n%s", error, traceback.format_exc())
        finally:
            with _alarm(60, 60):  # cleanup must not hang the worker either
                try:
                    _kill_new_children(children_before)
                    if PREFIX_RE.match(prefix):
                        cleanup(prefix)
                except Exception as err:  # report, and keep the outcome of the trial
                    tlog.error("cleanup of %s* failed: %s: %s", prefix, type(err).__name__, err)

        result.provenance = _provenance(
            claim, params_resolved, host_facts, result.provenance, started_at, time.monotonic() - started
        )
        uploading = time.monotonic()
        _upload(client, trial_id, [*ctx.artifacts, *result.artifacts], tlog)
        phases = result.provenance.setdefault("phases", {})
        phases["upload_s"] = round(time.monotonic() - uploading, 3)
        tlog.info("finished: %s%s", status, f" ({error})" if error else "")
        handler.close()
        qoelab_logger.removeHandler(handler)
        _upload(client, trial_id, [ArtifactFile(log_path, "log")], log)
        if retryable:
            client.finish(trial_id, status, error, result.to_json(), retryable=True)
        else:
            client.finish(trial_id, status, error, result.to_json())
        log.info("trial %s %s%s", trial_id, status, f": {error}" if error else "")
        return status
    finally:
        handler.close()
        qoelab_logger.removeHandler(handler)
        qoelab_logger.setLevel(old_level)
        shutil.rmtree(workdir, ignore_errors=True)


def _provenance(
    claim: dict[str, Any],
    resolved: dict[str, Any] | None,
    host_facts: dict[str, Any] | None,
    from_job: dict[str, Any],
    started_at: str,
    duration_s: float,
) -> dict[str, Any]:
    facts = host_facts or {}
    prov: dict[str, Any] = {
        "params": claim.get("params"),
        "resolved": resolved,
        "attempt": claim.get("attempt"),
        "host": {
            k: facts.get(k) for k in ("name", "hostname", "kernel", "python", "capabilities") if k in facts
        },
        "versions": facts.get("versions", {}),
        "code_revision": facts.get("code_revision"),
        "started_at": started_at,
        "finished_at": _utcnow(),
        "duration_s": round(duration_s, 3),
    }
    # What the runner itself recorded (exact tool versions it ran, commands) wins.
    for key, value in (from_job or {}).items():
        if isinstance(value, dict) and isinstance(prov.get(key), dict):
            prov[key] = {**prov[key], **value}
        else:
            prov[key] = value
    return prov


def _upload(client: Reporter, trial_id: str, artifacts: list[ArtifactFile], tlog: logging.Logger) -> None:
    seen: set[Path] = set()
    for art in artifacts:
        path = Path(art.path)
        if path in seen:
            continue
        seen.add(path)
        if not path.is_file():
            tlog.warning("artifact %s (%s) does not exist; not uploaded", path.name, art.kind)
            continue
        if path.stat().st_size == 0:  # the backend keeps no empty files (a quiet helper's log)
            tlog.info("artifact %s (%s) is empty; not uploaded", path.name, art.kind)
            continue
        try:
            client.upload_artifact(trial_id, path, art.kind)
            tlog.info("uploaded %s (%s, %d bytes)", path.name, art.kind, path.stat().st_size)
        except QoelabError as err:
            # The measurement stands without its file; the log says what is missing.
            tlog.error("upload of %s failed: %s", path.name, err)
