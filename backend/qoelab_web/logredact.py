"""Keep credentials out of every log line: evaluator link tokens in paths, ``token=`` values, and
``Authorization`` headers are replaced by ``[redacted]`` before a handler writes the record.

Installed as a handler filter in settings.LOGGING (root console, django.server) and, in a gunicorn
worker, on gunicorn's own handlers (wsgi.py), so every record that reaches a file passes through it.
"""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"
PATTERNS = [
    # /rate/<token>/..., including /rate/<token> at the end of a line or before a quote
    (
        re.compile(r"(/rate/)(?!state/|consent/|screens/|ratings/|slot/|session/)[A-Za-z0-9_\-.~%]{8,}"),
        r"\1" + REDACTED,
    ),
    # token=..., api_token=..., password=... in query strings, forms and messages
    (
        re.compile(r"((?:\w*token|password|secret|key)=)[^&\s'\"<>]+", re.IGNORECASE),
        r"\1" + REDACTED,
    ),
    # Authorization: Token|Host|Evaluator|Bearer <secret>
    (
        re.compile(r"\b(Token|Host|Evaluator|Bearer|Basic)(\s+)[A-Za-z0-9_\-.~+/=]{16,}"),
        r"\1\2" + REDACTED,
    ),
]


def redact(text: str) -> str:
    for pattern, repl in PATTERNS:
        text = pattern.sub(repl, text)
    return text


class RedactTokens(logging.Filter):
    """Rewrites the record's message (with its args merged in) when it contains a credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler's own error path
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install_on_loggers(*names: str) -> None:
    """Add the filter to the handlers of loggers configured outside Django (gunicorn's)."""
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RedactTokens) for f in handler.filters):
                handler.addFilter(RedactTokens())
