"""HTTP clients for the backend: the lab host's (per-host token) and the researcher's (API token).

The worker never touches the database; everything goes through these calls (docs/architecture.md,
"Worker <-> backend protocol"). Only transient failures are retried, with exponential backoff and
jitter: a connection that was never established is retried for every call, while read timeouts
and 5xx answers are retried only for idempotent calls (heartbeat, finish, GETs), because a
claim or an upload whose answer was lost may already have taken effect.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

import qoelab
from qoelab.errors import QoelabError

log = logging.getLogger("qoelab.client")

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# Uploads of large pcaps stream for a while; only the gaps between chunks are bounded.
UPLOAD_TIMEOUT = httpx.Timeout(120.0, connect=10.0)


class BackendError(QoelabError):
    """The backend answered with an error; ``status`` is the HTTP status (0: unreachable)."""

    def __init__(self, message: str, status: int = 0, payload: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.payload = payload


class BackendUnreachable(BackendError):
    """No answer from the backend (connection refused, DNS, timeout) after the retries."""


def describe_body(resp: httpx.Response) -> str:
    """One line about an error answer: the status, then its JSON error or what kind of page it was.

    An HTML page (Django's or a proxy's error page) is never printed: a terminal full of markup
    hides the status, and its text is the server's, not ours to show.
    """
    reason = f"HTTP {resp.status_code} {resp.reason_phrase}".rstrip()
    ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json" or ctype.endswith("+json"):
        try:
            detail = describe_error_payload(resp.json())
            return f"{reason}: {detail}" if detail else reason
        except ValueError:
            pass
    text = resp.text.strip()
    if not text:
        return reason
    if "html" in ctype or "xml" in ctype or text.startswith("<"):
        return f"{reason} (an HTML page of {len(resp.content):,} bytes, not shown)"
    line = _one_line(text)
    return f"{reason}: {line[:200]}{'...' if len(line) > 200 else ''}"


def _one_line(text: str) -> str:
    """``text`` without control characters (a terminal escape from a server) on one line."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def describe_error_payload(payload: Any) -> str:
    """Flatten a DRF error body into one line naming the fields: ``grid.rate: must be at most ...``."""
    if isinstance(payload, str):
        return _one_line(payload)[:500]
    if isinstance(payload, list):
        return "; ".join(describe_error_payload(p) for p in payload)
    if isinstance(payload, dict):
        # qoelab's API puts the whole story in "detail" ("grid.loss[1]: must be at most 100 %").
        if isinstance(payload.get("detail"), str):
            return _one_line(payload["detail"])
        parts = []
        for key, value in payload.items():
            text = describe_error_payload(value)
            if key in ("detail", "non_field_errors"):
                parts.append(text)
            elif isinstance(value, dict):
                parts.append("; ".join(f"{key}.{p}" for p in text.split("; ")))
            else:
                parts.append(f"{key}: {text}")
        return "; ".join(parts)
    return str(payload)


