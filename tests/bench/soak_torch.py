#!/usr/bin/env python3
"""The PyTorch tenant of bench-soak (bench_soak.cpp): trains a small MLP on device
"neuron" until SIGTERM (or --seconds pass) and checks every step against the CPU: before each
step the CPU model takes the device model's parameters, both run the same batch
forward and backward, and the loss and every gradient must agree (rtol 1e-4); then
the device's optimizer steps. After the first step it creates OUT.ready (the soak
starts its clock then: importing torch under load takes long). Writes the report bench-soak reads ("key value"
lines). Exit 77 when torch_neuron cannot be imported (the soak says it skipped)."""
import argparse
import os
import signal
import sys
import time


def write_report(path, steps, wrong, error):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"rounds {steps}\nwrong {wrong}\nerrors {1 if error else 0}\npolls 0\n")
        if error:
            f.write("error " + error.replace("\n", " ") + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args()
    deadline = time.monotonic() + args.seconds
    os.environ["NEURON_SOCKET"] = args.socket
    # PyTorch's warnings go to the log beside the report, not into the soak's output.
    log = open(args.out + ".log", "w")
    os.dup2(log.fileno(), 2)
    sys.stderr = log
    try:
        import torch
        import torch_neuron  # noqa: F401  (registers device "neuron")
        torch.zeros(1, device="neuron")
    except Exception as e:  # noqa: BLE001  (any failure to import means: skip)
        print(f"torch_neuron does not import: {e!r}", file=sys.stderr)
        sys.exit(77)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    net = net.to("neuron")
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    steps = wrong = 0
    error = ""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop and time.monotonic() < deadline:
            x = torch.randn(64, 32)
            y = x.sum(dim=1, keepdim=True) * 0.1
            ref.load_state_dict({k: v.cpu() for k, v in net.state_dict().items()})
            ref.zero_grad()
            ref_loss = ((ref(x) - y) ** 2).mean()
            ref_loss.backward()
            opt.zero_grad()
            loss = ((net(x.to("neuron")) - y.to("neuron")) ** 2).mean()
            loss.backward()
            ok = torch.allclose(loss.cpu(), ref_loss.detach(), rtol=1e-4, atol=1e-6)
            for p, q in zip(net.parameters(), ref.parameters()):
                ok = ok and torch.allclose(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-6)
            wrong += 0 if ok else 1
            opt.step()
            steps += 1
            if steps == 1:
                open(args.out + ".ready", "w").close()
    except Exception as e:  # noqa: BLE001  (reported as the tenant's error)
        error = repr(e)
    write_report(args.out, steps, wrong, error)


if __name__ == "__main__":
    main()
