"""Adaptive eager (torch.neuron.set_adaptive_eager, csrc/adaptive_eager.h): a loop's
repeated command segments are replayed as programs while eager semantics hold.

References: plain neuron eager running the same code must give the same bits
(adaptive eager submits the same commands in the same order), and the CPU the
same losses within test_training.py's tolerances. Each test asserts from the
counters that replay did (or did not) happen."""
import copy

import pytest
import torch
import torch.nn.functional as F

from models import MLP, TinyLM

RTOL, ATOL = 2e-3, 2e-4


@pytest.fixture(autouse=True)
def adaptive_off():
    torch.neuron.set_adaptive_eager(False)
    torch.neuron.reset_adaptive_eager_stats()
    yield
    torch.neuron.set_adaptive_eager(False)


def lm_batches(steps, seed=2):
    torch.manual_seed(seed)
    data = torch.randint(0, 96, (4, 8, 33))
    return [(data[i % 4, :, :-1], data[i % 4, :, 1:]) for i in range(steps)]


def lm_loss(out, y):
    return F.cross_entropy(out.flatten(0, 1), y.flatten())


def train(model, batches, device, adaptive, item_every=0, fused=True, hook=None):
    """test_training.py's loop (optionally with .item() every few steps and a hook
    that changes step i); returns the losses and the final parameters on the CPU."""
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, fused=fused)
    if device == "neuron":
        torch.neuron.set_adaptive_eager(adaptive)
    losses = []
    for i, (x, y) in enumerate(batches):
        x, y = x.to(device), y.to(device)
        loss = lm_loss(model(x), y)
        if hook:
            loss = hook(i, model, x, loss)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item() if item_every and i % item_every == 0 else loss.detach())
    if device == "neuron":
        torch.neuron.synchronize()
        torch.neuron.set_adaptive_eager(False)
    return [float(l) for l in losses], [p.detach().cpu() for p in model.parameters()]


def check_same(a, b):
    la, pa = a
    lb, pb = b
    assert la == lb  # bit for bit
    for x, y in zip(pa, pb):
        assert torch.equal(x, y)


def test_transformer_training_replays_and_matches_eager_and_cpu():
    torch.manual_seed(0)
    model = TinyLM()
    batches = lm_batches(20)
    plain = train(model, batches, "neuron", adaptive=False)
    assert torch.neuron.adaptive_eager_stats()["replayed_segments"] == 0
    adaptive = train(model, batches, "neuron", adaptive=True)
    s = torch.neuron.adaptive_eager_stats()
    print("\n ", s)
    # The step's segments (the copies of x and y and the encoder's two mask checks
    # split it) are replayed from the third step on; the loss tensors kept in the
    # list (at new addresses each step) do not stop it (regions are relocatable).
    assert s["forms_registered"] >= 1 and s["replayed_segments"] >= 10, s
    assert s["replayed_commands"] > 10 * 100, s
    check_same(adaptive, plain)
    cpu = train(model, batches, "cpu", adaptive=False)
    torch.testing.assert_close(torch.tensor(adaptive[0]), torch.tensor(cpu[0]), rtol=RTOL, atol=ATOL)


def test_item_in_the_loop():
    torch.manual_seed(1)
    model = TinyLM()
    batches = lm_batches(12, seed=3)
    plain = train(model, batches, "neuron", adaptive=False, item_every=1)
    adaptive = train(model, batches, "neuron", adaptive=True, item_every=1)
    s = torch.neuron.adaptive_eager_stats()
    assert s["replayed_segments"] >= 5, s
    check_same(adaptive, plain)


def test_foreach_adamw_scalars_that_change_every_step():
    # foreach AdamW passes its bias corrections as scalars that change every step:
    # the chunks holding those commands stay plain (checked, submitted as issued),
    # the others replay; results stay exact.
    torch.manual_seed(4)
    model = TinyLM()
    batches = lm_batches(8, seed=4)
    plain = train(model, batches, "neuron", adaptive=False, fused=False)
    adaptive = train(model, batches, "neuron", adaptive=True, fused=False)
    s = torch.neuron.adaptive_eager_stats()
    assert s["replayed_segments"] >= 4 and s["replayed_chunks"] > 0 and s["fallbacks"] == 0, s
    check_same(adaptive, plain)


