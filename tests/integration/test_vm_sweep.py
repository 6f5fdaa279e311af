"""A VM-mode rd_qoe sweep through the real stack, charted beside namespace mode (issue 6, done when).

One SPICE trial per server mode over the same emulated link, run by a real ``qoelab worker``
(Celery) against the live backend; the worker advertises ``vm`` and the trial's own capabilities
route it. The preset chart must keep the two modes apart (``server`` is swept but not drawn, so
it splits the series). Skipped without the guest image (``make vm-image``; ``make test`` builds it).
"""

from __future__ import annotations

from typing import Any

import pytest

from qoelab.vm.image import MissingImageError, load_image

pytestmark = [pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _guest_image() -> None:
    try:
        load_image()
    except MissingImageError as err:
        pytest.skip(f"no guest image: run make vm-image ({err})")


def test_a_vm_mode_sweep_runs_on_a_worker_and_charts_beside_namespace_mode(lab_stack: Any) -> None:
    from dashboard.services import chart_payload, server_side, tcg_caveat
    from experiments.models import Sweep
    from qoelab import jobs

    api = lab_stack.api()
    spec = {
        "experiment": {"name": "namespace vs vm"},
        "job_type": "rd_qoe",
        "name": "spice, both modes",
        "grid": {"server": ["namespace", "vm"]},
        # Q 2 s: under TCG the guest can pause longer than 0.5 s in the middle of a page change.
        "fixed": {"protocol": "spice", "rate": "10mbit", "delay": "10ms", "pages": 2, "quiet": "2s",
                  "verify_duration": "1s"},
        "repetitions": 1,
    }  # fmt: skip
    sweep = api.post("/api/sweeps/", spec, "creating the sweep")
    servers = {t["params"]["server"] for t in api.get_all("/api/trials/", sweep=sweep["id"])}
    assert servers == {"namespace", "vm"}

    def done() -> Any:
        s = api.get(f"/api/sweeps/{sweep['id']}/")
        return s if s["progress"]["done"] == s["progress"]["total"] else None

    finished = lab_stack.wait_for("both trials to end", done, timeout=900, every=2)
    trials = {t["params"]["server"]: t for t in api.get_all("/api/trials/", sweep=sweep["id"])}
    assert finished["progress"]["counts"]["succeeded"] == 2, (
        {k: t["error"] for k, t in trials.items()},
        lab_stack.worker.log_tail(),
    )
    vm = api.get(f"/api/trials/{trials['vm']['id']}/")
    assert vm["provenance"]["server"] == "vm"
    assert vm["provenance"]["vm"]["accel"] in ("kvm", "tcg")
    assert vm["provenance"]["vm"]["start"] in ("snapshot", "cold")
    assert api.get(f"/api/trials/{trials['namespace']['id']}/")["provenance"]["server"] == "namespace"

    job = jobs.get("rd_qoe")
    chart = next(c for c in job.charts if c.key == "fig46_T")
    payload = chart_payload(Sweep.objects.get(pk=sweep["id"]), job, chart)
    labels = [s["label"] for s in payload["series"]]
    assert labels == ["protocol = spice, server = namespace", "protocol = spice, server = vm"], labels
    assert all(s["points"][0]["n"] == 1 and s["points"][0]["mean"] > 0 for s in payload["series"])

    # The pages say what a reader needs to read T: where the server ran, and whether under TCG.
    db_sweep = Sweep.objects.get(pk=sweep["id"])
    accel = vm["provenance"]["vm"]["accel"]
    assert server_side(vm["provenance"]).startswith(f"QEMU guest under {accel.upper()} (")
    caveat = tcg_caveat(db_sweep)
    assert (caveat is not None) == (accel == "tcg"), caveat
