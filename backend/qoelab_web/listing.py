"""Long lists (issue 15): one way to paginate, sort and filter the experiment, sweep, trial and campaign
lists from the query string, with plain GET forms and links (no JavaScript needed).

``?page=`` (from 1), ``?per_page=`` (10..200, default 50), ``?sort=`` (a whitelist per list, ``-`` in
front for descending) and each list's filters. A bad value is a plain-text 400 naming the parameter and
its bound, as the rest of the app answers bad input (``per_page: must be an integer from 10 to 200, got
'5'``): a link never silently shows something else than it says.

The rows of a page come from Django's Paginator (one COUNT, then LIMIT/OFFSET); the lists annotate their
counts, so a page costs the same few queries whatever the number of rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponseBadRequest

PER_PAGE_DEFAULT = 50
PER_PAGE_MIN = 10
PER_PAGE_MAX = 200
PER_PAGE_CHOICES = (10, 25, 50, 100, 200)
TEXT_MAX = 200


class ListError(ValueError):
    """A query parameter out of its bounds; ``str()`` is the 400's body."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


def bad_request(exc: ListError) -> HttpResponseBadRequest:
    return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")


@dataclass(frozen=True)
class Filter:
    """One filter of a list. ``kind``: ``choice`` (one of ``choices``), ``date`` (YYYY-MM-DD) or ``text``."""

    name: str
    label: str
    kind: str = "choice"
    choices: Sequence[tuple[str, str]] = ()

    def clean(self, raw: str) -> Any:
        if self.kind == "choice":
            allowed = [v for v, _ in self.choices]
            if raw not in allowed:
                raise ListError(
                    self.name, f"must be one of {', '.join(allowed) or 'nothing here'}, got {raw!r}"
                )
            return raw
        if self.kind == "date":
            try:
                if len(raw) != 10:
                    raise ValueError
                return dt.date.fromisoformat(raw)
            except ValueError:
                raise ListError(self.name, f"must be a date YYYY-MM-DD, got {raw!r}") from None
        if len(raw) > TEXT_MAX:
            raise ListError(self.name, f"must be at most {TEXT_MAX} characters, got {len(raw)}")
        return raw


@dataclass
class Listing:
    """A list's parsed query: what to show and how to link to other pages of it."""

    sorts: dict[str, str]  # key -> label
    sort: str
    per_page: int
    page_number: int
    filters: Sequence[Filter]
    values: dict[str, Any]  # filter name -> cleaned value (only those given)
    raw: dict[str, str]  # filter name -> as written
    keep: dict[str, str] = field(default_factory=dict)  # other parameters kept in links (e.g. archived)
    default_sort: str = ""
    page: Page | None = None

    # -- query strings -------------------------------------------------------------------------
    def _params(self, **override: Any) -> dict[str, Any]:
        params: dict[str, Any] = dict(self.keep)
        params.update(self.raw)
        if self.sort != self.default_sort:
            params["sort"] = self.sort
        if self.per_page != PER_PAGE_DEFAULT:
            params["per_page"] = self.per_page
        params.update(override)
        return {k: v for k, v in params.items() if v not in (None, "")}

    def query(self, **override: Any) -> str:
        """``?a=b&...`` for this list with ``override`` (a value of None drops the parameter)."""
        params = self._params(**override)
        return "?" + urlencode(params) if params else "?"

    @property
    def current_query(self) -> str:
        return self.query(page=self.page_number if self.page_number > 1 else None)

    # -- template helpers ----------------------------------------------------------------------
    @property
    def count(self) -> int:
        return self.page.paginator.count if self.page else 0

    @property
    def count_text(self) -> str:
        """``51–100 of 2,340`` (``0 of 0`` for nothing)."""
        page = self.page
        if page is None or not self.count:
            return "0 of 0"
        return f"{page.start_index():,}–{page.end_index():,} of {self.count:,}"

    @property
    def fields(self) -> list[dict[str, Any]]:
        return [
            {
                "name": f.name,
                "label": f.label,
                "kind": f.kind,
                "choices": f.choices,
                "value": self.raw.get(f.name, ""),
            }
            for f in self.filters
        ]

    @property
    def sort_choices(self) -> list[tuple[str, str]]:
        out = []
        for key, label in self.sorts.items():
            out += [(key, f"{label} ↑"), (f"-{key}", f"{label} ↓")]
        return out

    @property
    def per_page_choices(self) -> list[int]:
        return sorted({*PER_PAGE_CHOICES, self.per_page})

    @property
    def hidden(self) -> list[tuple[str, str]]:
        return list(self.keep.items())

    @property
    def filtered(self) -> bool:
        return bool(self.raw)

    @property
    def links(self) -> dict[str, str | None]:
        page = self.page
        if page is None:
            return {}
        last = page.paginator.num_pages
        return {
            "first": self.query(page=None) if page.number > 1 else None,
            "prev": self.query(page=page.number - 1 if page.number > 2 else None)
            if page.has_previous()
            else None,
            "next": self.query(page=page.number + 1) if page.has_next() else None,
            "last": self.query(page=last) if page.number < last else None,
            "clear": self.query(**{f.name: None for f in self.filters}, page=None),
        }

    @property
    def sort_links(self) -> dict[str, str]:
        """Column header links: key -> the list sorted by it (reversed when it already is)."""
        return {key: self.sort_link(key) for key in self.sorts}

    def sort_link(self, key: str) -> str:
        """The link of a column header: ascending first, descending when already ascending."""
        target = f"-{key}" if self.sort == key else key
        return self.query(sort=None if target == self.default_sort else target, page=None)


