#!/usr/bin/env python3
"""PyTorch's own OpInfo samples on 'neuron' against the CPU.

For every OpInfo of torch.testing._internal.common_methods_invocations.op_db that
supports float32 on the CPU, up to --samples of its float32 sample inputs run on the
CPU and on 'neuron' (the same values; non-contiguous samples stay non-contiguous)
and the outputs are compared. Each op gets one verdict:

  native       every sample matched the CPU and no op fell back to the CPU
  fallback     every sample matched, but some op ran through the CPU fallback
  unsupported  'neuron' refused a sample with a clear error naming what the
               device does not support (sparse layouts), where the CPU ran it
  fail         a sample differed from the CPU, came back on another device, or
               raised on 'neuron' where the CPU did not
  crash     the process died (a signal) while the op ran
  hang      the op ran longer than --timeout seconds

Ops run in a worker process with faulthandler on; the parent reads one JSON line
per op, and when the worker dies or stops answering it records the op as crash or
hang and starts a new worker after it, so one crash never hides the others.

  python3 tests/torch/opinfo_sweep.py [--samples 4] [--timeout 60] [--ops a,b]
         [--json FILE] [--report]

Needs a running neurond (NEURON_SOCKET). The native share is printed over the
ops the issue that introduced this sweep counted (fft.* and stft left out) and
over all of them.
"""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

# Ops whose values are random or uninitialised: only shapes and dtypes are compared.
UNCHECKED_VALUES = {
    "bernoulli", "normal", "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randn_like",
    "randint_like", "randint", "multinomial", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.feature_alpha_dropout.without_train", "nn.functional.rrelu", "empty", "empty_like",
    "new_empty", "empty_strided", "new_empty_strided", "empty_permuted", "exponential", "geometric", "cauchy",
    "log_normal", "randn", "rand", "randperm", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "torch._scaled_mm", "svd_lowrank", "pca_lowrank",
}
# Ops whose samples draw random numbers when a flag says so (dropout in training):
# those samples are compared by shape and dtype only. The device's generator is
# Philox on the chip (issue 15 item 3), not the CPU's Mersenne Twister.
RANDOM_WHEN = {
    "nn.functional.scaled_dot_product_attention": lambda kw: kw.get("dropout_p", 0.0) > 0,
    "nn.functional.multi_head_attention_forward": lambda kw: kw.get("training", True),
}


def random_sample(name, sample):
    """True if this sample's values are random (only shapes and dtypes compare)."""
    if name in UNCHECKED_VALUES:
        return True
    rule = RANDOM_WHEN.get(name)
    return bool(rule and rule(sample.kwargs))


# Samples whose tensor arguments the op wants on the host (not moved to 'neuron').
HOST_ARGS = {"tensor_split"}
# Left out of the headline share, as in the measurement that set the goal (issue 15).
HEADLINE_EXCLUDED_PREFIXES = ("fft.", "stft")

RTOL, ATOL = 1e-3, 1e-3


def full_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


# ---------------------------------------------------------------- worker side


def _flatten(x):
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        out = []
        for y in x:
            out.extend(_flatten(y))
        return out
    if isinstance(x, dict):
        out = []
        for k in sorted(x):
            out.extend(_flatten(x[k]))
        return out
    return [x]


def _compare(name, cpu_out, dev_out, values=True):
    """None if the results agree, else what differs (values=False: shapes and dtypes)."""
    import torch

    c, d = _flatten(cpu_out), _flatten(dev_out)
    if len(c) != len(d):
        return f"{len(d)} outputs, the CPU gave {len(c)}"
    for k, (a, b) in enumerate(zip(c, d)):
        if isinstance(a, torch.Tensor):
            if not isinstance(b, torch.Tensor):
                return f"output {k}: {type(b).__name__}, the CPU gave a tensor"
            if b.device.type != "neuron" and a.device.type == "cpu" and b.numel() > 0:
                return f"output {k} is on {b.device}, not on neuron"
            if a.shape != b.shape or a.dtype != b.dtype:
                return f"output {k}: {tuple(b.shape)} {b.dtype}, the CPU gave {tuple(a.shape)} {a.dtype}"
            if not values or name in UNCHECKED_VALUES or a.layout != torch.strided or a.is_complex():
                continue
            try:
                torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=RTOL, atol=ATOL, equal_nan=True,
                                           check_stride=False)
            except AssertionError as e:
                return f"output {k}: " + " ".join(str(e).split())[:300]
        elif isinstance(a, float) and isinstance(b, float):
            if not (a == b or abs(a - b) <= ATOL + RTOL * abs(a) or (a != a and b != b)):
                return f"output {k}: {b}, the CPU gave {a}"
        elif isinstance(a, (bool, int)) and a != b:
            return f"output {k}: {b}, the CPU gave {a}"
    return None


