"""Rank processes of test_dist_async.py: Work objects of the neuron backend are
ordered on the caller's stream (Work.wait() makes the stream wait on the device,
not the host), checked against gloo doing the same all_reduce on CPU tensors.
"""
import os
import time

import torch
import torch.distributed as dist

from dist_workers import _init


def _busy_chain(n):
    """n dependent matmuls on the current stream: device work that takes a while."""
    a = torch.full((256, 256), 1.0 / 256, device="neuron")
    h = a
    for _ in range(n):
        h = torch.tanh(h @ a)
    return h


def _chain_length(seconds):
    """How many links of _busy_chain keep the device busy for about `seconds`."""
    torch.neuron.synchronize()
    start = time.monotonic()
    _busy_chain(8)
    torch.neuron.synchronize()
    per = max((time.monotonic() - start) / 8, 1e-4)
    return max(8, int(seconds / per))


def ordered_on_stream(rank, world, store_path, blocking):
    """all_reduce(async_op=True) behind a long chain of kernels on the stream: the
    call and (unless NEURON_BLOCKING_WAIT=1) wait() return before it is done; a
    kernel queued after wait() on the same stream sees the reduced tensor."""
    if blocking:
        os.environ["NEURON_BLOCKING_WAIT"] = "1"
    torch.neuron.set_device(0)
    _init(rank, world, store_path)
    x = torch.arange(1031, dtype=torch.float32) * (rank + 1) - 7  # integers: sums are exact
    ref = x.clone()
    dist.all_reduce(ref)  # gloo, on CPU
    n = _chain_length(3.0)
    t = x.to("neuron")
    dist.barrier()  # both ranks start the timed part together
    h = _busy_chain(n)
    t.add_(h.sum() * 0)  # t is produced only after the chain
    work = dist.all_reduce(t, async_op=True)
    done_after_call = work.is_completed()
    work.wait()
    done_after_wait = work.is_completed()
    stream_idle_after_wait = torch.neuron.current_stream().query()
    u = t * 2  # a device op consuming t on the same stream, queued before any host wait
    got = u.cpu()
    deadline = time.monotonic() + 60
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.01)
    fut = work.get_future()
    fut.wait()
    fut_value = fut.value()[0].cpu()
    return {"done_after_call": done_after_call, "done_after_wait": done_after_wait,
            "stream_idle_after_wait": stream_idle_after_wait, "completed_later": work.is_completed(),
            "got": got.numpy(), "ref2": (ref * 2).numpy(), "future": fut_value.numpy(), "ref": ref.numpy(),
            "links": n}


def failure_reaches_stream(rank, world, store_path):
    """Rank 1 exits; rank 0's next all_reduce fails, and a stream waiting for it
    faults instead of waiting for ever: reading t raises, naming rank 1."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron", timeout_s=3)
    t = torch.ones(1000, device="neuron")
    dist.all_reduce(t)
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        # Returns unless the failure is known by then (the host does not wait);
        # reading t waits for the stream, which faults.
        dist.all_reduce(t)
        t.cpu()
    except Exception as e:  # noqa: BLE001 - the error is the result
        msg = str(e)
    else:
        msg = None
    try:  # the stream was reset: it works again
        ok = (torch.ones(3, device="neuron") * 2).cpu().tolist() == [2.0, 2.0, 2.0]
    except Exception as e:  # noqa: BLE001
        ok = repr(e)
    return {"message": msg, "seconds": time.monotonic() - start, "stream_ok": ok}


def destroy_in_flight(rank, world, store_path):
    """The group is destroyed while its all_reduce still waits behind about 2 s of
    kernels on the stream, the tensor's Python object and the Work already gone: the
    backend's worker drops the last reference to that tensor (which takes the GIL)
    while the destroying thread waits for it. Returns how long the destroy took."""
    torch.neuron.set_device(0)
    _init(rank, world, store_path, backend="neuron")
    # The last reference to the backend, dropped below (as a script's local that
    # names it is, at its end: test_dist_two_hosts' torchrun hung so).
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("neuron"))
    n = _chain_length(2.0)
    dist.barrier()
    t = torch.ones(1031, device="neuron")
    t.add_(_busy_chain(n).sum() * 0)
    dist.all_reduce(t, async_op=True)
    del t
    start = time.monotonic()
    dist.destroy_process_group()
    del backend
    return {"destroy_s": time.monotonic() - start}
