"""The kernel library: tile kernels with their backward kernels, as custom ops
(torch.ops.neuron_kernels.*) with autograd, usable in eager mode and inside
torch.compile(backend="neuron") graphs (one TILE_KERNEL node each).

    from torch_neuron.kernels import library as kl
    y = kl.rms_norm(x, weight, eps=1e-6)     # x [..., H], weight [H]
    h = kl.swiglu(gate, up)                  # silu(gate) * up, any shape (same for both)
    q = kl.rotary_embedding(q, cos, sin)     # q [..., S, D], cos/sin [S, D/2]
    o = kl.flash_attention(q, k, v, causal=True)   # [..., S, D], D <= 128
    out = kl.moe_matmul(x, w, idx, gw)       # MoE: x [T, H], w [E, H, F], top-k idx/gw [T, k]

Every kernel computes in float32 on chip (bf16/f16 tensors are widened on load
and rounded on store) and handles shapes that do not divide its tiles (rows by
128 partitions, columns by 512) with the language's masked loads and stores.
On CPU tensors they run in the NumPy simulation (slow: for tests and debugging).
"""

import torch

from . import _format as F
from . import language as nl
from ._custom_op import custom_op
from ._trace import KernelError, affine_range, cdiv, static_range
from ._trace import sequential_range as nl_sequential
from . import kernel

__all__ = ["matmul", "rms_norm", "swiglu", "rotary_embedding", "flash_attention", "rmsnorm_forward", "rmsnorm_backward",
           "swiglu_forward", "swiglu_backward", "rope_kernel", "flash_attention_forward", "flash_attention_stats",
           "flash_attention_backward"]

P = 128  # partitions: rows of a tile
COLS = 512  # columns of a tile where a kernel tiles its free dim (one PSUM bank of f32)


def _expect(arg, shape, name):
    if tuple(arg.shape) != tuple(shape):
        raise KernelError(f"{name} has shape {tuple(arg.shape)}, the kernel expects {tuple(shape)}")


def _f32(t):
    return t if t.dtype == F.F32 else nl.copy(t, nl.float32)


# ---------------------------------------------------------------- tiled matmul

@kernel
def matmul(c, a, b):
    """c[M, N] = a[M, K] @ b[K, N] (NKI's matmul tutorial): output tiles of 128 x 512
    (one PSUM bank), K by 128 accumulated in PSUM; tails zero-filled and masked. A
    plain kernel (no custom op, no backward): the test suite's and bench_kernels.py's
    measure of the language against the chip's MATMUL opcode."""
    M, K = a.shape
    N = b.shape[1]
    for m in affine_range(cdiv(M, P)):
        for n in affine_range(cdiv(N, COLS)):
            acc = nl.zeros((P, COLS), buffer=nl.psum)
            for k in affine_range(cdiv(K, P)):
                at = nl.load(a.T[k * P:k * P + P, m * P:m * P + P], fill=0.0)
                bt = nl.load(b[k * P:k * P + P, n * COLS:n * COLS + COLS], fill=0.0)
                nl.nc_matmul(at, bt, acc=acc)
            nl.store(c[m * P:m * P + P, n * COLS:n * COLS + COLS], acc)


# ---------------------------------------------------------------- RMSNorm

@kernel
def rmsnorm_forward(out, x, weight, eps=1e-6):
    """out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight, x [R, H]."""
    R, H = x.shape
    _expect(weight, (H,), "weight")
    g = _f32(nl.load(weight.broadcast(P)))
    for i in affine_range(cdiv(R, P)):
        rows = slice(i * P, i * P + P)
        t = _f32(nl.load(x[rows, :]))
        rstd = nl.activation("rsqrt", nl.sum(t * t, axis=1), scale=1.0 / H, bias=eps)
        nl.store(out[rows, :], t * rstd * g)


