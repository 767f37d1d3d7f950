"""Record, then compare, what `gpuval report` writes for every run folder the repository holds:
the verdict corpus, the sample run and the device runs. A refactoring of the judge or of the
outputs must leave results.json, summary.json and junit.xml equal (key order aside), or explain
each difference.

    python -m tests.safety_net record DIR    # before the change
    python -m tests.safety_net compare DIR   # after it: the differences, file by file

Times, versions and the folders the outputs were written in are left out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gpuval.pipeline import report_run

DATA = Path(__file__).parent / "data"
OUTPUTS = ("results.json", "summary.json", "junit.xml")
VOLATILE = {"generated_at", "gpuval_version", "timestamp", "time", "report", "report_path"}


def run_folders() -> dict[str, Path]:
    folders = {f"verdicts/{p.name}": p for p in sorted((DATA / "verdicts").iterdir()) if p.is_dir()}
    folders["sample-run"] = DATA / "sample-run"
    for device in sorted((DATA / "device").iterdir()):
        if (device / "run.json").is_file():
            folders[f"device/{device.name}"] = device
    return folders


def _scrubbed(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        return {k: _scrubbed(v, where) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrubbed(v, where) for v in value]
    if isinstance(value, str):
        return value.replace(where, "<RUN>")
    return value


def _junit(text: str, where: str) -> Any:
    def element(node: ET.Element) -> Any:
        attrs = {k: v.replace(where, "<RUN>") for k, v in node.attrib.items() if k not in VOLATILE}
        return [node.tag, attrs, (node.text or "").strip().replace(where, "<RUN>"),
                [element(child) for child in node]]  # fmt: skip

    return element(ET.fromstring(text))


def snapshot(folder: Path) -> dict[str, Any]:
    """The outputs of one run folder, judged in a copy, made comparable."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "reports" / folder.name
        shutil.copytree(folder, copy, symlinks=True)
        for name in (*OUTPUTS, "report.html", "profile.json"):
            (copy / name).unlink(missing_ok=True)
        code = report_run(copy, quiet=True)
        where = str(copy)
        taken: dict[str, Any] = {"exit": code}
        for name in OUTPUTS:
            path = copy / name
            if not path.is_file():
                taken[name] = None
            elif name.endswith(".json"):
                taken[name] = _scrubbed(json.loads(path.read_text(encoding="utf-8")), where)
            else:
                taken[name] = _junit(path.read_text(encoding="utf-8"), where)
        return taken


def _differences(old: Any, new: Any, at: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            if key not in new:
                found.append(f"{at}/{key}: removed")
            elif key not in old:
                found.append(f"{at}/{key}: added")
            else:
                found += _differences(old[key], new[key], f"{at}/{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in _differences(a, b, f"{at}[{i}]")]  # fmt: skip
    if old != new:
        return [f"{at}: {json.dumps(old)[:200]} -> {json.dumps(new)[:200]}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("record", "compare"))
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    changed = 0
    for name, folder in run_folders().items():
        taken = snapshot(folder)
        stored = args.directory / f"{name}.json"
        if args.action == "record":
            stored.parent.mkdir(parents=True, exist_ok=True)
            stored.write_text(json.dumps(taken, indent=1, sort_keys=True), encoding="utf-8")
            continue
        before = json.loads(stored.read_text(encoding="utf-8")) if stored.is_file() else {}
        found = _differences(before, taken)
        if found:
            changed += 1
            print(f"== {name}: {len(found)} difference(s)")
            for line in found[:40]:
                print(f"  {line}")
    if args.action == "compare":
        print(f"{changed} of {len(run_folders())} run folder(s) differ")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
