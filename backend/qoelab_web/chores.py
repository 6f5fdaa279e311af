"""Periodic chores an app asks the scheduler loop to run (``manage.py scheduler``).

An app lists them on its AppConfig as ``scheduler_chores``; the loop, in ``experiments``, runs every
app's chores without importing the apps above it (ratings releases expired live slots, results
applies the artifact retention). A chore is named by its dotted path so that apps.py stays free of
model imports (Django loads AppConfigs before models).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.utils.module_loading import import_string

log = logging.getLogger("qoelab.scheduler")


@dataclass
class Chore:
    call: str  # "package.module.function", called without arguments
    every_s: float = 0.0  # 0: on every tick
    says: str = ""  # logged with the chore's answer when it is truthy ("released %s slot(s)")
    _due: float = field(default=0.0, repr=False)

    def run_if_due(self, now: float) -> Any:
        if now < self._due:
            return None
        self._due = now + self.every_s
        answer = self.function()()
        if answer and self.says:
            log.info(self.says, answer)
        return answer

    def function(self) -> Callable[[], Any]:
        return import_string(self.call)


def every_chore() -> list[Chore]:
    """Every installed app's chores in INSTALLED_APPS order, as fresh copies (each loop its own due times)."""
    return [
        Chore(c.call, c.every_s, c.says)
        for config in apps.get_app_configs()
        for c in getattr(config, "scheduler_chores", ())
    ]


def run_due(chores: list[Chore], now: float | None = None) -> None:
    now = time.monotonic() if now is None else now
    for chore in chores:
        chore.run_if_due(now)
