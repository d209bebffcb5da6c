"""Rank processes of test_dist_parallel.py: FSDP2 (fully_shard) training of the tiny
transformer LM, and a DTensor tensor-parallel MLP, on the neuron backend. The
references (dist_parallel_reference.py) run in the test process, on CPU, in one
process, on the global batch.
"""
import os
import sys

import torch
import torch.distributed as dist

from dist_workers import _init

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_parallel_reference import lm_batches, make_lm, make_mlp, mlp_input  # noqa: E402


def fsdp2_train(rank, world, store_path, steps, global_batch):
    """fully_shard on every transformer block and the root; SGD with momentum.
    Returns the rank's loss per step (on its share of the batch) and the full
    parameters at the end (gathered with full_tensor())."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron")
    return fsdp2_steps(rank, world, steps, global_batch)


def fsdp2_steps(rank, world, steps, global_batch):
    """fsdp2_train's training, in a process group already formed (over the world)."""
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("neuron", (world,))
    model = make_lm().to("neuron")
    for block in model.blocks.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    per = global_batch // world
    losses = []
    for x, y in lm_batches(steps, global_batch):
        xs, ys = x[rank * per:(rank + 1) * per].to("neuron"), y[rank * per:(rank + 1) * per].to("neuron")
        opt.zero_grad()
        logits = model(xs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ys.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = [p.full_tensor().detach().cpu().numpy() for p in model.parameters()]
    return {"losses": losses, "params": params}


def tp_mlp(rank, world, store_path):
    """Column-parallel up projection, row-parallel down projection over a 1-d
    DeviceMesh("neuron"): returns the output, the input's gradient and the full
    weight gradients (gathered), to compare with the dense computation."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron")
    mesh = init_device_mesh("neuron", (world,))
    model = make_mlp().to("neuron")
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    x = mlp_input().to("neuron").requires_grad_()
    out = model(x)
    out.pow(2).sum().backward()
    grads = {n: p.grad.full_tensor().cpu().numpy() for n, p in model.named_parameters()}
    return {"out": out.detach().cpu().numpy(), "x_grad": x.grad.cpu().numpy(), "grads": grads}
