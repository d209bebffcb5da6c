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
        for op in ("gather", "scatter", "list_reduce_scatter_sum", "all_to_all"):
            cases.append((f"{op}-{dt}-(7,)", op, dt, (7,), False))
            cases.append((f"{op}-{dt}-noncontig", op, dt, (3, 4), True))
        cases.append((f"list_reduce_scatter_avg-{dt}-(5,)", "list_reduce_scatter_avg", dt, (5,), False))
        cases.append((f"all_to_all_single-{dt}", "all_to_all_single", dt, (8, 3), False))
        cases.append((f"all_to_all_single_uneven-{dt}", "all_to_all_single_uneven", dt, (8, 3), False))
    cases.append(("all_reduce_sum-f32-(1031,)", "all_reduce_sum", "f32", (1031,), False))
    return cases


CASES = _cases()


def _broadcast_from_every_root(rank, world):
    """broadcast from each rank (roots on both hosts) equals that rank's data."""
    for root in range(world):
        t = dist_workers._data(100 + root if rank == root else 200 + rank, (9,), torch.float32).to("neuron")
        dist.broadcast(t, src=root)
        dist_workers._check(t, dist_workers._data(100 + root, (9,), torch.float32), f"broadcast from {root}")


def _every_root(rank, world):
    """gather to and scatter from each rank (roots that lead their host and roots
    that do not, on both hosts), against gloo on CPU copies; failures by name."""
    failures = {}
    for root in range(world):
        mine = dist_workers._data(300 + rank, (5,), torch.float32)
        try:
            outs = [torch.zeros(5, device="neuron") for _ in range(world)] if rank == root else None
            dist.gather(mine.to("neuron"), outs, dst=root)
            refs = [torch.zeros(5) for _ in range(world)] if rank == root else None
            dist.gather(mine, refs, dst=root)
            if rank == root:
                for r in range(world):
                    dist_workers._check(outs[r], refs[r], f"gather to {root}, rank {r}'s part")
        except Exception:
            failures[f"gather to {root}"] = traceback.format_exc()
        try:
            chunks = [dist_workers._data(400 + 10 * root + r, (2, 3), torch.float32) for r in range(world)]
            out = torch.zeros(2, 3, device="neuron")
            dist.scatter(out, [c.to("neuron") for c in chunks] if rank == root else None, src=root)
            ref = torch.zeros(2, 3)
            dist.scatter(ref, chunks if rank == root else None, src=root)
            dist_workers._check(out, ref, f"scatter from {root}")
        except Exception:
            failures[f"scatter from {root}"] = traceback.format_exc()
    return failures


