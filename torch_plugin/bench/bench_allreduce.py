#!/usr/bin/env python3
"""all_reduce bus bandwidth on 2 ranks: backend "neuron" (neurond moves and reduces
device memory) against gloo on host tensors and against this host's memcpy, all
measured in the same run.

Bus bandwidth as nccl-tests defines it: algbw = bytes / time, busbw = algbw *
2 (n - 1) / n for all_reduce on n ranks. memcpy: the best of
numpy.copyto between two host buffers of the same size, on rank 0 alone (one read + one write per
byte, the floor of any data movement on this host). The simulated chip is this
host's CPU, so memcpy is the ceiling the device path can approach.

Usage: python3 torch_plugin/bench/bench_allreduce.py [--max-mib 64] [--ranks 2]
(starts a private neurond unless NEURON_SOCKET points at a running one)."""
import argparse
import os
import sys
import tempfile
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from _daemon import ensure_daemon  # noqa: E402
from _timing import best_time  # noqa: E402


def _sizes(max_mib):
    n = 1024
    while n <= max_mib * 1024 * 1024:
        yield n
        n *= 4 if n < 1024 * 1024 else 2


def _time(fn, sync, nbytes):
    # enough calls for ~64 MiB moved per round, 3..200
    return best_time(fn, sync, max(3, min(200, (64 << 20) // max(nbytes, 1))), warmup=2)


def _rank(rank, world, store_path, max_mib, queue):
    import numpy as np
    import torch
    import torch.distributed as dist

    torch.neuron.set_device(0)
    dist.init_process_group("cpu:gloo,neuron:neuron", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world, timeout=timedelta(seconds=300))
    rows = []
    for nbytes in _sizes(max_mib):
        n = nbytes // 4
        dev = torch.ones(n, device="neuron")
        host = torch.ones(n)
        t_dev = _time(lambda: dist.all_reduce(dev), torch.neuron.synchronize, nbytes)
        t_gloo = _time(lambda: dist.all_reduce(host), lambda: None, nbytes)
        # memcpy on rank 0 while the other ranks wait (they would compete for the cores).
        t_copy = float("inf")
        if rank == 0:
            # numpy.copyto: one thread's memcpy (torch's copy_ splits large copies over
            # an OpenMP pool, which on a loaded host measures the pool, not memory).
            src, dst = np.ones(n, np.float32), np.ones(n, np.float32)
            t_copy = _time(lambda: np.copyto(dst, src), lambda: None, nbytes)
        dist.all_reduce(host)  # every rank waits for rank 0's memcpy (through gloo)
        rows.append((nbytes, t_dev, t_gloo, t_copy))
    dist.destroy_process_group()
    queue.put((rank, rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    ensure_daemon()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=_rank, args=(r, args.ranks, os.path.join(d, "store"), args.max_mib, queue))
                 for r in range(args.ranks)]
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=1800) for _ in procs)
        for p in procs:
            p.join()
    world = args.ranks
    factor = 2 * (world - 1) / world
    print(f"all_reduce float32 sum, {world} ranks on one host; busbw = bytes/time * 2(n-1)/n; GB/s = 1e9 B/s")
    print(f"{'size':>9} {'neuron us':>10} {'busbw':>7} {'gloo us':>10} {'busbw':>7} {'memcpy':>7} "
          f"{'neuron/memcpy':>13} {'neuron/gloo':>11}")
    for i, (nbytes, _, _, _) in enumerate(results[0]):
        t_dev = max(results[r][i][1] for r in results)   # the slowest rank sets the pace
        t_gloo = max(results[r][i][2] for r in results)
        t_copy = min(results[r][i][3] for r in results)
        bw = lambda t: nbytes / t / 1e9 * factor  # noqa: E731
        copy_bw = nbytes / t_copy / 1e9
        size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
        print(f"{size:>9} {t_dev * 1e6:>10.1f} {bw(t_dev):>7.2f} {t_gloo * 1e6:>10.1f} {bw(t_gloo):>7.2f} "
              f"{copy_bw:>7.2f} {bw(t_dev) / copy_bw:>12.2f}x {t_gloo / t_dev:>10.2f}x")


if __name__ == "__main__":
    main()
