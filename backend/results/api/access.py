"""Which sweeps an API caller may read: the one lookup the results views share."""

from __future__ import annotations

from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from experiments.models import Sweep


def visible_sweep(request: Request, pk: int) -> Sweep:
    """The sweep if the user may see it (its owner, or staff); else 404 (not 403: no hint it exists)."""
    sweep = Sweep.objects.visible_to(request.user).filter(pk=pk).first()
    if sweep is None:
        raise NotFound(f"no sweep {pk}")
    return sweep
