"""Streams, events and asynchronous copies: ordering and synchronisation."""
import torch


def test_stream_api_and_ordering():
    s = torch.neuron.Stream()
    assert s.device.type == "neuron"
    default = torch.neuron.current_stream()
    x = torch.randn(256, 256)
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        a = x.to("neuron", non_blocking=True)
        b = a @ a
        ev = torch.neuron.Event()
        ev.record()
    assert torch.neuron.current_stream() == default
    default.wait_event(ev)  # device-side wait: work below runs after b
    c = b + 1
    torch.testing.assert_close(c.cpu(), x @ x + 1, rtol=1e-4, atol=1e-3)
    ev.synchronize()
    assert ev.query()
    s.synchronize()
    assert s.query()


def test_wait_stream_and_record_stream():
    s = torch.neuron.Stream()
    x = torch.ones(1000, device="neuron")
    s.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(s):
        y = x * 3
    torch.neuron.current_stream().wait_stream(s)
    y.record_stream(torch.neuron.current_stream())
    assert y.sum().item() == 3000


def test_events_timing_and_accelerator_streams():
    start, end = torch.Event(device="neuron", enable_timing=True), torch.Event(device="neuron", enable_timing=True)
    start.record()
    a = torch.randn(512, 512, device="neuron")
    for _ in range(3):
        a = a @ a * 0.01
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    # Timing events are the chip's TIMESTAMPs: the time the device spent between
    # them, within the host's wall time around the same work.
    torch.neuron.synchronize()
    import time
    t0 = time.perf_counter()
    start.record()
    b = torch.randn(1024, 1024, device="neuron")
    for _ in range(4):
        b = b @ b * 0.001
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    dev_ms = start.elapsed_time(end)
    assert 0.05 < dev_ms <= wall_ms, (dev_ms, wall_ms)
    s = torch.Stream(device="neuron")
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    z = torch.zeros(3, device="neuron") + 2
    torch.accelerator.synchronize()
    torch.accelerator.set_stream(torch.neuron.default_stream())
    assert z.tolist() == [2.0, 2.0, 2.0]


def test_non_blocking_roundtrip_many():
    # Many asynchronous host->device copies from pinned buffers, compute, and
    # device->host copies into pinned buffers: order must hold without syncs between.
    outs = []
    srcs = []
    for i in range(20):
        h = torch.full((4096,), float(i)).pin_memory()
        srcs.append(h)
        d = h.to("neuron", non_blocking=True) * 2
        o = torch.empty(4096).pin_memory()
        o.copy_(d, non_blocking=True)
        outs.append(o)
    torch.neuron.synchronize()
    for i, o in enumerate(outs):
        assert o[0].item() == 2.0 * i and o[-1].item() == 2.0 * i


def test_copy_reuses_freed_memory_safely():
    # Freed blocks go back to the cache and are reused while earlier work may still
    # be queued: results must not be corrupted.
    acc = torch.zeros(10000, device="neuron")
    for i in range(50):
        t = torch.full((10000,), float(i), device="neuron")
        acc += t
        del t
    assert acc[0].item() == sum(range(50))
