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
