"""The tiny Llama-style language model (models.LlamaLM) switched to the kernel
library with one flag (use_kernels=True: RMSNorm, SwiGLU, RoPE and causal flash
attention as tile kernels): a few AdamW steps on `neuron` with the kernels, on
`neuron` with PyTorch's ops, and on the CPU (PyTorch's ops): the three loss curves
match."""
import collections
import copy

import torch
import torch.nn.functional as F

from models import LlamaLM
from torch_neuron.kernels import library as kl

STEPS = 6


def _train(model, batches, device):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.tensor([float(l) for l in losses])


def test_llama_lm_trains_to_the_same_loss_curve_with_kernels(monkeypatch):
    calls = collections.Counter()  # the flag really routes through the library's kernels
    for name in ("rms_norm", "swiglu", "rotary_embedding", "flash_attention"):
        fn = getattr(kl, name)
        monkeypatch.setattr(kl, name, lambda *a, _fn=fn, _name=name, **k: (calls.update([_name]), _fn(*a, **k))[1])
    torch.manual_seed(5)
    data = torch.randint(0, 96, (3, 4, 33))  # S = 32: the kernels' tiles are 128 rows, masked
    batches = [(data[i % 3, :, :-1], data[i % 3, :, 1:]) for i in range(STEPS)]
    model = LlamaLM()
    with_kernels = copy.deepcopy(model)
    with_kernels.use_kernels = True
    torch.neuron.reset_op_counts()
    kern = _train(with_kernels, batches, "neuron")
    assert torch.neuron.fallback_ops() == {}
    # per step and layer: 2 norms, 1 SwiGLU, 2 RoPEs (q, k), 1 attention; + the final norm
    assert calls == {"rms_norm": STEPS * 5, "swiglu": STEPS * 2, "rotary_embedding": STEPS * 4,
                     "flash_attention": STEPS * 2}, calls
    calls.clear()
    plain = _train(copy.deepcopy(model), batches, "neuron")
    cpu = _train(model, batches, "cpu")
    assert not calls  # use_kernels=False: PyTorch's ops
    print(f"\n  losses cpu {cpu.tolist()}\n  neuron {plain.tolist()}\n  kernels {kern.tolist()}")
    assert cpu[-1] < cpu[0]
    torch.testing.assert_close(plain, cpu, rtol=2e-3, atol=2e-4)
    torch.testing.assert_close(kern, cpu, rtol=2e-3, atol=2e-4)
    torch.testing.assert_close(kern, plain, rtol=2e-3, atol=2e-4)
