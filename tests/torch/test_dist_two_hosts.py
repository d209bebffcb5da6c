"""torch.distributed backend "neuron" across two hosts (issue 16 items 3 and 4).

Two hosts are simulated as two network namespaces joined by a veth pair, each with
its own neurond and 2 ranks (4 in all, spawned with torch.multiprocessing; each
rank enters its namespace, dist_two_hosts_workers.py; and once more started by one
torchrun per namespace, dist_two_hosts_torchrun.py). They rendezvous through a
TCPStore on host A's veth address, and gloo (the reference, and the backend's
stage between hosts) uses the veth. The collectives are checked against gloo on
CPU copies in the same group, and DDP training (an MLP) and FSDP2 training (the
tiny LM) on the 4 ranks against one process on the global batch.

Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) for the namespaces; skips with
the reason otherwise.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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
TORCHRUN_PORT = 29518
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
def hosts():
    """The two hosts: per host its namespace, neurond socket, veth and address."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2's ip is not installed (tools/setup/install-deps installs it)")
    ns, veth = _make_hosts(os.getpid() % 100000)
    daemons = []
    try:
        for n in ns:
            daemons.append(start_daemon(hbm_mib=1024, prefix=("ip", "netns", "exec", n)))
        yield [{"netns": ns[i], "socket": daemons[i][1], "ifname": veth[i], "addr": ADDRS[i],
                "store_addr": ADDRS[0], "store_port": STORE_PORT} for i in (0, 1)]
    finally:
        for p, _, d in daemons:
            stop_daemon(p, d)
        _remove(ns)


@pytest.fixture(scope="module")
def results(hosts):
    res = spawn(dist_two_hosts_workers.two_hosts, hosts, STEPS, BATCH, FSDP_STEPS, FSDP_BATCH, world=WORLD,
                timeout=480)
    for r in range(WORLD):
        assert r in res, f"rank {r} gave no result (hung or crashed)"
        assert "error" not in res[r], f"rank {r} failed outside a case:\n{res[r]['error']}"
    return res


def test_the_group_is_hierarchical(results):
    for r in range(WORLD):
        assert results[r]["backend"] == "ProcessGroupHierarchical", results[r]["backend"]


EXTRA_CASES = (["broadcast from every root"] + [f"gather to {r}" for r in range(WORLD)]
               + [f"scatter from {r}" for r in range(WORLD)]
               + ["send/recv between every pair", "isend/irecv both ways", "batch_isend_irecv rings"])


@pytest.mark.parametrize("case", [c[0] for c in dist_two_hosts_workers.CASES] + EXTRA_CASES)
def test_collective_matches_gloo(results, case):
    for r in range(WORLD):
        failure = results[r]["failures"].get(case)
        assert failure is None, f"rank {r}, {case}:\n{failure}"


def test_hosts_of_different_sizes(hosts):
    """3 ranks, 2 on host A and 1 on host B: the routed collectives (gather,
    scatter, all_to_all(_single), reduce_scatter of a list, all_gather) and
    point-to-point against gloo, with hosts' blocks of different sizes; and
    recv from any source on rank 1, alone on host B (its sender and data)."""
    res = spawn(dist_two_hosts_workers.three_ranks, hosts, world=3, timeout=240)
    for r in range(3):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result (hung)")
        assert not res[r]["failures"], f"rank {r}:\n" + "\n".join(f"{k}:\n{v}" for k, v in res[r]["failures"].items())


def test_unsupported_op_is_refused_by_name(results):
    for r in range(WORLD):
        u = results[r]["unsupported"]
        # Each host has 2 ranks: a neighbour's send would come through neurond, another
        # host's through gloo, so the backend refuses, naming the neighbour.
        assert u["message"] is not None, f"rank {r}: recv from any source beside another rank did not raise"
        assert u["type"] == "DistBackendError", u
        assert "supported only on a rank alone on its host" in u["message"], u["message"]
        assert f"rank(s) {r ^ 2} share" in u["message"], u["message"]
        assert u["all_reduce_after"] == [float(WORLD)] * 3, f"rank {r}: the group after the refusal: {u}"


