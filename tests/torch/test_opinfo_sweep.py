"""PyTorch's own OpInfo samples (float32) on 'neuron' against the CPU (opinfo_sweep.py):
no op may crash or hang the process, none may give a wrong result, and at least 85%
of the ops (fft/stft left out, as the measurement that set the goal) must run with
no CPU fallback. Also checks that the harness itself reports a crash as one."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(HERE, "opinfo_sweep.py")

# Ops whose float32 samples differ from the CPU for a reason that is not a bug of
# the device, with that reason.
_F64 = ("float64 is stored and computed as float32 on 'neuron' (DESIGN.md): a result asked for in float64 "
        "comes back as float32")
KNOWN_MISMATCHES = {
    "double": _F64, "float_power": _F64, "to": _F64, "softmax.with_dtype": _F64, "log_softmax.with_dtype": _F64,
    "nn.functional.softmin.with_dtype": _F64,
    "as_strided.partial_views": "as_strided reads storage outside the sample's view, which .to('neuron') does not copy",
    "linalg.eigh": "eigenvectors are unique up to sign; the chip's LAPACK (OpenBLAS) picks other signs than the "
                   "CPU's (its eigenvalues match; test_linalg.py checks the vectors by reconstruction)",
}


def run_sweep(*args, env=None, timeout=1800):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, SWEEP, *args], capture_output=True, text=True, timeout=timeout, env=e)


def test_sweep_reports_a_crash_and_goes_on(tmp_path):
    out = tmp_path / "r.json"
    r = run_sweep("--ops", "abs,neg", "--samples", "1", "--json", str(out),
                  env={"NEURON_SWEEP_CRASH_OP": "abs"}, timeout=600)
    res = json.loads(out.read_text())
    assert res["abs"]["verdict"] == "crash", res
    assert "SIGSEGV" in res["abs"]["problem"] or "-11" in res["abs"]["problem"], res["abs"]
    assert res["neg"]["verdict"] == "native", res
    assert r.returncode == 1  # a crash fails the sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "opinfo.json"
    r = run_sweep("--samples", os.environ.get("NEURON_SWEEP_SAMPLES", "4"), "--json", str(out), "--report")
    print(r.stdout[-20000:])
    assert os.path.exists(out), r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r


def test_no_crash_or_hang(sweep):
    res, r = sweep
    bad = {k: v["problem"] for k, v in res.items() if v["verdict"] in ("crash", "hang")}
    assert not bad, bad
    assert r.returncode == 0


def test_no_wrong_results(sweep):
    res, _ = sweep
    bad = {k: v["problem"] for k, v in res.items() if v["verdict"] == "fail" and k not in KNOWN_MISMATCHES}
    assert not bad, bad


def test_native_share(sweep):
    res, _ = sweep
    counted = [k for k, v in res.items() if not k.startswith(("fft.", "stft")) and v["verdict"] != "nosamples"]
    native = [k for k in counted if res[k]["verdict"] == "native"]
    share = len(native) / len(counted)
    rest = sorted(set(counted) - set(native))
    assert share >= 0.85, f"{len(native)} of {len(counted)} ({share:.1%}) native; not native: {rest}"
