"""The ``qoelab`` console command as a user meets it: help texts, and one-sentence errors (exit 2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qoelab import sweeps

QOELAB = Path(sys.executable).with_name("qoelab")
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


def qoelab(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("QOELAB_")}
    # A CLI test must never clean up namespaces that other tests on this machine are using.
    base.update(COLUMNS="100", QOELAB_LEFTOVER_PREFIX="qlxcli", QOELAB_KVM="0")
    return subprocess.run(
        [str(QOELAB), *args], capture_output=True, text=True, env={**base, **(env or {})}, timeout=timeout
    )


def assert_one_sentence_error(out: subprocess.CompletedProcess, *needles: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    # The worker logs its start-up; apart from log records the error is one line.
    lines = [ln for ln in out.stderr.splitlines() if ln.strip() and not re.match(r"\d{4}-\d\d-\d\d ", ln)]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("qoelab"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_the_console_script_is_installed_in_the_venv() -> None:
    assert QOELAB.is_file() and os.access(QOELAB, os.X_OK)


def test_help_lists_every_command_with_examples() -> None:
    out = qoelab("--help")
    assert out.returncode == 0
    for command in ("worker", "sweep", "hosts", "capabilities", "version"):
        assert f"\n    {command}" in out.stdout, command
    assert "examples:\n  QOELAB_HOST_TOKEN=... qoelab worker --broker" in out.stdout
    assert "qoelab sweep run examples/link_check.yaml --wait" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 110


def test_worker_help_explains_how_to_add_a_second_host() -> None:
    out = qoelab("worker", "--help")
    assert out.returncode == 0
    text = out.stdout
    for flag in (
        "--broker URL",
        "--backend URL",
        "--token TOKEN",
        "--name NAME",
        "--concurrency N",
        "--workdir DIR",
    ):
        assert flag in text, flag
    assert "manage.py add_host lab2" in text
    assert "export QOELAB_HOST_TOKEN=TOKEN\n" in text and "qoelab worker --name lab2" in text
    assert "QOELAB_HOST_TOKEN" in text


def test_sweep_run_help_shows_a_spec_and_the_exit_status() -> None:
    out = qoelab("sweep", "run", "--help")
    assert out.returncode == 0
    assert "grid: {rate: [10mbit, 50mbit]}" in out.stdout
    assert "exit status is 0 when every trial succeeded and 1 when any failed" in out.stdout


def test_an_unknown_command_is_a_one_sentence_error() -> None:
    line = assert_one_sentence_error(qoelab("frobnicate"), "invalid choice: 'frobnicate'")
    assert "see 'qoelab --help'" in line


def test_a_non_numeric_concurrency_is_a_one_sentence_error() -> None:
    assert_one_sentence_error(qoelab("worker", "--concurrency", "lots"), "--concurrency", "'lots'")


def test_a_missing_spec_argument_names_it() -> None:
    assert_one_sentence_error(qoelab("sweep", "run"), "SPEC.yaml")


def test_the_worker_without_a_token_says_where_to_get_one() -> None:
    assert_one_sentence_error(
        qoelab("worker", "--broker", "redis://127.0.0.1:6379/14", "--backend", UNREACHABLE),
        "no host token",
        "manage.py add_host NAME",
    )


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [
        ("--name", "Lab Host", "host name 'Lab Host' is not usable"),
        ("--concurrency", "0", "concurrency must be between 1 and 64, got 0"),
        ("--broker", "localhost:6379", "the broker URL must be redis://HOST:PORT/DB"),
        ("--backend", "web:8000", "the backend URL must start with http:// or https://"),
        ("--workdir", "/proc/qoelab", "cannot create the work dir /proc/qoelab"),
    ],
)
def test_the_worker_rejects_bad_settings_naming_them(
    flag: str, value: str, needle: str, tmp_path: Path
) -> None:
    args = {
        "--broker": "redis://127.0.0.1:6379/14",
        "--backend": UNREACHABLE,
        "--token": "t" * 20,
        "--name": "lab1",
        "--workdir": str(tmp_path),
        flag: value,
    }
    assert_one_sentence_error(qoelab("worker", *[x for kv in args.items() for x in kv]), needle)


def test_the_worker_says_when_it_cannot_reach_the_backend(tmp_path: Path) -> None:
    out = qoelab(
        "worker", "--broker", "redis://127.0.0.1:6379/14", "--backend", UNREACHABLE,
        "--token", "t" * 20, "--name", "clitest", "--workdir", str(tmp_path),
    )  # fmt: skip
    assert_one_sentence_error(out, f"cannot reach the backend at {UNREACHABLE}")


def test_researcher_commands_need_a_token() -> None:
    assert_one_sentence_error(qoelab("hosts"), "no API token: pass --token or set QOELAB_API_TOKEN")


def test_researcher_commands_say_when_the_backend_is_unreachable() -> None:
    out = qoelab("sweep", "status", "3", env={"QOELAB_API_URL": UNREACHABLE, "QOELAB_API_TOKEN": "x" * 40})
    assert_one_sentence_error(out, f"cannot reach the backend at {UNREACHABLE}")


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


GOOD = "experiment: demo\njob_type: link_check\ngrid: {rate: [10mbit]}\n"


def test_a_misspelled_spec_field_is_named_with_the_known_fields(tmp_path: Path) -> None:
    spec = _spec(tmp_path, GOOD + "repetitons: 3\n")
    line = assert_one_sentence_error(qoelab("sweep", "run", str(spec), "--token", "x"), str(spec))
    assert "repetitons: is not a sweep field (fields: experiment, job_type, name, grid" in line


def test_a_spec_field_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    spec = _spec(tmp_path, GOOD + "repetitions: many\n")
    assert_one_sentence_error(
        qoelab("sweep", "run", str(spec), "--token", "x"), "repetitions: Input should be"
    )


def test_a_spec_without_a_grid_says_it_is_required(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "experiment: demo\njob_type: link_check\n")
    assert_one_sentence_error(qoelab("sweep", "run", str(spec), "--token", "x"), "grid: is required")


def test_an_empty_grid_list_is_named(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "experiment: demo\ngrid: {rate: [], delay: [10ms]}\n")
    with pytest.raises(
        sweeps.SpecError, match=r"grid: Value error, grid.rate is empty|grid: grid.rate is empty"
    ):
        sweeps.load_spec(spec)


def test_invalid_yaml_is_reported_with_its_line(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "experiment: demo\ngrid: {rate: [10mbit\nname: x\n")
    assert_one_sentence_error(qoelab("sweep", "run", str(spec), "--token", "x"), "not valid YAML", "at line")


def test_a_missing_spec_file_is_one_sentence(tmp_path: Path) -> None:
    assert_one_sentence_error(
        qoelab("sweep", "run", str(tmp_path / "nope.yaml"), "--token", "x"), "cannot read the spec"
    )


def test_the_example_spec_becomes_the_api_body() -> None:
    root = Path(__file__).resolve().parents[2]
    spec = sweeps.load_spec(root / "examples" / "link_check.yaml")
    body = spec.body()
    assert body["experiment"] == {"name": "Link check", "description": spec.experiment.description}
    assert body["job_type"] == "link_check"
    assert body["grid"] == {"rate": ["1mbit", "10mbit", "100mbit"], "delay": ["10ms", "50ms"]}
    assert body["order"] == "random" and body["seed"] == 3


@pytest.mark.parametrize(("written", "sent"), [("demo", {"name": "demo"}), ("12", 12), (7, 7)])
def test_an_experiment_is_sent_by_name_or_id(written: object, sent: object) -> None:
    spec = sweeps.SweepSpec.model_validate({"experiment": written, "grid": {"rate": ["1mbit"]}})
    assert spec.body()["experiment"] == sent


def test_version_prints_the_code_revision() -> None:
    out = qoelab("version", env={"QOELAB_CODE_REVISION": "v9-test"})
    assert out.returncode == 0
    assert out.stdout.strip() == "qoelab 0.1.0 (v9-test)"


def test_capabilities_json_reports_flags_reasons_and_versions() -> None:
    out = qoelab("capabilities", "--json")
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    caps = facts["capabilities"]
    assert all(isinstance(v, bool) for v in caps.values())
    assert caps["kvm"] is False and facts["reasons"]["kvm"] == "disabled by QOELAB_KVM=0"
    for cap, ok in caps.items():
        assert ok or facts["reasons"].get(cap), f"{cap} is False without a reason"
    assert facts["versions"]["python"] == f"{sys.version_info.major}.{sys.version_info.minor}." + str(
        sys.version_info.micro
    )


def test_printable_escapes_control_and_format_characters_and_keeps_text():
    from qoelab.cli import printable

    assert printable("lab 7 · é 日本") == "lab 7 · é 日本"
    assert printable("a\x1b[2Jb\tc\u202ed\x9b") == "a\\x1b[2Jb\\tc\\u202ed\\x9b"


def test_the_worker_drops_secrets_from_the_environment_its_trials_inherit():
    """Issue 33: linkemu and iperf3 inherited QOELAB_SECRET_KEY and DATABASE_URL."""
    from qoelab.celery_app import scrub_secrets

    env = {"PATH": "/usr/bin", "QOELAB_SECRET_KEY": "k", "DATABASE_URL": "postgres://u:p@h/db",
           "QOELAB_HOST_TOKEN": "t", "REDIS_PASSWORD": "r", "MY_API_TOKEN": "x",
           "QOELAB_BROKER_URL": "redis://:pw@h:1/0", "REDIS_URL": "redis://:pw@h:1/0",
           "QOELAB_WORKDIR": "/w"}  # fmt: skip
    assert scrub_secrets(env) == ["DATABASE_URL", "MY_API_TOKEN", "QOELAB_BROKER_URL", "QOELAB_HOST_TOKEN",
                                  "QOELAB_SECRET_KEY", "REDIS_PASSWORD", "REDIS_URL"]  # fmt: skip
    assert env == {"PATH": "/usr/bin", "QOELAB_WORKDIR": "/w"}
