"""Tile kernels as torch.library custom ops (torch_neuron.kernels.custom_op) and the
kernel library (torch_neuron.kernels.library): forward and backward against
PyTorch's autograd on the CPU, in eager mode, under FakeTensor tracing, and
inside torch.compile(backend="neuron") graphs, where a kernel is one TILE_KERNEL
node of the replayed program. Shapes do not divide the tiles (128 rows, 512
columns)."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuron.kernels as nk
from torch_neuron import compiler
from torch_neuron.kernels import library as kl

DEV = "neuron"


# ---------------------------------------------------------------- a user's op: x * tanh(y)

@nk.kernel
def mul_tanh_fwd(out, x, y, scale=1.0):
    R, C = x.shape
    for i in nk.affine_range(nk.cdiv(R, 128)):
        rows = slice(i * 128, i * 128 + 128)
        nk.store(out[rows, :], nk.load(x[rows, :]) * nk.tanh(nk.load(y[rows, :])) * scale)


@nk.kernel
def mul_tanh_bwd(dx, dy, dout, x, y, scale=1.0):
    R, C = x.shape
    for i in nk.affine_range(nk.cdiv(R, 128)):
        rows = slice(i * 128, i * 128 + 128)
        d = nk.load(dout[rows, :]) * scale
        t = nk.tanh(nk.load(y[rows, :]))
        nk.store(dx[rows, :], d * t)
        nk.store(dy[rows, :], d * nk.load(x[rows, :]) * (1.0 - t * t))


@nk.custom_op("kernel_tests::mul_tanh", mul_tanh_fwd)
def mul_tanh(x: torch.Tensor, y: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return torch.empty_like(x)


@nk.custom_op("kernel_tests::mul_tanh_backward", mul_tanh_bwd)
def mul_tanh_backward(dout: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                      scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(y)


def _setup(ctx, inputs, output):
    x, y, scale = inputs
    ctx.save_for_backward(x, y)
    ctx.scale = scale


def _backward(ctx, dout):
    x, y = ctx.saved_tensors
    dx, dy = mul_tanh_backward(dout, x, y, ctx.scale)
    return dx, dy, None


mul_tanh.register_autograd(_backward, setup_context=_setup)


def _leaves(*shapes, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=torch.float32).to(dtype) for s in shapes]


def _angles(S, D, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, D // 2, dtype=torch.float32) * 2 / D))
    a = torch.outer(torch.arange(S, dtype=torch.float32), inv)
    return a.cos().to(dtype), a.sin().to(dtype)


def _grads(fn, inputs, device, weight=None):
    """fn(*inputs) and the inputs' gradients of sum(out * weight), on `device`."""
    xs = [t.detach().to(device).requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*xs)
    w = weight if weight is not None else torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    (out.float() * w.to(device)).sum().backward()
    return out.detach().cpu(), [x.grad.cpu() if x.grad is not None else None for x in xs]


@pytest.mark.parametrize("device", ["cpu", DEV], ids=["simulate", "neuron"])
def test_custom_op_eager_forward_and_backward(device):
    x, y = _leaves((150, 70), (150, 70))
    out, (gx, gy) = _grads(lambda a, b: mul_tanh(a, b, 0.5), [x, y], device)
    ref, (rx, ry) = _grads(lambda a, b: a * torch.tanh(b) * 0.5, [x, y], "cpu")
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx, rx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gy, ry, rtol=1e-5, atol=1e-5)


def test_custom_op_traces_with_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with FakeTensorMode():
        x = torch.empty(300, 40, device=DEV)
        out = mul_tanh(x, torch.empty(300, 40, device=DEV), 2.0)
        assert out.shape == (300, 40) and out.device.type == "neuron" and out.dtype == torch.float32
    gm = make_fx(lambda a, b: mul_tanh(a, b) + 1, tracing_mode="fake")(torch.randn(5, 3), torch.randn(5, 3))
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.kernel_tests.mul_tanh.default in targets, targets


