"""`kerneltui capture`: runs a workload file under torch.profiler, eager and compiled (docs/capture.md).

The only package that imports torch, and only once a capture runs.
"""
