"""Device module, torch.accelerator, autoload, memory and RNG APIs."""
import pytest
import torch

from conftest import run_python


def test_autoload_without_import(neurond):
    r = run_python("import torch; t = torch.randn(3).to('neuron'); print(t.device, abs(t.sum().item() - t.cpu().sum().item()) < 1e-4)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "neuron:0 True"


def test_import_torch_neuron_before_torch(neurond):
    # `import torch_neuron` first: its own `import torch` runs the autoload entry point
    # on the half-imported module (this failed with "partially initialized module").
    r = run_python("import torch_neuron\nimport torch\nt = torch.arange(4.0, device='neuron')\n"
                   "print(t.device, (t * 2).cpu().tolist())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "neuron:0 [0.0, 2.0, 4.0, 6.0]"


def test_no_daemon_error_says_how_to_start():
    r = run_python("import torch\ntry:\n    torch.randn(3).to('neuron')\nexcept RuntimeError as e:\n    print('ERR', e)",
                   env={"NEURON_SOCKET": "/nonexistent/neurond.sock"})
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "neurond" in r.stdout and "NEURON_SOCKET" in r.stdout


def test_availability():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 1
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(0)
    with torch.neuron.device(0):
        assert torch.neuron.current_device() == 0
    assert "Neuron" in torch.neuron.get_device_name()
    assert torch.neuron.get_device_properties().total_memory == 8192 * 2**20


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "neuron"
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    dev = torch.accelerator.current_accelerator()
    x = torch.ones(4, device=dev) * 3
    torch.accelerator.synchronize()
    assert x.cpu().tolist() == [3.0] * 4
    s = torch.accelerator.current_stream()
    assert s.device.type == "neuron"


def test_device_agnostic_training_step():
    dev = torch.accelerator.current_accelerator()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    ref = torch.nn.Linear(8, 4)
    ref.load_state_dict(model.state_dict())
    model.to(dev)
    x = torch.randn(16, 8)
    y = model(x.to(dev)).sum()
    y.backward()
    yr = ref(x).sum()
    yr.backward()
    torch.testing.assert_close(model.weight.grad.cpu(), ref.weight.grad, rtol=1e-5, atol=1e-5)
    assert model.weight.is_neuron and model.weight.device.type == dev.type


def test_memory_stats_and_cache():
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    x = torch.empty(1 << 20, device="neuron")
    assert torch.neuron.memory_allocated() >= before + 4 * (1 << 20)
    assert torch.neuron.max_memory_allocated() >= torch.neuron.memory_allocated()
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    del x
    assert torch.neuron.memory_allocated() == before
    torch.neuron.empty_cache()
    stats = torch.accelerator.memory_stats()
    assert "allocated_bytes.all.current" in stats
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    free, total = torch.neuron.mem_get_info()
    assert 0 < free <= total


def test_caching_allocator_reuses_blocks():
    x = torch.empty(1000, device="neuron")
    p = x.data_ptr()
    del x
    y = torch.empty(1000, device="neuron")
    assert y.data_ptr() == p


def test_rng_state_roundtrip():
    torch.neuron.manual_seed(123)
    assert torch.neuron.initial_seed() == 123
    st = torch.neuron.get_rng_state()
    a = torch.randn(5, device="neuron")
    torch.neuron.set_rng_state(st)
    b = torch.randn(5, device="neuron")
    assert torch.equal(a.cpu(), b.cpu())
    torch.manual_seed(7)  # seeds the neuron generator too (manual_seed_all)
    assert torch.neuron.initial_seed() == 7
    g = torch.Generator(device="neuron")
    g.manual_seed(5)
    assert g.device.type == "neuron"


def test_pin_memory():
    x = torch.randn(256).pin_memory()
    assert x.is_pinned()
    y = x.to("neuron", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(y.cpu(), x)
    out = torch.empty(256).pin_memory()
    out.copy_(y, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(out, x)
