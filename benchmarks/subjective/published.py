"""The subject models' figures on public rating sets beside the published ones (docs/ratings.md's block).

    .venv/bin/python benchmarks/subjective/published.py              # print the table
    .venv/bin/python benchmarks/subjective/published.py --write-doc  # put it into docs/ratings.md

Reads tests/data/ratings/ (the sets and ``published.json``, each figure with its source); nothing
is measured, so the table depends only on the committed data and the code.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-doc", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}")
    args = p.parse_args()
    table = render()
    if args.write_doc:
        write_block(DOC, BEGIN, END, table)
        print(f"{DOC.relative_to(REPO)}: table written")
    else:
        print(table)


if __name__ == "__main__":
    main()
