"""A broken install must not break `import torch` (issue 15 item 5): an extension
built for another torch, or one that fails to load (an undefined symbol, as after
an ABI change), leaves torch working, warns once what is wrong and how to
rebuild, and makes 'neuron' unavailable. Also: the wheel pins its torch."""
import glob
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_neuron

PKG = os.path.dirname(torch_neuron.__file__)
PROBE = textwrap.dedent("""
    import warnings, torch
    x = torch.randn(3) * 2
    torch.manual_seed(0)
    print("torch ok", x.shape)
    print("available", torch.neuron.is_available(), torch.neuron.device_count())
    import torch_neuron
    print("error", torch_neuron.load_error() is not None)
""")


def _broken_copy(tmp_path, build_info=None, so_source=None):
    """A copy of the installed package, shadowing it on PYTHONPATH."""
    dst = tmp_path / "torch_neuron"
    shutil.copytree(PKG, dst, ignore=shutil.ignore_patterns("__pycache__"))
    if build_info is not None:
        (dst / "_build_info.py").write_text(build_info)
    if so_source is not None:
        src = tmp_path / "broken.c"
        src.write_text(so_source)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(dst / "_C.so"), str(src)], check=True)
    return tmp_path


def _run(path):
    env = dict(os.environ, PYTHONPATH=str(path), PYTHONWARNINGS="default")
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)


def _check_degraded(r, needle):
    assert r.returncode == 0, r.stderr
    assert "torch ok torch.Size([3])" in r.stdout
    assert "available False 0" in r.stdout and "error True" in r.stdout, r.stdout
    assert r.stderr.count("device 'neuron' is unavailable") == 1, r.stderr
    assert needle in r.stderr and "torch_plugin/build.sh" in r.stderr, r.stderr


def test_extension_built_for_another_torch(tmp_path):
    path = _broken_copy(tmp_path, build_info='TORCH_VERSION = "2.12.0+cpu"\nCXX11_ABI = 1\n')
    _check_degraded(_run(path), "built for torch 2.12.0+cpu")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the broken extension")
def test_extension_with_an_undefined_symbol(tmp_path):
    # What an ABI break looks like: the library references a symbol this torch lacks.
    so = "extern void _ZN3c1020symbol_removed_in_this_torchEv(void);\n" \
         "void touch(void) { _ZN3c1020symbol_removed_in_this_torchEv(); }\n"
    path = _broken_copy(tmp_path, so_source=so)
    _check_degraded(_run(path), "undefined symbol")


def test_the_working_install_loads():
    r = _run(os.path.dirname(PKG))
    assert r.returncode == 0 and "error False" in r.stdout, r.stdout + r.stderr
    assert "unavailable" not in r.stderr


def test_wheel_pins_the_torch_it_was_built_against():
    from importlib.metadata import requires
    reqs = requires("torch_neuron") or []
    assert f"torch=={torch.__version__}" in reqs, reqs
    from torch_neuron import _build_info
    assert _build_info.TORCH_VERSION == torch.__version__
