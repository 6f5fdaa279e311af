"""The client's retry policy against a real (deliberately flaky) HTTP server on localhost."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from qoelab.client import ApiClient, BackendClient, BackendError, BackendUnreachable


class Flaky(ThreadingHTTPServer):
    """Answers 503 ``failures`` times, then 200 ``{"ok": true}``; counts the requests."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests: list[tuple[str, str, str]] = []
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Flaky

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.requests.append((self.command, self.path, self.headers.get("Authorization", "")))
        failing = len(self.server.requests) <= self.server.failures
        body = json.dumps({"detail": "busy"} if failing else {"ok": True}).encode()
        self.send_response(503 if failing else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky(request: pytest.FixtureRequest) -> Iterator[Flaky]:
    server = Flaky(getattr(request, "param", 2))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_heartbeat_is_retried_through_server_errors(flaky: Flaky) -> None:
    sleeps: list[float] = []
    client = BackendClient(flaky.url, "tok", retries=3, sleep=sleeps.append)
    assert client.heartbeat({"name": "x"}) == {"ok": True}
    assert len(flaky.requests) == 3
    assert flaky.requests[0] == ("POST", "/api/hosts/heartbeat/", "Host tok")
    assert len(sleeps) == 2 and all(0 <= s <= 15 for s in sleeps)


def test_finish_is_retried_because_repeating_it_is_harmless(flaky: Flaky) -> None:
    client = BackendClient(flaky.url, "tok", retries=3, sleep=lambda s: None)
    assert client.finish(7, "succeeded") == {"ok": True}
    assert [r[1] for r in flaky.requests] == ["/api/hosts/trials/7/finish/"] * 3


def test_a_claim_is_never_retried_after_the_server_saw_it(flaky: Flaky) -> None:
    client = BackendClient(flaky.url, "tok", retries=3, sleep=lambda s: None)
    with pytest.raises(BackendError) as exc:
        client.claim(7)
    assert exc.value.status == 503
    assert len(flaky.requests) == 1


def test_researcher_gets_are_retried_and_use_the_api_token(flaky: Flaky) -> None:
    client = ApiClient(flaky.url, "abc", retries=3, sleep=lambda s: None)
    assert client.get("/api/sweeps/1/") == {"ok": True}
    assert flaky.requests[-1] == ("GET", "/api/sweeps/1/", "Token abc")


@pytest.mark.parametrize("flaky", [10], indirect=True)
def test_retries_are_bounded(flaky: Flaky) -> None:
    client = BackendClient(flaky.url, "tok", retries=2, sleep=lambda s: None)
    with pytest.raises(BackendError, match="HTTP 503"):
        client.heartbeat({})
    assert len(flaky.requests) == 3


def test_a_refused_connection_is_retried_then_named_with_the_url() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    client = BackendClient(f"http://127.0.0.1:{port}", "tok", retries=2, sleep=sleeps.append)
    with pytest.raises(BackendUnreachable, match=rf"^cannot reach the backend at http://127.0.0.1:{port}: "):
        client.claim(1)  # even a claim: the request never left this host
    assert len(sleeps) == 2
