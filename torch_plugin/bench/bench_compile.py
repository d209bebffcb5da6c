#!/usr/bin/env python3
"""torch.compile(backend="neuron") benchmark: ratios measured in one run.

  200 ops  : a graph of 200 small elementwise ops (1k floats) per call; host time per
             op of the compiled graph (one program replay per call, fused and unfused;
             enqueue only) against CPU eager per op (goal <= 0.3x) and neuron eager's
             host time per op; and the same including the device's work
  training : one transformer LM training step (forward, backward, AdamW) compiled
             against CPU eager (goal <= 1.0x) and neuron eager
  compile  : the compiled transformer step's first call (Dynamo, AOTAutograd,
             capture, lowering, validation in neurond)

The simulated chip computes on this host's CPU cores (in neurond), so the device and
torch's CPU backend share the same silicon. Usage: python3 torch_plugin/bench/bench_compile.py
(starts a private neurond unless NEURON_SOCKET points at a running one)."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from _daemon import REPO, ensure_daemon  # noqa: E402
from _timing import best_time  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "torch"))

OPS = 200


def host_time(fn, sync, reps, rounds=3):
    """Host time per call, enqueue only: the device work is waited for outside
    the timing (as bench_torch.py's small-op row)."""
    for _ in range(3):
        fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
        sync()
    return best


def chain_200(x):
    for i in range(OPS // 4):
        x = x * 1.0001
        x = x + 0.001
        x = torch.tanh(x)
        x = x - 0.0005
    return x


def main():
    ensure_daemon()
    global torch
    import torch
    import torch._dynamo
    import torch.nn.functional as F
    import torch_neuron.compiler as nc
    from models import TinyLM

    nsync = torch.neuron.synchronize
    csync = lambda: None  # noqa: E731
    torch.set_num_threads(1)  # the CPU's best on a loaded 2-core host for these sizes
    rows = []

    # 1. 200 small elementwise ops per call.
    x = torch.randn(1024)
    dx = x.to("neuron")
    t_cpu = best_time(lambda: chain_200(x), csync, 50) / OPS
    t_eager = best_time(lambda: chain_200(dx), nsync, 20) / OPS
    results = {}
    for fusion in (False, True):
        torch._dynamo.reset()
        nc.FUSION = fusion
        nc.reset_stats()
        cf = torch.compile(chain_200, backend="neuron")
        torch.testing.assert_close(cf(dx).cpu(), chain_200(x), rtol=1e-4, atol=1e-5)
        results[fusion] = (best_time(lambda: cf(dx), nsync, 50) / OPS, nc.stats(),
                           host_time(lambda: cf(dx), nsync, 50) / OPS)
    nc.FUSION = True
    h_eager = host_time(lambda: chain_200(dx), nsync, 20) / OPS
    for fusion in (False, True):
        t, st, h = results[fusion]
        name = f"200-op graph, replay {'fused' if fusion else 'unfused'} ({st.get('program_nodes')} nodes)"
        rows.append((name + ", host us/op vs cpu eager", t_cpu * 1e6, h * 1e6, h / t_cpu, "<= 0.3"))
        rows.append((name + ", host us/op vs neuron eager host", h_eager * 1e6, h * 1e6, h / h_eager, "(report)"))
        rows.append((name + ", incl. device us/op vs cpu eager", t_cpu * 1e6, t * 1e6, t / t_cpu, "(report)"))
        rows.append((name + ", incl. device us/op vs neuron eager", t_eager * 1e6, t * 1e6, t / t_eager,
                     "(report)"))
    assert results[True][1].get("replays", 0) > 0, results[True][1]

    # 2. transformer LM training step, and 3. its compile time.
    data = (torch.randint(0, 96, (8, 32)), torch.randint(0, 96, (8, 32)))

    def make_step(model, opt, x, y):
        def step():
            out = model(x)
            loss = F.cross_entropy(out.flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    torch.manual_seed(0)
    mc = TinyLM()
    state = mc.state_dict()
    me = TinyLM().to("neuron")
    me.load_state_dict(state)
    mk = TinyLM().to("neuron")
    mk.load_state_dict(state)
    t_cpu = best_time(make_step(mc, torch.optim.AdamW(mc.parameters(), 1e-3), *data), csync, 10)
    dd = (data[0].to("neuron"), data[1].to("neuron"))
    t_eager = best_time(make_step(me, torch.optim.AdamW(me.parameters(), 1e-3), *dd), nsync, 10)
    torch._dynamo.reset()
    nc.reset_stats()
    compiled = torch.compile(mk, backend="neuron")
    step = make_step(compiled, torch.optim.AdamW(mk.parameters(), 1e-3), *dd)
    t0 = time.perf_counter()
    step()
    nsync()
    t_compile = time.perf_counter() - t0
    t_comp = best_time(step, nsync, 10)
    st = nc.stats()
    rows.append((f"transformer train step, compiled ({st.get('program_nodes')} nodes) vs cpu eager, ms",
                 t_cpu * 1e3, t_comp * 1e3, t_comp / t_cpu, "<= 1.0"))
    rows.append(("transformer train step, compiled vs neuron eager, ms", t_eager * 1e3, t_comp * 1e3,
                 t_comp / t_eager, "(report)"))
    rows.append(("transformer compile (first step) vs one compiled step, s", t_comp, t_compile, t_compile / t_comp,
                 "(report)"))

    print(f"{'benchmark':<78} {'reference':>10} {'neuron':>10} {'ratio':>8}  goal")
    for name, ref, got, ratio, goal in rows:
        print(f"{name:<78} {ref:>10.3f} {got:>10.3f} {ratio:>8.3f}  {goal}")
    print(f"compile stats of the transformer: {st}")


if __name__ == "__main__":
    main()
