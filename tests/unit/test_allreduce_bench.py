"""The torch.distributed all-reduce benchmark, run for real with gloo on this machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any

import pytest
import torch  # the `bench` extra; make test installs it

from gpuval.nodebench import allreduce_bench, source_path
from gpuval.parsers import gpuval_bench
from gpuval.schemas.validation import validate


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_two_ranks_with_torchrun_print_one_valid_document() -> None:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
        "--master-addr=127.0.0.1", f"--master-port={free_port()}",
        str(source_path("allreduce_bench.py")),
        "--min-bytes", "1K", "--max-bytes", "64K", "--factor", "8",
        "--warmup", "1", "--iterations", "3",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert finished.returncode == 0, finished.stderr[-2000:]
    result = gpuval_bench.parse(finished.stdout + finished.stderr, source="bench.txt")
    validate(result.to_dict(), "parse-result")
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert (run.world_size, run.backend, run.device_type, run.correct) == (2, "gloo", "cpu", True)
    assert run.hosts == [socket.gethostname()] * 2 and run.wrong_total == 0
    assert [r.size_bytes for r in run.rows] == [1024, 8192, 65536]
    for row in run.rows:
        assert row.wrong == 0 and row.count == row.size_bytes // 4
        assert row.time_us and row.time_us > 0
        assert row.algbw_gbps == pytest.approx(row.size_bytes / (row.time_us * 1e-6) / 1e9)
        assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 2 * (2 - 1) / 2)


def test_wrong_reduction_fails_closed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backend that corrupts the data: the run says so and exits non-zero."""
    real_all_reduce = torch.distributed.all_reduce

    def corrupting(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = real_all_reduce(tensor, *args, **kwargs)
        if tensor.dtype == torch.float32:
            tensor[0] += 1
        return outcome

    monkeypatch.setattr(torch.distributed, "all_reduce", corrupting)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    argv = ["--min-bytes", "16", "--max-bytes", "64", "--warmup", "0", "--iterations", "1"]
    assert allreduce_bench.main(argv) == 1
    (run,) = gpuval_bench.parse(capsys.readouterr().out).runs
    assert (run.correct, run.wrong_total, [r.wrong for r in run.rows]) == (False, 3, [1, 1, 1])


@pytest.mark.parametrize(("world_size", "factor"), [(2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_bandwidth_is_nccl_tests_all_reduce_factor(world_size: int, factor: float) -> None:
    assert allreduce_bench.bus_bandwidth(10.0, world_size) == pytest.approx(10.0 * factor)


def test_sizes_and_size_arguments() -> None:
    assert allreduce_bench.sizes(1024, 8192, 2) == [1024, 2048, 4096, 8192]
    assert allreduce_bench.sizes(6, 30, 3) == [4, 16]  # whole float32 elements only
    assert allreduce_bench.size_argument("64K") == 65536
    assert allreduce_bench.size_argument("1MiB") == 1 << 20
    with pytest.raises(Exception, match="not a size"):
        allreduce_bench.size_argument("lots")
