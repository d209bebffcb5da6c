"""The kernel library's MoE blockwise (grouped) matmul with token routing
(torch_neuron.kernels.library.moe_matmul): tokens routed by a router's top-k to
experts, gathered into blocks of 128 rows, one grouped matmul kernel, scattered back
weighted. Forward and backward (grads of the tokens, the expert weights and the
routing weights) against a loop over the experts on the CPU and its autograd, on
shapes that do not divide the tiles (128 rows, 512 columns) and with an expert that
gets no token."""
import pytest
import torch

import torch_neuron.kernels as nk
from torch_neuron.kernels import _format, moe
from torch_neuron.kernels import library as kl

DEV = "neuron"


def _reference(x, w, idx, gw):
    """The MoE layer as a loop over experts (float32)."""
    out = torch.zeros(x.shape[0], w.shape[2])
    for e in range(w.shape[0]):
        tok, slot = torch.nonzero(idx == e, as_tuple=True)
        if tok.numel():
            out = out.index_add(0, tok, (x[tok] @ w[e]) * gw[tok, slot, None])
    return out


def _routing(T, H, E, k, empty, seed):
    """A router: top-k of softmax(x @ Wr), expert `empty` never chosen."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g)
    logits = x @ torch.randn(H, E, generator=g)
    logits[:, empty] = float("-inf")
    gw, idx = torch.softmax(logits, -1).topk(k, dim=-1)
    return x, idx, gw


def _grads(fn, x, w, idx, gw, device, weight):
    xs = [t.detach().to(device).requires_grad_() for t in (x, w, gw)]
    out = fn(xs[0], xs[1], idx.to(device), xs[2])
    (out.float() * weight.to(device)).sum().backward()
    return out.detach().cpu(), [t.grad.cpu() for t in xs]


@pytest.mark.parametrize("dtype,T,H,E,k,F", [(torch.float32, 150, 200, 4, 2, 600),
                                              (torch.bfloat16, 70, 130, 3, 1, 72)])
def test_moe_matmul_forward_and_backward(dtype, T, H, E, k, F):
    x, idx, gw = _routing(T, H, E, k, empty=1, seed=3)
    w = torch.randn(E, H, F, generator=torch.Generator().manual_seed(4)) * H ** -0.5
    x, w = x.to(dtype), w.to(dtype)
    weight = torch.linspace(-1, 1, T * F).reshape(T, F)
    out, (gx, gwt, ggw) = _grads(kl.moe_matmul, x, w, idx, gw, DEV, weight)
    ref, (rx, rw, rgw) = _grads(lambda a, b, i, c: _reference(a.float(), b.float(), i, c), x, w, idx, gw, "cpu",
                                weight)
    assert out.dtype == dtype and gx.dtype == dtype and gwt.dtype == dtype
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(out.float(), ref, **tol)
    torch.testing.assert_close(gx.float(), rx.float(), **tol)
    torch.testing.assert_close(gwt.float(), rw.float(), **tol)
    torch.testing.assert_close(ggw, rgw, **(tol if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)))
    assert torch.count_nonzero(gwt[1]) == 0  # the expert without tokens gets no gradient


def test_moe_expert_without_tokens_has_no_block():
    x, idx, gw = _routing(40, 24, 3, 2, empty=2, seed=5)
    _, _, blocks = moe.route(idx, 3)
    assert blocks == [1, 1, 0]
    w = torch.randn(3, 24, 16)
    nk_fwd = kl.moe_grouped_forward
    traced = nk_fwd.trace([torch.empty(256, 16), torch.empty(256, 24), w], {"blocks": (1, 1, 0)})
    # two experts' blocks: two matmul nests, none for the empty expert
    assert sum(1 for i in traced.insns if i["op"] == _format.OP_MATMUL) == 2


def test_moe_matmul_simulated():
    """The same kernels in the NumPy simulation (CPU tensors)."""
    x, idx, gw = _routing(20, 12, 3, 2, empty=0, seed=6)
    w = torch.randn(3, 12, 10)
    weight = torch.linspace(-1, 1, 200).reshape(20, 10)
    out, grads = _grads(kl.moe_matmul, x, w, idx, gw, "cpu", weight)
    ref, rgrads = _grads(lambda a, b, i, c: _reference(a, b, i, c), x, w, idx, gw, "cpu", weight)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for g, r in zip(grads, rgrads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


def test_moe_matmul_refuses_bad_routing():
    x, w = torch.randn(4, 8), torch.randn(2, 8, 8)
    with pytest.raises(nk.KernelError, match=r"in \[0, 2\)"):
        kl.moe_matmul(x, w, torch.tensor([[0], [1], [2], [0]]), torch.ones(4, 1))
    with pytest.raises(nk.KernelError, match="x \\[T, H\\] and w"):
        kl.moe_matmul(x, torch.randn(2, 9, 8), torch.zeros(4, 1, dtype=torch.long), torch.ones(4, 1))


def test_grouped_matmul_opcheck():
    """PyTorch's checks of the grouped matmul op (schema, fake vs real, autograd
    registration, AOT dispatch): CPU tensors, so the kernels run in the simulation."""
    xg = torch.randn(256, 12, requires_grad=True)
    w = torch.randn(3, 12, 10, requires_grad=True)
    results = torch.library.opcheck(torch.ops.neuron_kernels.moe_grouped_matmul.default, (xg, w, [1, 0, 1]))
    assert set(results.values()) == {"SUCCESS"}, results


def test_moe_matmul_under_torch_compile():
    """An MoE layer compiled with backend="neuron": the routing reads the per-expert
    counts on the host (a graph break, Dynamo's usual explanation), the gather, the
    grouped matmul kernel and the weighted scatter run in compiled graphs replayed as
    programs; forward and backward match the loop over experts on the CPU."""
    import torch._dynamo
    import torch_neuron.compiler as nc
    torch._dynamo.reset()
    nc.reset_stats()
    x, idx, gw = _routing(96, 40, 3, 2, empty=2, seed=8)
    w = torch.randn(3, 40, 24, generator=torch.Generator().manual_seed(9)) * 40 ** -0.5

    def layer(a, b, i, c):
        return torch.relu(kl.moe_matmul(a * 2, b, i, torch.softmax(c, -1)))

    def reference(a, b, i, c):
        return torch.relu(_reference(a * 2, b, i, torch.softmax(c, -1)))

    weight = torch.linspace(-1, 1, 96 * 24).reshape(96, 24)
    compiled = torch.compile(layer, backend="neuron")
    for step in range(2):  # the second call replays what the first captured
        out, grads = _grads(compiled, x, w, idx, gw, DEV, weight)
        ref, rgrads = _grads(reference, x, w, idx, gw, "cpu", weight)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        for g, r in zip(grads, rgrads):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)
    s = nc.stats()
    assert s.get("programs", 0) >= 1 and s.get("replays", 0) >= 1, s
    # The grouped matmul's forward and backward kernels are nodes of replayed programs.
    assert s.get("program_tile_kernels", 0) >= 2, s
