"""The New-sweep form people can fill (issue 15): booleans as checkboxes, rd_qoe's parameters in
groups with the thesis defaults collapsed, every mistake in one round, one empty-grid wording."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils.html import escape

from experiments.models import Experiment, Sweep
from experiments.services import create_sweep

pytestmark = pytest.mark.django_db

RD = "/sweeps/new/?job_type=rd_qoe"


def _browser_data(form: Any, **over: Any) -> dict[str, Any]:
    """What a browser submits for the rendered form: every field's value, no unticked checkbox."""
    data = {k: form[k].value() for k in form.fields}
    data = {k: v for k, v in data.items() if v not in (None, "", False)}
    data.update(over)
    return {k: v for k, v in data.items() if v not in (None, False)}


def _details(html: str) -> list[tuple[str, bool]]:
    """(group name, open?) of every parameter group, in page order."""
    return [
        (m.group(1), " open" in m.group(2))
        for m in re.finditer(r'<details class="param-group" id="group-([a-z_]+)"([^>]*)>', html)
    ]


def _errors_of(html: str, field_id: str) -> str:
    assert f'id="{field_id}_errors"' in html, f"no errors shown at {field_id}"
    return html.split(f'id="{field_id}_errors"')[1].split("</ul>")[0]


# --- booleans ---------------------------------------------------------------------------------------


def test_a_boolean_is_a_checkbox_and_its_value_round_trips_through_a_clone(client_for, alice) -> None:
    c = client_for(alice)
    r = c.get(RD)
    html = r.content.decode()
    assert r.status_code == 200
    assert re.search(r'<input type="checkbox" name="fixed_record" id="id_fixed_record"(?! checked)', html)
    # A boolean whose default is true starts ticked; a swept boolean stays a text of values.
    assert re.search(r'<input type="checkbox" name="fixed_tcp_sack" id="id_fixed_tcp_sack" checked', html)
    assert 'type="text" name="fixed_record"' not in html
    assert 'type="text" name="grid_record"' in html

    form = r.context["form"]
    data = _browser_data(
        form, new_experiment="boolean", grid_rate="1mbit, 10mbit", fixed_protocol="vnc", fixed_record="on"
    )
    r = c.post("/sweeps/new/", data)
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get(experiment__name="boolean")
    # Only what differs from the default is stored: ticking record, not the still-ticked tcp_sack.
    assert sweep.fixed == {"protocol": "vnc", "record": True}
    assert all(t.resolved["record"] is True for t in sweep.trials.all())

    # The clone shows the box ticked, and submitting it unchanged keeps the value.
    r = c.get(f"/sweeps/new/?from={sweep.pk}")
    form = r.context["form"]
    assert form["fixed_record"].value() is True
    assert re.search(r'name="fixed_record" id="id_fixed_record" checked', r.content.decode())
    r = c.post("/sweeps/new/", _browser_data(form, name="again"))
    assert r.status_code == 302, r.content.decode()[:3000]
    assert Sweep.objects.get(name="again").fixed == {"protocol": "vnc", "record": True}

    # Unticking a default-true boolean stores false (and its rule is checked like any value).
    data = _browser_data(form, name="unticked")
    del data["fixed_tcp_sack"]
    r = c.post("/sweeps/new/", data)
    assert r.status_code == 302, r.content.decode()[:3000]
    assert Sweep.objects.get(name="unticked").fixed == {"protocol": "vnc", "record": True, "tcp_sack": False}


def test_a_swept_boolean_ignores_its_checkbox(client_for, alice) -> None:
    c = client_for(alice)
    form = c.get(RD).context["form"]
    data = _browser_data(form, new_experiment="sweep rec", grid_record="true, false", fixed_protocol="spice")
    data["fixed_record"] = "on"
    r = c.post("/sweeps/new/", data)
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get(experiment__name="sweep rec")
    assert sweep.grid == {"record": ["true", "false"]} and sweep.fixed == {"protocol": "spice"}


# --- groups ---------------------------------------------------------------------------------------


def test_rd_qoe_parameters_are_grouped_in_order_with_the_defaults_collapsed(client_for, alice) -> None:
    html = client_for(alice).get(RD).content.decode()
    # protocol is required, so its group is open; the others keep the thesis defaults and are closed.
    assert _details(html) == [("link", False), ("protocol", True), ("driver", False), ("recording", False)]
    groups = html.split('<details class="param-group"')
    # Each parameter sits in its group (the link group holds the link verification too).
    assert 'id="param-rate"' in groups[1] and 'id="param-verify"' in groups[1]
    assert 'id="param-protocol"' in groups[2] and 'id="param-x2go_pack"' in groups[2]
    assert 'id="param-pages"' in groups[3] and 'id="param-quiet"' in groups[3]
    assert 'id="param-record"' in groups[4]
    assert "all at their defaults" in groups[1]


def test_a_group_with_a_changed_value_opens_after_a_failed_submit_and_in_a_clone(client_for, alice) -> None:
    c = client_for(alice)
    form = c.get(RD).context["form"]
    # Failed submit (no experiment): the link group (swept rate) and the driver group (pages) are open.
    r = c.post(
        "/sweeps/new/", _browser_data(form, grid_rate="1mbit, 2mbit", fixed_protocol="vnc", fixed_pages="3")
    )
    assert r.status_code == 400
    html = r.content.decode()
    assert _details(html) == [("link", True), ("protocol", True), ("driver", True), ("recording", False)]
    assert 'value="1mbit, 2mbit"' in html

    sweep = create_sweep(
        {
            "experiment": {"name": "cloned"},
            "job_type": "rd_qoe",
            "grid": {"protocol": ["vnc", "spice"]},
            "fixed": {"record": True},
        },
        alice,
    )
    html = c.get(f"/sweeps/new/?from={sweep.pk}").content.decode()
    assert _details(html) == [("link", False), ("protocol", True), ("driver", False), ("recording", True)]


