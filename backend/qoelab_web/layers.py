"""The backend's floors, lowest first: a module imports only from its own floor or the floors below.

``tests/backend/test_app_layers.py`` reads every import (function-local ones too) and fails on one
that points up. Django's own wiring that must see everything (the URL maps, the status and login
views, WSGI) is the ``site`` floor on top; the rest of ``qoelab_web`` (settings, API helpers, tokens,
lists, chores) is the ground floor every app stands on. An app that must act on something above it
does it through a hook the lower app declares and the upper one fills (``qoelab_web.chores``, the
job-type registry), never by importing upward.
"""

from __future__ import annotations

SITE = (
    "qoelab_web.urls",
    "qoelab_web.api_urls",
    "qoelab_web.auth",
    "qoelab_web.status",
    "qoelab_web.wsgi",
)

FLOORS = (
    "qoelab_web",  # ground floor: settings, API helpers, tokens, lists, chores (not SITE)
    "accounts",  # users, roles (accounts.permissions), tokens, the one visibility rule
    "hosts",  # worker hosts, their tokens and facts, the worker protocol's base view
    "experiments",  # experiments, sweeps, trials: defining, scheduling, claiming
    "results",  # what a trial produced: finishing it, its result, artifacts, findings
    "ratings",  # rating campaigns on results
    "dashboard",  # the researcher pages over all of the above
    "site",  # SITE: the URL maps and the views that gather every app
)


def floor_of(module: str) -> str | None:
    """The floor of a backend module by dotted name; None for a module outside the backend apps."""
    if module in SITE or any(module.startswith(m + ".") for m in SITE):
        return "site"
    top = module.split(".")[0]
    return top if top in FLOORS else None
