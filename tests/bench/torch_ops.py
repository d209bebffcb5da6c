"""Time per call of single ops that a transformer training step runs on 'neuron'
(device work included: synchronize before each clock read) against PyTorch's CPU
kernels on one thread, and their ratio. Shapes: the TinyLM of tests/torch/models.py
(256 tokens, d 64, ff 256, vocab 96).

  python tests/bench/torch_ops.py [--reps N]

Starts a private neurond unless NEURON_SOCKET points at one ($NEURON_DAEMON, else
build/daemon/neurond)."""
import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "torch_plugin", "examples"))
sys.path.insert(0, os.path.join(REPO, "torch_plugin", "bench"))
from _daemon import ensure_daemon  # noqa: E402
from _timing import best_time  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="calls per measurement (default 200)")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    ensure_daemon()
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x, dy = r(256, 256), r(256, 256)
    cases = [
        ("gelu 256x256", F.gelu, (x,)),
        ("gelu_backward 256x256", torch.ops.aten.gelu_backward, (dy, x)),
        ("exp 256x256", torch.exp, (x,)),
        ("log_softmax 256x96", lambda t: F.log_softmax(t, -1), (r(256, 96),)),
        ("where 256x256", torch.where, (x > 0, x, dy)),
        ("mul 256x64", torch.mul, (r(256, 64), r(256, 64))),
        ("sum 256x256 dim 0", lambda t: t.sum(0), (x,)),
        ("mm 256x64 @ 64x192", torch.mm, (r(256, 64), r(64, 192))),
        ("mm 256x256 @ 256x64", torch.mm, (r(256, 256), r(256, 64))),
    ]

    print(f"torch {torch.__version__}, CPU reference on 1 thread, best of 3 x {args.reps} calls")
    print(f"{'op':28s} {'cpu us':>9s} {'neuron us':>10s} {'neuron/cpu':>11s}")
    for name, fn, a in cases:
        c = best_time(lambda: fn(*a), lambda: None, args.reps, warmup=5)
        da = tuple(t.to("neuron") for t in a)
        d = best_time(lambda: fn(*da), torch.neuron.synchronize, args.reps, warmup=5)
        print(f"{name:28s} {c * 1e6:9.1f} {d * 1e6:10.1f} {d / c:11.2f}")


if __name__ == "__main__":
    main()
