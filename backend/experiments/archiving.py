"""Archiving and the ``archived`` list filter; ``Refused``, the answer of a lifecycle action not allowed now.

Archiving only hides: an archived experiment (with its sweeps) leaves the default lists and stays
reachable by URL and through the ``archived`` filter. Trials of an archived sweep still run.
Rating campaigns use the same filter and the same refusal (``ratings.campaigns``).
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from experiments.models import Experiment


class Refused(Exception):
    """The action is not allowed now; ``reasons`` are plain sentences naming what is in the way."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))


# --- the archived filter ----------------------------------------------------------------------

ARCHIVED_VALUES = {"": False, "0": False, "false": False, "1": True, "true": True, "all": None}


def parse_archived(raw: str | None) -> bool | None:
    """``archived`` of a list request: False (default: current only), True (archived only), None (all)."""
    value = (raw or "").strip().lower()
    if value not in ARCHIVED_VALUES:
        raise ValueError(f"must be true (archived only), false (the default) or all, got {raw!r}")
    return ARCHIVED_VALUES[value]


def filter_archived(qs: QuerySet, archived: bool | None, field_path: str = "archived_at") -> QuerySet:
    if archived is None:
        return qs
    return qs.filter(**{f"{field_path}__isnull": not archived})


def set_experiment_archived(experiment: Experiment, archived: bool) -> Experiment:
    """Archive (hide with its sweeps) or restore; archiving twice keeps the first date."""
    qs = Experiment.objects.filter(pk=experiment.pk)
    if archived:
        qs.filter(archived_at__isnull=True).update(archived_at=timezone.now())
    else:
        qs.update(archived_at=None)
    experiment.refresh_from_db(fields=["archived_at"])
    return experiment