def test_a_job_type_without_groups_keeps_one_flat_list(client_for, alice) -> None:
    html = client_for(alice).get("/sweeps/new/?job_type=t_link").content.decode()
    assert "param-group" not in html
    assert html.count('class="param-grid"') == 1 and 'id="param-rate"' in html


# --- every error at once ----------------------------------------------------------------------------


def test_one_post_with_several_mistakes_shows_every_error_at_its_field_and_on_top(client_for, alice) -> None:
    c = client_for(alice)
    form = c.get(RD).context["form"]
    data = _browser_data(
        form,
        new_experiment="",  # the form's own check
        repetitions="0",  # the form's own check
        grid_rate="1mbit, fast",  # the sweep spec's value check
        fixed_pages="1000",  # the sweep spec's bound check
    )  # and protocol, which is required, left empty
    data.pop("fixed_vnc_qemu_adaptive")  # unticked: applies to server vm only
    r = c.post("/sweeps/new/", data)
    html = r.content.decode()
    assert r.status_code == 400
    assert "Choose an experiment or name a new one." in _errors_of(html, "id_new_experiment")
    assert "greater than or equal to 1" in _errors_of(html, "id_repetitions")
    assert "value &#x27;fast&#x27;: cannot read" in _errors_of(html, "id_grid_rate")
    assert "must be at most" in _errors_of(
        html, "id_fixed_pages"
    ) or "less than or equal to 100" in _errors_of(html, "id_fixed_pages")
    assert "is required by job type" in _errors_of(html, "id_grid_protocol")
    assert "applies to server vm only" in _errors_of(html, "id_fixed_vnc_qemu_adaptive")
    # The summary on top lists all six, each linked to its field.
    summary = html.split('id="form-problems"')[1].split("</section>")[0]
    assert "these 6 problems" in summary
    for anchor in (
        "id_new_experiment",
        "id_repetitions",
        "id_grid_rate",
        "id_fixed_pages",
        "id_grid_protocol",
        "id_fixed_vnc_qemu_adaptive",
    ):
        assert f'href="#{anchor}"' in summary, anchor
    # The groups with errors are open.
    assert dict(_details(html)) == {"link": True, "protocol": True, "driver": True, "recording": False}
    assert not Experiment.objects.exists() and not Sweep.objects.exists()


def test_the_api_too_reports_structure_and_value_mistakes_in_one_answer(alice, api_client_for) -> None:
    body = {"experiment": {"name": "e"}, "job_type": "t_link", "grid": {}, "fixed": {"loss": "200%"}}
    r = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert r.status_code == 400
    fields = {e["field"] for e in r.json()["errors"]}
    assert {"grid", "fixed.loss", "rate"} <= fields, r.json()
    assert not Sweep.objects.exists()


# --- the empty grid ---------------------------------------------------------------------------------


@pytest.mark.parametrize("job_type", ["t_link", "rd_qoe"])
def test_the_empty_grid_message_is_the_same_from_the_form_and_from_the_api(
    client_for, api_client_for, alice, job_type
) -> None:
    c = client_for(alice)
    form = c.get(f"/sweeps/new/?job_type={job_type}").context["form"]
    r = c.post("/sweeps/new/", _browser_data(form, new_experiment="e", fixed_protocol="vnc"))
    assert r.status_code == 400
    form_messages = r.context["form"].grid_errors
    assert len(form_messages) == 1

    body = {"experiment": {"name": "e"}, "job_type": job_type, "grid": {}, "fixed": {"protocol": "vnc"}}
    if job_type == "t_link":
        body["fixed"]["rate"] = "1mbit"
    api = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert api.status_code == 400
    api_messages = [e["message"] for e in api.json()["errors"] if e["field"] == "grid"]
    assert api_messages == form_messages
    message = api_messages[0]
    assert message.startswith("Nothing to sweep, the grid is empty: sweep at least one parameter")
    assert "rate, delay" in message  # it names what can be swept
    # The form shows it once above the parameters and once in the summary, with no "grid:" prefix.
    html = r.content.decode()
    assert html.count(escape(message)) == 2 and "grid: " not in html
    # A missing grid is worded the same way.
    del body["grid"]
    api = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert [e["message"] for e in api.json()["errors"] if e["field"] == "grid"] == [message]


def test_the_form_does_not_offer_the_labs_internal_job_types(alice, client_for):
    """Issue 33: live_session (one per live rating slot, made by the ratings app) was offered."""
    from experiments import jobtypes

    assert "live_session" in jobtypes.registry() and "live_session" not in jobtypes.offered()
    page = client_for(alice).get("/sweeps/new/").content.decode()
    assert 'value="rd_qoe"' in page and 'value="live_session"' not in page
    resp = client_for(alice).get("/sweeps/new/?job_type=live_session")
    assert resp.status_code == 400 and "unknown job type 'live_session'" in resp.content.decode()
