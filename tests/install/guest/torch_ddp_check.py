"""The install test's distributed check: two ranks of torch.distributed's backend
`neuron`, run by a user in group neuron against the system neurond on the kmd backend,
where neurond moves their buffers by the devices' DMA engines and reduces them in
compute jobs (runtime/kmd/README.md, "Collective groups"). Checked against the CPU:
all_reduce of three dtypes, all_gather_into_tensor, reduce_scatter_tensor, broadcast,
and DDP training equal to one process training on the global batch. Twice: both ranks
on neuron:0, then rank r on neuron:r (torchrun's placement by LOCAL_RANK; the guest
has two devices, between which neurond carries the bytes through a host buffer both
devices' DMA engines reach).
"""
import os
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
STEPS = 4


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def reference_losses():
    """One process on the CPU, the global batch each step (DDP averages gradients)."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def rank_main(rank, store_path, queue, device_per_rank):
    try:
        dev = torch.device("neuron", rank if device_per_rank else 0)
        torch.neuron.set_device(dev.index)
        dist.init_process_group("neuron", store=dist.FileStore(store_path, WORLD), rank=rank, world_size=WORLD)
        inputs = [torch.arange(1000, dtype=torch.float32) * (r + 1) / 7 for r in range(WORLD)]
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            t = inputs[rank].to(dtype).to(dev)
            dist.all_reduce(t)
            want = sum(i.to(dtype) for i in inputs)
            assert torch.equal(t.cpu(), want), f"all_reduce {dtype} differs from the CPU"
        gathered = torch.empty(WORLD * 1000, device=dev)
        dist.all_gather_into_tensor(gathered, inputs[rank].to(dev))
        assert torch.equal(gathered.cpu(), torch.cat(inputs)), "all_gather_into_tensor differs"
        full = [torch.arange(WORLD * 500, dtype=torch.float32) + 10 * r for r in range(WORLD)]
        part = torch.empty(500, device=dev)
        dist.reduce_scatter_tensor(part, full[rank].to(dev))
        assert torch.equal(part.cpu(), sum(full)[rank * 500:(rank + 1) * 500]), "reduce_scatter_tensor differs"
        b = (inputs[rank] if rank == 1 else torch.zeros(1000)).to(dev)
        dist.broadcast(b, src=1)
        assert torch.equal(b.cpu(), inputs[1]), "broadcast differs"
        model = torch.nn.parallel.DistributedDataParallel(make_model().to(dev))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for step in range(STEPS):
            x, y = batch(step)
            x, y = x[rank * 4:(rank + 1) * 4].to(dev), y[rank * 4:(rank + 1) * 4].to(dev)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            # The global batch's loss: the mean of the ranks' halves.
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)
            losses.append(mean.item())
        dist.destroy_process_group()
        queue.put((rank, losses, None))
    except Exception:  # reported to the parent, which fails with it
        queue.put((rank, None, traceback.format_exc()))


def run_ranks(device_per_rank):
    """Every rank's losses, after each checked the collectives."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="neuron-ddp-") as d:
        store = os.path.join(d, "store")
        procs = [ctx.Process(target=rank_main, args=(r, store, queue, device_per_rank)) for r in range(WORLD)]
        for p in procs:
            p.start()
        results = {}
        try:
            for _ in range(WORLD):
                rank, losses, error = queue.get(timeout=600)
                assert error is None, f"rank {rank}:\n{error}"
                results[rank] = losses
        finally:
            for p in procs:
                p.join(30)
                if p.is_alive():
                    p.kill()
    return results


def main():
    assert torch.neuron.is_available(), "device 'neuron' is not available"
    assert torch.neuron.device_count() >= WORLD, f"{torch.neuron.device_count()} device(s), the check needs {WORLD}"
    want = reference_losses()
    for device_per_rank, placement in ((False, "both on neuron:0"), (True, "rank r on neuron:r")):
        t0 = time.monotonic()
        for rank, losses in run_ranks(device_per_rank).items():
            for step, (got, ref) in enumerate(zip(losses, want)):
                assert abs(got - ref) <= 1e-4 * max(1.0, abs(ref)), \
                    f"{placement}: rank {rank} step {step}: loss {got}, one process on the CPU {ref}"
        print(f"DDP on 2 ranks, {placement}: collectives equal the CPU, losses "
              f"{', '.join(f'{v:.5f}' for v in want)} equal one process's, {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
