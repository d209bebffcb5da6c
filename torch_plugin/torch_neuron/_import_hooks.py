"""Run a function once a module has been imported (a post-import hook).

torch_neuron adapts two PyTorch modules that ``import torch`` does not load
(Dynamo's device registry, FlexAttention): importing them at load would cost every
user of the device about a second. Instead the adaptation runs right after the
module's own code, whenever something imports it, or at once if it is already
imported.
"""
import importlib.abc
import importlib.util
import sys
import threading
import warnings

_lock = threading.Lock()


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader, fn):
        self._loader = loader
        self._fn = fn

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._fn()


class _Finder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path; answers for one module name, once: it finds the
    real spec with the other finders and wraps its loader."""

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        with _lock:
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _HookedLoader(spec.loader, self.fn)
        return spec


def after_import(name, fn):
    """Calls fn() once module `name` is imported (now, if it already is). A
    failure of fn is a warning: the importer's import goes on."""

    def guarded():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - never break someone else's import
            warnings.warn(f"torch_neuron: adapting {name} for device 'neuron' failed: {e!r}", RuntimeWarning,
                          stacklevel=2)

    if name in sys.modules:
        guarded()
        return
    with _lock:
        sys.meta_path.insert(0, _Finder(name, guarded))
