"""avg_pool2d against the CPU, forward and backward: ceil_mode (partial last
windows), count_include_pad both ways, divisor_override, non-contiguous input,
float32 and bfloat16. Strict mode: no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

from helpers import check, noncontig


# Every test here runs in strict mode: a CPU fallback fails it (conftest.py).
pytestmark = pytest.mark.usefixtures("strict")


def rnd(shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 3, 0), (2, 3, 1), (3, 2, 0), ((3, 2), (2, 1), (1, 0))])
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(k, s, p, ceil_mode, count_include_pad):
    x = rnd((2, 3, 9, 8))
    f = lambda a: F.avg_pool2d(a, k, s, p, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    check(f, x)
    check(f, noncontig(x))


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_avg_pool2d_divisor_override_and_bf16(ceil_mode):
    x = rnd((2, 3, 7, 7))
    check(lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=ceil_mode, divisor_override=4), x)
    xb = rnd((2, 3, 7, 7), torch.bfloat16)
    check(lambda a: F.avg_pool2d(a, 2, 2, 1, ceil_mode=ceil_mode, count_include_pad=False), xb, rtol=1e-2, atol=1e-2)


def test_avg_pool2d_module_and_3d_input():
    m = torch.nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    check(lambda a: m(a), rnd((3, 10, 10)))  # unbatched [C, H, W]
