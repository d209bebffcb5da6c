"""torch.compile(backend="neuron"): graphs registered with neurond once and replayed
with one submission per call.

The backend is registered through the ``torch_dynamo_backends`` entry point, so
``torch.compile(model, backend="neuron")`` and ``torch.compiler.set_default_backend
("neuron")`` work without importing anything. Dynamo captures the graphs (a graph
break falls back to eager for what it cannot trace, as on any backend);
AOTAutograd splits training graphs into a forward and a backward graph. Each of
those graphs becomes a chip program on its first call with a given input layout:

1. the graph runs once through the eager kernels while the plugin records every
   command they submit, tagged with the FX node that submitted it (``capture``);
2. the recording is lowered (csrc/graph_lowering.cpp): the storages of the graph's
   inputs and outputs become program arguments, intermediates get offsets from a
   memory plan in one program buffer that reuses the bytes of dead tensors, and
   chains of elementwise ops and bias+activation after a matmul are fused;
3. neurond validates the program once and keeps it (RegisterProgram);
4. each later call allocates the outputs and submits ONE EXEC_PROGRAM command that
   binds the inputs' and outputs' addresses (``replay``).

A graph whose recording cannot be a program (it reads a value on the host, copies
from the host, draws random numbers, or names memory from outside it) runs op by op
through the eager kernels; ``stats()`` says which and why. Shapes are static: a
new input shape is a new program (and Dynamo recompiles under its guards);
``dynamic=True`` is refused.

FlexAttention's higher-order op is replaced by its dense kernel before
AOTAutograd (_flex_attention.py), so it becomes aten ops in the same programs.
"""
import collections
import logging
import os
import threading
import weakref

import torch
import torch.fx
from torch.utils import _pytree as pytree

from . import _flex_attention

__all__ = ["neuron_backend", "stats", "reset_stats"]

log = logging.getLogger(__name__)

# TORCH_NEURON_FUSION=0 lowers every command as it was submitted (no fusion).
FUSION = os.environ.get("TORCH_NEURON_FUSION", "1") != "0"

# Programs kept per graph (one per input layout seen); the oldest goes first.
MAX_PROGRAMS_PER_GRAPH = 8

_lock = threading.Lock()
_stats = collections.Counter()
_eager_reasons = collections.Counter()


def stats():
    """Counters since the last reset: graphs compiled, programs registered,
    replays, eager runs of graphs, and why graphs stayed eager."""
    with _lock:
        out = dict(_stats)
        out["eager_reasons"] = dict(_eager_reasons)
    return out


def reset_stats():
    with _lock:
        _stats.clear()
        _eager_reasons.clear()


def _count(key, n=1):
    with _lock:
        _stats[key] += n


class _LabelledInterpreter(torch.fx.Interpreter):
    """Runs the graph and names each node for the commands it submits (fault
    reasons and the program's node labels name it)."""

    def run_node(self, n):
        if n.op == "call_function":
            name = getattr(n.target, "__name__", str(n.target))
            torch.ops.neuron._capture_label(f"{name} {n.name}")
        return super().run_node(n)


def _signature(args):
    sig = []
    for a in args:
        if isinstance(a, torch.Tensor):
            sig.append((a.device, a.dtype, tuple(a.shape), a.stride(), a.storage_offset()))
        else:
            sig.append(("value", a))
    return tuple(sig)


class _Program:
    __slots__ = ("handle", "template", "tensor_slots", "spec", "reason")

    def __init__(self, handle=0, reason=""):
        self.handle = handle
        self.reason = reason
        self.template = None
        self.tensor_slots = ()
        self.spec = None


_live = set()  # handles of registered programs (for tests and stats)


def _live_handles():
    with _lock:
        return set(_live)


def _release(handles):
    for h in list(handles):
        with _lock:
            _live.discard(h)
        try:
            torch.ops.neuron._program_release(h)
        except Exception:  # the process is exiting or neurond is gone
            pass


