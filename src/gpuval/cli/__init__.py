"""The `gpuval` command line: run the suite, judge a run folder, follow runs over time.

Each command imports what it needs when it runs, so the quick ones (history, profile list)
answer without loading the parsers, the judge or pandas.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuval import __version__
from gpuval.cli.options import change_fraction, count, slug_option
from gpuval.cli.plan import add_plan_command, plan_command
from gpuval.cli.slurm import add_slurm_commands, drain_command, resume_command
from gpuval.cli.slurm_health import add_node_health_command, node_health_command
from gpuval.cli.slurm_run import RUN_EXAMPLES, add_slurm_run_options, drain_after_run, submit_run
from gpuval.files.atomic import OutputError, write_output

if TYPE_CHECKING:
    from gpuval.files.archive import Archive

FAIL_ON = ("fail", "unjudged", "warn")  # the --fail-on choices, strictest last

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_ERROR = 2

DESCRIPTION = """\
Validate a GPU cluster's interconnect. `gpuval run` drives the Ansible playbooks that capture
the raw outputs of nccl-tests, p2pBandwidthLatencyTest, nvidia-smi and friends on the nodes;
`gpuval report` turns a run folder into records, verdicts and a self-contained HTML report;
history, compare and baseline follow the runs of a reports folder over time.

Every command has its own --help with examples, e.g. `gpuval run --help`."""

PARSE_HELP = """\
Parse one output file and print one JSON document (schema: parse-result.schema.json in the
package) with the tool, its runs, and every warning or error met, each naming the file and line.
The tool is detected from the content unless --tool names it.
Exit status: 0 the file was recognised (even if it records a failed run), 2 it was not.

