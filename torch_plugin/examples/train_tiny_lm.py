#!/usr/bin/env python3
"""Trains a 2-layer transformer language model on device 'neuron' through neurond.

Data: character-level text (this file's own source, so the demo needs no download).
Prints the loss every few steps, the device, and how many ops fell back to the CPU.
Usage: python3 torch_plugin/examples/train_tiny_lm.py [--steps N] [--llama] [--kernels]
(--llama: the Llama-style model, RMSNorm/SwiGLU/RoPE; --kernels: the same model on the
tile-kernel library, torch_neuron.kernels.library; starts a private neurond if NEURON_SOCKET does not point at a running one)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _daemon import REPO, ensure_daemon  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "torch"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--llama", action="store_true", help="Llama-style model (RMSNorm, SwiGLU, rotary)")
    ap.add_argument("--kernels", action="store_true",
                    help="the Llama-style model with the kernel library's RMSNorm, SwiGLU, RoPE, flash attention")
    args = ap.parse_args()
    ensure_daemon()

    import torch  # autoloads torch_neuron: no other import needed
    import torch.nn.functional as F
    from models import LlamaLM, TinyLM

    text = open(__file__, encoding="utf-8").read()
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    torch.manual_seed(0)
    dev = torch.device("neuron")
    if args.llama or args.kernels:
        model = LlamaLM(vocab=len(chars), ctx=args.ctx, use_kernels=args.kernels).to(dev)
    else:
        model = TinyLM(vocab=len(chars), ctx=args.ctx).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    torch.neuron.reset_op_counts()
    t0 = time.time()
    for step in range(1, args.steps + 1):
        ix = torch.randint(0, len(data) - args.ctx - 1, (args.batch,))
        xb = torch.stack([data[i:i + args.ctx] for i in ix]).to(dev, non_blocking=True)
        yb = torch.stack([data[i + 1:i + args.ctx + 1] for i in ix]).to(dev, non_blocking=True)
        loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == 1 or step % 10 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}  device {loss.device}")
    torch.neuron.synchronize()
    dt = time.time() - t0
    fb = torch.neuron.fallback_ops()
    print(f"trained {args.steps} steps in {dt:.1f} s on {torch.neuron.get_device_name()} "
          f"({sum(p.numel() for p in model.parameters())} parameters)")
    print(f"CPU fallback ops during training: {sum(fb.values())}" + (f" {fb}" if fb else ""))
    model.eval()
    with torch.no_grad():
        idx = data[:8].view(1, -1).to(dev)
        for _ in range(60):
            logits = model(idx[:, -args.ctx:])[:, -1]
            nxt = torch.multinomial(torch.softmax(logits, -1).cpu(), 1).to(dev)
            idx = torch.cat([idx, nxt], 1)
    print("sample:", repr("".join(chars[i] for i in idx[0].cpu().tolist())))


if __name__ == "__main__":
    main()