def _fallbacks():
    import torch

    s = torch.ops.neuron.fallback_counts()
    return {kv.split("=")[0]: int(kv.split("=")[1]) for kv in s.split(";") if kv}


def _to_neuron(sample, name):
    """The sample with its tensors (and any device argument) on 'neuron'."""
    import torch

    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().to("neuron")
        if isinstance(x, torch.device) or (isinstance(x, str) and x == "cpu"):
            return torch.device("neuron")
        if isinstance(x, (list, tuple)):
            return type(x)(move(y) for y in x)
        if isinstance(x, dict):
            return {k: move(v) for k, v in x.items()}
        return x

    args = sample.args if name in HOST_ARGS else tuple(move(a) for a in sample.args)
    kwargs = {k: move(v) for k, v in sample.kwargs.items()}
    return type(sample)(move(sample.input), args=args, kwargs=kwargs)


def _unsupported(err):
    """A clear refusal by the device of something it does not support."""
    msg = str(err)
    return isinstance(err, NotImplementedError) and msg.startswith("neuron:") and "not supported" in msg


def _run_sample(op, sample):
    import torch

    dev = _to_neuron(sample, full_name(op))
    try:
        cpu_out = op(sample.input, *sample.args, **sample.kwargs)
        cpu_err = None
    except Exception as e:  # the CPU rejects the sample: neuron may reject it too
        cpu_out, cpu_err = None, e
    before = _fallbacks()
    try:
        dev_out = op(dev.input, *dev.args, **dev.kwargs)
        torch.neuron.synchronize()
        # Read every output back inside the try: a device fault surfaces here.
        dev_cpu = [t.cpu() if isinstance(t, torch.Tensor) and t.layout == torch.strided else t
                   for t in _flatten(dev_out)]
        dev_err = None
    except Exception as e:
        dev_out, dev_cpu, dev_err = None, None, e
    after = _fallbacks()
    used = sorted(k for k in after if after[k] > before.get(k, 0))
    if cpu_err is not None:
        return used, None
    if dev_err is not None and _unsupported(dev_err):
        return used, "UNSUPPORTED " + " ".join(str(dev_err).split())[:300]
    if dev_err is not None:
        return used, f"raised {type(dev_err).__name__}: " + " ".join(str(dev_err).split())[:300]
    del dev_cpu
    return used, _compare(full_name(op), cpu_out, dev_out, values=not random_sample(full_name(op), sample))


def _run_op(op, max_samples):
    import torch

    fallbacks, problem, count = set(), None, 0
    try:
        samples = op.sample_inputs("cpu", torch.float32)
        for sample in samples:
            if count >= max_samples:
                break
            count += 1
            used, problem = _run_sample(op, sample)
            fallbacks.update(used)
            if problem:
                break
    except Exception as e:
        problem = f"sweep error {type(e).__name__}: " + " ".join(str(e).split())[:300]
    if problem and problem.startswith("UNSUPPORTED "):
        verdict, problem = "unsupported", problem[len("UNSUPPORTED "):]
    elif problem:
        verdict = "fail"
    elif count == 0:
        verdict = "nosamples"
    else:
        verdict = "fallback" if fallbacks else "native"
    return {"verdict": verdict, "samples": count, "fallbacks": sorted(fallbacks), "problem": problem}


