"""The model and data of the DDP test: the same in the ranks and the reference."""
import torch
import torch.nn as nn


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def make_batches(steps, batch):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(batch, 16, generator=g)
        yield x, (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4] > 0).long()


def train_single(steps, batch):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in make_batches(steps, batch):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach() for p in model.parameters()]