def _opcheck_cases():
    r = lambda *s: torch.randn(*s, requires_grad=True)  # noqa: E731
    cos, sin = _angles(130, 12, torch.float32)
    return [pytest.param(mul_tanh, (r(130, 9), r(130, 9), 0.5), id="mul_tanh"),
            pytest.param(torch.ops.neuron_kernels.rms_norm.default, (r(130, 9), r(9), 1e-6), id="rms_norm"),
            pytest.param(torch.ops.neuron_kernels.swiglu.default, (r(3, 520), r(3, 520)), id="swiglu"),
            pytest.param(torch.ops.neuron_kernels.rotary_embedding.default, (r(2, 130, 12), cos, sin, False),
                         id="rotary_embedding")]


@pytest.mark.parametrize("op,args", _opcheck_cases())
def test_opcheck(op, args):
    """PyTorch's own checks of a custom op: its schema, the fake kernel against the
    real one, the autograd registration, AOT dispatch with dynamic shapes (CPU
    tensors: the kernels run in the simulation)."""
    results = torch.library.opcheck(op, args)
    assert set(results.values()) == {"SUCCESS"}, results


def test_custom_op_refuses_what_it_cannot_run():
    @nk.kernel
    def writes_an_input(out, x):
        nk.store(x[0:4, :], nk.load(x[0:4, :]))
        nk.store(out[0:4, :], nk.load(x[0:4, :]))

    @nk.custom_op("kernel_tests::writes_an_input", writes_an_input)
    def bad(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    with pytest.raises(nk.KernelError, match="exactly its first 1 argument"):
        bad(torch.randn(4, 4))

    @nk.custom_op("kernel_tests::aliases", mul_tanh_fwd)
    def aliasing(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x

    with pytest.raises(nk.KernelError, match="shares memory with an input"):
        aliasing(torch.randn(4, 4), torch.randn(4, 4))


def test_custom_op_is_one_node_of_the_compiled_program(fresh_dynamo):
    def fn(x, y):
        out = mul_tanh(x * 2.0, y, 0.5) + 1.0
        return out, (out * out).sum()

    def leaves(device, seed):
        x, y = _leaves((200, 33), (200, 33), seed=seed)
        return x.to(device).requires_grad_(), y.to(device).requires_grad_()

    compiled = torch.compile(fn, backend="neuron")
    calls = [leaves(DEV, s) for s in (1, 2, 3)]  # new values each call: the replays run the kernels
    results = []
    for x, y in calls:
        out, loss = compiled(x, y)
        loss.backward()
        results.append(out.detach())
    stats = compiler.stats()
    assert stats.get("eager_graphs", 0) == 0, stats["eager_reasons"]
    assert stats["programs"] == 2 and stats["replays"] >= 4, stats  # forward and backward, replayed twice
    assert stats["program_tile_kernels"] == 2, stats  # the forward's kernel, the backward's
    for s, out, (x, y) in zip((1, 2, 3), results, calls):
        rx, ry = leaves("cpu", s)
        ref = rx * 2.0 * torch.tanh(ry) * 0.5 + 1.0
        (ref * ref).sum().backward()
        torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x.grad.cpu(), rx.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(y.grad.cpu(), ry.grad, rtol=1e-4, atol=1e-4)


def test_a_kernel_called_twice_is_one_tile_program_of_two_nodes(fresh_dynamo):
    def fn(x, y):
        return mul_tanh(mul_tanh(x, y) - 1.0, y)  # the second call reads an intermediate

    compiled = torch.compile(fn, backend="neuron")
    for seed in (11, 12):
        x, y = _leaves((130, 20), (130, 20), seed=seed)
        with torch.no_grad():
            got = compiled(x.to(DEV), y.to(DEV)).cpu()
        torch.testing.assert_close(got, (x * torch.tanh(y) - 1.0) * torch.tanh(y), rtol=1e-5, atol=1e-5)
    stats = compiler.stats()
    assert stats["programs"] == 1 and stats["replays"] == 1, stats
    assert stats["program_tile_kernels"] == 1 and stats["program_nodes"] == 3, stats  # kernel, sub, kernel


# ---------------------------------------------------------------- the kernel library

def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)


def _check(kernel_fn, ref_fn, inputs, dtype, device=DEV, grad_tol=None):
    out, grads = _grads(kernel_fn, inputs, device)
    ref, rgrads = _grads(lambda *a: ref_fn(*[t.float() for t in a]), inputs, "cpu")
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref, **_tol(dtype))
    for g, r in zip(grads, rgrads):
        if r is None:
            continue
        assert g.dtype == dtype
        torch.testing.assert_close(g.float(), r.float(), **(grad_tol or _tol(dtype)))


