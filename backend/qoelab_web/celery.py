"""The scheduler's Celery app: it only SENDS ``qoelab.run_trial`` to ``host.<name>`` queues.

The lab-host worker (workers/qoelab/celery_app.py) owns acks_late, prefetch and time limits; this
side needs nothing but the broker URL and a publish timeout so a dead Redis fails the tick fast.
"""

from __future__ import annotations

from celery import Celery
from django.conf import settings

RUN_TRIAL = "qoelab.run_trial"

_apps: dict[str, Celery] = {}


def get_app() -> Celery:
    """The sender app for the configured broker (one per URL, so tests can point elsewhere)."""
    url = settings.CELERY_BROKER_URL
    if url not in _apps:
        app = Celery("qoelab_web", broker=url, set_as_current=False)
        app.conf.update(
            broker_connection_retry_on_startup=False,
            broker_connection_max_retries=1,
            broker_transport_options={"socket_timeout": 5, "socket_connect_timeout": 5},
            # A dead broker must fail the tick in about a second, not hang it; the trial then
            # goes back to pending and the next tick tries again.
            task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
            task_serializer="json",
            accept_content=["json"],
        )
        _apps[url] = app
    return _apps[url]


def host_queue(host_name: str) -> str:
    return f"host.{host_name}"


def send_run_trial(trial_id: int, host_name: str) -> str:
    """Publish one run_trial message on the host's own queue; returns the Celery task id."""
    result = get_app().send_task(RUN_TRIAL, args=[trial_id], queue=host_queue(host_name))
    return str(result.id)