@pytest.fixture(scope="module")
def async_results(hosts):
    return spawn(dist_two_hosts_workers.async_ops, hosts, world=WORLD, timeout=240)


def test_collectives_are_asynchronous(async_results):
    """Collectives across hosts return at once, their Work ordered on the caller's
    stream (dist_two_hosts_workers.async_ops): back-to-back async calls waited later
    equal gloo's; a call and its wait() return (the Work not complete) while the
    collective cannot complete, as rank 3 joins only after they returned; a device
    op queued after wait() sees the result, on the current stream and on each
    stream of the pool (one of which the device stages ran on, and deadlocked
    with wait(), until they got a stream of their own)."""
    res = async_results
    for r in range(WORLD):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result (hung)")
        assert not res[r]["failures"], f"rank {r}:\n" + "\n".join(f"{k}: {v}" for k, v in res[r]["failures"].items())
        assert len(res[r]["streams"]) == 9, res[r]["streams"]
        for kind in res[r]["streams"]:
            o = res[r][kind]
            assert o["got"] == res[r]["expect"], f"rank {r}, {kind} stream: t * 2 after wait(): {o['got']}"
            if r < WORLD - 1:
                assert not o["done_after_call"], f"rank {r}, {kind}: all_reduce complete before rank 3 joined"
                assert not o["done_after_wait"], f"rank {r}, {kind}: wait() returned a complete Work before rank 3 joined"
            else:
                assert o["others_returned"], f"{kind}: ranks 0-2's call or wait() blocked until rank 3 joined: {o}"


def test_reduce_scatter_sends_each_part_once(async_results):
    """reduce_scatter_tensor across hosts sends only the other host's ranks' parts
    between the hosts: each host's veth carries about half of what an all_reduce
    of the same 1 MiB input does (which is what reduce_scatter_tensor cost when it
    was an all_reduce of the whole input); the result equals gloo's."""
    for r in range(WORLD):
        assert r in async_results and "error" not in async_results[r], async_results.get(r)
    for r in (0, 1):  # the hosts' first ranks: one per namespace
        t = async_results[r]["traffic"]
        assert t["reduce_scatter_tensor"] >= 512 * 1024, t  # half the input crossed once
        print(f"host {'AB'[r]}: bytes out {t}")
        assert t["reduce_scatter_tensor"] < 0.75 * t["all_reduce"], f"host {'AB'[r]}: bytes out {t}"


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


def test_torchrun_on_two_hosts(hosts):
    """The README's two-host launch: one torchrun per host (in its namespace, with its
    neurond and gloo's interface), the c10d rendezvous on host A's address.
    --local-addr and is_host=1 because the namespaces' host name resolves to
    neither veth address. (It hung once in ~30 runs until ProcessGroupNeuron's
    destructor stopped holding the GIL while it joined its worker: a rank hung at
    exit, and the other host's torchrun waited for it at its exit barrier.)"""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_two_hosts_torchrun.py")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    procs, logs = [], []
    logdir = tempfile.TemporaryDirectory(prefix="neuron-torchrun-")
    for i, h in enumerate(hosts):
        # PYTHONFAULTHANDLER: a hang is ended with SIGABRT, and every process
        # (agent and workers) prints its threads' stacks before it dies.
        env = {**os.environ, "NEURON_SOCKET": h["socket"], "GLOO_SOCKET_IFNAME": h["ifname"],
               "PYTHONFAULTHANDLER": "1", "LOGLEVEL": "INFO"}
        cmd = ["ip", "netns", "exec", h["netns"], torchrun, "--nnodes", "2", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{ADDRS[0]}:{TORCHRUN_PORT}", "--local-addr", h["addr"],
               *(["--rdzv-conf", "is_host=1"] if i == 0 else []), script]
        # A file, not a pipe (nothing blocks on a full pipe the test does not read
        # yet); appended to, so the lines of the host's processes do not overwrite
        # each other.
        logs.append(open(os.path.join(logdir.name, f"host{i}.log"), "a+"))
        procs.append(subprocess.Popen(cmd, env=env, stdout=logs[-1], stderr=subprocess.STDOUT, text=True))
    hung = _wait_all(procs, 240)
    outs = []
    for f in logs:
        f.seek(0)
        outs.append(f.read())
        f.close()
    logdir.cleanup()
    report = "\n".join(f"--- host {'AB'[i]}: torchrun exited with {p.returncode}; its output:\n{out[-12000:]}"
                        for i, (p, out) in enumerate(zip(procs, outs)))
    assert not hung and all(p.returncode == 0 for p in procs), (
        f"the torchruns {'were stopped (one failed, or 240 s passed)' if hung else 'failed'}:\n{report}")
    got = {}
    for out in outs:
        for line in out.splitlines():
            if line.startswith("RESULT "):
                r = json.loads(line[len("RESULT "):])
                got[r["rank"]] = r
    assert sorted(got) == list(range(WORLD)), f"ranks that reported: {sorted(got)}\n{outs}"
    expect_sum = [float(v * sum(range(1, WORLD + 1))) for v in range(6)]
    for r, g in got.items():
        assert g["world"] == WORLD and g["backend"] == "ProcessGroupHierarchical", g
        assert g["sum"] == expect_sum, g
        assert g["broadcast"] == [float((WORLD - 1) * 10)] * 3, g
    # Which host gets ranks 0-1 is the rendezvous' choice; each host has 2 of them.
    per_host = sorted(sum(g["socket"] == h["socket"] for g in got.values()) for h in hosts)
    assert per_host == [2, 2], got


