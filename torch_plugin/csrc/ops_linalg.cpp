// torch.linalg on the chip's ISA 1.4 linear algebra (LU, PERMUTATION, CHOLESKY,
// TRIANGULAR_SOLVE, GEQRF, ORGQR, EIGH, SVD): the ATen kernels PyTorch's own
// linalg functions are built on (LU factor / solve, det, slogdet, inverse,
// Cholesky factor / solve / inverse, triangular solves, QR and Householder
// products, eigh, SVD), each one or a few chip commands and native compositions.
// Complex matrices and linalg.eig (complex results) stay on the CPU fallback.
#include "compose.h"

#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

bool mats_ok(std::initializer_list<const Tensor *> ts)
{
	for (const Tensor *t : ts)
		if (t->defined() && (!float_dev(*t) || t->dim() < 2 || t->dim() > NEURON_MAX_DIMS))
			return false;
	return true;
}

std::vector<int64_t> batch_of(const Tensor &t, int tail) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - tail); }

std::vector<int64_t> with_tail(std::vector<int64_t> b, std::initializer_list<int64_t> tail)
{
	b.insert(b.end(), tail.begin(), tail.end());
	return b;
}

void submit_linalg(int op, std::initializer_list<Tensor> ops, int64_t i0 = 0)
{
	bool empty = false;
	for (const Tensor &t : ops)
		empty = empty || t.numel() == 0;
	const Tensor &out = *ops.begin();
	neuron_cmd cmd;
	cmd_init(cmd, op, static_cast<int>(ops.size()));
	int k = 0;
	for (const Tensor &t : ops)
		cmd.operands[k++] = desc(t);
	cmd.iscalars[0] = i0;
	if (!empty)
		submit(out, cmd);
}

struct LUResult {
	Tensor lu, pivots, info;
};

LUResult lu_factor_dev(const Tensor &A)
{
	const int64_t m = A.size(-2), n = A.size(-1);
	const auto b = batch_of(A, 2);
	LUResult r{at::empty(A.sizes(), A.options()), at::empty(with_tail(b, {std::min(m, n)}), A.options().dtype(c10::kInt)),
		   at::zeros(b, A.options().dtype(c10::kInt))};
	if (A.numel())
		submit_linalg(NEURON_OP_LU, {r.lu, r.pivots, r.info, A});
	return r;
}

// The rows of A that the pivots' swaps bring to each row (A[perm] = L U).
Tensor permutation(const Tensor &pivots, int64_t m)
{
	Tensor perm = at::empty(with_tail(batch_of(pivots, 1), {m}), pivots.options().dtype(c10::kLong));
	if (pivots.size(-1) == 0) {
		perm.copy_(at::arange(m, perm.options()).expand(perm.sizes()));
		return perm;
	}
	submit_linalg(NEURON_OP_PERMUTATION, {perm, pivots});
	return perm;
}

// x = op(A)^-1 b (left) or b op(A)^-1, A and b broadcast over the batch.
Tensor trsm(const Tensor &A, const Tensor &b, bool upper, bool left, bool unit, bool transpose)
{
	const auto batch = at::infer_size(c10::IntArrayRef(batch_of(A, 2)), c10::IntArrayRef(batch_of(b, 2)));
	std::vector<int64_t> bshape(batch.begin(), batch.end());
	const Tensor Ae = A.expand(with_tail(bshape, {A.size(-2), A.size(-1)}));
	const Tensor be = b.expand(with_tail(bshape, {b.size(-2), b.size(-1)}));
	Tensor x = at::empty(be.sizes(), b.options());
	const int64_t flags = (upper ? NEURON_TRSM_UPPER : 0) | (left ? NEURON_TRSM_LEFT : 0) | (unit ? NEURON_TRSM_UNIT : 0) |
			      (transpose ? NEURON_TRSM_TRANSPOSE : 0);
	submit_linalg(NEURON_OP_TRIANGULAR_SOLVE, {x, Ae, be}, flags);
	return x;
}

