"""Advanced indexing (index.Tensor, index_put_ with and without accumulate), scatter
(non-add), index_copy and nonzero against the CPU: integer (int64/int32) index
tensors and bool masks on any dims, broadcasting, None slices between indices,
negative indices, non-contiguous inputs, several dtypes, backward; out-of-range
indices raise. Strict mode: no CPU fallback."""
import pytest
import torch

from helpers import check, noncontig

DEV = "neuron"


# Every test here runs in strict mode: a CPU fallback fails it (conftest.py).
pytestmark = pytest.mark.usefixtures("strict")


def rnd(shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


I = torch.tensor([2, 0, -1, 1])
J = torch.tensor([[1, -2], [0, 3]])
# (name, index builder over (shape of x) -> tuple of indices); x is 4x5x6
CASES = [
    ("dim0", lambda: (I,)),
    ("dim1", lambda: (slice(None), I)),
    ("dim2_neg", lambda: (slice(None), slice(None), torch.tensor([-6, 5, 0]))),
    ("two_adjacent", lambda: (I, torch.tensor([4, 0, 3, -5]))),
    ("broadcast", lambda: (torch.tensor([[0], [3]]), slice(None), torch.tensor([1, 5, -1]))),
    ("none_between", lambda: (I, slice(None), torch.tensor([0, 1, 2, 5]))),
    ("last_two", lambda: (slice(None), J, torch.tensor([[5], [0]]))),
    ("all_three", lambda: (I, torch.tensor([0, 1, 2, 4]), torch.tensor([5, 4, 0, 1]))),
    ("2d_index", lambda: (J,)),
    ("int32", lambda: (slice(None), I.int())),
    ("mask_dim0", lambda: (torch.tensor([True, False, True, True]),)),
    ("mask_dim1", lambda: (slice(None), torch.tensor([False, True, True, False, True]))),
    ("mask_2d", lambda: (rnd((4, 5)) > 0,)),
    ("mask_and_int", lambda: (torch.tensor([True, False, True, True]), slice(None), torch.tensor([0, 5, 1]))),
    ("full_mask", lambda: (rnd((4, 5, 6)) > 0.3,)),
    ("empty_index", lambda: (torch.tensor([], dtype=torch.long),)),
]


def dev_index(ix, device):
    return tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in ix)


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("nc", [False, True])
def test_index_forward_backward(name, make, nc):
    x = rnd((4, 5, 6))
    ix = make()
    check(lambda t: t[dev_index(ix, t.device)], noncontig(x) if nc else x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("name,make", CASES[:8] + CASES[10:13], ids=[c[0] for c in CASES[:8] + CASES[10:13]])
def test_index_dtypes(dtype, name, make):
    x = rnd((4, 5, 6), dtype)
    ix = make()
    check(lambda t: t[dev_index(ix, t.device)], x, grad=False)


def test_index_host_indices_and_0d():
    x = rnd((4, 5, 6))
    check(lambda t: t[torch.tensor([1, -1]), 2], x)  # host index tensor, int dim
    check(lambda t: t[torch.tensor(3).to(t.device)], x)  # 0-d index
    check(lambda t: t[..., torch.tensor([0, 2]).to(t.device)], x)
    s = rnd(())
    check(lambda t: t[torch.tensor(True).to(t.device)], s)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_index_put(accumulate, name, make):
    x = rnd((4, 5, 6))
    ix = make()
    shape = x[ix].shape
    v = rnd(tuple(shape)) if len(shape) else rnd(())
    # index_put takes None where indexing takes a full slice. Every case indexes
    # distinct elements, so accumulate=False does not depend on the write order.
    put_ix = tuple(None if isinstance(t, slice) else t for t in ix)
    for nc in (False, True):
        def f(t, vv):
            t = t * 1  # a non-leaf copy so in-place put is differentiable
            return torch.ops.aten.index_put(t, list(dev_index(put_ix, t.device)), vv, accumulate)
        check(f, noncontig(x) if nc else x, v)


def test_index_put_accumulate_duplicates_and_broadcast_value():
    x = rnd((5, 3))
    idx = torch.tensor([1, 1, 4, 1, -5])
    check(lambda t, v: (t * 1).index_put((idx.to(t.device),), v, accumulate=True), x, rnd((5, 3)))
    check(lambda t, v: (t * 1).index_put((idx.to(t.device),), v, accumulate=True), x, rnd((3,)))
    # the backward of x[idx] with repeated indices is an accumulating put
    check(lambda t: t[idx.to(t.device)] * 2, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_setitem_forms(dtype):
    for nc in (False, True):
        x = rnd((6, 7), dtype)
        x = noncontig(x) if nc else x
        d = x.to(DEV)
        if nc:
            d = noncontig(d)
        m = rnd((6, 7)) > 0
        val = rnd((), dtype)
        c = x.clone()
        c[m] = val
        d[m.to(DEV)] = val.to(DEV)
        assert torch.equal(d.cpu(), c)
        rows = torch.tensor([5, 0, 2])
        src = rnd((3, 7), dtype)
        c[rows] = src
        d[rows.to(DEV)] = src.to(DEV)
        assert torch.equal(d.cpu(), c)
        pair = rnd((6, 2), dtype)
        c[:, torch.tensor([1, -1])] = pair
        d[:, torch.tensor([1, -1], device=DEV)] = pair.to(DEV)
        assert torch.equal(d.cpu(), c)
        c[torch.tensor([0, 3]), torch.tensor([6, 2])] = src[0, :2]
        d[torch.tensor([0, 3], device=DEV), torch.tensor([6, 2], device=DEV)] = src[0, :2].to(DEV)
        assert torch.equal(d.cpu(), c)


def test_index_put_noncontiguous_target_strides():
    # A transposed target whose indexed dims cannot merge into one view: written
    # through a contiguous copy.
    x = rnd((4, 5, 6))
    ix = (torch.tensor([0, 3]), None, torch.tensor([1, 5]))
    c = x.permute(2, 0, 1).clone().permute(1, 2, 0)
    d = x.permute(2, 0, 1).to(DEV).permute(1, 2, 0)
    v = rnd((2, 5))
    put = torch.ops.aten.index_put_
    put(c, list(ix), v)
    put(d, list(dev_index(ix, DEV)), v.to(DEV))
    assert torch.equal(d.cpu(), c)
    put(c, list(ix), v, True)
    put(d, list(dev_index(ix, DEV)), v.to(DEV), True)
    torch.testing.assert_close(d.cpu(), c)


def test_index_errors():
    x = torch.randn(4, 5, device=DEV)
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([0, 4])]  # host index: checked on the host
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, torch.tensor([-6])]
    with pytest.raises(RuntimeError, match="out of range"):
        x[torch.tensor([0, 4], device=DEV)].cpu()  # device index: the chip faults
    with pytest.raises(RuntimeError, match="out of range"):
        # several indices: each dim checked, not just the combined position
        x[torch.tensor([1], device=DEV), torch.tensor([5], device=DEV)].cpu()
    with pytest.raises(RuntimeError, match="out of range"):
        x.index_put_((torch.tensor([7], device=DEV),), torch.ones(5, device=DEV))
        x.cpu()
    with pytest.raises(IndexError, match="too many indices"):
        x[torch.tensor([0]), torch.tensor([0]), torch.tensor([0])]
    with pytest.raises(IndexError, match="mask"):
        x[torch.ones(3, dtype=torch.bool, device=DEV)]
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        x[torch.tensor([0.0], device=DEV)]
    with pytest.raises(IndexError, match="shape mismatch"):
        x[torch.tensor([0, 1], device=DEV), torch.tensor([0, 1, 2], device=DEV)]
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_((torch.tensor([0], device=DEV),), torch.ones(5, device=DEV, dtype=torch.int64))
    # the device still works after the faults
    assert x.sum().cpu().numel() == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter(dtype, dim):
    x = rnd((4, 6), dtype)
    g = torch.Generator().manual_seed(3)
    # a permutation per row/column: no duplicates, so the result is order-independent
    if dim == 0:
        idx = torch.stack([torch.randperm(4, generator=g)[:3] for _ in range(5)], 1)
    else:
        idx = torch.stack([torch.randperm(6, generator=g)[:4] for _ in range(3)], 0)
    src = rnd(tuple(idx.shape), dtype)  # autograd needs src of the index's shape
    for nc in (False, True):
        xs = noncontig(x) if nc else x
        check(lambda t, s: t.scatter(dim, idx.to(t.device), s), xs, noncontig(src) if nc else src,
              grad=dtype.is_floating_point)
        check(lambda t: t.scatter(dim, idx.to(t.device), 1 if dtype != torch.bool else True), xs,
              grad=dtype.is_floating_point)
    # src larger than the index: only its leading index-shaped block is read
    big = rnd((5, 7), dtype)
    check(lambda t, s: t.scatter(dim, idx.to(t.device), s), x, big, grad=False)
    c = x.clone()
    d = x.to(DEV)
    c.scatter_(dim, idx, src)
    d.scatter_(dim, idx.to(DEV), src.to(DEV))
    assert torch.equal(d.cpu(), c)