@kernel
def rmsnorm_backward(dx, dweight, dy, x, weight, eps=1e-6):
    """With xhat = x * rstd: dx = rstd * (dy*w - xhat * mean(dy*w*xhat)) per row,
    dweight = sum over rows of dy * xhat (a sum across partitions: a matmul with a
    column of ones, accumulated in PSUM over the row tiles)."""
    R, H = x.shape
    _expect(weight, (H,), "weight")
    _expect(dy, (R, H), "dy")
    g = _f32(nl.load(weight.broadcast(P)))
    ones = nl.full((P, 1), 1.0)
    chunks = [(j * COLS, min(COLS, H - j * COLS)) for j in range(cdiv(H, COLS))]
    accs = [nl.zeros((1, w), buffer=nl.psum) for _, w in chunks]
    for i in affine_range(cdiv(R, P)):
        rows = slice(i * P, i * P + P)
        t = _f32(nl.load(x[rows, :], fill=0.0))  # rows past R: zeros, which add nothing to dweight
        d = _f32(nl.load(dy[rows, :], fill=0.0))
        rstd = nl.activation("rsqrt", nl.sum(t * t, axis=1), scale=1.0 / H, bias=eps)
        xhat = t * rstd
        dxh = d * g
        mean = nl.tensor_scalar("mul", nl.sum(dxh * xhat, axis=1), 1.0 / H)
        nl.store(dx[rows, :], (dxh - xhat * mean) * rstd)
        prod = d * xhat
        for (c0, w), acc in zip(chunks, accs):
            nl.nc_matmul(ones, prod[:, c0:c0 + w], acc=acc)
    for (c0, w), acc in zip(chunks, accs):
        nl.store(dweight.broadcast(1)[:, c0:c0 + w], acc)


@custom_op("neuron_kernels::rms_norm", rmsnorm_forward)
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@custom_op("neuron_kernels::rms_norm_backward", rmsnorm_backward)
def _rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(weight, memory_format=torch.contiguous_format))


