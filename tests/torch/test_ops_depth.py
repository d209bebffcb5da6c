"""The ops of issue 15 item 4, forward and backward, against the CPU with
non-contiguous inputs, in strict mode (any CPU fallback fails the test)."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, check, noncontig

pytestmark = pytest.mark.usefixtures("strict")


def randn(*shape, dtype=torch.float32, lo=None, hi=None):
    g = torch.Generator().manual_seed(hash(shape) % 1000)
    t = torch.randn(*shape, generator=g, dtype=torch.float32)
    if lo is not None:
        t = lo + (hi - lo) * torch.rand(*shape, generator=g)
    return noncontig(t.to(dtype))


@pytest.mark.parametrize("fn", [torch.sin, torch.cos, torch.log1p, torch.floor, torch.ceil, torch.round,
                                torch.tan, torch.atan, torch.sinh, torch.expm1, torch.erfc, torch.trunc,
                                torch.frac, torch.sign, torch.lgamma, torch.digamma, torch.special.i0])
def test_unary(fn):
    x = randn(6, 5, lo=0.2, hi=3.0) if fn in (torch.log1p, torch.lgamma, torch.digamma) else randn(6, 5) * 3
    check(fn, x, rtol=1e-4, atol=1e-5)


def test_round_decimals_and_half_even():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 1.2345, -9.876]).repeat(3)[::3]
    check(torch.round, x, grad=False)
    check(lambda t: torch.round(t, decimals=2), randn(5, 4) * 10, grad=False, rtol=1e-5, atol=1e-5)
    check(lambda t: torch.round(t, decimals=-1), randn(5, 4) * 100, grad=False)


@pytest.mark.parametrize("act", [
    lambda t: F.leaky_relu(t, 0.2), lambda t: F.softplus(t, beta=2, threshold=3), lambda t: F.hardtanh(t, -0.5, 0.7),
    F.elu, F.selu, F.celu, F.hardsigmoid, F.hardswish, F.mish, lambda t: torch.logit(t.sigmoid(), eps=0.1),
])
def test_activations(act):
    check(act, randn(7, 6) * 2, rtol=1e-4, atol=1e-5)


def test_cumsum_cumprod_logcumsumexp_cummax():
    x = randn(5, 9)
    for d in (0, 1, -1):
        check(lambda t: torch.cumsum(t, d), x, rtol=1e-5, atol=1e-5)
        check(lambda t: torch.cumprod(t, d), x * 0.5 + 1, rtol=1e-4, atol=1e-5)
        check(lambda t: torch.logcumsumexp(t, d), x, rtol=1e-5, atol=1e-5)
        check(lambda t: torch.cummax(t, d), x, rtol=1e-5, atol=1e-5)
        check(lambda t: torch.cummin(t, d), x, rtol=1e-5, atol=1e-5)
    check(lambda t: torch.cumsum(t, 0, dtype=torch.float32), torch.arange(10), grad=False)  # int input


def test_sort_topk_argsort():
    x = randn(6, 11)
    for d in (0, 1):
        for desc in (False, True):
            check(lambda t: torch.sort(t, dim=d, descending=desc), x)
            check(lambda t: torch.argsort(t, dim=d, descending=desc), x, grad=False)
    check(lambda t: torch.topk(t, 3, dim=1), x)
    check(lambda t: torch.topk(t, 2, dim=0, largest=False), x)
    ties = torch.tensor([3.0, 1.0, 3.0, float("nan"), 1.0, -2.0]).repeat(2)[::2].contiguous()[:6]
    check(lambda t: torch.sort(t, stable=True), ties, grad=False)
    check(lambda t: torch.kthvalue(t, 4, dim=1), x)
    check(lambda t: torch.median(t, dim=1), x)
    check(torch.median, x)


def test_prod_mv_dot():
    x = randn(4, 5) * 0.5 + 1
    check(torch.prod, x, rtol=1e-4)
    check(lambda t: torch.prod(t, 1, keepdim=True), x, rtol=1e-4)
    m, v = randn(6, 4), randn(4)
    check(torch.mv, m, v, rtol=1e-5, atol=1e-5)
    check(torch.dot, randn(9), randn(9), rtol=1e-5, atol=1e-5)
    check(lambda a, b, c: torch.addmv(a, b, c, beta=0.5, alpha=2), randn(6), m, v, rtol=1e-5, atol=1e-5)
    check(lambda a, b, c: torch.addr(a, b, c, beta=0.5, alpha=2), randn(3, 4), randn(3), randn(4), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_losses(red):
    a, b = randn(5, 6), randn(5, 6)
    p = torch.sigmoid(randn(5, 6))
    t = torch.rand(6, 5).t()
    w = torch.rand(6)
    check(lambda x, y: F.mse_loss(x, y, reduction=red), a, b, rtol=1e-5, atol=1e-5)
    check(lambda x, y: F.smooth_l1_loss(x, y, reduction=red, beta=0.5), a, b, rtol=1e-5, atol=1e-5)
    check(lambda x, y: F.huber_loss(x, y, reduction=red, delta=0.7), a, b, rtol=1e-5, atol=1e-5)
    check(lambda x, y: F.binary_cross_entropy(x, y, reduction=red), p, t, rtol=1e-5, atol=1e-5)
    check(lambda x, y: F.binary_cross_entropy(x, y, weight=w.to(x.device), reduction=red), p, t, rtol=1e-5, atol=1e-5)
    check(lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=red), a, t, rtol=1e-5, atol=1e-5)
    check(lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=w.to(x.device), reduction=red), a, t,
          rtol=1e-5, atol=1e-5)


def test_adaptive_pooling():
    x1, x2 = randn(2, 3, 11), randn(2, 3, 10, 7)
    check(lambda t: F.adaptive_avg_pool1d(t, 4), x1, rtol=1e-5, atol=1e-5)
    check(lambda t: F.adaptive_avg_pool2d(t, (3, 5)), x2, rtol=1e-5, atol=1e-5)
    check(lambda t: F.adaptive_avg_pool2d(t, 1), x2, rtol=1e-5, atol=1e-5)
    check(lambda t: F.adaptive_max_pool1d(t, 4, return_indices=True), x1)
    check(lambda t: F.adaptive_max_pool2d(t, (3, 4), return_indices=True), x2)
    check(lambda t: F.adaptive_max_pool2d(t, (3, 4)), x2[0])  # unbatched


def test_max_pool_1d_3d():
    check(lambda t: F.max_pool1d(t, 3, stride=2, padding=1, return_indices=True), randn(2, 3, 12))
    check(lambda t: F.max_pool1d(t, 2, ceil_mode=True), randn(2, 3, 9))
    check(lambda t: F.max_pool3d(t, 2, return_indices=True), randn(2, 2, 6, 5, 4))
    check(lambda t: F.max_pool3d(t, (3, 2, 2), stride=(2, 1, 2), padding=1, dilation=(1, 2, 1)), randn(1, 2, 7, 6, 6))
    check(lambda t: F.avg_pool3d(t, 2, ceil_mode=True, count_include_pad=False), randn(1, 2, 5, 5, 5),
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,kw", [("nearest", {}), ("nearest-exact", {}), ("bilinear", {"align_corners": False}),
                                     ("bilinear", {"align_corners": True}), ("bicubic", {"align_corners": False}),
                                     ("bilinear", {"antialias": True, "align_corners": False})])
def test_upsample_2d(mode, kw):
    x = randn(2, 3, 5, 6)
    check(lambda t: F.interpolate(t, size=(9, 4), mode=mode, **kw), x, rtol=1e-4, atol=1e-5)
    if not kw.get("antialias"):
        check(lambda t: F.interpolate(t, scale_factor=2.0, mode=mode, **kw), x, rtol=1e-4, atol=1e-5)


def test_upsample_1d_3d():
    check(lambda t: F.interpolate(t, size=13, mode="linear"), randn(2, 3, 6), rtol=1e-5, atol=1e-5)
    check(lambda t: F.interpolate(t, size=(4, 6, 3), mode="nearest"), randn(1, 2, 3, 3, 3))
    check(lambda t: F.interpolate(t, size=(4, 6, 3), mode="trilinear"), randn(1, 2, 3, 3, 3), rtol=1e-5, atol=1e-5)


def test_masked_select_and_scatter_reduce():
    x = randn(5, 6)
    mask = torch.rand(5, 6) > 0.4
    check(lambda t, m: torch.masked_select(t, m), x, mask)
    check(lambda t, m: torch.masked_select(t, m), x, mask[0])  # broadcast mask
    idx = torch.randint(0, 5, (4, 6))
    for reduce in ("add", "multiply"):
        check(lambda t, s: t.scatter(0, idx.to(t.device), s, reduce=reduce), x, randn(4, 6), grad=False)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            check(lambda t, s: t.scatter_reduce(0, idx.to(t.device), s, reduce=reduce, include_self=include_self), x,
                  randn(4, 6), grad=reduce in ("sum", "mean"), rtol=1e-5, atol=1e-5)
    check(lambda t, s: t.index_reduce(0, torch.tensor([0, 2, 0], device=t.device), s, "amax"), x, randn(3, 6),
          grad=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("param_dtype", [torch.float32, "same"])
def test_batch_norm_reduced_precision(dtype, param_dtype):
    pdt = dtype if param_dtype == "same" else param_dtype
    x = randn(4, 3, 5, 5).to(dtype)
    w, b = (torch.rand(3) + 0.5).to(pdt), torch.randn(3).to(pdt)
    stats = {}

    def train(t, wt, bs):
        rm, rv = stats.setdefault(t.device.type, (torch.zeros(3, dtype=pdt, device=t.device),
                                                  torch.ones(3, dtype=pdt, device=t.device)))
        return F.batch_norm(t, rm, rv, wt, bs, training=True, momentum=0.3)

    tol = dict(rtol=2e-2, atol=2e-2)
    check(train, x, w, b, **tol)
    for c, d in zip(stats["cpu"], stats[DEV]):  # running statistics updated alike
        torch.testing.assert_close(d.cpu(), c, **tol)
    rm, rv = stats["cpu"]
    check(lambda t, wt, bs: F.batch_norm(t, rm.to(t.device), rv.to(t.device), wt, bs, training=False), x, w, b, **tol)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    weight = randn(10, 4)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    offsets = torch.tensor([0, 3, 3, 7])  # an empty bag too
    check(lambda w: F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode=mode), weight, rtol=1e-5, atol=1e-5)
    check(lambda w: F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode=mode, padding_idx=4), weight,
          rtol=1e-5, atol=1e-5)
    check(lambda w: F.embedding_bag(idx.view(2, 5).to(w.device), w, mode=mode), weight, rtol=1e-5, atol=1e-5)
    if mode == "sum":
        psw = torch.rand(10)
        check(lambda w, p: F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode="sum",
                                           per_sample_weights=p), weight, psw, rtol=1e-5, atol=1e-5)


def test_one_hot():
    check(lambda t: F.one_hot(t, 7), torch.tensor([[0, 3, 6], [2, 2, 1]]).t(), grad=False)
    check(lambda t: F.one_hot(t), torch.tensor([4, 0, 1]), grad=False)


def _sdpa_native_count():
    return torch.neuron.native_ops().get("_scaled_dot_product_fused_attention_overrideable", 0)


@pytest.mark.parametrize("case", ["plain", "causal", "float_mask", "bool_mask", "gqa", "bf16"])
def test_scaled_dot_product_attention_fused(case):
    dtype = torch.bfloat16 if case == "bf16" else torch.float32
    q, k, v = randn(2, 4, 7, 8), randn(2, 4, 9, 8), randn(2, 4, 9, 6)
    kwargs = {}
    extra = []
    if case == "causal":
        kwargs["is_causal"] = True
        k, v = k[:, :, :7], v[:, :, :7]
    elif case == "float_mask":
        extra = [randn(7, 9)]
    elif case == "bool_mask":
        m = torch.rand(2, 1, 7, 9) > 0.3
        m[..., 0] = True
        extra = [m]
    elif case == "gqa":
        k, v = k[:, :2], v[:, :2]
        kwargs["enable_gqa"] = True
    ins = [t.to(dtype) for t in (q, k, v)] + extra

    def fn(q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None, **kwargs)

    before = _sdpa_native_count()
    tol = dict(rtol=3e-2, atol=3e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    check(fn, *ins, **tol)
    # one fused command per call, not the math path
    assert _sdpa_native_count() == before + 1