def _rms_ref(x, w, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (3, 100, 96)), (torch.float32, (130, 700)),
                                         (torch.bfloat16, (260, 72))])
def test_rms_norm(dtype, shape):
    x, w = _leaves(shape, shape[-1:], dtype=dtype, seed=4)
    w = (w.float() * 0.1 + 1.0).to(dtype)
    grad_tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    _check(lambda a, b: kl.rms_norm(a, b, 1e-6), _rms_ref, [x, w], dtype, grad_tol=grad_tol)


def test_rms_norm_simulated():
    x, w = _leaves((140, 24), (24,), seed=5)
    _check(lambda a, b: kl.rms_norm(a, b), _rms_ref, [x, w], torch.float32, device="cpu",
           grad_tol=dict(rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (2, 75, 600)), (torch.bfloat16, (130, 33))])
def test_swiglu(dtype, shape):
    g, u = _leaves(shape, shape, dtype=dtype, seed=6)
    _check(kl.swiglu, lambda a, b: F.silu(a) * b, [g, u], dtype)


def _rope_ref(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (2, 3, 150, 20)), (torch.bfloat16, (2, 130, 64))])
def test_rotary_embedding(dtype, shape):
    (x,) = _leaves(shape, dtype=dtype, seed=7)
    cos, sin = _angles(shape[-2], shape[-1], dtype)
    out, (gx,) = _grads(lambda a: kl.rotary_embedding(a, cos.to(DEV), sin.to(DEV)), [x], DEV)
    ref, (rx,) = _grads(lambda a: _rope_ref(a.float(), cos.float(), sin.float()), [x], "cpu")
    torch.testing.assert_close(out.float(), ref, **_tol(dtype))
    torch.testing.assert_close(gx.float(), rx.float(), **_tol(dtype))


