#!/usr/bin/env python3
"""PyTorch's CPU matmul as a reference for bench-runtime (tests/bench/gemm_refs.h).

usage: torch_matmul.py N THREADS REPS

Times torch.matmul on two N x N float32 matrices with THREADS intra-op threads:
one warm-up, then REPS timed runs. The last line is "<name>\t<median GFLOP/s>";
without torch it prints why and exits 3.
"""
import sys
import time


def main():
    if len(sys.argv) != 4:
        print("usage: torch_matmul.py N THREADS REPS")
        return 2
    n, threads, reps = (int(x) for x in sys.argv[1:])
    try:
        import torch
    except ImportError as e:
        print(f"torch is not importable by {sys.executable}: {e}")
        return 3
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(n, n, generator=gen) - 0.5
    b = torch.rand(n, n, generator=gen) - 0.5
    out = torch.empty(n, n)
    rates = []
    for r in range(reps + 1):
        t0 = time.perf_counter_ns()
        torch.matmul(a, b, out=out)
        if r > 0:
            rates.append(2.0 * n ** 3 / (time.perf_counter_ns() - t0))
    rates.sort()
    # The same order statistic as bench::median (stats.h).
    median = rates[int(0.5 * (len(rates) - 1) + 0.5)]
    print(f"PyTorch {torch.__version__} torch.matmul\t{median:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
