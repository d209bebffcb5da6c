"""Rank processes of test_dist_p2p.py: send/recv, batch_isend_irecv and all_to_all
with uneven splits on the neuron backend (done by neurond, device memory to device
memory), each checked against the same exchange through gloo on CPU tensors in the
same process group ("cpu:gloo,neuron:neuron") or, where gloo has no such call, a
CPU computation from the seeds every rank knows.
"""
import time
import traceback

import torch
import torch.distributed as dist

from dist_workers import DTYPES, _check, _data, _init, _noncontig


def _cases(rank, world, fn, dtypes=DTYPES):
    failures = {}
    for i, (dt, dtype) in enumerate(dtypes.items()):
        try:
            fn(rank, world, i, dtype)
        except Exception:
            failures[f"{fn.__name__}-{dt}"] = traceback.format_exc()
    return failures


def _send_recv(rank, world, i, dtype):
    """Blocking send/recv 0 -> 1, then 1 -> 0 into a non-contiguous tensor; gloo does the same on CPU."""
    a = _data(100 * i + 1, (7,), dtype)
    b = _data(100 * i + 2, (3, 5), dtype)
    if rank == 0:
        dist.send(a.to("neuron"), dst=1)
        dist.send(a, dst=1)
        got = _noncontig(torch.zeros((3, 5), dtype=dtype, device="neuron"))
        dist.recv(got, src=1, tag=5)
        ref = torch.zeros((3, 5), dtype=dtype)
        dist.recv(ref, src=1, tag=5)
        _check(got, ref, "recv 1 -> 0")
    else:
        got = torch.zeros(7, dtype=dtype, device="neuron")
        dist.recv(got, src=0)
        ref = torch.zeros(7, dtype=dtype)
        dist.recv(ref, src=0)
        _check(got, ref, "recv 0 -> 1")
        dist.send(b.t().contiguous().t().to("neuron"), dst=0, tag=5)  # a transposed (non-contiguous) source
        dist.send(b, dst=0, tag=5)


def _isend_irecv(rank, world, i, dtype):
    """isend/irecv return Works; the data is there after wait()."""
    a = _data(200 * i + rank, (1031,), dtype)
    if rank == 0:
        w = dist.isend(a.to("neuron"), dst=1, tag=3)
        w.wait()
    else:
        got = torch.zeros(1031, dtype=dtype, device="neuron")
        w = dist.irecv(got, src=0, tag=3)
        w.wait()
        _check(got, _data(200 * i, (1031,), dtype), "irecv")


def _batch_ring(rank, world, i, dtype):
    """Every rank sends to the next and receives from the previous at once (a ring
    that a one-by-one in-order backend would deadlock on), plus two tagged sends
    whose receives are posted in the other order: tags pick the match."""
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    mine = _data(300 * i + rank, (5, 2), dtype).to("neuron")
    from_prev = torch.zeros((5, 2), dtype=dtype, device="neuron")
    ops = [dist.P2POp(dist.isend, mine, nxt), dist.P2POp(dist.irecv, from_prev, prv)]
    x = _data(300 * i + 50, (4,), dtype)
    y = _data(300 * i + 60, (6,), dtype)
    got_x = torch.zeros(4, dtype=dtype, device="neuron")
    got_y = torch.zeros(6, dtype=dtype, device="neuron")
    if rank == 0:
        ops += [dist.P2POp(dist.isend, x.to("neuron"), 1, tag=11), dist.P2POp(dist.isend, y.to("neuron"), 1, tag=22)]
    else:
        ops += [dist.P2POp(dist.irecv, got_y, 0, tag=22), dist.P2POp(dist.irecv, got_x, 0, tag=11)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    # gloo, on CPU copies, as the reference of the ring
    ref = torch.zeros((5, 2), dtype=dtype)
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, mine.cpu(), nxt), dist.P2POp(dist.irecv, ref, prv)]):
        w.wait()
    _check(from_prev, ref, "ring")
    if rank == 1:
        _check(got_x, x, "tag 11")
        _check(got_y, y, "tag 22")


