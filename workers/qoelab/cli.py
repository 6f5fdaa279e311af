"""The ``qoelab`` command: the lab-host worker and the researcher's tools (sweeps, hosts).

Errors a user can act on print one sentence and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
import unicodedata
from pathlib import Path
from typing import Any

import httpx

import qoelab
from qoelab.errors import QoelabError

EXIT_USAGE = 2
EXIT_FAILED_TRIALS = 1

# The platform's own examples; each job type's follow, from its declaration (JobType.examples).
MAIN_EXAMPLES = (
    "QOELAB_HOST_TOKEN=... qoelab worker --broker redis://web:6379/0 --backend http://web:8000",
    "qoelab sweep run SPEC.yaml --wait",
    "qoelab sweep status 12",
    "qoelab hosts",
    "qoelab capabilities",
)

MAIN_ENVIRONMENT = """\
environment: QOELAB_API_URL and QOELAB_API_TOKEN (researcher commands); QOELAB_BROKER_URL,
QOELAB_BACKEND_URL, QOELAB_HOST_TOKEN, QOELAB_HOST_NAME, QOELAB_WORKDIR, QOELAB_CONCURRENCY (worker).
"""

WORKER_EPILOG = """\
Adding a lab host (a second machine, or this one):
  1. on the web host:   manage.py add_host lab2        (prints the host's token once)
  2. on the lab host:   export QOELAB_HOST_TOKEN=TOKEN
                        qoelab worker --name lab2 \\
                          --broker redis://WEB-HOST:6379/0 --backend http://WEB-HOST:8000
     (--token=TOKEN works too, but shows the token in ps; write it with "=", since a token
     may start with "-")
The worker consumes only its queue host.<name>; the scheduler sends it the trials whose job types
need capabilities this host reported (see 'qoelab capabilities'). It needs root (network
namespaces). Nothing is shared with the web host but Redis and HTTP: artifacts are uploaded.

Each trial runs in its own short-lived pool process (prefork, one task per child): a runner
enters network namespaces and may be killed by the hard time limit, and both stay confined to a
process that is thrown away, while the main process keeps the heartbeat going.
"""

SWEEP_RUN_EPILOG = """\
A spec is YAML with the fields of the sweep API plus the experiment:
  experiment: rate-ladders        # name (yours, created if missing), {name, description} or id
  job_type: NAME                  # optional when the experiment exists (qoelab run --help lists them)
  name: rate ladder
  grid: {rate: [10mbit, 50mbit]}  # the job type's parameters: GET /api/job-types/
  fixed: {delay: 20ms}
  repetitions: 3
  order: grid                     # or random, with seed: 42
examples/ in the repository holds specs of every job type.

examples:
  qoelab sweep run SPEC.yaml --wait --api http://127.0.0.1:8000 --token $TOKEN
  qoelab sweep run --preset KEY --size quick
presets: {presets}
With --wait the exit status is 0 when every trial succeeded and 1 when any failed.
"""


class _Parser(argparse.ArgumentParser):
    """argparse with one-sentence errors and status 2 (as argparse), without the usage dump noise."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def main_epilog() -> str:
    from qoelab import jobs

    lines = [*MAIN_EXAMPLES, *(line for job in jobs.REGISTRY.values() for line in job.examples)]
    return "examples:\n" + "".join(f"  {line}\n" for line in lines) + "\n" + MAIN_ENVIRONMENT


def build_parser() -> argparse.ArgumentParser:
    from qoelab import presets

    p = _Parser(
        prog="qoelab",
        description="qoelab: measure the QoE of remote-desktop protocols over emulated networks.",
        epilog=main_epilog(),
        formatter_class=_formatter,
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    w = sub.add_parser(
        "worker",
        help="run this machine as a lab host (Celery worker)",
        description="Start the lab-host worker: heartbeat, claim trials from host.<name>, run them, report.",
        epilog=WORKER_EPILOG,
        formatter_class=_formatter,
    )
    w.add_argument(
        "--broker", metavar="URL", help="Celery broker (env QOELAB_BROKER_URL), e.g. redis://web:6379/0"
    )
    w.add_argument("--backend", metavar="URL", help="web backend base URL (env QOELAB_BACKEND_URL)")
    w.add_argument(
        "--token", metavar="TOKEN", help="per-host token from 'manage.py add_host' (env QOELAB_HOST_TOKEN)"
    )
    w.add_argument(
        "--name", metavar="NAME", help="host name as registered (env QOELAB_HOST_NAME; default: hostname)"
    )
    w.add_argument(
        "--concurrency", metavar="N", type=int, help="trials at once (env QOELAB_CONCURRENCY; default 1)"
    )
    w.add_argument(
        "--workdir",
        metavar="DIR",
        type=Path,
        help="scratch space (env QOELAB_WORKDIR; default /var/tmp/qoelab)",
    )
    w.add_argument(
        "--loglevel", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    w.set_defaults(func=cmd_worker)

    s = sub.add_parser(
        "sweep",
        help="submit and follow sweeps",
        description="Submit sweeps from YAML specs and follow their progress.",
        formatter_class=_formatter,
    )
    ssub = s.add_subparsers(dest="sweep_command", metavar="SUBCOMMAND", parser_class=_Parser)
    ssub.required = True
    run = ssub.add_parser(
        "run",
        help="submit the sweep described in SPEC.yaml",
        description="Submit the sweep described in a YAML spec and print its URL.",
        epilog=SWEEP_RUN_EPILOG.replace(
            "{presets}", textwrap.fill(", ".join(presets.every()), 96, subsequent_indent="  ")
        ),
        formatter_class=_formatter,
    )
    run.add_argument("spec", metavar="SPEC.yaml", type=Path, nargs="?", help="the sweep spec")
    run.add_argument("--preset", metavar="KEY", help="instead of a spec: a paper's preset (listed below)")
    run.add_argument("--size", choices=("quick", "full"), default="quick", help="with --preset (quick)")
    run.add_argument("--wait", action="store_true", help="show a progress bar until every trial has ended")
    run.add_argument("--timeout", metavar="SECONDS", type=float, help="with --wait: give up after this long")
    _api_args(run)
    run.set_defaults(func=cmd_sweep_run)
    st = ssub.add_parser(
        "status",
        help="show a sweep's progress",
        description="Show how many trials of a sweep are pending, running, done or failed.",
        epilog="example:\n  qoelab sweep status 12 --json",
        formatter_class=_formatter,
    )
    st.add_argument("sweep_id", metavar="ID", type=int, help="sweep id (printed by 'sweep run')")
    st.add_argument("--json", action="store_true", help="print the API answer as JSON")
    _api_args(st)
    st.set_defaults(func=cmd_sweep_status)

    ex = ssub.add_parser(
        "export",
        help="write finished sweeps' trials to a JSON-lines result file",
        description="Write the succeeded and failed trials of finished sweeps, one JSON line each "
        "(params, summary, host, provenance, link; error for a failed trial), the form "
        "'qoelab report FAMILY --from FILE' reads (docs/findings.md).",
        epilog="example:\n  qoelab sweep export 12 13 --out benchmarks/reproduce_ch4/fig46.jsonl",
        formatter_class=_formatter,
    )
    ex.add_argument("sweeps", metavar="ID", type=int, nargs="+", help="sweep ids")
    ex.add_argument("--out", metavar="FILE", type=Path, required=True, help="the file to write (replaced)")
    ex.add_argument("--partial", action="store_true", help="also export sweeps that are still running")
    _api_args(ex)
    ex.set_defaults(func=cmd_sweep_export)

    h = sub.add_parser(
        "hosts",
        help="list lab hosts and their heartbeat",
        description="List the registered lab hosts, whether they are alive and what they can run.",
        formatter_class=_formatter,
    )
    h.add_argument("--json", action="store_true", help="print the API answer as JSON")
    _api_args(h)
    h.set_defaults(func=cmd_hosts)

    c = sub.add_parser(
        "capabilities",
        help="what this machine can run, and why not",
        description="Probe this machine's capabilities and tool versions, and say why any is missing.",
        formatter_class=_formatter,
    )
    c.add_argument("--json", action="store_true", help="print as JSON")
    c.set_defaults(func=cmd_capabilities)

    r = sub.add_parser(
        "report",
        help="check the papers' findings on sweeps' results or on result files (Markdown or JSON)",
        description="Check each finding of a paper on the union of the sweeps' succeeded trials, or on "
        "result files alone (no database, no network), and print the verdicts with their numbers "
        "(docs/findings.md).",
        epilog="examples:\n  qoelab report REPORT 12 13 > findings.md\n"
        "  qoelab report REPORT --from results.jsonl\n"
        "  qoelab report all --from-committed --json\n"
        "reports: " + ", ".join(_report_names()),
        formatter_class=_formatter,
    )
    r.add_argument(
        "report",
        metavar="REPORT",
        choices=[*_report_names(), "all"],
        help="which findings: ch2 (storage APT), ch3 (offload emulation), ch4 (remote desktop), tc002 "
        "(thin-client TCP, paper 002), sb001 (storage benchmark, thesis 001); all: every one "
        "(with --from-committed)",
    )
    r.add_argument("sweeps", metavar="SWEEP", type=int, nargs="*", help="sweep ids (of one job type)")
    r.add_argument("--from", dest="files", metavar="FILE", nargs="+", type=Path,
                   help="JSON-lines result files instead of sweeps (one trial per line)")  # fmt: skip
    r.add_argument("--from-committed", action="store_true",
                   help="the result files committed with the lab (qoelab.findings.committed)")  # fmt: skip
    r.add_argument("--json", action="store_true", help="print the findings as JSON")
    r.add_argument("--write-doc", metavar="FILE.md", type=Path,
                   help="with all --from-committed: put the tables between the file's markers")  # fmt: skip
    _api_args(r)
    r.set_defaults(func=cmd_report)

    v = sub.add_parser("version", help="print the qoelab version and code revision")
    v.set_defaults(func=cmd_version)

    # Each job type's own subcommands (`link check`, `rd bench`, `apt simulate`, `vm check` …), each
    # once, in registry order; then `run`, any job type's trial here.
    from qoelab import jobs, run_cli
    from qoelab.jobtype import resolve
    from qoelab.subjective import cli as ratings_cli

    for ref in dict.fromkeys(ref for job in jobs.REGISTRY.values() for ref in job.cli):
        resolve(ref)(sub)
    run_cli.register(sub)
    ratings_cli.register(sub)
    return p


def _api_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api", metavar="URL", help="backend base URL (env QOELAB_API_URL; default http://127.0.0.1:8000)"
    )
    p.add_argument("--token", metavar="TOKEN", help="your API token (env QOELAB_API_TOKEN)")


def _api(args: argparse.Namespace):
    from qoelab.client import ApiClient

    url = args.api or os.environ.get("QOELAB_API_URL") or "http://127.0.0.1:8000"
    token = args.token or os.environ.get("QOELAB_API_TOKEN", "")
    return ApiClient(url, token)


# --- commands ---------------------------------------------------------------------------------


def cmd_worker(args: argparse.Namespace) -> int:
    from qoelab import celery_app

    s = celery_app.WorkerSettings.from_env()
    s.broker_url = args.broker or s.broker_url
    s.backend_url = args.backend or s.backend_url
    s.token = args.token or s.token
    s.name = args.name or s.name
    s.workdir = args.workdir or s.workdir
    s.concurrency = args.concurrency if args.concurrency is not None else s.concurrency
    s.validate()
    if os.geteuid() != 0:
        logging.getLogger("qoelab.worker").warning(
            "not running as root: trials that need network namespaces will fail"
        )
    app = celery_app.configure(s)
    # The settings hold the token now; the trials' processes inherit no secret (issue 33).
    celery_app.scrub_secrets(os.environ)
    celery_app.startup()  # fails here, with one sentence, on a wrong token or an unreachable backend
    app.worker_main(
        [
            "worker",
            f"--hostname=celery@{s.name}",  # what `celery inspect ping -d celery@NAME` checks
            f"--queues={s.queue}",
            # prefork, one task per child: namespace state, leaked fds and a runner killed by the hard
            # time limit (only prefork enforces it) stay in a throw-away process; the main process
            # keeps heartbeating and reaps what a dead child left.
            "--pool=prefork",
            f"--concurrency={s.concurrency}",
            "--max-tasks-per-child=1",
            f"--loglevel={args.loglevel}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def cmd_sweep_run(args: argparse.Namespace) -> int:
    from qoelab import sweeps

    if (args.spec is None) == (args.preset is None):
        print("qoelab sweep run: give a SPEC.yaml or --preset KEY (one of them)", file=sys.stderr)
        return 2
    if args.preset:
        from qoelab import presets

        try:
            spec = sweeps.SweepSpec.model_validate(presets.get(args.preset).sweep_spec(args.size))
        except ValueError as err:
            print(f"qoelab sweep run: {err}", file=sys.stderr)
            return 2
    else:
        spec = sweeps.load_spec(args.spec)
    with _api(args) as api:
        sweep = sweeps.submit(api, spec)
        total = int(sweep.get("trial_count") or 0)
        print(f"sweep {sweep['id']} submitted: {total} trials")
        print(sweeps.sweep_web_url(api, sweep))
        if not args.wait:
            return 0
        counts = _wait_with_bar(api, int(sweep["id"]), total, args.timeout)
    print(
        f"sweep {sweep['id']}: {counts['succeeded']} succeeded, {counts['failed']} failed, "
        f"{counts['cancelled']} cancelled of {counts['total']}"
    )
    return EXIT_FAILED_TRIALS if counts["failed"] or counts["cancelled"] else 0


def _wait_with_bar(api: Any, sweep_id: int, total: int, timeout: float | None) -> dict[str, int]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from qoelab import sweeps

    console = Console(stderr=True)
    if not console.is_terminal:
        # Logs and CI: one line per change instead of a redrawn bar.
        last: list[str] = []

        def report(c: dict[str, int], blocked: str | None) -> None:
            line = f"{c['done']}/{c['total']} done, {c['running']} running, {c['failed']} failed"
            if blocked:
                line += f"; waiting: {blocked}"
            if not last or line != last[-1]:
                print(line, file=sys.stderr, flush=True)
                last.append(line)

        return sweeps.wait(api, sweep_id, report, timeout_s=timeout)

    with Progress(
        TextColumn("[bold]sweep {task.fields[sweep]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[running]} running"),
        TextColumn("[red]{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("[yellow]{task.fields[blocked]}"),
        console=console,
    ) as bar:
        task = bar.add_task("sweep", total=total or None, sweep=sweep_id, running=0, failed=0, blocked="")

        def update(c: dict[str, int], blocked: str | None) -> None:
            bar.update(
                task,
                total=c["total"],
                completed=c["done"],
                running=c["running"],
                failed=c["failed"],
                blocked=f"waiting: {blocked}" if blocked else "",
            )

        return sweeps.wait(api, sweep_id, update, timeout_s=timeout)


def cmd_sweep_status(args: argparse.Namespace) -> int:
    from qoelab import sweeps

    with _api(args) as api:
        sweep = api.get(f"/api/sweeps/{args.sweep_id}/")
        if args.json:
            print(json.dumps(sweep, indent=2))
            return 0
        c = sweeps.progress(sweep)
        blocked = (sweep.get("progress") or {}).get("blocked")
        print(f"sweep {sweep['id']} {printable(str(sweep.get('name', '')))}".rstrip())
        print(f"  {c['done']}/{c['total']} done: {c['succeeded']} succeeded, {c['failed']} failed, "
              f"{c['cancelled']} cancelled; {c['running']} running, {c['queued']} queued, "
              f"{c['pending']} pending")  # fmt: skip
        if blocked:
            print(f"  waiting: {printable(blocked)}")
        print(f"  {sweeps.sweep_web_url(api, sweep)}")
    return 0


def cmd_sweep_export(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    with _api(args) as api:
        for sweep_id in dict.fromkeys(args.sweeps):
            body = api.get(f"/api/sweeps/{sweep_id}/export/")
            if not body["finished"] and not args.partial:
                raise QoelabError(
                    f"sweep {sweep_id} has not finished ({body['open_trials']} trials pending, queued or "
                    "running): wait for it, or pass --partial"
                )
            rows += body["rows"]
    # Written beside the target and renamed: a reader never sees half a file.
    tmp = args.out.with_name(f".{args.out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        os.replace(tmp, args.out)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise QoelabError(f"--out {args.out}: cannot write it ({err.strerror})") from None
    failed = sum("error" in r for r in rows)
    print(f"{args.out}: {len(rows)} trials ({failed} failed) from sweep{'s' if len(args.sweeps) > 1 else ''} "
          f"{', '.join(str(s) for s in dict.fromkeys(args.sweeps))}")  # fmt: skip
    return 0


def cmd_hosts(args: argparse.Namespace) -> int:
    with _api(args) as api:
        hosts = api.get_all("/api/hosts/")
    if args.json:
        print(json.dumps(hosts, indent=2))
        return 0
    if not hosts:
        print("no lab hosts registered (add one with 'manage.py add_host NAME')")
        return 0
    for h in hosts:
        alive = "alive" if h.get("alive") else ("disabled" if not h.get("enabled", True) else "down")
        caps = sorted(k for k, v in (h.get("capabilities") or {}).items() if v is True)
        print(f"{printable(h['name']):<20} {alive:<6} last heartbeat {h.get('last_heartbeat') or 'never'}")
        print(f"{'':<20} running {len(h.get('running_trials') or [])}/{h.get('concurrency', '?')}; "
              f"can: {', '.join(caps) or 'nothing yet'}")  # fmt: skip
    return 0


def cmd_capabilities(args: argparse.Namespace) -> int:
    from qoelab import capabilities

    facts = capabilities.detect()
    if args.json:
        print(json.dumps(facts, indent=2))
        return 0
    print(f"{facts['hostname']}: {facts['kernel']}, Python {facts['python']}, code {facts['code_revision']}")
    for cap, ok in sorted(facts["capabilities"].items()):
        why = "" if ok else f"  ({facts['reasons'].get(cap, 'not available')})"
        print(f"  {'yes' if ok else 'no ':<4}{cap}{why}")
    print("versions:")
    for tool, version in sorted(facts["versions"].items()):
        print(f"  {tool}: {version}")
    return 0


def printable(text: str) -> str:
    """``text`` with control and format characters shown as escapes: a name that a researcher or a
    host chose cannot move the cursor, clear the screen or retitle the terminal (issue 33)."""
    return "".join(
        c
        if c == " " or unicodedata.category(c)[0] not in ("C", "Z") or c == "\u00a0"
        else c.encode("unicode_escape").decode()
        for c in text
    )


def _report_names() -> list[str]:
    from qoelab.findings import REPORTS

    return sorted(REPORTS)


def cmd_report(args: argparse.Namespace) -> int:
    from qoelab import findings

    sources = [bool(args.sweeps), args.files is not None, args.from_committed]
    if sum(sources) != 1:
        raise QoelabError("report: name sweeps, or --from FILE..., or --from-committed (exactly one)")
    if args.report == "all" and not args.from_committed:
        raise QoelabError("report: REPORT all needs --from-committed")
    if not args.sweeps:
        return _report_from_files(args)
    if args.report in findings.RATING_REPORTS.values():
        raise QoelabError(
            f"report: {args.report} reads a rating campaign's ratings, not sweeps: see the campaign's "
            "results page (GET /api/campaigns/<id>/results/), or name a file of rows with --from"
        )
    rows: list[dict[str, Any]] = []
    with _api(args) as api:
        for sweep_id in dict.fromkeys(args.sweeps):  # a sweep named twice is read once
            body = api.get(f"/api/sweeps/{sweep_id}/findings/", trials=1)
            if body.get("report") != args.report:
                readers = sorted(j for j, r in findings.JOB_REPORTS.items() if r == args.report)
                raise QoelabError(
                    f"sweep {sweep_id} is a {body.get('job_type')} sweep; report {args.report} reads "
                    f"{', '.join(readers)} sweeps"
                )
            rows += body.get("trials") or []
    found = findings.evaluate(args.report, rows)
    if args.json:
        print(json.dumps([f.to_json() for f in found], indent=2))
        return 0
    title = findings.REPORT_TITLES.get(args.report, args.report)
    sweeps = ", ".join(str(s) for s in dict.fromkeys(args.sweeps))
    text = findings.render_markdown(
        found, title=f"{title}: sweep{'s' if len(args.sweeps) > 1 else ''} {sweeps}"
    )
    head, _, rest = text.partition("\n\n")
    print(f"{head}\n\nOver {len(rows)} succeeded trials. {rest}")
    return 0


def _report_from_files(args: argparse.Namespace) -> int:
    from qoelab.findings import committed

    if args.from_committed:
        names = list(committed.COMMITTED) if args.report == "all" else [args.report]
        report = committed.committed_report(names)
    else:
        sources = [committed.Source(str(p.resolve())) for p in args.files]  # absolute: root is not used
        report = {"families": {args.report: committed.family_report(args.report, sources)}}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    if args.write_doc is not None:
        if args.report != "all" or not args.from_committed:
            raise QoelabError("report: --write-doc needs REPORT all and --from-committed")
        committed.write_doc(args.write_doc, committed.render_all(report))
        print(f"{args.write_doc}: the committed verdicts written between its markers")
        return 0
    for name, fam in report["families"].items():
        print(committed.markdown(name, fam))
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    from qoelab.hostfacts import code_revision

    print(f"qoelab {qoelab.__version__} ({code_revision()})")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()  # reads the job types: a plug-in that does not import is one sentence
    except QoelabError as err:
        print(f"qoelab: error: {printable(str(err))}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    logging.basicConfig(
        # The worker logs its life; the researcher commands print only results and problems.
        level=logging.DEBUG
        if args.verbose
        else (logging.INFO if args.command == "worker" else logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args) or 0)
    except QoelabError as err:
        print(f"qoelab: error: {printable(str(err))}", file=sys.stderr)
        return EXIT_USAGE
    except httpx.HTTPError as err:
        print(f"qoelab: error: talking to the backend failed: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("qoelab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
