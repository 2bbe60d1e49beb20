"""packswap.torch: the pack exchange for torch.distributed trainers (Gloo on CPU, NCCL on CUDA).

    from packswap.torch import Rebalancer
    with Rebalancer(ga=16, cost=lambda pack: vit_cost(pack)) as rb:
        for step in range(steps):
            local = [next(data_iter) for _ in range(16)]  # this rank's packs: dicts of tensors
            for pack in rb.step(local):                   # balanced; m+1 moves while m runs
                model(**pack).backward()
            optimizer.step()

This is the only part of packswap that imports torch; it links nothing of libtorch (works with
torch 1.13 and 2.x). See docs/python.md.
"""

from .._errors import Error
from ._rebalancer import Rebalancer

__all__ = ["Error", "Rebalancer"]
