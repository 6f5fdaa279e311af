"""Request parsers that refuse, with a 400 naming the field, what PostgreSQL or Python cannot hold.

One rule for every body the API parses (JSON, form, multipart) and every query string
(``qoelab_web.middleware``), instead of a check per field (docs/security.md):

- JSON nested deeper than ``MAX_DEPTH`` is refused *before* it is parsed (a scan of the bytes), so
  100,000 ``[`` cannot exhaust the parser's recursion;
- no text (value or key) may hold a NUL character or a lone UTF-16 surrogate: PostgreSQL refuses
  NUL in ``text`` and ``jsonb`` and a surrogate cannot be encoded as UTF-8;
- numbers must be finite (``1e400`` parses as infinity) and integers fit in 64 bits;
- a JSON body is at most ``max_json_bytes`` of its view (1 MiB by default; the worker protocol's
  views allow ``DATA_UPLOAD_MAX_MEMORY_SIZE``): 413 otherwise, before it is read when it says so.
"""

from __future__ import annotations

import io
import json
import math
import re
from typing import Any

from django.http import QueryDict
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

MAX_DEPTH = 64
INT64 = 2**63
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth_exceeds(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True if the JSON text ``raw`` nests arrays/objects deeper than ``limit`` (brackets in strings
    do not count). Linear in the size and cheap when the text has few brackets."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', raw)):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _text_problem(s: str) -> str | None:
    if "\x00" in s:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (e.g. \\ud800), which is not valid Unicode"
    return None


def _show(key: str) -> str:
    """A key as it may appear in a field path: control characters and surrogates escaped."""
    return json.dumps(key)[1:-1] if _text_problem(key) else key


def value_problems(value: Any, path: str = "", limit: int = 20) -> list[dict[str, str]]:
    """``[{field, message}]`` for every unstorable text or number in parsed JSON ``value``."""
    out: list[dict[str, str]] = []
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack and len(out) < limit:
        where, v = stack.pop()
        if isinstance(v, str):
            if problem := _text_problem(v):
                out.append({"field": where or "body", "message": problem})
        elif isinstance(v, bool) or v is None:
            pass
        elif isinstance(v, int):
            if not -INT64 <= v < INT64:
                out.append({"field": where or "body", "message": "is an integer beyond 64 bits"})
        elif isinstance(v, float):
            if not math.isfinite(v):
                out.append({"field": where or "body", "message": "is not a finite number"})
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                name = f"{where}.{_show(str(k))}" if where else _show(str(k))
                if problem := _text_problem(str(k)):
                    out.append({"field": name, "message": f"the key {problem}"})
                stack.append((name, item))
        elif isinstance(v, list | tuple):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(v))))
    return out


def query_problems(query: QueryDict) -> list[dict[str, str]]:
    """The same rule for a query string or form body: NUL or surrogates in a name or value."""
    out = []
    for key, values in query.lists():
        if problem := _text_problem(key):
            out.append({"field": _show(key), "message": f"the name {problem}"})
        out.extend({"field": _show(key), "message": p} for p in map(_text_problem, values) if p)
    return out


def refuse(problems: list[dict[str, str]]) -> None:
    if problems:
        raise ValidationError({p["field"]: [p["message"]] for p in problems})


# A researcher's JSON (a sweep spec, a campaign) fits in far less; the workers' result reports
# (samples of a long trial) may be larger, and their views raise it (``max_json_bytes``).
DEFAULT_JSON_BYTES = 1024**2


class PayloadTooLarge(APIException):
    status_code = 413
    default_code = "payload_too_large"


def json_limit(parser_context: Any) -> int:
    view = (parser_context or {}).get("view")
    return int(getattr(view, "max_json_bytes", DEFAULT_JSON_BYTES))


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = json_limit(parser_context)
        request = (parser_context or {}).get("request")
        declared = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        if declared > limit:  # refused before a byte of it is read
            raise PayloadTooLarge(f"the JSON body is {declared} bytes; this endpoint takes at most {limit}")
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(f"the JSON body is over {limit} bytes; this endpoint takes at most {limit}")
        if json_depth_exceeds(raw):
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels")
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:  # not reached with the depth bound; kept as a last guard
            raise ParseError("JSON parse error - nested too deeply") from None
        refuse(value_problems(data))
        return data


class SafeFormParser(FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        refuse(query_problems(data))
        return data


class SafeMultiPartParser(MultiPartParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        problems = query_problems(parsed.data)
        for key, files in parsed.files.lists():
            problems.extend(
                {"field": _show(key), "message": f"the file name {p}"}
                for p in (_text_problem(f.name or "") for f in files)
                if p
            )
        refuse(problems)
        return parsed
