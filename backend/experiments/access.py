"""Who may see what on the researcher pages (the dashboard and the campaign pages of ratings).

Researchers (permission ``experiments.researcher``) see their own experiments; staff see all
(``accounts.visibility``: every owned model's ``objects.visible_to(user)``).
Anyone else who is logged in (evaluators, from a later issue) gets 403 on every researcher page,
and an object outside a researcher's reach is a 404, so ids of other people's sweeps leak nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from accounts.permissions import is_researcher
from experiments.models import Experiment, Sweep, Trial


def researcher_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_researcher(request.user):
            raise PermissionDenied("These pages are for researchers.")
        return view(request, *args, **kwargs)

    return wrapped


def experiments_for(user: Any) -> QuerySet[Experiment]:
    return Experiment.objects.visible_to(user)


def sweeps_for(user: Any) -> QuerySet[Sweep]:
    return Sweep.objects.select_related("experiment", "experiment__owner").visible_to(user)


def trials_for(user: Any) -> QuerySet[Trial]:
    return Trial.objects.select_related("sweep", "sweep__experiment").visible_to(user)
