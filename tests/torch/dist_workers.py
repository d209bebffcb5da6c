"""Rank processes of test_distributed.py (started with torch.multiprocessing spawn).

Every function here runs in a fresh process: it joins the process group through a
FileStore, does its part, and puts one result on the queue (a dict; "error" holds
a traceback when it failed). Each rank builds every rank's inputs from the same
seeds, so a reference needs no communication; the CPU reference goes through gloo
in the same process group ("cpu:gloo,neuron:neuron").
"""
import os
import queue as queue_mod
import sys
import tempfile
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "i32": torch.int32,
          "i64": torch.int64}
REDUCE = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
          "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT}


def spawn(fn, *args, world=WORLD, timeout=240):
    """Runs fn(rank, world, store, queue, *args) in `world` processes; their results by rank."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="neuron-dist-") as d:
        store = os.path.join(d, "store")
        procs = [ctx.Process(target=_run, args=(fn, r, world, store, queue, *args)) for r in range(world)]
        for p in procs:
            p.start()
        results = {}
        deadline = time.monotonic() + timeout
        try:
            # Until every rank reported, or none is left alive to (a rank that
            # exits on purpose reports nothing), or the deadline.
            while len(results) < world and time.monotonic() < deadline:
                try:
                    res = queue.get(timeout=0.5)
                    results[res["rank"]] = res
                except queue_mod.Empty:
                    if not any(p.is_alive() for p in procs) and queue.empty():
                        break
        finally:
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join()
    return results


def _init(rank, world, store_path, backend="cpu:gloo,neuron:neuron", timeout_s=60, **kw):
    store = dist.FileStore(store_path, world)
    # Every rank is up before the group (and its timeout) starts: importing torch
    # in a spawned process takes seconds on a loaded host.
    store.set(f"up{rank}", "1")
    store.wait([f"up{r}" for r in range(world)], timedelta(seconds=120))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s),
                            **kw)


def _run(fn, rank, world, store_path, queue, *args):
    try:
        out = fn(rank, world, store_path, *args)
        queue.put({"rank": rank, **(out or {})})
    except BaseException:  # noqa: B036 - report everything to the parent
        queue.put({"rank": rank, "error": traceback.format_exc()})
    finally:
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


def _data(seed, shape, dtype):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        # Products of a few ranks stay finite; halves of small integers are exact.
        return (torch.rand(shape, generator=g) * 4 - 2).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


def _noncontig(t):
    """A non-contiguous neuron tensor holding t's values."""
    big = torch.zeros((*t.shape, 2), dtype=t.dtype, device=t.device)
    big[..., 0] = t
    v = big[..., 0]
    assert not v.is_contiguous() or v.numel() <= 1
    return v


