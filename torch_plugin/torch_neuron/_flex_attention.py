"""FlexAttention (``torch.nn.attention.flex_attention``) on 'neuron'.

Two pieces, both relying on PyTorch internals that ``tests/torch/test_flex_attention.py``
guards (a torch upgrade that changes them fails that test with a message saying what
moved):

1. ``allow_neuron()``: PyTorch 2.13's ``flex_attention`` calls the module-level
   ``_validate_device``, which refuses devices other than CUDA, CPU, XPU, HPU and
   MPS. It is looked up in the module's globals at each call (eagerly and when
   Dynamo traces ``flex_attention``), so wrapping that one attribute is enough: the
   wrapper accepts 'neuron' (forward and backward: the dense implementation below
   is differentiable) and hands every other device to PyTorch's own check
   unchanged. This is how out-of-tree backends (Ascend's torch_npu, MUSA) do it.

2. ``decompose(gm)``: in a Dynamo graph, FlexAttention is one node, the
   ``flex_attention`` higher-order op with the score_mod and mask_mod as
   subgraphs. Inductor would generate a fused kernel for it; the neuron backend
   instead replaces the node by the op's own dense kernel (the one PyTorch runs for
   eager FlexAttention: the scores materialised, score_mod and mask_mod applied
   through vmap, a safe softmax). AOTAutograd then traces that kernel into aten
   ops, differentiates them for the backward graph, and both graphs become chip
   programs like any other. The block mask's sparsity is not exploited (the dense
   kernel applies mask_mod to every score), so results are exact but the work is
   that of a full attention.
"""
import torch

_FLEX_MODULE = "torch.nn.attention.flex_attention"
DEVICE = "neuron"


def _validate_device_wrapper(original):
    def _validate_device(query, key, value):
        # q, k and v are on one device (checked before this by flex_attention).
        if query.device.type == DEVICE:
            return
        original(query, key, value)

    _validate_device._neuron_original = original
    _validate_device.__wrapped__ = original
    _validate_device.__doc__ = f"PyTorch's _validate_device, which also accepts '{DEVICE}' (torch_neuron)."
    return _validate_device


def allow_neuron():
    """Makes flex_attention accept 'neuron' tensors (idempotent)."""
    import importlib

    fa = importlib.import_module(_FLEX_MODULE)
    current = getattr(fa, "_validate_device", None)
    if current is None:
        raise RuntimeError(f"{_FLEX_MODULE} has no _validate_device any more: torch_neuron's FlexAttention "
                           "support must be updated for this torch")
    if getattr(current, "_neuron_original", None) is None:
        fa._validate_device = _validate_device_wrapper(current)


def dense_kernel():
    """The flex_attention higher-order op's dense kernel (what eager FlexAttention runs)."""
    from torch._higher_order_ops.flex_attention import flex_attention as hop

    kernel = hop.py_kernels.get(torch._C.DispatchKey.CompositeExplicitAutograd)
    if kernel is None:
        raise RuntimeError("torch's flex_attention higher-order op has no CompositeExplicitAutograd (dense) "
                           "kernel any more: torch_neuron's FlexAttention support must be updated for this torch")
    return kernel


def decompose(gm):
    """Replaces every flex_attention node of a Dynamo graph by the dense kernel, in
    place (same arguments, same three results). Returns how many it replaced."""
    hop = getattr(torch.ops.higher_order, "flex_attention", None)
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and hop is not None and n.target is hop]
    if not nodes:
        return 0
    kernel = dense_kernel()
    for node in nodes:
        node.target = kernel
    gm.recompile()
    return len(nodes)
