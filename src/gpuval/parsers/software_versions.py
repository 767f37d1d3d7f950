"""Version probes the preflight role runs: `nvcc --version`, `mpirun --version`, the NCCL probe
(roles/preflight/templates/nccl-version.sh.j2) and `uname -a; cat /etc/os-release`; and the
health role's `ofed_info -s` (the RDMA driver stack: `MLNX_OFED_LINUX-5.8-1.0.1.1:`, or with
DOCA-Host `OFED-internal-24.10-1.1.4:`).

They feed provenance and the cross-host consistency checks (mixed MPI or NCCL versions across
hosts break mpirun jobs), so a version that cannot be read is an error naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gpuval.parsers.text import Line, iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.software import SoftwareVersionRun

TOOLS = ("nvcc-version", "mpirun-version", "nccl-version", "os-release", "ofed-info")

# nvcc: "Cuda compilation tools, release 13.0, V13.0.88"
_NVCC = re.compile(r"Cuda compilation tools, release (?P<release>[\d.]+), V(?P<version>[\d.]+)")
_NVCC_BUILD = re.compile(r"^Build (?P<build>\S+)")
# Open MPI: "mpirun (Open MPI) 4.1.4"; MPICH/Hydra: "Version:  4.0.2" under "HYDRA build details:";
# Intel MPI: "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: 1dc8a9e)"
_OPEN_MPI = re.compile(r"\((?P<implementation>Open MPI|OpenRTE)\)\s+(?P<version>\S+)")
_HYDRA_VERSION = re.compile(r"^\s*Version:\s+(?P<version>\S+)")
_INTEL_MPI = re.compile(r"Intel\(R\) MPI Library.*?Version (?P<version>[\w.]+)")
# The NCCL probe: header defines, then library file names, then a Python wheel's folder.
_NCCL_DEFINE = re.compile(r"^#define NCCL_(?P<key>MAJOR|MINOR|PATCH|SUFFIX)\s+(?P<value>\S+)")
_NCCL_LIBRARY = re.compile(r"^library: (?P<path>\S+) -> (?P<target>\S*libnccl\.so\.(?P<v>[\d.]+))")
# ofed_info -s: the package name, a dash, the version, a colon.
_OFED = re.compile(
    r"^(?P<package>MLNX_OFED_LINUX|OFED-internal|OFED)-(?P<version>\d[\w.-]*?):?\s*$"
)
_OS_FIELD = re.compile(r'^(?P<key>[A-Z_]+)=(?P<value>"[^"]*"|\S*)\s*$')


def detect(text: str) -> tuple[str, int] | None:
    head = text[:4096]
    if "Cuda compilation tools" in head:
        return ("nvcc-version", 90)
    if "#define NCCL_MAJOR" in head or re.search(r"^library: \S+libnccl", head, re.M):
        return ("nccl-version", 70)
    if re.search(r"^mpirun \((?:Open MPI|OpenRTE)\)", head, re.M) or (
        "HYDRA build details" in head or "Intel(R) MPI Library" in head
    ):
        return ("mpirun-version", 40)  # low: these strings can appear inside benchmark logs
    if re.match(r"\s*(?:MLNX_OFED_LINUX|OFED-internal)-\d", head):
        return ("ofed-info", 80)
    if "PRETTY_NAME=" in head and "VERSION_ID=" in head:
        return ("os-release", 30)
    return None


def _nvcc(lines: list[Line], result: ParseResult) -> SoftwareVersionRun | None:
    run = None
    for line in lines:
        if match := _NVCC.search(line.text):
            run = SoftwareVersionRun("cuda-toolkit", match["version"], "NVIDIA CUDA")
            run.details["release"] = match["release"]
        elif run and (build := _NVCC_BUILD.match(line.text)):
            run.details["build"] = build["build"]
    return run


def _mpirun(lines: list[Line], result: ParseResult) -> SoftwareVersionRun | None:
    hydra = False
    for line in lines:
        if match := _OPEN_MPI.search(line.text):
            return SoftwareVersionRun("mpi", match["version"], "Open MPI")
        if match := _INTEL_MPI.search(line.text):
            return SoftwareVersionRun("mpi", match["version"], "Intel MPI")
        hydra = hydra or "HYDRA build details" in line.text
        if hydra and (match := _HYDRA_VERSION.match(line.text)):
            return SoftwareVersionRun("mpi", match["version"], "MPICH")
    return None


def _nccl(lines: list[Line], result: ParseResult) -> SoftwareVersionRun | None:
    defines: dict[str, str] = {}
    details: dict[str, str] = {}
    library_versions: list[tuple[int, str]] = []
    for line in lines:
        text = line.text.strip()
        if text.startswith("header: ") and "header" not in details:
            details["header"] = text.removeprefix("header: ")
        elif match := _NCCL_DEFINE.match(text):
            if match["key"] in defines:
                continue  # a second header: the first one is the one in use (probe order)
            defines[match["key"]] = match["value"].strip('"')
        elif match := _NCCL_LIBRARY.match(text):
            library_versions.append((line.number, match["v"]))
            details.setdefault("library", match["target"])
        elif text.startswith("python wheel: "):
            details.setdefault("python_wheel", text.removeprefix("python wheel: "))
    from_header = None
    if {"MAJOR", "MINOR", "PATCH"} <= defines.keys():
        from_header = f"{defines['MAJOR']}.{defines['MINOR']}.{defines['PATCH']}"
        from_header += defines.get("SUFFIX", "")
    for number, library_version in library_versions:
        if from_header and not library_version.startswith(from_header):
            result.warn(
                f"library libnccl.so.{library_version} differs from header NCCL {from_header}",
                number,
            )
    version = from_header or (library_versions[0][1] if library_versions else None)
    if version is None:  # a node without NCCL (a CPU host, or before the install phase)
        found = ", ".join(f"{k} {v}" for k, v in details.items()) or "no header, library or wheel"
        result.warn(f"no NCCL version on this node ({found})", lines[0].number if lines else None)
    return SoftwareVersionRun("nccl", version, "NVIDIA NCCL", details)


def _os_release(lines: list[Line], result: ParseResult) -> SoftwareVersionRun | None:
    fields: dict[str, str] = {}
    kernel = None
    for line in lines:
        if line.text.startswith("Linux ") and kernel is None:
            parts = line.text.split()
            kernel = parts[2] if len(parts) > 2 else None
        elif match := _OS_FIELD.match(line.text):
            fields[match["key"]] = match["value"].strip('"')
    if not fields:
        return None
    details = {k.lower(): v for k, v in fields.items() if k in {"PRETTY_NAME", "ID", "VERSION"}}
    if kernel:
        details["kernel"] = kernel
    return SoftwareVersionRun("os", fields.get("VERSION_ID"), fields.get("NAME"), details)


def _ofed(lines: list[Line], result: ParseResult) -> SoftwareVersionRun | None:
    for line in lines:
        if match := _OFED.match(line.text.strip()):
            return SoftwareVersionRun("ofed", match["version"], match["package"])
    return None


_READERS: dict[str, Callable[[list[Line], ParseResult], SoftwareVersionRun | None]] = {
    "nvcc-version": _nvcc,
    "mpirun-version": _mpirun,
    "nccl-version": _nccl,
    "os-release": _os_release,
    "ofed-info": _ofed,
}


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    found = detect(text)
    tool = tool or (found[0] if found else "nvcc-version")
    result = ParseResult(tool=tool, source=source)
    lines = list(iter_lines(text))
    run = _READERS[tool](lines, result)
    if run is None:
        result.error(f"no {tool} version found in {len(lines)} line(s)", 1 if lines else None)
    else:
        result.runs.append(run)
    return result
