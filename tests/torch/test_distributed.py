"""torch.distributed backend "neuron" (issue 16): collectives in neurond, on 2 ranks.

The ranks are spawned with torch.multiprocessing (dist_workers.py) against the
session's neurond and bounded in time. Each collective and dtype is checked
against gloo on CPU copies in the same process group ("cpu:gloo,neuron:neuron"),
at uneven sizes and with non-contiguous tensors; a rank that dies or never comes
gives the other a clear error by the timeout; DDP on 2 ranks equals one process
training on the global batch.
"""
import pytest
import torch

from conftest import start_daemon, stop_daemon
import dist_workers
from dist_reference import train_single
from dist_workers import spawn

WORLD = 2
pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")


def _cases():
    cases = []
    shapes = [(1,), (7,), (3, 5), (1031,)]  # uneven: odd sizes, primes, one element
    for dt in dist_workers.DTYPES:
        for red in ("sum", "avg", "max", "min", "product"):
            for shape in shapes[1:3]:
                cases.append((f"all_reduce_{red}-{dt}-{shape}", f"all_reduce_{red}", dt, shape, False))
        cases.append((f"all_reduce_sum-{dt}-noncontig", "all_reduce_sum", dt, (4, 6), True))
        cases.append((f"all_reduce_sum-{dt}-(1,)", "all_reduce_sum", dt, (1,), False))
        cases.append((f"all_reduce_sum-{dt}-(1031,)", "all_reduce_sum", dt, (1031,), False))
        for op in ("broadcast", "all_gather", "all_gather_into_tensor", "reduce", "gather", "scatter"):
            cases.append((f"{op}-{dt}-(7,)", op, dt, (7,), False))
            cases.append((f"{op}-{dt}-noncontig", op, dt, (3, 4), True))
        for red in ("sum", "avg", "max"):
            cases.append((f"reduce_scatter_{red}-{dt}-(5,)", f"reduce_scatter_{red}", dt, (5,), False))
        cases.append((f"all_to_all_single-{dt}", "all_to_all_single", dt, (6, 3), False))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def collective_results():
    res = spawn(dist_workers.collectives, CASES, timeout=600)
    for r in range(WORLD):
        assert r in res, f"rank {r} gave no result (hung or crashed)"
        assert "error" not in res[r], f"rank {r} failed outside a case:\n{res[r]['error']}"
    return res


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_collective_matches_gloo(collective_results, case):
    for r in range(WORLD):
        failure = collective_results[r]["failures"].get(case)
        assert failure is None, f"rank {r}, {case}:\n{failure}"


def test_barrier_waits_for_every_rank():
    res = spawn(dist_workers.barrier_waits, timeout=120)
    for r in range(WORLD):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result")
    assert res[0]["seconds"] > 1.0, f"rank 0 left the barrier after {res[0]['seconds']:.2f} s, before rank 1 came"


@pytest.mark.parametrize("mode", ["exit", "late"])
def test_missing_rank_is_named(mode):
    """Rank 1 exits (or never calls) after a first all_reduce: rank 0's next one fails
    by the 3 s timeout with an error that names rank 1."""
    res = spawn(dist_workers.dies, mode, timeout=120)
    assert 0 in res and "error" not in res[0], res.get(0)
    msg = res[0]["message"]
    assert msg is not None, "all_reduce succeeded without rank 1"
    assert "rank 1" in msg or "rank(s) 1" in msg, msg
    assert ("left" in msg) if mode == "exit" else ("did not arrive" in msg and "timed out" in msg), msg
    assert res[0]["seconds"] < 30, res[0]


def test_ddp_matches_single_process():
    steps, batch = 6, 16
    assert_ddp_matches_single_process(spawn(dist_workers.ddp_train, steps, batch, timeout=300), steps, batch)


def test_ddp_with_a_device_per_rank_matches_single_process():
    """Rank r on neuron:r of one neurond with two devices (torchrun's usual placement):
    neurond moves the gradients between the devices' memories, and training is the
    same as on one device."""
    steps, batch = 6, 16
    p, sock, d = start_daemon(extra=("--devices", "2"))
    try:
        res = spawn(dist_workers.ddp_device_per_rank, sock, steps, batch, timeout=300)
    finally:
        stop_daemon(p, d)
    assert_ddp_matches_single_process(res, steps, batch)
    assert [res[r]["device"] for r in range(WORLD)] == list(range(WORLD)), res


def assert_ddp_matches_single_process(res, steps, batch):
    for r in range(WORLD):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result")
    ref_losses, ref_params = train_single(steps, batch)
    # DDP averages gradients: the mean of the ranks' losses is the global batch's loss.
    losses = [sum(res[r]["losses"][i] for r in range(WORLD)) / WORLD for i in range(steps)]
    for i, (a, b) in enumerate(zip(losses, ref_losses)):
        assert abs(a - b) < 1e-4, f"step {i}: DDP loss {a} vs single-process {b}"
    for r in range(WORLD):
        for p, q in zip(res[r]["params"], ref_params):
            torch.testing.assert_close(torch.from_numpy(p), q, rtol=1e-4, atol=1e-5)


def test_ranks_of_two_daemons_form_a_hierarchical_group():
    """Ranks that do not share a neurond (as on two hosts; test_dist_two_hosts.py
    has the real thing) form the hierarchical group: all_reduce and all_to_all_single
    are right, and a recv from any source (each rank alone on its host) gets the
    other's send and names it."""
    p, sock, d = start_daemon(hbm_mib=512)
    try:
        res = spawn(dist_workers.two_daemons, sock, timeout=120)
    finally:
        stop_daemon(p, d)
    for r in range(WORLD):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result")
        assert res[r]["backend"] == "ProcessGroupHierarchical", res[r]
        assert res[r]["sum"] == [3.0] * 5, res[r]
        # Rank r receives block r of each rank j: j's values 2r, 2r+1 plus 10 j.
        assert res[r]["all_to_all"] == [float(2 * r + k + 10 * j) for j in range(WORLD) for k in (0, 1)], res[r]
        assert res[r]["any_source"] == [[1 - r, [100.0 + 1 - r] * 3]], res[r]
