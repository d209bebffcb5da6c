"""Parallelism on the torch.distributed backend "neuron" (issue 16).

FSDP2 (fully_shard) training of the tiny transformer LM on 2 ranks gives the
losses and parameters of one CPU process training on the global batch; a DTensor
tensor-parallel MLP (ColwiseParallel/RowwiseParallel over a 1-d
DeviceMesh("neuron")) gives the dense forward and backward; DDP on 4 ranks gives
the single-process losses. Each spawn is bounded (dist_workers.spawn's timeout).
"""
import pytest
import torch

import dist_parallel_workers
import dist_workers
from dist_parallel_reference import lm_train_single, mlp_dense
from dist_reference import train_single
from dist_workers import spawn

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")


def _ok(res, world):
    for r in range(world):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result")


def test_fsdp2_matches_single_process():
    steps, batch, world = 4, 8, 2
    res = spawn(dist_parallel_workers.fsdp2_train, steps, batch, world=world, timeout=300)
    _ok(res, world)
    ref_losses, ref_params = lm_train_single(steps, batch)
    # Gradients are averaged over ranks: the mean of the ranks' losses is the global batch's.
    for i in range(steps):
        got = sum(res[r]["losses"][i] for r in range(world)) / world
        assert abs(got - ref_losses[i]) < 1e-3, f"step {i}: FSDP2 loss {got} vs single-process {ref_losses[i]}"
    for r in range(world):
        for p, q in zip(res[r]["params"], ref_params):
            torch.testing.assert_close(torch.from_numpy(p), q, rtol=1e-3, atol=1e-4)


def test_tensor_parallel_mlp_matches_dense():
    world = 2
    res = spawn(dist_parallel_workers.tp_mlp, world=world, timeout=180)
    _ok(res, world)
    out, x_grad, grads = mlp_dense()
    for r in range(world):
        torch.testing.assert_close(torch.from_numpy(res[r]["out"]), out, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(torch.from_numpy(res[r]["x_grad"]), x_grad, rtol=1e-4, atol=1e-5)
        for n, g in grads.items():
            torch.testing.assert_close(torch.from_numpy(res[r]["grads"][n]), g, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, n=n: f"rank {r}, grad of {n}: {m}")


def test_ddp_on_4_ranks_matches_single_process():
    steps, batch, world = 3, 16, 4
    res = spawn(dist_workers.ddp_train, steps, batch, world=world, timeout=300)
    _ok(res, world)
    ref_losses, ref_params = train_single(steps, batch)
    for i in range(steps):
        got = sum(res[r]["losses"][i] for r in range(world)) / world
        assert abs(got - ref_losses[i]) < 1e-4, f"step {i}: DDP loss {got} vs single-process {ref_losses[i]}"
    for r in range(world):
        for p, q in zip(res[r]["params"], ref_params):
            torch.testing.assert_close(torch.from_numpy(p), q, rtol=1e-4, atol=1e-5)
