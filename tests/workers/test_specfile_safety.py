"""Spec files a user writes, read safely (issue 14, findings 4 and 4b; docs/security.md).

Each hostile or mistaken file gets one sentence naming the file and the line, never a traceback,
and nothing that YAML allows but JSON or the parameters cannot carry slips through to the API.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from qoelab import jobs, specfile, sweeps
from qoelab.client import ApiClient, BackendError
from qoelab.emulation.profile import _parse_int
from qoelab.errors import ParameterError
from qoelab.params import ParamsInvalid, validate_params
from qoelab.units import parse_bytes, parse_duration, parse_percent, parse_rate, parse_size

QOELAB = Path(sys.executable).with_name("qoelab")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPEC_HEAD = "experiment: demo\njob_type: link_check\n"


def qoelab(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QOELAB_")}
    env.update(COLUMNS="100", QOELAB_LEFTOVER_PREFIX="qlxspec", QOELAB_KVM="0")
    return subprocess.run([str(QOELAB), *args], capture_output=True, text=True, env=env, timeout=60)


def one_sentence(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("qoelab: error: ") and len(lines[0]) < 300, lines[0]
    return lines[0]


def write(tmp_path: Path, content: str | bytes, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def billion_laughs(levels: int = 7) -> str:
    lines = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return SPEC_HEAD + "grid: {rate: [10mbit]}\nfixed:\n" + "\n".join(lines) + "\n"


HOSTILE = {
    "non_utf8": (b"experiment: demo\nname: caf\xe9\ngrid: {rate: [10mbit]}\n", ["line 2", "not UTF-8"]),
    "inf": (SPEC_HEAD + "grid:\n  rate: [10mbit, .inf]\n", ["line 4", ".inf is not a finite number"]),
    "nan": (SPEC_HEAD + "grid: {rate: [.nan]}\n", ["line 3", ".nan is not a finite number"]),
    "overflowing_float": (SPEC_HEAD + "fixed: {delay: 1.0e+999}\ngrid: {rate: [1mbit]}\n", ["finite"]),
    "deep": (
        SPEC_HEAD + "grid: {rate: [10mbit]}\nfixed: " + "[" * 5000 + "]" * 5000 + "\n",
        ["nested deeper"],
    ),
    "laughs": (billion_laughs(), ["expands to more than 100,000 values"]),
    "duplicate_key": (
        SPEC_HEAD + "grid: {rate: [10mbit]}\nrepetitions: 3\ngrid: {rate: [20mbit]}\n",
        ["line 5", "duplicate key 'grid' (first at line 3)"],
    ),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_sweep_run_names_each_problem_in_one_sentence(tmp_path: Path, case: str) -> None:
    content, needles = HOSTILE[case]
    spec = write(tmp_path, content)
    start = time.monotonic()
    line = one_sentence(qoelab("sweep", "run", str(spec), "--api", "http://127.0.0.1:9", "--token", "x"))
    assert time.monotonic() - start < 20  # refused before anything is expanded or sent
    assert str(spec) in line
    for needle in needles:
        assert needle in line, line


def test_a_billion_laughs_is_refused_before_it_expands() -> None:
    start = time.monotonic()
    with pytest.raises(specfile.SpecError, match=r"line \d+: expands to more than 100,000 values"):
        specfile.loads(billion_laughs(levels=9))
    assert time.monotonic() - start < 2


def test_aliases_are_limited_in_number_and_may_not_contain_themselves() -> None:
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * (specfile.MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(specfile.SpecError, match=r"line 2: more than 100 aliases"):
        specfile.loads(many)
    with pytest.raises(specfile.SpecError, match=r"line 1: alias \*a is inside the value it refers to"):
        specfile.loads("a: &a [1, *a]\n")


def test_a_document_of_more_values_than_the_limit_is_refused_without_aliases_too() -> None:
    with pytest.raises(specfile.SpecError, match=r"line 1: has more than 100,000 values$"):
        specfile.loads("grid: {rate: [" + "1," * specfile.MAX_VALUES + "]}")


def test_a_few_aliases_and_merge_keys_still_work() -> None:
    text = "base: &b {delay: 10ms, loss: 0%}\nfixed:\n  <<: *b\n  delay: 20ms\nagain: *b\n"
    assert specfile.loads(text) == {
        "base": {"delay": "10ms", "loss": "0%"},
        "fixed": {"delay": "20ms", "loss": "0%"},
        "again": {"delay": "10ms", "loss": "0%"},
    }


def test_nesting_is_bounded_also_through_aliases() -> None:
    ok = "a: " + "[" * 30 + "]" * 30
    assert specfile.loads(ok)
    chained = "a: &a " + "[" * 20 + "]" * 20 + "\nb: &b " + "[" * 20 + "*a" + "]" * 20 + "\n"
    with pytest.raises(specfile.SpecError, match=r"line 2: nested deeper than 32 levels through aliases"):
        specfile.loads(chained)


def test_a_duplicate_key_is_refused_at_any_depth_naming_key_and_line() -> None:
    with pytest.raises(specfile.SpecError, match=r"at line 3: duplicate key 'rate' \(first at line 2\)"):
        specfile.loads("grid:\n  rate: [1mbit]\n  rate: [2mbit]\n", "spec.yaml")


@pytest.mark.parametrize("key", ["on", "yes", "1", "null", "2.5"])
def test_a_key_that_is_not_a_name_must_be_quoted(key: str) -> None:
    with pytest.raises(
        specfile.SpecError, match=rf"line 2: the key '{re.escape(key)}' reads as .*: quote it"
    ):
        specfile.loads(f"fixed:\n  {key}: 1\n")
    assert specfile.loads(f"fixed:\n  '{key}': 1\n") == {"fixed": {key: 1}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name: "a\\0b"\n', "NUL character"),
        ('name: "a\\ud800b"\n', "lone surrogate"),
        ("seed: " + "9" * 5000 + "\n", "is too large"),
        ("seed: 9223372036854775808\n", "is too large"),
        ("name: !!binary aGVsbG8=\n", "tag tag:yaml.org,2002:binary is not allowed"),
        ("grid: !!set {a, b}\n", "tag tag:yaml.org,2002:set is not allowed"),
        ("name: !!python/object:os.system {}\n", "not valid YAML"),
        ("name: \x07bell\n", "not valid YAML"),
    ],
)
def test_values_json_cannot_carry_are_refused(text: str, message: str) -> None:
    with pytest.raises(specfile.SpecError, match=re.escape(message)):
        specfile.loads(text)


def test_dates_stay_as_written() -> None:
    assert specfile.loads("name: 2026-11-25\nwhen: !!timestamp 2026-11-25 10:00:00\n") == {
        "name": "2026-11-25",
        "when": "2026-11-25 10:00:00",
    }


def test_a_spec_file_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    spec = write(tmp_path, "# " + "x" * specfile.MAX_BYTES + "\n")
    with pytest.raises(specfile.SpecError, match="larger than 1024 KiB"):
        sweeps.load_spec(spec)


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    spec = write(tmp_path, b"\xef\xbb\xbf" + (SPEC_HEAD + "grid: {rate: [10mbit]}\n").encode())
    assert sweeps.load_spec(spec).grid == {"rate": ["10mbit"]}


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_reads_as_before_and_every_point_is_valid(example: Path) -> None:
    assert specfile.load(example) == yaml.safe_load(example.read_text())
    spec = sweeps.load_spec(example)
    job = jobs.get(spec.job_type)
    for combo in itertools.product(*spec.grid.values()):
        validate_params(job.params, {**spec.fixed, **dict(zip(spec.grid, combo, strict=True))})


# --- 4b: digits are ASCII digits -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "written", "ascii_form"),
    [
        (parse_rate, "１０mbit", "10mbit"),
        (parse_rate, "１０ｍｂｉｔ", "10mbit"),
        (parse_rate, "١٠mbit", "10mbit"),  # Arabic-Indic digits
        (parse_duration, "５０ms", "50ms"),
        (parse_percent, "０.５%", "0.5%"),
        (parse_size, "１０００pkt", "1000pkt"),
        (parse_bytes, "５１２kb", "512kb"),
        (parse_rate, "10\u00a0mbit", "10 mbit"),  # a no-break space
    ],
)
def test_a_number_with_non_ascii_characters_is_refused_showing_the_ascii_form(
    parse, written: str, ascii_form: str
) -> None:
    with pytest.raises(ParameterError) as err:
        parse(written, field="rate")
    assert str(err.value) == f"rate: {written!r} has non-ASCII characters; write {ascii_form!r}"


def test_a_full_width_rate_in_a_sweep_point_names_the_field() -> None:
    with pytest.raises(ParamsInvalid) as err:
        validate_params(jobs.get("link_check").params, {"rate": "１０mbit"})
    assert err.value.errors == [
        {"field": "rate", "message": "'１０mbit' has non-ASCII characters; write '10mbit'"}
    ]


def test_other_numbers_read_outside_the_unit_parser_refuse_full_width_digits_too() -> None:
    with pytest.raises(ParamsInvalid, match="speedup: '１０' has non-ASCII characters; write '10'"):
        validate_params(jobs.get("vose").params, {"speedup": "１０"})
    with pytest.raises(ParameterError, match="mtu: '１５００' has non-ASCII characters; write '1500'"):
        _parse_int("１５００", "mtu")
    assert sweeps.SweepSpec.model_validate({"experiment": "１２", "grid": {"rate": ["1mbit"]}}).body()[
        "experiment"
    ] == {"name": "１２"}  # a name, not experiment 12


# --- the server's HTML error page is not printed ------------------------------------------------------

PAGE = b"<!DOCTYPE html><html><head><title>Server Error</title></head><body>" + b"<p>x</p>" * 2000


class HtmlErrors(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = 404 if self.path.startswith("/api/sweeps/404") else 500
        body = PAGE if "escape" not in self.path else b"\x1b]0;owned\x07 broken\n\nproxy"
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if b"<html" in body else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def html_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HtmlErrors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_sweep_run_summarises_a_500_html_page_in_one_line(tmp_path: Path, html_server: str) -> None:
    spec = write(tmp_path, SPEC_HEAD + "grid: {rate: [10mbit]}\n")
    line = one_sentence(qoelab("sweep", "run", str(spec), "--api", html_server, "--token", "x"))
    assert "HTTP 500 Internal Server Error" in line and "POST /api/sweeps/" in line, line
    assert "<" not in line and "Server Error</title>" not in line


def test_error_pages_and_control_characters_never_reach_the_terminal(html_server: str) -> None:
    with ApiClient(html_server, "x", retries=1, sleep=lambda s: None) as api:
        with pytest.raises(BackendError) as err:
            api.get("/api/sweeps/404/")
        page = f"an HTML page of {len(PAGE):,} bytes, not shown"
        assert str(err.value) == f"GET /api/sweeps/404/ failed: HTTP 404 Not Found ({page})"
        with pytest.raises(BackendError) as err:
            api.get("/api/escape/")
        assert str(
            err.value
        ) == "the backend answered GET /api/escape/ with HTTP 500 Internal Server Error: " + (
            "]0;owned broken proxy"
        )
