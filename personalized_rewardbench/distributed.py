"""Process-group handling for multi-process runs (`accelerate launch --num_processes N -m personalized_rewardbench evaluate ...`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class ProcessGroup:
    rank: int
    world_size: int
    barrier: Callable[[], None]


@contextmanager
def process_group() -> Iterator[ProcessGroup]:
    """One process unless launched with WORLD_SIZE > 1 (accelerate/torchrun); then a gloo/nccl group."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        yield ProcessGroup(0, 1, lambda: None)
        return
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend)
    try:
        yield ProcessGroup(dist.get_rank(), dist.get_world_size(), dist.barrier)
    finally:
        dist.destroy_process_group()
