"""FlexAttention (torch.nn.attention.flex_attention) with a score_mod and a block
mask on 'neuron': compiled with backend="neuron" in one graph (no graph break) and
as chip programs, eagerly, forward and backward, against an independent dense
reference on the CPU (scores, score_mod and mask written out with broadcasting)
and against the CPU's own flex_attention.

The guard tests check the PyTorch internals torch_neuron/_flex_attention.py relies
on, so that a torch upgrade that moves them fails here with a message saying what
to update."""
import math

import pytest
import torch
import torch._dynamo
import torch.nn.attention.flex_attention as fa
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_neuron._flex_attention as nfa
import torch_neuron.compiler as nc

B, H, L, E = 2, 4, 128, 16
WINDOW = 48  # sliding window: with 32-wide blocks, some blocks are empty, some partial
BLOCK = 32
RTOL, ATOL = 1e-4, 1e-5


# Each test starts from empty Dynamo caches and compile counters (conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def sliding_causal(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


def make_alibi(slopes):
    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx)

    return alibi


def reference(q, k, v, score_mod, mask_mod):
    """Attention written out densely with broadcasting (no vmap, no flex_attention)."""
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    b = torch.arange(q.shape[0]).view(-1, 1, 1, 1)
    h = torch.arange(q.shape[1]).view(1, -1, 1, 1)
    qi = torch.arange(q.shape[2]).view(1, 1, -1, 1)
    ki = torch.arange(k.shape[2]).view(1, 1, 1, -1)
    s = score_mod(s, b, h, qi, ki)
    s = s.masked_fill(~mask_mod(b, h, qi, ki).expand_as(s), float("-inf"))
    return torch.softmax(s, -1) @ v


def inputs(seed, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, E, generator=g) for _ in range(3))
    slopes = torch.tensor([2.0 ** -(i + 1) for i in range(H)])
    if requires_grad:
        for t in (q, k, v, slopes):
            t.requires_grad_(True)
    return q, k, v, slopes


def on_neuron(*ts):
    return [t.detach().to("neuron").requires_grad_(t.requires_grad) for t in ts]


# ---- the PyTorch internals the plugin relies on ----

def test_guard_flex_attention_checks_devices_through_the_module_global():
    assert "_validate_device" in fa.flex_attention.__code__.co_names and fa.flex_attention.__globals__ is vars(fa), (
        "torch.nn.attention.flex_attention.flex_attention no longer calls the module-level _validate_device: "
        "update torch_neuron/_flex_attention.py (allow_neuron) for this torch")
    assert getattr(fa._validate_device, "_neuron_original", None) is not None, (
        "torch_neuron did not wrap flex_attention's _validate_device (allow_neuron was not called at load)")


def test_guard_pytorch_still_refuses_neuron_without_the_plugin():
    # If this fails, PyTorch accepts PrivateUse1 devices itself now: drop allow_neuron.
    original = fa._validate_device._neuron_original
    q = torch.zeros(1, 1, 1, 1, device="neuron")
    with pytest.raises(ValueError, match="FlexAttention is only supported on"):
        original(q, q, q)


