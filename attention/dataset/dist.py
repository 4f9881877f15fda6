"""An extraction run under torch.distributed (`torchrun`): the rank environment, joining the process
group, sums over ranks and the barrier. Alone (WORLD_SIZE unset or 1) each is a no-op."""

from __future__ import annotations

import os

import torch


def dist_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun (or srun + torchrun) sets them; (0, 1, 0) alone."""
    return (int(os.environ.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))


def init_dist() -> tuple[int, int, int]:
    """Join the torchrun process group (gloo on CPU, nccl on GPUs) when WORLD_SIZE > 1."""
    rank, world, local = dist_env()
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    return rank, world, local


def all_sum(values: list[int], world: int, model: torch.nn.Module) -> list[int]:
    """`values` summed over ranks (waits for every rank: the shards are all written after it)."""
    if world == 1:
        return values
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.int64, device=next(model.parameters()).device)
    dist.all_reduce(t)
    return t.tolist()


def barrier(world: int) -> None:
    """Wait for every rank (when there are several)."""
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
