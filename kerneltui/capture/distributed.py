"""Capture under torchrun: the default process group, set up before the script is imported.

Each rank captures its own traces (output.rank_trace_path); kerneltui initialises the process group
so that a workload's collectives work in both modes (workload() is called once per mode, and a
script that called init_process_group itself each time would fail the second time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from kerneltui.capture.ranks import Launch
from kerneltui.errors import UserError


@contextlib.contextmanager
def process_group(launch: Launch) -> Iterator[None]:
    """NCCL on GPUs (each rank on its LOCAL_RANK device), gloo on the CPU; destroyed at the end."""
    if not launch.distributed:
        yield
        return
    import torch.distributed as dist

    if not dist.is_available():
        raise UserError(f"launched as rank {launch.rank} of {launch.world_size}, but this torch has no "
                        "torch.distributed")
    ours = not dist.is_initialized()
    if ours:
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(launch.local_rank)  # "cuda" in the workload is this rank's device
        dist.init_process_group("nccl" if cuda else "gloo")
    try:
        yield
    finally:
        if ours and dist.is_initialized():
            dist.destroy_process_group()