def test_guard_other_devices_keep_pytorchs_checks():
    m = torch.zeros(1, 1, 1, 1, device="meta")
    with pytest.raises(ValueError, match="FlexAttention is only supported on"):
        fa._validate_device(m, m, m)
    c = torch.zeros(1, 1, 1, 1, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        fa._validate_device(c, c, c)


def test_guard_the_higher_order_op_and_its_dense_kernel_exist():
    hop = getattr(torch.ops.higher_order, "flex_attention", None)
    assert hop is not None, "torch.ops.higher_order.flex_attention is gone: update torch_neuron/_flex_attention.py"
    kernel = nfa.dense_kernel()
    # The dense kernel's contract: (q, k, v, score_mod, block_mask tuple, scale,
    # kernel_options, score buffers, mask buffers) -> (out, lse, max_scores).
    q, k, v, _ = inputs(0)
    bm = create_block_mask(sliding_causal, B, H, L, L, device="cpu", BLOCK_SIZE=BLOCK)
    out, lse, mx = kernel(q, k, v, lambda s, b, h, m, n: s, bm.as_tuple(), 1 / math.sqrt(E), {}, (), ())
    torch.testing.assert_close(out, reference(q, k, v, lambda s, *_: s, sliding_causal), rtol=RTOL, atol=ATOL)
    assert lse.shape == mx.shape == (B, H, L)


# ---- FlexAttention on the device ----

def test_compiled_flex_attention_is_one_graph_and_matches_cpu():
    q, k, v, slopes = inputs(1)
    alibi = make_alibi(slopes)
    ref = reference(q, k, v, alibi, sliding_causal)
    with torch.no_grad():
        cpu = flex_attention(q, k, v, score_mod=alibi,
                             block_mask=create_block_mask(sliding_causal, B, H, L, L, device="cpu", BLOCK_SIZE=BLOCK))
    torch.testing.assert_close(cpu, ref, rtol=RTOL, atol=ATOL)

    dq, dk, dv, dslopes = on_neuron(q, k, v, slopes)
    dalibi = make_alibi(dslopes)
    bm = create_block_mask(sliding_causal, B, H, L, L, device="neuron", BLOCK_SIZE=BLOCK)

    def attend(q, k, v):
        return flex_attention(q, k, v, score_mod=dalibi, block_mask=bm)

    explanation = torch._dynamo.explain(attend)(dq, dk, dv)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1, explanation
    torch._dynamo.reset()
    nc.reset_stats()

    compiled = torch.compile(attend, backend="neuron", fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            out = compiled(dq, dk, dv)
            assert out.device.type == "neuron"
            torch.testing.assert_close(out.cpu(), ref, rtol=RTOL, atol=ATOL)
            torch.testing.assert_close(out.cpu(), cpu, rtol=RTOL, atol=ATOL)
    s = nc.stats()
    assert s.get("flex_attention_nodes") == 1, s
    # One chip program, captured on the first call and replayed after.
    assert s.get("programs") == 1 and s.get("replays") == 2, s


def test_compiled_flex_attention_training_matches_reference_gradients():
    q, k, v, slopes = inputs(2, requires_grad=True)
    w = torch.randn(B, H, L, E, generator=torch.Generator().manual_seed(7))
    (reference(q, k, v, make_alibi(slopes), sliding_causal) * w).sum().backward()

    dq, dk, dv, dslopes = on_neuron(q, k, v, slopes)
    bm = create_block_mask(sliding_causal, B, H, L, L, device="neuron", BLOCK_SIZE=BLOCK)
    compiled = torch.compile(lambda q, k, v: flex_attention(q, k, v, score_mod=make_alibi(dslopes), block_mask=bm),
                             backend="neuron", fullgraph=True)
    dw = w.to("neuron")
    for step in range(2):
        for t in (dq, dk, dv, dslopes):
            t.grad = None
        out = compiled(dq, dk, dv)
        (out * dw).sum().backward()
        for got, want, name in ((dq, q, "q"), (dk, k, "k"), (dv, v, "v"), (dslopes, slopes, "slopes")):
            torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-3, atol=1e-4, msg=f"grad of {name}")
    s = nc.stats()
    assert s.get("graphs_forward") == 1 and s.get("graphs_backward") == 1, s
    assert s.get("programs") == 2 and s.get("replays") == 2, s


def test_eager_flex_attention_runs_on_neuron():
    q, k, v, slopes = inputs(3)
    dq, dk, dv, dslopes = on_neuron(q, k, v, slopes)
    bm = create_block_mask(sliding_causal, B, H, L, L, device="neuron", BLOCK_SIZE=BLOCK)
    with torch.no_grad():
        out = flex_attention(dq, dk, dv, score_mod=make_alibi(dslopes), block_mask=bm)
    torch.testing.assert_close(out.cpu(), reference(q, k, v, make_alibi(slopes), sliding_causal), rtol=RTOL,
                               atol=ATOL)
