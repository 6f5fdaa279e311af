"""``qoelab ratings analyze FILE``: a rating set's scores by the plain mean or the subject model."""

from __future__ import annotations

import argparse
import json

from qoelab.subjective import models, report, screening, votes

EPILOG = """\
formats:
  long    CSV with a header: rater,stimulus,score[,condition][,reference][,repeat][,gold]
          [,played_s,clip_s] (gold: a gold item's expected score, for screening only; played_s,
          clip_s: seconds the rater played the clip and its length, P.910's playback rule)
  matrix  P.910 Appendix VI's layout: one row per stimulus, one column per rater, 'nan' for a
          missing vote, no header (ids are the row and column indexes, from 0)
models:
  mean    the plain mean with a Student-t 95 % interval (the lab's campaign analysis)
  p910    the subject model by alternating projection (ITU-T P.910 Appendix VI)
  p913    the subject model by maximum likelihood, Newton-Raphson (ITU-T P.913 clause 12.6)
examples:
  qoelab ratings analyze votes.csv
  qoelab ratings analyze scores.csv --format matrix --model p913 --json
  qoelab ratings analyze votes.csv --scale 1 5 --exclude-screened
  qoelab ratings analyze acr-hr.csv --method acr-hr --scale 1 5
methods:
  acr     each stimulus' MOS
  acr-hr  ACR with hidden reference: each test vote minus the same rater's vote on the stimulus'
          reference plus the scale's top (5, or HIGH of --scale), then the model (P.910's DMOS)
  dcr     degradation category rating: the scores as they are, named DCR
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ratings",
        help="analyse a rating set from anywhere (subject models, screening, agreement)",
        description="Subjective ratings outside the lab's campaigns.",
    )
    rsub = p.add_subparsers(dest="ratings_command", metavar="SUBCOMMAND", parser_class=type(p))
    rsub.required = True
    a = rsub.add_parser(
        "analyze",
        help="each stimulus' score, each rater's bias and inconsistency, screening and alpha",
        description="Read a rating set and estimate each stimulus' score (MOS with its 95 % CI), each "
        "rater's bias and inconsistency, the screening rules' verdicts and Krippendorff's alpha. "
        "No database or network: the file is all it reads.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a.add_argument("file", metavar="FILE", help="the rating set (CSV)")
    a.add_argument(
        "--format", choices=("long", "matrix"), default="long", help="the file's layout (default long)"
    )
    a.add_argument(
        "--model", choices=models.MODELS, default="p910", help="how scores are estimated (default p910)"
    )
    a.add_argument(
        "--method", choices=tuple(report.METHODS), default="acr",
        help="the rating method: acr (MOS), acr-hr (DMOS against each stimulus' hidden reference, "
        "needs the 'reference' column), dcr (default acr)",
    )  # fmt: skip
    a.add_argument(
        "--scale", nargs=2, type=float, metavar=("LOW", "HIGH"),
        help="the rating scale's ends; a score outside is an error naming its line",
    )  # fmt: skip
    a.add_argument(
        "--exclude-screened", action="store_true",
        help="fit without the raters a screening rule flags (they are listed either way)",
    )  # fmt: skip
    a.add_argument(
        "--drop-outlier-votes", action="store_true",
        help="leave out single votes at |z| >= 3.29 within their stimulus (P.910's optional rule)",
    )  # fmt: skip
    a.add_argument(
        "--gold-tolerance", type=float, default=screening.GOLD_TOLERANCE, metavar="POINTS",
        help="a gold item's vote may differ this much from its expected score (the 'gold' column; "
        f"default {screening.GOLD_TOLERANCE:g})",
    )  # fmt: skip
    a.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    a.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    if not 0 <= args.gold_tolerance < 100:
        raise votes.VotesError(f"--gold-tolerance: must be 0..100 points, got {args.gold_tolerance:g}")
    if args.scale is not None and args.scale[0] >= args.scale[1]:
        raise votes.VotesError(f"--scale: LOW {args.scale[0]:g} must be below HIGH {args.scale[1]:g}")
    data = votes.read(args.file, args.format, scale=args.scale)
    top = args.scale[1] if args.scale is not None else 5.0
    result = report.analyze(
        data, args.model, method=args.method, exclude_screened=args.exclude_screened, top=top,
        drop_outlier_votes=args.drop_outlier_votes, gold_tolerance=args.gold_tolerance,
    )  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    else:
        print(report.to_markdown(result), end="")
    return 0
