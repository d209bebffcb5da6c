"""Device RNG (issue 15 item 3): every random op runs on the chip (one ISA 1.4
command, Philox4x32-10) in strict mode; the same seed gives the same numbers in
another process; get/set_rng_state and fork_rng restore the stream; the
distributions pass mean/variance/Kolmogorov-Smirnov checks (scipy.stats as the
reference); and torch.manual_seed in a CPU-only program never connects."""
import math

import pytest
import torch
from scipy import stats

from conftest import run_python

DEV = "neuron"
# Fixed seeds: the checks are deterministic, so these thresholds never flake.
N = 200_000
ALPHA = 1e-3


def draws():
    torch.neuron.manual_seed(1234)
    return [torch.rand(1000, device=DEV).cpu(), torch.randn(7, 9, device=DEV).cpu(),
            torch.randint(0, 100, (50,), device=DEV).cpu(), torch.randperm(300, device=DEV).cpu(),
            torch.multinomial(torch.tensor([0.1, 0.5, 0.4], device=DEV), 40, replacement=True).cpu(),
            torch.nn.functional.dropout(torch.ones(64, device=DEV), 0.3).cpu()]


def test_random_ops_are_native(strict):
    torch.ops.neuron.reset_op_counts()
    draws()
    x = torch.empty(100, device=DEV)
    x.uniform_(-2, 3)
    x.normal_(1, 2)
    x.bernoulli_(0.3)
    x.bernoulli_(torch.full((100,), 0.5, device=DEV))
    torch.bernoulli(torch.full((10,), 0.5, device=DEV))
    torch.empty(10, dtype=torch.int64, device=DEV).random_()
    torch.multinomial(torch.rand(4, 6, device=DEV), 3)
    assert torch.neuron.fallback_ops() == {}
    for op in ("uniform_", "normal_", "bernoulli_", "random_", "randperm", "multinomial", "native_dropout"):
        assert torch.neuron.native_ops().get(op, 0) > 0, op


def test_same_seed_same_numbers_in_another_process():
    a = draws()
    code = ("import torch, sys\nsys.path.insert(0, %r)\nfrom test_rng import draws\n"
            "torch.save(draws(), sys.argv[1] if len(sys.argv) > 1 else '/dev/stdout')" % __import__("os").path.dirname(__file__))
    import os
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "draws.pt")
        r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        b = torch.load(path)
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    assert not torch.equal(a[0], draws()[0][:0].new_zeros(1000))  # not degenerate
    torch.neuron.manual_seed(1235)
    assert not torch.equal(torch.rand(1000, device=DEV).cpu(), a[0]), "another seed gives other numbers"


def test_rng_state_and_fork_rng():
    torch.neuron.manual_seed(5)
    torch.rand(10, device=DEV)
    st = torch.neuron.get_rng_state()
    assert st.dtype == torch.uint8 and st.numel() == 16 and st.device.type == "cpu"
    a = torch.randn(100, device=DEV).cpu()
    torch.neuron.set_rng_state(st)
    assert torch.equal(torch.randn(100, device=DEV).cpu(), a)
    torch.neuron.set_rng_state(st)
    with torch.random.fork_rng(device_type="neuron"):
        torch.randn(100, device=DEV)
        torch.randn(100, device=DEV)
    assert torch.equal(torch.randn(100, device=DEV).cpu(), a), "fork_rng restores the state"
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(5, dtype=torch.uint8))
    # A private generator is independent of the default one.
    g = torch.Generator(device=DEV).manual_seed(5)
    g.set_state(st)
    assert torch.equal(torch.randn(100, device=DEV, generator=g).cpu(), a)
    assert g.get_state().numel() == 16


