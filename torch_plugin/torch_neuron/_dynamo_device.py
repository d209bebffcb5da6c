"""'neuron' in Dynamo's device registry (torch._dynamo.device_interface).

Dynamo and AOTAutograd ask ``get_interface_for_device(device)`` for a device's
runtime (current device, streams, synchronize, properties) when they trace code
that uses them; PyTorch registers its own devices there and out-of-tree ones
register themselves. Everything here forwards to ``torch.neuron``.

Registered right after ``torch._dynamo.device_interface`` is imported (or at
torch_neuron's load if it already was: _import_hooks), never by importing
Dynamo ourselves at ``import torch`` (it costs about a second).
"""
import importlib

import torch

from . import _device as nd

# Called at the end of that module's own import too (_import_hooks), when the
# parent package has no attribute for it yet: take it from sys.modules.
di = importlib.import_module("torch._dynamo.device_interface")

_TYPE = "neuron"


class NeuronInterface(di.DeviceInterface):
    device = nd.device  # type: ignore[assignment]
    Event = nd.Event  # type: ignore[assignment]
    Stream = nd.Stream  # type: ignore[assignment]

    class Worker:
        """Answers from values cached in the parent process (compile workers
        must not connect to neurond themselves)."""

        @staticmethod
        def set_device(device: int) -> None:
            di.caching_worker_current_devices[_TYPE] = device

        @staticmethod
        def current_device() -> int:
            return di.caching_worker_current_devices.get(_TYPE, nd.current_device())

        @staticmethod
        def get_device_properties(device=None):
            idx = NeuronInterface.Worker.current_device() if device is None else nd._index(device)
            props = di.caching_worker_device_properties.get(_TYPE)
            if props is None:
                props = [nd.get_device_properties(i) for i in range(nd.device_count())]
                di.caching_worker_device_properties[_TYPE] = props
            return props[idx]

    current_device = staticmethod(nd.current_device)
    set_device = staticmethod(nd.set_device)
    device_count = staticmethod(nd.device_count)
    is_available = staticmethod(nd.is_available)
    stream = staticmethod(nd.stream)  # type: ignore[assignment]
    current_stream = staticmethod(nd.current_stream)
    set_stream = staticmethod(nd.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(nd.synchronize)
    get_device_properties = staticmethod(nd.get_device_properties)  # type: ignore[assignment]
    memory_allocated = staticmethod(nd.memory_allocated)

    @staticmethod
    def exchange_device(device: int) -> int:
        prev = nd.current_device()
        if device >= 0 and device != prev:
            nd.set_device(device)
        return prev

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return NeuronInterface.exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        nd.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return nd.current_stream(device_idx).stream_id

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""  # no Triton, no capability levels


def register():
    """Idempotent. Under the device type only (a torch.device's index is dropped
    by the lookup; naming 'neuron:N' strings would mean asking neurond how many
    devices there are at import)."""
    if di.device_interfaces.get(_TYPE) is not NeuronInterface:
        di.register_interface_for_device(_TYPE, NeuronInterface)
