"""A job type may narrow a link field (another default, tighter bounds) but never give its name
another meaning: storage_bench once declared ``limit`` as its per-round time limit, and the link
read the same value as its queue limit (a 45 s round became a 45-packet queue)."""

from __future__ import annotations

from qoelab.emulation.linkparams import LinkParams
from qoelab.jobs import REGISTRY


def _unit(schema: dict) -> str | None:
    for option in (schema, *schema.get("anyOf", ())):
        if option.get("x-unit"):
            return option["x-unit"]
    return None


def test_no_job_type_reuses_a_link_fields_name_for_something_else() -> None:
    base = LinkParams.model_json_schema()["properties"]
    checked = 0
    for name, job in REGISTRY.items():
        if not issubclass(job.params, LinkParams):
            continue
        mine = job.params.model_json_schema()["properties"]
        for field in LinkParams.model_fields:
            assert _unit(mine[field]) == _unit(base[field]), (name, field, mine[field], base[field])
            checked += 1
    assert checked >= 5 * len(LinkParams.model_fields)  # the five job types on the emulated link
