"""The preflight version probes: every number as printed, and what a node without one says."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.parsers import software_versions
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "software-versions"


def parsed(text: str, tool: str | None = None) -> dict[str, object]:
    document = software_versions.parse(text, source="probe", tool=tool).to_dict()
    validate(document, "parse-result")
    return document


@pytest.mark.parametrize(
    ("name", "tool", "version", "implementation"),
    [
        ("nvcc-13.0-debian12.txt", "nvcc-version", "13.0.88", "NVIDIA CUDA"),
        ("mpirun-openmpi-4.1.4-debian12.txt", "mpirun-version", "4.1.4", "Open MPI"),
        ("nccl-version-wheel-2.32.3.txt", "nccl-version", "2.32.3", "NVIDIA NCCL"),
        ("nccl-version-library-only.txt", "nccl-version", "2.26.2", "NVIDIA NCCL"),
        ("os-release-debian12.txt", "os-release", "12", "Debian GNU/Linux"),
    ],
)
def test_real_probe_outputs(name: str, tool: str, version: str, implementation: str) -> None:
    text = (DATA / name).read_text()
    assert software_versions.detect(text) is not None
    assert software_versions.detect(text)[0] == tool
    document = parsed(text)
    assert document["tool"] == tool and document["errors"] == []
    (run,) = document["runs"]
    assert (run["version"], run["implementation"]) == (version, implementation)


def test_nvcc_release_and_build() -> None:
    (run,) = parsed((DATA / "nvcc-13.0-debian12.txt").read_text())["runs"]
    assert run["details"] == {"release": "13.0", "build": "cuda_13.0.r13.0/compiler.36424714_0"}


@pytest.mark.parametrize(
    ("text", "version", "implementation"),
    [
        # MPICH's mpirun -version (Hydra), as printed by MPICH 4.x
        ("HYDRA build details:\n    Version:                                 4.0.2\n"
         "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022\n",
         "4.0.2", "MPICH"),
        ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: 1dc8a9e)\n"
         "Copyright 2003-2023, Intel Corporation.\n", "2021.10", "Intel MPI"),
        ("mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n",
         "5.0.3", "Open MPI"),
    ],
)  # fmt: skip
def test_mpi_implementations(text: str, version: str, implementation: str) -> None:
    (run,) = parsed(text, "mpirun-version")["runs"]
    assert (run["version"], run["implementation"]) == (version, implementation)


def test_node_without_nccl_is_a_warning_not_an_error() -> None:
    document = parsed("", "nccl-version")
    assert document["errors"] == []
    (run,) = document["runs"]
    assert run["version"] is None
    (warning,) = document["warnings"]
    assert "no NCCL version on this node" in warning["message"]


def test_header_and_library_disagreeing_is_named_at_the_library_line() -> None:
    text = (
        "header: /usr/include/nccl.h\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n"
        '#define NCCL_PATCH 5\n#define NCCL_SUFFIX ""\n'
        "library: /lib/libnccl.so.2 -> /lib/libnccl.so.2.26.2\n"
    )
    document = parsed(text, "nccl-version")
    assert document["runs"][0]["version"] == "2.21.5"
    assert [(w["line"], "differs" in w["message"]) for w in document["warnings"]] == [(6, True)]


@pytest.mark.parametrize("tool", software_versions.TOOLS)
def test_garbage_is_an_error_naming_the_line(tool: str) -> None:
    document = parsed("bash: command not found\n", tool)
    if tool == "nccl-version":
        assert document["warnings"] and not document["errors"]
    else:
        assert document["runs"] == [] and document["errors"][0]["line"] == 1