Example:
  gpuval parse reports/20261122T101500Z/raw/node1/nccl-all_reduce.txt"""

REPORT_HELP = """\
Judge a run folder (RUN_DIR/run.json and RUN_DIR/raw/<host>/<file> plus a <file>.meta.json
sidecar per raw output) and write results.json, measurements.csv, summary.json, junit.xml,
report.html and gpuval.prom (Prometheus) into RUN_DIR, each file whole or not at all, all of
them or none (a full disk leaves the previous ones as they were; a symbolic link where an output
goes is refused); add the run to the history of its reports folder (RUN_DIR/../history.sqlite).
--out DIR writes the outputs there instead and leaves every history alone (a render elsewhere
is none of the reports folder's run folders). Re-running it re-renders from raw/ alone.

Besides the hardware, the run is judged with an acceptance profile (--profile; else the one
the run folder records, profile.json) and against a baseline (--baseline; else the profile's;
else the reports folder's `default` baseline when there is one).
With $GPUVAL_WEBHOOK_URL set, a failing verdict is POSTed there (the URL is never printed).

Verdicts, worst first: error (bad input, or nothing measured), fail, unjudged (measured, but no
trustworthy reference: never a pass), warn, pass.
Exit status: 0 pass or warn, 1 fail, 2 error, 3 unjudged. --fail-on names the least severe
verdict that exits non-zero: unjudged by default; fail lets unjudged exit 0; warn makes warn
exit 1.

Examples:
  gpuval report reports/20261122T101500Z
  gpuval report reports/nightly --fail-on warn       # acceptance: only a clean pass exits 0
  gpuval report reports/nightly --fail-on fail       # only a failure (or an error) exits non-zero
  gpuval report reports/nightly --profile h100-sxm-8x --baseline accepted-2026-11
  gpuval report reports/nightly --thresholds strict.json --out /tmp/rerendered"""

RUN_HELP = (
    """\
Run the validation playbook (the checkout's playbooks/benchmark.yml, or the installed
collection's) through ansible-runner against INVENTORY, with live progress: the phase, host and
step, the elapsed time and a bar over the steps run.json expects. Then judge the run folder
(reports/<run-id>/, as `gpuval report`), print the verdict, the failing checks and the report
path. ansible-runner's events and output stay in the run folder (runner/).

Without --profile, the run is judged with the shipped profile that fits the detected hardware
(or one derived from it). With --tags, run.json expects only the steps of the phases that run.
Ctrl-C stops the run cleanly: the nodes' outputs so far are collected and judged (exit 2).

--drain-failed then drains in Slurm the nodes the run fails (as `gpuval drain`); --slurm
PARTITION submits the whole run as a low-priority batch job on idle nodes instead (docs/slurm.md).

Exit status: as gpuval report's (0 pass or warn, 1 fail, 2 error, 3 unjudged; --fail-on), and
2 when stopped or when a drain failed; with --slurm, 0 once the job is submitted.

Examples:
  gpuval run -i inventory/my-cluster.ini
  gpuval run -i inventory/my-cluster.ini --profile h100-sxm-8x --baseline accepted
  gpuval run -i inventory/my-cluster.ini --tags preflight,pairs -e bench_pairs_iperf3_seconds=5
  GPUVAL_WEBHOOK_URL=https://hooks.example/T0/B0/x gpuval run -i inv.ini --limit 'node[01:16]'
"""
    + RUN_EXAMPLES
)

HISTORY_HELP = """\
The key figures per host across the last runs of a reports folder: busbw per collective
(busbw.*), the p2p minimum (p2p.min), pair rates (pair.*) and nvidia-smi's error counters
(health.*). Prints a table and writes an HTML page with a trend chart per figure.
The history database (REPORTS/history.sqlite) is written by every `gpuval report`;
--rebuild makes it afresh from the run folders.

Examples:
  gpuval history
  gpuval history --last 30 --host node07 --figure 'busbw.*'
  gpuval history --rebuild --reports /srv/gpuval/reports"""

COMPARE_HELP = """\
What got better or worse from RUN_A to RUN_B (run folders, or run ids of the reports folder):
per key figure and host, and per check. A figure that moved the wrong way by more than
--threshold, a figure RUN_B did not measure, or a check RUN_B fails where RUN_A did not is a
regression: each is printed with both numbers. Writes an HTML page (--html).
Exit status: 0 no regression, 1 regressions, 2 error.

Examples:
  gpuval compare 20261115T020000Z 20261122T020000Z
  gpuval compare reports/last-week reports/after-repair --threshold 0.05"""

BASELINE_HELP = """\
Baselines: the key figures of a known-good run, which later runs are judged against as well as
against the hardware (SuperBench-style rules: variance against the baseline, absolute values,
fleet statistics). They live in REPORTS/baselines/<name>.json.

Examples:
  gpuval baseline create reports/20261122T101500Z --name accepted
  gpuval baseline list"""

PRUNE_HELP = """\
Keep the newest --keep run folders of a reports folder whole; of older ones keep only their
judgement (run.json, results.json, summary.json, profile.json), so `gpuval history` and
`--rebuild` still know every run while the raw outputs and reports go.

Lists what it would delete and asks first (on a terminal; elsewhere pass --yes). Only run
folders are touched: folders of the reports folder, not links, whose run.json names a run id.
An old run never judged (no results.json) keeps its raw outputs unless --include-unjudged.

Examples:
  gpuval prune --keep 14 --dry-run
  gpuval prune --keep 14 --reports /var/lib/gpuval/reports --yes"""

PROFILE_HELP = """\
Acceptance profiles: what a run measures (phases, benchmarks, message sizes, repeats) and how it
is judged (thresholds, baseline rules). Shipped for 8x H100 SXM, 4x H100 SXM as sold on Lambda,
8x A100 SXM, 8x H200 and PCIe servers; any YAML file following profile.schema.json works too.

Examples:
  gpuval profile list
  gpuval profile show h100-sxm-8x
  gpuval profile check my-cluster.yaml"""


def _reports_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reports",
        type=Path,
        metavar="DIR",
        help="the reports folder (default: $GPUVAL_REPORTS_DIR, else ./reports)",
    )


def _judging_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="unjudged",
        help="the least severe verdict that exits non-zero (default unjudged: 3; fail lets "
        "unjudged exit 0; warn makes warn exit 1)",
    )
    parser.add_argument(
        "--baseline", type=slug_option("baseline name"), metavar="NAME",
        help="judge against this baseline too (`none`: no baseline)",
    )  # fmt: skip
    parser.add_argument(
        "--prometheus",
        type=Path,
        metavar="FILE",
        help="also write the Prometheus gauges here (node_exporter's textfile directory)",
    )


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str,
    description: str,
) -> argparse.ArgumentParser:  # fmt: skip
    return commands.add_parser(
        name, help=summary, description=description, formatter_class=argparse.RawTextHelpFormatter
    )


def build_parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gpuval", description=DESCRIPTION, formatter_class=argparse.RawTextHelpFormatter
    )
    top.add_argument("--version", action="version", version=f"gpuval {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = _command(commands, "run", "run the validation playbook and report", RUN_HELP)
    run.add_argument("-i", "--inventory", type=Path, metavar="INVENTORY", help="Ansible inventory")
    run.add_argument(
        "--profile", metavar="NAME|FILE", help="acceptance profile (gpuval profile list)"
    )
    run.add_argument("--tags", metavar="TAGS", help="only these phases (comma separated)")
    run.add_argument("--skip-tags", metavar="TAGS", help="not these phases (comma separated)")
    run.add_argument("--limit", metavar="PATTERN", help="only these hosts (Ansible's --limit)")
    run.add_argument(
        "-e", "--extra-vars", action="append", default=[], metavar="VARS",
        help="Ansible extra variables, key=value or JSON or @file (repeatable)",
    )  # fmt: skip
    run.add_argument("--playbook", metavar="PLAYBOOK", help="another playbook (path or collection)")
    run.add_argument(
        "--run-id", type=slug_option("run id"), metavar="ID",
        help="the run id (default: the UTC time)",
    )  # fmt: skip
    run.add_argument(
        "--provision", metavar="PROVIDER", help="rent the nodes from a provider (none ships yet)"
    )
    run.add_argument(
        "--ara", action="store_true", help="also record the run in ARA (pip install ara)"
    )
    _reports_option(run)
    _judging_options(run)
    add_slurm_run_options(run)

    report = _command(commands, "report", "judge a run folder and write the report", REPORT_HELP)
    report.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="folder holding raw/")
    report.add_argument(
        "--out", type=Path, help="write the outputs here instead of RUN_DIR (no history)"
    )
    report.add_argument(
        "--thresholds",
        type=Path,
        metavar="FILE",
        help="JSON file overriding the default verdict thresholds",
    )
    report.add_argument("--profile", metavar="NAME|FILE", help="judge with this profile (`auto`: "
                        "the one fitting the detected hardware)")  # fmt: skip
    report.add_argument("--quiet", action="store_true", help="print only the verdict line")
    _judging_options(report)

    history = _command(commands, "history", "key figures across runs", HISTORY_HELP)
    history.add_argument("--last", type=int, default=20, metavar="N", help="runs (default 20)")
    history.add_argument("--host", metavar="H", help="only this host")
    history.add_argument("--figure", metavar="PATTERN", help="only figures matching (busbw.*)")
    history.add_argument("--rebuild", action="store_true", help="remake the database first")
    history.add_argument(
        "--html", type=Path, metavar="FILE", help="the page (default REPORTS/history.html)"
    )
    _reports_option(history)

    compare = _command(commands, "compare", "what changed between two runs", COMPARE_HELP)
    compare.add_argument("run_a", metavar="RUN_A")
    compare.add_argument("run_b", metavar="RUN_B")
    compare.add_argument(
        "--threshold", type=change_fraction, default=None, metavar="FRACTION",
        help="a change worse than this is a regression (default 0.10; 0: any change for the "
        "worse)",
    )  # fmt: skip
    compare.add_argument(
        "--html", type=Path, metavar="FILE", help="the page (default RUN_B/compare.html)"
    )
    _reports_option(compare)

    baseline = _command(commands, "baseline", "known-good figures to judge against", BASELINE_HELP)
    baseline_commands = baseline.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = _command(baseline_commands, "create", "keep a run's figures", BASELINE_HELP)
    create.add_argument("run_dir", metavar="RUN_DIR", help="a judged run folder, or its run id")
    create.add_argument(
        "--name", type=slug_option("baseline name"), default="default",
        help="the baseline's name (default: default)",
    )  # fmt: skip
    create.add_argument("--force", action="store_true", help="even from a failing run")
    _reports_option(create)
    listing = _command(baseline_commands, "list", "the baselines", BASELINE_HELP)
    _reports_option(listing)

    prune = _command(commands, "prune", "trim old run folders, keep the history", PRUNE_HELP)
    prune.add_argument(
        "--keep", type=count, required=True, metavar="N", help="run folders kept whole"
    )
    prune.add_argument("--yes", action="store_true", help="delete without asking")
    prune.add_argument("--dry-run", action="store_true", help="only list what would go")
    prune.add_argument(
        "--include-unjudged", action="store_true",
        help="trim old runs never judged too (their raw outputs are all there is of them)",
    )  # fmt: skip
    _reports_option(prune)

    profile = _command(commands, "profile", "acceptance profiles", PROFILE_HELP)
    profile_commands = profile.add_subparsers(dest="action", required=True, metavar="ACTION")
    _command(profile_commands, "list", "the shipped profiles", PROFILE_HELP)
    show = _command(profile_commands, "show", "a profile and its Ansible variables", PROFILE_HELP)
    show.add_argument("name", metavar="NAME|FILE")
    check = _command(profile_commands, "check", "validate a profile file", PROFILE_HELP)
    check.add_argument("name", metavar="NAME|FILE")

    parse = _command(commands, "parse", "parse one output file to JSON", PARSE_HELP)
    parse.add_argument("file", type=Path, metavar="FILE", help="raw output of a supported tool")
    parse.add_argument("--tool", metavar="NAME", help="skip detection; see `gpuval tools`")
    parse.add_argument("--indent", type=int, default=2, help="JSON indent (default 2; 0: compact)")

    add_plan_command(commands)
    add_slurm_commands(commands)
    add_node_health_command(commands)
    commands.add_parser("tools", help="list the tools whose output gpuval reads")
    return top


def _error(command: str, message: str) -> int:
    print(f"gpuval {command}: {message}", file=sys.stderr)
    return EXIT_ERROR


def _archive(args: argparse.Namespace) -> Archive:
    from gpuval.files.archive import Archive

    return Archive(args.reports) if args.reports else Archive.default()


def _parse(args: argparse.Namespace) -> int:
    from gpuval import parsers

    path: Path = args.file
    if not path.is_file():
        return _error("parse", f"{path}: no such file")
    if args.tool and args.tool not in parsers.known_tools():
        known = ", ".join(parsers.known_tools())
        return _error("parse", f"unknown tool {args.tool!r}; known: {known}")
    result = parsers.parse_file(path, tool=args.tool)
    if result is None:
        return _error(
            "parse",
            f"{path}: not the output of any known tool ({', '.join(parsers.known_tools())}); "
            "name one with --tool",
        )
    json.dump(result.to_dict(), sys.stdout, indent=args.indent or None)
    sys.stdout.write("\n")
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from gpuval.pipeline import report_run
    from gpuval.report.webhook import WebhookUrlError, take_webhook_url

    try:
        webhook_url = take_webhook_url()
    except WebhookUrlError as problem:
        return _error("report", str(problem))
    return report_run(
        args.run_dir,
        out_dir=args.out,
        thresholds_file=args.thresholds,
        quiet=args.quiet,
        fail_on=args.fail_on,
        profile=args.profile,
        baseline=args.baseline,
        prometheus_file=args.prometheus,
        webhook_url=webhook_url,
    )


def _split(tags: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (tags or "").split(",") if t.strip())


def _ara_environment() -> dict[str, str]:
    """ARA's callback plugin beside ansible-runner's (ANSIBLE_CALLBACK_PLUGINS is appended to)."""
    from importlib.util import find_spec

    spec = find_spec("ara")
    if spec is None or not spec.submodule_search_locations:
        raise LookupError("--ara needs ARA: pip install 'ara[server]'")
    plugins = Path(next(iter(spec.submodule_search_locations))) / "plugins" / "callback"
    return {"ANSIBLE_CALLBACK_PLUGINS": str(plugins)}


def _run(args: argparse.Namespace) -> int:
    from gpuval.profile import ProfileError, load_profile
    from gpuval.report.webhook import WebhookUrlError, take_webhook_url
    from gpuval.run import launch, providers

    try:
        webhook_url = take_webhook_url()  # before any child process can inherit it
    except WebhookUrlError as problem:
        return _error("run", str(problem))
    archive = _archive(args)
    try:
        profile = load_profile(args.profile) if args.profile else None
    except ProfileError as problem:
        return _error("run", str(problem))
    try:
        environment = _ara_environment() if args.ara else {}
    except LookupError as problem:
        return _error("run", str(problem))
    playbook, project_dir = launch.default_playbook()
    if args.playbook:
        playbook = (
            str(Path(args.playbook).resolve()) if Path(args.playbook).exists() else args.playbook
        )
    run_id = args.run_id or launch.new_run_id(archive)
    if args.slurm:
        return submit_run(args, archive.root / run_id, archive.history_path, project_dir)

    def request(inventory: Path) -> launch.RunRequest:
        return launch.RunRequest(
            inventory=inventory, playbook=playbook, project_dir=project_dir, archive=archive,
            run_id=run_id, profile=profile, baseline=args.baseline, tags=_split(args.tags),
            skip_tags=_split(args.skip_tags), limit=args.limit, extra_vars=tuple(args.extra_vars),
            fail_on=args.fail_on, prometheus_file=args.prometheus, webhook_url=webhook_url,
            environment=environment,
        )  # fmt: skip

    if args.provision:
        try:
            chosen = providers.provider(args.provision)
        except KeyError as problem:
            return _error("run", str(problem.args[0]))
        wanted = providers.ProvisionRequest(run_id, archive.root / run_id, profile)
        with chosen.cluster(wanted) as inventory:
            return launch.launch(request(inventory))
    if args.inventory is None:
        return _error("run", "name the inventory with -i INVENTORY (or --provision PROVIDER)")
    if not args.inventory.exists():
        return _error("run", f"{args.inventory}: no such inventory file or folder")
    code = launch.launch(request(args.inventory))
    return drain_after_run(args, archive.root / run_id, code) if args.drain_failed else code


def _history(args: argparse.Namespace) -> int:
    from gpuval.history.store import HistoryError, rebuild
    from gpuval.history.trends import history_table, load_history, render_history

    archive = _archive(args)
    if not archive.root.is_dir():
        problem = "not a folder" if archive.root.exists() else "no such folder"
        return _error(
            "history", f"{archive.root}: {problem}; name the reports folder with --reports DIR"
        )
    try:
        if args.rebuild or not archive.history_path.exists():
            rebuilt = rebuild(archive)
            print(f"history rebuilt from {rebuilt.indexed} run folder(s) of {archive.root}")
            for skipped in rebuilt.skipped:
                print(f"  skipped {skipped}")
        history = load_history(archive, args.last, args.host, args.figure)
    except HistoryError as problem:
        return _error("history", str(problem))
    print("\n".join(history_table(history)))
    page = args.html or archive.root / "history.html"
    write_output(page, render_history(history, page.parent, str(archive.root)))
    print(f"trend charts: {page}")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from gpuval.files.archive import ArchiveError
    from gpuval.history.compare import (
        REGRESSION_FRACTION,
        compare_runs,
        comparison_lines,
        render_comparison,
    )

    archive = _archive(args)
    try:
        run_a, run_b = archive.resolve_run(args.run_a), archive.resolve_run(args.run_b)
        threshold = REGRESSION_FRACTION if args.threshold is None else args.threshold
        comparison = compare_runs(run_a, run_b, threshold)
    except ArchiveError as problem:
        return _error("compare", str(problem))
    except (OSError, ValueError, KeyError) as problem:
        return _error("compare", f"cannot read the runs' results: {problem}")
    print("\n".join(comparison_lines(comparison)))
    page = args.html or run_b / "compare.html"
    write_output(page, render_comparison(comparison))
    print(f"comparison page: {page}")
    return EXIT_FAIL if comparison.verdict == "fail" else EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    from gpuval.checks.baseline import BaselineError, create_baseline, list_baselines

    archive = _archive(args)
    if args.action == "list":
        found = list_baselines(archive)
        if not found:
            print(f"no baselines in {archive.baselines_dir}")
        for baseline in found:
            hosts = len({f.host for f in baseline.figures})
            print(
                f"{baseline.name}: run {baseline.run_id} ({baseline.verdict.upper()}), "
                f"{len(baseline.figures)} figure(s) of {hosts} host(s), made {baseline.created_at}"
            )
        return EXIT_OK
    try:
        baseline = create_baseline(archive, args.run_dir, args.name, args.force)
    except BaselineError as problem:
        return _error("baseline", str(problem))
    print(
        f"baseline {baseline.name}: {len(baseline.figures)} figure(s) of run {baseline.run_id} "
        f"-> {archive.baseline_path(baseline.name)}"
    )
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    archive = _archive(args)
    plan = archive.trim_plan(args.keep, args.include_unjudged)
    for folder in plan.unjudged:
        print(f"keeping {folder}: never judged (--include-unjudged trims it too)")
    if not plan.removals:
        print(f"nothing to trim in {archive.root}")
        return EXIT_OK
    print(f"would delete, keeping the judgement of {len(plan.removals)} run folder(s):")
    for folder, entries in plan.removals.items():
        print(f"  {folder}/: {', '.join(e.name for e in entries)}")
    if args.dry_run:
        return EXIT_OK
    if not args.yes:
        if sys.stdin is None or not sys.stdin.isatty():
            words = ["--keep", str(args.keep), "--reports", str(archive.root)]
            words += ["--include-unjudged"] if args.include_unjudged else []
            return _error(
                "prune",
                "nothing deleted: no terminal to ask on; to delete the above, run "
                f"`gpuval prune {shlex.join(words)} --yes`",
            )
        try:
            answer = input("delete? [y/N] ")
        except EOFError:  # Ctrl-D: no answer is no
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return EXIT_OK
    trimmed = archive.trim(plan)
    print(f"trimmed {len(trimmed)} run folder(s) of {archive.root} to their judgement")
    return EXIT_OK


def _profile(args: argparse.Namespace) -> int:
    from gpuval.profile import ProfileError, load_profile, shipped_profiles

    if args.action == "list":
        for profile in shipped_profiles():
            print(f"{profile.name:<22} {profile.description}")
        return EXIT_OK
    try:
        profile = load_profile(args.name)
    except ProfileError as problem:
        return _error("profile", str(problem))
    if args.action == "check":
        print(f"{profile.origin}: a valid profile ({profile.name})")
        return EXIT_OK
    print(json.dumps({**profile.record(), "ansible_vars": profile.ansible_vars()}, indent=2))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {
        "run": _run, "report": _report, "history": _history, "compare": _compare,
        "baseline": _baseline, "prune": _prune, "profile": _profile, "parse": _parse,
        "plan": plan_command, "drain": drain_command, "resume": resume_command,
        "node-health": node_health_command,
    }  # fmt: skip
    if args.command in handlers:
        try:
            return handlers[args.command](args)
        except OutputError as problem:  # a page, record or baseline that could not be written
            return _error(args.command, str(problem))
    from gpuval import parsers

    print("\n".join(parsers.known_tools()))
    return EXIT_OK
