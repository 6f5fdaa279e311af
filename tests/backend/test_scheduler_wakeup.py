"""A finished trial or a new sweep wakes the scheduler at once (PostgreSQL NOTIFY), not at its next tick."""

import threading

import pytest
from django.db import connection

from experiments.wakeup import Listener, wake_scheduler

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_notification_wakes_the_listener_and_silence_lets_it_time_out():
    listener = Listener()
    try:
        assert listener.wait(0.2) is False  # nothing sent: the plain interval
        woken: list[bool] = []
        # Listen first, then notify from Django's own connection (as finish() does, on commit).
        listener._connect()
        waiter = threading.Thread(target=lambda: woken.append(listener.wait(60)))
        waiter.start()
        wake_scheduler()
        waiter.join(timeout=60)
        assert woken == [True]
    finally:
        listener.close()


def test_notifications_sent_inside_a_rolled_back_transaction_never_arrive():
    from django.db import transaction

    listener = Listener()
    try:
        listener._connect()
        with pytest.raises(RuntimeError), transaction.atomic():
            wake_scheduler()
            raise RuntimeError("the finish failed")
        assert listener.wait(0.5) is False
    finally:
        listener.close()
        connection.close()
