"""Writes the fuzz-program target's seed corpus (tests/fuzz/program_seeds/): real
programs torch.compile(backend="neuron") registers with neurond, as libneuron sends
them (NEURON_PROGRAM_DUMP_DIR). Small models, so each seed stays a few KiB and the
fuzzer's mutations stay fast: a fused elementwise chain, an MLP's forward and
backward (matmul epilogues), an index_select, a CNN's forward and backward (conv,
batch norm, pooling), a transformer block's inference, FlexAttention's forward.

    .venv/bin/python tests/fuzz/capture_program_seeds.py [OUT_DIR]

Starts a private neurond (build/daemon/neurond) unless NEURON_SOCKET reaches one.
Rerun it when the command format or the plugin's lowering changes, and commit the
result."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "program_seeds")
DUMP = tempfile.mkdtemp(prefix="neuron-program-dump-")
os.environ["NEURON_PROGRAM_DUMP_DIR"] = DUMP  # before libneuron registers anything

sys.path.insert(0, os.path.join(REPO, "torch_plugin", "examples"))
from _daemon import ensure_daemon  # noqa: E402

os.environ["NEURON_SOCKET"] = ensure_daemon()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

import torch_neuron.compiler as nc  # noqa: E402

torch.manual_seed(0)
dev = "neuron"


def run(name, fn, *args, backward=False):
    torch._dynamo.reset()
    before = set(os.listdir(DUMP))
    cf = torch.compile(fn, backend="neuron")
    out = cf(*args)
    if backward:
        out.sum().backward()
    torch.neuron.synchronize()
    new = sorted(set(os.listdir(DUMP)) - before)
    for k, f in enumerate(new):
        dst = os.path.join(OUT, f"{name}-{k}.pb")
        shutil.copyfile(os.path.join(DUMP, f), dst)
        print(f"{dst}: {os.path.getsize(dst)} bytes")
    if not new:
        print(f"{name}: no program registered ({nc.stats().get('eager_reasons')})")


def main():
    os.makedirs(OUT, exist_ok=True)
    x = torch.randn(8, 16, device=dev)
    run("pointwise-chain", lambda x: (torch.tanh(x * 2 + 1).exp() - x).relu() / 3, x)

    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(dev)
    run("mlp-train", mlp, torch.randn(4, 16, device=dev), backward=True)

    idx = torch.tensor([3, 0, 2], device=dev)
    run("index-select", lambda x, i: torch.index_select(x * 2, 0, i).sum(1), x, idx)

    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(4, 4, 3, padding=1), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16, 3)).to(dev)
    run("cnn-train", cnn, torch.randn(2, 1, 8, 8, device=dev), backward=True)

    block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).to(dev).eval()
    with torch.no_grad():
        run("transformer-block", block, torch.randn(1, 8, 16, device=dev))

    q, k, v = (torch.randn(1, 2, 16, 8, device=dev) for _ in range(3))
    bm = create_block_mask(lambda b, h, m, n: m >= n, 1, 2, 16, 16, device=dev, BLOCK_SIZE=8)
    with torch.no_grad():
        run("flex-attention", lambda q, k, v: flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s * 0.5,
                                                             block_mask=bm), q, k, v)
    shutil.rmtree(DUMP, ignore_errors=True)


if __name__ == "__main__":
    main()
