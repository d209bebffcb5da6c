"""torch.compile(backend="neuron"): compiled models against eager CPU, graph programs
(one replay per call), graph breaks, recompiles, dynamic=True, faults in replays.

Tolerances: as test_training.py (float32 on both sides, the device sums in another
order)."""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron.compiler as nc
from models import CNN, MLP, TinyLM

RTOL, ATOL = 2e-3, 2e-4
# As test_training.py's CNN: convolutions sum in another order than the CPU's and
# SGD with momentum amplifies the last bits over the steps.
CNN_RTOL, CNN_ATOL = 3e-2, 3e-3


# Each test starts from empty Dynamo caches and compile counters (conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_backend_is_registered_by_entry_point():
    from importlib.metadata import entry_points

    eps = entry_points(group="torch_dynamo_backends")
    assert "neuron" in eps.names
    assert "neuron" in torch._dynamo.list_backends()


def test_mlp_inference_matches_cpu_and_replays():
    torch.manual_seed(0)
    model = MLP().eval()
    dev = copy.deepcopy(model).to("neuron")
    compiled = torch.compile(dev, backend="neuron")
    with torch.no_grad():
        for i in range(3):
            x = torch.randn(16, 64)
            got = compiled(x.to("neuron")).cpu()
            torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-5)
    s = nc.stats()
    assert s.get("programs") == 1, s
    assert s.get("replays") == 2, s  # the first call captured, the two after replayed


def test_set_default_backend_then_module_compile():
    torch.manual_seed(1)
    model = MLP()
    dev = copy.deepcopy(model).to("neuron")
    torch.compiler.set_default_backend("neuron")
    try:
        dev.compile()
        x = torch.randn(8, 64)
        with torch.no_grad():
            torch.testing.assert_close(dev(x.to("neuron")).cpu(), model(x), rtol=1e-4, atol=1e-5)
    finally:
        torch.compiler.set_default_backend(None)
    assert nc.stats().get("programs", 0) >= 1


def train(model, opt_fn, batches, device, compile_it):
    model = model.to(device)
    step_model = torch.compile(model, backend="neuron") if compile_it else model
    opt = opt_fn(model.parameters())
    losses = []
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        out = step_model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(l) for l in losses]


def compare_training(model, opt_fn, batches, rtol=RTOL, atol=ATOL):
    ref = copy.deepcopy(model)
    dev_losses = train(model, opt_fn, batches, "neuron", True)
    cpu_losses = train(ref, opt_fn, batches, "cpu", False)
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=rtol, atol=atol)
    assert cpu_losses[-1] < cpu_losses[0]
    return ref  # trained on the CPU


def test_mlp_training_50_steps_matches_cpu():
    torch.manual_seed(2)
    teacher = torch.randn(64, 10)  # learnable labels: the loss must fall
    xs = [torch.randn(32, 64) for _ in range(50)]
    batches = [(x, (x @ teacher).argmax(1)) for x in xs]
    compare_training(MLP(), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), batches)
    s = nc.stats()
    assert s.get("graphs_forward") == 1 and s.get("graphs_backward") == 1, s
    assert s.get("programs") == 2 and s.get("replays") == 98, s


def test_transformer_lm_training_50_steps_matches_cpu():
    torch.manual_seed(3)
    batches = [(torch.randint(0, 96, (4, 32)), torch.randint(0, 96, (4, 32))) for _ in range(50)]
    compare_training(TinyLM(), lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01), batches)
    s = nc.stats()
    assert s.get("programs") == 2 and s.get("replays") == 98, s  # forward and backward, one capture each
    # The memory plan reuses the bytes of dead intermediates.
    assert 0 < s["plan_bytes"] < s["intermediate_bytes"] / 2, s
    # The linear layers' bias + activation fuse; its elementwise chains are the layer
    # norms', which the kernels already send as POINTWISE commands (the next test).
    assert s.get("fused_matmul_epilogues", 0) > 0, s


def test_elementwise_chains_fuse_into_one_command_with_eager_bits():
    # A chain of elementwise ops, and a layer norm (one LAYER_NORM command, not
    # elementwise) followed by elementwise ops: each chain becomes one POINTWISE
    # node whose results are the unfused commands' bits (each step computes what
    # its opcode computes).
    def chain(x, y):
        return ((x * 1.5 + y).relu() - 0.25).exp() * y

    def norm_then_scale(x, w, b):
        return (F.layer_norm(x, (64,), w, b) * 2.0 + 1.0).tanh()

    torch.manual_seed(6)
    # (fn, inputs, commands fused into the chain): the three ops after the layer norm.
    cases = [(chain, (torch.randn(32, 64), torch.randn(32, 64)), 6),
             (norm_then_scale, (torch.randn(32, 64), torch.randn(64), torch.randn(64)), 3)]
    for fn, args, fused_ops in cases:
        torch._dynamo.reset()
        nc.reset_stats()
        dev = [a.to("neuron") for a in args]
        eager = fn(*dev).cpu()
        compiled = torch.compile(fn, backend="neuron")
        for _ in range(2):  # captured, then replayed
            got = compiled(*dev).cpu()
            assert torch.equal(got, eager), fn.__name__
        torch.testing.assert_close(got, fn(*args), rtol=1e-5, atol=1e-5)
        s = nc.stats()
        assert s.get("replays") == 1 and s.get("fused_pointwise_chains") == 1, (fn.__name__, s)
        assert s.get("fused_pointwise_ops") == fused_ops, (fn.__name__, s)


