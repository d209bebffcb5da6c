"""Fused optimizer steps (_fused_adam_ / _fused_adamw_: one chip ADAM_STEP per
parameter) against the CPU's fused kernels: several steps, non-contiguous state,
Adam and AdamW, weight decay, maximize; torch.optim with fused=True natively; the
hyperparameter checks; and the CPU fallback (with its warning) for amsgrad."""
import warnings

import pytest
import torch

from helpers import noncontig


def make_state(shapes, nc, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        ts = [torch.randn(s, generator=g), torch.randn(s, generator=g), torch.randn(s, generator=g) * 0.1,
              torch.rand(s, generator=g) * 0.01]  # param, grad, exp_avg, exp_avg_sq
        out.append([noncontig(t) if nc else t for t in ts])
    return out


def run_steps(fn, state, device, steps=3, **hp):
    """Runs `steps` fused steps on copies of the state placed on `device` with the
    state's layouts (non-contiguous stays non-contiguous); returns params and moments."""
    put = (lambda t: t.clone()) if device == "cpu" else (lambda t: noncontig_dev(t, device))
    ps, gs, ms, vs = ([put(s[k]) for s in state] for k in range(4))
    st = [torch.zeros((), device=device) for _ in state]
    for _ in range(steps):
        for t in st:
            t.add_(1)
        fn(ps, gs, ms, vs, [], st, amsgrad=False, **hp)
    return [[t.cpu() for t in l] for l in (ps, ms, vs)]


def noncontig_dev(t, device):
    """t on the device with the same strides (a copy through .to() would be contiguous)."""
    d = torch.empty_strided(t.size(), t.stride(), device=device) if t.is_contiguous() else None
    if d is not None:
        return d.copy_(t)
    base = torch.empty(t.untyped_storage().nbytes() // t.element_size(), device=device)
    d = base.as_strided(t.size(), t.stride(), t.storage_offset())
    return d.copy_(t)


HP = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8)


@pytest.mark.parametrize("fn", [torch._fused_adam_, torch._fused_adamw_], ids=["adam", "adamw"])
@pytest.mark.parametrize("nc", [False, True])
@pytest.mark.parametrize("wd,maximize", [(0.0, False), (0.05, False), (0.01, True)])
def test_fused_adam_matches_cpu(strict, fn, nc, wd, maximize):
    state = make_state([(5, 7), (7,), (16, 3)], nc, seed=3)
    cpu = run_steps(fn, state, "cpu", weight_decay=wd, maximize=maximize, **HP)
    torch.neuron.reset_op_counts()
    dev = run_steps(fn, state, "neuron", weight_decay=wd, maximize=maximize, **HP)
    assert torch.neuron.fallback_ops() == {}
    assert torch.neuron.native_ops().get(fn.__name__, 0) == 3
    for c_list, d_list in zip(cpu, dev):
        for c, d in zip(c_list, d_list):
            torch.testing.assert_close(d, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opt", ["Adam", "AdamW"])
def test_optimizer_fused_true_is_native(strict, opt):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())
    model.to("neuron")
    od = getattr(torch.optim, opt)(model.parameters(), lr=1e-2, weight_decay=0.01, fused=True)
    oc = getattr(torch.optim, opt)(ref.parameters(), lr=1e-2, weight_decay=0.01, fused=True)
    x = torch.randn(32, 8)
    torch.neuron.reset_op_counts()
    for _ in range(5):
        for m, o, xx in ((model, od, x.to("neuron")), (ref, oc, x)):
            o.zero_grad()
            m(xx).pow(2).mean().backward()
            o.step()
    assert torch.neuron.fallback_ops() == {}
    assert torch.neuron.native_ops().get("_fused_adamw_" if opt == "AdamW" else "_fused_adam_", 0) == 5
    for pd, pc in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=1e-5, atol=1e-6)


def test_fused_adam_rejects_bad_hyperparameters():
    p = torch.zeros(4, device="neuron")
    args = ([p], [p.clone()], [p.clone()], [p.clone()], [], [torch.ones((), device="neuron")])
    with pytest.raises(RuntimeError, match="beta parameter at index 1"):
        torch._fused_adamw_(*args, lr=1e-3, beta1=0.9, beta2=1.5, weight_decay=0.0, eps=1e-8, amsgrad=False,
                            maximize=False)
    with pytest.raises(RuntimeError, match="learning rate"):
        torch._fused_adamw_(*args, lr=float("nan"), beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                            amsgrad=False, maximize=False)


