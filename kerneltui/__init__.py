"""kerneltui: which GPU kernels a PyTorch workload ran, and what changed between two runs."""

__version__ = "0.1.0"
