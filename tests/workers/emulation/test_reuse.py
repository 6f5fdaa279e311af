"""A condition is verified in full once per host; later trials of it run a short ping check."""

import json
import time
from types import SimpleNamespace

import pytest

from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.reuse import _load, condition_key, measured_or_reused, verify_condition

pytestmark = pytest.mark.netns


def _fake_link(**profile):
    prof = LinkProfile.parse(**{"rate": "10mbit", "delay": "5ms", **profile})
    return SimpleNamespace(profile=prof, backend="userspace", tcp={"cc": "cubic", "sources": {"cc": "x"}})


def test_the_key_ignores_the_seed_and_follows_what_shapes_the_link():
    a = _fake_link()
    b = SimpleNamespace(**{**vars(a), "profile": LinkProfile.parse(rate="10mbit", delay="5ms", seed=7)})
    assert condition_key(a, 2.0) == condition_key(b, 2.0)
    assert condition_key(a, 2.0) != condition_key(_fake_link(delay="6ms"), 2.0)
    assert condition_key(a, 2.0) != condition_key(_fake_link(loss="1%"), 2.0)
    assert condition_key(a, 2.0) != condition_key(a, 3.0)
    reno = SimpleNamespace(**{**vars(a), "tcp": {"cc": "reno"}})
    assert condition_key(a, 2.0) != condition_key(reno, 2.0)


def test_a_stored_verification_is_used_only_while_fresh_and_passed(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"ok": True, "started_at": time.time() - 10}))
    assert _load(path, 3600) is not None
    path.write_text(json.dumps({"ok": True, "started_at": time.time() - 7200}))
    assert _load(path, 3600) is None
    path.write_text(json.dumps({"ok": False, "started_at": time.time()}))
    assert _load(path, 3600) is None
    path.write_text("{not json")
    assert _load(path, 3600) is None


def test_the_second_trial_of_a_condition_runs_the_short_check(netns_ok, prefix, tmp_path):
    from qoelab.emulation.topology import emulated_link

    store = tmp_path / "verified"
    profile = dict(rate="10mbit", delay="5ms")
    with emulated_link(LinkProfile.parse(**profile, seed=1), prefix=prefix, backend="userspace") as link:
        first = verify_condition(link, 1.0, store)
    assert first["mode"] == "full" and first["ok"], first["checks"]
    assert len(list(store.glob("*.json"))) == 1

    with emulated_link(LinkProfile.parse(**profile, seed=2), prefix=prefix, backend="userspace") as link:
        second = verify_condition(link, 1.0, store)
        every = verify_condition(link, 1.0, store, mode="every")
    assert second["mode"] == "short" and second["ok"], second["checks"]
    assert second["reused"]["started_at"] == first["started_at"]
    assert 9.0 <= second["measured"]["rtt_ms"] <= 12.0
    assert second["measured"]["rtt_idle"]["count"] == 10
    # Values only the full run measures come from it, named as reused.
    assert measured_or_reused(second, "tcp_down_bps") == first["measured"]["tcp_down_bps"]
    assert every["mode"] == "full"

    # Another condition is verified in full.
    with emulated_link(
        LinkProfile.parse(rate="10mbit", delay="20ms"), prefix=prefix, backend="userspace"
    ) as link:
        other = verify_condition(link, 1.0, store)
    assert other["mode"] == "full"
    assert len(list(store.glob("*.json"))) == 2