def _point_to_point(rank, world):
    """send/recv between every ordered pair of ranks (same host and across hosts),
    isend/irecv both ways at once, and batch_isend_irecv rings within and across
    hosts, each against the same calls through gloo on CPU copies; failures by name."""
    failures = {}

    def case(name, fn):
        try:
            fn()
        except Exception:
            failures[name] = traceback.format_exc()

    def pairs():
        # A wrong value is noted and the pairs go on: a rank that stopped here would
        # leave its later peers waiting.
        wrong = []
        for src in range(world):
            for dst in range(world):
                if src == dst or rank not in (src, dst):
                    continue
                for dtype in (torch.float32, torch.bfloat16, torch.int64):
                    data = dist_workers._data(500 + 10 * src + dst, (3, 4), dtype)
                    if rank == src:
                        dist.send(data.to("neuron"), dst=dst, tag=7)
                        dist.send(data, dst=dst, tag=7)
                    else:
                        got = dist_workers._noncontig(torch.zeros((3, 4), dtype=dtype, device="neuron"))
                        dist.recv(got, src=src, tag=7)
                        ref = torch.zeros((3, 4), dtype=dtype)
                        dist.recv(ref, src=src, tag=7)
                        try:
                            dist_workers._check(got, ref, f"{src} -> {dst} {dtype}")
                        except AssertionError as e:
                            wrong.append(str(e))
        assert not wrong, "\n".join(wrong)

    def both_ways():
        # Each rank posts its send before its recv, to the rank across the host
        # boundary (r ^ 1), and waits only after both: neither may wait for the other.
        peer = rank ^ 1
        if peer >= world:
            return
        mine = dist_workers._data(600 + rank, (1000,), torch.float32)
        got = torch.zeros(1000, device="neuron")
        works = [dist.isend(mine.to("neuron"), dst=peer), dist.irecv(got, src=peer)]
        for w in works:
            w.wait()
        ref = torch.zeros(1000)
        works = [dist.isend(mine, dst=peer), dist.irecv(ref, src=peer)]
        for w in works:
            w.wait()
        dist_workers._check(got, ref, "isend/irecv both ways")

    def rings():
        # step 1: every neighbour is on the other host; step 2: on the same host.
        for steps in ((1,), (2,), (1, 2)):
            outs, refs, ops, ref_ops = [], [], [], []
            for s in steps:
                mine = dist_workers._data(700 + 10 * rank + s, (6,), torch.float32)
                outs.append(torch.zeros(6, device="neuron"))
                refs.append(torch.zeros(6))
                ops += [dist.P2POp(dist.isend, mine.to("neuron"), (rank + s) % world),
                        dist.P2POp(dist.irecv, outs[-1], (rank - s) % world)]
                ref_ops += [dist.P2POp(dist.isend, mine, (rank + s) % world),
                            dist.P2POp(dist.irecv, refs[-1], (rank - s) % world)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            for w in dist.batch_isend_irecv(ref_ops):
                w.wait()
            for s, o, r in zip(steps, outs, refs):
                dist_workers._check(o, r, f"batch_isend_irecv ring steps {steps}, step {s}")

    case("send/recv between every pair", pairs)
    case("isend/irecv both ways", both_ways)
    case("batch_isend_irecv rings", rings)
    return failures


def _unsupported(rank, world):
    """An op that does not run across hosts raises at once, naming it; the group
    still works after."""
    try:
        dist.recv(torch.empty(3, device="neuron"))  # from any source
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
    failures.update(_every_root(rank, world))
    failures.update(_point_to_point(rank, world))
    unsupported = _unsupported(rank, world)
    neuron_pg = dist.new_group(backend="neuron")
    barrier_s = _late_barrier(rank, world, neuron_pg)
    out = dist_workers.ddp_steps(rank, world, steps, global_batch, process_group=neuron_pg)
    from dist_parallel_workers import fsdp2_steps

    fsdp = fsdp2_steps(rank, world, fsdp_steps, fsdp_batch)
    return {"failures": failures, "unsupported": unsupported, "backend": type(backend).__name__,
            "barrier_s": barrier_s, **out, "fsdp_losses": fsdp["losses"], "fsdp_params": fsdp["params"]}


def three_ranks(rank, world, _store_path, hosts):
    """3 ranks on 2 hosts (host A: ranks 0 and 2, host B: rank 1): the hosts' blocks
    differ in size, so gather, scatter and all_to_all pad or split them unevenly.
    The f32 cases of the ops that route data, every root, every pair; failures by name."""
    _join(rank, world, hosts[rank % len(hosts)])
    failures = {}
    for i, (name, op, dt, shape, nc) in enumerate(CASES):
        if dt != "f32" or not op.startswith(("gather", "scatter", "all_to_all", "list_reduce_scatter", "all_gather")):
            continue
        try:
            dist_workers._one_case(rank, world, i, op, torch.float32, shape, nc, name)
        except Exception:
            failures[name] = traceback.format_exc()
    failures.update(_every_root(rank, world))
    failures.update(_point_to_point(rank, world))
    try:
        _any_source_alone(rank, world)
    except Exception:
        failures["recv from any source on a rank alone on its host"] = traceback.format_exc()
    return {"failures": failures}


def _any_source_alone(rank, world):
    """Rank 1, alone on host B, receives from any source (dist.recv without src)
    once from each other rank (both on host A), a plain and a non-contiguous
    tensor: each holds its sender's data and dist.recv returns that sender, as
    gloo's recv from any source does on CPU copies."""
    if rank != 1:
        data = dist_workers._data(900 + rank, (4, 5), torch.float32)
        dist.send(data.to("neuron"), dst=1, tag=5)
        dist.send(data, dst=1, tag=5)
        return
    got = {}
    for i in range(world - 1):
        t = torch.zeros((4, 5), device="neuron")
        t = dist_workers._noncontig(t) if i else t
        src = dist.recv(t, tag=5)
        got[src] = t.cpu()
    ref = {}
    for _ in range(world - 1):
        r = torch.zeros((4, 5))
        ref[dist.recv(r, tag=5)] = r
    assert sorted(got) == sorted(ref) == [0, 2], f"sources: neuron {sorted(got)}, gloo {sorted(ref)}"
    for src in got:
        dist_workers._check(got[src], ref[src], f"recv from any source: rank {src}'s send")
        dist_workers._check(got[src], dist_workers._data(900 + src, (4, 5), torch.float32), f"rank {src}'s data")


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
        out = {"message": str(e), "type": type(e).__name__, "seconds": time.monotonic() - start}
    else:
        return {"message": None}
    # The next one, asynchronous: once it is known to have failed, wait() raises
    # its error (the host is not left to find it on the stream).
    work = dist.all_reduce(torch.ones(10, device="neuron"), async_op=True)
    deadline = time.monotonic() + 60
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        work.wait()
        out["wait_message"] = None
    except Exception as e:  # noqa: BLE001 - the error is the result
        out["wait_message"] = str(e)
    return out


def _issue_all(rank, world, dev):
    """Six collectives of different kinds on `dev` ("neuron": async_op=True, waited
    later in reverse order; "cpu": gloo, one by one); their results by name."""
    f32 = torch.float32
    a = dist_workers._data(800 + rank, (257,), f32).to(dev)
    b = dist_workers._data(810 + rank, (33,), f32).to(dev)
    g_in = dist_workers._data(820 + rank, (9,), f32).to(dev)
    g_out = torch.zeros(9 * world, device=dev)
    rs_in = dist_workers._data(830 + rank, (5 * world,), f32).to(dev)
    rs_out = torch.zeros(5, device=dev)
    a2a_in = dist_workers._data(840 + rank, (2 * world, 3), f32).to(dev)
    a2a_out = torch.zeros(2 * world, 3, device=dev)
    red = dist_workers._data(850 + rank, (11,), f32).to(dev)
    is_async = dev != "cpu"
    works = [dist.all_reduce(a, async_op=is_async), dist.broadcast(b, src=world - 1, async_op=is_async),
             dist.all_gather_into_tensor(g_out, g_in, async_op=is_async),
             dist.reduce_scatter_tensor(rs_out, rs_in, async_op=is_async),
             dist.all_to_all_single(a2a_out, a2a_in, async_op=is_async),
             dist.reduce(red, dst=1, op=dist.ReduceOp.MAX, async_op=is_async)]
    for w in reversed(works if is_async else []):
        w.wait()
    out = {"all_reduce": a, "broadcast": b, "all_gather_into_tensor": g_out, "reduce_scatter_tensor": rs_out,
           "all_to_all_single": a2a_out}
    if rank == 1:
        out["reduce"] = red
    # A device op after wait() on the caller's stream, read after it: it sees the results.
    return {k: (v * 2).cpu() for k, v in out.items()}


def async_ops(rank, world, _store_path, hosts):
    """Collectives across hosts return at once and are ordered on the caller's
    stream: (1) six issued back to back and waited later in reverse order equal
    the same calls through gloo; (2) ranks 0-2's all_reduce cannot complete before
    rank 3 joins, and rank 3 joins only once the others' call and wait() returned
    (and said the work was not complete): if wait() blocked the host, rank 3 would
    wait 60 s for them in vain; (3) the same with each stream of the pool current."""
    _join(rank, world, hosts[rank % len(hosts)])
    failures = {}
    got, ref = _issue_all(rank, world, "neuron"), _issue_all(rank, world, "cpu")
    for k in ref:
        try:
            dist_workers._check(got[k], ref[k], f"async {k}")
        except AssertionError as e:
            failures[f"back to back: {k}"] = str(e)
    store = dist.distributed_c10d._get_default_store()
    out = {"failures": failures}
    # The current stream, then 8 new ones: every stream of the pool (handed out in
    # turn), so none may be the one the backend runs the device stages on (a
    # wait() queued on it ahead of those stages would wait for ever).
    streams = [("current", torch.neuron.current_stream())]
    streams += [(f"pool {i}", torch.neuron.Stream()) for i in range(8)]
    out["streams"] = [k for k, _ in streams]
    for stream_kind, stream in streams:
        with torch.neuron.stream(stream):
            t = torch.full((1031,), float(rank + 1), device="neuron")
            if rank < world - 1:
                work = dist.all_reduce(t, async_op=True)
                done_after_call = work.is_completed()
                start = time.monotonic()
                work.wait()
                wait_s = time.monotonic() - start
                done_after_wait = work.is_completed()
                u = t * 2  # queued before rank 3 joined: ordered after the all_reduce on the device
                store.set(f"waited-{stream_kind}-{rank}", "1")
                out[stream_kind] = {"done_after_call": done_after_call, "done_after_wait": done_after_wait,
                                    "wait_s": wait_s}
            else:
                start = time.monotonic()
                try:
                    store.wait([f"waited-{stream_kind}-{r}" for r in range(world - 1)], timedelta(seconds=60))
                    joined_after = True
                except Exception:  # noqa: BLE001 - a peer's wait() blocked: join so it can finish
                    joined_after = False
                out[stream_kind] = {"others_returned": joined_after, "waited_s": time.monotonic() - start}
                dist.all_reduce(t)
                u = t * 2
            out[stream_kind]["got"] = u.cpu().tolist()[:3]
    out["expect"] = [2.0 * sum(range(1, world + 1))] * 3
    out["traffic"] = _between_hosts_traffic(rank, world, hosts[rank % len(hosts)]["ifname"])
    return out


def _tx_bytes(ifname):
    """Bytes this rank's host (its network namespace: /proc/self/net is the main
    thread's, which entered it) sent on the veth to the other host."""
    with open("/proc/self/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == ifname:
                return int(rest.split()[8])
    raise RuntimeError(f"{ifname} not in /proc/self/net/dev")


def _between_hosts_traffic(rank, world, ifname):
    """What the veth carried out of this host during an all_reduce of a 1 MiB
    float32 tensor, and during a reduce_scatter_tensor of the same input (each
    rank keeps a quarter), on every rank; the gloo barriers around each (a few
    hundred bytes) separate them. Only the hosts' first ranks (0, 1) send."""
    n = 64 * 1024
    x = dist_workers._data(990 + rank, (world * n,), torch.float32).to("neuron")
    out, rs_out = {}, torch.empty(n, device="neuron")
    for name, call in (("all_reduce", lambda: dist.all_reduce(x.clone())),
                       ("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(rs_out, x))):
        call()  # once first: connections made, buffers sized
        torch.neuron.synchronize()
        dist.barrier()
        before = _tx_bytes(ifname)
        call()
        torch.neuron.synchronize()
        dist.barrier()
        out[name] = _tx_bytes(ifname) - before
    ref_in, ref_out = x.cpu(), torch.empty(n)
    dist.reduce_scatter_tensor(ref_out, ref_in)
    dist_workers._check(rs_out, ref_out, "reduce_scatter_tensor of 1 MiB")
    return out
