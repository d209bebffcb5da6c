"""torch_neuron.kernels: kernels written in the tile language, traced into tile
programs, run on `neuron` tensors (neurond validates and runs them on the
simulated core's SBUF/PSUM engines) and in the NumPy simulation, each against
PyTorch on the CPU, on shapes that do not divide the tiles."""
import pytest
import torch

import torch_neuron.kernels as nk
from torch_neuron.kernels.library import matmul  # the tiled matmul (bench_kernels.py measures it too)

DEV = "neuron"


@nk.kernel
def rmsnorm(out, x, gamma, eps=1e-6):
    R, H = x.shape
    g = nk.load(gamma.broadcast(128))
    for i in nk.affine_range(nk.cdiv(R, 128)):
        rows = slice(i * 128, i * 128 + 128)
        t = nk.load(x[rows, :])
        ss = nk.sum(t * t, axis=1)
        rstd = nk.activation("rsqrt", ss, scale=1.0 / H, bias=eps)
        nk.store(out[rows, :], t * rstd * g)


@nk.kernel
def causal_softmax(out, s):
    """Row softmax of s with the upper triangle masked (-inf), rows by 128."""
    L, S = s.shape
    for i in nk.affine_range(nk.cdiv(L, 128)):
        t = nk.load(s[i * 128:i * 128 + 128, :])
        col_minus_row = nk.iota((128, S), base=-(i * 128), partition_step=-1)
        masked = nk.where(col_minus_row <= 0.0, t, float("-inf"))
        m = nk.max(masked, axis=1)
        e = nk.activation("exp", masked, bias=nk.tensor_scalar("mul", m, -1.0))
        r = nk.reciprocal(nk.sum(e, axis=1))
        nk.store(out[i * 128:i * 128 + 128, :], e * r)


def _modes():
    return [pytest.param(True, id="simulate"), pytest.param(False, id="neuron")]


def _run(k, outs, ins, simulate, **kw):
    if simulate:
        k(*outs, *ins, simulate=True, **kw)
        return [o for o in outs]
    douts = [o.to(DEV) for o in outs]
    k(*douts, *[t.to(DEV) for t in ins], **kw)
    return [o.cpu() for o in douts]


@pytest.mark.parametrize("simulate", _modes())
@pytest.mark.parametrize("dtype,rows,hidden", [(torch.float32, 300, 96), (torch.bfloat16, 130, 64)])
def test_rmsnorm(simulate, dtype, rows, hidden):
    torch.manual_seed(0)
    x = torch.randn(rows, hidden, dtype=dtype)
    g = torch.rand(hidden) + 0.5
    (got,) = _run(rmsnorm, [torch.empty_like(x)], [x, g], simulate, eps=1e-6)
    xf = x.float()
    ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * g).to(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got, ref, **tol)


