"""Wake the scheduler when there is work, instead of waiting for its next tick.

A finished trial frees a slot and a new sweep brings pending trials; with a fixed tick the host sat
idle for up to a whole interval (2 s; on a 20 s quick trial, a tenth of the lab's time). Both send a
PostgreSQL ``NOTIFY`` (delivered when their transaction commits); the scheduler ``LISTEN``s on its own
connection and ticks at once. The interval stays as the fallback: a missed notification costs one
tick's wait, never a trial.
"""

from __future__ import annotations

import logging

import psycopg
from django.db import connection

log = logging.getLogger("qoelab.scheduler")
CHANNEL = "qoelab_scheduler"


def wake_scheduler() -> None:
    """Ask the scheduler for a tick (inside a transaction: once it commits)."""
    with connection.cursor() as cur:
        cur.execute(f"NOTIFY {CHANNEL}")


class Listener:
    """The scheduler's side: ``wait(timeout)`` returns True when woken, False after the timeout."""

    def __init__(self) -> None:
        self._conn: psycopg.Connection | None = None

    def _connect(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            params = connection.get_connection_params()
            self._conn = psycopg.connect(**params, autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")
        return self._conn

    def wait(self, timeout: float) -> bool:
        import time

        if timeout <= 0:
            return False
        try:
            conn = self._connect()
            woken = False
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                woken = True
            if woken:  # several finishes at once need one tick, not one each
                for _ in conn.notifies(timeout=0.05):
                    pass
            return woken
        except psycopg.Error as err:  # the database restarts: fall back to the plain interval
            log.warning("scheduler wake-up channel lost (%s); ticking every interval", err)
            self.close()
            time.sleep(timeout)
            return False

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
