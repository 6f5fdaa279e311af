"""What a sweep's deletion takes from results: its artifacts (counted in the plan; the files removed
once the deleting transaction commits). Connected to ``experiments.signals`` in ResultsConfig.ready."""

from __future__ import annotations

import logging
import os
from typing import Any

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Count, Sum

from experiments.lifecycle import DeletePlan
from results.models import Artifact

log = logging.getLogger("qoelab.experiments")


def count_artifacts(sender: type, plan: DeletePlan, **kwargs: Any) -> None:
    ids = [s.pk for s in plan.sweeps]
    files = Artifact.objects.filter(trial__sweep_id__in=ids).aggregate(n=Count("id"), size=Sum("size"))
    plan.artifacts = files["n"] or 0
    plan.artifact_bytes = files["size"] or 0


def remove_artifact_files(sender: type, plan: DeletePlan, **kwargs: Any) -> None:
    """The rows go with their trials (a file with its row, ``ResultsConfig``); anything left and the
    emptied ``artifacts/sweep-N/`` folders go once the transaction commits."""
    ids = [s.pk for s in plan.sweeps]
    names = list(Artifact.objects.filter(trial__sweep_id__in=ids).values_list("file", flat=True))
    transaction.on_commit(lambda: remove_files(names, ids))


def remove_files(names: list[str], sweep_ids: list[int]) -> None:
    """Delete these storage files (if still there) and the sweeps' artifact folders once empty."""
    for name in names:
        if name:
            try:
                default_storage.delete(name)
            except OSError as exc:  # a file that cannot go must not undo the committed delete
                log.error("artifact file %s could not be deleted: %s", name, exc)
    for sweep_id in sweep_ids:
        try:
            root = default_storage.path(f"artifacts/sweep-{sweep_id}")
        except NotImplementedError:  # a storage without folders (object storage) has nothing to prune
            return
        for dirpath, _dirnames, _files in os.walk(root, topdown=False):  # deepest first
            try:
                os.rmdir(dirpath)  # only succeeds when empty
            except OSError:
                continue
