"""Convolution variants against the CPU, forward and backward (input, weight, bias):
conv1d/2d/3d, groups > 1 and depthwise, transposed 1-d/2-d/3-d (stride, padding,
output_padding, dilation, groups), non-contiguous inputs, float32 and bfloat16.
Strict mode: no CPU fallback."""
import copy

import pytest
import torch
import torch.nn.functional as F

from helpers import check, noncontig


# Every test here runs in strict mode: a CPU fallback fails it (conftest.py).
pytestmark = pytest.mark.usefixtures("strict")


def rnd(shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) * 7 + len(shape))
    return torch.randn(shape, generator=g).to(dtype)


TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 2), (2, 1, 1, 4)])
def test_conv1d(stride, padding, dilation, groups):
    x = rnd((2, 4, 11))
    w = rnd((8, 4 // groups, 3))
    b = rnd((8,))
    f = lambda a, ww, bb: F.conv1d(a, ww, bb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(f, x, w, b, **TOL)
    check(f, noncontig(x), w, b, **TOL)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 2), (2, 0, 1, 3), (1, 2, 2, 6), (2, 1, 1, 6)])
def test_conv2d_groups_and_depthwise(stride, padding, dilation, groups):
    x = rnd((3, 6, 9, 8))
    w = rnd((12, 6 // groups, 3, 3))
    b = rnd((12,))
    f = lambda a, ww, bb: F.conv2d(a, ww, bb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(f, x, w, b, **TOL)
    check(f, noncontig(x), noncontig(w), b, **TOL)


def test_conv2d_depthwise_module_and_many_samples():
    # more samples than groups: one matmul per group instead of per sample
    m = torch.nn.Conv2d(3, 3, 3, padding=1, groups=3)
    x = rnd((5, 3, 7, 7))
    check(lambda a, w, b: F.conv2d(a, w, b, padding=1, groups=3), x, m.weight.detach(), m.bias.detach(), **TOL)


@pytest.mark.parametrize("stride,padding,groups", [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
def test_conv3d(stride, padding, groups):
    x = rnd((2, 4, 5, 6, 5))
    w = rnd((4, 4 // groups, 3, 2, 3))
    b = rnd((4,))
    f = lambda a, ww, bb: F.conv3d(a, ww, bb, stride=stride, padding=padding, groups=groups)
    check(f, x, w, b, **TOL)
    check(f, noncontig(x), w, b, **TOL)


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups",
                         [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 1, 1, 2), (2, 0, 0, 2, 1), (1, 1, 0, 1, 4)])
def test_conv_transpose2d(stride, padding, output_padding, dilation, groups):
    x = rnd((2, 4, 5, 6))
    w = rnd((4, 8 // groups, 3, 3))
    b = rnd((8,))
    f = lambda a, ww, bb: F.conv_transpose2d(a, ww, bb, stride=stride, padding=padding, output_padding=output_padding,
                                             groups=groups, dilation=dilation)
    check(f, x, w, b, **TOL)
    check(f, noncontig(x), w, b, **TOL)


@pytest.mark.parametrize("stride,padding,output_padding,groups", [(1, 0, 0, 1), (2, 1, 1, 2), (3, 0, 2, 1)])
def test_conv_transpose1d(stride, padding, output_padding, groups):
    x = rnd((3, 4, 7))
    w = rnd((4, 6 // groups, 4))
    b = rnd((6,))
    f = lambda a, ww, bb: F.conv_transpose1d(a, ww, bb, stride=stride, padding=padding, output_padding=output_padding,
                                             groups=groups)
    check(f, x, w, b, **TOL)
    check(lambda a, ww: f(a, ww, None), noncontig(x), w, **TOL)


def test_conv_transpose3d():
    x = rnd((2, 4, 3, 4, 3))
    w = rnd((4, 2, 2, 3, 2))
    check(lambda a, ww, bb: F.conv_transpose3d(a, ww, bb, stride=2, padding=1, output_padding=1, groups=2), x, w,
          rnd((4,)), **TOL)


def test_conv_bfloat16():
    x = rnd((2, 4, 6, 6), torch.bfloat16)
    w = rnd((4, 2, 3, 3), torch.bfloat16)
    check(lambda a, ww: F.conv2d(a, ww, padding=1, groups=2), x, w, rtol=2e-2, atol=5e-2)
    w2 = rnd((4, 3, 2, 2), torch.bfloat16)
    check(lambda a, ww: F.conv_transpose2d(a, ww, stride=2), x, w2, rtol=2e-2, atol=5e-2)


def test_conv_modules_train_step_no_fallback():
    torch.neuron.reset_op_counts()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(6, 6, 3, padding=1, groups=6),
                              torch.nn.ConvTranspose2d(6, 4, 2, stride=2))
    x = torch.randn(2, 3, 8, 8)
    dnet = copy.deepcopy(net).to("neuron")
    net(x).square().mean().backward()
    dnet(x.to("neuron")).square().mean().backward()
    for p, q in zip(net.parameters(), dnet.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5)
    assert not torch.neuron.fallback_ops(), torch.neuron.fallback_ops()
