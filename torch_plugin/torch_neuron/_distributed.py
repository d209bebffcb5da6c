"""torch.distributed backend "neuron": collectives on neuron tensors, done by neurond.

Registered by torch_neuron's autoload, so ``dist.init_process_group("neuron")``,
``init_process_group("cpu:gloo,neuron:neuron")`` and
``init_process_group(device_id=torch.device("neuron", i))`` work without an import.

On one host (all ranks tenants of one neurond) neurond forms a collective group of
their tenants (the rendezvous through the c10d store hands the ranks a secret it
checks) and moves and reduces their device buffers in device memory.

Across hosts (the ranks' neurond differ: a host is a neurond, named by host name
and socket path) the group is hierarchical (csrc/dist/hierarchical.h): a neuron
group per host as above, and a gloo group (TCP, from the same store) of each
host's first rank, which exchanges host staging copies, and a gloo group of every
rank, for what goes from one rank to another (send/recv, all_to_all). Its calls
return at once, as on one host: a worker thread per group runs their stages in
issue order and the Work is ordered on the caller's stream (see hierarchical.h);
gloo picks its network interface as usual (GLOO_SOCKET_IFNAME).
"""
import torch
import torch.distributed as dist

BACKEND = "neuron"


def _hosts(store, rank, size):
    """The group ranks of each neurond, in the order of their first rank."""
    from . import _C

    store.set(f"neuron/where/{rank}", _C.daemon_location())
    where = [store.get(f"neuron/where/{r}").decode() for r in range(size)]
    hosts = {}
    for r, w in enumerate(where):
        hosts.setdefault(w, []).append(r)
    return list(hosts.values())


def _create(dist_opts, backend_opts):
    from . import _C  # the same _C.so as torch.ops loaded, imported as a module for its classes

    store, rank, size, timeout = dist_opts.store, dist_opts.group_rank, dist_opts.group_size, dist_opts.timeout
    hosts = _hosts(store, rank, size)
    if len(hosts) == 1:
        return _C.ProcessGroupNeuron(store, rank, size, timeout)
    mine = next(i for i, h in enumerate(hosts) if rank in h)
    intra = _C.ProcessGroupNeuron(dist.PrefixStore(f"neuron/host/{mine}/", store), hosts[mine].index(rank),
                                  len(hosts[mine]), timeout, global_ranks=hosts[mine])
    leaders = None
    if hosts[mine][0] == rank:
        leaders = dist.ProcessGroupGloo(dist.PrefixStore("neuron/leaders/", store), mine, len(hosts), timeout)
    everyone = dist.ProcessGroupGloo(dist.PrefixStore("neuron/everyone/", store), rank, size, timeout)
    return _C.ProcessGroupHierarchical(rank, size, hosts, intra, leaders, everyone)


def register():
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["neuron"])
