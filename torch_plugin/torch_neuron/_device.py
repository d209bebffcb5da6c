"""The ``torch.neuron`` device module."""
import contextlib

import torch

_ops = torch.ops.neuron

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "synchronize",
    "is_initialized", "init", "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "empty_cache", "memory_stats", "memory_snapshot", "mem_get_info",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "get_device_name", "get_device_properties", "get_amp_supported_dtype",
    "fallback_ops", "native_ops", "reset_op_counts",
    "set_adaptive_eager", "is_adaptive_eager", "adaptive_eager_stats", "reset_adaptive_eager_stats",
]


def _index(dev=None, optional=True):
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        return dev
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "neuron":
            raise ValueError(f"expected a neuron device, got {dev}")
        return current_device() if dev.index is None else dev.index
    raise TypeError(f"invalid device {dev!r}")


def is_available() -> bool:
    return bool(_ops.is_available())


def device_count() -> int:
    return int(_ops.device_count())


def is_initialized() -> bool:
    """Whether this process has connected to neurond (never connects by itself)."""
    return bool(_ops._connected())


def init():
    """Connects to neurond now (raises with instructions if it is not running)."""
    _ops.init()


def _lazy_init():
    _ops.init()


def _is_in_bad_fork() -> bool:
    return False


def current_device() -> int:
    return int(_ops.current_device())


def set_device(device) -> None:
    _ops.set_device(_index(device))


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device):
        self.idx = _index(device) if device is not None else -1
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            set_device(self.prev)
        return False


def synchronize(device=None) -> None:
    """Waits for all work on all streams of the device."""
    _ops.synchronize(_index(device))


# ---- streams and events (routed through the C++ device guard) ----

class Stream(torch.Stream):
    """A neuron stream: its own core and DMA queues; work on it runs in order."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("neuron", _index(device)), priority=priority)


class Event(torch.Event):
    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, device=torch.device("neuron", current_device()), enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(torch.device("neuron", _index(device)))


def default_stream(device=None) -> torch.Stream:
    idx = _index(device)
    return torch.Stream(stream_id=0, device_index=idx, device_type=_privateuse1_type())


def _privateuse1_type():
    # c10::DeviceType::PrivateUse1
    return 20


def set_stream(stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(s):
    if s is None:
        yield
        return
    prev = current_stream(s.device)
    set_stream(s)
    try:
        yield
    finally:
        set_stream(prev)


# ---- memory ----

def _stats(device):
    return list(_ops.memory_stats(_index(device)))


def memory_allocated(device=None) -> int:
    return _stats(device)[0]


def memory_reserved(device=None) -> int:
    return _stats(device)[1]


def max_memory_allocated(device=None) -> int:
    return _stats(device)[2]


def max_memory_reserved(device=None) -> int:
    return _stats(device)[3]


def reset_peak_memory_stats(device=None) -> None:
    _ops.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns cached, unused device memory to neurond."""
    _ops.empty_cache()


def memory_stats(device=None) -> dict:
    return torch.accelerator.memory_stats(torch.device("neuron", _index(device)))


def memory_snapshot():
    """The caching allocator's segments and their blocks (as torch.cuda.memory_snapshot):
    a list of dicts with device, address, total_size, allocated_size, requested_size,
    stream, segment_type ('small' or 'large') and blocks (address, size,
    requested_size, state 'active_allocated' or 'inactive')."""
    flat = list(_ops.memory_snapshot())
    out, i = [], 0
    while i < len(flat):
        device, addr, size, stream, n = flat[i:i + 5]
        i += 5
        blocks = []
        for _ in range(n):
            b_addr, b_size, req, alloc = flat[i:i + 4]
            i += 4
            blocks.append({"address": b_addr, "size": b_size, "requested_size": req,
                           "state": "active_allocated" if alloc else "inactive"})
        out.append({"device": device, "address": addr, "total_size": size, "stream": stream,
                    "segment_type": "small" if size <= (1 << 20) else "large",
                    "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
                    "requested_size": sum(b["requested_size"] for b in blocks), "blocks": blocks})
    return out


