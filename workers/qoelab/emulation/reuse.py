"""Verify a link condition fully once per worker host, then check it briefly on later trials.

A full verification (``verify.verify_link``: pings, a TCP test each way, UDP loss probes) costs
7-10 s, as much as a quick trial's clicks. It measures the emulator, not the trial, and the
emulator is the same code on the same host for every repetition of a condition. So the first
trial of a condition on a host runs it in full and stores it under the host's work root; later
trials within ``max_age_s`` run a short check (a burst of pings: the link is up and its RTT is the
condition's) and carry the full verification they rely on in ``reused``. A short check that
fails, a stored verification that failed, or one that is too old, means a full run again.

The key is everything that shapes the link's behaviour: both directions' rate, delay, jitter,
loss and queue, the MTU, the backend and the TCP settings read back in the namespaces. Not the
seed: it picks which packets are lost, not how many.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from qoelab import __version__
from qoelab.emulation import verify

if TYPE_CHECKING:
    from qoelab.emulation.topology import EmulatedLink

log = logging.getLogger("qoelab.emulation")
VerifyMode = Literal["every", "once"]
MAX_AGE_S = 3600.0
SHORT_PINGS = 10
SHORT_INTERVAL_S = 0.02


def condition_key(link: EmulatedLink, duration_s: float) -> str:
    """A stable digest of what the link emulates (not its seed, not its names)."""
    profile = link.profile.to_json()
    profile.pop("seed", None)
    tcp = {k: v for k, v in (link.tcp or {}).items() if k != "sources"}
    blob = {
        "profile": profile,
        "backend": link.backend,
        "tcp": tcp,
        "duration_s": duration_s,
        "qoelab": __version__,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _load(path: Path, max_age_s: float) -> dict[str, Any] | None:
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    age = time.time() - float(stored.get("started_at") or 0)
    if not stored.get("ok") or not 0 <= age <= max_age_s:
        return None
    return stored


def _store(path: Path, verification: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(verification, default=str))
    os.replace(tmp, path)  # atomic: a second worker slot on the host reads all or nothing


def short_check(link: EmulatedLink, full: dict[str, Any], key: str) -> dict[str, Any]:
    """Pings only: the link is up and its idle RTT is the configured one (the full run's tolerance)."""
    started = time.time()
    out = link.run_in("client", verify._ping_argv(link, SHORT_PINGS, SHORT_INTERVAL_S), timeout=30)
    rtt = verify._rtt_stats(verify.parse_ping(out.stdout), SHORT_PINGS)
    conf = verify._configured(link)
    checks = verify._checks(conf, {"rtt_ms": rtt["median"]}, {})
    if rtt["median"] is None:
        checks.append(verify._check("rtt_ms", False, conf["rtt_ms"], None, "a reply"))
    return {
        "mode": "short",
        "backend": link.backend,
        "backend_reason": link.backend_reason,
        "link": link.describe(),
        "configured": conf,
        "measured": {"rtt_ms": rtt["median"], "rtt_idle": rtt},
        "checks": checks,
        "ok": all(c["ok"] for c in checks),
        "method": {"ping_count": SHORT_PINGS, "ping_interval_s": SHORT_INTERVAL_S},
        "reused": {
            "key": key,
            "host": full.get("host"),
            "started_at": full.get("started_at"),
            "age_s": round(started - float(full["started_at"]), 1),
            "measured": full["measured"],
            "expected": full.get("expected"),
            "checks": full["checks"],
            "method": full.get("method"),
        },
        "tools": full.get("tools", {}),
        "started_at": started,
        "elapsed_s": time.time() - started,
    }


def verify_condition(
    link: EmulatedLink,
    duration_s: float,
    store_dir: Path | None,
    mode: VerifyMode = "once",
    max_age_s: float = MAX_AGE_S,
) -> dict[str, Any]:
    """The trial's link verification: full, or a short check leaning on a recent full one."""
    key = condition_key(link, duration_s)
    path = store_dir / f"{key}.json" if store_dir is not None else None
    if mode == "once" and path is not None:
        full = _load(path, max_age_s)
        if full is not None:
            short = short_check(link, full, key)
            if short["ok"]:
                return short
            log.warning("%s: short link check failed (%s): verifying in full", link.prefix,
                        [c for c in short["checks"] if not c["ok"]])  # fmt: skip
    result = verify.verify_link(link, duration_s=duration_s)
    result["mode"] = "full"
    result["host"] = socket.gethostname()
    if path is not None and result["ok"]:
        with contextlib.suppress(OSError):  # a read-only work root costs speed, not the trial
            _store(path, result)
    return result


def measured_or_reused(verification: dict[str, Any], name: str) -> Any:
    """A measured link value, from the short check or else from the full run it relies on."""
    value = verification.get("measured", {}).get(name)
    if value is None and "reused" in verification:
        value = verification["reused"]["measured"].get(name)
    return value