def _check(got, ref, what):
    got = got.cpu()
    if ref.dtype.is_floating_point:
        tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(ref.dtype, 1e-6)
        torch.testing.assert_close(got, ref, rtol=tol, atol=tol, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(got, ref), f"{what}: {got} != {ref}"


def _cpu_reduce(t, op, world):
    """gloo on CPU tensors; AVG (which gloo lacks) is its SUM divided as torch divides."""
    if op == "avg":
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t / world if t.dtype.is_floating_point else torch.div(t, world, rounding_mode="trunc")
    dist.all_reduce(t, op=REDUCE[op])
    return t


def collectives(rank, world, store_path, cases):
    """Each case: (name, op, dtype, shape, noncontig). Returns the failures by name."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path)
    failures = {}
    for i, (name, op, dt, shape, nc) in enumerate(cases):
        dtype = DTYPES[dt]
        try:
            _one_case(rank, world, i, op, dtype, shape, nc, name)
        except Exception:
            failures[name] = traceback.format_exc()
    return {"failures": failures}


def _dev(t, nc):
    d = t.to("neuron")
    return _noncontig(d) if nc else d


def _one_case(rank, world, i, op, dtype, shape, nc, name):
    mine = _data(1000 * i + rank, shape, dtype)
    n = mine.numel()
    if op.startswith("all_reduce_"):
        red = op[len("all_reduce_"):]
        d = _dev(mine, nc)
        w = dist.all_reduce(d, op=REDUCE[red], async_op=True)
        w.wait()
        _check(d, _cpu_reduce(mine.clone(), red, world), name)
    elif op == "broadcast":
        d = _dev(mine, nc)
        dist.broadcast(d, src=world - 1)
        ref = mine.clone()
        dist.broadcast(ref, src=world - 1)
        _check(d, ref, name)
    elif op == "all_gather":
        outs = [_dev(torch.zeros_like(mine), nc) for _ in range(world)]
        dist.all_gather(outs, _dev(mine, nc))
        refs = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(refs, mine)
        for o, r in zip(outs, refs):
            _check(o, r, name)
    elif op == "all_gather_into_tensor":
        out = torch.zeros((world * n,), dtype=dtype, device="neuron")
        dist.all_gather_into_tensor(out, _dev(mine, nc).reshape(-1) if not nc else _dev(mine, nc))
        ref = torch.zeros((world * n,), dtype=dtype)
        dist.all_gather_into_tensor(ref, mine.reshape(-1))
        _check(out, ref, name)
    elif op.startswith("reduce_scatter_"):
        red = op[len("reduce_scatter_"):]
        big = _data(7000 + 1000 * i + rank, (world * n,), dtype)
        out = _dev(torch.zeros((n,), dtype=dtype), False)
        dist.reduce_scatter_tensor(out, big.to("neuron"), op=REDUCE[red])
        full = _cpu_reduce(big.clone(), red, world)
        _check(out, full[rank * n:(rank + 1) * n], name)
    elif op == "reduce":
        d = _dev(mine, nc)
        dist.reduce(d, dst=0, op=dist.ReduceOp.SUM)
        ref = mine.clone()
        dist.all_reduce(ref)
        _check(d, ref if rank == 0 else mine, name)
    elif op == "gather":
        outs = [torch.zeros_like(mine, device="neuron") for _ in range(world)] if rank == 0 else None
        dist.gather(_dev(mine, nc), outs, dst=0)
        refs = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(refs, mine)
        if rank == 0:
            for o, r in zip(outs, refs):
                _check(o, r, name)
    elif op == "scatter":
        chunks = [_data(9000 + 1000 * i + r, shape, dtype) for r in range(world)]
        out = _dev(torch.zeros_like(mine), nc)
        dist.scatter(out, [c.to("neuron") for c in chunks] if rank == 0 else None, src=0)
        # Rank 0's chunks: every rank draws the same ones.
        _check(out, chunks[rank], name)
    elif op == "all_to_all_single":
        inp = _data(5000 + 1000 * i + rank, (world * 3, *shape[1:]), dtype)
        out = torch.zeros_like(inp, device="neuron")
        dist.all_to_all_single(out, inp.to("neuron"))
        ref = torch.zeros_like(inp)
        dist.all_to_all_single(ref, inp)
        _check(out, ref, name)
    elif op.startswith("list_reduce_scatter_"):
        red = op[len("list_reduce_scatter_"):]
        chunks = [_data(11000 + 1000 * i + 10 * rank + r, shape, dtype) for r in range(world)]
        out = _dev(torch.zeros_like(mine), nc)
        dist.reduce_scatter(out, [_dev(c, nc) for c in chunks], op=REDUCE[red])
        full = _cpu_reduce(torch.stack(chunks), red, world)  # every rank's chunk r, reduced, at r
        _check(out, full[rank], name)
    elif op == "all_to_all_single_uneven":
        # Rank r sends (r + 2j) % 3 rows to rank j: some blocks are empty.
        ins = [(rank + 2 * j) % 3 for j in range(world)]
        outs = [(j + 2 * rank) % 3 for j in range(world)]
        inp = _data(13000 + 1000 * i + rank, (sum(ins), *shape[1:]), dtype)
        out = torch.zeros((sum(outs), *shape[1:]), dtype=dtype, device="neuron")
        dist.all_to_all_single(out, inp.to("neuron"), output_split_sizes=outs, input_split_sizes=ins)
        ref = torch.zeros((sum(outs), *shape[1:]), dtype=dtype)
        dist.all_to_all_single(ref, inp, output_split_sizes=outs, input_split_sizes=ins)
        _check(out, ref, name)
    elif op == "all_to_all":
        # Rank r's tensor for rank j has (r + j) % 3 + 1 rows; gloo has no list
        # all_to_all, so the reference is the senders' data (every rank draws it).
        def block(src, dst):
            return _data(17000 + 1000 * i + 10 * src + dst, ((src + dst) % 3 + 1, *shape[1:]), dtype)
        outs = [_dev(torch.zeros_like(block(j, rank)), nc) for j in range(world)]
        dist.all_to_all(outs, [_dev(block(rank, j), nc) for j in range(world)])
        for j in range(world):
            _check(outs[j], block(j, rank), f"{name} from rank {j}")
    else:
        raise AssertionError(f"unknown case op {op}")


def dies(rank, world, store_path, mode):
    """Rank 1 exits (mode "exit") or never calls (mode "late"); rank 0's all_reduce must fail."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron", timeout_s=3)
    t = torch.ones(1000, device="neuron")
    dist.all_reduce(t)  # everyone is there once
    if rank == 1:
        if mode == "exit":
            os._exit(0)
        time.sleep(8)
        return {}
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"message": str(e), "type": type(e).__name__, "seconds": time.monotonic() - start}
    return {"message": None}


