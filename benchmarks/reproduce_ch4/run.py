"""Write docs/reproduction/ch4.md from finished runs of the thesis' chapter-4 presets.

Reads the sweeps of Figs. 4.6-4.8 from a running lab (``make demo`` starts one), or submits the
three presets first and waits (``--run quick``), then writes between the report's markers: what
ran (dates, host, TCP read back, tool versions), T, X and X/T per protocol and condition (mean ±
95 % CI over the runs), the dashboard's charts (screenshots in Debian's Chromium) and every
finding's verdict with its numbers (``qoelab.findings``). The prose around the markers (why a
finding does not hold) is written by a person.

    .venv/bin/python benchmarks/reproduce_ch4/run.py --run quick --api URL --token T --password P
    .venv/bin/python benchmarks/reproduce_ch4/run.py --sweep ch4-fig46=12 --sweep ch4-fig47=13 \
        --token T --password P
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path
from typing import Any

from qoelab import findings, presets
from qoelab.client import ApiClient
from qoelab.findings.base import fmt_num, mean_ci
from qoelab.sweeps import SweepSpec, submit, wait
from qoelab.units import format_duration, format_rate

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "reproduction" / "ch4.md"
IMG = DOC.parent / "img"
BEGIN, END = "<!-- ch4-report:begin -->", "<!-- ch4-report:end -->"
FIGURES = ("ch4-fig46", "ch4-fig47", "ch4-fig48")
X_PARAM = {"ch4-fig46": "rate", "ch4-fig47": "delay", "ch4-fig48": "loss"}
METRICS = (("T_ms", "T (ms)", 1.0), ("bytes_down", "X (KB)", 1e3), ("rate_bps", "X/T (Mbit/s)", 1e6))


def fmt_x(param: str, value: Any) -> str:
    v = float(value)
    if param == "rate":
        return format_rate(v)
    return format_duration(v) if param == "delay" else f"{v:g} %"


def condition_table(rows: list[dict[str, Any]], x: str) -> list[str]:
    """T, X and X/T per (facet rate, x, protocol): mean ± 95 % CI over the trials."""
    groups: dict[tuple, list[dict[str, float]]] = collections.defaultdict(list)
    for r in rows:
        p = r["params"]
        facet = p.get("rate") if x != "rate" else None
        groups[(facet or 0.0, float(p[x]), p["protocol"])].append(r["summary"])
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


def provenance_lines(api: ApiClient, sweep_id: int) -> list[str]:
    """Where and how the sweep ran, from one of its succeeded trials and the sweep's span."""
    trials = [t for t in api.get_all("/api/trials/", sweep=sweep_id) if t["status"] == "succeeded"]
    if not trials:
        return ["- no succeeded trial"]
    detail = api.get(f"/api/trials/{trials[0]['id']}/")
    prov, link = detail.get("provenance") or {}, (detail.get("link") or {}).get("link") or {}
    tcp = link.get("tcp") or {}
    started = min(t["started_at"] for t in trials)[:16].replace("T", " ")
    finished = max(t["finished_at"] for t in trials)[:16].replace("T", " ")
    tools = prov.get("tools") or {}
    return [
        f"- {len(trials)} succeeded trials, {started} – {finished} UTC, "
        f"host kernel {prov.get('host', {}).get('kernel')}",
        f"- TCP read back in both namespaces: {tcp.get('cc')}, SACK {'on' if tcp.get('sack') else 'off'}",
        f"- link backend: {link.get('backend')}; code {prov.get('code_revision')}",
        "- tools: " + "; ".join(f"{k} {v}" for k, v in sorted(tools.items()) if v)[:600],
    ]


def screenshot_charts(
    base: str, username: str, password: str, sweeps: dict[str, int]
) -> dict[str, list[str]]:
    """PNG of each preset chart of each sweep, as the dashboard draws it."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO / "benchmarks"))
    import dashboard_shots

    with sync_playwright() as p:
        browser, page = dashboard_shots.logged_in_page(p, base, username, password)
        shots = {
            key: dashboard_shots.save_charts(page, base, sweep_id, IMG, key)
            for key, sweep_id in sweeps.items()
        }
        browser.close()
    return shots


# Which figures' trials the checks read together. The rate and delay checks pool Figs. 4.6 and
# 4.7 (the 10 ms points of 4.7 add runs to the rate checks); Fig. 4.8, at 100 ms and with loss, is
# judged on its own, as its sweep page judges it: pooled with the 0 %-loss points of the others it
# would only add scopes with a single value of x, which cannot test a claim.
GROUPS = (("ch4-fig46", "ch4-fig47"), ("ch4-fig48",))


def report(api: ApiClient, sweeps: dict[str, int], shots: dict[str, list[str]]) -> str:
    out: list[str] = []
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for key, sweep_id in sweeps.items():
        preset = presets.get(key)
        body = api.get(f"/api/sweeps/{sweep_id}/findings/", trials=1)
        rows = rows_of[key] = body.get("trials") or []
        out += [
            f"### {preset.figure}: {preset.title} (sweep {sweep_id})",
            "",
            *provenance_lines(api, sweep_id),
            "",
        ]
        out += [*(f"![{preset.figure} {n}](img/{n})" for n in shots.get(key, [])), ""]
        out += condition_table(rows, X_PARAM[key]) + [""]
    found = [
        f
        for group in GROUPS
        for f in findings.evaluate("ch4", [r for k in group for r in rows_of.get(k, [])])
    ]
    out.append(findings.render_markdown(found, title="Findings, checked by code", level=3))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--sweep", action="append", metavar="PRESET=ID",
                       help="a finished sweep of a preset, e.g. ch4-fig46=12; repeat per figure")  # fmt: skip
    which.add_argument("--run", choices=presets.SIZES, help="submit the three presets at this size and wait")
    parser.add_argument("--api", default=os.environ.get("QOELAB_API_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("QOELAB_API_TOKEN", ""))
    parser.add_argument("--user", default="researcher", help="dashboard login for the chart screenshots")
    parser.add_argument("--password", help="its password; without it no charts are taken")
    args = parser.parse_args(argv)
    api = ApiClient(args.api, args.token)
    if args.run:
        sweeps = {k: int(submit(api, SweepSpec.model_validate(presets.get(k).sweep_spec(args.run)))["id"])
                  for k in FIGURES}  # fmt: skip
        print(f"submitted {sweeps}", flush=True)
        t0 = time.monotonic()
        for sweep_id in sweeps.values():
            wait(api, sweep_id, lambda c, _b: print(f"{c['done']}/{c['total']}", end="\r", flush=True))
        print(f"\nall finished after {(time.monotonic() - t0) / 60:.0f} min")
    else:
        pairs = [item.split("=", 1) for item in args.sweep]
        bad = [
            item
            for item, pair in zip(args.sweep, pairs, strict=True)
            if len(pair) != 2 or pair[0] not in FIGURES
        ]
        if bad:
            parser.error(f"--sweep takes PRESET=ID with PRESET one of {', '.join(FIGURES)}, got {bad[0]!r}")
        sweeps = {key: int(sweep_id) for key, sweep_id in sorted(pairs)}
    shots = screenshot_charts(args.api, args.user, args.password, sweeps) if args.password else {}
    text = report(api, sweeps, shots)
    doc = DOC.read_text()
    DOC.write_text(doc[: doc.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + doc[doc.index(END) :])
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
