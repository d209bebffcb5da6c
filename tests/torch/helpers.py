"""Shared helpers: run a function on CPU and on 'neuron' and compare outputs and grads."""
import torch

DEV = "neuron"


def to_dev(x, requires_grad):
    if isinstance(x, torch.Tensor):
        y = x.detach().to(DEV)
        if requires_grad and x.is_floating_point():
            y.requires_grad_(True)
        return y
    return x


def to_cpu(x, requires_grad):
    if isinstance(x, torch.Tensor):
        y = x.detach().clone()
        if requires_grad and x.is_floating_point():
            y.requires_grad_(True)
        return y
    return x


def check(fn, *inputs, grad=True, rtol=1e-5, atol=1e-5, grad_rtol=None, grad_atol=None):
    """Compares fn on CPU and neuron (forward and, if grad, backward of sum(out * w))."""
    ci = [to_cpu(x, grad) for x in inputs]
    di = [to_dev(x, grad) for x in inputs]
    co = fn(*ci)
    do = fn(*di)
    cos = co if isinstance(co, (tuple, list)) else (co,)
    dos = do if isinstance(do, (tuple, list)) else (do,)
    for c, d in zip(cos, dos):
        assert d.device.type == DEV, f"result on {d.device}"
        assert c.shape == d.shape, (c.shape, d.shape)
        assert c.dtype == d.dtype, (c.dtype, d.dtype)
        torch.testing.assert_close(d.detach().cpu(), c.detach(), rtol=rtol, atol=atol, equal_nan=True)
    if not grad:
        return
    total_c, total_d = 0, 0
    for k, (c, d) in enumerate(zip(cos, dos)):
        if c.is_floating_point() and c.requires_grad:
            w = torch.linspace(-1, 1, c.numel()).reshape(c.shape).to(c.dtype) if c.numel() else torch.zeros(c.shape)
            total_c = total_c + (c * w).sum()
            total_d = total_d + (d * w.to(DEV)).sum()
    if not isinstance(total_c, torch.Tensor):
        return
    total_c.backward()
    total_d.backward()
    for c, d in zip(ci, di):
        if isinstance(c, torch.Tensor) and c.requires_grad:
            assert d.grad is not None, "missing gradient on neuron"
            torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=grad_rtol or rtol * 10, atol=grad_atol or atol * 10)


def noncontig(t):
    """A non-contiguous tensor with t's values (a transposed copy transposed back)."""
    if t.dim() < 2:
        return t.repeat_interleave(2)[::2] if t.numel() else t
    return t.transpose(0, 1).contiguous().transpose(0, 1)
