"""torch_neuron.kernels: a tile-level kernel language for the NeuronCore.

    import torch_neuron.kernels as nk

    @nk.kernel
    def scale_rows(out, x, s):            # out[R, H] = x * s[R] (one value per row)
        R, H = x.shape
        for i in nk.affine_range(nk.cdiv(R, 128)):
            rows = slice(i * 128, i * 128 + 128)
            t = nk.load(x[rows, :])
            f = nk.load(s[rows, :])       # s is [R, 1]
            nk.store(out[rows, :], t * f)

    scale_rows(out, x, s)                 # neuron tensors: runs on the device
    scale_rows(out, x, s, simulate=True)  # the same program on the CPU (NumPy)

A kernel's first argument(s) are the outputs it writes (tensors the caller
allocates); the function is traced once per shape/dtype signature (and keyword
constants) into a tile program (contracts/include/neuron/tile.h): data that
neurond validates once and runs on the simulated core's engines, preemptible
between loop iterations. See torch_plugin/README.md, "Writing kernels".

`custom_op` makes a kernel a torch.library custom op (fake implementation,
autograd through a backward kernel, a node of torch.compile graphs), and
`torch_neuron.kernels.library` holds kernels built that way (RMSNorm, SwiGLU,
rotary embedding, flash attention, the MoE blockwise matmul, each with its
backward) and the tiled matmul. Affine loops are checked for write conflicts when
traced (_writes.py); `static_range` unrolls a loop at trace time (triangular loops).
"""

import functools
import os
import re

from . import _format, _simulate
from ._custom_op import custom_op
from ._trace import (Affine, HBMTensor, KernelError, Tracer, affine_range, cdiv, dtype_code, sequential_range,
                     source_line, static_range, tracing)
from .language import (Tile, abs, activation, activation_reduce, assign, copy, erf, exp, float16, float32, full,
                       gelu, int32, iota, load, log, max, maximum, min, minimum, nc_matmul, psum, reciprocal, relu,
                       rsqrt, sbuf, sigmoid, silu, sqrt, store, sum, tanh, tensor_scalar, tensor_tensor, transpose,
                       where, zeros)
from .language import bfloat16  # noqa: F401  (a dtype name, as torch's)

__all__ = ["kernel", "Kernel", "custom_op", "KernelError", "affine_range", "sequential_range", "static_range", "cdiv",
           "load", "store", "copy", "assign", "zeros", "full", "nc_matmul", "transpose", "activation",
           "activation_reduce", "tensor_tensor", "tensor_scalar", "where", "sum",
           "max", "min", "maximum", "minimum", "iota", "exp", "log", "sqrt", "rsqrt", "relu", "gelu", "silu", "tanh",
           "sigmoid", "erf", "reciprocal", "abs", "Tile", "sbuf", "psum", "float32", "bfloat16", "float16", "int32"]


class Traced:
    """One signature's tile program: its wire form, which arguments it writes
    (they come first in the program's order), and the order it takes them in."""

    def __init__(self, image, order, outputs, file, insns):
        self.image, self.order, self.outputs, self.file, self.insns = image, order, outputs, file, insns
        self.handles = {}  # device -> the registered program (neuron device path)


class Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.cache = {}
        functools.update_wrapper(self, fn)

    def trace(self, tensors, constants):
        import torch
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                raise KernelError(f"{self.fn.__name__}: tensor arguments come first; got {type(t).__name__} "
                                  f"(pass constants by keyword)")
            if not t.is_contiguous():
                raise KernelError(f"{self.fn.__name__}: arguments must be contiguous (call .contiguous())")
        key = (tuple((tuple(t.shape), t.dtype) for t in tensors), tuple(sorted(constants.items())))
        if key in self.cache:
            return self.cache[key]
        tracer = Tracer(self.fn)
        args = [HBMTensor(k, tuple(t.shape), dtype_code(t.dtype)) for k, t in enumerate(tensors)]
        try:
            with tracing(tracer):
                self.fn(*args, **constants)
        except KernelError as e:
            raise self._at(tracer, e) from None
        if not tracer.insns:
            raise KernelError(f"{self.fn.__name__} emits no tile operation")
        written = sorted(tracer.written)
        if not written:
            raise KernelError(f"{self.fn.__name__} stores into none of its arguments")
        order = written + [k for k in range(len(args)) if k not in tracer.written]
        position = {k: n for n, k in enumerate(order)}
        for insn in tracer.insns:
            for op in insn.get("operands", []):
                if op["space"] == _format.HBM:
                    op["arg"] = position[op["arg"]]
        image = _format.pack([args[k].nbytes for k in order], tracer.insns)
        traced = Traced(image, order, len(written), tracer.file, tracer.insns)
        self.cache[key] = traced
        return traced

    def _at(self, tracer, e):
        line = 0  # the deepest frame of the kernel's file in the traceback
        tb = e.__traceback__
        while tb is not None:
            if os.path.abspath(tb.tb_frame.f_code.co_filename) == tracer.file:
                line = tb.tb_lineno
            tb = tb.tb_next
        return KernelError(f"{tracer.file}:{line}: {e}\n    {source_line(tracer.file, line)}")

    def refusal(self, traced, why):
        """neurond's refusal, pointing at the kernel's line it names."""
        m = re.search(r"line (\d+)", why)
        if not m:
            return KernelError(f"{self.fn.__name__}: {why}")
        line = int(m.group(1))
        return KernelError(f"{traced.file}:{line}: {why}\n    {source_line(traced.file, line)}")

    def __call__(self, *tensors, simulate=None, **constants):
        return self.run(self.trace(tensors, constants), tensors, simulate)

    def run(self, traced, tensors, simulate=None):
        """Runs a program trace() returned for these tensors' signature."""
        ordered = [tensors[k] for k in traced.order]
        if simulate is None:
            simulate = os.environ.get("NEURON_KERNEL_SIMULATE", "") == "1" or all(
                t.device.type == "cpu" for t in tensors)
        if simulate:
            return _run_simulated(traced, ordered)
        return _run_device(self, traced, ordered)


def _run_simulated(traced, ordered):
    import torch
    host = [t.detach().cpu().contiguous() for t in ordered]
    arrays = [h.view(torch.uint8).reshape(-1).numpy() if h.numel() else h.numpy() for h in host]
    _simulate.run(traced.image, arrays)
    for k in range(traced.outputs):
        if ordered[k].device.type != "cpu" or ordered[k].data_ptr() != host[k].data_ptr():
            ordered[k].copy_(host[k])


def _run_device(kern, traced, ordered):
    import torch
    device = ordered[0].device
    if any(t.device != device for t in ordered) or device.type != "neuron":
        raise KernelError(f"{kern.fn.__name__}: every argument on one neuron device (or all on the CPU "
                          f"to simulate)")
    index = device.index or 0
    handle = traced.handles.get(index)
    if handle is None:
        image = torch.frombuffer(bytearray(traced.image), dtype=torch.uint8)
        handle, why = torch.ops.neuron._tile_kernel_register(image, traced.outputs, index)
        if not handle:
            raise kern.refusal(traced, why)
        traced.handles[index] = handle
    torch.ops.neuron._tile_kernel_run(handle, list(ordered))


def kernel(fn):
    """Makes `fn` a tile kernel (see the module's doc)."""
    return Kernel(fn)
