"""argmax / argmin (chip ARG_REDUCE) against the CPU: every dim, keepdim, no dim,
non-contiguous inputs, several dtypes, ties and NaN, 0-d, and the empty-dim error.
(No backward: the result is an integer index.) Strict mode: no CPU fallback."""
import pytest
import torch

from helpers import noncontig


# Every test here runs in strict mode: a CPU fallback fails it (conftest.py).
pytestmark = pytest.mark.usefixtures("strict")


@pytest.mark.parametrize("fn", [torch.argmax, torch.argmin])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("nc", [False, True])
@pytest.mark.parametrize("keepdim", [False, True])
def test_arg_reduce_dims(fn, shape, nc, keepdim):
    x = torch.randn(shape)
    x = noncontig(x) if nc else x
    d = x.to("neuron") if not nc else noncontig(x.to("neuron").contiguous())
    for dim in [None] + list(range(-x.dim(), x.dim())):
        got = fn(d, dim=dim, keepdim=keepdim)
        want = fn(x, dim=dim, keepdim=keepdim)
        assert got.device.type == "neuron" and got.dtype == torch.int64
        assert torch.equal(got.cpu(), want), (dim, got.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.uint8])
def test_arg_reduce_dtypes(dtype):
    x = (torch.rand(6, 9) * 100).to(dtype)
    for fn in (torch.argmax, torch.argmin):
        assert torch.equal(fn(x.to("neuron"), 1).cpu(), fn(x, 1))
        assert torch.equal(fn(x.to("neuron")).cpu(), fn(x))


def test_arg_reduce_ties_nan_and_0d():
    x = torch.tensor([[1.0, 3, 3, 0, 0, 3], [2, float("nan"), 5, float("nan"), -1, -1]])
    for fn in (torch.argmax, torch.argmin):
        assert torch.equal(fn(x.to("neuron"), 1).cpu(), fn(x, 1))
        assert torch.equal(x.to("neuron").t().contiguous().t().argmax(1).cpu(), x.argmax(1))
    s = torch.tensor(2.5)
    assert torch.equal(s.to("neuron").argmax().cpu(), s.argmax())
    assert torch.equal(s.to("neuron").argmin(0, keepdim=True).cpu(), s.argmin(0, keepdim=True))


def test_arg_reduce_out_and_methods():
    x = torch.randn(4, 5)
    out = torch.empty(0, dtype=torch.int64, device="neuron")
    torch.argmax(x.to("neuron"), 0, out=out)
    assert torch.equal(out.cpu(), x.argmax(0))
    for fn in (torch.max, torch.min):
        for nc in (False, True):
            d = x.to("neuron").t().contiguous().t() if nc else x.to("neuron")
            v, i = fn(d, 1, keepdim=nc)
            cv, ci = fn(x, 1, keepdim=nc)
            assert torch.equal(v.cpu(), cv) and torch.equal(i.cpu(), ci)


def test_max_dim_backward():
    # The forward is native; its backward scatters the gradient into zeros with
    # scatter_ (the chip's SCATTER): native too, so strict mode holds.
    torch.neuron.reset_op_counts()
    for fn in (torch.max, torch.min):
        for keepdim in (False, True):
            x = torch.randn(4, 6)
            d = noncontig(x.to("neuron")).requires_grad_()
            c = x.clone().requires_grad_()
            fn(d, 1, keepdim=keepdim).values.sum().backward()
            fn(c, 1, keepdim=keepdim).values.sum().backward()
            torch.testing.assert_close(d.grad.cpu(), c.grad)
    assert not torch.neuron.fallback_ops(), torch.neuron.fallback_ops()


def test_arg_reduce_empty_dim_raises():
    with pytest.raises((RuntimeError, IndexError)):
        torch.zeros(3, 0, device="neuron").argmax(1)
