"""Device metrics from a torch.profiler run, for offline analysis.

``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])``
records every command the chip ran (csrc/kineto_profiler.cpp): its device start and
end as the chip stamped them, device, stream, and the op that launched it.
:func:`device_metrics` joins each command with its launching op (and, when the profile had
``with_stack=True``, the user's Python function that ran it, as
``file(line): function`` with the line torch's Python tracer reports);
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


def _is_user_frame(name):
    return ("torch/" not in name and "torch_neuron/" not in name and not name.startswith("<built-in")
            and "/site-packages/" not in name)


def _source_line(stack):
    # The innermost frame outside torch itself: the user's function that called the op.
    for frame in stack or []:
        if _is_user_frame(frame):
            return frame
    return stack[0] if stack else ""


class _PythonFrames:
    """The Python function events of a with_stack profile, per thread, to find the
    innermost user frame running when an op started (torch attaches stacks to ops
    only with experimental_config(verbose=True); the frames are there either way)."""

    def __init__(self, events):
        self.by_thread = {}
        for e in events:
            if e.is_python_function() and _is_user_frame(e.name()):
                self.by_thread.setdefault(e.start_thread_id(), []).append(e)

    def at(self, op):
        best = None
        for f in self.by_thread.get(op.start_thread_id(), ()):
            if f.start_ns() <= op.start_ns() <= f.end_ns() and (best is None or f.start_ns() >= best.start_ns()):
                best = f
        return best.name() if best is not None else ""


def device_metrics(prof):
    """One dict per device command of a finished torch.profiler.profile (keys: COLUMNS)."""
    results = prof.profiler.kineto_results
    if results is None:
        raise RuntimeError("the profile has no results yet: call this after the `with` block")
    events = results.events()
    ops = {}
    frames = _PythonFrames(events)
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
            "source": (_source_line(op.stack()) or frames.at(op)) if op is not None else "",
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