def test_library_block_compiles_forward_and_backward(fresh_dynamo):
    """RMSNorm -> linear -> SwiGLU -> RoPE'd output, trained one step compiled, against
    the CPU's autograd: every kernel is a node of the forward or backward program."""
    torch.manual_seed(8)
    S, H, Fd = 140, 48, 40
    w1, w3 = torch.randn(H, Fd) * 0.2, torch.randn(H, Fd) * 0.2
    norm_w = torch.rand(H) + 0.5
    cos, sin = _angles(S, Fd, torch.float32)

    def block(x, norm_w, w1, w3, cos, sin, kernels):
        if kernels:
            h = kl.rms_norm(x, norm_w)
            a = kl.swiglu(h @ w1, h @ w3)
            out = kl.rotary_embedding(a, cos, sin)
        else:
            h = _rms_ref(x, norm_w)
            a = F.silu(h @ w1) * (h @ w3)
            out = _rope_ref(a, cos, sin)
        return (out * out).mean()

    x = torch.randn(S, H)
    params = [norm_w, w1, w3]
    ref_params = [p.clone().requires_grad_() for p in params]
    ref_loss = block(x, ref_params[0], ref_params[1], ref_params[2], cos, sin, False)
    ref_loss.backward()
    dev_params = [p.to(DEV).requires_grad_() for p in params]
    compiled = torch.compile(block, backend="neuron")
    for _ in range(2):  # capture, then a replay
        for p in dev_params:
            p.grad = None
        loss = compiled(x.to(DEV), *dev_params, cos.to(DEV), sin.to(DEV), True)
        loss.backward()
    stats = compiler.stats()
    assert stats.get("eager_graphs", 0) == 0, stats["eager_reasons"]
    assert stats["program_tile_kernels"] == 6, stats  # 3 forward kernels, 3 backward kernels
    torch.testing.assert_close(loss.detach().cpu(), ref_loss.detach(), rtol=1e-4, atol=1e-5)
    for p, r in zip(dev_params, ref_params):
        torch.testing.assert_close(p.grad.cpu(), r.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype,shape", [(torch.float32, (1, 2, 200, 24)), (torch.bfloat16, (2, 130, 64))])
def test_flash_attention(causal, dtype, shape):
    q, k, v = _leaves(shape, shape, shape, dtype=dtype, seed=9)
    grad_tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    _check(lambda a, b, c: kl.flash_attention(a, b, c, causal=causal),
           lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), [q, k, v], dtype,
           grad_tol=grad_tol)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_heads_on_host_threads_give_the_bits_of_one_head_alone(causal):
    """neurond runs the kernels' head loops (affine_range over batch x heads) on the core's
    host threads when their iterations are provably independent (runtime/tile/independence.cpp):
    each head of a 4-head call, forward and gradients, must be the very bits of that head
    computed alone (a one-head call has no loop to spread over threads), and match SDPA."""
    BH, S, D = 4, 520, 64
    q, k, v, g = (t.to(DEV) for t in _leaves((BH, S, D), (BH, S, D), (BH, S, D), (BH, S, D), seed=11))

    def run(a, b, c, dout):
        a, b, c = (t.detach().requires_grad_() for t in (a, b, c))
        out = kl.flash_attention(a, b, c, causal=causal)
        out.backward(dout)
        return [t.cpu() for t in (out, a.grad, b.grad, c.grad)]

    heads = run(q, k, v, g)
    for h in range(BH):
        alone = run(q[h:h + 1], k[h:h + 1], v[h:h + 1], g[h:h + 1])
        for name, x, y in zip(("out", "dq", "dk", "dv"), heads, alone):
            assert torch.equal(x[h:h + 1], y), (name, h)
    ref = [t.cpu().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*ref, is_causal=causal)
    out.backward(g.cpu())
    for x, y in zip(heads, [out] + [t.grad for t in ref]):
        torch.testing.assert_close(x, y.detach(), rtol=1e-4, atol=1e-4)


def test_flash_attention_keeps_no_score_matrix_in_device_memory():
    """Forward and backward at S = 1024: the device's peak over what the inputs,
    outputs and gradients hold stays far below one S x S f32 matrix (4 MiB)."""
    S, D = 1024, 32
    q, k, v = [t.to(DEV).requires_grad_() for t in _leaves((1, S, D), (1, S, D), (1, S, D), seed=10)]
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    kl.flash_attention(q, k, v, causal=True).sum().backward()
    torch.neuron.synchronize()
    extra = torch.neuron.max_memory_allocated() - base
    assert extra < S * S * 4 // 4, extra  # O(S * D) tensors (out, lse, stacked k/v, grads), never O(S^2)


def _executed(traced, op):
    """How often the tile program runs instructions of opcode `op` (loop trips multiplied)."""
    from torch_neuron.kernels import _format
    count, trips = 0, [1]
    for insn in traced.insns:
        if insn["op"] == _format.OP_LOOP_BEGIN:
            trips.append(trips[-1] * insn["i"][0])
        elif insn["op"] == _format.OP_LOOP_END:
            trips.pop()
        elif insn["op"] == op:
            count += trips[-1]
    return count


