"""The lab's one visibility rule: a researcher sees what they own, staff see everything, and
nobody else (an anonymous caller, an evaluator without the researcher permission on these
querysets) sees anything.

Every model a researcher owns, directly or through its experiment, uses :class:`OwnedQuerySet`
with the path to its owner, so ``Model.objects.visible_to(user)`` is the one way views, the API and
templates ask; an object outside the caller's reach is then a 404, never a hint that it exists.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from django.db import models


class OwnedQuerySet(models.QuerySet):
    owner_path: ClassVar[str] = "owner"  # the lookup from this model to the owning user

    def visible_to(self, user: Any) -> Self:
        if user is None or not user.is_authenticated:
            return self.none()
        return self if user.is_staff else self.filter(**{self.owner_path: user})


def owned_by(path: str) -> type[OwnedQuerySet]:
    """An :class:`OwnedQuerySet` whose owner is at ``path`` (``"experiment__owner"`` …)."""
    return type(f"OwnedBy_{path}", (OwnedQuerySet,), {"owner_path": path})


def may_see(user: Any, owner: Any) -> bool:
    """The same rule for one object already in hand, given its owner (a user or a username)."""
    if user is None or not user.is_authenticated:
        return False
    name = owner if isinstance(owner, str) else getattr(owner, "get_username", lambda: None)()
    return bool(user.is_staff or name == user.get_username())