def test_scatter_errors():
    x = torch.zeros(3, 4, device=DEV)
    with pytest.raises(RuntimeError, match="out of range"):
        x.scatter_(1, torch.tensor([[4]], device=DEV), 1.0)
        x.cpu()
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.scatter_(1, torch.tensor([0], device=DEV), 1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_copy(dtype, dim):
    x = rnd((5, 4), dtype)
    idx = torch.tensor([3, 0, 2])
    src = rnd((3, 4) if dim == 0 else (5, 3), dtype)
    check(lambda t, s: t.index_copy(dim, idx.to(t.device), s), noncontig(x), src, grad=dtype.is_floating_point)


def test_max_min_dim_backward_is_native():
    # max/min over a dim: the backward scatters the gradient into zeros (scatter_).
    torch.neuron.reset_op_counts()
    for fn in (torch.max, torch.min):
        for keepdim in (False, True):
            x = rnd((4, 6))
            check(lambda t: fn(t, 1, keepdim=keepdim).values, x)
            check(lambda t: fn(t, 0, keepdim=keepdim).values, noncontig(x))
    assert torch.neuron.fallback_ops() == {} or not torch.neuron.fallback_ops()


def test_nonzero():
    x = rnd((4, 5)) > 0
    d = x.to(DEV)
    assert torch.equal(torch.nonzero(d).cpu(), torch.nonzero(x))
    assert torch.nonzero(d).device.type == DEV
    assert torch.equal(torch.where(noncontig(d))[1].cpu(), torch.where(noncontig(x))[1])
