"""Work objects of the torch.distributed backend "neuron" (issue 16) are ordered on
the caller's stream, as NCCL's: a collective queued behind long device work returns
at once, Work.wait() makes the stream wait on the device without blocking the host
(NEURON_BLOCKING_WAIT=1 blocks it), a kernel queued after wait() on that stream sees
the reduced data (compared with gloo on CPU), and a failed collective reaches the
stream as a fault that names its cause.
"""
import numpy as np
import pytest
import torch

import dist_async_workers
from dist_workers import WORLD, spawn

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")


def _results(*args, **kw):
    res = spawn(*args, **kw)
    for r in range(WORLD):
        assert r in res, f"rank {r} gave no result (hung or crashed)"
        assert "error" not in res[r], f"rank {r} failed:\n{res[r]['error']}"
    return res


def test_wait_orders_the_stream_not_the_host():
    res = _results(dist_async_workers.ordered_on_stream, False, timeout=240)
    for r in range(WORLD):
        o = res[r]
        # The chain ahead on the stream (~3 s) is still running at both points.
        assert not o["done_after_call"], f"rank {r}: all_reduce was complete when async_op returned"
        assert not o["done_after_wait"], f"rank {r}: wait() blocked the host until the collective ended"
        assert not o["stream_idle_after_wait"], f"rank {r}: wait() synchronised the stream"
        np.testing.assert_array_equal(o["got"], o["ref2"], err_msg=f"rank {r}: t * 2 after wait()")
        np.testing.assert_array_equal(o["future"], o["ref"], err_msg=f"rank {r}: the future's value")
        assert o["completed_later"], f"rank {r}: is_completed() never became true"


def test_blocking_wait_blocks_the_host():
    res = _results(dist_async_workers.ordered_on_stream, True, timeout=240)
    for r in range(WORLD):
        o = res[r]
        assert not o["done_after_call"], f"rank {r}: all_reduce was complete when async_op returned"
        assert o["done_after_wait"], f"rank {r}: NEURON_BLOCKING_WAIT=1 wait() returned before the end"
        np.testing.assert_array_equal(o["got"], o["ref2"], err_msg=f"rank {r}: t * 2 after wait()")


def test_failure_reaches_the_stream():
    res = spawn(dist_async_workers.failure_reaches_stream, timeout=120)
    assert 0 in res and "error" not in res[0], res.get(0)
    o = res[0]
    msg = o["message"]
    assert msg is not None, "the stream read the tensor although the all_reduce failed"
    assert "rank 1" in msg and "left" in msg, msg
    assert o["seconds"] < 30, o
    assert o["stream_ok"] is True, o["stream_ok"]


def test_destroy_with_a_collective_in_flight():
    """destroy_process_group returns (after the in-flight all_reduce) instead of
    deadlocking: it held the GIL while it joined the backend's worker, which needed
    the GIL to drop the last reference to the all_reduce's tensor."""
    res = spawn(dist_async_workers.destroy_in_flight, timeout=90)
    for r in range(WORLD):
        assert r in res, f"rank {r} gave no result: its destroy_process_group hung"
        assert "error" not in res[r], res[r]["error"]
        assert res[r]["destroy_s"] < 30, res[r]