class _GraphRunner:
    """One FX graph (a forward, a backward or an inference graph): its programs by
    input layout, captured on first use, replayed after."""

    # AOTAutograd passes the forward's arguments as one list (boxed), and calls
    # the backward with them spread: both are accepted (an FX graph's inputs are
    # never a list).
    _boxed_call = True

    def __init__(self, gm, kind, folded=()):
        self.gm = gm
        self.kind = kind
        self.folded = list(folded)  # (op, args, kwargs): the graph's last inputs
        self.constants = None
        self.programs = collections.OrderedDict()
        self._handles = []
        self._finalizer = weakref.finalize(self, _release, self._handles)
        _count(f"graphs_{kind}")

    def __call__(self, *call_args):
        if len(call_args) == 1 and isinstance(call_args[0], list):
            args = list(call_args[0])
            call_args[0].clear()  # boxed: the callee frees the inputs it no longer needs
        else:
            args = list(call_args)
        if self.constants is None:
            self.constants = _evaluate_folded(self.folded)
        args += self.constants
        key = _signature(args)
        prog = self.programs.get(key)
        if prog is None:
            return self._capture(key, args)
        if prog.handle:
            out = self._replay(prog, args)
            if out is not None:
                return out
        _count("eager_runs")
        return self.gm(*args)

    def _replay(self, prog, args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        ok, outs = torch.ops.neuron._program_run(prog.handle, tensors)
        if not ok:
            return None
        _count("replays")
        leaves = list(prog.template)
        for slot, t in zip(prog.tensor_slots, outs):
            leaves[slot] = t
        return pytree.tree_unflatten(leaves, prog.spec)

    def _device(self, args):
        for a in args:
            if isinstance(a, torch.Tensor) and a.device.type == "neuron":
                return a.device.index or 0
        return None

    def _capture(self, key, args):
        device = self._device(args)
        if device is None:
            self._remember(key, _Program(reason="the graph has no neuron input"))
            _count("eager_runs")
            return self.gm(*args)
        torch.ops.neuron._capture_begin(device)
        try:
            result = _LabelledInterpreter(self.gm).run(*args)
        except BaseException:
            torch.ops.neuron._capture_abort()
            raise
        leaves, spec = pytree.tree_flatten(result)
        slots = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        tensors_in = [a for a in args if isinstance(a, torch.Tensor)]
        handle, why = torch.ops.neuron._capture_end(tensors_in, [leaves[i] for i in slots], device, FUSION)
        prog = _Program(handle, why)
        taken = set(slots)
        prog.template = [None if i in taken else v for i, v in enumerate(leaves)]
        prog.tensor_slots = tuple(slots)
        prog.spec = spec
        self._remember(key, prog)
        return result

    def _remember(self, key, prog):
        if prog.handle:
            _count("programs")
            info = torch.ops.neuron._program_info(prog.handle)
            _count("program_nodes", info[1])
            _count("plan_bytes", info[3])  # the programs' buffers (the memory plan)
            _count("intermediate_bytes", info[4])  # their intermediates, without reuse
            _count("fused_pointwise_chains", info[5])
            _count("fused_pointwise_ops", info[6])
            _count("fused_matmul_epilogues", info[7])
            _count("program_tile_kernels", info[8])  # distinct tile kernels (torch_neuron.kernels) its nodes run
            self._handles.append(prog.handle)
            with _lock:
                _live.add(prog.handle)
        else:
            _count("eager_graphs")
            with _lock:
                _eager_reasons[prog.reason] += 1
            log.info("neuron: a %s graph runs op by op: %s", self.kind, prog.reason)
        self.programs[key] = prog
        if len(self.programs) > MAX_PROGRAMS_PER_GRAPH:
            _, old = self.programs.popitem(last=False)
            if old.handle:
                self._handles.remove(old.handle)
                _release([old.handle])


def _refuse_dynamic():
    import torch._dynamo.config as dynamo_config

    if not dynamo_config.assume_static_by_default:
        raise RuntimeError(
            "torch.compile(backend='neuron') does not support dynamic=True: the neuron backend compiles each "
            "graph for static shapes (a new input shape recompiles under Dynamo's guards). Use dynamic=False or "
            "leave dynamic unset.")


def _views_to_reshapes(gm):
    """AOTAutograd writes views with the strides the meta kernels give; a few
    eager kernels return another (valid) layout, on which such a view fails. A
    reshape is the same view when the layout allows it and a copy otherwise, and
    the graphs are functional (nothing writes through a view), so the results are
    the same (Inductor does the same: view_to_reshape)."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (torch.ops.aten.view.default,
                                                          torch.ops.aten._unsafe_view.default):
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        gm.recompile()
    return gm


def _tensor_attributes(gm):
    """The graph's get_attr nodes that name a tensor (constants tracing made, such
    as torch.tensor(-inf) in FlexAttention's dense kernel), with their values."""
    consts = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part, None)
            if isinstance(value, torch.Tensor):
                consts[node] = value
    return consts


