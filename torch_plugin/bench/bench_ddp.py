#!/usr/bin/env python3
"""DDP step time on N ranks (backend "neuron") against 1 rank with 1/N of the batch.

Each rank trains the tiny transformer LM of tests/torch/models.py (the model of the
distributed tests, at a size given by --d/--layers) with DDP on its share of a
global batch; the single-rank run is the same model, no DDP, on one share. The
ratio step(N ranks) / step(1 rank, batch / N) is DDP's overhead: the gradient
all_reduce, and on a host with fewer cores than ranks, the ranks sharing the CPU
that also simulates the chip (1.0 would be perfect scaling).

Usage: python3 torch_plugin/bench/bench_ddp.py [--ranks 4] [--batch 32] [--steps 10]
(starts a private neurond unless NEURON_SOCKET points at a running one)."""
import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))
from _daemon import ensure_daemon  # noqa: E402


def _batches(steps, batch, vocab, ctx):
    import torch

    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        seq = torch.randint(0, vocab, (batch, ctx + 1), generator=g)
        yield seq[:, :-1], seq[:, 1:]


def _train(rank, world, store_path, args, queue):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from models import TinyLM

    torch.neuron.set_device(0)
    torch.manual_seed(0)
    model = TinyLM(vocab=args.vocab, d=args.d, heads=4, layers=args.layers, ctx=args.ctx).to("neuron")
    if world > 1:
        dist.init_process_group("neuron", store=dist.FileStore(store_path, world), rank=rank, world_size=world,
                                timeout=timedelta(seconds=600))
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    per = args.batch // args.ranks  # the share of one rank, in both runs
    times = []
    for x, y in _batches(args.warmup + args.steps, per, args.vocab, args.ctx):
        x, y = x.to("neuron"), y.to("neuron")
        torch.neuron.synchronize()
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(x)
        F.cross_entropy(logits.reshape(-1, args.vocab), y.reshape(-1)).backward()
        opt.step()
        torch.neuron.synchronize()
        times.append(time.perf_counter() - t0)
    if world > 1:
        dist.destroy_process_group()
    queue.put((rank, times[args.warmup:]))


def _run(world, args):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=_train, args=(r, world, os.path.join(d, "store"), args, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        res = dict(queue.get(timeout=1800) for _ in procs)
        for p in procs:
            p.join()
    # A step ends when the slowest rank's does; the median step of the run.
    steps = sorted(max(res[r][i] for r in res) for i in range(args.steps))
    return steps[len(steps) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32, help="global batch (each rank gets batch / ranks)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--ctx", type=int, default=32)
    args = ap.parse_args()
    if args.batch % args.ranks:
        ap.error("--batch must be a multiple of --ranks")
    ensure_daemon()
    one = _run(1, args)
    many = _run(args.ranks, args)
    n_params = args.vocab * args.d * 2 + args.ctx * args.d + args.layers * 12 * args.d * args.d
    print(f"TinyLM d={args.d} layers={args.layers} (~{n_params / 1e3:.0f}k parameters), global batch {args.batch}, "
          f"median of {args.steps} steps")
    print(f"1 rank, batch {args.batch // args.ranks}: {one * 1e3:.1f} ms/step")
    print(f"{args.ranks} ranks (DDP, backend neuron), batch {args.batch // args.ranks} each: {many * 1e3:.1f} ms/step")
    print(f"ratio {args.ranks} ranks / 1 rank: {many / one:.2f}x (1.0 = perfect weak scaling)")


if __name__ == "__main__":
    main()
