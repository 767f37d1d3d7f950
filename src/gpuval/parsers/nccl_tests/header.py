"""The lines a nccl-tests run prints before its table: the tests' and the runtime's versions,
the parameters, the devices, the command, notes and flags. Each reader fills the run it is given;
which run that is, the reader of the lines (reader.py) decides."""

from __future__ import annotations

import re
import sys

from gpuval.parsers import nccl_json
from gpuval.parsers.text import parse_int
from gpuval.records.nccl import NcclDevice, NcclRun

_DEVICE = re.compile(
    r"Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?(?:\s+on\s+(\S+))?"
    r"\s+(?:uses\s+)?device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$"
)
PROGRAM = re.compile(r"\b([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b")
_PARAM_NAMES = {
    "nthread": "n_thread",
    "nthreads": "n_thread",
    "ngpus": "n_gpus",
    "nranks": "n_ranks",
    "minbytes": "min_bytes",
    "maxbytes": "max_bytes",
    "warmup_iters": "warmup_iters",
    "warmupiters": "warmup_iters",
    "agg_iters": "agg_iters",
}
_FLAGS = {"Blocking": "blocking", "Parallel": "parallel_init", "Per-Iteration": "per_iter"}


def read_tests_version(run: NcclRun, body: str) -> None:
    """`nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602` (or rccl's)."""
    words = body.split()
    lowered = [w.lower() for w in words]
    if "version" in lowered and lowered.index("version") + 1 < len(words):
        run.nccl_tests_version = words[lowered.index("version") + 1]
    for word in words:
        name, sep, value = word.partition("=")
        if sep and name.endswith(("-headers", "-library")) and parse_int(value) is not None:
            run.header[name.replace("-", "_")] = int(value)


def parse_params(body: str) -> dict[str, int | str | bool]:
    """`nThread 1 nGpus 4 ... step: 2(factor) warmup iters: 5` (or rccl's `nThreads: 1 ...`)."""
    params: dict[str, int | str | bool] = {}
    name: list[str] = []
    for word in body.split():
        if not (word[:1].isdecimal() or (word[:1] == "-" and word[1:2].isdecimal())):
            name.append(word.rstrip(":"))
            continue
        key = sys.intern("_".join(name).lower())  # the same few names in every run of a log
        name = []
        if not key:
            continue
        key = _PARAM_NAMES.get(key, key)
        if key == "step" and "(" in word:
            word, _, kind = word.partition("(")
            params["step_kind"] = kind.rstrip(")")
        value = parse_int(word)
        params[key] = value if value is not None else word
    return params


def read_device(body: str) -> NcclDevice | None:
    """`Rank  0 Group  0 Pid 1000 on host device  0 [0000:18:00] NVIDIA H100`; None: unreadable."""
    match = _DEVICE.match(body)
    if match is None:
        return None
    rank, group, pid, host, device, pci, name = match.groups()
    return NcclDevice(
        rank=int(rank),
        group=int(group) if group is not None else None,
        pid=int(pid) if pid is not None else None,
        # Interned: a log names the same hosts, buses and models in every run.
        host=sys.intern(host) if host is not None else None,
        device=int(device),
        pci_bus=sys.intern(pci) if pci else None,
        name=sys.intern(name.strip()) if name.strip() else None,
    )


def read_runtime_version(run: NcclRun, body: str) -> None:
    """`RCCL version : 2.20.5`, `HIP version : 6.2`, `ROCm version : 6.2.0`."""
    name, _, value = body.partition(":")
    if value.strip():
        run.runtime_versions[name.split()[0]] = value.strip()


def read_note(run: NcclRun, body: str) -> None:
    words = body.split()
    if body.startswith("Reducing maxBytes") and len(words) > 3:
        reduced = parse_int(words[3])
        if reduced is not None:
            run.header["max_bytes_reduced_to"] = reduced
    elif body.startswith("Writing JSON output"):
        run.json_output = body.split(" to ", 1)[-1].strip()
    elif body.startswith("NCCL Tests compiled with"):
        run.header["compiled_with"] = body.split("with", 1)[1].strip()


def read_flag(run: NcclRun, body: str) -> None:
    run.header[_FLAGS[body.split()[0]]] = True


def set_program(run: NcclRun, program: str) -> None:
    # Interned, as the command: a log names the same few programs in all its runs.
    run.program = sys.intern(program) if program else None
    collective = nccl_json.collective_of_program(program)
    run.collective = sys.intern(collective) if collective else run.collective
