"""Where a transformer training step's time goes on 'neuron': the step's wall time
beside the CPU time of the Python thread (ATen dispatch, the plugin, submissions),
of the whole tenant process, and of neurond (the simulated chip's engines) per step.
With neurond's CPU time near the wall time the step is device-bound: the chip's
kernels, not the host path, set its pace (and they share the host's CPUs with it).

  python torch_plugin/bench/bench_step_split.py [--fused] [--steps N]

Starts a private neurond unless NEURON_SOCKET points at one (then neurond's CPU time
is read only if its command line names that socket, or one neurond runs)."""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from _daemon import REPO, ensure_daemon  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "torch"))


def neurond_pid(sock):
    """The neurond serving `sock`: the one whose command line names it, else the
    only neurond running; None if neither."""
    pids = subprocess.run(["pgrep", "-x", "neurond"], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if sock.encode() in f.read():
                    return int(pid)
        except OSError:
            continue
    return int(pids[0]) if len(pids) == 1 else None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fused", action="store_true", help="AdamW(fused=True) instead of the default (foreach)")
    ap.add_argument("--steps", type=int, default=300, help="timed steps (default 300)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    sock = ensure_daemon()
    import torch
    import torch.nn.functional as F
    from models import TinyLM

    torch.manual_seed(0)
    model = TinyLM().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), 1e-3, fused=args.fused)
    x = torch.randint(0, 96, (8, 32)).to("neuron")
    y = torch.randint(0, 96, (8, 32)).to("neuron")

    def step():
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    torch.neuron.synchronize()
    pid = neurond_pid(sock)
    d0 = cpu_seconds(pid) if pid else None
    t0, h0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    for _ in range(args.steps):
        step()
    torch.neuron.synchronize()
    t1, h1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
    ms = lambda s: f"{1e3 * s / args.steps:.2f} ms"  # noqa: E731
    print(f"transformer LM train step ({'fused' if args.fused else 'foreach'} AdamW), per step over {args.steps}:")
    print(f"  wall                 {ms(t1 - t0)}")
    print(f"  Python thread CPU    {ms(h1 - h0)}")
    print(f"  tenant process CPU   {ms(p1 - p0)}")
    print(f"  neurond CPU          {ms(cpu_seconds(pid) - d0) if pid else 'n/a (neurond not found)'}")


if __name__ == "__main__":
    main()
