"""Rank processes of test_dist_two_hosts.py (started by dist_workers.spawn).

A "host" is a network namespace with its own neurond: each rank enters its host's
namespace (setns) before it opens a socket, talks to that host's neurond, and
rendezvouses through a TCPStore that rank 0 serves on its veth address. Rank r
is on host r % 2, so the hosts' ranks interleave (the backend must put each
rank's data where its group rank says, not where its host is).

The group is "cpu:gloo,neuron:neuron": the gloo half on CPU copies is the
reference for the neuron half, which runs hierarchically (neurond within a
host, gloo between the hosts' first ranks).
"""
import ctypes
import os
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_workers  # noqa: E402

CLONE_NEWNET = 0x40000000


def _enter_netns(name):
    """This thread (the process's only one that opens sockets, and the parent of
    the backend's threads) moves to network namespace `name`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _join(rank, world, host, timeout_s=120):
    """Enters the rank's host (namespace, neurond, gloo's interface) and the group."""
    if host.get("netns"):
        _enter_netns(host["netns"])
    os.environ["NEURON_SOCKET"] = host["socket"]
    os.environ["GLOO_SOCKET_IFNAME"] = host["ifname"]
    torch.neuron.set_device(0)
    store = dist.TCPStore(host["store_addr"], host["store_port"], world, is_master=(rank == 0),
                          timeout=timedelta(seconds=timeout_s))
    dist.init_process_group("cpu:gloo,neuron:neuron", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))


def _cases():
    cases = []
    for dt in dist_workers.DTYPES:
        for red in ("sum", "avg", "max", "min", "product"):
            cases.append((f"all_reduce_{red}-{dt}-(3, 5)", f"all_reduce_{red}", dt, (3, 5), False))
        cases.append((f"all_reduce_sum-{dt}-noncontig", "all_reduce_sum", dt, (4, 6), True))
        for op in ("broadcast", "all_gather", "all_gather_into_tensor", "reduce"):
            cases.append((f"{op}-{dt}-(7,)", op, dt, (7,), False))
            cases.append((f"{op}-{dt}-noncontig", op, dt, (3, 4), True))
        for red in ("sum", "avg", "max"):
            cases.append((f"reduce_scatter_{red}-{dt}-(5,)", f"reduce_scatter_{red}", dt, (5,), False))
    cases.append(("all_reduce_sum-f32-(1031,)", "all_reduce_sum", "f32", (1031,), False))
    return cases


CASES = _cases()


def _broadcast_from_every_root(rank, world):
    """broadcast from each rank (roots on both hosts) equals that rank's data."""
    for root in range(world):
        t = dist_workers._data(100 + root if rank == root else 200 + rank, (9,), torch.float32).to("neuron")
        dist.broadcast(t, src=root)
        dist_workers._check(t, dist_workers._data(100 + root, (9,), torch.float32), f"broadcast from {root}")


def _unsupported(rank, world):
    """An op that does not run across hosts yet raises at once, naming it; the
    group still works after."""
    inp = torch.arange(world * 2, dtype=torch.float32, device="neuron")
    try:
        dist.all_to_all_single(torch.empty_like(inp), inp)
    except Exception as e:  # noqa: BLE001 - the error is the result
        msg, kind = str(e), type(e).__name__
    else:
        msg, kind = None, None
    t = torch.ones(3, device="neuron")
    dist.all_reduce(t)
    after = t.cpu().tolist()
    return {"message": msg, "type": kind, "all_reduce_after": after}


def two_hosts(rank, world, _store_path, hosts, steps, global_batch, fsdp_steps, fsdp_batch):
    """Everything the test checks, in one process per rank (starting 4 ranks costs
    more than the checks): the collective cases, broadcast from every root, an
    unsupported op, a barrier, DDP training of the MLP and FSDP2 training of the
    tiny LM (dist_parallel_workers.fsdp2_steps)."""
    host = hosts[rank % len(hosts)]
    _join(rank, world, host)
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("neuron"))
    failures = {}
    for i, (name, op, dt, shape, nc) in enumerate(CASES):
        try:
            dist_workers._one_case(rank, world, i, op, dist_workers.DTYPES[dt], shape, nc, name)
        except Exception:
            failures[name] = traceback.format_exc()
    try:
        _broadcast_from_every_root(rank, world)
    except Exception:
        failures["broadcast from every root"] = traceback.format_exc()
    unsupported = _unsupported(rank, world)
    neuron_pg = dist.new_group(backend="neuron")
    barrier_s = _late_barrier(rank, world, neuron_pg)
    out = dist_workers.ddp_steps(rank, world, steps, global_batch, process_group=neuron_pg)
    from dist_parallel_workers import fsdp2_steps

    fsdp = fsdp2_steps(rank, world, fsdp_steps, fsdp_batch)
    return {"failures": failures, "unsupported": unsupported, "backend": type(backend).__name__,
            "barrier_s": barrier_s, **out, "fsdp_losses": fsdp["losses"], "fsdp_params": fsdp["params"]}


def _late_barrier(rank, world, pg):
    """The neuron group's barrier: rank 0 leaves it only after the last rank (on the
    other host), which comes 1.5 s late, entered it."""
    dist.barrier(group=pg)
    if rank == world - 1:
        time.sleep(1.5)
    start = time.monotonic()
    dist.barrier(group=pg)
    return time.monotonic() - start


def rank_dies(rank, world, _store_path, hosts):
    """The last rank (on host B) exits after a first all_reduce; the others' next
    all_reduce must fail within the group's timeout (5 s) plus teardown, not hang."""
    host = hosts[rank % len(hosts)]
    _join(rank, world, host, timeout_s=5)
    t = torch.ones(1000, device="neuron")
    dist.all_reduce(t)  # everyone is there once
    torch.neuron.synchronize()
    # Rank 3 leaves only when every rank's first all_reduce has returned (else a
    # peer's gloo stage of that one sees the connection close).
    store = dist.distributed_c10d._get_default_store()
    store.set(f"first-done-{rank}", "1")
    store.wait([f"first-done-{r}" for r in range(world)], timedelta(seconds=60))
    if rank == world - 1:
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"message": str(e), "type": type(e).__name__, "seconds": time.monotonic() - start}
    return {"message": None}