def worker(args):
    import faulthandler
    import warnings

    faulthandler.enable()
    warnings.filterwarnings("ignore")
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    torch.ops.neuron.set_fallback_strict(False)
    ops = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    if args.ops:
        wanted = set(args.ops.split(","))
        ops = [op for op in ops if full_name(op) in wanted or op.name in wanted]
    print(json.dumps({"names": [full_name(op) for op in ops]}), flush=True)
    crash_op = os.environ.get("NEURON_SWEEP_CRASH_OP")  # tests of this harness
    for i in range(args.start, len(ops)):
        print(json.dumps({"start": i}), flush=True)
        if full_name(ops[i]) == crash_op:
            import ctypes

            ctypes.string_at(0)  # SIGSEGV, as a crash in an op would
        torch.manual_seed(0)
        r = _run_op(ops[i], args.samples)
        r["i"] = i
        print(json.dumps(r), flush=True)


# ---------------------------------------------------------------- parent side


def _spawn(args, start):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--start", str(start), "--samples",
           str(args.samples)]
    if args.ops:
        cmd += ["--ops", args.ops]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)


def _stop(p):
    if p.poll() is None:
        p.kill()
    p.wait()


def sweep(args):
    names, results, start = None, {}, 0
    while names is None or start < len(names):
        p = _spawn(args, start)
        current, last_line = None, time.monotonic()
        while True:
            # The first line (the op list) waits for torch's import too.
            limit = args.timeout + (120 if names is None or current is None else 0)
            ready, _, _ = select.select([p.stdout], [], [], 1.0)
            if not ready:
                if time.monotonic() - last_line > limit:
                    _stop(p)
                    if current is None:
                        raise RuntimeError("the sweep worker did not start: " + p.stderr.read()[-2000:])
                    results[current] = {"verdict": "hang", "samples": 0, "fallbacks": [],
                                        "problem": f"no result within {args.timeout} s"}
                    start = current + 1
                    break
                continue
            line = p.stdout.readline()
            if not line:  # the worker exited
                p.wait()
                err = p.stderr.read()
                if current is not None and current not in results:
                    tail = " | ".join(err.strip().splitlines()[-6:])
                    how = f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit {p.returncode}"
                    results[current] = {"verdict": "crash", "samples": 0, "fallbacks": [],
                                        "problem": f"worker died ({how}): {tail[-600:]}"}
                    start = current + 1
                elif names is None:
                    raise RuntimeError("the sweep worker failed to start: " + err[-2000:])
                else:
                    start = len(names)
                break
            last_line = time.monotonic()
            msg = json.loads(line)
            if "names" in msg:
                names = msg["names"]
            elif "start" in msg:
                current = msg["start"]
            else:
                results[msg.pop("i")] = msg
                current = None
        if p.poll() is None:
            _stop(p)
    return {names[i]: results[i] for i in sorted(results)}


def summarize(res):
    def share(keys):
        keys = [k for k in keys if res[k]["verdict"] != "nosamples"]
        native = sum(res[k]["verdict"] == "native" for k in keys)
        return native, len(keys)

    headline = [k for k in res if not k.startswith(HEADLINE_EXCLUDED_PREFIXES)]
    counts = {}
    for r in res.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    n1, d1 = share(headline)
    n2, d2 = share(list(res))
    return {"counts": counts, "headline": (n1, d1), "all": (n2, d2)}


def report(res, out=sys.stdout):
    s = summarize(res)
    by_fallback = {}
    for name, r in res.items():
        if r["verdict"] == "fallback":
            for f in r["fallbacks"]:
                by_fallback.setdefault(f, []).append(name)
    for verdict in ("crash", "hang", "fail", "unsupported"):
        for name, r in res.items():
            if r["verdict"] == verdict:
                print(f"{verdict:8s} {name}: {r['problem']}", file=out)
    print("\nfallback ops (aten op: OpInfos that reach it):", file=out)
    for f, ops in sorted(by_fallback.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {f} ({len(ops)}): {', '.join(ops)}", file=out)
    n1, d1 = s["headline"]
    n2, d2 = s["all"]
    print(f"\nverdicts: {s['counts']}", file=out)
    print(f"native: {n1} of {d1} ({100.0 * n1 / max(d1, 1):.1f}%) without fft/stft; "
          f"{n2} of {d2} ({100.0 * n2 / max(d2, 1):.1f}%) of all float32 OpInfos", file=out)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--ops", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    res = sweep(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
    s = report(res) if args.report else summarize(res)
    if not args.report:
        print(json.dumps(s))
    bad = s["counts"].get("crash", 0) + s["counts"].get("hang", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