def _rms_norm_setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_norm_grad(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, dw = _rms_norm_backward(dy, x, weight, ctx.eps)
    return dx, dw, None


_rms_norm.register_autograd(_rms_norm_grad, setup_context=_rms_norm_setup)


def rms_norm(x, weight, eps=1e-6):
    """RMSNorm over the last dim (torch.nn.functional.rms_norm with a weight)."""
    H = x.shape[-1]
    if weight.shape != (H,):
        raise KernelError(f"rms_norm: weight has shape {tuple(weight.shape)}, expected ({H},)")
    return _rms_norm(x.reshape(-1, H), weight, float(eps)).reshape(x.shape)


# ---------------------------------------------------------------- SwiGLU

def _tiles(x):
    """(row slice, column slice) loops over a 2-D argument, rows by 128, columns by 512."""
    R, C = x.shape
    for i in affine_range(cdiv(R, P)):
        for j in affine_range(cdiv(C, COLS)):
            yield slice(i * P, i * P + P), slice(j * COLS, j * COLS + COLS)


@kernel
def swiglu_forward(out, gate, up):
    """out = silu(gate) * up, [R, C]."""
    _expect(up, gate.shape, "up")
    for rows, cols in _tiles(gate):
        g = _f32(nl.load(gate[rows, cols]))
        u = _f32(nl.load(up[rows, cols]))
        nl.store(out[rows, cols], nl.silu(g) * u)


@kernel
def swiglu_backward(dgate, dup, dout, gate, up):
    """dgate = dout * up * silu'(gate), silu'(g) = s + g*s*(1 - s) with s = sigmoid(g);
    dup = dout * silu(gate)."""
    _expect(up, gate.shape, "up")
    _expect(dout, gate.shape, "dout")
    for rows, cols in _tiles(gate):
        g = _f32(nl.load(gate[rows, cols]))
        u = _f32(nl.load(up[rows, cols]))
        d = _f32(nl.load(dout[rows, cols]))
        s = nl.sigmoid(g)
        sg = g * s
        dsilu = s + sg * (1.0 - s)
        nl.store(dgate[rows, cols], d * u * dsilu)
        nl.store(dup[rows, cols], d * sg)


@custom_op("neuron_kernels::swiglu", swiglu_forward)
def _swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(gate, memory_format=torch.contiguous_format)


@custom_op("neuron_kernels::swiglu_backward", swiglu_backward)
def _swiglu_backward(dout: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(gate, memory_format=torch.contiguous_format),
            torch.empty_like(up, memory_format=torch.contiguous_format))


def _swiglu_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _swiglu_grad(ctx, dout):
    gate, up = ctx.saved_tensors
    return _swiglu_backward(dout, gate, up)


_swiglu.register_autograd(_swiglu_grad, setup_context=_swiglu_setup)


def swiglu(gate, up):
    """silu(gate) * up (the gated unit of a SwiGLU MLP: gate = x W1, up = x W3)."""
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise KernelError(f"swiglu: gate {tuple(gate.shape)} {gate.dtype} and up {tuple(up.shape)} {up.dtype} "
                          f"must have one shape and dtype")
    C = gate.shape[-1] if gate.dim() else 1
    return _swiglu(gate.reshape(-1, C), up.reshape(-1, C)).reshape(gate.shape)


# ---------------------------------------------------------------- rotary embedding

@kernel
def rope_kernel(out, x, cos, sin, inverse=False):
    """x [N, S, D] by halves (x1, x2) = (x[..., :D/2], x[..., D/2:]), cos/sin [S, D/2]:
    out = (x1*cos - x2*sin, x2*cos + x1*sin). inverse=True rotates by -angle (the
    backward: the rotation's transpose)."""
    N, S, D = x.shape
    h = D // 2
    _expect(cos, (S, h), "cos")
    _expect(sin, (S, h), "sin")
    for i in affine_range(cdiv(S, P)):
        rows = slice(i * P, i * P + P)
        c = _f32(nl.load(cos[rows, :]))
        s = _f32(nl.load(sin[rows, :]))
        if inverse:
            s = -s
        for n in affine_range(N):
            x1 = _f32(nl.load(x[n, rows, 0:h]))
            x2 = _f32(nl.load(x[n, rows, h:D]))
            nl.store(out[n, rows, 0:h], x1 * c - x2 * s)
            nl.store(out[n, rows, h:D], x2 * c + x1 * s)


@custom_op("neuron_kernels::rotary_embedding", rope_kernel)
def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _rope_setup(ctx, inputs, output):
    x, cos, sin, inverse = inputs
    ctx.save_for_backward(cos, sin)
    ctx.inverse = inverse


def _rope_grad(ctx, dout):
    cos, sin = ctx.saved_tensors
    return _rope(dout, cos, sin, not ctx.inverse), None, None, None


_rope.register_autograd(_rope_grad, setup_context=_rope_setup)


def rotary_embedding(x, cos, sin):
    """Rotary position embedding, the "rotate half" convention (Llama, GPT-NeoX):
    x [..., S, D] (D even), cos and sin [S, D/2] (the angles' cos and sin, as
    torch.polar's halves); returns cat(x1*cos - x2*sin, x2*cos + x1*sin). No
    gradient flows to cos and sin."""
    if x.dim() < 2 or x.shape[-1] % 2:
        raise KernelError(f"rotary_embedding: x [..., S, D] with D even, not {tuple(x.shape)}")
    S, D = x.shape[-2], x.shape[-1]
    if cos.shape != (S, D // 2) or sin.shape != (S, D // 2):
        raise KernelError(f"rotary_embedding: cos and sin must be [S, D/2] = [{S}, {D // 2}], not "
                          f"{tuple(cos.shape)} and {tuple(sin.shape)}")
    return _rope(x.reshape(-1, S, D), cos, sin, False).reshape(x.shape)


# ---------------------------------------------------------------- flash attention

def _scores(qT, kT, scale, i, j, S, causal):
    """Scaled scores of query tile i against key tile j, [128 queries, 128 keys] f32,
    -inf past the keys' end and (causal) above the diagonal."""
    s = nl.tensor_scalar("mul", nl.nc_matmul(qT, kT), scale)
    if S % P:
        col = nl.iota((P, P), base=j * P)
        s = nl.where(col < float(S), s, float("-inf"))
    if causal:
        col_minus_row = nl.iota((P, P), base=j * P - i * P, partition_step=-1)
        s = nl.where(col_minus_row <= 0.0, s, float("-inf"))
    return s


def _load_T(view):
    """A [rows, D] HBM view as an f32 [D, rows] tile (zeros past the end)."""
    return _f32(nl.load(view.T, fill=0.0))


def _mask(s, i, j, S, tail, diagonal):
    """-inf past the keys' end (tail) and above the diagonal (diagonal: the causal tile j == i)."""
    if tail and S % P:
        col = nl.iota((P, P), base=j * P)
        s = nl.where(col < float(S), s, float("-inf"))
    if diagonal:
        col_minus_row = nl.iota((P, P), base=j * P - i * P, partition_step=-1)
        s = nl.where(col_minus_row <= 0.0, s, float("-inf"))
    return s


# Per partition, the most SBUF a head's K^T and V may take to be loaded once per head
# (a third of trn1's 192 KiB partition); past it (S of ~8K at D = 128 in f32) each
# query tile loads the key tiles it sweeps.
RESIDENT_BYTES = 64 * 1024


def _resident_bytes(T, D, dtype):
    """SBUF per partition of K^T [D, T*128] and V [128, T*D] as f32 tiles (and as loaded)."""
    f32 = T * (P + D) * 4
    return f32 if dtype == F.F32 else f32 + T * (P + D) * F.DTYPE_BYTES[dtype]


def _key_tiles(k, v, b, T, D, resident):
    """kv(j) -> (K^T tile [D, 128], V tile [128, D]) of key tile j of head b, f32, zeros
    past S. resident: K^T and V of the head loaded once here (one transposing DMA, T
    DMAs of V into one tile) and sliced per key tile (j may be a loop variable); else
    each call loads its tiles."""
    if not resident:
        return lambda j: (_load_T(k[b, j * P:j * P + P, :]), _f32(nl.load(v[b, j * P:j * P + P, :], fill=0.0)))
    kT = _load_T(k[b, 0:T * P, :])
    vs = nl.Tile(nl.sbuf, (P, T * D), v.dtype)
    for j in range(T):
        nl.load(v[b, j * P:j * P + P, :], fill=0.0, out=vs[:, j * D:j * D + D])
    vs = _f32(vs)
    return lambda j: (kT[:, j * P:j * P + P], vs[:, j * D:j * D + D])


def _attend(qT, kv, i, j, scale, S, m, l, acc, tail, diagonal):
    """One key tile j of query tile i's online softmax: m, l, acc updated in place.
    With scale > 0 the raw scores stay unscaled and the exp activation scales them
    (exp(raw * scale - m)), and the row max is max(raw) * scale: the same bits as
    scaling first (rounding is monotonic), one pass over the tile fewer."""
    kT, vt = kv(j)
    raw = nl.nc_matmul(qT, kT)
    pre = scale > 0
    s = _mask(raw if pre else nl.tensor_scalar("mul", raw, scale), i, j, S, tail, diagonal)
    row_max = nl.max(s, axis=1)
    m_new = nl.maximum(m, nl.tensor_scalar("mul", row_max, scale) if pre else row_max)
    neg_m = nl.tensor_scalar("mul", m_new, -1.0)
    # exp and its row sum in one pass over the tile (the same bits as exp, then sum)
    p, row_sum = nl.activation_reduce("exp", s, scale=scale if pre else 1.0, bias=neg_m)
    corr = nl.activation("exp", m, bias=neg_m)
    nl.assign(l, l * corr + row_sum)
    pv = nl.nc_matmul(nl.copy(nl.transpose(p)), vt)
    nl.assign(acc, acc * corr + pv)
    nl.assign(m, m_new)


@kernel
def flash_attention_forward(out, lse, q, k, v, scale=1.0, causal=False):
    """out = softmax(q k^T * scale [+ causal mask]) v per (batch*head), q/k/v [BH, S, D]
    (D <= 128), and lse [BH, S, 1] (each row's log-sum-exp, for the backward). Query
    tiles of 128 rows sweep the key tiles with a running max and sum (online softmax):
    the scores live in PSUM/SBUF one 128 x 128 tile at a time, never in HBM.
    Causal: query tile i sweeps key tiles 0..i-1 unmasked (full tiles below the
    diagonal), then the diagonal tile i with the causal and tail masks (the tiles
    above it are entirely masked: not loaded, not computed); the query loop is
    unrolled at trace time (static_range) so that each sweep's length is static.
    K^T and V of a head are loaded once per head while they fit RESIDENT_BYTES of
    SBUF per partition (every S up to ~8K at D = 128, f32), not once per query tile."""
    BH, S, D = q.shape
    if D > P:
        raise KernelError(f"flash attention takes head dims up to {P}, not {D}")
    T = cdiv(S, P)
    resident = _resident_bytes(T, D, k.dtype) <= RESIDENT_BYTES
    for b in affine_range(BH):
        kv = _key_tiles(k, v, b, T, D, resident)
        for i in (static_range(T) if causal else affine_range(T)):
            qr = slice(i * P, i * P + P)
            qT = _load_T(q[b, qr, :])
            m = nl.full((P, 1), float("-inf"))
            l = nl.zeros((P, 1))
            acc = nl.zeros((P, D))
            state = (scale, S, m, l, acc)
            if causal:
                if i > 0:
                    for j in nl_sequential(i):
                        _attend(qT, kv, i, j, *state, tail=False, diagonal=False)
                _attend(qT, kv, i, i, *state, tail=True, diagonal=True)
            else:
                for j in nl_sequential(T):
                    _attend(qT, kv, i, j, *state, tail=True, diagonal=False)
            nl.store(out[b, qr, :], acc * nl.reciprocal(l))
            nl.store(lse[b, qr, :], m + nl.log(l))


@kernel
def flash_attention_stats(stats, dout, out, lse):
    """stats [BH, S, 2] = (lse, rowsum(dout * out)): what the backward needs per query row."""
    BH, S, D = out.shape
    for b in affine_range(BH):
        for i in affine_range(cdiv(S, P)):
            r = slice(i * P, i * P + P)
            o = _f32(nl.load(out[b, r, :]))
            d = _f32(nl.load(dout[b, r, :]))
            nl.store(stats[b, r, 0:1], nl.load(lse[b, r, :]))
            nl.store(stats[b, r, 1:2], nl.sum(o * d, axis=1))


@kernel
def flash_attention_backward(dq, dkv, dout, q, kv, stats, scale=1.0, causal=False):
    """The FlashAttention-2 backward without the score matrix in HBM: with
    P = exp(S - lse) recomputed per tile and dS = P * (dO V^T - rowsum(dO * O)),
    dV = P^T dO and dK = scale * dS^T Q over the query tiles (pass 1, per key tile),
    dQ = scale * dS K over the key tiles (pass 2, per query tile). k and v come
    stacked (kv [2, BH, S, D]) as do dk and dv: a kernel takes at most 6 arguments.
    Each pass loads the tiles of its outer loop's side (a key tile's k^T and v^T, a
    query tile's q^T, dout^T and stats) once per outer iteration."""
    BH, S, D = q.shape
    T = cdiv(S, P)

    def query_side(b, i):
        """What query tile i brings to every tile it meets: q^T, dout^T, -lse, delta."""
        qr = slice(i * P, i * P + P)
        lse = nl.load(stats[b, qr, 0:1], fill=0.0)
        return (_load_T(q[b, qr, :]), _load_T(dout[b, qr, :]), nl.tensor_scalar("mul", lse, -1.0),
                nl.load(stats[b, qr, 1:2], fill=0.0))

    def key_side(b, j):
        """What key tile j brings: k^T, v^T."""
        kr = slice(j * P, j * P + P)
        return _load_T(kv[0, b, kr, :]), _load_T(kv[1, b, kr, :])

    def tile(qs, ks, i, j):
        (qT, doT, neg_lse, delta), (kT, vT) = qs, ks
        s = _scores(qT, kT, scale, i, j, S, causal)
        p = nl.activation("exp", s, bias=neg_lse)
        ds = p * (nl.nc_matmul(doT, vT) - delta)
        return p, ds

    # Causal: key tile j meets query tiles j..T-1 and query tile i key tiles 0..i (the
    # tiles above the diagonal are skipped; the outer loops unrolled, as the forward's).
    for b in affine_range(BH):
        for j in (static_range(T) if causal else affine_range(T)):
            kr = slice(j * P, j * P + P)
            dv_acc = nl.zeros((P, D), buffer=nl.psum)
            dk_acc = nl.zeros((P, D), buffer=nl.psum)
            ks = key_side(b, j)  # loaded once per key tile, not once per (query, key) tile
            for i0 in affine_range(T - j if causal else T):
                i = i0 + j if causal else i0
                qr = slice(i * P, i * P + P)
                p, ds = tile(query_side(b, i), ks, i, j)
                nl.nc_matmul(p, _f32(nl.load(dout[b, qr, :], fill=0.0)), acc=dv_acc)
                nl.nc_matmul(ds, _f32(nl.load(q[b, qr, :], fill=0.0)), acc=dk_acc)
            nl.store(dkv[1, b, kr, :], dv_acc)
            nl.store(dkv[0, b, kr, :], nl.tensor_scalar("mul", dk_acc, scale))
        for i in (static_range(T) if causal else affine_range(T)):
            qr = slice(i * P, i * P + P)
            dq_acc = nl.zeros((P, D), buffer=nl.psum)
            qs = query_side(b, i)  # once per query tile
            for j in affine_range(i + 1 if causal else T):
                kr = slice(j * P, j * P + P)
                _, ds = tile(qs, key_side(b, j), i, j)
                nl.nc_matmul(nl.copy(nl.transpose(ds)), _f32(nl.load(kv[0, b, kr, :], fill=0.0)), acc=dq_acc)
            nl.store(dq[b, qr, :], nl.tensor_scalar("mul", dq_acc, scale))


@custom_op("neuron_kernels::flash_attention", flash_attention_forward)
def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
           causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((q.shape[0], q.shape[1], 1), dtype=torch.float32))


@custom_op("neuron_kernels::flash_attention_stats", flash_attention_stats)
def _flash_stats(dout: torch.Tensor, out: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    return lse.new_empty((lse.shape[0], lse.shape[1], 2))


@custom_op("neuron_kernels::flash_attention_backward", flash_attention_backward)
def _flash_backward(dout: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, stats: torch.Tensor, scale: float,
                    causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(q, memory_format=torch.contiguous_format), torch.empty_like(kv)


def _flash_setup(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.scale, ctx.causal = scale, causal


def _flash_grad(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    stats = _flash_stats(dout, out, lse)
    dq, dkv = _flash_backward(dout, q, torch.stack([k, v]), stats, ctx.scale, ctx.causal)
    return dq, dkv[0], dkv[1], None, None


_flash.register_autograd(_flash_grad, setup_context=_flash_setup)


def flash_attention(q, k, v, causal=False, scale=None):
    """softmax(q k^T * scale) v (torch.nn.functional.scaled_dot_product_attention's
    math, is_causal=causal), q/k/v [..., S, D] of one shape, D <= 128; scale
    defaults to 1/sqrt(D). No S x S matrix is stored in device memory, forward or
    backward (the backward recomputes the scores tile by tile)."""
    if q.shape != k.shape or q.shape != v.shape or q.dim() < 2:
        raise KernelError(f"flash_attention: q, k, v [..., S, D] of one shape, not {tuple(q.shape)}, "
                          f"{tuple(k.shape)}, {tuple(v.shape)}")
    S, D = q.shape[-2], q.shape[-1]
    scale = float(D ** -0.5 if scale is None else scale)
    flat = lambda t: t.reshape(-1, S, D)  # noqa: E731
    out, _ = _flash(flat(q), flat(k), flat(v), scale, bool(causal))
    return out.reshape(q.shape)


# ---------------------------------------------------------------- MoE blockwise matmul (moe.py)

from .moe import grouped_matmul, moe_grouped_backward, moe_grouped_forward, moe_matmul  # noqa: E402,F401

__all__ += ["moe_matmul", "grouped_matmul", "moe_grouped_forward", "moe_grouped_backward"]
