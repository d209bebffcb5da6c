"""torch.linalg on 'neuron' (the chip's LU, Cholesky, triangular solve, QR, eigh
and SVD commands) against the CPU, batched and non-contiguous, in strict mode;
factorizations with sign freedom (QR's and SVD's vectors, eigh's) are checked by
reconstruction and by their unique parts."""
import pytest
import torch

from helpers import DEV, check, noncontig

pytestmark = pytest.mark.usefixtures("strict")


def well_conditioned(*shape):
    g = torch.Generator().manual_seed(sum(shape))
    a = torch.randn(*shape, generator=g)
    return noncontig(a + shape[-1] * torch.eye(shape[-1]))


def spd(*shape):
    g = torch.Generator().manual_seed(sum(shape) + 1)
    a = torch.randn(*shape, generator=g)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


TOL = dict(rtol=1e-4, atol=1e-4)


def test_solve_inv_det_slogdet():
    a, b = well_conditioned(3, 5, 5), torch.randn(3, 5, 2)
    check(torch.linalg.solve, a, b, **TOL)
    check(lambda x, y: torch.linalg.solve(x, y, left=False), a, b.mT.contiguous(), **TOL)
    check(torch.linalg.solve, a[0], torch.randn(5), **TOL)  # a vector right-hand side
    check(torch.linalg.inv, a, **TOL)
    check(torch.linalg.det, a, **TOL)
    check(torch.linalg.slogdet, a, **TOL)
    check(torch.det, torch.randn(4, 4), **TOL)


def test_lu_family():
    a = well_conditioned(2, 6, 6)
    check(torch.linalg.lu_factor, a, grad=False, **TOL)
    check(torch.linalg.lu, a, **TOL)
    check(lambda t: torch.linalg.lu(t), torch.randn(5, 3), **TOL)  # tall
    lu, piv = torch.linalg.lu_factor(a)
    b = torch.randn(2, 6, 3)
    for left in (True, False):
        for adjoint in (False, True):
            rhs = b if left else b.mT.contiguous()
            check(lambda L, B: torch.linalg.lu_solve(L, piv.to(L.device), B, left=left, adjoint=adjoint), lu, rhs,
                  grad=False, **TOL)
    check(lambda L: torch.lu_unpack(L, piv.to(L.device)), lu, grad=False, **TOL)


def test_cholesky_family():
    a = spd(3, 5, 5)
    check(torch.linalg.cholesky, a, **TOL)
    check(lambda t: torch.linalg.cholesky(t, upper=True), a, **TOL)
    L = torch.linalg.cholesky(a)
    check(lambda l, b: torch.cholesky_solve(b, l), L, torch.randn(3, 5, 2), **TOL)
    check(torch.cholesky_inverse, L[0], **TOL)
    # not positive definite: the same error as on the CPU
    with pytest.raises(RuntimeError, match="positive-definite"):
        torch.linalg.cholesky(-torch.eye(3, device=DEV))


def test_triangular_solves():
    a = torch.triu(well_conditioned(2, 4, 4))
    b = torch.randn(2, 4, 3)
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=True), a, b, **TOL)
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=True, left=False, unitriangular=True), a,
          b.mT.contiguous(), **TOL)
    check(lambda y, x: torch.triangular_solve(y, x, upper=True, transpose=True), b, a, **TOL)


def test_qr_eigh_svd_by_their_unique_parts():
    a = torch.randn(3, 6, 4)
    for mode in ("reduced", "complete"):
        q, r = torch.linalg.qr(a.to(DEV), mode=mode)
        torch.testing.assert_close((q @ r).cpu(), a, **TOL)
        torch.testing.assert_close((q.mT @ q).cpu(), torch.eye(q.shape[-1]).expand(3, -1, -1), **TOL)
        assert torch.equal(torch.triu(r).cpu(), r.cpu())
    check(torch.linalg.svdvals, a, **TOL)
    check(lambda t: torch.linalg.matrix_norm(t, "nuc"), a, **TOL)
    check(torch.linalg.pinv, a, **TOL)
    check(torch.linalg.matrix_rank, a, grad=False)
    s = spd(2, 5, 5)
    check(torch.linalg.eigvalsh, s, **TOL)
    w, v = torch.linalg.eigh(s.to(DEV))
    torch.testing.assert_close((v @ torch.diag_embed(w) @ v.mT).cpu(), s, **TOL)
    u, sv, vh = torch.linalg.svd(a.to(DEV), full_matrices=False)
    torch.testing.assert_close((u * sv.unsqueeze(-2) @ vh).cpu(), a, **TOL)
    check(lambda t: torch.linalg.householder_product(*torch.geqrf(t)), a, grad=False, **TOL)
