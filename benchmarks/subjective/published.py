"""The subject models' figures on public rating sets beside the published ones (docs/ratings.md's block).

    .venv/bin/python benchmarks/subjective/published.py              # print the table
    .venv/bin/python benchmarks/subjective/published.py --write-doc  # put it into docs/ratings.md

Reads tests/data/ratings/ (the sets and ``published.json``, each figure with its source); nothing
is measured, so the table depends only on the committed data and the code.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workers"))
sys.path.insert(0, str(REPO / "benchmarks"))
from docblock import write_block  # noqa: E402

from qoelab.subjective import models, screening, votes  # noqa: E402

DATA = REPO / "tests" / "data" / "ratings"
DOC = REPO / "docs" / "ratings.md"
BEGIN, END = "<!-- subjective-published:begin -->", "<!-- subjective-published:end -->"


def _lab(check: dict[str, Any], model: str, cache: dict[tuple[str, str, str], dict]) -> float | None:
    exclude = check.get("exclude", "")
    key = (check["dataset"], model, exclude)
    if key not in cache:
        fmt = "matrix" if check["dataset"].endswith("sample.csv") else "long"
        v = votes.read(DATA / check["dataset"], fmt)
        if exclude == "bt500":
            v = screening.without_bt500_rejected(v)
        cache[key] = models.fit(v, model).summary()
    return cache[key][check["quantity"]]


def render() -> str:
    spec = json.loads((DATA / "published.json").read_text())
    cache: dict[tuple[str, str, str], dict] = {}
    lines = [
        "| set | model | figure | published | this lab | agrees |",
        "|---|---|---|---|---|---|",
    ]
    for check in spec["checks"]:
        for model in check["models"]:
            value = _lab(check, model, cache)
            if "decimals" in check:
                d = check["decimals"]
                shown, ok = f"{value:.{d + 2}f}", round(value, d) == round(check["published"], d)
                bound = f"at {d} decimals"
            else:
                shown, ok = f"{value:.6f}", abs(value - check["published"]) <= check["tolerance"]
                bound = f"within {check['tolerance']:g}"
            verdict = f"yes ({bound})" if ok else f"**no**: {check.get('known_mismatch', 'unexpected')}"
            model_name = model + (" after BT.500 rejection" if check.get("exclude") == "bt500" else "")
            lines.append(
                f"| `{check['dataset']}` | {model_name} | {check['quantity']} | {check['published']:g} "
                f"({check['source']}) | {shown} | {verdict} |"
            )
    return "\n".join(lines)


PLAN_BEGIN, PLAN_END = "<!-- subjective-planning:begin -->", "<!-- subjective-planning:end -->"
PLAN_SETS = ("vqeg_hd3.csv", "nflx_public.csv", "nflx_public_last4outliers.csv")
HALF_WIDTHS = (0.5, 0.3, 0.2)


def render_planning() -> str:
    """Raters a target 95 % half-width needs, from each public set's fitted inconsistencies.

    Under the subject model a stimulus rated by I raters has the half-width z / sqrt(sum upsilon^-2)
    = z u / sqrt(I) with u = mean(upsilon^-2)^-1/2, so I = (z u / h)^2 for a target half-width h.
    """
    lines = [
        "| set | raters | u (model) | half-width now | "
        + " | ".join(f"raters for ±{h:g}" for h in HALF_WIDTHS)
        + " |",
        "|---|---|---|---|" + "---|" * len(HALF_WIDTHS),
    ]
    for name in PLAN_SETS:
        fit = models.fit(votes.read(DATA / name), "p913")
        ups = [r.inconsistency for r in fit.raters if r.inconsistency]
        u = sum(x**-2 for x in ups) ** -0.5 * len(ups) ** 0.5
        now = sum((s.ci_high - s.ci_low) / 2 for s in fit.stimuli) / len(fit.stimuli)  # type: ignore[operator]
        need = " | ".join(str(math.ceil((models.Z95 * u / h) ** 2)) for h in HALF_WIDTHS)
        lines.append(f"| `{name}` | {len(ups)} | {u:.3f} | {now:.3f} | {need} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-doc", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}")
    args = p.parse_args()
    table, planning = render(), render_planning()
    if args.write_doc:
        write_block(DOC, BEGIN, END, table)
        write_block(DOC, PLAN_BEGIN, PLAN_END, planning)
        print(f"{DOC.relative_to(REPO)}: tables written")
    else:
        print(table + "\n\n" + planning)


if __name__ == "__main__":
    main()
