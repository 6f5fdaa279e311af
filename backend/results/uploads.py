"""Bounding an artifact upload before its body is read, and while it streams.

The upload view decides ownership and the declared size (``Content-Length`` against the kind's
limit, the kind named in the query string) before anything touches ``request.data``; then
``CappedUpload``, first in the request's upload handlers, stops the multipart parser the moment
the file passes the cap (without draining the rest), so a body larger than its kind allows is
never written to disk in full.
"""

from __future__ import annotations

from typing import Any

from django.core.files.uploadhandler import FileUploadHandler, StopUpload

# The form's other fields (kind, sha256) and the part headers around the file.
MULTIPART_SLACK = 64 * 1024


class CappedUpload(FileUploadHandler):
    """Counts the uploaded file's bytes and stops the upload past ``cap`` (``exceeded`` says so)."""

    def __init__(self, request: Any, cap: int) -> None:
        super().__init__(request)
        self.cap = cap
        self.received = 0
        self.exceeded = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.cap:
            self.exceeded = True
            raise StopUpload(connection_reset=True)  # stop reading; do not drain the rest of the body
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler (memory or temporary file) makes the file


def declared_length_refusal(meta: dict[str, Any], cap: int, what: str) -> tuple[int, str] | None:
    """(status, message) when the request's declared length is missing or beyond ``cap`` + the form."""
    raw = str(meta.get("CONTENT_LENGTH") or "").strip()
    if not raw.isdigit():
        return 411, "the request must declare its Content-Length (chunked uploads are not accepted)"
    declared = int(raw)
    if declared > cap + MULTIPART_SLACK:
        return 413, (
            f"the request declares {declared} bytes (Content-Length); {what} is at most {cap} bytes "
            f"(QOELAB_MAX_ARTIFACT_BYTES), plus {MULTIPART_SLACK} for the form"
        )
    return None


def cap_request(request: Any, cap: int) -> CappedUpload:
    """Put a ``CappedUpload`` first in ``request``'s upload handlers (a Django HttpRequest, body unread)."""
    capped = CappedUpload(request, cap)
    request.upload_handlers = [capped, *request.upload_handlers]
    return capped
