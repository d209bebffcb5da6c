"""Device metrics from a torch.profiler run, for offline analysis.

``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])``
records every command the chip ran (csrc/kineto_profiler.cpp): its device start and
end as the chip stamped them, device, stream, and the op that launched it.
:func:`device_metrics` joins each command with its launching op (and that op's
Python source line when the profile had ``with_stack=True``);
:func:`export_parquet` writes those rows to a Parquet file (pyarrow), one row per
device command::

    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                with_stack=True) as prof:
        train_step()
    torch_neuron.profiler.export_parquet(prof, "step.parquet")
"""
import torch

__all__ = ["device_metrics", "export_parquet", "COLUMNS"]

COLUMNS = ["command", "op", "source", "device", "stream", "start_ns", "end_ns", "duration_ns", "correlation_id"]


def _source_line(stack):
    # The innermost frame outside torch itself: the user's line that called the op.
    for frame in stack or []:
        if "torch/" not in frame and "torch_neuron/" not in frame and not frame.startswith("<built-in"):
            return frame
    return stack[0] if stack else ""


def device_metrics(prof):
    """One dict per device command of a finished torch.profiler.profile (keys: COLUMNS)."""
    results = prof.profiler.kineto_results
    if results is None:
        raise RuntimeError("the profile has no results yet: call this after the `with` block")
    events = results.events()
    ops = {}
    for e in events:
        if e.device_type() == torch.autograd.DeviceType.CPU and e.correlation_id():
            ops[e.correlation_id()] = e
    rows = []
    for e in events:
        if e.device_type() != torch.autograd.DeviceType.PrivateUse1:
            continue
        op = ops.get(e.linked_correlation_id())
        rows.append({
            "command": e.name(),
            "op": op.name() if op is not None else "",
            "source": _source_line(op.stack()) if op is not None else "",
            "device": e.device_index(),
            "stream": e.device_resource_id(),
            "start_ns": e.start_ns(),
            "end_ns": e.end_ns(),
            "duration_ns": e.duration_ns(),
            "correlation_id": e.linked_correlation_id(),
        })
    return rows


def export_parquet(prof, path):
    """Writes device_metrics(prof) to a Parquet file; returns the row count."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise RuntimeError("torch_neuron.profiler.export_parquet needs pyarrow (pip install pyarrow)") from e
    rows = device_metrics(prof)
    types = {"command": pa.string(), "op": pa.string(), "source": pa.string(), "device": pa.int32(),
             "stream": pa.int64(), "start_ns": pa.int64(), "end_ns": pa.int64(), "duration_ns": pa.int64(),
             "correlation_id": pa.int64()}
    table = pa.table({c: pa.array([r[c] for r in rows], type=types[c]) for c in COLUMNS})
    pq.write_table(table, path)
    return len(rows)