// Rows of b in the order perm gives (b[perm]), batched.
Tensor permute_rows(const Tensor &b, const Tensor &perm)
{
	const auto batch = at::infer_size(c10::IntArrayRef(batch_of(b, 2)), c10::IntArrayRef(batch_of(perm, 1)));
	std::vector<int64_t> bs(batch.begin(), batch.end());
	const Tensor be = b.expand(with_tail(bs, {b.size(-2), b.size(-1)}));
	const Tensor idx = perm.expand(with_tail(bs, {perm.size(-1)})).unsqueeze(-1).expand(be.sizes());
	return at::gather(be, -2, idx);
}

// Solves A X = B from A's LU factors (or A^T X = B with adjoint).
Tensor lu_solve_left(const Tensor &lu, const Tensor &pivots, const Tensor &B, bool adjoint)
{
	const Tensor perm = permutation(pivots, lu.size(-2));
	if (!adjoint) { // P L U X = B: X = U^-1 L^-1 (B[perm])
		const Tensor y = trsm(lu, permute_rows(B, perm), false, true, true, false);
		return trsm(lu, y, true, true, false, false);
	}
	// U^T L^T P^T X = B: Z = L^-T U^-T B, X[perm] = Z
	const Tensor z = trsm(lu, trsm(lu, B, true, true, false, true), false, true, true, true);
	const Tensor inv = at::argsort(perm, static_cast<int64_t>(-1), false); // the inverse permutation
	return permute_rows(z, inv);
}

Tensor lu_solve_dev(const Tensor &lu, const Tensor &pivots, const Tensor &B, bool left, bool adjoint)
{
	if (left)
		return lu_solve_left(lu, pivots, B, adjoint);
	// X A = B  <=>  A^T X^T = B^T
	return lu_solve_left(lu, pivots, B.mT(), !adjoint).mT();
}

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex_dev(const Tensor &A, bool pivot, bool check_errors)
{
	NEURON_NATIVE("linalg_lu_factor_ex");
	TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on the neuron device");
	TORCH_CHECK(A.dim() >= 2, "torch.linalg.lu_factor: Expected tensor with 2 or more dimensions. Got size: ", A.sizes(),
		    " instead");
	if (!mats_ok({&A})) {
		note_fallback("linalg_lu_factor_ex");
		auto [a, b, c] = at::linalg_lu_factor_ex(A.cpu(), pivot, check_errors);
		return {to_dev(a, A), to_dev(b, A), to_dev(c, A)};
	}
	LUResult r = lu_factor_dev(A);
	if (check_errors)
		at::_linalg_check_errors(r.info, "torch.linalg.lu_factor_ex", A.dim() == 2);
	return {r.lu, r.pivots, r.info};
}
std::tuple<Tensor &, Tensor &, Tensor &> lu_factor_ex_o(const Tensor &A, bool pivot, bool check_errors, Tensor &lu,
							Tensor &piv, Tensor &info)
{
	auto [a, b, c] = lu_factor_ex_dev(A, pivot, check_errors);
	assign_out(lu, a), assign_out(piv, b), assign_out(info, c);
	return {lu, piv, info};
}