class _Http:
    """An httpx client with the retry policy; subclasses set the Authorization header."""

    def __init__(
        self,
        base_url: str,
        authorization: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise QoelabError(f"the backend URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            headers={"Authorization": authorization, "User-Agent": f"qoelab/{qoelab.__version__}"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delay(self, attempt: int) -> float:
        # "Full jitter": spread many workers reconnecting after a backend restart.
        return random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt))

    def request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        ok: Iterable[int] = (200, 201, 204),
        make_kwargs: Callable[[], dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send with retries; return the response if its status is in ``ok`` or 4xx (caller decides).

        ``make_kwargs`` rebuilds per-attempt arguments (a file upload must reopen its file).
        """
        ok = tuple(ok)
        url = self.base_url + path
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                extra = make_kwargs() if make_kwargs else {}
                try:
                    resp = self._http.request(method, path, **kwargs, **extra)
                finally:
                    for f in extra.get("files", {}).values():
                        if isinstance(f, tuple) and hasattr(f[1], "close"):
                            f[1].close()
            except (httpx.ConnectError, httpx.ConnectTimeout) as err:
                # Nothing reached the server: safe to retry any call.
                if last:
                    raise BackendUnreachable(f"cannot reach the backend at {self.base_url}: {err}") from err
                log.info("%s %s: %s; retrying", method, url, err)
            except httpx.TransportError as err:
                if last or not idempotent:
                    raise BackendUnreachable(
                        f"the backend at {self.base_url} did not answer {method} {path}: "
                        f"{type(err).__name__}: {err}"
                    ) from err
                log.info("%s %s: %s; retrying", method, url, err)
            else:
                if resp.status_code in ok or 400 <= resp.status_code < 500:
                    return resp
                if last or not idempotent or resp.status_code < 500:
                    raise BackendError(
                        f"the backend answered {method} {path} with {describe_body(resp)}", resp.status_code
                    )
                log.info("%s %s: HTTP %s; retrying", method, url, resp.status_code)
            self._sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # the loop returns or raises

    @staticmethod
    def payload(resp: httpx.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            return resp.text

    def check(self, resp: httpx.Response, what: str) -> Any:
        """Return the JSON body of a 2xx answer; raise BackendError naming ``what`` otherwise."""
        body = self.payload(resp)
        if resp.status_code >= 400:
            if resp.status_code in (401, 403):
                msg = f"the backend refused the credentials for {what} (HTTP {resp.status_code})"
                detail = describe_body(resp) if isinstance(body, str) else describe_error_payload(body)
                raise BackendError(f"{msg}: {detail}" if detail else msg, resp.status_code, body)
            detail = describe_body(resp) if isinstance(body, str) else describe_error_payload(body)
            raise BackendError(f"{what} failed: {detail}", resp.status_code, body)
        return body


class BackendClient(_Http):
    """The lab host's side of the worker protocol, authenticated with ``Authorization: Host <token>``."""

    def __init__(self, base_url: str, token: str, **kwargs: Any) -> None:
        if not token:
            raise QoelabError("the per-host token is empty; create one with 'manage.py add_host NAME'")
        super().__init__(base_url, f"Host {token}", **kwargs)

    def heartbeat(self, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.request("POST", "/api/hosts/heartbeat/", json=body, idempotent=True)
        return self.check(resp, "the heartbeat")

    def claim(self, trial_id: int | str) -> dict[str, Any] | None:
        """The claim answer, or None when the trial is no longer ours (409: cancelled, redelivered)."""
        resp = self.request("POST", f"/api/hosts/trials/{trial_id}/claim/", json={}, idempotent=False)
        if resp.status_code == 409:
            log.info("trial %s: not claimed: %s", trial_id, describe_error_payload(self.payload(resp)))
            return None
        return self.check(resp, f"claiming trial {trial_id}")

    def upload_artifact(self, trial_id: int | str, path: Path, kind: str) -> dict[str, Any]:
        """Stream ``path`` as multipart with its sha256, so the backend can verify what it stored."""
        path = Path(path)
        digest = sha256_file(path)

        def files() -> dict[str, Any]:
            return {"files": {"file": (path.name, path.open("rb"), "application/octet-stream")}}

        resp = self.request(
            "POST",
            f"/api/hosts/trials/{trial_id}/artifacts/",
            params={"kind": kind},  # the backend checks the kind's size limit before reading the body
            data={"kind": kind, "sha256": digest},
            make_kwargs=files,
            idempotent=False,
            timeout=UPLOAD_TIMEOUT,
        )
        return self.check(resp, f"uploading {path.name} for trial {trial_id}") or {}

    def download_capture(self, trial_id: int | str, source_trial: int, dest: Path) -> None:
        """Save ``source_trial``'s packet capture, which running trial ``trial_id`` names as an input."""
        resp = self.request(
            "GET", f"/api/hosts/trials/{trial_id}/captures/{source_trial}/", idempotent=True,
            timeout=UPLOAD_TIMEOUT,
        )  # fmt: skip
        if resp.status_code >= 400:
            self.check(resp, f"fetching the capture of trial {source_trial}")
        Path(dest).write_bytes(resp.content)

    def fetch_link_trace(self, trial_id: int | str, trace_id: int) -> tuple[str, str]:
        """(file name, text) of uploaded trace ``trace_id``, which running trial ``trial_id`` names."""
        resp = self.request("GET", f"/api/hosts/trials/{trial_id}/link-traces/{trace_id}/", idempotent=True,
                            timeout=UPLOAD_TIMEOUT)  # fmt: skip
        if resp.status_code >= 400:
            self.check(resp, f"fetching uploaded trace {trace_id}")
        return resp.headers.get("X-Trace-Name") or f"upload-{trace_id}.trace", resp.text

    def live_report(self, trial_id: int | str, body: dict[str, Any]) -> dict[str, Any]:
        """A live session's report to the backend (its address, its end); the answer says what to do."""
        resp = self.request("POST", f"/api/hosts/trials/{trial_id}/live/", idempotent=True, json=body)
        return dict(self.check(resp, f"live session report of trial {trial_id}") or {})

    def finish(
        self,
        trial_id: int | str,
        status: str,
        error: str = "",
        result: dict[str, Any] | None = None,
        retryable: bool = False,
    ) -> dict[str, Any]:
        """Record the outcome. ``retryable``: a transient failure (lost process), worth another attempt."""
        body: dict[str, Any] = {"status": status, "error": error, "result": result or {}}
        if retryable:
            body["retryable"] = True
        # Repeating the same finish is a no-op on the backend, so it is safe to retry.
        resp = self.request("POST", f"/api/hosts/trials/{trial_id}/finish/", json=body, idempotent=True)
        return self.check(resp, f"finishing trial {trial_id}")


class ApiClient(_Http):
    """The researcher's REST client (DRF ``Authorization: Token <t>``), used by ``qoelab sweep``."""

    def __init__(self, base_url: str, api_token: str, **kwargs: Any) -> None:
        if not api_token:
            raise QoelabError(
                "no API token: pass --token or set QOELAB_API_TOKEN (your token is on your profile page)"
            )
        super().__init__(base_url, f"Token {api_token}", **kwargs)

    def get(self, path: str, **params: Any) -> Any:
        resp = self.request("GET", path, params=params or None, idempotent=True)
        return self.check(resp, f"GET {path}")

    def post(self, path: str, body: dict[str, Any], what: str) -> Any:
        resp = self.request("POST", path, json=body, idempotent=False)
        return self.check(resp, what)

    def get_all(self, path: str, **params: Any) -> list[Any]:
        """Follow DRF limit/offset pagination (``results`` + ``next``); accept plain lists too."""
        body = self.get(path, **params)
        if isinstance(body, list):
            return body
        items = list(body.get("results", []))
        while body.get("next"):
            nxt = httpx.URL(body["next"])
            resp = self.request("GET", nxt.raw_path.decode(), idempotent=True)
            body = self.check(resp, f"GET {path}")
            items.extend(body.get("results", []))
        return items


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
