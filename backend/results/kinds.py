"""Artifact kinds: what each kind's bytes must look like, how large it may be, how it is served.

A worker names the kind of every file it uploads. The kind, checked against the file's first bytes
at upload, decides everything about serving: the content type (never guessed from the uploaded
name, so a "video" named ``evil.html`` is refused at upload, and anything stored before this check
is still served as its kind), ``X-Content-Type-Options: nosniff``, a sandboxing CSP, and
``Content-Disposition: attachment`` except for media a page plays (the evaluator's videos).

To add a kind: one ``Kind`` line in ``KINDS`` (and the worker's ``ctx.add_artifact(path, "<kind>")``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import FileResponse

MiB = 1024**2
GiB = 1024**3
HEAD_BYTES = 64  # every rule looks at most this far into the file
OCTET_STREAM = "application/octet-stream"
# A stored file is never a page: if a browser were ever made to render one, nothing in it runs.
FILE_CSP = "default-src 'none'; sandbox"

PCAP_MAGICS = (b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
PCAPNG_BLOCK = b"\x0a\x0d\x0d\x0a"
PCAPNG_BYTE_ORDER = (b"\x1a\x2b\x3c\x4d", b"\x4d\x3c\x2b\x1a")
EBML_MAGIC = b"\x1a\x45\xdf\xa3"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _video(head: bytes) -> str | None:
    if head.startswith(EBML_MAGIC):
        return "video/webm"
    if head[4:8] == b"ftyp":
        return "video/mp4"
    return None


def _pcap(head: bytes) -> str | None:
    if head[:4] in PCAP_MAGICS:
        return "application/vnd.tcpdump.pcap"
    if head[:4] == PCAPNG_BLOCK and head[8:12] in PCAPNG_BYTE_ORDER:
        return "application/x-pcapng"
    return None


def _png(head: bytes) -> str | None:
    return "image/png" if head.startswith(PNG_MAGIC) else None


def _json(head: bytes) -> str | None:
    return "application/json" if head.lstrip()[:1] in (b"{", b"[") else None


def _text(head: bytes) -> str | None:
    # Logs are whatever a tool printed (a guest's serial console too): any bytes, shown as text.
    return "text/plain; charset=utf-8"


def _binary(head: bytes) -> str | None:
    return OCTET_STREAM


@dataclass(frozen=True)
class Kind:
    name: str
    expected: str  # what a refusal says the file must be
    max_bytes: int  # also capped by QOELAB_MAX_ARTIFACT_BYTES
    sniff: Callable[[bytes], str | None]  # first bytes -> content type, None when they do not fit
    inline: bool = False  # played inside a page (the evaluator's <video>), not downloaded

    def limit(self) -> int:
        return min(self.max_bytes, settings.QOELAB_MAX_ARTIFACT_BYTES)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("video", "WebM (EBML magic 1A 45 DF A3) or MP4 (ftyp box at offset 4)", 2 * GiB, _video, True),
        Kind("pcap", "a pcap (magic A1 B2 C3 D4 or A1 B2 3C 4D, any byte order) or pcapng", 2 * GiB, _pcap),
        Kind("image", "PNG (magic 89 50 4E 47 0D 0A 1A 0A)", 64 * MiB, _png),
        Kind("json", "JSON text (an object or an array)", 256 * MiB, _json),
        Kind("log", "text (any bytes, served as text/plain)", 256 * MiB, _text),
        Kind("file", "any bytes (served as application/octet-stream)", 256 * MiB, _binary),
    )
}


class ContentMismatch(ValueError):
    """``field`` and ``message`` in the API's error shape."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def get_kind(name: str) -> Kind:
    kind = KINDS.get(name)
    if kind is None:
        raise ContentMismatch("kind", f"unknown artifact kind {name!r}; one of {', '.join(KINDS)}")
    return kind


def max_upload_bytes(kind_name: str | None) -> int:
    """The largest file an upload may carry: the kind's limit, or the largest one when not declared."""
    if kind_name is not None:
        return get_kind(kind_name).limit()
    return max(k.limit() for k in KINDS.values())


def check_content(kind_name: str, head: bytes) -> str:
    """The content type of a file of this kind starting with ``head``; ContentMismatch if it is not one."""
    kind = get_kind(kind_name)
    ctype = kind.sniff(head[:HEAD_BYTES])
    if ctype is None:
        starts = head[:8].hex(" ").upper() or "nothing (empty)"
        raise ContentMismatch(
            "file", f"a {kind.name} artifact must be {kind.expected}; this file starts with {starts}"
        )
    return ctype


def served_type(kind_name: str, head: bytes) -> str:
    """The content type a stored file is served with: its kind's, or octet-stream when it does not fit
    (a file stored before kinds were checked, or of a kind no longer known)."""
    kind = KINDS.get(kind_name)
    return (kind.sniff(head[:HEAD_BYTES]) if kind else None) or OCTET_STREAM


def file_response(artifact: Any, *, inline: bool = False) -> FileResponse:
    """Stream a stored artifact with the content type of its kind; raises FileNotFoundError.

    ``inline`` (media a page plays) is only for a kind played in pages whose bytes fit it: otherwise
    ContentMismatch. Everything else is an attachment.
    """
    kind = KINDS.get(artifact.kind)
    handle = artifact.file.open("rb")
    head = handle.read(HEAD_BYTES)
    handle.seek(0)
    ctype = served_type(artifact.kind, head)
    if inline and (kind is None or not kind.inline or ctype == OCTET_STREAM):
        handle.close()
        raise ContentMismatch("file", f"artifact {artifact.pk} is not media a page can play")
    response = FileResponse(handle, content_type=ctype, as_attachment=not inline, filename=artifact.name)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = FILE_CSP
    return response
