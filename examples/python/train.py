"""A Megatron-style training loop with packswap.torch.Rebalancer: a toy vision-language model
whose vision encoder's cost follows image tokens, on packs cut from a packswap workload preset.

    python examples/python/train.py --nproc 4 --steps 5          # spawns 4 ranks
    torchrun --nproc-per-node 4 examples/python/train.py          # or let torchrun start them

Gloo on CPU; NCCL and the rank's GPU when CUDA is available (--device cpu forces CPU). Every
step, rank 0 prints the slowest rank's vision-encoder cost per micro-step (the cost model's
microseconds: what the other ranks wait for) without and with rebalancing, and what moved.
"""

import argparse
import datetime
import os
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import packswap
from packswap.torch import Rebalancer

SCALE = 16  # one toy row per SCALE tokens keeps the CPU run short


def pack_stream(args, rank, world, device):
    """This rank's packs, global batch after global batch: the preset's samples packed into 8K
    packs, every rank reading a contiguous shard of each batch (as data loaders do)."""
    need = (args.steps + 1) * world * args.ga
    count = need * 4
    while True:
        samples = packswap.generate(args.preset, count, args.seed)
        packs = packswap.GreedyPacker(capacity=8192)(samples)
        if len(packs) >= need:
            break
        count *= 2
    features = packswap.features_of(samples, packs)
    costs = packswap.CostModel().costs(features)  # microseconds, forward + backward
    col = {name: i for i, name in enumerate(packswap.FEATURES)}
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    for step in range(args.steps):
        first = step * world * args.ga + rank * args.ga
        local = []
        for p in range(first, first + args.ga):
            image = int(features[p, col["image_tokens"]]) // SCALE
            text = int(features[p, col["tokens"]] - features[p, col["image_tokens"]]) // SCALE
            local.append({
                "pixels": torch.randn(image, 8, generator=gen).to(device),
                "text": torch.randint(0, 1000, (max(text, 1),), generator=gen).to(device),
                "vit_cost": torch.tensor(int(costs[p]), device=device),
            })
        yield local


class ToyVLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.vision = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.GELU(),
                                          torch.nn.Linear(64, 32))
        self.embed = torch.nn.Embedding(1000, 32)
        self.head = torch.nn.Linear(32, 1)

    def forward(self, pixels, text, **_):
        h = self.embed(text).mean(0)
        if pixels.shape[0] > 0:
            h = h + self.vision(pixels).mean(0)
        return self.head(h).square().sum()


def train(rank, world, args):
    device = torch.device("cpu")
    if args.device != "cpu" and torch.cuda.is_available():
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = ToyVLM().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    # The cost of a pack: what the cost model said when the loader made it. Reading a CUDA
    # scalar syncs; a real loader would keep the cost next to the pack on the host.
    with Rebalancer(ga=args.ga, cost=lambda pack: int(pack["vit_cost"]), device=device,
                    timeout=args.timeout) as rb:
        for step, local in enumerate(pack_stream(args, rank, world, device)):
            for pack in rb.step(local):  # balanced; micro-step m+1 moves while m computes
                model(**pack).backward()
            for p in model.parameters():  # DDP-style: gradients summed over ranks
                dist.all_reduce(p.grad)
            opt.step()
            opt.zero_grad()
            if rank == 0:
                report(step, rb, args.ga)


def report(step, rb, ga):
    m = rb.solution.metrics
    plain = int(rb.costs.max(axis=0).sum())  # micro-step j: every rank computes its own pack j
    print(f"step {step}: slowest rank's encoder cost per micro-step "
          f"{plain / ga / 1000:8.1f} ms without rebalancing, {m['A'] / ga / 1000:8.1f} ms with "
          f"(lower bound {m['LB_A'] / ga / 1000:.1f}); moved {m['moved']} packs, "
          f"{m['moved_bytes'] / 1e3:.1f} kB", flush=True)


def spawned(rank, world, store, args):
    backend = "nccl" if args.device != "cpu" and torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        train(rank, world, args)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=4, help="ranks to spawn (without torchrun)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--ga", type=int, default=8, help="micro-steps per optimizer step")
    parser.add_argument("--preset", default="vlm-pretrain",
                        choices=packswap.workload_preset_names())
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        backend = "nccl" if args.device != "cpu" and torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
        try:
            train(dist.get_rank(), dist.get_world_size(), args)
        finally:
            dist.destroy_process_group()
    else:
        store = os.path.join(tempfile.mkdtemp(prefix="packswap-train-"), "store")
        mp.spawn(spawned, args=(args.nproc, store, args), nprocs=args.nproc)


if __name__ == "__main__":
    main()
