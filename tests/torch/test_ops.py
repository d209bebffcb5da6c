"""Native ops against the CPU: shapes, dtypes, non-contiguous inputs and backward.

Every test also asserts that no op fell back to the CPU (TORCH_NEURON_FALLBACK
strict mode is switched on around each test)."""
import pytest
import torch
import torch.nn.functional as F

from helpers import check, noncontig

SHAPES = [(7,), (3, 5), (2, 3, 4), (1, 6)]


# Every test here runs in strict mode: a CPU fallback fails it (conftest.py).
pytestmark = pytest.mark.usefixtures("strict")


def rnd(shape, dtype=torch.float32, lo=-2, hi=2, nc=False):
    t = (torch.rand(shape) * (hi - lo) + lo).to(dtype)
    return noncontig(t) if nc else t


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nc", [False, True])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "pow"])
def test_binary(op, shape, nc):
    a, b = rnd(shape, nc=nc), rnd(shape, lo=0.5, hi=2, nc=nc)
    if op == "pow":
        a = a.abs() + 0.5
    f = {"add": lambda x, y: torch.add(x, y, alpha=0.5), "sub": torch.sub, "mul": torch.mul, "div": torch.div,
         "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow}[op]
    check(f, a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_binary_dtypes_broadcast_and_scalars(dtype):
    a = (torch.rand(4, 1, 3) * 10).to(dtype)
    b = (torch.rand(5, 1) * 10 + 1).to(dtype)
    check(lambda x, y: x + y, a, b, grad=False, rtol=1e-2, atol=1e-2)
    check(lambda x, y: x * y - 3, a, b, grad=False, rtol=1e-2, atol=1e-2)
    check(lambda x: 2 - x, a, grad=False, rtol=1e-2, atol=1e-2)
    check(lambda x: x * torch.tensor(1.5), a, grad=False, rtol=1e-2, atol=1e-2)


def test_inplace_and_out():
    a, b = rnd((4, 5)), rnd((5,))
    da, db = a.to("neuron"), b.to("neuron")
    da.add_(db, alpha=2).mul_(3).sub_(1).div_(2)
    a.add_(b, alpha=2).mul_(3).sub_(1).div_(2)
    torch.testing.assert_close(da.cpu(), a)
    out = torch.empty(4, 5, device="neuron")
    torch.mul(da, db, out=out)
    torch.testing.assert_close(out.cpu(), a * b)
    # an input that partially overlaps the output
    x = torch.arange(10.0)
    dx = x.to("neuron")
    dx[1:].add_(dx[:-1])
    x[1:].add_(x[:-1].clone())
    torch.testing.assert_close(dx.cpu(), x)


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "log": lambda x: torch.log(x.abs() + 0.1), "sqrt": lambda x: torch.sqrt(x.abs() + 0.1),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1), "pow2": lambda x: x.pow(2), "pow3": lambda x: x ** 3,
    "clamp": lambda x: x.clamp(-0.5, 0.7), "clamp_min": lambda x: x.clamp(min=0.1),
    "erf": torch.erf, "reciprocal": lambda x: 1 / (x.abs() + 0.5),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nc", [False, True])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, shape, nc):
    check(UNARY[name], rnd(shape, nc=nc), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_unary_half(dtype):
    for name in ["exp", "tanh", "relu", "gelu", "sigmoid", "neg"]:
        check(UNARY[name], rnd((3, 8), dtype=dtype), grad=False, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a = torch.randint(0, 3, (4, 5)).float()
    b = torch.randint(0, 3, (5,)).float()
    f = getattr(torch, op)
    check(f, a, b, grad=False)
    check(lambda x: f(x, 1.0), a, grad=False)
    check(lambda x: f(x.long(), 1), a, grad=False)


def test_where_masked_fill_logical():
    c = torch.rand(4, 5) > 0.5
    a, b = rnd((4, 5)), rnd((5,))
    check(lambda x, y: torch.where(c.to(x.device), x, y), a, b)
    check(lambda x: torch.where(c.to(x.device), x, 0.0), a)
    check(lambda x: x.masked_fill(c.to(x.device), -1e9), a)
    check(lambda x: x.masked_fill(c.to(x.device), float("-inf")).softmax(-1).nan_to_num(0) if False else
          x.masked_fill(c.to(x.device), -5.0).softmax(-1), a)
    check(lambda x: torch.triu(x, 1), a)
    check(lambda x: torch.tril(x), a)
    check(lambda x: (x > 0).all(), a, grad=False)
    check(lambda x: (x > 0).any(), a, grad=False)
    check(lambda x: (x > -10).all(dim=1), a, grad=False)


def test_addcmul_addcdiv_lerp():
    a, b, c = rnd((3, 4)), rnd((3, 4)), rnd((3, 4), lo=1, hi=2)
    check(lambda x, y, z: torch.addcmul(x, y, z, value=0.5), a, b, c)
    check(lambda x, y, z: torch.addcdiv(x, y, z, value=-0.3), a, b, c)
    da = a.to("neuron")
    da.lerp_(b.to("neuron"), 0.25)
    torch.testing.assert_close(da.cpu(), a.lerp(b, 0.25))


@pytest.mark.parametrize("nc", [False, True])
@pytest.mark.parametrize("mkn", [(1, 1, 1), (5, 7, 3), (16, 32, 8), (33, 17, 65)])
def test_matmul_family(mkn, nc):
    m, k, n = mkn
    a, b = rnd((m, k), nc=nc), rnd((k, n), nc=nc)
    bias = rnd((n,))
    check(torch.mm, a, b, rtol=1e-4, atol=1e-4)
    check(lambda x, y, z: torch.addmm(z, x, y, beta=0.5, alpha=2.0), a, b, bias, rtol=1e-4, atol=1e-4)
    check(lambda x, w, z: F.linear(x, w, z), a, b.t().contiguous(), bias, rtol=1e-4, atol=1e-4)
    ba, bb = rnd((3, m, k), nc=nc), rnd((3, k, n))
    check(torch.bmm, ba, bb, rtol=1e-4, atol=1e-4)
    check(torch.matmul, rnd((2, 3, m, k)), rnd((k, n)), rtol=1e-4, atol=1e-4)
    check(lambda x, y: torch.baddbmm(torch.ones(1, device=x.device), x, y, alpha=0.5), ba, bb, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(6,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("nc", [False, True])
def test_reductions(shape, nc):
    x = rnd(shape, nc=nc)
    check(lambda t: t.sum(), x, rtol=1e-5, atol=1e-5)
    check(lambda t: t.mean(), x, rtol=1e-5, atol=1e-5)
    check(lambda t: t.sum(-1, keepdim=True), x, rtol=1e-5, atol=1e-5)
    check(lambda t: t.mean(0), x, rtol=1e-5, atol=1e-5)
    check(lambda t: t.amax(-1), x, grad=False)
    check(lambda t: t.max(), x, grad=False)
    check(lambda t: t.var(-1), x, rtol=1e-4, atol=1e-5)
    check(lambda t: t.std(), x, rtol=1e-4, atol=1e-5)
    check(lambda t: torch.linalg.vector_norm(t), x, rtol=1e-5, atol=1e-5)
    check(lambda t: (t > 0).sum(), x, grad=False)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("nc", [False, True])
def test_softmax_log_softmax(dim, nc):
    x = rnd((4, 6), lo=-5, hi=5, nc=nc)
    check(lambda t: t.softmax(dim), x)
    check(lambda t: F.log_softmax(t, dim), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    x = rnd((6, 5))
    t = torch.tensor([0, 4, 2, 2, -100, 1])
    w = torch.rand(5) + 0.5
    check(lambda a: F.cross_entropy(a, t.to(a.device), reduction=reduction), x)
    check(lambda a: F.nll_loss(F.log_softmax(a, -1), t.to(a.device), weight=w.to(a.device), reduction=reduction), x)


def test_layer_norm_and_embedding():
    x = rnd((2, 3, 8))
    w, b = rnd((8,)), rnd((8,))
    check(lambda a, ww, bb: F.layer_norm(a, (8,), ww, bb), x, w, b, rtol=1e-4, atol=1e-4)
    check(lambda a: F.layer_norm(a, (3, 8)), x, rtol=1e-4, atol=1e-4)
    emb = rnd((10, 4))
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    check(lambda e: F.embedding(idx.to(e.device), e), emb)
    check(lambda e: F.embedding(idx.to(e.device), e, padding_idx=3), emb)
    check(lambda e: e.index_select(1, torch.tensor([3, 0]).to(e.device)), emb)
    check(lambda e: e.gather(1, torch.tensor([[0], [3]] * 5).to(e.device)), emb)


@pytest.mark.parametrize("case", ["affine_2d", "bias_only", "no_affine", "noncontig", "long_rows", "bf16"])
def test_layer_norm_variants(case):
    # The chip's LAYER_NORM / _BACKWARD / _PARAM_GRAD against the CPU, outputs and the
    # gradients of x, weight and bias: normalized over two dims, a bias without a
    # weight, no affine, a transposed input, rows of 700 with a large eps, bf16.
    x = rnd((4, 5, 6), nc=case == "noncontig")
    if case == "affine_2d":
        check(lambda a, ww, bb: F.layer_norm(a, (5, 6), ww, bb), x, rnd((5, 6)), rnd((5, 6)), rtol=1e-4, atol=1e-4)
    elif case == "bias_only":
        check(lambda a, bb: F.layer_norm(a, (6,), None, bb), x, rnd((6,)), rtol=1e-4, atol=1e-4)
    elif case == "no_affine":
        check(lambda a: F.layer_norm(a, (6,)), x, rtol=1e-4, atol=1e-4)
    elif case == "noncontig":
        check(lambda a, ww, bb: F.layer_norm(a, (6,), ww, bb), x, rnd((6,)), rnd((6,)), rtol=1e-4, atol=1e-4)
    elif case == "long_rows":
        check(lambda a, ww: F.layer_norm(a, (700,), ww, eps=0.5), rnd((3, 700)), rnd((700,)), rtol=1e-4, atol=1e-4)
    else:
        xb, wb, bb = (t.to(torch.bfloat16) for t in (x, rnd((6,)), rnd((6,))))
        check(lambda a, ww, b2: F.layer_norm(a, (6,), ww, b2), xb, wb, bb, rtol=2e-2, atol=2e-2)


def test_views_never_copy():
    x = torch.arange(24.0).to("neuron")
    v = x.view(2, 3, 4).permute(2, 0, 1)[1:, :, ::2].transpose(0, 1)
    assert v.data_ptr() != 0 and v.storage().data_ptr() == x.storage().data_ptr()
    v.zero_()
    ref = torch.arange(24.0)
    ref.view(2, 3, 4).permute(2, 0, 1)[1:, :, ::2].transpose(0, 1).zero_()
    torch.testing.assert_close(x.cpu(), ref)
    for f in [lambda t: t.reshape(4, 6), lambda t: t.unsqueeze(0).expand(3, 24) * 1, lambda t: t.narrow(0, 2, 5),
              lambda t: t.view(6, 4).t().contiguous(), lambda t: t.unflatten(0, (2, 12)).select(1, 3),
              lambda t: torch.cat([t, t * 2]), lambda t: torch.stack([t, t], 1), lambda t: t.split(5)[2],
              lambda t: t.chunk(4)[1].clone(), lambda t: torch.cat([t.view(4, 6), t.view(4, 6)[:, :2]], 1)]:
        check(f, torch.arange(24.0))
    assert torch.arange(5, device="neuron").tolist() == [0, 1, 2, 3, 4]
    assert torch.arange(0, 1, 0.25, device="neuron").tolist() == [0, 0.25, 0.5, 0.75]


def test_copies_and_casts():
    x = rnd((5, 6))
    for dt in [torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool, torch.uint8]:
        d = x.to("neuron").to(dt)
        assert d.dtype == dt
        torch.testing.assert_close(d.cpu(), x.to(dt))
        torch.testing.assert_close(d.to(torch.float32).cpu(), x.to(dt).to(torch.float32))
    d = x.to("neuron")
    nc = d.t()
    torch.testing.assert_close(nc.cpu(), x.t())
    torch.testing.assert_close(nc.contiguous().cpu(), x.t().contiguous())
    e = torch.empty(6, 5, device="neuron")
    e.copy_(x.t())  # strided host source into a device tensor
    torch.testing.assert_close(e.cpu(), x.t())
    f = torch.zeros(6, 5)
    f.copy_(nc)  # strided device source into a host tensor
    torch.testing.assert_close(f, x.t())
    g = torch.full((3, 3), 2.5, device="neuron")
    assert g.sum().item() == pytest.approx(22.5)
    assert torch.zeros(4, device="neuron", dtype=torch.int64).tolist() == [0, 0, 0, 0]
    assert torch.ones(2, 2, device="neuron").tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_amin_min_and_integer_indexing():
    x = rnd((4, 6))
    check(lambda t: t.amin(-1), x, grad=False)
    check(lambda t: t.min(), x, grad=False)
    idx = torch.tensor([3, 0, -1, 1])
    check(lambda t: t[idx.to(t.device)], x)
    check(lambda t: t[idx.view(2, 2).to(t.device)], x)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (1, 1, 1), (2, 1, 1), (2, 0, 2), (1, 2, 1)])
def test_conv2d(stride, padding, dilation):
    x = rnd((2, 3, 9, 8))
    w = rnd((4, 3, 3, 3))
    b = rnd((4,))
    check(lambda a, ww, bb: F.conv2d(a, ww, bb, stride=stride, padding=padding, dilation=dilation), x, w, b,
          rtol=1e-4, atol=1e-4)
    check(lambda a, ww: F.conv2d(a, ww, None, stride=stride, padding=padding, dilation=dilation), noncontig(x), w,
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1), (2, 1, 0)])
def test_pooling(k, s, p):
    x = rnd((2, 3, 9, 8))
    check(lambda a: F.max_pool2d(a, k, s, p), x)
    check(lambda a: F.max_pool2d(a, k, s, p, return_indices=True)[1], x, grad=False)
    check(lambda a: F.avg_pool2d(a, k, s, p), x)
    check(lambda a: F.avg_pool2d(a, k, s), noncontig(x))


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 3, 0), (2, 3, 1)])
def test_max_pool_ceil_mode(k, s, p):
    # 9x8 input: with these strides the last window is partial, so ceil_mode adds a row/column.
    x = rnd((2, 3, 9, 8))
    check(lambda a: F.max_pool2d(a, k, s, p, ceil_mode=True), x)
    check(lambda a: F.max_pool2d(a, k, s, p, ceil_mode=True, return_indices=True)[1], x, grad=False)
    check(lambda a: F.max_pool2d(a, k, s, p, ceil_mode=True), noncontig(x))


@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 3), (2, 3, 7)])
def test_batch_norm_train_and_eval(shape):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3) if len(shape) < 4 else torch.nn.BatchNorm2d(3)
    bd = type(bn)(3).to("neuron")
    x = rnd(shape)
    check(lambda a: bn(a) if a.device.type == "cpu" else bd(a), x, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(bd.running_mean.cpu(), bn.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bd.running_var.cpu(), bn.running_var, rtol=1e-5, atol=1e-6)
    bn.eval()
    bd.eval()
    check(lambda a: bn(a) if a.device.type == "cpu" else bd(a), x, rtol=1e-4, atol=1e-4)
