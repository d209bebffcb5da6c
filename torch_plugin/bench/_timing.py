"""Timing shared by the benchmarks in this folder."""
import time


def best_time(fn, sync, reps, rounds=3, warmup=3):
    """Best of `rounds` mean times per call of `fn` over `reps` calls, device work
    included: `sync` waits for it before each clock read (warm-up calls first)."""
    for _ in range(warmup):
        fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best
