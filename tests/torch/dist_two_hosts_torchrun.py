"""A rank started by torchrun in test_dist_two_hosts.py (the README's two-host launch
line): all_reduce and broadcast on the neuron group, against values every rank
computes alone; prints one RESULT line of JSON."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    torch.neuron.set_device(0)
    # A bounded timeout: a rank whose peer is gone raises (and its torchrun exits)
    # instead of waiting for the default 30 minutes.
    dist.init_process_group("neuron", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("neuron"))
    t = torch.arange(6, dtype=torch.float32, device="neuron") * (rank + 1)
    dist.all_reduce(t)
    summed = t.cpu().tolist()
    b = torch.full((3,), float(rank * 10), device="neuron")
    dist.broadcast(b, src=world - 1)
    out = {"rank": rank, "world": world, "socket": os.environ.get("NEURON_SOCKET"), "backend": type(backend).__name__,
           "sum": summed, "broadcast": b.cpu().tolist()}
    # One write(2) of the whole line: the host's two ranks share the log file
    # (O_APPEND), and print() under PYTHONUNBUFFERED writes the text and its
    # newline separately, so two ranks' lines could run into one.
    os.write(1, ("RESULT " + json.dumps(out) + "\n").encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
