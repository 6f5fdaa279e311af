"""Issue 14, findings 1 and 6: an artifact's kind is checked against its bytes at upload, every stored
file is served with its kind's content type (never its name's), and an upload is refused on its
trial's ownership and its declared size before its body is read.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from django.urls import reverse

from results.models import Artifact

pytestmark = pytest.mark.django_db

HTML = b"<!doctype html><html><body><script>fetch('/api/auth/token/')</script></body></html>"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.cookie)"/>'
PCAP = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + struct.pack("<IIII", 0, 0, 4, 4) + b"abcd"
PCAPNG = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)


@pytest.fixture(scope="session")
def media_files(tmp_path_factory: Any) -> dict[str, Path]:
    """Real files of each format, made by the tools the workers use (ffmpeg, Pillow)."""
    from PIL import Image

    from ratings.demo import make_video

    d = tmp_path_factory.mktemp("upload-kinds")
    files = {"webm": make_video(d / "recording.webm", seconds=0.5, size="160x120")}
    mp4 = d / "clip.mp4"
    subprocess.run(
        [shutil.which("ffmpeg") or "ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
         "-i", "testsrc=size=160x120:rate=10:duration=0.5", "-c:v", "mpeg4", str(mp4)],
        check=True, timeout=120,
    )  # fmt: skip
    files["mp4"] = mp4
    Image.new("RGB", (8, 8), (200, 0, 200)).save(d / "server-screen.png")
    files["png"] = d / "server-screen.png"
    return files


@pytest.fixture
def running(sweep_of: Any, make_host: Any) -> tuple[Any, Any, Any]:
    """A trial running on host h1 (h2 is another host)."""
    h1 = make_host("h1", {"netem": True})
    h2 = make_host("h2", {"netem": True})
    trial = sweep_of().trials.order_by("index").first()
    trial.mark_queued(h1.host)
    assert h1.client.post(f"/api/hosts/trials/{trial.pk}/claim/", {}, format="json").status_code == 200
    return trial, h1, h2


def upload(lab: Any, trial: Any, data: bytes, kind: str, name: str, query_kind: str | None = None) -> Any:
    f = SimpleUploadedFile(name, data, content_type="application/octet-stream")
    body = {"file": f, "kind": kind, "sha256": hashlib.sha256(data).hexdigest()}
    url = f"/api/hosts/trials/{trial.pk}/artifacts/" + (f"?kind={query_kind}" if query_kind else "")
    return lab.client.post(url, body, format="multipart")


class Body(io.RawIOBase):
    """A request body that counts what the server read from it."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = io.BytesIO(data)
        self.consumed = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = self.data.read(-1 if size is None else size)
        self.consumed += len(chunk)
        return chunk

    def readline(self, size: int | None = -1) -> bytes:
        line = self.data.readline(-1 if size is None else size)
        self.consumed += len(line)
        return line


def raw_upload(lab: Any, trial_id: int, body: Body, length: str, query: str = "") -> Any:
    return lab.client.generic(
        "POST",
        f"/api/hosts/trials/{trial_id}/artifacts/{query}",
        b"-",
        content_type=MULTIPART_CONTENT,
        **{"wsgi.input": body, "CONTENT_LENGTH": length},
    )


def stored_files(media_root: Path) -> list[Path]:
    return [p for p in media_root.rglob("*") if p.is_file()] if media_root.exists() else []


# ---------------------------------------------------------------------------------------------
# Finding 1: the kind is checked against the content


@pytest.mark.parametrize(("name", "data"), [("evil.html", HTML), ("evil.svg", SVG)])
def test_a_video_that_is_a_web_page_is_refused_naming_the_field_and_the_format(
    running: Any, media_root: Path, name: str, data: bytes
) -> None:
    trial, h1, _ = running
    resp = upload(h1, trial, data, "video", name)
    assert resp.status_code == 400, resp.content
    (error,) = resp.json()["errors"]
    assert error["field"] == "file"
    assert "WebM" in error["message"] and "MP4" in error["message"] and "1A 45 DF A3" in error["message"]
    assert not Artifact.objects.exists() and stored_files(media_root) == []


