"""Write docs/reproduction/ch4.md's data block from result files of the thesis' chapter-4 presets.

The rows come from files alone (issue 32): by default the committed ones the ``ch4`` report reads
(``qoelab.findings.committed.COMMITTED["ch4"]``: ``benchmarks/presets/run.py`` runs of the Reproduce
page's presets), or any JSON-lines files named with ``--from`` (``qoelab sweep export`` writes the
same rows for a lab's sweeps). Per file: what ran (dates, machine, kernel, code, TCP read back,
link backend, tools, failed trials with their reasons), then T, X and X/T per protocol and condition
(mean ± 95 % CI over the runs); last, every finding's verdict with its numbers, the same checks as
``qoelab report ch4 --from-committed``. The prose around the markers is written by a person.

    .venv/bin/python benchmarks/reproduce_ch4/run.py              # the committed files, into the doc
    .venv/bin/python benchmarks/reproduce_ch4/run.py --print      # the block on stdout, doc untouched
    .venv/bin/python benchmarks/reproduce_ch4/run.py --from a.jsonl b.jsonl --print
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qoelab import findings, presets
from qoelab.findings.base import fmt_num, machine
from qoelab.findings.committed import COMMITTED, Source, evaluate_files
from qoelab.stats import mean_ci
from qoelab.units import format_duration, format_rate

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "reproduction" / "ch4.md"
BEGIN, END = "<!-- ch4-report:begin -->", "<!-- ch4-report:end -->"
X_PARAM = {"ch4-fig46": "rate", "ch4-fig47": "delay", "ch4-fig48": "loss"}
METRICS = (("T_ms", "T (ms)", 1.0), ("bytes_down", "X (KB)", 1e3), ("rate_bps", "X/T (Mbit/s)", 1e6))


def fmt_x(param: str, value: Any) -> str:
    v = float(value)
    if param == "rate":
        return format_rate(v)
    return format_duration(v) if param == "delay" else f"{v:g} %"


def preset_of(path: Path) -> str | None:
    """The preset a file holds, from its name (``ch4-fig47-quick.jsonl``), else None."""
    found = re.search(r"ch4-fig4[678]", path.name)
    return found.group(0) if found else None


def x_of(rows: Sequence[dict[str, Any]], preset: str | None) -> str:
    """The swept parameter: the preset's, or the first of rate, delay and loss that varies."""
    if preset:
        return X_PARAM[preset]
    varying = [p for p in ("rate", "delay", "loss") if len({r["params"].get(p) for r in rows}) > 1]
    return varying[0] if varying else "rate"


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def condition_table(rows: list[dict[str, Any]], x: str) -> list[str]:
    """T, X and X/T per (facet rate, x, protocol): mean ± 95 % CI over the trials."""
    groups: dict[tuple, list[dict[str, float]]] = collections.defaultdict(list)
    for r in rows:
        p = r["params"]
        facet = p.get("rate") if x != "rate" else None
        groups[(facet or 0.0, float(p[x] or 0.0), p["protocol"])].append(r["summary"])
    head = "| " + ("rate | " if x != "rate" else "") + f"{x} | protocol | n | "
    head += " | ".join(label for _, label, _ in METRICS) + " |"
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for (facet, xv, protocol), summaries in sorted(groups.items()):
        cells = [format_rate(facet)] if x != "rate" else []
        cells += [fmt_x(x, xv), protocol, str(len(summaries))]
        for key, _, scale in METRICS:
            s = mean_ci(v[key] / scale for v in summaries if key in v)
            ok = s.ci_high is not None and s.mean is not None
            half = f" ± {fmt_num(s.ci_high - s.mean)}" if ok else ""  # type: ignore[operator]
            cells.append(f"{fmt_num(s.mean)}{half}" if s.mean is not None else "—")
        out.append("| " + " | ".join(cells) + " |")
    return out


def _joined(values: Sequence[Any]) -> str:
    seen = sorted({str(v) for v in values if v})
    return ", ".join(seen) if seen else "not recorded"


def provenance_lines(lines: list[dict[str, Any]]) -> list[str]:
    """Where and how a file's trials ran, from the rows themselves."""
    ok = [r for r in lines if "error" not in r and r.get("summary")]
    failed = [r for r in lines if "error" in r]
    if not lines:
        return ["- no trials"]
    at = sorted(r["at"] for r in lines if r.get("at"))
    hosts = [r.get("host") or {} for r in lines]
    tcp = [(r.get("link") or {}).get("tcp") for r in lines]
    tcp_text = _joined([f"{t.get('cc')}, SACK {'on' if t.get('sack') else 'off'}" for t in tcp if t])
    if any(t is None for t in tcp) and any(tcp):
        tcp_text += " (not recorded for the earlier rows)"
    tools: dict[str, set[str]] = collections.defaultdict(set)
    for r in lines:
        for k, v in ((r.get("provenance") or {}).get("tools") or {}).items():
            if v:
                tools[k].add(str(v))
    span = "dates not recorded"
    if at:
        span = f"{at[0][:16].replace('T', ' ')} – {at[-1][:16].replace('T', ' ')} UTC"
    out = [
        f"- {len(ok)} succeeded and {len(failed)} failed trials, {span}",
        f"- machine: {_joined([machine(h) for h in hosts])}",
        f"- kernel: {_joined([h.get('kernel') for h in hosts])}",
        f"- code: {_joined([h.get('code_revision') for h in hosts])}",
        f"- TCP read back in both namespaces: {tcp_text}",
        f"- link backend: {_joined([(r.get('link') or {}).get('backend') for r in lines])}",
    ]
    if tools:
        out.append("- tools: " + "; ".join(f"{k} {', '.join(sorted(v))}" for k, v in sorted(tools.items())))
    for r in failed:
        point = ", ".join(f"{k} {v}" for k, v in sorted((r.get("point") or {}).items()))
        out.append(f"- failed (repetition {r.get('rep')}, {point}): {r['error'][:300]}")
    return out


def report(paths: Sequence[Path]) -> str:
    out: list[str] = []
    for path in paths:
        lines = read_lines(path)
        key = preset_of(path)
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        title = f"{presets.get(key).figure}: {presets.get(key).title}" if key else "Results"
        ok = [r for r in lines if "error" not in r and r.get("summary")]
        out += [f"### {title} (`{shown}`)", "", *provenance_lines(lines), ""]
        out += condition_table(ok, x_of(ok, key)) + [""]
    sources = [Source(str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)) for p in paths]
    found = evaluate_files("ch4", sources, REPO)
    out.append(findings.render_markdown(found, title="Findings, checked by code", level=3))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="files", metavar="FILE", nargs="+", type=Path,
                        help="result files instead of the committed ones")  # fmt: skip
    parser.add_argument("--print", action="store_true", help="print the block; leave the doc alone")
    args = parser.parse_args(argv)
    committed = [REPO / s.path for s in COMMITTED["ch4"].sources]
    paths = [p.resolve() for p in args.files] if args.files else committed
    text = report(paths)
    if args.print:
        print(text)
        return 0
    doc = DOC.read_text()
    DOC.write_text(doc[: doc.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + doc[doc.index(END) :])
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
