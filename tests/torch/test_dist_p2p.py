"""Point-to-point on the torch.distributed backend "neuron" (issue 16), 2 ranks.

send/recv, isend/irecv, batch_isend_irecv (a ring, and tags that pick the match),
all_to_all_single with uneven split sizes and all_to_all with tensor lists: neurond
moves the data device memory to device memory (CollectiveP2P); each result is
compared with gloo doing the same on CPU tensors, or with the inputs every rank
can rebuild from the seeds. A recv of the wrong size and a send nobody receives
give both ranks a clear error. A recv from any source (src=None) on 3 ranks
reports the sender whose message it got, as gloo's does.
"""
import pytest
import torch

import dist_p2p_workers
from dist_workers import DTYPES, WORLD, spawn

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")

KINDS = ["_send_recv", "_isend_irecv", "_batch_ring", "_all_to_all_uneven", "_all_to_all_list"]


@pytest.fixture(scope="module")
def p2p_results():
    res = spawn(dist_p2p_workers.p2p, timeout=300)
    for r in range(WORLD):
        assert r in res, f"rank {r} gave no result (hung or crashed)"
        assert "error" not in res[r], f"rank {r} failed outside a case:\n{res[r]['error']}"
    return res


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS)
def test_p2p_matches_reference(p2p_results, kind, dt):
    for r in range(WORLD):
        failure = p2p_results[r]["failures"].get(f"{kind}-{dt}")
        assert failure is None, f"rank {r}, {kind}-{dt}:\n{failure}"


def test_recv_of_wrong_size_is_refused():
    res = spawn(dist_p2p_workers.p2p_errors, "size", timeout=90)
    for r in range(WORLD):
        assert r in res and "error" not in res[r], res.get(r)
        msg = res[r]["message"]
        assert msg is not None, f"rank {r}: the mismatched send/recv succeeded"
        assert "expects 8 elements of f32" in msg and "send has 4 elements of f32" in msg, msg
        assert res[r]["seconds"] < 30, res[r]


def test_send_without_recv_names_the_peer():
    res = spawn(dist_p2p_workers.p2p_errors, "missing", timeout=90)
    assert 0 in res and "error" not in res[0], res.get(0)
    msg = res[0]["message"]
    assert msg is not None, "a send completed with no recv"
    assert "timed out" in msg and "rank 1 did not post the recv" in msg, msg
    assert res[0]["seconds"] < 30, res[0]


def test_recv_from_any_source_reports_the_sender():
    world = 3
    res = spawn(dist_p2p_workers.recv_any, world=world, timeout=150)
    for r in range(world):
        assert r in res and "error" not in res[r], res.get(r, {}).get("error", f"rank {r} gave no result")
    o = res[0]
    for key in ("neuron", "gloo"):
        got = o[key]
        # Each message's contents say who sent it (10 * sender + 1); the call's answer must agree.
        assert sorted(src for src, _ in got) == [1, 2], (key, got)
        for src, values in got:
            assert values == [10 * src + 1] * 5, (key, src, values)
    assert o["tagged"] == (2, [2.5] * 3), o["tagged"]
    assert o["tagged"] == o["tagged_gloo"], (o["tagged"], o["tagged_gloo"])
