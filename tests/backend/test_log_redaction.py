"""No credential in any log line: evaluator link tokens, token= values and Authorization headers are
redacted by the handlers settings.LOGGING installs; the demo's logs are 0600 and its worker gets its
token by environment, not on the command line."""

from __future__ import annotations

import io
import logging
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOKEN = "Zk3xQ9_vbN2-hLr8TqW4mYc6aPd0sEf1gHj5kLo7uIy"  # the shape of secrets.token_urlsafe(32)


@pytest.fixture
def web_log():
    """What the configured handlers (root console, django.server) write, as text."""
    from qoelab_web.logredact import RedactTokens

    handlers = [
        h
        for name in ("", "django.server")
        for h in logging.getLogger(name).handlers
        if any(isinstance(f, RedactTokens) for f in h.filters)
    ]
    assert len(handlers) == 2, "the root console and django.server handlers must both redact"
    buf = io.StringIO()
    old = [h.setStream(buf) for h in handlers]
    yield buf
    for h, stream in zip(handlers, old, strict=True):
        h.setStream(stream)


@pytest.mark.django_db
def test_an_evaluator_token_on_a_4xx_never_reaches_the_log(client, web_log):
    assert client.get(f"/rate/{TOKEN}/").status_code >= 400
    assert client.get(f"/rate/{TOKEN}/media/1/degraded/").status_code >= 400
    logged = web_log.getvalue()
    assert "/rate/[redacted]/" in logged, logged
    assert TOKEN not in logged


def test_the_dev_server_s_request_line_is_redacted(web_log):
    logging.getLogger("django.server").warning('"%s" %s %s', f"GET /rate/{TOKEN}/ HTTP/1.1", 404, 179)
    assert TOKEN not in web_log.getvalue() and "/rate/[redacted]/" in web_log.getvalue()


@pytest.mark.parametrize(
    "message",
    [
        f"GET /api/sweeps/?token={TOKEN}&x=1",
        f"invite link: https://lab.example/rate/{TOKEN}",
        f"header Authorization: Token {TOKEN}",
        f"Authorization: Host {TOKEN}",
        f"Authorization: Evaluator {TOKEN}",
        f"api_token={TOKEN} password={TOKEN}",
    ],
)
def test_every_shape_of_credential_in_a_message_or_its_args_is_redacted(message, web_log):
    logging.getLogger("qoelab.test").warning("%s", message)
    logging.getLogger("qoelab.test").warning(message.replace("%", "%%"))
    logged = web_log.getvalue()
    assert TOKEN not in logged and logged.count("[redacted]") >= 2, logged


def test_ordinary_lines_are_left_alone():
    from qoelab_web.logredact import redact

    for line in ("GET /api/rate/state/ 200", "trial 12 finished in 3.2 s", "POST /api/auth/token/ 400"):
        assert redact(line) == line


def test_gunicorn_s_own_handlers_get_the_filter():
    from qoelab_web.logredact import RedactTokens, install_on_loggers

    log = logging.getLogger("gunicorn.error.test")
    buf = io.StringIO()
    log.addHandler(logging.StreamHandler(buf))
    log.propagate = False
    try:
        install_on_loggers("gunicorn.error.test")
        log.error("Error handling request %s", f"/rate/{TOKEN}/")
        assert TOKEN not in buf.getvalue() and isinstance(log.handlers[0].filters[0], RedactTokens)
    finally:
        log.handlers.clear()


def test_the_demo_writes_its_logs_0600_and_passes_the_host_token_by_environment(tmp_path):
    name = f"redaction-test-{tmp_path.name}"
    script = f"""
        source scripts/demo.sh
        QOELAB_HOST_TOKEN=sekrit-token launch {name} sh -c 'echo "token=$QOELAB_HOST_TOKEN"'
        wait
        stat -c %a "$LOGS/{name}.log"; cat "$LOGS/{name}.log"; rm -f "$LOGS/{name}.log" "$RUN/{name}.pid"
    """
    out = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    mode, logged = out.stdout.split("\n", 1)
    assert mode == "600"
    assert "token=sekrit-token" in logged  # the environment reached the process ...
    demo = (REPO / "scripts" / "demo.sh").read_text()
    worker_lines = [line for line in demo.splitlines() if "qoelab worker" in line or "sweep run" in line]
    # ... argv does not (nor the broker URL, which carries the password of a Redis the lab started)
    assert worker_lines and not any("--token" in line or "--broker" in line for line in worker_lines)