def _descendants(pid):
    """pid and every process under it (torchrun starts its workers in sessions of
    their own, so a process group would not reach them)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _wait_all(procs, timeout, grace=30):
    """Waits for every process until the deadline, or until `grace` seconds after
    one of them failed (then the other would wait for its peer: torchrun's agents
    wait for each other at the rendezvous and at exit, and its workers in their
    collectives). The processes left and theirs then get SIGABRT (with
    PYTHONFAULTHANDLER, each prints its threads' stacks), then SIGKILL. Whether
    any had to be stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs):
            deadline = min(deadline, time.monotonic() + grace)
        time.sleep(0.2)
    left = [p for p in procs if p.poll() is None]
    if left:
        tree = [q for p in left for q in _descendants(p.pid)]
        for sig in (signal.SIGABRT, signal.SIGKILL):
            for q in tree:
                try:
                    os.kill(q, sig)
                except ProcessLookupError:
                    pass
            time.sleep(3)
    for p in procs:
        p.wait()
    return bool(left)


def test_a_rank_that_dies_fails_the_others(hosts):
    """Rank 3 (host B) exits after a first all_reduce: the next all_reduce of ranks
    0-2 (both hosts) raises within the 5 s group timeout plus teardown instead of
    waiting for ever; rank 1, rank 3's host neighbour, learns it from neurond, and
    the errors name the ranks by their rank in the group; a later asynchronous
    all_reduce's wait() raises its error once it is known."""
    res = spawn(dist_two_hosts_workers.rank_dies, hosts, world=WORLD, timeout=180)
    for r in range(WORLD - 1):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result (hung)")
        assert res[r]["message"] is not None, f"rank {r}'s all_reduce succeeded without rank 3"
        assert res[r]["seconds"] < 60, res[r]
    # Rank 1 shares host B's neurond group with rank 3: neurond saw its process go,
    # and the error names it by its rank in the group (neurond's group of host B
    # numbers it 1).
    assert "rank 3 (pid" in res[1]["message"] and "left" in res[1]["message"], res[1]["message"]
    # Rank 0 (host A's first rank) learns it in the exchange between hosts, which
    # names the ranks it was between.
    assert "between hosts" in res[0]["message"] and "ranks 0, 1" in res[0]["message"], res[0]["message"]
    # The next all_reduce, asynchronous: once complete, its wait() raises the error
    # (naming the rank that reports it, and on rank 1 the rank that left).
    for r in range(WORLD - 1):
        msg = res[r]["wait_message"]
        assert msg is not None and f"neuron backend: rank {r}:" in msg, f"rank {r}: {msg}"
    assert "rank 3 (pid" in res[1]["wait_message"], res[1]["wait_message"]
