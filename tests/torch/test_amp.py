"""Autocast and GradScaler on 'neuron' (issue 15 item 1).

Autocast uses CUDA's op lists (torch_plugin/csrc/autocast.cpp). Each op class's
result dtype is compared with CPU autocast's where the CPU has the same policy,
and with the CUDA list (ATen/autocast_mode.h) where the CPU's differs; the
transformer LM trains under bf16 autocast close to fp32; GradScaler("neuron")
unscales and checks for infs on the device (one AMP_UNSCALE per gradient, no
fallback) and skips steps with infs as on the CPU."""
import pytest
import torch

from models import TinyLM

DEV = "neuron"
LOW = (torch.bfloat16, torch.float16)


def _inputs():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 8, generator=g)
    return {
        "a": a, "b": torch.randn(8, 8, generator=g), "v": torch.randn(8, generator=g),
        "batch": torch.randn(2, 8, 8, generator=g), "img": torch.randn(1, 2, 6, 6, generator=g),
        "w_conv": torch.randn(3, 2, 3, 3, generator=g), "pos": a.abs() + 0.5,
    }


# op class -> (name, fn(inputs)); every op is on both CPU's and CUDA's list with
# the same policy unless marked below.
LOWER = [
    ("mm", lambda t: torch.mm(t["a"], t["b"])),
    ("matmul", lambda t: t["a"] @ t["b"]),
    ("bmm", lambda t: torch.bmm(t["batch"], t["batch"])),
    ("addmm", lambda t: torch.addmm(t["v"], t["a"], t["b"])),
    ("linear", lambda t: torch.nn.functional.linear(t["a"], t["b"], t["v"])),
    ("baddbmm", lambda t: torch.baddbmm(t["batch"], t["batch"], t["batch"])),
    ("conv2d", lambda t: torch.nn.functional.conv2d(t["img"], t["w_conv"])),
]
FP32 = [
    ("mse_loss", lambda t: torch.nn.functional.mse_loss(t["a"].to(torch.bfloat16), t["b"].to(torch.bfloat16))),
    ("nll_loss", lambda t: torch.nn.functional.nll_loss(t["a"].to(torch.bfloat16).log_softmax(1),
                                                        torch.arange(8) % 8)),
    ("smooth_l1_loss", lambda t: torch.nn.functional.smooth_l1_loss(t["a"].to(torch.bfloat16), t["b"].to(torch.bfloat16))),
]
# The CUDA list runs these in fp32; the CPU list leaves them alone (a bf16 input
# gives a bf16 result there).
FP32_CUDA_ONLY = [
    ("layer_norm", lambda t: torch.nn.functional.layer_norm(t["a"].to(torch.bfloat16), (8,))),
    ("exp", lambda t: torch.exp(t["a"].to(torch.bfloat16))),
    ("log", lambda t: torch.log(t["pos"].to(torch.bfloat16))),
    ("pow", lambda t: torch.pow(t["pos"].to(torch.bfloat16), 2)),
    ("rsqrt", lambda t: torch.rsqrt(t["pos"].to(torch.bfloat16))),
    ("reciprocal", lambda t: torch.reciprocal(t["pos"].to(torch.bfloat16))),
]
SET_OPT_DTYPE = [  # fp32 results on CUDA's list; the CPU keeps the input dtype
    ("softmax", lambda t: torch.softmax(t["a"].to(torch.bfloat16), 1)),
    ("log_softmax", lambda t: torch.log_softmax(t["a"].to(torch.bfloat16), 1)),
    ("sum", lambda t: torch.sum(t["a"].to(torch.bfloat16))),
]
PROMOTE = [  # the widest input dtype, on both lists (CUDA's also has scatter_add, index_put)
    ("addcmul", lambda t: torch.addcmul(t["a"], t["b"].to(torch.bfloat16), t["a"].to(torch.bfloat16))),
    ("addcdiv", lambda t: torch.addcdiv(t["a"], t["b"].to(torch.bfloat16), t["pos"].to(torch.bfloat16))),
]
UNLISTED = [  # neither list: the op runs in the dtype it is given
    ("relu", lambda t: torch.relu(t["a"].to(torch.bfloat16))),
    ("add", lambda t: t["a"] + t["b"]),
]


def _dtype_under(device, dtype, fn):
    t = {k: v.to(device) for k, v in _inputs().items()}
    with torch.autocast(device, dtype=dtype):
        return fn(t).dtype


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name,fn", LOWER + FP32 + PROMOTE + UNLISTED, ids=lambda x: x if isinstance(x, str) else "")
def test_autocast_dtype_matches_cpu(name, fn, dtype):
    cpu = _dtype_under("cpu", dtype, fn)
    assert _dtype_under(DEV, dtype, fn) == cpu, f"{name}: neuron autocast differs from CPU autocast ({cpu})"