def mem_get_info(device=None):
    cores, total, used = _ops.device_info(_index(device))
    return total - used, total


def get_device_name(device=None) -> str:
    return _ops.device_name(_index(device))


class _Props:
    def __init__(self, idx):
        cores, total, _used = _ops.device_info(idx)
        self.name = _ops.device_name(idx)
        self.total_memory = total
        self.core_count = cores
        self.multi_processor_count = cores

    def __repr__(self):
        return f"NeuronDeviceProperties(name={self.name!r}, total_memory={self.total_memory // 2**20}MB, cores={self.core_count})"


def get_device_properties(device=None):
    return _Props(_index(device))


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


# ---- random numbers ----

def _as_int64(seed):
    # Seeds are 64-bit unsigned (torch.seed() draws from all of them); the op takes int64.
    seed = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def manual_seed(seed) -> None:
    _ops.manual_seed(current_device(), _as_int64(seed))


def manual_seed_all(seed) -> None:
    """Seeds every device's default generator; does not connect to neurond."""
    _ops.manual_seed_all(_as_int64(seed))


def seed() -> None:
    import random
    manual_seed(random.getrandbits(63))


def seed_all() -> None:
    import random
    manual_seed_all(random.getrandbits(63))


def initial_seed() -> int:
    return int(_ops.initial_seed(current_device())) & 0xFFFF_FFFF_FFFF_FFFF


def get_rng_state(device="neuron") -> torch.Tensor:
    """The device generator's state: 16 bytes (Philox seed and offset, uint8, on the CPU)."""
    return _ops.get_rng_state(_index(device))


def set_rng_state(new_state, device="neuron") -> None:
    _ops.set_rng_state(_index(device), new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for i, s in enumerate(states):
        set_rng_state(s, i)


# ---- op accounting ----

def _parse(s):
    out = {}
    for item in s.split(";"):
        if item:
            k, v = item.rsplit("=", 1)
            out[k] = int(v)
    return out


def fallback_ops() -> dict:
    """ATen ops that ran on the CPU through the fallback since the last reset, with counts."""
    return _parse(_ops.fallback_counts())


def native_ops() -> dict:
    """ATen ops that ran as neuron kernels since the last reset, with counts."""
    return _parse(_ops.native_counts())


def reset_op_counts() -> None:
    _ops.reset_op_counts()


# Adaptive eager (csrc/adaptive_eager.h; torch_plugin/README.md, "Adaptive eager").
_ADAPTIVE_COUNTERS = ("segments", "forms_registered", "programs", "replayed_segments", "replayed_chunks",
                      "replayed_commands", "held_then_plain", "fallbacks", "refused")


def set_adaptive_eager(enabled: bool, *, warmup: int = 2, chunk: int = 64) -> None:
    """Turns adaptive eager on or off for the process.

    On: each stream's command segments (the commands between two synchronization
    points: .item(), synchronize(), a host<->device copy, an event) are recorded; a
    segment seen ``warmup`` times with the same commands (tensors may sit at other
    addresses) is registered with neurond as programs of ``chunk`` commands, and
    later occurrences are replayed through them while each command is checked
    against the recording; any difference submits the held commands as plain eager.
    Off: held work is submitted and the programs are released. Results are those of
    plain eager. Also ``TORCH_NEURON_ADAPTIVE_EAGER=1`` at import."""
    _ops._adaptive_set(bool(enabled), int(warmup), int(chunk))


def is_adaptive_eager() -> bool:
    return bool(_ops._adaptive_enabled())


def adaptive_eager_stats() -> dict:
    """Counters since the last reset: segments ended, forms registered and their
    programs, segments / chunks / commands replayed, commands held back and then
    submitted plain, fallbacks (a replay abandoned), forms neurond refused; and the
    last fallback's and refusal's reasons."""
    counts, last_fallback, last_refusal = _ops._adaptive_stats()
    out = dict(zip(_ADAPTIVE_COUNTERS, (int(c) for c in counts)))
    out["last_fallback"] = last_fallback
    out["last_refusal"] = last_refusal
    return out


def reset_adaptive_eager_stats() -> None:
    _ops._adaptive_reset_stats()