def test_a_pcap_without_a_capture_header_is_refused(running: Any) -> None:
    trial, h1, _ = running
    resp = upload(h1, trial, HTML, "pcap", "capture.pcap")
    assert resp.status_code == 400
    assert resp.json()["errors"][0]["field"] == "file" and "pcapng" in resp.json()["errors"][0]["message"]


def test_an_unknown_kind_is_refused_naming_the_kinds(running: Any) -> None:
    trial, h1, _ = running
    resp = upload(h1, trial, HTML, "page", "evil.html")
    assert resp.status_code == 400
    (error,) = resp.json()["errors"]
    assert error["field"] == "kind" and "video" in error["message"] and "pcap" in error["message"]


@pytest.mark.parametrize(
    ("kind", "name", "source"),
    [
        ("video", "recording.webm", "webm"),
        ("video", "clip.mp4", "mp4"),
        ("image", "server-screen.png", "png"),
        ("pcap", "capture.pcap", PCAP),
        ("pcap", "capture.pcapng", PCAPNG),
        ("json", "result.json", b'\n{"updates": []}\n'),
        ("log", "qemu.err", b"qemu: \x1b[1mwarning\x1b[0m \xff\xfe binary console bytes\n"),
        ("file", "odd.bin", b"\x00\x01anything"),
    ],
)
def test_every_kind_the_workers_upload_is_accepted(
    running: Any, media_files: dict[str, Path], kind: str, name: str, source: Any
) -> None:
    trial, h1, _ = running
    data = media_files[source].read_bytes() if isinstance(source, str) else source
    resp = upload(h1, trial, data, kind, name, query_kind=kind)
    assert resp.status_code == 201, resp.content
    assert Artifact.objects.get(pk=resp.json()["id"]).kind == kind


def test_a_long_non_ascii_name_is_stored_cut_to_the_file_systems_limit(running: Any) -> None:
    """Issue 33: 200 non-ASCII characters are 400 UTF-8 bytes, past a file name's 255: a 500."""
    trial, h1, _ = running
    name = "é" * 199 + ".json"  # 203 characters, 403 bytes
    resp = upload(h1, trial, b'{"a": 1}\n', "json", name, query_kind="json")
    assert resp.status_code == 201, resp.content
    art = Artifact.objects.get(pk=resp.json()["id"])
    stored = Path(art.file.name).name
    assert len(stored.encode()) <= 255 and stored.endswith(".json") and stored.startswith("é")
    assert art.name == "é" * 195 + ".json" and art.file.read() == b'{"a": 1}\n'


def test_the_kind_in_the_url_must_be_the_kind_in_the_form(running: Any) -> None:
    trial, h1, _ = running
    resp = upload(h1, trial, PCAP, "pcap", "capture.pcap", query_kind="video")
    assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "kind"


# ---------------------------------------------------------------------------------------------
# Finding 1: serving