def _fold_constants(gm):
    """Nodes that take no tensor, or only constants (arange, full, zeros, a
    lifted torch.tensor...) make the same tensor on every call: the graph takes
    them as inputs after its own instead, and the runner makes them once, at its
    first call (outside any fake mode), so a replay binds them rather than running
    them (arange is computed on the host and copied, and a constant's memory is
    outside the graph: a program can hold neither). Random ops are left. Returns
    the folded nodes' (op, args, kwargs, placeholder name)."""
    consts = _tensor_attributes(gm)
    folded = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if torch.Tag.nondeterministic_seeded in node.target.tags:
            continue
        if any(n not in consts and (n.op != "placeholder" or not n.name.startswith("_neuron_const_"))
               for n in node.all_input_nodes):
            continue  # it reads something other than constants
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.device.type != "neuron":
            continue
        anchor = next(n for n in gm.graph.nodes if n.op != "placeholder")  # placeholders come first
        with gm.graph.inserting_before(anchor):
            ph = gm.graph.placeholder(f"_neuron_const_{len(folded)}")
        ph.meta.update(node.meta)
        inline = lambda n: consts.get(n, n)  # noqa: E731 - constants by value, folded nodes by name
        folded.append((node.target, torch.fx.node.map_arg(node.args, inline),
                       torch.fx.node.map_arg(node.kwargs, inline), ph.name))  # before erase_node clears them
        node.replace_all_uses_with(ph)
        gm.graph.erase_node(node)
    for node in consts:
        if not node.users:
            gm.graph.erase_node(node)
    if folded:
        gm.graph.lint()
        gm.recompile()
    return folded


def _evaluate_folded(folded):
    """The folded nodes' values, in order (a node may read earlier ones)."""
    values = {}
    for op, args, kwargs, name in folded:
        env = lambda a: values[a.name] if isinstance(a, torch.fx.Node) else a  # noqa: E731
        values[name] = op(*torch.fx.node.map_aggregate(args, env), **torch.fx.node.map_aggregate(kwargs, env))
    return [values[name] for *_, name in folded]


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        gm = _views_to_reshapes(gm)
        return _GraphRunner(gm, kind, _fold_constants(gm))

    return compile_graph


def neuron_backend(gm, example_inputs, **kwargs):
    """The ``neuron`` backend of torch.compile (see the module's docstring)."""
    _refuse_dynamic()
    options = dict(kwargs.pop("options", None) or {})
    mode = kwargs.pop("mode", None)
    if kwargs or options or mode not in (None, "default"):
        raise RuntimeError(f"torch.compile(backend='neuron') takes no mode or options (got mode={mode!r}, "
                           f"options={options!r}, {kwargs!r})")
    from torch._dynamo.backends.common import aot_autograd

    _count("dynamo_graphs")
    flex_nodes = _flex_attention.decompose(gm)  # FlexAttention: its dense kernel, traced by AOTAutograd
    if flex_nodes:
        _count("flex_attention_nodes", flex_nodes)
    return aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                        inference_compiler=_compiler("inference"))(gm, example_inputs)
