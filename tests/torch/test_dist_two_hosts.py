"""torch.distributed backend "neuron" across two hosts (issue 16 items 3 and 4).

Two hosts are simulated as two network namespaces joined by a veth pair, each with
its own neurond and 2 ranks (4 in all, spawned with torch.multiprocessing; each
rank enters its namespace, dist_two_hosts_workers.py). They rendezvous through a
TCPStore on host A's veth address, and gloo (the reference, and the backend's
stage between hosts) uses the veth. The collectives are checked against gloo on
CPU copies in the same group, and DDP training (an MLP) and FSDP2 training (the
tiny LM) on the 4 ranks against one process on the global batch.

Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) for the namespaces; skips with
the reason otherwise.
"""
import os
import shutil
import subprocess

import pytest
import torch

from conftest import start_daemon, stop_daemon
import dist_two_hosts_workers
from dist_parallel_reference import lm_train_single
from dist_reference import train_single
from dist_workers import spawn

WORLD = 4
ADDRS = ("10.231.0.1", "10.231.0.2")
STORE_PORT = 29517  # in host A's fresh namespace: nothing else listens there
STEPS, BATCH = 6, 16
FSDP_STEPS, FSDP_BATCH = 4, 8
pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")


def _ip(*args):
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _make_hosts(tag):
    """Two namespaces joined by a veth pair, addressed and up; their names."""
    ns, veth = [f"ntwo{tag}a", f"ntwo{tag}b"], [f"vtwo{tag}a", f"vtwo{tag}b"]
    made = []
    try:
        _ip("netns", "add", ns[0])
    except subprocess.CalledProcessError as e:
        pytest.skip(f"cannot create a network namespace (needs root or CAP_NET_ADMIN): {e.stderr.strip()}")
    made.append(ns[0])
    try:
        _ip("netns", "add", ns[1])
        made.append(ns[1])
        _ip("link", "add", veth[0], "netns", ns[0], "type", "veth", "peer", "name", veth[1], "netns", ns[1])
        for i in (0, 1):
            _ip("-n", ns[i], "addr", "add", f"{ADDRS[i]}/24", "dev", veth[i])
            _ip("-n", ns[i], "link", "set", veth[i], "up")
            _ip("-n", ns[i], "link", "set", "lo", "up")
    except BaseException:
        _remove(made)
        raise
    return ns, veth


def _remove(namespaces):
    for n in namespaces:  # the veth pair goes with them
        subprocess.run(["ip", "netns", "del", n], capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def results():
    if shutil.which("ip") is None:
        pytest.skip("iproute2's ip is not installed (tools/setup/install-deps installs it)")
    ns, veth = _make_hosts(os.getpid() % 100000)
    daemons = []
    try:
        for n in ns:
            daemons.append(start_daemon(hbm_mib=1024, prefix=("ip", "netns", "exec", n)))
        hosts = [{"netns": ns[i], "socket": daemons[i][1], "ifname": veth[i], "store_addr": ADDRS[0],
                  "store_port": STORE_PORT} for i in (0, 1)]
        res = spawn(dist_two_hosts_workers.two_hosts, hosts, STEPS, BATCH, FSDP_STEPS, FSDP_BATCH, world=WORLD,
                    timeout=480)
    finally:
        for p, _, d in daemons:
            stop_daemon(p, d)
        _remove(ns)
    for r in range(WORLD):
        assert r in res, f"rank {r} gave no result (hung or crashed)"
        assert "error" not in res[r], f"rank {r} failed outside a case:\n{res[r]['error']}"
    return res


def test_the_group_is_hierarchical(results):
    for r in range(WORLD):
        assert results[r]["backend"] == "ProcessGroupHierarchical", results[r]["backend"]


@pytest.mark.parametrize("case", [c[0] for c in dist_two_hosts_workers.CASES] + ["broadcast from every root"])
def test_collective_matches_gloo(results, case):
    for r in range(WORLD):
        failure = results[r]["failures"].get(case)
        assert failure is None, f"rank {r}, {case}:\n{failure}"


def test_unsupported_op_is_refused_by_name(results):
    for r in range(WORLD):
        u = results[r]["unsupported"]
        assert u["message"] is not None, f"rank {r}: all_to_all_single across hosts did not raise"
        assert u["type"] == "DistBackendError", u
        assert "all_to_all_single is not supported across hosts yet" in u["message"], u["message"]
        assert u["all_reduce_after"] == [float(WORLD)] * 3, f"rank {r}: the group after the refusal: {u}"


def test_barrier_waits_for_the_other_host(results):
    assert results[0]["barrier_s"] > 1.0, f"rank 0 left the barrier after {results[0]['barrier_s']:.2f} s"


def test_ddp_matches_single_process(results):
    ref_losses, ref_params = train_single(STEPS, BATCH)
    # DDP averages gradients: the mean of the ranks' losses is the global batch's loss.
    losses = [sum(results[r]["losses"][i] for r in range(WORLD)) / WORLD for i in range(STEPS)]
    for i, (a, b) in enumerate(zip(losses, ref_losses)):
        assert abs(a - b) < 1e-4, f"step {i}: DDP loss {a} vs single-process {b}"
    for r in range(WORLD):
        for p, q in zip(results[r]["params"], ref_params):
            torch.testing.assert_close(torch.from_numpy(p), q, rtol=1e-4, atol=1e-5)


def test_fsdp2_matches_single_process(results):
    """fully_shard of the tiny LM over a 1-d mesh of the 4 ranks (all_gather_into_tensor
    and reduce_scatter_tensor across hosts); tolerances as test_dist_parallel.py's."""
    ref_losses, ref_params = lm_train_single(FSDP_STEPS, FSDP_BATCH)
    for i in range(FSDP_STEPS):
        got = sum(results[r]["fsdp_losses"][i] for r in range(WORLD)) / WORLD
        assert abs(got - ref_losses[i]) < 1e-3, f"step {i}: FSDP2 loss {got} vs single-process {ref_losses[i]}"
    for r in range(WORLD):
        for p, q in zip(results[r]["fsdp_params"], ref_params):
            torch.testing.assert_close(torch.from_numpy(p), q, rtol=1e-3, atol=1e-4)