def test_a_changed_sequence_falls_back_at_once_with_exact_results():
    torch.manual_seed(5)
    model = TinyLM()
    batches = lm_batches(12, seed=5)

    def hook(i, model, x, loss):
        # Step 7 adds an op in the middle of the replayed forward segment; step 9
        # changes a scalar of a recorded command.
        if i == 7:
            loss = loss + 0.01 * model.head.weight.square().mean()
        if i == 9:
            loss = loss * 1.5
        return loss

    plain = train(model, batches, "neuron", adaptive=False, hook=hook)
    adaptive = train(model, batches, "neuron", adaptive=True, hook=hook)
    s = torch.neuron.adaptive_eager_stats()
    assert s["fallbacks"] >= 2 and s["held_then_plain"] > 0 and s["replayed_segments"] >= 3, s
    assert any(w in s["last_fallback"] for w in ("differs from the recorded", "ended after", "longer than")), s
    check_same(adaptive, plain)


def test_host_error_is_raised_at_the_op_and_held_work_still_runs():
    torch.manual_seed(6)
    model = MLP().to("neuron")
    x = torch.randn(32, 64, device="neuron")
    w = torch.randn(7, 3, device="neuron")  # y is 32x10: torch.mm(y, w) is refused

    def step(bad):
        y = model(x).relu() * 2
        if bad:
            with pytest.raises(RuntimeError, match="shapes cannot be multiplied|size mismatch|mat1 and mat2"):
                torch.mm(y, w)  # validated on the host, before anything is submitted
        return (y - 1).sum()

    with torch.no_grad():
        ref = [step(False).item() for _ in range(6)]
        torch.neuron.set_adaptive_eager(True)
        got = [step(i == 4).item() for i in range(6)]
    s = torch.neuron.adaptive_eager_stats()
    assert s["replayed_segments"] >= 2, s
    assert got == ref


def test_device_fault_in_a_replayed_step_names_the_op():
    torch.manual_seed(7)
    emb = torch.nn.Embedding(16, 8).to("neuron")
    good = torch.randint(0, 16, (4, 5))

    def step(idx):
        return (emb(idx.to("neuron")) * 3).sum().item()

    ref = step(good)
    torch.neuron.set_adaptive_eager(True)
    for _ in range(4):
        assert step(good) == ref
    assert torch.neuron.adaptive_eager_stats()["replayed_segments"] >= 2
    bad = good.clone()
    bad[1, 2] = 99  # out of range: only the device sees the value
    with pytest.raises(RuntimeError, match=r"node \d+ \(index_select 'adaptive (embedding|index_select)"):
        step(bad)
    # The stream was reset; the loop carries on and replays again.
    before = torch.neuron.adaptive_eager_stats()["replayed_segments"]
    for _ in range(3):
        assert step(good) == ref
    assert torch.neuron.adaptive_eager_stats()["replayed_segments"] > before


def test_random_ops_are_never_replayed():
    x = torch.ones(1000, device="neuron")
    torch.neuron.set_adaptive_eager(True)
    outs = [F.dropout(x * 2, 0.5, training=True).sum().item() for _ in range(6)]
    s = torch.neuron.adaptive_eager_stats()
    assert s["replayed_segments"] == 0 and s["forms_registered"] == 0, s
    assert len(set(outs)) > 1  # fresh numbers every step


def test_switching_off_releases_and_plain_eager_carries_on():
    x = torch.randn(64, device="neuron")
    torch.neuron.set_adaptive_eager(True, warmup=1, chunk=2)
    assert torch.neuron.is_adaptive_eager()
    vals = [((x * 2).exp() + 1).sum().item() for _ in range(4)]
    s = torch.neuron.adaptive_eager_stats()
    assert s["replayed_segments"] == 3 and s["programs"] >= 2, s  # chunks of 2 commands
    torch.neuron.set_adaptive_eager(False)
    assert not torch.neuron.is_adaptive_eager()
    assert ((x * 2).exp() + 1).sum().item() == vals[0] and len(set(vals)) == 1


def test_bad_settings_are_refused():
    with pytest.raises(RuntimeError, match="warmup must be"):
        torch.neuron.set_adaptive_eager(True, warmup=0)
    with pytest.raises(RuntimeError, match="chunk must be"):
        torch.neuron.set_adaptive_eager(True, chunk=0)
