"""torch_neuron: the PyTorch backend for device 'neuron' (PrivateUse1) over neurond.

Loaded automatically by ``import torch`` through the ``torch.backends`` entry point
(set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to disable); importing it by hand is harmless.
Environment switches:
  NEURON_SOCKET=PATH              neurond's socket (default /run/neuron/neurond.sock for root)
  TORCH_NEURON_FALLBACK=error     ops without a neuron kernel raise instead of running on the CPU
"""
import os

import torch

__all__ = ["fallback_ops", "native_ops", "reset_op_counts"]

_loaded = False


def _load():
    global _loaded
    if _loaded:
        return
    _loaded = True
    torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))
    torch.utils.rename_privateuse1_backend("neuron")
    from . import _device

    torch._register_device_module("neuron", _device)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    _patch_printing()


def _patch_printing():
    # Formatting a tensor runs a dozen small reductions on its data; do that on a host
    # copy (as torch does for XLA) instead of on the device through the fallback.
    import torch._tensor_str as ts

    orig = ts._tensor_str
    if getattr(orig, "_neuron", False):
        return

    def _tensor_str(self, indent):
        if self.device.type == "neuron":
            with torch.no_grad():
                self = self.to("cpu")
        return orig(self, indent)

    _tensor_str._neuron = True
    ts._tensor_str = _tensor_str


def _autoload():
    """Entry point of the ``torch.backends`` group: called at the end of ``import torch``."""
    try:
        _load()
    except OSError as e:  # a broken install must not break `import torch`
        import warnings

        warnings.warn(f"torch_neuron could not load its native library: {e}; device 'neuron' is unavailable")


_load()

from ._device import fallback_ops, native_ops, reset_op_counts  # noqa: E402
