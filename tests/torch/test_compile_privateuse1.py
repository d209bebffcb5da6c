"""PyTorch's compile tests for a PrivateUse1 device, run against 'neuron'.

Modelled on the compile suite of PyTorch's reference out-of-tree backend, OpenReg
(test/cpp_extensions/open_registration_extension/torch_openreg/tests/test_compile.py):
the same scenarios (backend registration, graph capture, fake tensors, guards,
autograd, modules, graph breaks, autocast, the default device, Dynamo's device
interface), with assertions against eager results computed on the CPU.

Not applicable as OpenReg writes them:
- dynamic=True compiles there; the neuron backend refuses it by design (issue 14:
  static shapes only), which test_compile.py checks, message included.
- tensor backend metadata (torch._utils.set_tensor_metadata) needs a
  c10::BackendMeta on the device's tensors; neuron tensors carry none.
"""
import subprocess
import sys

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

import torch_neuron.compiler as nc

DEV = "neuron"


# Each test starts from empty Dynamo caches and compile counters (conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_backend_is_listed():
    from torch._dynamo.backends.registry import list_backends

    assert DEV in list_backends(exclude_tags=())


def test_simple_compile():
    fn = torch.compile(lambda x: x + 1, backend=DEV)
    x = torch.randn(4)
    torch.testing.assert_close(fn(x.to(DEV)).cpu(), x + 1)


def test_fullgraph_several_ops():
    def fn(x):
        return torch.relu((x + 1) * 2)

    x = torch.randn(4)
    out = torch.compile(fn, backend=DEV, fullgraph=True)(x.to(DEV))
    assert out.device.type == DEV
    torch.testing.assert_close(out.cpu(), fn(x))


def test_placeholders_are_fake_tensors_on_the_device():
    seen = []

    def capture(gm, example_inputs):
        # Dynamo's graph keeps the fake value as "example_value" (AOTAutograd's as "val").
        seen.extend(n.meta.get("val", n.meta.get("example_value")) for n in gm.graph.nodes if n.op == "placeholder")
        return gm.forward

    torch.compile(lambda x: x + 1, backend=capture)(torch.randn(4, device=DEV))
    assert seen and all(isinstance(t, torch.Tensor) and t.device.type == DEV for t in seen), seen
    assert all(isinstance(t, torch._subclasses.fake_tensor.FakeTensor) for t in seen), seen


def test_fake_tensor_mode_keeps_the_device():
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x = torch.empty(3, 3, device=DEV)
        y = x + 1
        assert x.device.type == DEV and y.device.type == DEV


def test_same_input_does_not_recompile():
    counter = CompileCounterWithBackend(DEV)
    fn = torch.compile(lambda x: x + 1, backend=counter)
    x = torch.randn(4, device=DEV)
    fn(x)
    fn(x)
    assert counter.frame_count == 1


def test_shape_change_recompiles():
    counter = CompileCounterWithBackend(DEV)
    fn = torch.compile(lambda x: x + 1, backend=counter)
    fn(torch.randn(4, device=DEV))
    assert counter.frame_count == 1
    x8 = torch.randn(8)
    torch.testing.assert_close(fn(x8.to(DEV)).cpu(), x8 + 1)
    assert counter.frame_count == 2


def test_autograd():
    fn = torch.compile(lambda x: (x * 2).sum(), backend=DEV)
    x = torch.randn(4, device=DEV, requires_grad=True)
    fn(x).backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((4,), 2.0))


def test_nn_module():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 4)
    dm = torch.nn.Linear(4, 4).to(DEV)
    dm.load_state_dict(m.state_dict())
    x = torch.randn(2, 4)
    out = torch.compile(dm, backend=DEV)(x.to(DEV))
    assert out.device.type == DEV and out.shape == (2, 4)
    torch.testing.assert_close(out.cpu(), m(x), rtol=1e-5, atol=1e-6)


def test_device_transfer_inside_a_full_graph():
    def fn(x):
        return (x + 1).cpu() * 2

    x = torch.randn(4)
    out = torch.compile(fn, backend=DEV, fullgraph=True)(x.to(DEV))
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, (x + 1) * 2)


def test_explicit_graph_break():
    counter = CompileCounterWithBackend(DEV)

    def fn(x):
        y = x + 1
        torch._dynamo.graph_break()
        return y * 2

    x = torch.randn(4)
    torch.testing.assert_close(torch.compile(fn, backend=counter)(x.to(DEV)).cpu(), (x + 1) * 2)
    assert counter.frame_count > 1


def test_autocast_inside_compile():
    def fn(x, y):
        with torch.autocast(device_type=DEV, dtype=torch.float16):
            return torch.mm(x, y)

    x, y = torch.randn(2, 3), torch.randn(3, 3)
    out = torch.compile(fn, backend=DEV)(x.to(DEV), y.to(DEV))
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.cpu(), (x.half().float() @ y.half().float()).half(), rtol=2e-3, atol=2e-3)


def test_default_device_inside_compile():
    with torch.device(DEV):

        def fn(x):
            return x + torch.ones(4)

        x = torch.randn(4, device=DEV)
        out = torch.compile(fn, backend=DEV)(x)
    assert out.device.type == DEV
    torch.testing.assert_close(out.cpu(), x.cpu() + 1)


def test_device_interface():
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device(DEV)
    assert isinstance(iface.current_device(), int) and iface.current_device() == torch.neuron.current_device()
    assert iface.device_count() == torch.neuron.device_count() > 0
    assert iface.is_available()
    assert get_interface_for_device(torch.device(DEV, 0)) is iface
    props = iface.Worker.get_device_properties(0)
    assert props.total_memory > 0
    iface.synchronize()


def test_device_interface_without_a_compile_first():
    # A fresh process that asks Dynamo for the device's interface before compiling anything.
    code = ("import torch; from torch._dynamo.device_interface import get_interface_for_device; "
            "print(get_interface_for_device('neuron').__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "NeuronInterface"
