"""The lab-host worker: a Celery app that consumes only its own queue ``host.<name>``.

Celery is transport. The task ``qoelab.run_trial(trial_id)`` claims the trial from the backend
(409: not ours any more, e.g. a redelivered message, so it exits), runs it with
:func:`qoelab.runner.run_trial` and lets the runner report the outcome. Run state lives in the
backend; this process keeps only marker files (``<workdir>/running/<trial>.<pid>.json``) so the
heartbeat can say which trials run and notice a pool process that died mid-trial.

Configuration comes from the environment (``QOELAB_BROKER_URL``, ``QOELAB_BACKEND_URL``,
``QOELAB_HOST_TOKEN``, ``QOELAB_HOST_NAME``, ``QOELAB_WORKDIR``, ``QOELAB_CONCURRENCY``) or from
``qoelab worker`` flags, which call :func:`configure`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
import string
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from celery import Celery, signals

# Imported here, in the main thread before any thread starts or any pool process forks: a lazy
# import inside the heartbeat/reaper threads could hold a module lock across a fork.
from qoelab import capabilities, runner
from qoelab.client import BackendClient
from qoelab.errors import QoelabError

log = logging.getLogger("qoelab.worker")


# Tests shorten it (with the backend's QOELAB_HEARTBEAT_TIMEOUT) to see a dead worker quickly.
def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name) or ""
    try:
        value = float(raw) if raw.strip() else default
    except ValueError:
        raise QoelabError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not 0.1 <= value <= 3600:
        raise QoelabError(f"{name} must be between 0.1 and 3600 seconds, got {raw!r}")
    return value


HEARTBEAT_INTERVAL_S = _env_seconds("QOELAB_HEARTBEAT_INTERVAL", 10.0)
# Re-probe capabilities now and then: a tool installed while the worker runs shows up.
CAPABILITY_REFRESH_S = 300.0
# Hard limit = the job type's timeout + this margin (the runner stops itself at timeout + 15 s).
HARD_LIMIT_MARGIN_S = 120
DEFAULT_HARD_LIMIT_S = 3600
# Everything a trial creates on the host (namespaces, devices, processes) is named after a per-trial
# prefix that this worker makes: its own base ("qw" + a 2-character tag of the worker's name, or
# QOELAB_LEFTOVER_PREFIX) + random characters, all of one length, so one trial's prefix is never the
# start of another's and two workers (or a worker and a test run) on one host never touch each
# other's objects. At start the worker removes what a killed predecessor of the same name left under
# its base; a pool process that died mid-trial is cleaned through its marker file.
PREFIX_LEN = 12


def prefix_base(name: str) -> str:
    override = os.environ.get("QOELAB_LEFTOVER_PREFIX")
    if override:
        if not re.fullmatch(r"q[a-z0-9]{1,8}", override):
            raise QoelabError(f"QOELAB_LEFTOVER_PREFIX must be 'q' + 1-8 letters/digits, got {override!r}")
        return override
    digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    alphabet = string.ascii_lowercase + string.digits
    return "qw" + alphabet[digest % 36] + alphabet[digest // 36 % 36]


BASE_LOCK_DIR = Path("/run/qoelab")
_base_lock: int | None = None  # held for the worker's life; the kernel drops it when the process ends


def claim_prefix_base(base: str) -> None:
    """Hold this host's lock on ``base``: two live workers with one base would clean each other's trials.

    Two worker names hash to the same 2-character tag about once in 1,296 pairs (and a worker
    started twice under one name has one base); the second one refuses to start instead.
    """
    global _base_lock
    if _base_lock is not None:
        return
    try:
        BASE_LOCK_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(BASE_LOCK_DIR / f"worker-{base}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as err:
        log.warning("cannot lock the trial prefix base %s (%s): not checking for another worker", base, err)
        return
    try:
        # A POSIX record lock, not flock: pool processes forked from this one do not inherit it, so
        # an orphaned pool process still finishing a trial cannot keep a restarted worker out.
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise QoelabError(
            f"another qoelab worker on this host already uses the trial prefix base {base!r} (the same "
            "worker name, or one that hashes alike): give this worker another --name or set "
            "QOELAB_LEFTOVER_PREFIX"
        ) from None
    _base_lock = fd


def new_trial_prefix(name: str) -> str:
    base = prefix_base(name)
    alphabet = string.ascii_lowercase + string.digits
    return base + "".join(secrets.choice(alphabet) for _ in range(PREFIX_LEN - len(base)))


@dataclasses.dataclass
class WorkerSettings:
    broker_url: str = "redis://127.0.0.1:6379/0"
    backend_url: str = "http://127.0.0.1:8000"
    token: str = ""
    name: str = dataclasses.field(default_factory=lambda: _default_name())
    workdir: Path = Path("/var/tmp/qoelab")
    concurrency: int = 1

    @property
    def queue(self) -> str:
        return f"host.{self.name}"

    @classmethod
    def from_env(cls) -> WorkerSettings:
        e = os.environ
        s = cls()
        s.broker_url = e.get("QOELAB_BROKER_URL") or s.broker_url
        s.backend_url = e.get("QOELAB_BACKEND_URL") or s.backend_url
        s.token = e.get("QOELAB_HOST_TOKEN", "")
        s.name = e.get("QOELAB_HOST_NAME") or s.name
        s.workdir = Path(e.get("QOELAB_WORKDIR") or s.workdir)
        raw = e.get("QOELAB_CONCURRENCY") or "1"
        try:
            s.concurrency = int(raw)
        except ValueError:
            raise QoelabError(f"QOELAB_CONCURRENCY must be a whole number, got {raw!r}") from None
        return s

    def validate(self) -> None:
        import re

        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", self.name):
            raise QoelabError(
                f"host name {self.name!r} is not usable: 1-63 lower-case letters, digits, '.', '_' or '-'"
            )
        if not 1 <= self.concurrency <= 64:
            raise QoelabError(f"concurrency must be between 1 and 64, got {self.concurrency}")
        if not self.broker_url.startswith(("redis://", "rediss://", "amqp://", "memory://")):
            raise QoelabError(f"the broker URL must be redis://HOST:PORT/DB, got {self.broker_url!r}")
        if not self.backend_url.startswith(("http://", "https://")):
            raise QoelabError(
                f"the backend URL must start with http:// or https://, got {self.backend_url!r}"
            )
        if not self.token:
            raise QoelabError(
                "no host token: pass --token or set QOELAB_HOST_TOKEN "
                "(create one on the web host with 'manage.py add_host NAME')"
            )


def _default_name() -> str:
    return socket.gethostname().split(".")[0].lower()


def max_job_timeout() -> int | None:
    try:
        from qoelab import jobs
    except Exception as err:  # a broken job module must not stop the worker from reporting it
        log.error("cannot load the job types: %s: %s", type(err).__name__, err)
        return None
    return max((j.timeout_s for j in jobs.REGISTRY.values()), default=None)


# Environment names a lab host's trials never need: the backend's secrets (a host sharing the
# web server's environment) and the worker's own token, which the settings already hold.
# The broker URLs carry Redis's password where the lab started Redis (scripts/services.sh).
SECRET_NAMES = ("QOELAB_SECRET_KEY", "DATABASE_URL", "QOELAB_HOST_TOKEN", "QOELAB_API_TOKEN",
                "QOELAB_BROKER_URL", "REDIS_URL", "CELERY_BROKER_URL")  # fmt: skip
SECRET_WORDS = ("SECRET", "PASSWORD", "PASSWD", "_TOKEN")


def scrub_secrets(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """Remove secrets from ``environ`` (the worker's, once its settings are read), so trial
    processes (linkemu, iperf3, QEMU, desktops) do not inherit them (issue 33); returns the names."""
    gone = [k for k in list(environ) if k in SECRET_NAMES or any(w in k.upper() for w in SECRET_WORDS)]
    for k in gone:
        del environ[k]
    return sorted(gone)


settings = WorkerSettings.from_env()
# No fixups: a lab host has no Django, even when DJANGO_SETTINGS_MODULE leaks into its environment.
app = Celery("qoelab", fixups=[])


def configure(new: WorkerSettings) -> Celery:
    """Apply ``new`` to the Celery app and this module (pool processes inherit it by fork)."""
    global settings
    settings = new
    # One line per heartbeat request would drown the log; failures are logged by qoelab.client.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    timeout = max_job_timeout()
    hard = (timeout + HARD_LIMIT_MARGIN_S) if timeout else DEFAULT_HARD_LIMIT_S
    app.conf.update(
        broker_url=new.broker_url,
        broker_connection_retry_on_startup=True,
        # Redis re-delivers an unacked message after this long; it must outlast the longest trial
        # or a running trial would be delivered a second time (the claim would refuse it anyway).
        broker_transport_options={"visibility_timeout": max(hard * 2, 3600)},
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # One trial per pool process: namespace and socket state a runner leaves behind dies with it.
        worker_max_tasks_per_child=1,
        task_time_limit=hard,
        worker_concurrency=new.concurrency,
        worker_send_task_events=False,
        task_default_queue=new.queue,
    )
    return app


configure(settings)


# --- running markers ------------------------------------------------------------------------


def _running_dir() -> Path:
    return Path(settings.workdir) / "running"


def _write_marker(trial_id: int | str, prefix: str = "") -> Path:
    d = _running_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{trial_id}.{os.getpid()}.json"
    proc = psutil.Process()
    _write_json(
        path, {"trial": str(trial_id), "pid": proc.pid, "create_time": proc.create_time(), "prefix": prefix}
    )
    return path


def _write_json(path: Path, data: dict[str, Any]) -> None:
    # Atomic, so the heartbeat thread never reads half a marker.
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _marker_alive(info: dict[str, Any]) -> bool:
    try:
        proc = psutil.Process(int(info["pid"]))
        # A zombie runs nothing: a killed worker's pool process stays one until init reaps it (some
        # inits take a second, some never do), and its trial is lost, not running.
        return (
            abs(proc.create_time() - float(info["create_time"])) < 0.01
            and proc.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.Error, KeyError, ValueError, TypeError):
        return False


def scan_markers() -> tuple[list[str], list[tuple[Path, dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """(ids of trials running now, markers whose process is gone, live markers by trial id)."""
    running: list[str] = []
    dead: list[tuple[Path, dict[str, Any]]] = []
    live: dict[str, list[dict[str, Any]]] = {}
    d = _running_dir()
    if not d.is_dir():
        return running, dead, live
    for path in sorted(d.glob("*.json")):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written right now
        if _marker_alive(info):
            live.setdefault(info["trial"], []).append(info)
            if info["trial"] not in running:
                running.append(info["trial"])
        else:
            dead.append((path, info))
    return running, dead, live


def reap_dead_markers(client: Any, reason: str) -> list[str]:
    """Clean up after trials whose pool process died, report them as lost, drop the markers.

    A redelivery of the same Celery message may be alive beside a dead marker: while it is still
    claiming (no prefix yet) the dead one waits; if it holds a claim of a newer attempt, the dead
    run is only cleaned up, because a finish now would end the newer attempt.
    """
    _, dead, live = scan_markers()
    reaped = []
    for path, info in dead:
        trial = str(info.get("trial"))
        others = live.get(trial, [])
        if any(not o.get("prefix") for o in others):
            continue  # a redelivery is claiming right now: decide next round
        prefix = str(info.get("prefix") or "")
        log.error("trial %s: its worker process %s is gone (%s)", trial, info.get("pid"), reason)
        if runner.PREFIX_RE.match(prefix):
            cleanup_isolated(prefix)
        if prefix and not others:  # no prefix: it died before its claim; the trial never ran here
            try:
                # Not the measurement's fault: let the backend give it another attempt.
                client.finish(
                    trial, "failed", f"{reason} (worker process {info.get('pid')})", {}, retryable=True
                )
            except QoelabError as err:
                log.warning("trial %s: could not report the lost run: %s", trial, err)
        for workdir in Path(settings.workdir).glob(f"trial-{trial}-*"):
            if not any(o.get("prefix") and workdir.name.endswith(f"-{o.get('attempt')}") for o in others):
                shutil.rmtree(workdir, ignore_errors=True)
        path.unlink(missing_ok=True)
        reaped.append(trial)
    return reaped


def cleanup_isolated(prefix: str, timeout: float = 120) -> bool:
    """Run the emulation cleanup for ``prefix`` in a child process, bounded in time.

    The main process has threads (heartbeat, Celery's consumer); namespace code that forks or
    blocks must neither deadlock nor stall them, so it runs in a fresh interpreter.
    """
    code = (
        "import sys; from qoelab.runner import cleanup_prefix; print(', '.join(cleanup_prefix(sys.argv[1])))"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code, prefix], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        log.error("cleanup of %s* did not finish within %g s", prefix, timeout)
        return False
    if out.stdout.strip():
        log.info("cleanup %s: removed %s", prefix, out.stdout.strip())
    for line in out.stderr.strip().splitlines()[-20:]:
        log.warning("cleanup %s: %s", prefix, line)
    if out.returncode != 0:
        log.error("cleanup of %s* failed (exit status %s)", prefix, out.returncode)
    return out.returncode == 0


# --- backend client and heartbeat -------------------------------------------------------------

_client: Any = None
_client_pid = 0
_facts: dict[str, Any] = {}
_facts_at = 0.0


def backend_client() -> Any:
    """One BackendClient per process (an httpx pool must not be shared across fork)."""
    global _client, _client_pid
    if _client is None or _client_pid != os.getpid():
        _client = BackendClient(settings.backend_url, settings.token)
        _client_pid = os.getpid()
    return _client


def _detect_in_child() -> dict[str, Any] | None:
    """capabilities.detect() in a fresh interpreter: it creates a namespace (pyroute2 forks), which
    must not happen in a process whose other threads may hold locks. None if it fails."""
    env = {**os.environ, "QOELAB_KVM": "0"}  # the KVM verdict of the start is kept
    try:
        out = subprocess.run(
            [sys.executable, "-m", "qoelab.cli", "capabilities", "--json"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (subprocess.SubprocessError, OSError, ValueError) as err:
        log.warning("re-detecting capabilities failed: %s", err)
        return None


def host_facts(refresh: bool = False) -> dict[str, Any]:
    """Host facts for the heartbeat and provenance; probed at start, re-probed every few minutes."""
    global _facts, _facts_at
    if refresh or not _facts:
        facts: dict[str, Any] | None = capabilities.detect()
    elif time.monotonic() - _facts_at > CAPABILITY_REFRESH_S:
        facts = _detect_in_child()
        if facts is not None:
            facts["capabilities"]["kvm"] = _facts["capabilities"].get("kvm", False)
            facts["reasons"].pop("kvm", None)
            if "kvm" in _facts.get("reasons", {}):
                facts["reasons"]["kvm"] = _facts["reasons"]["kvm"]
    else:
        return _facts
    if facts is not None:
        facts["name"] = settings.name
        _facts = facts
    _facts_at = time.monotonic()
    return _facts


def heartbeat_body(running: list[str]) -> dict[str, Any]:
    facts = host_facts()
    return {
        "name": settings.name,
        "kernel": facts["kernel"],
        "capabilities": facts["capabilities"],
        "queues": [settings.queue],
        "concurrency": settings.concurrency,
        "versions": facts["versions"],
        "running": [int(t) if t.isdigit() else t for t in running],
    }


def send_heartbeat() -> dict[str, Any]:
    running, dead, _ = scan_markers()
    # A lost run stays listed until the reaper has cleaned it up and reported why it ended, so the
    # backend neither guesses the reason nor hands the trial out again while its leftovers exist.
    lost = [str(info.get("trial")) for _, info in dead if info.get("prefix")]
    return backend_client().heartbeat(heartbeat_body(sorted(set(running) | set(lost))))


class HeartbeatThread(threading.Thread):
    """Beats every ``interval``; hands dead markers to a reaper thread so a slow cleanup never
    delays a heartbeat (the backend would declare the whole host lost)."""

    def __init__(self, interval: float = HEARTBEAT_INTERVAL_S) -> None:
        super().__init__(name="qoelab-heartbeat", daemon=True)
        self.interval = interval
        self.stop_event = threading.Event()
        self.reaper: threading.Thread | None = None

    def _reap(self) -> None:
        try:
            reap_dead_markers(backend_client(), "the worker process running this trial died")
        except Exception as err:
            log.error("reaping lost trials failed: %s: %s", type(err).__name__, err)

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                if scan_markers()[1] and (self.reaper is None or not self.reaper.is_alive()):
                    self.reaper = threading.Thread(target=self._reap, name="qoelab-reaper", daemon=True)
                    self.reaper.start()
                send_heartbeat()
            except Exception as err:  # keep beating; the backend may be restarting
                log.warning("heartbeat failed: %s", err)
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()


_heartbeat: HeartbeatThread | None = None
_started = False


def startup() -> dict[str, Any]:
    """Before consuming: clean what a killed predecessor left, then announce this host.

    Raises QoelabError (unreachable backend, refused token) so ``qoelab worker`` can say so.
    """
    global _started
    try:
        settings.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise QoelabError(f"cannot create the work dir {settings.workdir}: {err.strerror or err}") from None
    base = prefix_base(settings.name)
    claim_prefix_base(base)  # before the clean-up below, which removes everything under the base
    try:
        runner.cleanup_prefix(base)
    except QoelabError as err:  # without CAP_NET_ADMIN there is nothing of ours to clean
        log.warning("start-up cleanup of %s* skipped: %s", base, err)
    facts = host_facts(refresh=True)
    for cap, why in sorted(facts["reasons"].items()):
        log.info("capability %s: no (%s)", cap, why)
    log.info(
        "capabilities: %s", ", ".join(k for k, v in sorted(facts["capabilities"].items()) if v) or "none"
    )
    client = backend_client()
    reap_dead_markers(client, "the worker was restarted while the trial ran")
    for stale in settings.workdir.glob("trial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    answer = client.heartbeat(heartbeat_body([]))
    log.info("registered with %s as %s, consuming %s", settings.backend_url, settings.name, settings.queue)
    _started = True
    return answer


@signals.worker_init.connect
def _on_worker_init(**_: Any) -> None:
    if not _started:  # started with `celery -A qoelab.celery_app worker` rather than `qoelab worker`
        startup()


@signals.worker_ready.connect
def _on_worker_ready(**_: Any) -> None:
    global _heartbeat
    _heartbeat = HeartbeatThread()
    _heartbeat.start()


@signals.worker_shutdown.connect
def _on_worker_shutdown(**_: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()


# --- the task -------------------------------------------------------------------------------


@app.task(name="qoelab.run_trial", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_trial(trial_id: int) -> str:
    """Claim and run one trial. The outcome goes to the backend, not to a Celery result."""
    marker = _write_marker(trial_id)
    try:
        client = backend_client()
        claim = client.claim(trial_id)
        if claim is None:
            log.info("trial %s: no longer queued for %s; this delivery exits", trial_id, settings.name)
            return "not-claimed"
        # The backend's claim carries no prefix: names on this host are this worker's business.
        claim = {**claim, "prefix": new_trial_prefix(settings.name)}
        info = {
            **json.loads(marker.read_text()),
            "prefix": claim["prefix"],
            "attempt": claim.get("attempt"),
        }
        _write_json(marker, info)
        return runner.run_trial(claim, settings.workdir, client, host_facts=host_facts())
    finally:
        with contextlib.suppress(OSError):
            marker.unlink()
