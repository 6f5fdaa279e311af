"""The findings from result files alone: the files committed with the lab, or any the user names.

``qoelab report FAMILY --from FILE...`` and ``qoelab report all --from-committed`` read rows from
JSON-lines files (no database, no network) and run the same checks as the sweep page. A row is
``{"params": resolved, "summary": {...}}``, optionally with ``"host": {"cpu", "bogomips"}``; a row
with ``"error"`` (a failed run) or without a summary is left out. The thin-client benchmark's run
records (``benchmarks/thinclient/results``) are read through their experiment presets.

``COMMITTED`` says which committed files feed each family's verdicts, and which checks a file must
not feed (with the reason): the docs quote what :func:`committed_report` prints. A check whose
figure has no committed rows yet (ch4's Fig. 4.8) says *not run* with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qoelab.errors import QoelabError
from qoelab.findings import HOST_BOUND, NOT_RUN, PAPER_VALUES, REPORT_TITLES, get_report
from qoelab.findings.base import Finding, normalise

REPO = Path(__file__).resolve().parents[3]
Condition = Literal["paper", "scaled", "substituted"]


@dataclass(frozen=True)
class Source:
    """One committed result file and what it may decide."""

    path: str  # relative to the repository's root
    # check name -> why this file's rows must not feed it
    not_for: Mapping[str, str] = field(default_factory=dict)
    # When set, the only checks this file feeds (an experiment made for one figure)
    only_for: tuple[str, ...] = ()

    def feeds(self, check: str) -> bool:
        return check not in self.not_for and (not self.only_for or check in self.only_for)


@dataclass(frozen=True)
class Family:
    sources: tuple[Source, ...]
    # How far the lab's condition is from the paper's, for every check of the family (docs say how).
    condition: Condition
    why_condition: str
    not_run: str = ""  # why the family has no committed file yet


_PPOLL = (
    "apt-bdl's superseded ppoll loop polled every open socket on each wake-up, so its CPU per bit "
    "measured the loop, not the sessions (docs/storage-apt.md)"
)
_CH4 = ("ch4-fig46-quick", "ch4-fig46-full", "ch4-fig47-quick", "ch4-fig48-quick")
# batch-1mb-swift-host: Swift with rclone on the host (swift_client=host), each round on a fresh mount.
_SB = ("meta-rtt", "batch-4kb", "batch-1mb", "batch-1mb-swift-host", "batch-16mb", "single", "schedulers",
       "schedulers-16mb", "macro")  # fmt: skip

COMMITTED: dict[str, Family] = {
    "ch2": Family(
        (
            Source("benchmarks/storage_apt/results.jsonl", not_for={"session_cpu_overhead": _PPOLL}),
            Source("benchmarks/storage_apt/results-epoll.jsonl"),
        ),
        "scaled",
        "200 Mbit/s and 20 ms one way on one 2-core host instead of the paper's 900 Mbit/s testbed",
    ),
    "ch3": Family(
        (
            Source("benchmarks/vose/results.jsonl"),
            # Fig. 3.12 again, 5 repetitions on one Intel Xeon (2026-12-06): the devices' checks.
            Source("benchmarks/vose/ipsec-2026-12-06.jsonl"),
            # AES-NI against vose, 60 interleaved pairs on the same Xeon: the validation's precision.
            Source("benchmarks/vose/validate-aes-2026-12-06.jsonl"),
        ),
        "scaled",
        "a veth pair on one 2-core host with emulated devices instead of the thesis' offload hardware",
    ),
    "ch4": Family(
        # The Reproduce page's presets run here by benchmarks/presets/run.py (repetitions outermost).
        tuple(Source(f"benchmarks/presets/results/{n}.jsonl") for n in _CH4),
        "scaled",
        "the namespace desktop on one 2-core host at the thesis' rates instead of its KVM testbed",
    ),
    "ch4-dcr": Family(
        (),
        "paper",
        "the thesis' DCR method, aspects and conditions (ITU-T P.910), rated by the lab's evaluators",
        not_run="needs ratings: no chapter-4 rating campaign has been run here yet (docs/ratings.md, "
        '"A real pilot")',
    ),
    "tc002": Family(
        (
            *(Source(f"benchmarks/thinclient/results/{n}.jsonl") for n in ("main", "heavy")),
            # E8, the WAN delay sweep of Fig. 14, at 7-70 ms: made for the T_I150-over-delay claim;
            # the other checks are about the 20 ms condition of main and heavy.
            Source("benchmarks/thinclient/results/e8.jsonl", only_for=("t_interval_vs_delay",)),
        ),
        "substituted",
        "Linux TCP (RACK, CA_Loss, 200 ms RTO floor) in namespaces instead of ns-2 FullTCP",
    ),
    "sb001": Family(
        tuple(Source(f"benchmarks/storage_bench/results/{n}.jsonl") for n in _SB),
        "substituted",
        "bfq for CFQ, nfs-ganesha, tgt and rclone for the kernel servers and CloudFuse, a TCG guest client",
    ),
}


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The succeeded rows of one file; a line that is not a JSON object names the file and line."""
    rows = []
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise QoelabError(f"--from {path}: cannot read it ({err.strerror})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise QoelabError(f"{path}:{number}: not a JSON line ({err})") from None
        if not isinstance(row, dict):
            raise QoelabError(f"{path}:{number}: expected a JSON object per line")
        if "error" in row or not row.get("summary"):
            continue
        if "params" not in row and {"experiment", "buffer", "extra"} <= row.keys():
            from qoelab.jobs.thinclient_tcp import record_params  # a thin-client benchmark run

            row = {"params": record_params(row), "summary": row["summary"]}
        elif not isinstance(row.get("params"), dict):
            raise QoelabError(f'{path}:{number}: a row needs its trial\'s "params" (an object)')
        rows.append(row)
    return rows


def evaluate_files(family: str, sources: Sequence[Source], root: Path = REPO) -> list[Finding]:
    """Every applicable check of ``family`` over the files; a check reads only the files that may
    feed it (``Source.not_for``)."""
    from qoelab.findings import applicable

    per_source = [(s, normalise(read_rows(root / s.path), per_host=family in HOST_BOUND))
                  for s in sources]  # fmt: skip
    for s, rows in per_source:  # a repetition pairs runs of one file only
        for r in rows:
            if "pair" in r:
                r["pair"] = f"{s.path}#{r['pair']}"
    every = [r for _, rows in per_source for r in rows]
    out: list[Finding] = []
    for check in applicable(family, every, [r["params"] for r in every]):
        rows = [r for s, rows in per_source if s.feeds(check.name) for r in rows]
        out += check.evaluate(rows)
    return out


def _check_json(name: str, f: Finding, family: Family) -> dict[str, Any]:
    return {
        "name": f.name,
        "claim": f.claim,
        "figure": f.figure,
        "paper_value": PAPER_VALUES[name].get(f.name, ""),
        "lab_value": f.lab,
        "scope": f.scope_label,
        "n": f.trials,
        "verdict": f.verdict,
        "reason": f.reason,
        "condition": family.condition,
    }


def family_report(name: str, sources: Sequence[Source] | None = None, root: Path = REPO) -> dict[str, Any]:
    """One family's checks as JSON-able dicts; ``sources`` default to its committed files."""
    family = COMMITTED[name]
    sources = family.sources if sources is None else sources
    found = evaluate_files(name, sources, root) if sources else []
    checks = [_check_json(name, f, family) for f in found]
    judged = {f.name for f in found}
    why = (
        (family.not_run or "no committed file")
        if not sources
        else "no row in the files lies within the check's conditions"
    )
    for check in get_report(name):
        if check.name not in judged:
            checks.append({"name": check.name, "claim": check.claim, "figure": check.figure,
                           "paper_value": PAPER_VALUES[name].get(check.name, ""), "lab_value": None,
                           "scope": "", "n": 0, "verdict": NOT_RUN, "reason": why,
                           "condition": family.condition})  # fmt: skip
    excluded = {s.path: dict(s.not_for) for s in sources if s.not_for}
    only = {s.path: list(s.only_for) for s in sources if s.only_for}
    return {
        "title": REPORT_TITLES.get(name, name),
        "files": [s.path for s in sources],
        "excluded": excluded,
        "only_for": only,
        "condition": {"kind": family.condition, "why": family.why_condition},
        "checks": checks,
    }


def committed_report(families: Iterable[str] | None = None, root: Path = REPO) -> dict[str, Any]:
    """``{"families": {name: family_report}}`` over the committed files, with a missing file named."""
    names = list(families) if families is not None else list(COMMITTED)
    missing = [s.path for n in names for s in COMMITTED[n].sources if not (root / s.path).is_file()]
    if missing:
        raise QoelabError(
            f"--from-committed needs the lab's checkout (files missing under {root}: {', '.join(missing)})"
        )
    return {"families": {n: family_report(n, root=root) for n in names}}


def decisive_share(report: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Per family: (checks with holds / does not hold in some scope, checks in all)."""
    out = {}
    for name, fam in report["families"].items():
        by_check: dict[str, set[str]] = {}
        for c in fam["checks"]:
            by_check.setdefault(c["name"], set()).add(c["verdict"])
        decisive = sum(bool(v & {"holds", "does not hold"}) for v in by_check.values())
        out[name] = (decisive, len(by_check))
    return out


def markdown(name: str, fam: Mapping[str, Any]) -> str:
    """One family's report as Markdown: its files, its condition and one line per check and scope."""
    lines = [f"## {fam['title']}", ""]
    lines.append("Files: " + (", ".join(f"`{f}`" for f in fam["files"]) or "none") + ".")
    for path, checks in fam["excluded"].items():
        for check, why in checks.items():
            lines.append(f"`{path}` does not feed `{check}`: {why}.")
    for path, checks in fam["only_for"].items():
        lines.append(f"`{path}` feeds only {', '.join(f'`{c}`' for c in checks)}.")
    lines += [f"Condition: {fam['condition']['kind']} ({fam['condition']['why']}).", "",
              "| check | the paper | scope | n | verdict | the lab (the deciding numbers, or why not) |",
              "|---|---|---|---:|---|---|"]  # fmt: skip
    for c in fam["checks"]:
        lab = c["lab_value"] if c["lab_value"] and c["verdict"] != "inconclusive" else c["reason"]
        cells = [f"`{c['name']}`", c["paper_value"], c["scope"] or "—", str(c["n"]), c["verdict"], lab]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- committed-verdicts:begin -->", "<!-- committed-verdicts:end -->"


def render_all(report: Mapping[str, Any]) -> str:
    """Every family's table under one summary line each: the block docs/findings.md carries."""
    shares = decisive_share(report)
    lines = [
        "Generated by `qoelab report all --from-committed --write-doc docs/findings.md` from the "
        "committed files alone; `tests/workers/test_report_committed.py` fails when it differs.",
        "",
        "| family | checks decided (holds or does not hold in a scope) | condition |",
        "|---|---|---|",
    ]
    for name, fam in report["families"].items():
        decided, total = shares[name]
        lines.append(f"| {name} | {decided} of {total} | {fam['condition']['kind']} |")
    lines.append("")
    body = [markdown(name, fam).replace("## ", "### ", 1) for name, fam in report["families"].items()]
    return "\n".join(lines) + "\n" + "\n".join(body)


def write_doc(path: Path, text: str) -> None:
    """Put ``text`` between the markers in ``path`` (both must be there)."""
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        raise QoelabError(f"--write-doc {path}: the markers {BEGIN} and {END} are missing")
    head, rest = doc.split(BEGIN, 1)
    path.write_text(head + BEGIN + "\n" + text.rstrip() + "\n" + END + rest.split(END, 1)[1])


def doc_block(path: Path) -> str:
    """The text between the markers in ``path`` ("" when they are missing)."""
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        return ""
    return doc.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
