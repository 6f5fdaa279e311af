"""``Authorization: Token <token>`` against hashed rows (DRF's TokenAuthentication stores them plain)."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from accounts.models import ApiToken
from qoelab_web.tokens import hash_token


class HashedTokenAuthentication(authentication.TokenAuthentication):
    """Same header and answers as DRF's; the OpenAPI scheme (tokenAuth) follows the subclass."""

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        row = ApiToken.objects.select_related("user").filter(token_hash=hash_token(key)).first()
        if row is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not row.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return row.user, row
