"""Restart with tenants alive (issue 12, daemon/README.md): four tenants train at once
on a neurond run by its supervisor (--supervise), the PyTorch transformer
(models.TinyLM, AdamW) and three MLPs (SGD with momentum), while neurond is killed with
SIGKILL three times. Every tenant finishes, and every loss curve is bit-identical to an
uninterrupted run of the same four: device memory, optimizer state and queued work
survived, and every command ran exactly once (the optimizers' in-place steps would show
a lost or doubled run in the next losses)."""
import os
import signal
import subprocess
import sys
import time

from conftest import start_daemon, stop_daemon

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 60
KILL_AT = (12, 30, 47)  # after these steps' losses arrived

TRAIN = r"""
import sys, torch
import torch.nn.functional as F
sys.path.insert(0, %r)
from models import MLP, TinyLM
kind, seed = sys.argv[1], int(sys.argv[2])
torch.manual_seed(seed)
g = torch.Generator().manual_seed(seed + 1)
if kind == "lm":
    model = TinyLM().to('neuron')
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
else:
    model = MLP().to('neuron')
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(%d):
    if kind == "lm":
        idx = torch.randint(0, 96, (8, 33), generator=g)
        x, y = idx[:, :-1].to('neuron'), idx[:, 1:].to('neuron')
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    else:
        x = torch.randn(32, 64, generator=g).to('neuron')
        y = torch.randint(0, 10, (32,), generator=g).to('neuron')
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(float(loss).hex(), flush=True)
""" % (HERE, STEPS)
TENANTS = (("lm", 0), ("mlp", 1), ("mlp", 2), ("mlp", 3))


def neurond_child(supervisor):
    try:
        with open(f"/proc/{supervisor}/task/{supervisor}/children") as f:
            pids = f.read().split()
        return int(pids[0]) if pids else None
    except OSError:
        return None


def train(sock, supervisor=None):
    """The four tenants at once; kills (with a supervisor) paced by the transformer's
    steps. Returns each tenant's losses (hex floats) and the number of kills."""
    env = dict(os.environ, NEURON_SOCKET=sock)
    procs = [subprocess.Popen([sys.executable, "-c", TRAIN, kind, str(seed)], env=env, stdout=subprocess.PIPE,
                              text=True) for kind, seed in TENANTS]
    p = procs[0]
    losses, kills = [], 0
    for line in p.stdout:
        losses.append(line.strip())
        if supervisor and len(losses) in KILL_AT:
            victim = neurond_child(supervisor)
            assert victim, "no neurond under the supervisor"
            os.kill(victim, signal.SIGKILL)
            kills += 1
            for _ in range(500):  # the supervisor restarts it
                now = neurond_child(supervisor)
                if now and now != victim:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("the supervisor did not restart neurond")
    curves = [losses]
    for q in procs[1:]:
        out, _ = q.communicate(timeout=300)
        curves.append(out.split())
    for (kind, seed), q in zip(TENANTS, procs):
        assert q.wait(300) == 0, f"tenant {kind}/{seed} exited with {q.returncode}"
    return curves, kills


def test_four_tenants_loss_curves_bit_identical_across_three_kill9():
    p, sock, d = start_daemon(extra=("--supervise",))
    try:
        ref, _ = train(sock)
        got, kills = train(sock, supervisor=p.pid)
        log = open(os.path.join(d, "neurond.log")).read()
    finally:
        stop_daemon(p, d)
    assert kills == 3 and log.count("supervise.restart") == 3, log[-3000:]
    for (kind, seed), r, g in zip(TENANTS, ref, got):
        assert len(r) == STEPS and len(g) == STEPS, f"{kind}/{seed}: {len(r)} and {len(g)} steps"
        diverged = [i for i in range(STEPS) if r[i] != g[i]]
        assert not diverged, (f"{kind}/{seed}: losses differ from step {diverged[0]}: uninterrupted "
                              f"{float.fromhex(r[diverged[0]])}, with kills {float.fromhex(g[diverged[0]])}")