// P, L, U of packed LU factors.
std::tuple<Tensor, Tensor, Tensor> unpack_lu(const Tensor &lu, const Tensor &pivots, bool data, bool pivots_too)
{
	const int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
	Tensor P, L, U;
	if (pivots_too) {
		const Tensor perm = permutation(pivots, m);
		P = at::one_hot(perm, m).to(lu.scalar_type()).mT().contiguous(); // P[perm[c], c] = 1
	} else {
		P = at::empty({0}, lu.options());
	}
	if (data) {
		L = at::tril(lu.narrow(-1, 0, k), -1) + at::eye(m, k, lu.options());
		U = at::triu(lu.narrow(-2, 0, k));
	} else {
		L = at::empty({0}, lu.options());
		U = at::empty({0}, lu.options());
	}
	return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> lu_unpack_dev(const Tensor &lu, const Tensor &pivots, bool data, bool pivots_too)
{
	NEURON_NATIVE("lu_unpack");
	if (!mats_ok({&lu}) || !index_ok(pivots)) {
		note_fallback("lu_unpack");
		auto [a, b, c] = at::lu_unpack(lu.cpu(), pivots.cpu(), data, pivots_too);
		return {to_dev(a, lu), to_dev(b, lu), to_dev(c, lu)};
	}
	return unpack_lu(lu, pivots, data, pivots_too);
}
std::tuple<Tensor &, Tensor &, Tensor &> lu_unpack_o(const Tensor &lu, const Tensor &piv, bool d, bool p, Tensor &P, Tensor &L,
						     Tensor &U)
{
	auto [a, b, c] = lu_unpack_dev(lu, piv, d, p);
	assign_out(P, a), assign_out(L, b), assign_out(U, c);
	return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> linalg_lu_dev(const Tensor &A, bool pivot)
{
	NEURON_NATIVE("linalg_lu");
	TORCH_CHECK(pivot, "linalg.lu: LU without pivoting is not implemented on the neuron device");
	if (!mats_ok({&A})) {
		note_fallback("linalg_lu");
		auto [a, b, c] = at::linalg_lu(A.cpu(), pivot);
		return {to_dev(a, A), to_dev(b, A), to_dev(c, A)};
	}
	LUResult r = lu_factor_dev(A);
	return unpack_lu(r.lu, r.pivots, true, true);
}
std::tuple<Tensor &, Tensor &, Tensor &> linalg_lu_o(const Tensor &A, bool pivot, Tensor &P, Tensor &L, Tensor &U)
{
	auto [a, b, c] = linalg_lu_dev(A, pivot);
	assign_out(P, a), assign_out(L, b), assign_out(U, c);
	return {P, L, U};
}

Tensor &lu_solve_o(const Tensor &lu, const Tensor &pivots, const Tensor &B, bool left, bool adjoint, Tensor &out)
{
	NEURON_NATIVE("linalg_lu_solve");
	if (!mats_ok({&lu, &B}) || !index_ok(pivots))
		return note_fallback("linalg_lu_solve"),
		       assign_out(out, at::linalg_lu_solve(lu.cpu(), pivots.cpu(), B.cpu(), left, adjoint));
	return assign_out(out, lu_solve_dev(lu, pivots, B, left, adjoint));
}
Tensor lu_solve_f(const Tensor &lu, const Tensor &pivots, const Tensor &B, bool left, bool adjoint)
{
	Tensor out = at::empty({0}, B.options());
	return lu_solve_o(lu, pivots, B, left, adjoint, out);
}

// PyTorch factors a contiguous real matrix as its transpose (LAPACK wants column
// major), and the backward formulas of det, slogdet and solve assume so.
bool uses_transpose(const Tensor &A) { return A.is_contiguous() && !A.is_complex(); }

bool vector_rhs(const Tensor &A, const Tensor &B)
{
	return B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes() == A.sizes().slice(0, A.dim() - 1));
}

std::tuple<Tensor, Tensor, Tensor, Tensor> solve_ex_dev(const Tensor &A, const Tensor &B, bool left, bool check_errors)
{
	NEURON_NATIVE("_linalg_solve_ex");
	if (!mats_ok({&A}) || !float_dev(B)) {
		note_fallback("_linalg_solve_ex");
		auto [a, b, c, d] = at::_linalg_solve_ex(A.cpu(), B.cpu(), left, check_errors);
		return {to_dev(a, A), to_dev(b, A), to_dev(c, A), to_dev(d, A)};
	}
	const bool vec = vector_rhs(A, B);
	// As PyTorch 2.13's kernel, whose backward reads these LU factors: A itself is
	// factored (its det and slogdet factor A^T when A is contiguous, see below).
	LUResult r = lu_factor_dev(A);
	if (check_errors)
		at::_linalg_check_errors(r.info, "torch.linalg.solve_ex", A.dim() == 2);
	const Tensor Bm = vec ? B.unsqueeze(-1) : B;
	Tensor x = lu_solve_dev(r.lu, r.pivots, Bm, left, false);
	if (vec)
		x = x.squeeze(-1);
	return {x, r.lu, r.pivots, r.info};
}
std::tuple<Tensor &, Tensor &, Tensor &, Tensor &> solve_ex_o(const Tensor &A, const Tensor &B, bool left, bool ce,
							       Tensor &x, Tensor &lu, Tensor &piv, Tensor &info)
{
	auto [a, b, c, d] = solve_ex_dev(A, B, left, ce);
	assign_out(x, a), assign_out(lu, b), assign_out(piv, c), assign_out(info, d);
	return {x, lu, piv, info};
}

std::tuple<Tensor, Tensor> inv_ex_dev(const Tensor &A, bool check_errors)
{
	NEURON_NATIVE("linalg_inv_ex");
	if (!mats_ok({&A})) {
		note_fallback("linalg_inv_ex");
		auto [a, b] = at::linalg_inv_ex(A.cpu(), check_errors);
		return {to_dev(a, A), to_dev(b, A)};
	}
	TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.inv: A must be batches of square matrices, but they are ", A.size(-2),
		    " by ", A.size(-1), " matrices");
	LUResult r = lu_factor_dev(A);
	if (check_errors)
		at::_linalg_check_errors(r.info, "torch.linalg.inv_ex", A.dim() == 2);
	const Tensor eye = at::eye(A.size(-1), A.options()).expand(A.sizes());
	return {lu_solve_dev(r.lu, r.pivots, eye, true, false), r.info};
}
std::tuple<Tensor &, Tensor &> inv_ex_o(const Tensor &A, bool ce, Tensor &inv, Tensor &info)
{
	auto [a, b] = inv_ex_dev(A, ce);
	assign_out(inv, a), assign_out(info, b);
	return {inv, info};
}