def _legacy(trial: Any, kind: str, name: str, data: bytes) -> Artifact:
    """An artifact stored before kinds were checked (the issue's probe left such files behind)."""
    art = Artifact(trial=trial, kind=kind, name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    art.file.save(name, ContentFile(data), save=True)
    return art


def _assert_safe_download(resp: Any, ctype: str, name: str) -> None:
    assert resp.status_code == 200
    assert resp["Content-Type"] == ctype
    assert resp["Content-Disposition"].startswith("attachment") and name in resp["Content-Disposition"]
    assert resp["X-Content-Type-Options"] == "nosniff"
    assert (
        "sandbox" in resp["Content-Security-Policy"]
        and "default-src 'none'" in resp["Content-Security-Policy"]
    )


def test_downloads_carry_the_kinds_type_never_the_names(
    running: Any, alice: Any, client_for: Any, api_client_for: Any
) -> None:
    trial, _, _ = running
    cases = [
        (_legacy(trial, "video", "evil.html", HTML), "application/octet-stream"),
        (_legacy(trial, "image", "evil.svg", SVG), "application/octet-stream"),
        (_legacy(trial, "log", "evil.html", HTML), "text/plain; charset=utf-8"),
        (_legacy(trial, "pcap", "evil.html", PCAP), "application/vnd.tcpdump.pcap"),
        (_legacy(trial, "json", "result.html", b'{"a": 1}'), "application/json"),
        (_legacy(trial, "capture", "old.html", HTML), "application/octet-stream"),  # a kind no longer known
    ]
    page, api = client_for(alice), api_client_for(alice)
    for art, ctype in cases:
        _assert_safe_download(page.get(f"/artifacts/{art.pk}/download/"), ctype, art.name)
        _assert_safe_download(api.get(f"/api/artifacts/{art.pk}/download/"), ctype, art.name)


@pytest.fixture
def evaluator_condition(alice: Any, media_files: dict[str, Path]) -> tuple[Any, str, int]:
    """An open recorded campaign and one evaluator at their first condition: (condition, token, id)."""
    from ratings import campaigns, demo, flow, invitations
    from ratings.models import Condition

    sweep = demo.demo_sweep(
        alice, [{"protocol": "vnc", "rate": "1mbit"}, {"protocol": "vnc", "rate": "2mbit"}]
    )
    for trial in sweep.trials.all():
        demo.add_video_artifact(trial, media_files["webm"], reference=True)
        demo.add_video_artifact(trial, media_files["webm"])
    campaign = campaigns.open_campaign(campaigns.create_campaign(alice, name="c", sweep=sweep, seed=1))
    ((evaluator, token),) = invitations.invite(campaign, count=1)
    flow.open_link(evaluator)
    flow.give_consent(evaluator)
    evaluator.refresh_from_db()
    pk = evaluator.current_condition_id()
    return Condition.objects.get(pk=pk), token, pk


def test_the_evaluators_video_plays_inline_with_the_type_of_its_bytes(
    evaluator_condition: Any, media_files: dict[str, Path]
) -> None:
    from ratings.models import Condition

    cond, token, pk = evaluator_condition
    # A real WebM uploaded under a page's name is still a WebM: the name decides nothing.
    webm = _legacy(cond.recording.trial, "video", "evil.html", media_files["webm"].read_bytes())
    Condition.objects.filter(pk=pk).update(recording=webm)
    resp = Client().get(reverse("ratings_rate:media", args=[token, pk, "degraded"]))
    assert resp.status_code == 200
    assert resp["Content-Type"] == "video/webm" and resp["Content-Disposition"].startswith("inline")
    assert resp["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(("name", "data"), [("evil.html", HTML), ("evil.svg", SVG)])
def test_a_stored_video_that_is_a_web_page_is_never_served_to_the_evaluator(
    evaluator_condition: Any, name: str, data: bytes
) -> None:
    from ratings.models import Condition

    cond, token, pk = evaluator_condition
    evil = _legacy(cond.recording.trial, "video", name, data)
    Condition.objects.filter(pk=pk).update(recording=evil)
    resp = Client().get(reverse("ratings_rate:media", args=[token, pk, "degraded"]))
    assert resp.status_code == 404
    assert b"<script" not in resp.content and b"onload" not in resp.content


# ---------------------------------------------------------------------------------------------
# Finding 6: refused before the body is read


def test_an_upload_declaring_more_than_any_kind_allows_is_refused_unread(running: Any, settings: Any) -> None:
    trial, h1, _ = running
    body = Body(b"--truncated")
    resp = raw_upload(h1, trial.pk, body, str(50 * 1024**3))
    assert resp.status_code == 413, resp.content
    assert resp.json()["errors"][0]["field"] == "file" and str(50 * 1024**3) in resp.json()["detail"]
    assert body.consumed == 0


def test_the_declared_kinds_own_limit_applies_before_the_body_is_read(running: Any) -> None:
    trial, h1, _ = running
    body = Body(b"--truncated")
    resp = raw_upload(h1, trial.pk, body, str(300 * 1024**2), query="?kind=log")  # a log: 256 MiB at most
    assert resp.status_code == 413 and "a log is at most 268435456 bytes" in resp.json()["detail"]
    assert body.consumed == 0
    assert raw_upload(h1, trial.pk, Body(), "10", query="?kind=page").status_code == 400


def test_an_upload_without_a_declared_length_is_refused_unread(running: Any) -> None:
    trial, h1, _ = running
    body = Body(b"--chunked")
    resp = raw_upload(h1, trial.pk, body, "")
    assert resp.status_code == 411 and "Content-Length" in resp.json()["detail"]
    assert body.consumed == 0


def test_another_hosts_upload_is_refused_before_its_body_is_read(running: Any, sweep_of: Any) -> None:
    trial, h1, h2 = running
    for lab, trial_id, status in ((h2, trial.pk, 409), (h1, trial.pk + 10_000, 404)):
        body = Body(b"x" * 1000)
        resp = raw_upload(lab, trial_id, body, str(50 * 1024**2))
        assert resp.status_code == status, resp.content
        assert body.consumed == 0
    queued = sweep_of().trials.order_by("index").first()  # queued for nobody, not running
    body = Body(b"x" * 1000)
    assert raw_upload(h1, queued.pk, body, str(50 * 1024**2)).status_code == 409
    assert body.consumed == 0


def test_a_file_past_its_limit_stops_the_upload_while_it_streams(
    running: Any, settings: Any, media_root: Path
) -> None:
    trial, h1, _ = running
    settings.QOELAB_MAX_ARTIFACT_BYTES = 100_000
    data = b"\xd4\xc3\xb2\xa1" + b"p" * 150_000  # over the limit, but within the form's slack
    payload = encode_multipart(
        BOUNDARY,
        {
            "kind": "pcap",
            "sha256": hashlib.sha256(data).hexdigest(),
            "file": SimpleUploadedFile("capture.pcap", data),
        },
    )
    body = Body(payload)
    resp = raw_upload(h1, trial.pk, body, str(len(payload)))
    assert resp.status_code == 413 and resp.json()["errors"][0]["field"] == "file"
    assert body.consumed < len(payload), "the parser stopped at the cap instead of reading the whole body"
    assert not Artifact.objects.exists() and stored_files(media_root) == []


def test_the_sha256_is_still_checked(running: Any) -> None:
    trial, h1, _ = running
    f = SimpleUploadedFile("capture.pcap", PCAP)
    body = {"file": f, "kind": "pcap", "sha256": "0" * 64}
    resp = h1.client.post(f"/api/hosts/trials/{trial.pk}/artifacts/?kind=pcap", body, format="multipart")
    assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "sha256"


def test_the_worker_client_declares_the_kind_so_the_backend_refuses_unread(
    live_server: Any, running: Any, settings: Any, tmp_path: Path
) -> None:
    from qoelab.client import BackendClient, BackendError

    trial, h1, _ = running
    worker = BackendClient(live_server.url, h1.token, retries=0)
    pcap = tmp_path / "capture.pcap"
    pcap.write_bytes(PCAP)
    assert worker.upload_artifact(trial.pk, pcap, "pcap")["size"] == len(PCAP)
    settings.QOELAB_MAX_ARTIFACT_BYTES = 10_000
    big = tmp_path / "trial.log"
    big.write_bytes(b"line\n" * 200_000)  # 1 MB
    with pytest.raises(BackendError) as exc:
        worker.upload_artifact(trial.pk, big, "log")
    assert exc.value.status == 413 and "a log is at most 10000 bytes" in str(exc.value)
