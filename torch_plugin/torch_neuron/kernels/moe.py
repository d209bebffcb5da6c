"""Mixture-of-experts blockwise (grouped) matmul with token routing, forward and
backward (part of the kernel library: torch_neuron.kernels.library.moe_matmul).

    out = kl.moe_matmul(x, w, expert_idx, expert_weights)
    # x [T, H], w [E, H, F], expert_idx [T, k] (int, a router's top-k), expert_weights [T, k]
    # out[t] = sum_j expert_weights[t, j] * x[t] @ w[expert_idx[t, j]]

How it runs (the layout of NKI's blockwise MoE matmul):
  1. routing (torch ops on the tensors' device): the T*k (token, expert) assignments
     sorted by expert; each expert's tokens gathered into blocks of 128 rows (the
     last block of an expert padded with zero rows), xg [R, H], R = 128 * blocks;
  2. one grouped matmul kernel over every block: block b of expert e is
     xg[b] @ w[e] (tensor engine, K by 128, F by 512 into one PSUM bank); an
     expert without tokens has no block and costs nothing;
  3. the blocks' rows scattered back to their tokens, weighted (index_add).
The block layout (blocks per expert) is a constant of the tile program: the
kernel is traced and validated once per distinct layout, so routing costs one
device-to-host read of the per-expert counts per call. The tile language has no
indirect (data-addressed) DMA, which is why the gather and scatter are torch ops
rather than the kernel's loads.

Backward (a second kernel, one pass over the same blocks): dxg[b] = dh[b] @ w[e]^T
and dw[e] = sum over e's blocks of xg[b]^T @ dh[b] (accumulated in PSUM); an expert
without tokens gets dw[e] = 0. The gather's and scatter's gradients (and the
routing weights') are torch's autograd of the index ops.
"""

import torch

from . import language as nl
from ._custom_op import custom_op
from ._trace import KernelError, affine_range, cdiv
from . import kernel

P = 128  # rows of a block (partitions)
COLS = 512  # free-dim columns of one PSUM bank of f32


def _f32(t):
    return t if t.dtype == nl.float32 else nl.copy(t, nl.float32)


def _layout(blocks, E, R, name):
    if len(blocks) != E or any(b < 0 for b in blocks):
        raise KernelError(f"{name}: blocks has one count >= 0 per expert ({E}), not {blocks}")
    if R != P * sum(blocks):
        raise KernelError(f"{name}: {R} gathered rows, the layout {blocks} holds {P * sum(blocks)}")
    starts, s = [], 0
    for b in blocks:
        starts.append(s)
        s += b * P
    return starts


@kernel
def moe_grouped_forward(h, xg, w, blocks=()):
    """h[b] = xg[b] @ w[e] for every block b (128 rows) of every expert e, in the
    order of `blocks` (blocks per expert): xg [R, H], w [E, H, F], h [R, F]."""
    R, H = xg.shape
    E, Hw, Fd = w.shape
    if Hw != H:
        raise KernelError(f"w is [E, H, F] with H = {H}, not {tuple(w.shape)}")
    for e, start in enumerate(_layout(blocks, E, R, "moe_grouped_forward")):
        if blocks[e] == 0:
            continue  # no tokens: no block, no work
        for i in affine_range(blocks[e]):
            rows = slice(start + i * P, start + i * P + P)
            for n in affine_range(cdiv(Fd, COLS)):
                cols = slice(n * COLS, n * COLS + COLS)
                acc = nl.zeros((P, COLS), buffer=nl.psum)
                for k in affine_range(cdiv(H, P)):
                    ks = slice(k * P, k * P + P)
                    nl.nc_matmul(_f32(nl.load(xg.T[ks, rows], fill=0.0)), _f32(nl.load(w[e, ks, cols], fill=0.0)),
                                 acc=acc)
                nl.store(h[rows, cols], acc)


@kernel
def moe_grouped_backward(dxg, dw, dh, xg, w, blocks=()):
    """dxg[b] = dh[b] @ w[e]^T per block; dw[e] = sum over e's blocks of xg[b]^T @ dh[b]
    (zeros for an expert without blocks)."""
    R, H = xg.shape
    E, _, Fd = w.shape
    starts = _layout(blocks, E, R, "moe_grouped_backward")
    for e, start in enumerate(starts):
        if blocks[e] == 0:
            continue
        for i in affine_range(blocks[e]):
            rows = slice(start + i * P, start + i * P + P)
            for n in affine_range(cdiv(H, COLS)):
                cols = slice(n * COLS, n * COLS + COLS)
                acc = nl.zeros((P, COLS), buffer=nl.psum)
                for k in affine_range(cdiv(Fd, P)):
                    ks = slice(k * P, k * P + P)
                    nl.nc_matmul(_f32(nl.load(dh.T[ks, rows], fill=0.0)), _f32(nl.load(w[e].T[ks, cols], fill=0.0)),
                                 acc=acc)
                nl.store(dxg[rows, cols], acc)
    zero = None
    for e, start in enumerate(starts):
        for m in affine_range(cdiv(H, P)):
            hs = slice(m * P, m * P + P)
            for n in affine_range(cdiv(Fd, COLS)):
                cols = slice(n * COLS, n * COLS + COLS)
                if blocks[e] == 0:
                    if zero is None:
                        zero = nl.zeros((P, COLS))
                    nl.store(dw[e, hs, cols], zero)
                    continue
                acc = nl.zeros((P, COLS), buffer=nl.psum)
                for i in affine_range(blocks[e]):
                    rows = slice(start + i * P, start + i * P + P)
                    # contraction over the block's 128 rows (the partitions): padded rows are zero
                    nl.nc_matmul(_f32(nl.load(xg[rows, hs], fill=0.0)), _f32(nl.load(dh[rows, cols], fill=0.0)),
                                 acc=acc)
                nl.store(dw[e, hs, cols], acc)


