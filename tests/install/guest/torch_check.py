"""The install test's PyTorch script: the wheel from the package build, run by a user in
group neuron against the system neurond (kmd backend). Results are compared with the CPU.
"""
import sys

import torch

assert torch.neuron.is_available(), "device 'neuron' is not available"
torch.manual_seed(0)
a = torch.randn(64, 48)
b = torch.randn(48, 32)
got = (a.to("neuron") @ b.to("neuron")).relu().cpu()
want = (a @ b).relu()
err = (got - want).abs().max().item()
assert err < 1e-4, f"matmul+relu differs from the CPU by {err}"

# One training step of a small model, on the device and on the CPU from the same start.
model_cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
model_dev = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
model_dev.load_state_dict(model_cpu.state_dict())
model_dev.to("neuron")
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
for model, dev in ((model_cpu, "cpu"), (model_dev, "neuron")):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
    loss.backward()
    opt.step()
for p_cpu, p_dev in zip(model_cpu.parameters(), model_dev.parameters()):
    err = (p_cpu - p_dev.cpu()).abs().max().item()
    assert err < 1e-4, f"parameters after one SGD step differ from the CPU by {err}"
print("torch on neuron: matmul and one training step match the CPU")
sys.exit(0)
