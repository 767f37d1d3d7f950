"""The `gpuval` command line: parse one output file, or normalise, judge and report a run folder."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gpuval import __version__, parsers
from gpuval.checks.model import Status

FAIL_ON: tuple[Status, ...] = ("fail", "unjudged", "warn")  # the --fail-on choices, strictest last

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_ERROR = 2

DESCRIPTION = """\
Validate a GPU cluster's interconnect from the raw outputs of nccl-tests, p2pBandwidthLatencyTest,
nvidia-smi and friends. The Ansible playbooks collect those outputs into reports/<run-id>/raw/;
this command turns them into records, verdicts and a self-contained HTML report."""

PARSE_HELP = """\
Parse one output file and print one JSON document (schema: parse-result.schema.json in the
package) with the tool, its runs, and every warning or error met, each naming the file and line.
The tool is detected from the content unless --tool names it.
Exit status: 0 the file was recognised (even if it records a failed run), 2 it was not."""

REPORT_HELP = """\
Judge a run folder (RUN_DIR/run.json and RUN_DIR/raw/<host>/<file> plus a <file>.meta.json
sidecar per raw output) and write results.json, measurements.csv, summary.json, junit.xml and
report.html into RUN_DIR (or --out). Re-running it re-renders from the raw folder alone.

Verdicts, worst first: error (bad input, or nothing measured), fail, unjudged (measured, but no
trustworthy reference: never a pass), warn, pass.
Exit status: 2 error; 1 fail (and, with --fail-on, anything at least as bad); 0 otherwise.

Examples:
  gpuval report reports/20261122T101500Z
  gpuval report reports/nightly --fail-on warn       # acceptance: only a clean pass exits 0
  gpuval report reports/nightly --thresholds strict.json --out /tmp/rerendered"""


def build_parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gpuval", description=DESCRIPTION, formatter_class=argparse.RawTextHelpFormatter
    )
    top.add_argument("--version", action="version", version=f"gpuval {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    parse = commands.add_parser(
        "parse",
        help="parse one output file to JSON",
        description=PARSE_HELP,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parse.add_argument("file", type=Path, metavar="FILE", help="raw output of a supported tool")
    parse.add_argument("--tool", metavar="NAME", help="skip detection; see `gpuval tools`")
    parse.add_argument("--indent", type=int, default=2, help="JSON indent (default 2; 0: compact)")

    report = commands.add_parser(
        "report",
        help="judge a run folder and write the report",
        description=REPORT_HELP,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    report.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="folder holding raw/")
    report.add_argument("--out", type=Path, help="write outputs here instead of RUN_DIR")
    report.add_argument(
        "--thresholds",
        type=Path,
        metavar="FILE",
        help="JSON file overriding the default verdict thresholds",
    )
    report.add_argument("--quiet", action="store_true", help="print only the verdict line")
    report.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="fail",
        help="the least severe verdict that exits 1 (default fail; unjudged and warn are stricter)",
    )

    commands.add_parser("tools", help="list the tools whose output gpuval reads")
    return top


def _parse(args: argparse.Namespace) -> int:
    path: Path = args.file
    if not path.is_file():
        print(f"gpuval parse: {path}: no such file", file=sys.stderr)
        return EXIT_ERROR
    if args.tool and args.tool not in parsers.known_tools():
        print(
            f"gpuval parse: unknown tool {args.tool!r}; known: {', '.join(parsers.known_tools())}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    result = parsers.parse_file(path, tool=args.tool)
    if result is None:
        print(
            f"gpuval parse: {path}: not the output of any known tool "
            f"({', '.join(parsers.known_tools())}); name one with --tool",
            file=sys.stderr,
        )
        return EXIT_ERROR
    json.dump(result.to_dict(), sys.stdout, indent=args.indent or None)
    sys.stdout.write("\n")
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from gpuval.pipeline import report_run

    return report_run(
        args.run_dir,
        out_dir=args.out,
        thresholds_file=args.thresholds,
        quiet=args.quiet,
        fail_on=args.fail_on,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "parse":
        return _parse(args)
    if args.command == "report":
        return _report(args)
    print("\n".join(parsers.known_tools()))
    return EXIT_OK
