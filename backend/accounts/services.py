"""Issue and look up researcher API tokens; the raw token is returned once and never stored."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts.models import ApiToken
from qoelab_web.tokens import hash_token, new_token

# Each POST /api/auth/token/ issues a new token (an old one cannot be shown again: only its hash is
# kept), so a user's scripts on several machines each keep their own. The oldest beyond this many go.
MAX_TOKENS_PER_USER = 20


def issue_token(user: Any, token: str | None = None) -> str:
    """A new API token for ``user`` (or ``token`` itself, e.g. a demo's fixed one); returns it raw.

    The newest MAX_TOKENS_PER_USER issued by logins are kept; a provisioned one (``token`` given) is
    pinned and never evicted: the 21st login used to delete make demo's own ``.state/api_token``.
    """
    raw = token or new_token()
    with transaction.atomic():
        row, _ = ApiToken.objects.get_or_create(
            token_hash=hash_token(raw), defaults={"user": user, "pinned": token is not None}
        )
        if token is not None and not row.pinned:
            ApiToken.objects.filter(pk=row.pk).update(pinned=True)
        issued = ApiToken.objects.filter(user=user, pinned=False)
        keep = issued.values_list("pk", flat=True)[:MAX_TOKENS_PER_USER]
        issued.exclude(pk__in=list(keep)).delete()
    return raw


def user_for_token(raw: str) -> Any | None:
    row = ApiToken.objects.select_related("user").filter(token_hash=hash_token(raw)).first()
    return row.user if row is not None else None


def revoke_tokens(user: Any, keep: str | None = None) -> int:
    """Delete the user's tokens (all, or all but ``keep``); returns how many went."""
    rows = ApiToken.objects.filter(user=user)
    if keep is not None:
        rows = rows.exclude(token_hash=hash_token(keep))
    return rows.delete()[0]
