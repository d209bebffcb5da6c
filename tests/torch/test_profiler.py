"""torch.profiler with ProfilerActivity.PrivateUse1 (issue 15 item 2): each device
command appears with the start and end the chip stamped (the ISA 1.7 stamp flag),
linked to its launching op and, with with_stack=True, to the Python line; the
Chrome trace is well-formed for Perfetto; device metrics export to Parquet."""
import json
import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

DEV = "neuron"
ACTS = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _workload(x, w):
    y = torch.relu(x @ w)  # THE_MATMUL_LINE
    return (y * 2).sum()


def _profile(**kw):
    x = torch.randn(256, 256, device=DEV)
    w = torch.randn(256, 256, device=DEV)
    torch.neuron.synchronize()
    with profile(activities=ACTS, **kw) as prof:
        s = _workload(x, w)
        s.item()
    return prof


def _device_events(prof):
    return [e for e in prof.profiler.kineto_results.events() if e.device_type() == torch.autograd.DeviceType.PrivateUse1]


def test_device_commands_have_chip_times_linked_to_ops():
    prof = _profile()
    events = prof.profiler.kineto_results.events()
    dev = _device_events(prof)
    names = [e.name() for e in dev]
    assert "matmul" in names and "relu" in names and "sum" in names, names
    cpu = {e.correlation_id(): e for e in events if e.device_type() == torch.autograd.DeviceType.CPU}
    by_name = {}
    for e in dev:
        assert e.end_ns() >= e.start_ns() > 0
        op = cpu.get(e.linked_correlation_id())
        assert op is not None, f"{e.name()} is not linked to an op"
        by_name[e.name()] = (e, op)
    mm, mm_op = by_name["matmul"]
    assert mm_op.name() in ("aten::mm", "aten::matmul"), mm_op.name()
    assert by_name["relu"][1].name() in ("aten::relu", "aten::clamp_min")
    # The chip's times: commands of one stream do not overlap and run in submission
    # order; each starts after its op was called (within the clock calibration,
    # which is better than the sync round trip) and the last ends before the sync
    # returned.
    ordered = sorted(dev, key=lambda e: e.start_ns())
    assert [e.name() for e in ordered] == names
    for a, b in zip(ordered, ordered[1:]):
        assert b.start_ns() >= a.end_ns() - 1000, (a.name(), b.name())
    slack = 2_000_000
    assert mm.start_ns() >= mm_op.start_ns() - slack
    # A 256^3 matmul is not free: the chip took measurable time for it.
    assert mm.duration_ns() > 1000
    # key_averages carries device time for the op.
    avgs = {a.key: a for a in prof.key_averages()}
    mm_key = mm_op.name()
    assert avgs[mm_key].device_time_total > 0 or avgs[mm_key].self_device_time_total > 0


def test_with_stack_gives_the_python_line():
    import torch_neuron.profiler as tp
    prof = _profile(with_stack=True)
    rows = tp.device_metrics(prof)
    mm = [r for r in rows if r["command"] == "matmul"]
    assert mm, rows
    # torch's Python tracer names a frame by its function's first line.
    src = open(__file__).read().splitlines()
    line = next(i + 1 for i, l in enumerate(src) if l.startswith("def _workload("))
    assert mm[0]["source"] == f"test_profiler.py({line}): _workload" or \
        mm[0]["source"].endswith(f"test_profiler.py({line}): _workload"), mm[0]["source"]


def _chrome_trace_events(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def test_chrome_trace_is_valid_for_perfetto(tmp_path):
    events = _chrome_trace_events(_profile(), tmp_path)
    assert isinstance(events, list) and events
    # The Trace Event Format Perfetto reads: complete events have numeric ts/dur,
    # a pid and tid; metadata events name the processes.
    for e in events:
        assert "ph" in e and "name" in e, e
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert "pid" in e and "tid" in e
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert {"matmul", "relu"} <= {e["name"] for e in kernels}, {e["name"] for e in kernels}
    ops = {e["args"].get("External id"): e for e in events
           if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "args" in e}
    for k in kernels:
        ext = k["args"].get("External id")
        assert ext in ops, f"kernel {k['name']} has no launching op in the trace"
        assert k["args"].get("device") == 0 and "stream" in k["args"]


def test_the_chip_stamps_commands_without_extra_commands(tmp_path):
    # neurond offers the ISA 1.7 stamp flag: each traced command carries its own
    # stamp, so the queue runs exactly the workload's commands, consecutive in
    # its sequence numbers (TIMESTAMP brackets would take every other one), and
    # their chip times still follow one another in queue order.
    events = _chrome_trace_events(_profile(), tmp_path)
    kernels = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"),
                     key=lambda e: e["args"]["queue seq"])
    assert len(kernels) >= 3
    seqs = [k["args"]["queue seq"] for k in kernels]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    for a, b in zip(kernels, kernels[1:]):
        assert b["ts"] >= a["ts"] + a["dur"] - 1, (a["name"], b["name"])


def test_parquet_export(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (tools/setup installs it)")
    import torch_neuron.profiler as tp
    prof = _profile(with_stack=True)
    path = tmp_path / "metrics.parquet"
    n = tp.export_parquet(prof, str(path))
    table = pq.read_table(str(path))
    assert table.num_rows == n == len(_device_events(prof)) and n >= 3
    assert table.column_names == tp.COLUMNS
    rows = table.to_pylist()
    mm = next(r for r in rows if r["command"] == "matmul")
    assert mm["op"] in ("aten::mm", "aten::matmul") and mm["duration_ns"] == mm["end_ns"] - mm["start_ns"] > 0
    assert "test_profiler.py" in mm["source"]


def test_profiling_stops_cleanly_and_costs_nothing_after():
    prof = _profile()
    assert _device_events(prof)
    # After the profile, no TIMESTAMP brackets: the queue runs exactly our commands.
    x = torch.ones(10, device=DEV)
    y = (x + 1).cpu()
    assert torch.equal(y, torch.full((10,), 2.0))
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        (x * 3).cpu()
    assert not [e for e in cpu_only.profiler.kineto_results.events()
                if e.device_type() == torch.autograd.DeviceType.PrivateUse1]
