"""pytest fixtures for the torch_neuron suite: one neurond for the whole session.

The daemon binary comes from $NEURON_DAEMON (default: <repo>/build/daemon/neurond);
it gets a private socket, 2 cores and 8 GiB of (lazily backed) HBM, and is stopped
at the end. Tests that need a daemon of their own start one with `start_daemon`.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAEMON = os.environ.get("NEURON_DAEMON", os.path.join(REPO, "build", "daemon", "neurond"))
HBM_MIB = 8192


def start_daemon(hbm_mib=HBM_MIB, cores=2, extra=(), prefix=()):
    """prefix: a command neurond runs under (e.g. ip netns exec NAME)."""
    if not os.access(DAEMON, os.X_OK):
        pytest.exit(f"neurond not found at {DAEMON}: build the stack (meson setup build && ninja -C build) "
                    "or set NEURON_DAEMON", returncode=2)
    d = tempfile.mkdtemp(prefix="neurond-pytest-")
    sock = os.path.join(d, "neurond.sock")
    log = open(os.path.join(d, "neurond.log"), "w")
    p = subprocess.Popen([*prefix, DAEMON, "--socket", sock, "--cores", str(cores), "--hbm-mib", str(hbm_mib), *extra],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(sock):
            break
        if p.poll() is not None:
            raise RuntimeError(f"neurond exited with {p.returncode}; log in {d}")
        time.sleep(0.05)
    else:
        p.kill()
        raise RuntimeError("neurond did not create its socket within 10 s")
    return p, sock, d


def stop_daemon(p, d):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    shutil.rmtree(d, ignore_errors=True)


_session_daemon = None


def pytest_configure(config):
    # Started before collection: PyTorch's device-generic tests
    # (test_opinfo_device.py) are instantiated at import only for an available device.
    global _session_daemon
    if config.option.collectonly or os.environ.get("NEURON_PYTEST_NO_DAEMON") == "1":
        return
    _session_daemon = start_daemon()
    os.environ["NEURON_SOCKET"] = _session_daemon[1]


def pytest_unconfigure(config):
    global _session_daemon
    if _session_daemon is not None:
        stop_daemon(_session_daemon[0], _session_daemon[2])
        _session_daemon = None


@pytest.fixture(scope="session", autouse=True)
def neurond():
    if _session_daemon is None:  # --collect-only: no daemon was started
        pytest.skip("no neurond in this session")
    yield _session_daemon[1]


def run_python(code, env=None, timeout=120):
    """Runs code in a fresh interpreter; returns CompletedProcess (text)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def strict():
    """Strict mode for one test: an op without a neuron kernel raises instead of
    falling back to the CPU (the suites that check native kernels use it)."""
    import torch
    torch.ops.neuron.set_fallback_strict(True)
    yield
    torch.ops.neuron.set_fallback_strict(False)


@pytest.fixture
def fresh_dynamo():
    """Empty Dynamo caches and torch_neuron.compiler's counters around a test (the
    compile tests use it through pytestmark)."""
    import torch
    import torch_neuron.compiler as nc
    torch._dynamo.reset()
    nc.reset_stats()
    yield
    torch._dynamo.reset()

