"""Thesis 001's macrobenchmark findings (Tables 6.1-6.3): PostMark, FileBench varmail and fileserver.

The runs of three sb001 checks (``sb001.CHECKS`` declares them); split from sb001.py to keep it
readable. Source: ../shared/notes/seed-storage-bench.md §5, Tables 6.1-6.3.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from qoelab.findings import sb001_util as u
from qoelab.findings.base import Comparison, Scope, fmt_num, lower
from qoelab.findings.sb001_util import by_series, metric, of, stat, times
from qoelab.stats import mean_ci

Run = tuple[list[Comparison], list[str]]
# Table 6.1: iSCSI's PostMark time is ≥ 50× below NFS's and Swift's in every row; "≫" is checked
# as 10× (the guest's CPU cost per transaction is added to every target).
POSTMARK_FACTOR = 10.0
# Table 6.3: Swift's fileserver IOPS stay within 98-104 (100 Mbit/s) and 87-111 (1 Gbit/s) over the
# four rows: every impaired row within 0.7-1.3× the ideal row's.
SWIFT_FLAT = (0.7, 1.3)


def _complete_rows(sc: Scope, bench: str, q: str, m: Any, gaps: list[str]) -> Iterator[tuple[Any, ...]]:
    """Each network row that has all three targets: (row, its rows, where, NFS's and Swift's stat);
    a row missing a target adds a gap instead."""
    for row, here in u.by_row(sc).items():
        w = u.where_of(sc, f"the {row} row")
        miss = u.missing(here, w, bench)
        gaps += miss
        if not miss:
            nfs = stat(sc, of(here, target="nfs"), row, "NFS", q, m)
            yield row, here, w, nfs, stat(sc, of(here, target="swift"), row, "Swift", q, m)


def postmark_order(sc: Scope) -> Run:
    comps, gaps = [], []
    m, q = metric("postmark_s"), "completion time (s)"
    for row, here, w, nfs, swift in _complete_rows(sc, "PostMark", q, m, gaps):
        for label, rows in by_series(here, "iscsi").items():
            i = stat(sc, rows, row, label, q, m)
            k = f"{fmt_num(POSTMARK_FACTOR)} × {label}"
            comps += [lower(times(i, POSTMARK_FACTOR), nfs, k, "NFS", f"{w} (s)"),
                      lower(times(i, POSTMARK_FACTOR), swift, k, "Swift", f"{w} (s)")]  # fmt: skip
        if row != "realistic":
            comps.append(lower(nfs, swift, "NFS", "Swift", f"{w} (s)"))
    return comps, gaps


def _iops_order(sc: Scope, bench: str, flat: bool) -> Run:
    comps, gaps = [], []
    m, q = metric("iops"), "IOPS"
    rows_by = u.by_row(sc)
    for row, here, w, nfs, swift in _complete_rows(sc, bench, q, m, gaps):
        for label, rows in by_series(here, "iscsi").items():
            i = stat(sc, rows, row, label, q, m)
            below = (nfs, "NFS") if row == "ideal" else (swift, "Swift")
            comps.append(lower(below[0], i, below[1], label, w))
        if row == "ideal":
            comps.append(lower(swift, nfs, "Swift", "NFS", w))
        else:
            comps.append(lower(nfs, swift, "NFS", "Swift", w))
    if flat:
        ideal_swift = of(rows_by.get("ideal", []), target="swift")
        impaired = [(row, of(here, target="swift")) for row, here in rows_by.items() if row != "ideal"]
        if not ideal_swift and any(rows for _, rows in impaired):
            gaps.append(
                f"no ideal-network Swift {bench} trials to compare the other rows with at {u.where_of(sc)}"
            )
        elif ideal_swift:
            base = mean_ci(metric("iops")(r) for r in ideal_swift)
            lo, hi = times(base, SWIFT_FLAT[0]), times(base, SWIFT_FLAT[1])
            for row, rows in impaired:
                if rows:
                    s = mean_ci(metric("iops")(r) for r in rows)
                    w = f"{u.where_of(sc, f'the {row} row')} vs ideal"
                    low, high = (
                        f"{fmt_num(SWIFT_FLAT[0])} × Swift ideal",
                        f"{fmt_num(SWIFT_FLAT[1])} × Swift ideal",
                    )
                    comps += [lower(lo, s, low, f"Swift {row}", w), lower(s, hi, f"Swift {row}", high, w)]
    return comps, gaps


def varmail_order(sc: Scope) -> Run:
    return _iops_order(sc, "varmail", flat=False)


def fileserver_order(sc: Scope) -> Run:
    return _iops_order(sc, "fileserver", flat=True)
