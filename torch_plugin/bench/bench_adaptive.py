#!/usr/bin/env python3
"""Adaptive eager benchmark (torch.neuron.set_adaptive_eager): ratios from one run.

  small ops: 200 elementwise ops on 1k floats then .item(), per op, device work
             included: adaptive eager against plain neuron eager and CPU eager
  training : one transformer LM training step (forward, backward, AdamW, fused and
             foreach) with adaptive eager against CPU eager (goal <= 1.0x) and plain
             neuron eager (report); with the share of commands replayed. The CPU,
             neuron eager and adaptive eager are timed in turn over 5 rounds (best
             of each), so all three see the same spells of a shared host.

The simulated chip computes on this host's CPU cores (in neurond), so the device and
torch's CPU backend share the same silicon. Usage: python3 torch_plugin/bench/bench_adaptive.py
(starts a private neurond unless NEURON_SOCKET points at a running one)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from _daemon import REPO, ensure_daemon  # noqa: E402
from _timing import best_time, best_times_interleaved  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "torch"))

OPS = 200


def main():
    ensure_daemon()
    import torch
    import torch.nn.functional as F
    from models import TinyLM

    nsync = torch.neuron.synchronize
    csync = lambda: None  # noqa: E731
    default_threads = torch.get_num_threads()

    def cpu_time(fn, reps, warmup=3):
        best = float("inf")
        for nt in sorted({1, default_threads}):  # the CPU at its best thread count
            torch.set_num_threads(nt)
            best = min(best, best_time(fn, csync, reps, warmup=warmup))
        torch.set_num_threads(default_threads)
        return best

    def adaptive_time(fn, reps):
        torch.neuron.set_adaptive_eager(True)
        torch.neuron.reset_adaptive_eager_stats()
        try:
            t = best_time(fn, nsync, reps, warmup=5)
            s = torch.neuron.adaptive_eager_stats()
        finally:
            torch.neuron.set_adaptive_eager(False)
        return t, s

    rows = []

    def chain(x):
        def f():
            y = x
            for k in range(OPS // 2):
                y = y * 1.0001
                y = y + 0.5
            return y.sum().item()
        return f

    xc = torch.randn(1024)
    xd = xc.to("neuron")
    tc = cpu_time(chain(xc), 20) / OPS
    tp = best_time(chain(xd), nsync, 20) / OPS
    ta, s = adaptive_time(chain(xd), 20)
    ta /= OPS
    rows.append(("200 small ops + item, us/op: adaptive vs cpu", tc * 1e6, ta * 1e6, ta / tc, "(report)"))
    rows.append(("200 small ops + item, us/op: adaptive vs neuron eager", tp * 1e6, ta * 1e6, ta / tp,
                 f"(report; {s['replayed_segments']} segments replayed)"))

    lm_data = (torch.randint(0, 96, (8, 32)), torch.randint(0, 96, (8, 32)))

    def step_fn(model, opt, x, y):
        def f():
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return f

    for fused in (True, False):
        torch.manual_seed(0)
        mc = TinyLM()
        md = TinyLM().to("neuron")
        md.load_state_dict(mc.state_dict())
        oc = torch.optim.AdamW(mc.parameters(), 1e-3, fused=fused)
        od = torch.optim.AdamW(md.parameters(), 1e-3, fused=fused)
        x, y = lm_data[0].to("neuron"), lm_data[1].to("neuron")
        cpu_step, dev_step = step_fn(mc, oc, *lm_data), step_fn(md, od, x, y)
        threads = lambda n: lambda: torch.set_num_threads(n)  # noqa: E731
        adaptive = lambda on: lambda: torch.neuron.set_adaptive_eager(on)  # noqa: E731
        torch.neuron.reset_adaptive_eager_stats()
        # CPU at 1 and at its default threads, neuron eager and adaptive eager in turn,
        # 5 rounds (warm-up calls in each: adaptive eager records again when turned on).
        t1, tn, tp, ta = best_times_interleaved(
            [(cpu_step, csync, threads(1), threads(default_threads)),
             (cpu_step, csync, threads(default_threads), lambda: None),
             (dev_step, nsync, lambda: None, lambda: None),
             (dev_step, nsync, adaptive(True), adaptive(False))], 10, warmup=5)
        tc = min(t1, tn)
        s = torch.neuron.adaptive_eager_stats()
        name = "transformer step" + (" (fused AdamW)" if fused else " (foreach AdamW)")
        rows.append((name + ", ms: adaptive vs cpu", tc * 1e3, ta * 1e3, ta / tc, "adaptive/cpu <= 1.0"))
        rows.append((name + ", ms: adaptive vs neuron eager", tp * 1e3, ta * 1e3, ta / tp,
                     f"(report; {s['replayed_segments']} of {s['segments']} segments, "
                     f"{s['replayed_commands']} commands replayed)"))

    print(f"torch {torch.__version__}, device {torch.neuron.get_device_name()}, "
          f"cpu baseline: best of 1 and {default_threads} threads, host cores {os.cpu_count()}")
    print(f"{'benchmark':58s} {'reference':>10s} {'adaptive':>10s} {'ratio':>7s}  goal")
    for name, c, d, r, goal in rows:
        print(f"{name:58s} {c:10.2f} {d:10.2f} {r:7.2f}  {goal}")


if __name__ == "__main__":
    main()
