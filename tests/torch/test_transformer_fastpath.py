"""The eval-mode fast path of nn.TransformerEncoderLayer (_transformer_encoder_layer_fwd
and _native_multi_head_attention, taken under torch.no_grad()) on 'neuron' against
the CPU, with zero CPU fallbacks (strict mode)."""
import copy

import pytest
import torch

DEV = "neuron"


# Every test here runs in strict mode: a CPU fallback fails it (conftest.py).
pytestmark = pytest.mark.usefixtures("strict")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("d_model,nhead", [(32, 4), (24, 2)])  # head dim 8 (SDPA route), 12 (bmm route)
def test_encoder_eval_fast_path(norm_first, activation, d_model, nhead):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=48, dropout=0.1, activation=activation,
                                             batch_first=True, norm_first=norm_first)
    enc = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    denc = copy.deepcopy(enc).to(DEV)
    x = torch.randn(3, 7, d_model)
    torch.neuron.reset_op_counts()
    with torch.no_grad():
        c = enc(x)
        d = denc(x.to(DEV))
    assert torch.neuron.native_ops().get("_transformer_encoder_layer_fwd") == 2, torch.neuron.native_ops()
    assert not torch.neuron.fallback_ops(), torch.neuron.fallback_ops()
    torch.testing.assert_close(d.cpu(), c, rtol=1e-4, atol=1e-4)


def test_multi_head_attention_eval_fast_path():
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    dmha = copy.deepcopy(mha).to(DEV)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        c, _ = mha(x, x, x, need_weights=False)
        d, _ = dmha(*(x.to(DEV),) * 3, need_weights=False)
    torch.testing.assert_close(d.cpu(), c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["causal", "key_padding"])
def test_encoder_eval_fast_path_with_a_mask(kind):
    # With a mask the fast path's attention calls _masked_softmax (the demo's sampling
    # with a causal mask did, as a CPU fallback, before it was native).
    torch.manual_seed(3)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=48, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    denc = copy.deepcopy(enc).to(DEV)
    x = torch.randn(3, 7, 32)
    if kind == "causal":
        kw = {"mask": torch.nn.Transformer.generate_square_subsequent_mask(7), "is_causal": True}
        dkw = {"mask": kw["mask"].to(DEV), "is_causal": True}
    else:
        pad = torch.zeros(3, 7, dtype=torch.bool)
        pad[0, 5:] = True
        pad[2, 1:] = True
        kw = {"src_key_padding_mask": pad}
        dkw = {"src_key_padding_mask": pad.to(DEV)}
    torch.neuron.reset_op_counts()
    with torch.no_grad():
        c = enc(x, **kw)
        d = denc(x.to(DEV), **dkw)
    assert torch.neuron.native_ops().get("_masked_softmax"), torch.neuron.native_ops()
    assert not torch.neuron.fallback_ops(), torch.neuron.fallback_ops()
    torch.testing.assert_close(d.cpu(), c, rtol=1e-4, atol=1e-4)


def test_masked_softmax_matches_cpu_and_bad_masks_are_refused():
    x = torch.randn(2, 3, 4, 4)
    mask = torch.zeros(4, 4, dtype=torch.bool)
    mask[1] = True  # row 1 masked entirely
    mask[2, 3] = True
    c = torch._masked_softmax(x, mask, 3, 0)
    d = torch._masked_softmax(x.to(DEV), mask.to(DEV), 3, 0)
    torch.testing.assert_close(d.cpu(), c, equal_nan=True)
    assert torch.all(torch.isnan(d.cpu()[:, :, 1])), "a row masked entirely is NaN, as on the CPU"
    with pytest.raises(RuntimeError, match="does not broadcast"):
        torch._masked_softmax(x.to(DEV), torch.zeros(3, 5, dtype=torch.bool, device=DEV), 3, 2)
    with pytest.raises(RuntimeError, match="must be bool"):
        torch._masked_softmax(x.to(DEV), torch.zeros(4, 4, device=DEV), 3, 0)
