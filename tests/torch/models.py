"""Small models shared by the training tests, the benchmark and the demo."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=128, d_out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        x = torch.nn.functional.avg_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


class TinyLM(nn.Module):
    """A 2-layer causal transformer language model."""

    def __init__(self, vocab=96, d=64, heads=4, layers=2, ctx=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, activation="gelu",
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        h = self.emb(idx) + self.pos(pos)
        h = self.blocks(h, mask=mask, is_causal=True)
        return self.head(self.norm(h))


class LlamaLM(nn.Module):
    """A Llama-style causal language model (RMSNorm, rotary embedding, SwiGLU MLP, no
    biases). use_kernels=True swaps the PyTorch implementations of RMSNorm, SwiGLU,
    RoPE and causal attention for the tile-kernel library's
    (torch_neuron.kernels.library); the parameters and the math are the same."""

    def __init__(self, vocab=96, d=64, heads=4, layers=2, ctx=32, use_kernels=False):
        super().__init__()
        self.heads, self.use_kernels = heads, use_kernels
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(_LlamaBlock(d, heads) for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(d))
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd // 2, dtype=torch.float32) * 2 / hd))
        angles = torch.outer(torch.arange(ctx, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def ops(self):
        if self.use_kernels:
            from torch_neuron.kernels import library as kl
            return kl.rms_norm, kl.swiglu, kl.rotary_embedding, lambda q, k, v: kl.flash_attention(q, k, v, True)
        return _rms_norm, lambda g, u: nn.functional.silu(g) * u, _rope, \
            lambda q, k, v: nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward(self, idx):
        t = idx.shape[1]
        ops = self.ops()
        cos, sin = self.cos[:t], self.sin[:t]
        h = self.emb(idx)
        for block in self.blocks:
            h = block(h, ops, cos, sin, self.heads)
        return self.head(ops[0](h, self.norm, 1e-6))


def _rms_norm(x, w, eps):
    return nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


def _rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class _LlamaBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * (8 * d // 3), bias=False)
        self.down = nn.Linear(8 * d // 3, d, bias=False)

    def forward(self, x, ops, cos, sin, heads):
        rms_norm, swiglu, rope, attention = ops
        B, T, d = x.shape
        q, k, v = self.qkv(rms_norm(x, self.norm1, 1e-6)).view(B, T, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        a = attention(rope(q.contiguous(), cos, sin), rope(k.contiguous(), cos, sin), v.contiguous())
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, d))
        g, u = self.gate_up(rms_norm(x, self.norm2, 1e-6)).chunk(2, dim=-1)
        return x + self.down(swiglu(g.contiguous(), u.contiguous()))