@custom_op("neuron_kernels::moe_grouped_matmul", moe_grouped_forward)
def _grouped(xg: torch.Tensor, w: torch.Tensor, blocks: list[int]) -> torch.Tensor:
    return xg.new_empty((xg.shape[0], w.shape[2]))


@custom_op("neuron_kernels::moe_grouped_matmul_backward", moe_grouped_backward)
def _grouped_backward(dh: torch.Tensor, xg: torch.Tensor, w: torch.Tensor,
                      blocks: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(xg, memory_format=torch.contiguous_format),
            torch.empty_like(w, memory_format=torch.contiguous_format))


def _grouped_setup(ctx, inputs, output):
    xg, w, blocks = inputs
    ctx.save_for_backward(xg, w)
    ctx.blocks = list(blocks)


def _grouped_grad(ctx, dh):
    xg, w = ctx.saved_tensors
    dxg, dw = _grouped_backward(dh.contiguous(), xg, w, ctx.blocks)
    return dxg, dw, None


_grouped.register_autograd(_grouped_grad, setup_context=_grouped_setup)


def grouped_matmul(xg, w, blocks):
    """The grouped matmul alone: xg [R, H] holds blocks[e] blocks of 128 rows for
    expert e, in expert order; returns h [R, F] with h[b] = xg[b] @ w[e]."""
    return _grouped(xg, w, [int(b) for b in blocks])


def route(expert_idx, num_experts):
    """The block layout of a routing: (order, rows, blocks) with order the
    assignments (flattened [T*k]) sorted by expert, rows[s] the gathered row of
    sorted assignment s, blocks[e] expert e's block count. One host read (the
    per-expert counts: the layout is static data of the tile program; and one of
    the indices' range, to refuse bad ones with a clear error)."""
    flat = expert_idx.reshape(-1)
    if flat.numel() == 0:
        raise KernelError("moe_matmul: no tokens to route")
    lo, hi = torch.stack([flat.min(), flat.max()]).tolist()
    if lo < 0 or hi >= num_experts:
        raise KernelError(f"moe_matmul: expert indices must lie in [0, {num_experts}), not [{lo}, {hi}]")
    counts = torch.bincount(flat, minlength=num_experts).tolist()
    order = torch.argsort(flat, stable=True)
    blocks = [cdiv(c, P) for c in counts]
    rows, start = [], 0
    for c, b in zip(counts, blocks):
        rows.append(torch.arange(start, start + c))
        start += b * P
    return order, torch.cat(rows).to(flat.device), blocks


def moe_matmul(x, w, expert_idx, expert_weights):
    """out[t] = sum_j expert_weights[t, j] * x[t] @ w[expert_idx[t, j]]: x [T, H],
    w [E, H, F], expert_idx [T, k] (integers), expert_weights [T, k]; out [T, F] in
    x's dtype (the weighted sum in float32). Differentiable in x, w and
    expert_weights."""
    if x.dim() != 2 or w.dim() != 3 or w.shape[1] != x.shape[1]:
        raise KernelError(f"moe_matmul: x [T, H] and w [E, H, F], not {tuple(x.shape)} and {tuple(w.shape)}")
    if expert_idx.dim() != 2 or expert_idx.shape != expert_weights.shape or expert_idx.shape[0] != x.shape[0]:
        raise KernelError(f"moe_matmul: expert_idx and expert_weights [T, k] with T = {x.shape[0]}, not "
                          f"{tuple(expert_idx.shape)} and {tuple(expert_weights.shape)}")
    if expert_idx.dtype.is_floating_point or x.dtype != w.dtype:
        raise KernelError("moe_matmul: integer expert indices, and x and w of one dtype")
    T, H = x.shape
    E, _, Fd = w.shape
    k = expert_idx.shape[1]
    order, rows, blocks = route(expert_idx, E)
    tok = order // k  # the token of each sorted assignment
    xg = x.new_zeros((P * sum(blocks), H)).index_copy(0, rows, x.index_select(0, tok))
    h = _grouped(xg, w, blocks)
    g = expert_weights.reshape(-1).index_select(0, order).float()
    out = torch.zeros((T, Fd), dtype=torch.float32, device=x.device)
    return out.index_add(0, tok, h.index_select(0, rows).float() * g[:, None]).to(x.dtype)
