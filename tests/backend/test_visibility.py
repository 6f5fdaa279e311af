"""The one visibility rule (accounts.visibility): a researcher sees what they own, staff see
everything, an anonymous caller nothing; every owned model asks it the same way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from accounts.visibility import may_see
from experiments.models import Experiment, Sweep, Trial
from ratings.models import Campaign
from results.models import Artifact

pytestmark = pytest.mark.django_db
BACKEND = Path(__file__).resolve().parents[2] / "backend"


def test_each_owned_model_shows_its_owner_staff_and_nobody_else(alice, bob, sweep_of) -> None:
    sweep = sweep_of(user=alice)
    trial = sweep.trials.first()
    Artifact.objects.create(trial=trial, kind="log", file="x.log", size=1)
    Campaign.objects.create(owner=alice, name="c")
    staff = get_user_model().objects.create_user("staffer", is_staff=True)
    for model in (Experiment, Sweep, Trial, Artifact, Campaign):
        mine = model.objects.visible_to(alice)
        assert mine.exists(), model.__name__
        assert not model.objects.visible_to(bob).exists(), model.__name__
        assert model.objects.visible_to(staff).count() == model.objects.count(), model.__name__
        assert not model.objects.visible_to(AnonymousUser()).exists(), model.__name__
        assert not model.objects.visible_to(None).exists(), model.__name__
    assert may_see(alice, alice) and may_see(alice, "alice") and may_see(staff, "alice")
    assert not may_see(bob, "alice") and not may_see(AnonymousUser(), "alice")


def test_no_view_writes_the_rule_out_again() -> None:
    """``qs if user.is_staff else qs.filter(...)`` appears only in accounts/visibility.py."""
    found = []
    for path in BACKEND.rglob("*.py"):
        if "migrations" in path.parts or path.name == "visibility.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.IfExp) and "is_staff" in ast.unparse(node.test):
                found.append(f"{path.relative_to(BACKEND)}:{node.lineno}")
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("not request.user.is_staff",
                                                                       "not user.is_staff"):  # fmt: skip
                found.append(f"{path.relative_to(BACKEND)}:{node.lineno}")
    assert not found, found
