"""Capture under torchrun: which rank this process is, read from the launcher's environment.

No torch here: the request checks use it before torch is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Launch:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


SINGLE = Launch()  # one process, no launcher


def launch_from_env(env: Mapping[str, str]) -> Launch:
    """torchrun (and torch.distributed.launch) set RANK, WORLD_SIZE and LOCAL_RANK for each process."""
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError:
        return SINGLE  # not a launcher's values: capture as one process
    return Launch(rank, world, local) if world > 1 else SINGLE
