"""Markdown for findings: one section per check and scope, with its verdict, claim and numbers."""

from __future__ import annotations

from collections.abc import Sequence

from qoelab.findings.base import Finding, fmt_num

BADGE = {"holds": "✅ holds", "does not hold": "❌ does not hold", "inconclusive": "❔ inconclusive"}


def render_markdown(findings: Sequence[Finding], title: str = "Thesis findings", level: int = 2) -> str:
    """A report section: a summary line, then each finding with its table of numbers."""
    h = "#" * level
    lines = [f"{h} {title}", ""]
    if not findings:
        lines += ["No check applies to these results (none of their swept parameters is one a "
                  "finding is about).", ""]  # fmt: skip
        return "\n".join(lines)
    counts = {v: sum(f.verdict == v for f in findings) for v in BADGE}
    lines += [", ".join(f"{n} {v}" for v, n in counts.items()) + f" (of {len(findings)} checks).", ""]
    for f in findings:
        scope = f" ({f.scope_label})" if f.scope else ""
        lines += [
            f"{h}# {f.title}{scope}",
            "",
            f"- check: `{f.name}`",
            f"- claim ({f.figure}): {f.claim}",
            f"- verdict: **{BADGE[f.verdict]}**: {f.reason}",
            "",
        ]
        if f.rows:
            lines += [
                "| condition | series | quantity | n | mean | 95 % CI |",
                "|---|---|---|---:|---:|---|",
            ]
            for r in f.rows:
                ci = f"{fmt_num(r.ci_low)} – {fmt_num(r.ci_high)}" if r.ci_low is not None else "–"
                lines.append(
                    f"| {r.condition} | {r.protocol} | {r.quantity} | {r.n} | {fmt_num(r.mean)} | {ci} |"
                )
            lines.append("")
    return "\n".join(lines)