// det(A) = (-1)^(rows swapped) * prod(diag(U)).
std::tuple<Tensor, Tensor> det_parts(const LUResult &r)
{
	const Tensor diag = r.lu.diagonal(0, -2, -1);
	const Tensor swapped = at::sum(r.pivots != (at::arange(1, r.pivots.size(-1) + 1, r.pivots.options())), -1);
	const Tensor odd = swapped.to(r.lu.scalar_type()) - 2.0 * at::floor(swapped.to(r.lu.scalar_type()) * 0.5);
	const Tensor sign = 1.0 - 2.0 * odd;
	return {diag, sign};
}

std::tuple<Tensor, Tensor, Tensor> linalg_det_dev(const Tensor &A)
{
	NEURON_NATIVE("_linalg_det");
	if (!mats_ok({&A}) || A.size(-1) != A.size(-2)) {
		note_fallback("_linalg_det");
		auto [a, b, c] = at::_linalg_det(A.cpu());
		return {to_dev(a, A), to_dev(b, A), to_dev(c, A)};
	}
	LUResult r = lu_factor_dev(uses_transpose(A) ? A.mT() : A); // det(A^T) = det(A), factored as PyTorch's
	auto [diag, sign] = det_parts(r);
	return {sign * at::prod(diag, -1), r.lu, r.pivots};
}
std::tuple<Tensor &, Tensor &, Tensor &> linalg_det_o(const Tensor &A, Tensor &det, Tensor &lu, Tensor &piv)
{
	auto [a, b, c] = linalg_det_dev(A);
	assign_out(det, a), assign_out(lu, b), assign_out(piv, c);
	return {det, lu, piv};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_slogdet_dev(const Tensor &A)
{
	NEURON_NATIVE("_linalg_slogdet");
	if (!mats_ok({&A}) || A.size(-1) != A.size(-2)) {
		note_fallback("_linalg_slogdet");
		auto [a, b, c, d] = at::_linalg_slogdet(A.cpu());
		return {to_dev(a, A), to_dev(b, A), to_dev(c, A), to_dev(d, A)};
	}
	LUResult r = lu_factor_dev(uses_transpose(A) ? A.mT() : A); // det(A^T) = det(A), factored as PyTorch's
	auto [diag, sign] = det_parts(r);
	const Tensor s = sign * at::prod(at::sign(diag), -1);
	return {s, at::sum(at::log(at::abs(diag)), -1), r.lu, r.pivots};
}
std::tuple<Tensor &, Tensor &, Tensor &, Tensor &> linalg_slogdet_o(const Tensor &A, Tensor &s, Tensor &l, Tensor &lu,
								    Tensor &piv)
{
	auto [a, b, c, d] = linalg_slogdet_dev(A);
	assign_out(s, a), assign_out(l, b), assign_out(lu, c), assign_out(piv, d);
	return {s, l, lu, piv};
}

// ---- Cholesky ----

std::tuple<Tensor, Tensor> cholesky_ex_dev(const Tensor &A, bool upper, bool check_errors)
{
	NEURON_NATIVE("linalg_cholesky_ex");
	if (!mats_ok({&A}) || A.size(-1) != A.size(-2)) {
		note_fallback("linalg_cholesky_ex");
		auto [a, b] = at::linalg_cholesky_ex(A.cpu(), upper, check_errors);
		return {to_dev(a, A), to_dev(b, A)};
	}
	Tensor L = at::empty(A.sizes(), A.options()), info = at::zeros(batch_of(A, 2), A.options().dtype(c10::kInt));
	if (A.numel())
		submit_linalg(NEURON_OP_CHOLESKY, {L, info, A}, upper ? 1 : 0);
	if (check_errors)
		at::_linalg_check_errors(info, "torch.linalg.cholesky_ex", A.dim() == 2);
	return {L, info};
}
std::tuple<Tensor &, Tensor &> cholesky_ex_o(const Tensor &A, bool upper, bool ce, Tensor &L, Tensor &info)
{
	auto [a, b] = cholesky_ex_dev(A, upper, ce);
	assign_out(L, a), assign_out(info, b);
	return {L, info};
}

// A X = B with A = L L^T (or U^T U), from the factor.
Tensor cholesky_solve_with(const Tensor &B, const Tensor &F, bool upper)
{
	if (upper)
		return trsm(F, trsm(F, B, true, true, false, true), true, true, false, false);
	return trsm(F, trsm(F, B, false, true, false, false), false, true, false, true);
}
Tensor cholesky_solve_helper(const Tensor &B, const Tensor &F, bool upper)
{
	NEURON_NATIVE("_cholesky_solve_helper");
	if (!mats_ok({&B, &F}))
		return note_fallback("_cholesky_solve_helper"), to_dev(at::_cholesky_solve_helper(B.cpu(), F.cpu(), upper), B);
	return cholesky_solve_with(B, F, upper);
}
Tensor cholesky_inverse_dev(const Tensor &F, bool upper)
{
	NEURON_NATIVE("cholesky_inverse");
	if (!mats_ok({&F}))
		return note_fallback("cholesky_inverse"), to_dev(at::cholesky_inverse(F.cpu(), upper), F);
	return cholesky_solve_with(at::eye(F.size(-1), F.options()).expand(F.sizes()), F, upper);
}
Tensor &cholesky_inverse_o(const Tensor &F, bool upper, Tensor &out) { return assign_out(out, cholesky_inverse_dev(F, upper)); }

// ---- triangular solves ----

Tensor &solve_triangular_o(const Tensor &A, const Tensor &B, bool upper, bool left, bool unit, Tensor &out)
{
	NEURON_NATIVE("linalg_solve_triangular");
	if (!mats_ok({&A, &B}))
		return note_fallback("linalg_solve_triangular"),
		       assign_out(out, at::linalg_solve_triangular(A.cpu(), B.cpu(), upper, left, unit));
	return assign_out(out, trsm(A, B, upper, left, unit, false));
}
Tensor solve_triangular_dev(const Tensor &A, const Tensor &B, bool upper, bool left, bool unit)
{
	Tensor out = at::empty({0}, B.options());
	return solve_triangular_o(A, B, upper, left, unit, out);
}
std::tuple<Tensor, Tensor> triangular_solve_dev(const Tensor &b, const Tensor &A, bool upper, bool transpose, bool unit)
{
	NEURON_NATIVE("triangular_solve");
	if (!mats_ok({&A, &b})) {
		note_fallback("triangular_solve");
		auto [x, c] = at::triangular_solve(b.cpu(), A.cpu(), upper, transpose, unit);
		return {to_dev(x, b), to_dev(c, b)};
	}
	const Tensor x = trsm(A, b, upper, true, unit, transpose);
	return {x, A.expand(with_tail(batch_of(x, 2), {A.size(-2), A.size(-1)})).clone()};
}
std::tuple<Tensor &, Tensor &> triangular_solve_o(const Tensor &b, const Tensor &A, bool upper, bool transpose, bool unit,
						  Tensor &x, Tensor &c)
{
	auto [a, d] = triangular_solve_dev(b, A, upper, transpose, unit);
	assign_out(x, a), assign_out(c, d);
	return {x, c};
}

// ---- QR ----

std::tuple<Tensor, Tensor> geqrf_dev(const Tensor &A)
{
	const int64_t k = std::min(A.size(-2), A.size(-1));
	Tensor packed = at::empty(A.sizes(), A.options()), tau = at::zeros(with_tail(batch_of(A, 2), {k}), A.options());
	if (A.numel())
		submit_linalg(NEURON_OP_GEQRF, {packed, tau, A});
	return {packed, tau};
}

// The first `cols` columns of Q from packed reflectors and tau.
Tensor orgqr_dev(const Tensor &packed, const Tensor &tau, int64_t cols)
{
	Tensor q = at::empty(with_tail(batch_of(packed, 2), {packed.size(-2), cols}), packed.options());
	if (tau.size(-1) == 0) {
		q.copy_(at::eye(packed.size(-2), cols, packed.options()).expand(q.sizes()));
		return q;
	}
	submit_linalg(NEURON_OP_ORGQR, {q, packed, tau});
	return q;
}

std::tuple<Tensor, Tensor> geqrf_op(const Tensor &A)
{
	NEURON_NATIVE("geqrf");
	if (!mats_ok({&A})) {
		note_fallback("geqrf");
		auto [a, b] = at::geqrf(A.cpu());
		return {to_dev(a, A), to_dev(b, A)};
	}
	return geqrf_dev(A);
}
std::tuple<Tensor &, Tensor &> geqrf_o(const Tensor &A, Tensor &a, Tensor &tau)
{
	auto [x, y] = geqrf_op(A);
	assign_out(a, x), assign_out(tau, y);
	return {a, tau};
}

Tensor &householder_product_o(const Tensor &A, const Tensor &tau, Tensor &out)
{
	NEURON_NATIVE("linalg_householder_product");
	if (!mats_ok({&A}) || !float_dev(tau) || tau.size(-1) > A.size(-1) || A.size(-1) > A.size(-2))
		return note_fallback("linalg_householder_product"),
		       assign_out(out, at::linalg_householder_product(A.cpu(), tau.cpu()));
	return assign_out(out, orgqr_dev(A, tau, A.size(-1)));
}
Tensor householder_product_dev(const Tensor &A, const Tensor &tau)
{
	Tensor out = at::empty({0}, A.options());
	return householder_product_o(A, tau, out);
}

Tensor &ormqr_o(const Tensor &A, const Tensor &tau, const Tensor &C, bool left, bool transpose, Tensor &out)
{
	NEURON_NATIVE("ormqr");
	if (!mats_ok({&A, &C}) || !float_dev(tau) || tau.size(-1) > A.size(-1))
		return note_fallback("ormqr"), assign_out(out, at::ormqr(A.cpu(), tau.cpu(), C.cpu(), left, transpose));
	const Tensor q = orgqr_dev(A, tau, A.size(-2)); // the whole Q, m x m
	const Tensor qt = transpose ? q.mT() : q;
	return assign_out(out, left ? at::matmul(qt, C) : at::matmul(C, qt));
}
Tensor ormqr_dev(const Tensor &A, const Tensor &tau, const Tensor &C, bool left, bool transpose)
{
	Tensor out = at::empty({0}, C.options());
	return ormqr_o(A, tau, C, left, transpose, out);
}

std::tuple<Tensor, Tensor> linalg_qr_dev(const Tensor &A, c10::string_view mode)
{
	NEURON_NATIVE("linalg_qr");
	TORCH_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '",
		    std::string(mode), "' but expected one of 'reduced' (default), 'r', or 'complete'");
	if (!mats_ok({&A})) {
		note_fallback("linalg_qr");
		auto [q, r] = at::linalg_qr(A.cpu(), mode);
		return {to_dev(q, A), to_dev(r, A)};
	}
	const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
	auto [packed, tau] = geqrf_dev(A);
	const bool complete = mode == "complete";
	const Tensor R = at::triu(complete ? packed : packed.narrow(-2, 0, k));
	if (mode == "r")
		return {at::empty({0}, A.options()), R};
	return {orgqr_dev(packed, tau, complete ? m : k), R};
}
std::tuple<Tensor &, Tensor &> linalg_qr_o(const Tensor &A, c10::string_view mode, Tensor &Q, Tensor &R)
{
	auto [q, r] = linalg_qr_dev(A, mode);
	assign_out(Q, q), assign_out(R, r);
	return {Q, R};
}