def _int(request: HttpRequest, name: str, default: int, low: int, high: int | None) -> int:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    bound = f"from {low} to {high}" if high is not None else f"from {low}"
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise ListError(name, f"must be an integer {bound}, got {raw!r}")
    value = int(raw)
    if value < low or (high is not None and value > high):
        raise ListError(name, f"must be an integer {bound}, got {value}")
    return value


def parse(
    request: HttpRequest,
    *,
    sorts: dict[str, str],
    default_sort: str,
    filters: Sequence[Filter] = (),
    keep: Sequence[str] = (),
) -> Listing:
    """The list's query from ``request.GET``; ListError (-> 400) on a bad value."""
    per_page = _int(request, "per_page", PER_PAGE_DEFAULT, PER_PAGE_MIN, PER_PAGE_MAX)
    page_number = _int(request, "page", 1, 1, None)
    sort = request.GET.get("sort", "") or default_sort
    if sort.removeprefix("-") not in sorts:
        raise ListError(
            "sort", f"must be one of {', '.join(sorts)} (- in front for descending), got {sort!r}"
        )
    values: dict[str, Any] = {}
    raw: dict[str, str] = {}
    for f in filters:
        given = request.GET.get(f.name, "").strip()
        if given:
            values[f.name] = f.clean(given)
            raw[f.name] = given
    kept = {k: request.GET[k] for k in keep if request.GET.get(k)}
    return Listing(
        sorts=sorts,
        sort=sort,
        per_page=per_page,
        page_number=page_number,
        filters=filters,
        values=values,
        raw=raw,
        keep=kept,
        default_sort=default_sort,
    )


def paginate(
    listing: Listing, queryset: Any, order: Callable[[str], Sequence[Any]] | dict[str, Sequence[Any]]
) -> Page:
    """Order ``queryset`` by the listing's sort and cut out its page; ListError past the last page.

    ``order`` maps a sort key to the ``order_by`` expressions of its ascending order (a tie-breaker on
    the primary key is added); descending reverses each.
    """
    key = listing.sort.removeprefix("-")
    exprs = list(order(key) if callable(order) else order[key])
    exprs.append("pk")
    if listing.sort.startswith("-"):
        exprs = [_desc(e) for e in exprs]
    paginator = Paginator(queryset.order_by(*exprs), listing.per_page)
    last = paginator.num_pages
    if listing.page_number > last:
        raise ListError("page", f"must be an integer from 1 to {last}, got {listing.page_number}")
    listing.page = paginator.page(listing.page_number)
    return listing.page


def _desc(expr: Any) -> Any:
    if isinstance(expr, str):
        return expr[1:] if expr.startswith("-") else f"-{expr}"
    if hasattr(expr, "descending"):  # an OrderBy: flip it, keep its nulls placement
        flipped = expr.copy()
        flipped.descending = not expr.descending
        if expr.nulls_last or expr.nulls_first:
            flipped.nulls_last, flipped.nulls_first = expr.nulls_last, expr.nulls_first
        return flipped
    return expr.desc()


def date_range(listing: Listing, field_name: str) -> dict[str, Any]:
    """``from``/``to`` (inclusive days) as lookups on a datetime field; ListError if from is after to."""
    start, end = listing.values.get("from"), listing.values.get("to")
    if start and end and start > end:
        raise ListError("to", f"must not be before from ({start}), got {end}")
    lookups: dict[str, Any] = {}
    if start:
        lookups[f"{field_name}__date__gte"] = start
    if end:
        lookups[f"{field_name}__date__lte"] = end
    return lookups
