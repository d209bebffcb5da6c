"""torch.distributed backend "neuron": collectives on neuron tensors, done by neurond.

Registered by torch_neuron's autoload, so ``dist.init_process_group("neuron")``,
``init_process_group("cpu:gloo,neuron:neuron")`` and
``init_process_group(device_id=torch.device("neuron", i))`` work without an import.
All ranks must be tenants of one neurond (one host): neurond forms a collective
group of their tenants (the rendezvous through the c10d store hands the ranks a
secret it checks) and moves and reduces their device buffers in device memory.
"""
import torch
import torch.distributed as dist

BACKEND = "neuron"


def _create(dist_opts, backend_opts):
    from . import _C  # the same _C.so as torch.ops loaded, imported as a module for its class

    return _C.ProcessGroupNeuron(dist_opts.store, dist_opts.group_rank, dist_opts.group_size, dist_opts.timeout)


def register():
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["neuron"])
