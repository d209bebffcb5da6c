#!/usr/bin/env python3
"""Tile kernels (torch_neuron.kernels) against the chip's own opcodes: ratios measured in one run.

  matmul   : the kernel language's matmul (tiles of 128 x 512, K by 128, accumulated in
             PSUM) against `a @ b` on `neuron` (one MATMUL command), device work
             included (goal >= 0.8x: kernel throughput / opcode throughput)
  flash    : the library's flash attention (causal, forward) against
             F.scaled_dot_product_attention on neuron at S = 512..4096 (B 1, 4 heads, D 64):
             time (goal >= 1x from 2048) and device memory peak above the inputs (goal O(S))
             and the backward (gradients of q, k, v) against SDPA's autograd up to
             S = $BENCH_FLASH_BWD_MAX_S (default 2048); each time the best of
             $BENCH_FLASH_ROUNDS calls (default 1), SDPA and kernel called in turn
  launch   : per-call cost of a kernel that moves one element (one EXEC_PROGRAM of a
             one-node program) against one chip command on one element (an add), as a
             stream of calls (device work included) and one call at a time (a
             synchronize after each); the same kernel as a custom op (torch.library
             dispatch on top)

The simulated chip computes on this host's CPU cores (in neurond). Usage:
python3 torch_plugin/bench/bench_kernels.py (starts a private neurond unless
NEURON_SOCKET points at a running one)."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from _daemon import ensure_daemon  # noqa: E402
from _timing import best_time  # noqa: E402


def main():
    ensure_daemon()
    import torch
    import torch_neuron.kernels as nk
    from torch_neuron.kernels.library import matmul  # the tiled matmul test_kernels.py checks

    @nk.kernel
    def touch(out, x):
        nk.store(out[0:1, 0:1], nk.load(x[0:1, 0:1]) + 1.0)

    @nk.custom_op("bench_kernels::touch", touch)
    def touch_op(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    sync = torch.neuron.synchronize
    rows = []
    for dtype, n in ((torch.float32, 512), (torch.float32, 1024), (torch.bfloat16, 1024)):
        a = torch.randn(n, n, dtype=dtype, device="neuron")
        b = torch.randn(n, n, dtype=dtype, device="neuron")
        c = torch.empty(n, n, device="neuron")
        matmul(c, a, b)
        torch.testing.assert_close(c.cpu(), (a.float() @ b.float()).cpu(), rtol=1e-3, atol=1e-3)
        reps = 5 if n <= 512 else 2
        t_op = best_time(lambda: a @ b, sync, reps)
        t_k = best_time(lambda: matmul(c, a, b), sync, reps)
        name = str(dtype).replace("torch.", "")
        rows.append((f"matmul {n}^3 {name}: opcode / kernel time (goal >= 0.8)", t_op * 1e3, t_k * 1e3, t_op / t_k,
                     "ms"))

    x = torch.zeros(1, 1, device="neuron")
    out = torch.empty(1, 1, device="neuron")
    touch(out, x)
    assert out.item() == 1.0
    t_cmd = best_time(lambda: torch.add(x, 1.0, out=out), sync, 200)
    t_kern = best_time(lambda: touch(out, x), sync, 200)
    t_op = best_time(lambda: touch_op(x), sync, 200)

    def one(fn):
        return lambda: (fn(), sync())

    t_cmd1 = best_time(one(lambda: torch.add(x, 1.0, out=out)), lambda: None, 100)
    t_kern1 = best_time(one(lambda: touch(out, x)), lambda: None, 100)
    rows.append(("launch, stream of calls: kernel / one command", t_cmd * 1e6, t_kern * 1e6, t_kern / t_cmd, "us"))
    rows.append(("launch, stream of calls: custom op / one command", t_cmd * 1e6, t_op * 1e6, t_op / t_cmd, "us"))
    rows.append(("launch, call + synchronize: kernel / one command", t_cmd1 * 1e6, t_kern1 * 1e6, t_kern1 / t_cmd1,
                 "us"))

    # Flash attention (causal, forward) against SDPA's math path on neuron: time and
    # the device memory peak above the inputs.
    from torch_neuron.kernels import library as kl
    import torch.nn.functional as F

    def peak(fn):
        sync()
        base = torch.neuron.memory_allocated()
        torch.neuron.reset_peak_memory_stats()
        fn()
        sync()
        return (torch.neuron.max_memory_allocated() - base) / 2**20

    def alternate(ref, kern, rounds):
        """Best times of ref and kern called in turn (after one warm-up call each), so
        that both see the same load on a shared host."""
        best = [float("inf"), float("inf")]
        for fn in (ref, kern):
            fn()
        for _ in range(rounds):
            for i, fn in enumerate((ref, kern)):
                sync()
                t0 = time.perf_counter()
                fn()
                sync()
                best[i] = min(best[i], time.perf_counter() - t0)
        return best

    bwd_max = int(os.environ.get("BENCH_FLASH_BWD_MAX_S", "2048"))  # SDPA's backward at 4096: 256 MiB scores
    rounds = int(os.environ.get("BENCH_FLASH_ROUNDS", "1"))  # best of N: filters a loaded host's stalls
    for S in (512, 1024, 2048, 4096):
        q, k, v = (torch.randn(1, 4, S, 64, device="neuron") for _ in range(3))
        fa = lambda: kl.flash_attention(q, k, v, causal=True)  # noqa: E731
        sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        torch.testing.assert_close(fa().cpu(), sdpa().cpu(), rtol=1e-4, atol=1e-4)
        t_sdpa, t_fa = alternate(sdpa, fa, rounds)
        m_sdpa, m_fa = peak(sdpa), peak(fa)
        rows.append((f"flash attention S={S} causal fwd: SDPA / kernel time", t_sdpa * 1e3, t_fa * 1e3,
                     t_sdpa / t_fa, "ms"))
        rows.append((f"flash attention S={S}: device peak MiB, kernel / SDPA", m_sdpa, m_fa, m_fa / m_sdpa, "Mi"))
        # Backward: the gradients of q, k, v from one forward (kept), timed alone: the
        # kernels' stats + backward kernels against SDPA's math path's autograd.
        if S <= bwd_max:
            g = torch.randn_like(q)
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            o_fa = kl.flash_attention(*leaves, causal=True)
            o_sdpa = F.scaled_dot_product_attention(*leaves, is_causal=True)
            grad = lambda o: torch.autograd.grad(o, leaves, g, retain_graph=True)  # noqa: E731
            for a, b in zip(grad(o_fa), grad(o_sdpa)):
                torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-3, atol=1e-3)
            t_sdpa, t_fa = alternate(lambda: grad(o_sdpa), lambda: grad(o_fa), rounds)
            rows.append((f"flash attention S={S} causal bwd: SDPA / kernel time", t_sdpa * 1e3, t_fa * 1e3,
                         t_sdpa / t_fa, "ms"))

    print(f"{'row':58} {'reference':>10} {'kernel':>10} {'ratio':>7}")
    for name, ref, kern, ratio, unit in rows:
        print(f"{name:58} {ref:8.3f}{unit:>2} {kern:8.3f}{unit:>2} {ratio:7.3f}")


if __name__ == "__main__":
    main()
