"""The device allocator under a changing size mix (issue 15 item 8): memory
freed by large tensors serves later requests of other sizes (blocks are split and
merged again), so the reserved memory stays near what the program holds; and
torch.neuron.memory_snapshot() describes the segments and blocks."""
import torch

DEV = "neuron"
MIB = 1 << 20


def _reset():
    torch.neuron.synchronize()
    torch.neuron.empty_cache()


def test_freed_large_blocks_serve_other_sizes():
    _reset()
    base = torch.neuron.memory_reserved()
    big = [torch.empty(8 * MIB // 4, device=DEV) for _ in range(16)]  # 128 MiB in 8 MiB tensors
    del big
    peak_reserved = torch.neuron.memory_reserved() - base
    # The program now wants 4 MiB and 3 MiB tensors: the cached 8 MiB blocks serve
    # them (split); without splitting each size class would reserve anew.
    mixed = [torch.empty(n * MIB // 4, device=DEV) for n in (4, 3) * 14]  # 98 MiB
    reserved = torch.neuron.memory_reserved() - base
    assert reserved <= peak_reserved, f"reserved grew from {peak_reserved >> 20} to {reserved >> 20} MiB"
    del mixed
    # The split blocks merge back: the 8 MiB tensors fit again without new segments.
    again = [torch.empty(8 * MIB // 4, device=DEV) for _ in range(16)]
    assert torch.neuron.memory_reserved() - base <= peak_reserved
    del again
    _reset()
    assert torch.neuron.memory_reserved() == base, "empty_cache returns whole segments"


def test_small_and_large_pools_stay_apart_and_values_survive():
    _reset()
    xs = [torch.full((n,), float(i), device=DEV) for i, n in enumerate([10, 300_000, 7, 1_000_000, 513, 2_500_000])]
    for i, x in enumerate(xs):
        assert torch.equal(x.cpu(), torch.full((x.numel(),), float(i)))
    del xs[1], xs[2]
    ys = [torch.full((200_000,), -1.0, device=DEV) for _ in range(3)]
    for i, x in zip([0, 2, 4, 5], xs):
        assert (x.cpu() == i).all(), "a split block overwrote a live tensor"
    for y in ys:
        assert (y.cpu() == -1).all()


def test_memory_snapshot():
    _reset()
    keep = torch.empty(3 * MIB // 4, device=DEV)
    snap = torch.neuron.memory_snapshot()
    assert snap, "at least one segment"
    seg = next(s for s in snap if any(b["state"] == "active_allocated" and b["size"] >= 3 * MIB for b in s["blocks"]))
    assert seg["device"] == 0 and seg["total_size"] == sum(b["size"] for b in seg["blocks"])
    assert seg["allocated_size"] >= 3 * MIB and seg["segment_type"] in ("small", "large")
    addrs = [b["address"] for b in seg["blocks"]]
    assert addrs == sorted(addrs) and addrs[0] == seg["address"]
    assert keep.data_ptr() in addrs
    del keep