def test_transformer_lm_inference_matches_cpu():
    torch.manual_seed(4)
    model = TinyLM().eval()
    dev = torch.compile(copy.deepcopy(model).to("neuron"), backend="neuron")
    idx = torch.randint(0, 96, (2, 32))
    with torch.no_grad():
        ref = model(idx)
        for _ in range(2):
            torch.testing.assert_close(dev(idx.to("neuron")).cpu(), ref, rtol=1e-4, atol=1e-4)


def test_cnn_inference_matches_cpu():
    torch.manual_seed(5)
    model = CNN()
    for _ in range(3):  # batch norm's running statistics away from their initial values
        model(torch.randn(16, 1, 28, 28))
    model.eval()
    dev = torch.compile(copy.deepcopy(model).to("neuron"), backend="neuron")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(8, 1, 28, 28)
            torch.testing.assert_close(dev(x.to("neuron")).cpu(), model(x), rtol=1e-4, atol=1e-4)
    s = nc.stats()
    assert s.get("graphs_inference") == 1, s
    # One program, replayed by the two later calls: max pooling's window-position
    # table (device memory cached for the process) is one of its arguments.
    assert s.get("programs") == 1 and s.get("replays") == 2, s
    assert not s.get("eager_reasons"), s


def test_program_keeps_its_device_constants_alive():
    # max pooling's indices come from a window-position table the plugin caches on
    # the device for the process; the graph's program binds it at every replay.
    # The cache drops its tables when it passes 256 geometries: the program must
    # keep its own reference, or a replay reads freed memory that later tensors
    # reuse.
    torch.manual_seed(7)
    f = torch.compile(lambda x: F.max_pool2d(x, 3, 2, return_indices=True), backend="neuron")

    def check():
        x = torch.randn(2, 3, 17, 17)
        values, indices = f(x.to("neuron"))
        ref_values, ref_indices = F.max_pool2d(x, 3, 2, return_indices=True)
        torch.testing.assert_close(values.cpu(), ref_values)
        torch.testing.assert_close(indices.cpu(), ref_indices)

    check()
    for n in range(8, 8 + 270):  # 270 other geometries: the cache is cleared
        F.max_pool2d(torch.ones(1, 1, 1, n, device="neuron"), (1, 2), return_indices=True)
    # Tensors of every size up to 64 KiB, in the allocator's 512-byte steps, take
    # the freed blocks back.
    clutter = [torch.full((128 * k,), 7.0, device="neuron") for k in range(1, 129) for _ in range(2)]
    check()
    check()
    s = nc.stats()
    assert s.get("programs") == 1 and s.get("replays") == 2, s
    del clutter


def test_cnn_training_50_steps_matches_cpu():
    # conv, batch norm (training: batch statistics, running statistics updated),
    # max and average pooling, forward and backward.
    torch.manual_seed(6)
    data = [(torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(4)]
    batches = [data[i % 4] for i in range(50)]
    model = CNN()
    ref = compare_training(model, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), batches, CNN_RTOL, CNN_ATOL)
    s = nc.stats()
    assert s.get("graphs_forward") == 1 and s.get("graphs_backward") == 1, s
    # Forward and backward are programs, each replayed from the second step (the
    # forward's max pooling table bound as a constant argument).
    assert s.get("programs") == 2 and s.get("replays") == 98, s
    assert not s.get("eager_reasons"), s
    # The running statistics the compiled graphs updated, against the CPU's.
    torch.testing.assert_close(model.bn.running_mean.cpu(), ref.bn.running_mean, rtol=CNN_RTOL, atol=CNN_ATOL)
    torch.testing.assert_close(model.bn.running_var.cpu(), ref.bn.running_var, rtol=CNN_RTOL, atol=CNN_ATOL)