@pytest.mark.parametrize("simulate", _modes())
@pytest.mark.parametrize("dtype,M,K,N", [(torch.float32, 130, 200, 600), (torch.bfloat16, 5, 17, 9)])
def test_matmul(simulate, dtype, M, K, N):
    torch.manual_seed(1)
    a, b = torch.randn(M, K, dtype=dtype), torch.randn(K, N, dtype=dtype)
    (got,) = _run(matmul, [torch.empty(M, N)], [a, b], simulate)
    torch.testing.assert_close(got, a.float() @ b.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("simulate", _modes())
def test_causal_softmax_with_iota_and_where(simulate):
    torch.manual_seed(2)
    s = torch.randn(200, 40)
    (got,) = _run(causal_softmax, [torch.empty_like(s)], [s], simulate)
    mask = torch.ones(200, 40, dtype=torch.bool).tril()
    ref = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_traced_once_per_signature():
    x = torch.randn(10, 8)
    out = torch.empty_like(x)
    g = torch.ones(8)
    rmsnorm.cache.clear()
    rmsnorm(out, x, g, simulate=True)
    rmsnorm(out, x * 2, g, simulate=True)
    assert len(rmsnorm.cache) == 1
    rmsnorm(torch.empty(11, 8), torch.randn(11, 8), g, simulate=True)
    assert len(rmsnorm.cache) == 2


def test_tracing_errors_point_at_the_kernel_line():
    @nk.kernel
    def too_many_partitions(out, x):
        t = nk.load(x[0:200, :])  # the line the error names
        nk.store(out[0:200, :], t)

    x = torch.randn(200, 4)
    with pytest.raises(nk.KernelError) as e:
        too_many_partitions(torch.empty_like(x), x, simulate=True)
    assert "test_kernels.py" in str(e.value) and "at most 128 partitions" in str(e.value)
    assert "t = nk.load(x[0:200, :])" in str(e.value)


def test_neurond_refusals_point_at_the_kernel_line():
    @nk.kernel
    def wide_matmul(c, a, b):
        at = nk.load(a.T[0:64, 0:64])
        bt = nk.load(b[0:64, 0:1024])
        acc = nk.nc_matmul(at, bt)  # N = 1024: past the tensor engine's moving limit
        nk.store(c[0:64, 0:1024], acc)

    a, b = torch.randn(64, 64, device=DEV), torch.randn(64, 1024, device=DEV)
    with pytest.raises(nk.KernelError) as e:
        wide_matmul(torch.empty(64, 1024, device=DEV), a, b)
    msg = str(e.value)
    assert "N <= 512" in msg and "acc = nk.nc_matmul(at, bt)" in msg, msg


@nk.kernel
def overlapping_rows(out, x):
    """Bad: tile i writes rows [64 i, 64 i + 128): neighbours overlap by 64 rows."""
    R, C = x.shape
    for i in nk.affine_range(nk.cdiv(R, 64)):
        t = nk.load(x[i * 64:i * 64 + 128, :])
        nk.store(out[i * 64:i * 64 + 128, :], t)  # the conflicting store


@nk.kernel
def same_row_every_iteration(out, x):
    """Bad: every iteration writes out[0:128] (a sum belongs in a sequential_range)."""
    R, C = x.shape
    for i in nk.affine_range(nk.cdiv(R, 128)):
        nk.store(out[0:128, :], nk.load(x[i * 128:i * 128 + 128, :]))


@nk.kernel
def halves_of_a_column_block(out, x):
    """Fine: rows by 128 and, inside, the two column halves of each row tile."""
    R, C = x.shape
    h = C // 2
    for i in nk.affine_range(nk.cdiv(R, 128)):
        for j in nk.affine_range(2):
            nk.store(out[i * 128:i * 128 + 128, j * h:j * h + h], nk.load(x[i * 128:i * 128 + 128, j * h:j * h + h]))


@nk.kernel
def interleaved_columns(out, x):
    """Bad: iteration j writes columns [j, j + 2) of the first 128 rows: neighbours share one column."""
    R, C = x.shape
    for j in nk.affine_range(C - 1):
        nk.store(out[0:128, j:j + 2], nk.load(x[0:128, j:j + 2]))


@pytest.mark.parametrize("bad,line", [(overlapping_rows, "nk.store(out[i * 64:i * 64 + 128, :], t)"),
                                      (same_row_every_iteration, "nk.store(out[0:128, :]"),
                                      (interleaved_columns, "nk.store(out[0:128, j:j + 2]")])
def test_affine_range_write_conflicts_are_refused_at_trace_time(bad, line):
    x = torch.randn(300, 8)
    with pytest.raises(nk.KernelError) as e:
        bad(torch.empty_like(x), x, simulate=True)
    msg = str(e.value)
    assert "test_kernels.py" in msg and "write conflict" in msg and "'out'" in msg, msg
    assert line in msg and "for " in msg.splitlines()[1], msg  # the store's line; the loop's line below the message


def test_affine_range_disjoint_writes_pass_the_check():
    x = torch.randn(300, 8)
    out = torch.empty_like(x)
    halves_of_a_column_block(out, x, simulate=True)
    torch.testing.assert_close(out, x)
    # the library's kernels (tiles of rows and columns, stacked outputs, PSUM accumulation)
    # and this file's pass it: they trace in the other tests


@nk.kernel
def softmax_rows(out, s):
    """Row softmax with the exp and its row sum in one instruction (activation_reduce)."""
    L, S = s.shape
    for i in nk.affine_range(nk.cdiv(L, 128)):
        t = nk.load(s[i * 128:i * 128 + 128, :])
        neg_m = nk.tensor_scalar("mul", nk.max(t, axis=1), -1.0)
        e, rowsum = nk.activation_reduce("exp", t, bias=neg_m)
        nk.store(out[i * 128:i * 128 + 128, :], e * nk.reciprocal(rowsum))


@pytest.mark.parametrize("simulate", _modes())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_activation_reduce_softmax(simulate, dtype):
    torch.manual_seed(3)
    s = (torch.randn(200, 600) * 3).to(dtype)  # rows past 128, a row of two engine blocks
    (got,) = _run(softmax_rows, [torch.empty_like(s)], [s], simulate)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=1e-3)
    torch.testing.assert_close(got, torch.softmax(s.float(), dim=-1).to(dtype), **tol)


@nk.kernel
def column_blocks_of_a_resident_tile(out, x):
    """x [128, 4 * 96] loaded once, read back one column block per loop iteration
    through a tile slice whose start moves with the loop."""
    whole = nk.load(x[:, :])
    for j in nk.affine_range(4):
        nk.store(out[:, j * 96:j * 96 + 96], whole[:, j * 96:j * 96 + 96] * 2.0)


@pytest.mark.parametrize("simulate", _modes())
def test_tile_slices_moving_with_a_loop(simulate):
    x = torch.randn(128, 384)
    (got,) = _run(column_blocks_of_a_resident_tile, [torch.empty_like(x)], [x], simulate)
    torch.testing.assert_close(got, x * 2.0, rtol=0, atol=0)


def test_tile_slices_stay_inside_the_tile():
    @nk.kernel
    def past_the_end(out, x):
        whole = nk.load(x[:, :])
        for j in nk.affine_range(4):
            nk.store(out[:, j * 96:j * 96 + 96], whole[:, j * 100:j * 100 + 96])

    x = torch.randn(128, 384)
    with pytest.raises(nk.KernelError, match="inside the dim in every iteration"):
        past_the_end(torch.empty_like(x), x, simulate=True)
