"""torch_neuron: the PyTorch backend for device 'neuron' (PrivateUse1) over neurond.

Loaded automatically by ``import torch`` through the ``torch.backends`` entry point
(set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to disable); importing it by hand is harmless.
Environment switches:
  NEURON_SOCKET=PATH              neurond's socket (default /run/neuron/neurond.sock for root)
  TORCH_NEURON_FALLBACK=error     ops without a neuron kernel raise instead of running on the CPU
  TORCH_NEURON_ADAPTIVE_EAGER=1   adaptive eager on from the start (torch.neuron.set_adaptive_eager)

If the native extension cannot be loaded (built for another torch, a broken
install), ``import torch`` still works: one warning says what is wrong and how to
rebuild, and ``torch.neuron.is_available()`` is False.
"""
import os
import warnings


def _autoload():
    """Entry point of the ``torch.backends`` group, called at the end of ``import torch``.

    Defined before ``import torch`` below: when a script imports torch_neuron first,
    that import of torch runs this entry point on this half-initialised module, and a
    missing attribute would make torch's import fail. Loading is done by the last
    lines of this module either way (the entry point imports it), so this is empty.
    """


import torch  # noqa: E402

__all__ = ["fallback_ops", "native_ops", "reset_op_counts", "load_error"]

_loaded = False
_load_error = None


def _built_for():
    try:
        from . import _build_info
    except ImportError:  # a source tree without a build
        return None, None
    return _build_info.TORCH_VERSION, _build_info.CXX11_ABI


def _check_build():
    """Raises ImportError if _C.so was built for another torch: its C++ ABI is not
    stable across versions, and loading it could fail or abort the process."""
    version, abi = _built_for()
    if version is not None and (version != torch.__version__ or bool(abi) != torch.compiled_with_cxx11_abi()):
        raise ImportError(f"it was built for torch {version} (C++11 ABI {bool(abi)}) but this is torch "
                          f"{torch.__version__} (C++11 ABI {torch.compiled_with_cxx11_abi()})")


def _explain(err):
    return (f"torch_neuron: device 'neuron' is unavailable: the native extension did not load: {err}. "
            f"Rebuild it for the installed torch {torch.__version__}: `bash torch_plugin/build.sh` in the Neuron "
            "source tree (or install the torch_neuron wheel built for this torch). "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading torch_neuron.")


def _load():
    global _loaded, _load_error
    if _loaded or _load_error is not None:
        return
    try:
        _check_build()
        torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))
    except (ImportError, OSError, RuntimeError) as e:
        # torch.ops.load_library wraps the loader's message; keep the original.
        _load_error = _explain(f"{e} ({e.__cause__})" if e.__cause__ else e)
        warnings.warn(_load_error, RuntimeWarning, stacklevel=2)
        _register_unavailable()
        return
    _loaded = True
    torch.utils.rename_privateuse1_backend("neuron")
    from . import _device

    torch._register_device_module("neuron", _device)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    _patch_printing()
    from . import _distributed, _import_hooks

    _distributed.register()
    # Modules `import torch` does not load: adapted when (if) they are imported.
    _import_hooks.after_import("torch._dynamo.device_interface", _register_dynamo_device)
    _import_hooks.after_import("torch.nn.attention.flex_attention", _allow_flex_attention)
    if os.environ.get("TORCH_NEURON_ADAPTIVE_EAGER", "") not in ("", "0"):
        _device.set_adaptive_eager(True)


def _register_dynamo_device():
    from . import _dynamo_device

    _dynamo_device.register()


def _allow_flex_attention():
    from . import _flex_attention

    _flex_attention.allow_neuron()


def _register_unavailable():
    # `torch.neuron` still answers (is_available() is False, seeding is a no-op),
    # so code that probes for the device carries on with the CPU.
    from . import _unavailable

    _unavailable._reason = _load_error
    try:
        torch.utils.rename_privateuse1_backend("neuron")
        torch._register_device_module("neuron", _unavailable)
    except RuntimeError:  # another backend took PrivateUse1
        pass


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


def load_error():
    """Why the native extension did not load (None if it did)."""
    return _load_error


_load()

if _loaded:
    from ._device import fallback_ops, native_ops, reset_op_counts  # noqa: E402
else:
    from ._unavailable import fallback_ops, native_ops, reset_op_counts  # noqa: E402