def test_fused_adam_bad_step_value_is_a_device_fault():
    p = torch.zeros(4, device="neuron")
    with pytest.raises(RuntimeError, match="step"):
        torch._fused_adam_([p], [p.clone()], [p.clone()], [p.clone()], [], [torch.zeros((), device="neuron")],
                           lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False,
                           maximize=False)
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # the stream was reset: later work runs
    assert float((p + 1).sum()) == 4.0


def test_fused_adam_amsgrad_falls_back_with_warning():
    state = make_state([(3, 4)], False, seed=5)
    p, g, m, v = (t.to("neuron") for t in state[0])
    mx = torch.zeros_like(p)
    step = torch.ones((), device="neuron")
    cp, cg, cm, cv = (t.clone() for t in state[0])
    cmx = torch.zeros_like(cp)
    torch.neuron.reset_op_counts()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        torch._fused_adamw_([p], [g], [m], [v], [mx], [step], amsgrad=True, weight_decay=0.0, maximize=False, **HP)
    torch._fused_adamw_([cp], [cg], [cm], [cv], [cmx], [torch.ones(())], amsgrad=True, weight_decay=0.0,
                        maximize=False, **HP)
    assert "_fused_adamw_" in torch.neuron.fallback_ops()
    torch.testing.assert_close(p.cpu(), cp)
    torch.testing.assert_close(mx.cpu(), cmx)


# ---- SGD: _fused_sgd_ (elementwise commands per parameter) and the foreach path ----

def run_sgd(state, device, steps=3, lr_tensor=False, **hp):
    put = (lambda t: t.clone()) if device == "cpu" else (lambda t: noncontig_dev(t, device))
    ps, gs, bs = ([put(s[k]) for s in state] for k in range(3))
    lr = hp.pop("lr")
    if lr_tensor:
        lr = torch.tensor(lr, device=device)
    for step in range(steps):
        bufs = bs if hp["momentum"] != 0 else []
        torch._fused_sgd_(ps, gs, bufs, lr=lr, is_first_step=step == 0, **hp)
    return [[t.cpu() for t in l] for l in (ps, bs)]


@pytest.mark.parametrize("nc", [False, True])
@pytest.mark.parametrize("momentum,dampening,nesterov", [(0.0, 0.0, False), (0.9, 0.0, False), (0.9, 0.1, False),
                                                         (0.8, 0.0, True)])
@pytest.mark.parametrize("wd,maximize", [(0.0, False), (0.05, True)])
@pytest.mark.parametrize("lr_tensor", [False, True])
def test_fused_sgd_matches_cpu(strict, nc, momentum, dampening, nesterov, wd, maximize, lr_tensor):
    state = make_state([(5, 7), (7,), (16, 3)], nc, seed=5)
    hp = dict(lr=0.05, momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=wd, maximize=maximize)
    cpu = run_sgd(state, "cpu", lr_tensor=lr_tensor, **dict(hp))
    torch.neuron.reset_op_counts()
    dev = run_sgd(state, "neuron", lr_tensor=lr_tensor, **dict(hp))
    assert torch.neuron.fallback_ops() == {}
    assert torch.neuron.native_ops().get("_fused_sgd_", 0) == 3
    n = 2 if momentum else 1
    for c_list, d_list in list(zip(cpu, dev))[:n]:
        for c, d in zip(c_list, d_list):
            torch.testing.assert_close(d, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opt,kw", [("SGD", dict(momentum=0.9, fused=True)), ("SGD", dict(momentum=0.9, foreach=True)),
                                    ("SGD", dict(momentum=0.9, nesterov=True, foreach=True)),
                                    ("Adam", dict(foreach=True)), ("AdamW", dict(foreach=True))])
def test_optimizers_native(strict, opt, kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())
    model.to("neuron")
    od = getattr(torch.optim, opt)(model.parameters(), lr=1e-2, weight_decay=0.01, **kw)
    oc = getattr(torch.optim, opt)(ref.parameters(), lr=1e-2, weight_decay=0.01, **kw)
    x = torch.randn(32, 8)
    torch.neuron.reset_op_counts()
    for _ in range(4):
        for m, o, xx in ((model, od, x.to("neuron")), (ref, oc, x)):
            o.zero_grad()
            m(xx).pow(2).mean().backward()
            o.step()
    assert torch.neuron.fallback_ops() == {}
    if kw.get("fused"):
        assert torch.neuron.native_ops().get("_fused_sgd_", 0) == 4
    for pd, pc in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=1e-5, atol=1e-6)
