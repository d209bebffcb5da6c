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


def best_times_interleaved(cases, reps, rounds=5, warmup=3):
    """Best mean time per call of each case, the cases timed in turn round after
    round, so that every one of them sees the same spells of a shared host (a
    ratio of two best-of-N taken minutes apart mostly measures which side met the
    host's fast spell). A case is (fn, sync, enter, leave): enter() before its
    round (a thread count, a mode), then `warmup` calls, `reps` timed calls, sync,
    and leave()."""
    best = [float("inf")] * len(cases)
    for _ in range(rounds):
        for i, (fn, sync, enter, leave) in enumerate(cases):
            enter()
            try:
                for _ in range(warmup):
                    fn()
                sync()
                t0 = time.perf_counter()
                for _ in range(reps):
                    fn()
                sync()
                best[i] = min(best[i], (time.perf_counter() - t0) / reps)
            finally:
                leave()
    return best
