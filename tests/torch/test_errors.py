"""Errors: out of memory, device faults, lost daemon, fallback warnings, strict
mode, float64 and view ops."""
import os
import warnings

import pytest
import torch

from conftest import run_python, start_daemon, stop_daemon


def test_out_of_memory_is_an_exception():
    with pytest.raises(torch.OutOfMemoryError, match="out of device memory"):
        torch.empty(3 * 2**30, device="neuron")  # 12 GiB on an 8 GiB device
    # the process is still fine
    assert (torch.ones(3, device="neuron") * 2).sum().item() == 6


def test_device_fault_surfaces_with_reason_and_stream_recovers():
    torch.ops.neuron._inject_fault(0)
    with pytest.raises(RuntimeError, match="device fault"):
        torch.neuron.synchronize()
    assert (torch.ones(4, device="neuron") + 1).cpu().tolist() == [2.0] * 4


def test_index_out_of_range_is_a_device_error():
    e = torch.randn(5, 3, device="neuron")
    with pytest.raises(RuntimeError, match="out of range"):
        e.index_select(0, torch.tensor([1, 7], device="neuron")).cpu()
    assert e.sum().cpu().numel() == 1


def test_lost_daemon_raises_not_hangs():
    p, sock, d = start_daemon(hbm_mib=512)
    try:
        code = ("import torch, os, signal\n"
                "x = torch.ones(1000, device='neuron')\n"
                "torch.neuron.synchronize()\n"
                f"os.kill({p.pid}, signal.SIGKILL)\n"
                "import time; time.sleep(0.5)\n"
                "try:\n"
                "    (x * 2).cpu()\n"
                "    print('NO ERROR')\n"
                "except RuntimeError as e:\n"
                "    print('ERR', e)\n")
        r = run_python(code, env={"NEURON_SOCKET": sock}, timeout=60)
        assert "ERR" in r.stdout, r.stdout + r.stderr
        assert "neurond" in r.stdout
    finally:
        stop_daemon(p, d)


def test_fallback_warns_once_and_counts():
    torch.neuron.reset_op_counts()
    x = torch.randn(8, device="neuron")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = torch.mode(x, 0).values  # an op without a neuron kernel (COVERAGE.md)
        b = torch.mode(x, 0).values
    msgs = [str(m.message) for m in w if "mode" in str(m.message)]
    assert len(msgs) <= 1  # once per op name per process (may have been shown earlier)
    torch.testing.assert_close(a.cpu(), torch.mode(x.cpu(), 0).values)
    assert a.device.type == "neuron"
    assert torch.neuron.fallback_ops().get("aten::mode", 0) == 2


def test_strict_mode_env_switch(neurond):
    code = ("import torch\nx = torch.randn(4, device='neuron')\n"
            "print((x + 1).sum().item() is not None)\n"
            "try:\n    torch.mode(x, 0)\n    print('NO ERROR')\n"
            "except RuntimeError as e:\n    print('ERR', e)\n")
    r = run_python(code, env={"TORCH_NEURON_FALLBACK": "error"})
    assert "True" in r.stdout and "ERR" in r.stdout and "TORCH_NEURON_FALLBACK" in r.stdout, r.stdout + r.stderr


def test_float64_runs_as_float32_with_one_warning(neurond):
    code = ("import torch, warnings\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    x = torch.randn(3, dtype=torch.float64).to('neuron')\n"
            "    y = torch.zeros(2, dtype=torch.float64, device='neuron')\n"
            "n = sum('float64' in str(m.message) for m in w)\n"
            "print(x.dtype, y.dtype, n)\n")
    r = run_python(code)
    assert r.stdout.strip() == "torch.float32 torch.float32 1", r.stdout + r.stderr


def test_view_ops_never_fall_back():
    x = torch.randn(4, 4, device="neuron")
    v = x.diagonal()  # composite view over as_strided
    v.fill_(0)
    assert x.cpu().diagonal().abs().sum().item() == 0
    # Complex views are device views of the same memory (issue 15 item 7), not CPU copies.
    c = torch.view_as_complex(x.view(4, 2, 2))
    assert c.device.type == "neuron" and c.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(c.cpu(), torch.view_as_complex(x.cpu().view(4, 2, 2)))