// ---- eigh, SVD ----

std::tuple<Tensor, Tensor> linalg_eigh_dev(const Tensor &A, c10::string_view uplo, bool compute_v)
{
	NEURON_NATIVE("_linalg_eigh");
	TORCH_CHECK(uplo == "L" || uplo == "U", "Expected UPLO argument to be 'L' or 'U', but got ", std::string(uplo));
	if (!mats_ok({&A}) || A.size(-1) != A.size(-2)) {
		note_fallback("_linalg_eigh");
		auto [w, v] = at::_linalg_eigh(A.cpu(), uplo, compute_v);
		return {to_dev(w, A), to_dev(v, A)};
	}
	Tensor w = at::empty(batch_of(A, 1), A.options()), v = at::empty(A.sizes(), A.options());
	if (A.numel())
		submit_linalg(NEURON_OP_EIGH, {w, v, A}, uplo == "U" ? 1 : 0);
	return {w, compute_v ? v : at::empty({0}, A.options())};
}
std::tuple<Tensor &, Tensor &> linalg_eigh_o(const Tensor &A, c10::string_view uplo, bool cv, Tensor &w, Tensor &v)
{
	auto [a, b] = linalg_eigh_dev(A, uplo, cv);
	assign_out(w, a), assign_out(v, b);
	return {w, v};
}

