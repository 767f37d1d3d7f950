"""gpuval: judge GPU cluster interconnect benchmarks against what the hardware can do."""

__version__ = "0.1.0"