def test_normal_uniform_bernoulli_distributions():
    torch.neuron.manual_seed(11)
    x = torch.randn(N, device=DEV).cpu().double().numpy()
    assert abs(x.mean()) < 6 / math.sqrt(N) and abs(x.var() - 1) < 6 * math.sqrt(2 / N)
    assert stats.kstest(x, "norm").pvalue > ALPHA
    y = torch.empty(N, device=DEV).normal_(3, 0.5).cpu().numpy()
    assert stats.kstest(y, "norm", args=(3, 0.5)).pvalue > ALPHA
    u = torch.empty(N, device=DEV).uniform_(-2, 6).cpu().numpy()
    assert u.min() >= -2 and u.max() < 6
    assert stats.kstest(u, "uniform", args=(-2, 8)).pvalue > ALPHA
    for dt in (torch.bfloat16, torch.float16):
        h = torch.rand(N, device=DEV, dtype=dt).float().cpu()
        assert h.min() >= 0 and h.max() < 1 and abs(h.mean() - 0.5) < 0.01
    b = torch.empty(N, device=DEV).bernoulli_(0.2).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0}
    assert stats.binomtest(int(b.sum()), N, 0.2).pvalue > ALPHA
    p = torch.linspace(0, 1, N).to(DEV)
    bt = torch.bernoulli(p).cpu()
    # E[sum] = sum(p); the per-position rates follow p (first vs last decile).
    assert abs(bt.sum() - N / 2) < 6 * math.sqrt(N / 6)
    assert bt[: N // 10].mean() < 0.1 and bt[-N // 10:].mean() > 0.9


def test_random_integers_randint_and_randperm():
    torch.neuron.manual_seed(3)
    r = torch.randint(-5, 12, (N,), device=DEV).cpu()
    assert r.min() == -5 and r.max() == 11
    counts = torch.bincount(r + 5).double().numpy()
    assert stats.chisquare(counts).pvalue > ALPHA
    assert torch.empty(1000, dtype=torch.uint8, device=DEV).random_().cpu().max() > 200
    f = torch.empty(1000, device=DEV).random_(10).cpu()
    assert f.min() >= 0 and f.max() <= 9 and torch.equal(f, f.round())
    for dt in (torch.int64, torch.int32, torch.float32, torch.int16):
        p = torch.randperm(1000, device=DEV, dtype=dt).cpu()
        assert p.dtype == dt and torch.equal(p.sort().values, torch.arange(1000, dtype=dt))
    # Uniform over permutations: the position of element 0 in 6000 perms of 6.
    pos = torch.stack([torch.randperm(6, device=DEV) for _ in range(6000)]).cpu().argmin(dim=1)
    assert stats.chisquare(torch.bincount(pos, minlength=6).double().numpy()).pvalue > ALPHA
    assert torch.randperm(0, device=DEV).numel() == 0


def test_multinomial():
    torch.neuron.manual_seed(4)
    w = torch.tensor([[1.0, 0.0, 3.0, 6.0], [5.0, 5.0, 0.0, 0.0]], device=DEV)
    s = torch.multinomial(w, 20000, replacement=True).cpu()
    assert s.shape == (2, 20000) and s.dtype == torch.int64
    for row, weights in zip(s, w.cpu()):
        counts = torch.bincount(row, minlength=4).double()
        nz = weights > 0
        assert counts[~nz].sum() == 0, "zero weights are never drawn"
        expected = (weights[nz] / weights.sum() * row.numel()).numpy()
        assert stats.chisquare(counts[nz].numpy(), expected).pvalue > ALPHA
    t = torch.multinomial(w[0], 3).cpu()
    assert sorted(t.tolist()) == [0, 2, 3], "without replacement: distinct positive categories"
    firsts = torch.stack([torch.multinomial(w[0], 2)[0] for _ in range(3000)]).cpu()
    counts = torch.bincount(firsts, minlength=4).double()
    assert stats.chisquare(counts[[0, 2, 3]].numpy(), [300, 900, 1800]).pvalue > ALPHA
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(w, 5)
    # Data-dependent errors are device faults, raised at the next sync (as CUDA's device asserts).
    bad = torch.tensor([1.0, -1.0], device=DEV)
    with pytest.raises(RuntimeError, match="negative"):
        torch.multinomial(bad, 1).cpu()
    torch.rand(3, device=DEV).cpu()  # the stream recovered


def test_dropout_on_device():
    torch.neuron.manual_seed(8)
    x = torch.randn(1000, 100, device=DEV, requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.25, training=True)
    kept = (y != 0).cpu()
    assert stats.binomtest(int(kept.sum()), kept.numel(), 0.75).pvalue > ALPHA
    torch.testing.assert_close(y.detach().cpu()[kept], (x.detach().cpu() / 0.75)[kept])
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.75)
    assert torch.equal(torch.nn.functional.dropout(x, 0.25, training=False).detach().cpu(), x.detach().cpu())
    assert (torch.nn.functional.dropout(x, 1.0).cpu() == 0).all()


def test_manual_seed_does_not_connect():
    # A CPU-only program with a live neurond at NEURON_SOCKET: seeding every
    # device (torch.manual_seed, torch.seed, fork_rng's state) must not connect.
    r = run_python("import torch\ntorch.manual_seed(77)\ntorch.seed()\ntorch.manual_seed(77)\n"
                   "print(torch.rand(2).shape, torch.neuron.initial_seed(), torch.ops.neuron._connected(),\n"
                   "      torch.neuron.is_initialized())\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["torch.Size([2])", "77", "False", "False"], r.stdout
    r = run_python("import torch\ntorch.rand(2, device='neuron')\nprint(torch.ops.neuron._connected())\n")
    assert r.stdout.strip() == "True", r.stdout + r.stderr  # the check can see a connection
