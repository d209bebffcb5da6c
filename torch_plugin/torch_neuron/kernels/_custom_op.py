"""Tile kernels as PyTorch custom ops (torch.library.custom_op).

    @nk.custom_op("mylib::rms_norm", rmsnorm_kernel)
    def rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        return torch.empty_like(x)          # the outputs: shapes, dtypes, device

The decorated function says what the op returns; it is both the op's fake
implementation (FakeTensor/meta tracing: torch.compile, torch.export) and, on
real tensors, the allocator of the outputs the kernel then writes:
`kernel(*outputs, *tensor_args, **constants)`, the tensor parameters in the
function's order and every other parameter as a keyword constant of the same
name. What comes back is torch's CustomOpDef, so autograd is torch's
`register_autograd(backward, setup_context=...)`, with a backward that calls
another kernel op (see library.py). On `neuron` tensors the kernel runs on the
device (inside a torch.compile graph: one TILE_KERNEL node of the graph's
program); on CPU tensors it runs in the NumPy simulation.
"""

import functools
import inspect

from ._trace import KernelError

__all__ = ["custom_op"]


def _as_list(outputs, name):
    import torch
    if isinstance(outputs, torch.Tensor):
        return [outputs], True
    if isinstance(outputs, (tuple, list)) and outputs and all(isinstance(o, torch.Tensor) for o in outputs):
        return list(outputs), False
    raise KernelError(f"{name}: the op's function returns a tensor or a tuple of tensors (its outputs), "
                      f"not {type(outputs).__name__}")


def _check_outputs(name, outs, inputs):
    """Fresh, contiguous outputs on the inputs' device: the kernel writes all of
    each, and a custom op's outputs may not alias its inputs."""
    taken = {t.untyped_storage().data_ptr() for t in inputs if t.numel()}
    for k, o in enumerate(outs):
        if inputs and o.device != inputs[0].device:
            raise KernelError(f"{name}: output {k} is on {o.device}, the inputs on {inputs[0].device}")
        if not o.is_contiguous():
            raise KernelError(f"{name}: output {k} must be contiguous (allocate it with torch.empty(...))")
        if o.numel() and o.untyped_storage().data_ptr() in taken:
            raise KernelError(f"{name}: output {k} shares memory with an input; allocate it (torch.empty_like)")


def custom_op(name, kernel, *, mutates_args=()):
    """Decorator: `name` ("namespace::op") becomes a torch.library custom op that
    runs the tile kernel `kernel` (an @nk.kernel). The decorated function,
    annotated as torch.library.custom_op wants (Tensor, float, int, bool, ...),
    returns the outputs' empty tensors. Returns torch's CustomOpDef."""
    import torch

    if not hasattr(kernel, "trace"):
        raise TypeError(f"custom_op({name!r}): the kernel must be an @torch_neuron.kernels.kernel function")

    def wrap(outputs_fn):
        sig = inspect.signature(outputs_fn)
        op_name = name.split("::")[-1]

        @functools.wraps(outputs_fn)
        def impl(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            tensors, constants = [], {}
            for pname, value in bound.arguments.items():
                if isinstance(value, torch.Tensor):
                    tensors.append(value.contiguous())
                elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
                    raise KernelError(f"{op_name}: parameter {pname!r} is a list of tensors; a kernel takes "
                                      f"tensors one by one")
                else:
                    constants[pname] = tuple(value) if isinstance(value, list) else value
            outs, single = _as_list(outputs_fn(*args, **kwargs), op_name)
            _check_outputs(op_name, outs, tensors)
            traced = kernel.trace(outs + tensors, constants)
            if traced.order[:traced.outputs] != list(range(len(outs))) or traced.outputs != len(outs):
                written = sorted(traced.order[:traced.outputs])
                raise KernelError(f"{op_name}: the kernel must store into exactly its first {len(outs)} "
                                  f"argument(s) (the op's outputs); it stores into arguments {written}")
            kernel.run(traced, outs + tensors)  # traced just above: no second cache lookup
            return outs[0] if single else tuple(outs)

        op = torch.library.custom_op(name, mutates_args=mutates_args)(impl)
        op.register_fake(outputs_fn)
        op.kernel = kernel
        return op

    return wrap
