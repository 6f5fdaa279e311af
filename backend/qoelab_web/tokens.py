"""Bearer tokens of every kind (researcher API, lab host, evaluator link): made and hashed one way.

A token is 256 random bits, so a plain SHA-256 is enough to store it (no password stretching): a
database dump gives away no working credential, and a lookup is one indexed equality.
"""

from __future__ import annotations

import hashlib
import secrets


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)