def test_graph_break_falls_back_to_eager_for_that_part():
    def f(x):
        y = torch.relu(x) * 2
        print("a graph break")  # Dynamo cannot trace print: two graphs around it
        return y + 1

    explanation = torch._dynamo.explain(f)(torch.randn(5, device="neuron"))
    assert explanation.graph_break_count == 1
    torch._dynamo.reset()
    cf = torch.compile(f, backend="neuron")
    for _ in range(2):
        x = torch.randn(5)
        torch.testing.assert_close(cf(x.to("neuron")).cpu(), f(x))
    assert nc.stats().get("dynamo_graphs") == 2


def test_shape_change_recompiles():
    cf = torch.compile(lambda x: torch.tanh(x) * x + 1, backend="neuron", dynamic=False)
    for n in (4, 4, 7, 7, 4):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x.to("neuron")).cpu(), torch.tanh(x) * x + 1)
    s = nc.stats()
    assert s.get("dynamo_graphs") == 2, s  # Dynamo recompiled for the new shape
    assert s.get("programs") == 2 and s.get("replays") == 3, s  # and the first graph came back


def test_automatic_dynamic_recompile_gets_a_program_per_shape():
    # dynamic unset: Dynamo's second graph has a symbolic size; the backend still
    # makes one static program per concrete shape it is called with.
    cf = torch.compile(lambda x: torch.tanh(x) * x + 1, backend="neuron")
    for n in (4, 7, 7, 9, 9):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x.to("neuron")).cpu(), torch.tanh(x) * x + 1)
    s = nc.stats()
    assert s.get("programs") == 3 and s.get("replays") == 2, s


def test_dynamic_true_is_refused_with_a_clear_message():
    cf = torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)
    with pytest.raises(Exception, match="does not support dynamic=True"):
        cf(torch.randn(3, device="neuron"))


def test_fault_inside_a_replay_names_the_node():
    def f(x, idx):
        return torch.index_select(x * 2, 0, idx)

    cf = torch.compile(f, backend="neuron")
    x = torch.randn(4, 3, device="neuron")
    good = torch.tensor([3, 1], device="neuron")
    torch.testing.assert_close(cf(x, good).cpu(), f(x.cpu(), good.cpu()))
    cf(x, good)
    assert nc.stats().get("replays") == 1
    bad = torch.tensor([1, 9], device="neuron")
    with pytest.raises(RuntimeError, match=r"node \d+ \(index_select 'index_select"):
        cf(x, bad).cpu()
    # The stream was reset: later work runs.
    torch.testing.assert_close(cf(x, good).cpu(), f(x.cpu(), good.cpu()))


def test_random_ops_stay_eager_and_say_why():
    cf = torch.compile(lambda x: F.dropout(x, 0.5, training=True) + 1, backend="neuron")
    for _ in range(2):
        out = cf(torch.ones(1000, device="neuron")).cpu()
        assert set(out.unique().tolist()) <= {1.0, 3.0}
    s = nc.stats()
    assert s.get("programs", 0) == 0 and any("random" in r for r in s["eager_reasons"]), s


def test_programs_are_freed_with_the_graph():
    before = nc._live_handles()
    cf = torch.compile(lambda x: (x * 3).exp().sum(0), backend="neuron")
    x = torch.randn(64, 64, device="neuron")
    cf(x)
    cf(x)
    mine = nc._live_handles() - before
    assert len(mine) == 1 and nc.stats().get("replays") == 1
    import gc

    torch._dynamo.reset()
    del cf
    gc.collect()
    # The runner's finalizer released the program.
    assert not (mine & nc._live_handles())


def test_a_replay_on_another_stream_runs_op_by_op():
    # A program's buffer holds one replay's intermediates at a time: it replays
    # only on the stream it was captured on.
    cf = torch.compile(lambda x: torch.tanh(x * 2) + 1, backend="neuron")
    x = torch.randn(8, 8, device="neuron")
    ref = torch.tanh(x.cpu() * 2) + 1
    torch.testing.assert_close(cf(x).cpu(), ref)
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        out = cf(x)
    s.synchronize()
    torch.testing.assert_close(out.cpu(), ref)
    st = nc.stats()
    assert st.get("replays", 0) == 0 and st.get("eager_runs") == 1, st


def test_set_stance_and_recompile_limit_behave_as_on_cpu():
    def f(x):
        return torch.relu(x) + 1

    cf = torch.compile(f, backend="neuron", dynamic=False)
    x = torch.randn(6, device="neuron")
    with torch.compiler.set_stance("force_eager"):
        torch.testing.assert_close(cf(x).cpu(), f(x.cpu()))
    assert nc.stats().get("dynamo_graphs") is None  # the backend never ran
    cf(x)
    assert nc.stats().get("dynamo_graphs") == 1
    with torch._dynamo.config.patch(recompile_limit=1):
        y = torch.randn(9, device="neuron")  # a new shape past the limit: eager, still right
        torch.testing.assert_close(cf(y).cpu(), f(y.cpu()))
    assert nc.stats().get("dynamo_graphs") == 1
