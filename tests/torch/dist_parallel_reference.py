"""Models, data and single-process CPU references of test_dist_parallel.py (the same
in the rank processes and the test process)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from models import TinyLM

# Small enough for 2 ranks on a 2-core host; still two attention blocks.
LM = dict(vocab=32, d=32, heads=2, layers=2, ctx=16)


def make_lm():
    torch.manual_seed(0)
    return TinyLM(**LM)


def lm_batches(steps, batch):
    """Next-token prediction on sequences with structure (a noisy counter mod vocab)."""
    g = torch.Generator().manual_seed(1)
    v, t = LM["vocab"], LM["ctx"]
    for _ in range(steps):
        start = torch.randint(0, v, (batch, 1), generator=g)
        seq = (start + torch.arange(t + 1)) % v
        noise = torch.randint(0, v, seq.shape, generator=g)
        seq = torch.where(torch.rand(seq.shape, generator=g) < 0.1, noise, seq)
        yield seq[:, :-1], seq[:, 1:]


def lm_train_single(steps, batch):
    model = make_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in lm_batches(steps, batch):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach() for p in model.parameters()]


class MLP(nn.Module):
    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def make_mlp():
    torch.manual_seed(2)
    return MLP()


def mlp_input():
    return torch.randn(4, 16, generator=torch.Generator().manual_seed(3))


def mlp_dense():
    """Output, input gradient and weight gradients of the dense MLP on CPU."""
    model = make_mlp()
    x = mlp_input().requires_grad_()
    out = model(x)
    out.pow(2).sum().backward()
    return out.detach(), x.grad, {n: p.grad for n, p in model.named_parameters()}