# Rows rank r sends to rank j (rank 0 sends none to rank 1 in the second case).
SPLITS = [[[1, 3], [2, 2]], [[2, 0], [1, 4]]]


def _all_to_all_uneven(rank, world, i, dtype):
    for k, splits in enumerate(SPLITS):
        ins = splits[rank]
        outs = [splits[j][rank] for j in range(world)]
        inp = _data(400 * i + 10 * k + rank, (sum(ins), 3), dtype)
        out = torch.full((sum(outs), 3), 7, dtype=dtype, device="neuron")
        dist.all_to_all_single(out, inp.to("neuron"), output_split_sizes=outs, input_split_sizes=ins)
        ref = torch.zeros((sum(outs), 3), dtype=dtype)
        dist.all_to_all_single(ref, inp, output_split_sizes=outs, input_split_sizes=ins)
        _check(out, ref, f"splits {splits}")
        # A non-contiguous output (its rows are the columns of a bigger tensor)
        outnc = torch.zeros((3, sum(outs)), dtype=dtype, device="neuron").t()
        dist.all_to_all_single(outnc, inp.to("neuron"), output_split_sizes=outs, input_split_sizes=ins)
        _check(outnc, ref, f"splits {splits}, non-contiguous output")


def _all_to_all_list(rank, world, i, dtype):
    """Tensors of different sizes per peer; the reference is built from every rank's seeds."""
    def inputs_of(r):
        return [_data(500 * i + 10 * r + j, (r + 2 * j + 1, 2), dtype) for j in range(world)]

    outs = [torch.zeros((j + 2 * rank + 1, 2), dtype=dtype, device="neuron") for j in range(world)]
    dist.all_to_all(outs, [t.to("neuron") for t in inputs_of(rank)])
    for j in range(world):
        _check(outs[j], inputs_of(j)[rank], f"from rank {j}")


def p2p(rank, world, store_path):
    torch.neuron.set_device(0)
    _init(rank, world, store_path)
    failures = {}
    for fn in (_send_recv, _isend_irecv, _batch_ring, _all_to_all_uneven, _all_to_all_list):
        failures.update(_cases(rank, world, fn))
    return {"failures": failures}


def p2p_errors(rank, world, store_path, mode):
    """mode "size": rank 1 receives 8 elements where rank 0 sends 4; "missing":
    rank 1 never posts the recv. Both ranks report the error they got."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron", timeout_s=3)
    start = time.monotonic()
    try:
        if rank == 0:
            dist.send(torch.ones(4, device="neuron"), dst=1)
        elif mode == "size":
            dist.recv(torch.zeros(8, device="neuron"), src=0)
        else:
            time.sleep(6)
            return {"message": None}
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"message": str(e), "type": type(e).__name__, "seconds": time.monotonic() - start}
    return {"message": None}


def recv_any(rank, world, store_path):
    """Ranks 1.. each send rank 0 a message whose contents name the sender; rank 0
    receives them with recv(src=None) (and irecv(src=None) for a tagged one) on
    neuron tensors, then the same through gloo on CPU tensors. Returns, per
    receive, the rank the call reported and the message's contents."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path)
    out = {"neuron": [], "gloo": [], "tagged": None, "tagged_gloo": None}
    for dev, key in (("neuron", "neuron"), ("cpu", "gloo")):
        dist.barrier()
        if rank == 0:
            for _ in range(world - 1):
                t = torch.zeros(5, dtype=torch.int64, device=dev)
                src = dist.recv(t)  # from whoever sends first
                out[key].append((src, t.cpu().tolist()))
            t = torch.zeros(3, dtype=torch.float32, device=dev)
            w = dist.irecv(t, tag=7)
            w.wait()
            out["tagged" if dev == "neuron" else "tagged_gloo"] = (w._source_rank(), t.cpu().tolist())
        else:
            dist.send(torch.full((5,), 10 * rank + 1, dtype=torch.int64, device=dev), dst=0)
            if rank == world - 1:
                dist.send(torch.full((3,), 0.5 + rank, dtype=torch.float32, device=dev), dst=0, tag=7)
        dist.barrier()
    return out