std::tuple<Tensor, Tensor, Tensor> linalg_svd_dev(const Tensor &A, bool full, bool compute_uv, std::optional<c10::string_view> driver)
{
	NEURON_NATIVE("_linalg_svd");
	if (!mats_ok({&A})) {
		note_fallback("_linalg_svd");
		auto [u, s, vh] = at::_linalg_svd(A.cpu(), full, compute_uv, driver);
		return {to_dev(u, A), to_dev(s, A), to_dev(vh, A)};
	}
	const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
	const auto b = batch_of(A, 2);
	const bool f = full && compute_uv;
	Tensor u = at::empty(with_tail(b, {m, f ? m : k}), A.options()), s = at::empty(with_tail(b, {k}), A.options()),
	       vh = at::empty(with_tail(b, {f ? n : k, n}), A.options());
	if (k > 0)
		submit_linalg(NEURON_OP_SVD, {u, s, vh, A});
	else if (f) {
		u.copy_(at::eye(m, A.options()).expand(u.sizes()));
		vh.copy_(at::eye(n, A.options()).expand(vh.sizes()));
	}
	if (!compute_uv)
		return {at::empty({0}, A.options()), s, at::empty({0}, A.options())};
	return {u, s, vh};
}
std::tuple<Tensor &, Tensor &, Tensor &> linalg_svd_o(const Tensor &A, bool full, bool cuv, std::optional<c10::string_view> d,
						      Tensor &U, Tensor &S, Tensor &Vh)
{
	auto [u, s, vh] = linalg_svd_dev(A, full, cuv, d);
	assign_out(U, u), assign_out(S, s), assign_out(Vh, vh);
	return {U, S, Vh};
}

