"""Small real recordings and a sweep-shaped set of trials, for the demo command and the tests.

Until the ``rd_qoe`` job type records the client display, a campaign in recorded mode needs
videos from somewhere: ``make_video`` renders a short test pattern with ffmpeg (VP8 WebM, which
Debian's Chromium plays) and ``add_video_artifact`` stores it as a trial artifact of kind
``video``, exactly as a worker upload would. Nothing here invents measurements: trials made by
``demo_sweep`` carry no link verification unless the caller passes one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

from django.core.files import File
from django.utils import timezone

from experiments import jobtypes
from experiments.choices import TrialStatus
from experiments.models import Experiment, Sweep, Trial
from ratings.campaigns import REFERENCE_PREFIX, VIDEO_KIND
from results.models import Artifact


class FfmpegMissing(RuntimeError):
    pass


def make_video(path: Path, *, degraded: bool = False, seconds: float = 2.0, size: str = "800x600") -> Path:
    """A ``seconds`` long test pattern; ``degraded`` drops to 4 frames/s at a low bitrate (choppy)."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise FfmpegMissing("ffmpeg is needed to make test recordings: apt-get install -y ffmpeg")
    rate = 4 if degraded else 25
    bitrate = "60k" if degraded else "400k"
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", f"testsrc=size={size}:rate={rate}:duration={seconds}",
        "-c:v", "libvpx", "-b:v", bitrate, "-deadline", "realtime", "-cpu-used", "8",
        "-pix_fmt", "yuv420p", str(path),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not path.exists():
        raise RuntimeError(f"ffmpeg failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return path


def add_video_artifact(trial: Trial, path: Path, *, reference: bool = False) -> Artifact:
    """Store ``path`` as a ``video`` artifact of ``trial`` (name ``reference-...`` for the reference)."""
    data = path.read_bytes()
    name = f"{REFERENCE_PREFIX}-{path.name}" if reference else path.name
    artifact = Artifact(
        trial=trial,
        attempt=max(trial.attempts, 1),
        kind=VIDEO_KIND,
        name=name,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    with path.open("rb") as fh:
        artifact.file.save(name, File(fh), save=False)
    artifact.save()
    return artifact


def demo_sweep(
    owner: Any,
    points: list[dict[str, Any]],
    *,
    name: str = "ratings demo",
    job_type: str = "rd_qoe",
    links: list[dict[str, Any] | None] | None = None,
) -> Sweep:
    """An experiment and sweep with one succeeded trial per point (params as written, resolved by the
    job type's parameter model as a real sweep's are: the sweep page's findings read SI values).

    ``links[i]`` is stored as trial i's link verification (e.g. ``{"measured": {"tcp_down_bps": ...}}``).
    """
    experiment, _ = Experiment.objects.get_or_create(owner=owner, name=name, defaults={"job_type": job_type})
    keys = list(dict.fromkeys(k for p in points for k in p))
    grid = {k: list(dict.fromkeys(p.get(k) for p in points)) for k in keys}
    sweep = Sweep.objects.create(
        experiment=experiment,
        name=f"{name} sweep",
        job_type=job_type,
        grid=grid,
        grid_order=keys,
        seed=1,
        trial_count=len(points),
        created_by=owner,
    )
    now = timezone.now()
    job = jobtypes.get_job(job_type)
    for i, p in enumerate(points):
        Trial.objects.create(
            sweep=sweep,
            index=i,
            params=p,
            resolved=job.params.model_validate(p).model_dump(mode="json") if job else p,
            status=TrialStatus.SUCCEEDED,
            attempts=1,
            started_at=now,
            finished_at=now,
            link=(links[i] if links and links[i] else {}),
        )
    return sweep


def attach_demo_videos(sweep: Sweep, workdir: Path) -> None:
    """A reference and a degraded recording for every trial of the sweep (rendered once, stored per trial)."""
    ref = make_video(workdir / "reference.webm")
    deg = make_video(workdir / "degraded.webm", degraded=True)
    for trial in sweep.trials.all():
        add_video_artifact(trial, ref, reference=True)
        add_video_artifact(trial, deg)