def ddp_steps(rank, world, steps, global_batch, process_group=None):
    """Trains dist_reference's model with DDP on neuron (the default group, or
    process_group) on this rank's share of each global batch; the per-step losses
    (averaged over ranks by the caller) and the final parameters."""
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dist_reference import make_model, make_batches

    model = make_model().to("neuron")
    ddp = DDP(model, process_group=process_group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    per = global_batch // world
    losses = []
    for x, y in make_batches(steps, global_batch):
        xs, ys = x[rank * per:(rank + 1) * per].to("neuron"), y[rank * per:(rank + 1) * per].to("neuron")
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(xs), ys)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # numpy arrays travel by value (a tensor would be shared memory of a process that exits)
    return {"losses": losses, "params": [p.detach().cpu().numpy() for p in model.parameters()]}


def ddp_train(rank, world, store_path, steps, global_batch):
    """ddp_steps on a "neuron" group of its own."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron")
    return ddp_steps(rank, world, steps, global_batch)


def ddp_device_per_rank(rank, world, store_path, socket, steps, global_batch):
    """ddp_steps with rank r on neuron:r, as torchrun's LOCAL_RANK places ranks, all
    tenants of one neurond with a device per rank: the group spans devices."""
    os.environ["NEURON_SOCKET"] = socket
    torch.neuron.set_device(rank)
    _init(rank, world, store_path, backend="neuron")
    out = ddp_steps(rank, world, steps, global_batch)
    out["device"] = torch.empty(1, device="neuron").device.index
    return out


def barrier_waits(rank, world, store_path):
    """Through the neuron backend alone, chosen by device_id (no backend string):
    rank 0's barrier returns only after rank 1, which comes 1.5 s late, entered it."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend=None, device_id=torch.device("neuron", 0))
    assert dist.get_backend() == "neuron", dist.get_backend()
    dist.barrier()  # both here
    if rank == 1:
        time.sleep(1.5)
    start = time.monotonic()
    dist.barrier()
    return {"seconds": time.monotonic() - start}


def two_daemons(rank, world, store_path, other_socket):
    """Rank 1 uses another neurond (as a rank on another host would): the group
    forms hierarchically (one rank per neurond, gloo between them over loopback);
    all_reduce sums across both, all_to_all_single swaps their blocks; a recv from
    any source (each rank alone on its host: gloo's) takes the other's send and
    names it, both ways."""
    if rank == 1:
        os.environ["NEURON_SOCKET"] = other_socket
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron", timeout_s=60)
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("neuron"))
    t = torch.full((5,), float(rank + 1), device="neuron")
    dist.all_reduce(t)
    swapped = torch.empty(2 * world, device="neuron")
    dist.all_to_all_single(swapped, torch.arange(2 * world, dtype=torch.float32, device="neuron") + 10 * rank)
    any_source = []
    for receiver in range(world):
        if rank == receiver:
            got = torch.zeros(3, device="neuron")
            src = dist.recv(got, tag=3)
            any_source.append([src, got.cpu().tolist()])
        else:
            dist.send(torch.full((3,), 100.0 + rank, device="neuron"), dst=receiver, tag=3)
    return {"backend": type(backend).__name__, "sum": t.cpu().tolist(), "all_to_all": swapped.cpu().tolist(),
            "any_source": any_source}
