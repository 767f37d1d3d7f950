"""Programs that run ON the nodes (copied there by the roles), not on the controller.

- allreduce_bench.py: torch.distributed all-reduce sweep, started by torchrun; imports only
  torch and the standard library, so it can be copied as one file (`gpuval[bench]` installs
  torch here for the tests).
- mpi_preflight.c: MPI hello + all-to-all + tiny allreduce across all hosts before any long
  benchmark, compiled on the node with mpicc.
- gemm_burn.py: every GPU multiplies matrices for N seconds (torch), TFLOPS per GPU, the result
  checked, clocks and temperatures sampled; copied as one file by the health role.

Their outputs are read back on the controller by `gpuval.parsers.gpuval_bench`.
"""

from importlib import resources
from pathlib import Path


def source_path(name: str) -> Path:
    """Where a node program's source lies in the installed package (for a role's `copy:`)."""
    return Path(str(resources.files(__name__).joinpath(name)))
