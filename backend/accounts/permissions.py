"""Who may use the researcher API: members of the researchers group (or staff).

Researchers see and change only their own experiments (and their sweeps, trials, results);
staff see everything. Evaluators (a later issue) get no researcher permission, so they see nothing.
The permission itself is declared on ``experiments.Experiment`` (its Meta, since the first migration);
this module names it by its string, so the roles live with the accounts below every app that checks them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission
from rest_framework import permissions

RESEARCHER_PERM = "experiments.researcher"
RESEARCHERS_GROUP = "researchers"


def is_researcher(user: Any) -> bool:
    return bool(user and user.is_authenticated and (user.is_staff or user.has_perm(RESEARCHER_PERM)))


def researchers_group() -> Group:
    group, _ = Group.objects.get_or_create(name=RESEARCHERS_GROUP)
    perm = Permission.objects.get(codename="researcher", content_type__app_label="experiments")
    group.permissions.add(perm)
    return group


class IsResearcher(permissions.BasePermission):
    message = "this needs a researcher account (ask an administrator: manage.py create_researcher)"

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_researcher(request.user)


class IsStaffOrReadOnly(permissions.BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return request.method in permissions.SAFE_METHODS or bool(request.user and request.user.is_staff)