def test_causal_flash_attention_skips_the_tiles_above_the_diagonal():
    """S = 300: 3 x 3 tiles of 128. Causal attention computes the 6 tiles on and below
    the diagonal, forward (2 matmuls per tile: scores, P V) and backward (4 per tile in
    the dK/dV pass, 3 in the dQ pass); the full attention all 9 (results: test_flash_attention)."""
    from torch_neuron.kernels import _format
    BH, S, D, T = 2, 300, 16, 3
    q = torch.empty(BH, S, D)
    fwd = [kl.flash_attention_forward.trace([q, torch.empty(BH, S, 1), q, q, q], dict(scale=0.25, causal=c))
           for c in (False, True)]
    bwd = [kl.flash_attention_backward.trace([q, torch.empty(2, BH, S, D), q, q, torch.empty(2, BH, S, D),
                                              torch.empty(BH, S, 2)], dict(scale=0.25, causal=c))
           for c in (False, True)]
    tiles = {False: T * T, True: T * (T + 1) // 2}
    for causal in (False, True):
        assert _executed(fwd[causal], _format.OP_MATMUL) == BH * tiles[causal] * 2
        assert _executed(bwd[causal], _format.OP_MATMUL) == BH * tiles[causal] * 7
    # the key/value loads: once per head in both (test_flash_attention_loads_keys_and_values_once_per_head)


def _dma_reads(traced, arg):
    """How often the program DMAs from HBM argument `arg` (loop trips multiplied)."""
    from torch_neuron.kernels import _format
    count, trips = 0, [1]
    for insn in traced.insns:
        if insn["op"] == _format.OP_LOOP_BEGIN:
            trips.append(trips[-1] * insn["i"][0])
        elif insn["op"] == _format.OP_LOOP_END:
            trips.pop()
        elif insn["op"] == _format.OP_DMA and insn["operands"][1]["space"] == _format.HBM and \
                insn["operands"][1]["arg"] == arg:
            count += trips[-1]
    return count


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_loads_keys_and_values_once_per_head(causal, monkeypatch):
    """Forward: K^T of a head in one DMA and V in one per key tile, before the query
    tiles (k, v are arguments 3 and 4), while they fit kl.RESIDENT_BYTES; past it
    (patched to 0, another S so that the trace cache does not answer) once per tile
    met. Backward (kv argument 4, q argument 3): a key tile's k^T, v^T once per key
    tile in the dK/dV pass, a query tile's q^T once per query tile in the dQ pass."""
    BH, D = 2, 16
    T, S = 3, 300
    tiles = T * (T + 1) // 2 if causal else T * T
    q = torch.empty(BH, S, D)
    fwd = kl.flash_attention_forward.trace([q, torch.empty(BH, S, 1), q, q, q], dict(scale=0.25, causal=causal))
    assert _dma_reads(fwd, 3) == BH
    assert _dma_reads(fwd, 4) == BH * T
    S2 = 290
    q2 = torch.empty(BH, S2, D)
    monkeypatch.setattr(kl, "RESIDENT_BYTES", 0)
    fwd = kl.flash_attention_forward.trace([q2, torch.empty(BH, S2, 1), q2, q2, q2], dict(scale=0.25, causal=causal))
    assert _dma_reads(fwd, 3) == BH * tiles
    assert _dma_reads(fwd, 4) == BH * tiles
    bwd = kl.flash_attention_backward.trace([q, torch.empty(2, BH, S, D), q, q, torch.empty(2, BH, S, D),
                                             torch.empty(BH, S, 2)], dict(scale=0.25, causal=causal))
    # dK/dV pass: k^T, v^T per key tile; dQ pass: k^T, v^T and k per tile
    assert _dma_reads(bwd, 4) == BH * (2 * T + 3 * tiles)
    # dK/dV pass: q^T and q per tile; dQ pass: q^T per query tile
    assert _dma_reads(bwd, 3) == BH * (2 * tiles + T)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("S", [200, 300])
def test_flash_attention_forward_simulated(causal, S):
    """The forward kernel (activation_reduce, key tiles sliced from a resident tile by
    the loop variable) in the NumPy simulation against SDPA."""
    BH, D = 2, 24
    q, k, v = _leaves((BH, S, D), (BH, S, D), (BH, S, D), seed=12)
    out, lse = torch.empty(BH, S, D), torch.empty(BH, S, 1)
    kl.flash_attention_forward(out, lse, q, k, v, scale=D ** -0.5, causal=causal, simulate=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal), rtol=1e-4, atol=1e-5)
    s = (q @ k.transpose(1, 2)) * D ** -0.5
    if causal:
        s = s.masked_fill(~torch.ones(S, S, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(lse[..., 0], torch.logsumexp(s, dim=-1), rtol=1e-5, atol=1e-5)
