"""The scheduler's Celery app: it only SENDS ``qoelab.run_trial`` to ``host.<name>`` queues.

The lab-host worker (workers/qoelab/celery_app.py) owns acks_late, prefetch and time limits; this
side needs nothing but the broker URL and a publish timeout so a dead Redis fails the tick fast.
"""

from __future__ import annotations

from celery import Celery
from django.conf import settings

RUN_TRIAL = "qoelab.run_trial"

_app: Celery | None = None


def get_app() -> Celery:
    global _app
    if _app is None:
        app = Celery("qoelab_web", broker=settings.CELERY_BROKER_URL)
        app.conf.update(
            broker_connection_retry_on_startup=False,
            broker_connection_max_retries=1,
            broker_transport_options={"max_retries": 1, "socket_timeout": 5, "socket_connect_timeout": 5},
            task_serializer="json",
            accept_content=["json"],
        )
        _app = app
    return _app


def host_queue(host_name: str) -> str:
    return f"host.{host_name}"


def send_run_trial(trial_id: int, host_name: str) -> str:
    """Publish one run_trial message on the host's own queue; returns the Celery task id."""
    result = get_app().send_task(RUN_TRIAL, args=[trial_id], queue=host_queue(host_name))
    return str(result.id)
