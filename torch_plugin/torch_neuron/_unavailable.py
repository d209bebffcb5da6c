"""``torch.neuron`` when the native extension did not load: the device is
unavailable and says why; seeding is a no-op so CPU programs run unchanged."""
_reason = "torch_neuron's native extension is not loaded"


def load_error():
    return _reason


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def _is_in_bad_fork() -> bool:
    return False


def manual_seed(seed) -> None:
    pass


def manual_seed_all(seed) -> None:
    pass


def get_amp_supported_dtype():
    return []


def _unavailable(*args, **kwargs):
    raise RuntimeError(_reason)


init = _lazy_init = current_device = set_device = synchronize = _unavailable
fallback_ops = native_ops = reset_op_counts = _unavailable
get_rng_state = set_rng_state = _unavailable