// The errors linalg functions raise from an info tensor: read to the host (a
// sync, as CUDA's check_errors), then PyTorch's own checks on the host copy.
void check_errors(const Tensor &info, c10::string_view api, bool is_matrix)
{
	NEURON_NATIVE("_linalg_check_errors");
	at::_linalg_check_errors(info.cpu(), api, is_matrix);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("linalg_lu_factor_ex", &lu_factor_ex_dev);
	m.impl("linalg_lu_factor_ex.out", &lu_factor_ex_o);
	m.impl("lu_unpack", &lu_unpack_dev);
	m.impl("lu_unpack.out", &lu_unpack_o);
	m.impl("linalg_lu", &linalg_lu_dev);
	m.impl("linalg_lu.out", &linalg_lu_o);
	m.impl("linalg_lu_solve", &lu_solve_f);
	m.impl("linalg_lu_solve.out", &lu_solve_o);
	m.impl("_linalg_solve_ex", &solve_ex_dev);
	m.impl("_linalg_solve_ex.result", &solve_ex_o);
	m.impl("linalg_inv_ex", &inv_ex_dev);
	m.impl("linalg_inv_ex.inverse", &inv_ex_o);
	m.impl("_linalg_det", &linalg_det_dev);
	m.impl("_linalg_det.result", &linalg_det_o);
	m.impl("_linalg_slogdet", &linalg_slogdet_dev);
	m.impl("_linalg_slogdet.sign", &linalg_slogdet_o);
	m.impl("linalg_cholesky_ex", &cholesky_ex_dev);
	m.impl("linalg_cholesky_ex.L", &cholesky_ex_o);
	m.impl("_cholesky_solve_helper", &cholesky_solve_helper);
	m.impl("cholesky_inverse", &cholesky_inverse_dev);
	m.impl("cholesky_inverse.out", &cholesky_inverse_o);
	m.impl("linalg_solve_triangular", &solve_triangular_dev);
	m.impl("linalg_solve_triangular.out", &solve_triangular_o);
	m.impl("triangular_solve", &triangular_solve_dev);
	m.impl("triangular_solve.X", &triangular_solve_o);
	m.impl("geqrf", &geqrf_op);
	m.impl("geqrf.a", &geqrf_o);
	m.impl("linalg_householder_product", &householder_product_dev);
	m.impl("linalg_householder_product.out", &householder_product_o);
	m.impl("ormqr", &ormqr_dev);
	m.impl("ormqr.out", &ormqr_o);
	m.impl("linalg_qr", &linalg_qr_dev);
	m.impl("linalg_qr.out", &linalg_qr_o);
	m.impl("_linalg_eigh", &linalg_eigh_dev);
	m.impl("_linalg_eigh.eigenvalues", &linalg_eigh_o);
	m.impl("_linalg_svd", &linalg_svd_dev);
	m.impl("_linalg_svd.U", &linalg_svd_o);
	m.impl("_linalg_check_errors", &check_errors);
}

} // namespace torch_neuron