@pytest.mark.parametrize("name,fn", LOWER, ids=lambda x: x if isinstance(x, str) else "")
def test_lower_precision_class(name, fn):
    for dtype in LOW:
        assert _dtype_under(DEV, dtype, fn) == dtype, name
    with torch.autocast(DEV, enabled=False):
        assert fn({k: v.to(DEV) for k, v in _inputs().items()}).dtype == torch.float32


@pytest.mark.parametrize("name,fn", FP32_CUDA_ONLY + SET_OPT_DTYPE, ids=lambda x: x if isinstance(x, str) else "")
def test_fp32_class_follows_cuda_list(name, fn):
    assert _dtype_under(DEV, torch.bfloat16, fn) == torch.float32, name


def test_autocast_values_and_ban():
    t = {k: v.to(DEV) for k, v in _inputs().items()}
    with torch.autocast(DEV, dtype=torch.bfloat16):
        y = t["a"] @ t["b"]
    ref = (t["a"].cpu().bfloat16() @ t["b"].cpu().bfloat16())
    torch.testing.assert_close(y.cpu(), ref, rtol=1e-2, atol=1e-2)
    assert torch.is_autocast_enabled(DEV) is False
    with torch.autocast(DEV, dtype=torch.float16):
        assert torch.is_autocast_enabled(DEV) and torch.get_autocast_dtype(DEV) == torch.float16
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(torch.rand(4, device=DEV), torch.rand(4, device=DEV))


def _train_lm(autocast_dtype, steps=30):
    torch.manual_seed(0)
    model = TinyLM().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 96, (8, 33), generator=g).to(DEV)
    losses = []
    for _ in range(steps):
        with torch.autocast(DEV, dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            logits = model(data[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 96), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_transformer_trains_under_bf16_autocast():
    fp32 = _train_lm(None)
    bf16 = _train_lm(torch.bfloat16)
    assert bf16[-1] < 0.7 * bf16[0], f"bf16 autocast did not train: {bf16[0]:.3f} -> {bf16[-1]:.3f}"
    # bf16 keeps ~3 significant digits; the curves stay within a few percent.
    for i, (a, b) in enumerate(zip(fp32, bf16)):
        assert abs(a - b) <= 0.05 * abs(a) + 0.02, f"step {i}: fp32 {a:.4f} vs bf16 {b:.4f}"


def _scaler_run(device, inf_at, steps=6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(64, 16, generator=g).to(device), torch.randn(64, 4, generator=g).to(device)
    scales = []
    for step in range(steps):
        with torch.autocast(device, dtype=torch.float16 if device == DEV else torch.bfloat16):
            loss = ((model(x).float() - y) ** 2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        if step == inf_at:
            model[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, [p.detach().cpu() for p in model.parameters()]


def test_grad_scaler_unscales_and_skips_inf_steps_on_device(strict):
    torch.ops.neuron.reset_op_counts()
    scales, params = _scaler_run(DEV, inf_at=3)
    native = torch.neuron.native_ops()
    assert native.get("_amp_foreach_non_finite_check_and_unscale_", 0) >= 6
    assert native.get("_amp_update_scale_", 0) == 6
    assert torch.neuron.fallback_ops() == {}
    # growth every 2 clean steps, halved on the inf step (step 3), as the CPU does it.
    cpu_scales, _ = _scaler_run("cpu", inf_at=3)
    assert scales == cpu_scales == [1024.0, 2048.0, 2048.0, 1024.0, 1024.0, 2048.0]
    assert all(torch.isfinite(p).all() for p in params), "the inf step was skipped"


def test_unscale_kernel_against_cpu():
    g = torch.Generator().manual_seed(3)
    grads = [torch.randn(7, 5, generator=g) * 100, torch.randn(9, generator=g).t(), torch.randn(4, 6, generator=g).t()]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        cpu = [x.to(dtype) for x in grads]
        dev = [x.to(DEV) for x in cpu]
        dev[1] = dev[1][::2]
        cpu[1] = cpu[1][::2]
        fi_c, fi_d = torch.zeros(1), torch.zeros(1, device=DEV)
        inv_c, inv_d = torch.full((1,), 0.25), torch.full((1,), 0.25, device=DEV)
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, fi_c, inv_c)
        torch._amp_foreach_non_finite_check_and_unscale_(dev, fi_d, inv_d)
        for c, d in zip(cpu, dev):
            torch.testing.assert_close(d.cpu(), c)
        assert fi_d.item() == fi_c.item() == 0
        dev[2][1, 1] = float("nan")
        torch._amp_foreach_non_finite_check_and_unscale_(dev, fi_d, inv_d)
        assert fi_d.item() == 1
