"""The researcher commands of ``qoelab`` against the real backend (live_server), no worker needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_sweep_run_without_wait_prints_the_sweep_and_its_page(
    run: Any, live_server: Any, tmp_path: Path
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("experiment: cli\njob_type: link_check\nname: ladder\ngrid: {rate: [1mbit, 2mbit]}\n")
    out = run("sweep", "run", str(spec))
    assert out.returncode == 0, out.stderr
    first, url = out.stdout.splitlines()
    sweep_id = int(first.split()[1])
    assert first == f"sweep {sweep_id} submitted: 2 trials"
    assert url == f"{live_server.url}/sweeps/{sweep_id}/"

    status = run("sweep", "status", str(sweep_id))
    assert status.returncode == 0, status.stderr
    assert f"sweep {sweep_id} ladder" in status.stdout
    assert "0/2 done" in status.stdout and "2 pending" in status.stdout
    assert "waiting: no live worker" in status.stdout


def test_a_thesis_preset_runs_without_a_spec_file(run: Any) -> None:
    from experiments.models import Sweep

    out = run("sweep", "run", "--preset", "ch4-fig48", "--size", "quick")
    assert out.returncode == 0, out.stderr
    sweep = Sweep.objects.get()
    assert out.stdout.startswith(f"sweep {sweep.pk} submitted: 54 trials")
    assert sweep.name == "Fig. 4.8 (quick)" and sweep.fixed["delay"] == "100ms"
    bad = run("sweep", "run", "--preset", "ch4-fig99")
    assert bad.returncode == 2 and "unknown preset 'ch4-fig99'" in bad.stderr


def test_the_backend_names_the_out_of_bounds_grid_value(run: Any, tmp_path: Path) -> None:
    from experiments.models import Sweep

    spec = tmp_path / "bad.yaml"
    spec.write_text("experiment: cli\njob_type: link_check\ngrid: {rate: [10mbit, 99gbit]}\n")
    out = run("sweep", "run", str(spec))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("qoelab: error: creating the sweep failed: grid.rate[1]: must be at most"), line
    assert not Sweep.objects.exists(), "nothing may be created from an invalid spec"


def test_sweep_status_of_an_unknown_sweep_is_one_sentence(run: Any) -> None:
    out = run("sweep", "status", "999999")
    assert out.returncode == 2
    assert out.stderr.strip().startswith("qoelab: error: GET /api/sweeps/999999/ failed:")


def test_hosts_lists_registered_hosts(run: Any, make_host: Any) -> None:
    make_host("lab7", {"netns": True, "link": True}, concurrency=2)
    out = run("hosts")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("lab7")
    assert "alive" in out.stdout and "can: link, netns" in out.stdout and "running 0/2" in out.stdout


def test_names_with_terminal_escapes_are_printed_escaped(run: Any, alice: Any) -> None:
    """Issue 33: a sweep named with escape sequences cleared the researcher's terminal."""
    from experiments.services import create_sweep

    sweep = create_sweep(
        {"experiment": {"name": "cli"}, "job_type": "link_check", "name": "ok\x1b[2J\x1b]0;owned\x07",
         "grid": {"rate": ["1mbit"]}},
        alice,
    )  # fmt: skip
    out = run("sweep", "status", str(sweep.pk))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert f"sweep {sweep.pk} ok\\x1b[2J\\x1b]0;owned\\x07" in out.stdout
