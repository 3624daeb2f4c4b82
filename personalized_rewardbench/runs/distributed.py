"""Process-group handling for multi-process runs.

`accelerate launch --multi_gpu --num_processes N -m personalized_rewardbench evaluate ...` (or
`torchrun --nproc-per-node N -m personalized_rewardbench evaluate ...`) starts N processes with
WORLD_SIZE/RANK set; each scores the batches `rank, rank + N, ...` of the deterministic batch plan
and rank 0 writes the outputs (see `engine`). The group uses NCCL when the run is on CUDA, else gloo
— so the same command also runs N processes on a CPU-only machine.

accelerate starts N processes only on its multi-GPU path: with `--cpu` (no MPI set up), or on a
machine without several GPUs and no `--multi_gpu`, its simple launcher starts one process (with
OMP_NUM_THREADS=1) even for `--num_processes N`; `single_launch_notice` detects that case so the CLI
can say so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class ProcessGroup:
    rank: int
    world_size: int
    barrier: Callable[[], None]


def single_launch_notice(environ: Mapping[str, str] | None = None) -> str | None:
    """A one-line notice when `accelerate launch --num_processes N` (N > 1) started a single process.

    accelerate's simple launcher sets MASTER_ADDR only for N > 1 and never sets WORLD_SIZE.

    >>> single_launch_notice({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1"})[:40]
    'note: accelerate started one process, no'
    """
    env = os.environ if environ is None else environ
    if env.get("WORLD_SIZE") is None and "ACCELERATE_USE_CPU" in env and env.get("MASTER_ADDR"):
        return (
            "note: accelerate started one process, not --num_processes of them (its --cpu launcher needs MPI); "
            "use `accelerate launch --multi_gpu --num_processes N -m personalized_rewardbench evaluate ...` "
            "(add --device cpu on a CPU-only machine: the processes then use gloo)"
        )
    return None


@contextmanager
def process_group(device: str = "auto") -> Iterator[ProcessGroup]:
    """One process unless launched with WORLD_SIZE > 1 (accelerate/torchrun); then a NCCL (CUDA) or gloo (CPU) group."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        yield ProcessGroup(0, 1, lambda: None)
        return
    import torch
    import torch.distributed as dist

    backend = "nccl" if device != "cpu" and torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend)
    try:
        yield ProcessGroup(dist.get_rank(), dist.get_world_size(), dist.barrier)
    finally:
        dist.destroy_process_group()
