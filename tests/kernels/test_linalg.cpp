// ISA 1.4 linear algebra against the defining identities, checked in double:
// P L U = A (LU + PERMUTATION), L L^T = A (CHOLESKY, both triangles), op(A) X = B
// (TRIANGULAR_SOLVE, every flag), Q R = A with Q^T Q = I (GEQRF + ORGQR), A V = V
// diag(w) (EIGH), U diag(S) Vh = A (SVD, reduced and full); batched, strided and
// broadcast operands, bf16; singular / indefinite inputs reported through info;
// bad pivots and non-finite svd/eigh inputs fault; and the rejections.
#include "ref.h"

#include <algorithm>

using namespace ref;

namespace {

using Mat = std::vector<std::vector<double>>;

Mat get_mat(const Tensor &t, const std::vector<int64_t> &batch)
{
	const int nd = t.ndim;
	const int64_t r = t.sizes[nd - 2], c = t.sizes[nd - 1];
	Mat m(static_cast<size_t>(r), std::vector<double>(static_cast<size_t>(c)));
	int64_t idx[NEURON_MAX_DIMS] = {};
	std::copy(batch.begin(), batch.end(), idx);
	for (int64_t i = 0; i < r; ++i)
		for (int64_t j = 0; j < c; ++j) {
			idx[nd - 2] = i, idx[nd - 1] = j;
			m[static_cast<size_t>(i)][static_cast<size_t>(j)] = t.get(idx);
		}
	return m;
}

Mat matmul(const Mat &a, const Mat &b)
{
	Mat c(a.size(), std::vector<double>(b.empty() ? 0 : b[0].size(), 0.0));
	for (size_t i = 0; i < a.size(); ++i)
		for (size_t k = 0; k < b.size(); ++k)
			for (size_t j = 0; j < b[0].size(); ++j)
				c[i][j] += a[i][k] * b[k][j];
	return c;
}

Mat transpose(const Mat &a)
{
	Mat t(a.empty() ? 0 : a[0].size(), std::vector<double>(a.size()));
	for (size_t i = 0; i < a.size(); ++i)
		for (size_t j = 0; j < a[0].size(); ++j)
			t[j][i] = a[i][j];
	return t;
}

void expect_mat(const Mat &got, const Mat &want, double tol, const std::string &what)
{
	cr_assert_eq(got.size(), want.size(), "%s: rows", what.c_str());
	for (size_t i = 0; i < got.size(); ++i)
		for (size_t j = 0; j < got[i].size(); ++j)
			cr_assert(std::fabs(got[i][j] - want[i][j]) <= tol * (1 + std::fabs(want[i][j])), "%s[%zu][%zu] = %g, want %g",
				  what.c_str(), i, j, got[i][j], want[i][j]);
}

Mat identity(size_t n)
{
	Mat m(n, std::vector<double>(n, 0.0));
	for (size_t i = 0; i < n; ++i)
		m[i][i] = 1;
	return m;
}

// A random [B, M, N] f32 tensor, transposed in memory (column-major matrices).
Tensor random_batch(int64_t b, int64_t m, int64_t n, uint64_t seed, int dt = NEURON_DTYPE_F32)
{
	const Tensor t = Tensor::make(dt, {b, n, m});
	t.randomize(seed, -1, 1);
	return t.transpose(1, 2);
}

neuron_cmd cmd_of(uint16_t op, std::vector<const Tensor *> ops, int64_t i0 = 0)
{
	auto c = make_cmd(op, std::move(ops));
	c.iscalars[0] = i0;
	return c;
}

} // namespace

Test(isa14_linalg, lu_and_permutation)
{
	for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 5}, {6, 4}, {3, 7}}) {
		const int64_t B = 3, k = std::min(m, n);
		const Tensor a = random_batch(B, m, n, uint64_t(m * 10 + n));
		const Tensor lu = Tensor::make(NEURON_DTYPE_F32, {B, m, n}), piv = Tensor::make(NEURON_DTYPE_I32, {B, k}),
			     info = Tensor::make(NEURON_DTYPE_I32, {B}), perm = Tensor::make(NEURON_DTYPE_I64, {B, m});
		run(cmd_of(NEURON_OP_LU, {&lu, &piv, &info, &a}), {&lu, &piv, &info, &a});
		run(cmd_of(NEURON_OP_PERMUTATION, {&perm, &piv}), {&perm, &piv});
		for (int64_t b = 0; b < B; ++b) {
			cr_assert_eq(info.get(&b), 0, "info");
			const Mat A = get_mat(a, {b}), F = get_mat(lu, {b});
			Mat L(static_cast<size_t>(m), std::vector<double>(static_cast<size_t>(k), 0.0)), U(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(n), 0.0));
			for (int64_t i = 0; i < m; ++i)
				for (int64_t j = 0; j < n; ++j) {
					if (i > j && j < k)
						L[static_cast<size_t>(i)][static_cast<size_t>(j)] = F[static_cast<size_t>(i)][static_cast<size_t>(j)];
					if (i == j && i < k)
						L[static_cast<size_t>(i)][static_cast<size_t>(j)] = 1;
					if (i <= j && i < k)
						U[static_cast<size_t>(i)][static_cast<size_t>(j)] = F[static_cast<size_t>(i)][static_cast<size_t>(j)];
				}
			Mat PA(static_cast<size_t>(m));
			for (int64_t i = 0; i < m; ++i) {
				const int64_t at[2] = {b, i};
				PA[static_cast<size_t>(i)] = A[static_cast<size_t>(perm.get(at))];
			}
			expect_mat(matmul(L, U), PA, 1e-5, "P A = L U");
		}
	}
	// A singular matrix: info names the first zero pivot (1-based).
	const Tensor s = Tensor::make(NEURON_DTYPE_F32, {3, 3});
	s.each([&](const int64_t *i) { s.set(i, double(i[0] + 1) * double(i[1] + 1)); }); // rank 1
	const Tensor lu = Tensor::make(NEURON_DTYPE_F32, {3, 3}), piv = Tensor::make(NEURON_DTYPE_I32, {3}),
		     info = Tensor::make(NEURON_DTYPE_I32, {});
	run(cmd_of(NEURON_OP_LU, {&lu, &piv, &info, &s}), {&lu, &piv, &info, &s});
	cr_assert_eq(info.get(nullptr), 2, "info of a rank-1 3x3 is 2, got %g", info.get(nullptr));
	// A pivot outside the rows faults.
	const Tensor badp = Tensor::make(NEURON_DTYPE_I32, {2}), perm = Tensor::make(NEURON_DTYPE_I64, {3});
	const int64_t i0 = 0, i1 = 1;
	badp.set(&i0, 1);
	badp.set(&i1, 7);
	auto c = cmd_of(NEURON_OP_PERMUTATION, {&perm, &badp});
	cr_assert(!neuron::kernels::check_semantics(c));
	std::vector<neuron::kernels::View> views = {perm.view(), badp.view()};
	const auto f = neuron::kernels::execute(c, views, 1);
	cr_assert(f && f->message.find("outside [1, 3]") != std::string::npos, "%s", f ? f->message.c_str() : "no fault");
}

Test(isa14_linalg, cholesky_both_triangles_and_indefinite)
{
	const int64_t B = 2, n = 6;
	const Tensor g = random_batch(B, n, n, 5);
	const Tensor a = Tensor::make(NEURON_DTYPE_F32, {B, n, n});
	for (int64_t b = 0; b < B; ++b) { // A = G G^T + n I
		const Mat G = get_mat(g, {b});
		const Mat A = matmul(G, transpose(G));
		for (int64_t i = 0; i < n; ++i)
			for (int64_t j = 0; j < n; ++j) {
				const int64_t at[3] = {b, i, j};
				a.set(at, A[static_cast<size_t>(i)][static_cast<size_t>(j)] + (i == j ? double(n) : 0));
			}
	}
	for (int upper : {0, 1}) {
		const Tensor l = Tensor::make(NEURON_DTYPE_F32, {B, n, n}), info = Tensor::make(NEURON_DTYPE_I32, {B});
		run(cmd_of(NEURON_OP_CHOLESKY, {&l, &info, &a}, upper), {&l, &info, &a});
		for (int64_t b = 0; b < B; ++b) {
			const Mat L = get_mat(l, {b});
			expect_mat(upper ? matmul(transpose(L), L) : matmul(L, transpose(L)), get_mat(a, {b}), 1e-5,
				   upper ? "U^T U" : "L L^T");
			for (int64_t i = 0; i < n; ++i)
				for (int64_t j = 0; j < n; ++j)
					if (upper ? i > j : i < j)
						cr_assert_eq(L[static_cast<size_t>(i)][static_cast<size_t>(j)], 0.0, "the other triangle is zero");
		}
	}
	const Tensor ind = Tensor::make(NEURON_DTYPE_F32, {2, 2});
	const double v[4] = {1, 2, 2, 1}; // eigenvalues 3 and -1
	for (int64_t i = 0; i < 4; ++i) {
		const int64_t at[2] = {i / 2, i % 2};
		ind.set(at, v[i]);
	}
	const Tensor l = Tensor::make(NEURON_DTYPE_F32, {2, 2}), info = Tensor::make(NEURON_DTYPE_I32, {});
	run(cmd_of(NEURON_OP_CHOLESKY, {&l, &info, &ind}), {&l, &info, &ind});
	cr_assert_eq(info.get(nullptr), 2);
}

Test(isa14_linalg, triangular_solve_every_flag)
{
	const int64_t B = 2, n = 5, k = 3;
	const Tensor t = random_batch(B, n, n, 9);
	// Well conditioned: a dominant diagonal.
	t.each([&](const int64_t *i) {
		if (i[1] == i[2])
			t.set(i, 4 + t.get(i));
	});
	for (int64_t fl = 0; fl < 16; ++fl) {
		const bool left = fl & NEURON_TRSM_LEFT, upper = fl & NEURON_TRSM_UPPER, unit = fl & NEURON_TRSM_UNIT,
			   tr = fl & NEURON_TRSM_TRANSPOSE;
		const Tensor b = left ? random_batch(B, n, k, uint64_t(fl) + 20) : random_batch(B, k, n, uint64_t(fl) + 20);
		const Tensor x = Tensor::make(NEURON_DTYPE_F32, b.shape());
		run(cmd_of(NEURON_OP_TRIANGULAR_SOLVE, {&x, &t, &b}, fl), {&x, &t, &b});
		for (int64_t bi = 0; bi < B; ++bi) {
			Mat A = get_mat(t, {bi});
			for (int64_t i = 0; i < n; ++i)
				for (int64_t j = 0; j < n; ++j) {
					if (upper ? i > j : i < j)
						A[static_cast<size_t>(i)][static_cast<size_t>(j)] = 0;
					if (i == j && unit)
						A[static_cast<size_t>(i)][static_cast<size_t>(j)] = 1;
				}
			if (tr)
				A = transpose(A);
			const Mat X = get_mat(x, {bi});
			expect_mat(left ? matmul(A, X) : matmul(X, A), get_mat(b, {bi}), 1e-4,
				   "trsm flags " + std::to_string(fl));
		}
	}
}

Test(isa14_linalg, qr_eigh_svd)
{
	for (auto [m, n] : {std::pair<int64_t, int64_t>{6, 4}, {4, 6}, {5, 5}}) {
		const int64_t B = 2, k = std::min(m, n);
		const Tensor a = random_batch(B, m, n, uint64_t(m * 7 + n));
		const Tensor packed = Tensor::make(NEURON_DTYPE_F32, {B, m, n}), tau = Tensor::make(NEURON_DTYPE_F32, {B, k}),
			     q = Tensor::make(NEURON_DTYPE_F32, {B, m, k});
		run(cmd_of(NEURON_OP_GEQRF, {&packed, &tau, &a}), {&packed, &tau, &a});
		run(cmd_of(NEURON_OP_ORGQR, {&q, &packed, &tau}), {&q, &packed, &tau});
		for (int64_t b = 0; b < B; ++b) {
			const Mat Q = get_mat(q, {b}), P = get_mat(packed, {b});
			Mat R(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(n), 0.0));
			for (int64_t i = 0; i < k; ++i)
				for (int64_t j = i; j < n; ++j)
					R[static_cast<size_t>(i)][static_cast<size_t>(j)] = P[static_cast<size_t>(i)][static_cast<size_t>(j)];
			expect_mat(matmul(Q, R), get_mat(a, {b}), 1e-5, "Q R");
			expect_mat(matmul(transpose(Q), Q), identity(static_cast<size_t>(k)), 1e-5, "Q^T Q");
		}
		for (bool full : {false, true}) {
			const Tensor u = Tensor::make(NEURON_DTYPE_F32, {B, m, full ? m : k}), s = Tensor::make(NEURON_DTYPE_F32, {B, k}),
				     vh = Tensor::make(NEURON_DTYPE_F32, {B, full ? n : k, n});
			run(cmd_of(NEURON_OP_SVD, {&u, &s, &vh, &a}), {&u, &s, &vh, &a});
			for (int64_t b = 0; b < B; ++b) {
				Mat U = get_mat(u, {b}), V = get_mat(vh, {b});
				Mat US(static_cast<size_t>(m), std::vector<double>(static_cast<size_t>(k), 0.0));
				for (int64_t i = 0; i < m; ++i)
					for (int64_t j = 0; j < k; ++j) {
						const int64_t at[2] = {b, j};
						US[static_cast<size_t>(i)][static_cast<size_t>(j)] = U[static_cast<size_t>(i)][static_cast<size_t>(j)] * s.get(at);
						if (j > 0) {
							const int64_t prev[2] = {b, j - 1};
							cr_assert(s.get(prev) >= s.get(at), "singular values descend");
						}
					}
				Mat Vk(V.begin(), V.begin() + k);
				expect_mat(matmul(US, Vk), get_mat(a, {b}), 1e-5, "U S Vh");
				expect_mat(matmul(transpose(U), U), identity(U[0].size()), 1e-5, "U^T U");
				expect_mat(matmul(V, transpose(V)), identity(V.size()), 1e-5, "Vh Vh^T");
			}
		}
	}
	// eigh of symmetric matrices, reading either triangle (the other holds garbage).
	const int64_t B = 2, n = 5;
	const Tensor g = random_batch(B, n, n, 33);
	for (int upper : {0, 1}) {
		const Tensor a = Tensor::make(NEURON_DTYPE_F32, {B, n, n});
		a.each([&](const int64_t *i) {
			const int64_t lo[3] = {i[0], std::max(i[1], i[2]), std::min(i[1], i[2])};
			const bool read = upper ? i[1] <= i[2] : i[1] >= i[2];
			a.set(i, read ? g.get(lo) : 99.0);
		});
		const Tensor w = Tensor::make(NEURON_DTYPE_F32, {B, n}), v = Tensor::make(NEURON_DTYPE_F32, {B, n, n});
		run(cmd_of(NEURON_OP_EIGH, {&w, &v, &a}, upper), {&w, &v, &a});
		for (int64_t b = 0; b < B; ++b) {
			Mat A = get_mat(a, {b});
			for (int64_t i = 0; i < n; ++i)
				for (int64_t j = 0; j < n; ++j)
					if (upper ? i > j : i < j)
						A[static_cast<size_t>(i)][static_cast<size_t>(j)] = A[static_cast<size_t>(j)][static_cast<size_t>(i)];
			const Mat V = get_mat(v, {b});
			Mat VW = V;
			for (int64_t i = 0; i < n; ++i)
				for (int64_t j = 0; j < n; ++j) {
					const int64_t at[2] = {b, j};
					VW[static_cast<size_t>(i)][static_cast<size_t>(j)] *= w.get(at);
				}
			expect_mat(matmul(A, V), VW, 1e-4, "A V = V W");
			expect_mat(matmul(transpose(V), V), identity(static_cast<size_t>(n)), 1e-5, "V^T V");
		}
	}
}

Test(isa14_linalg, rejections)
{
	auto rejected = [](const neuron_cmd &c, const char *needle) {
		const auto f = neuron::kernels::check_semantics(c);
		cr_assert(f && f->code == NEURON_FAULT_BAD_OPERAND, "accepted: expected '%s'", needle);
		cr_assert(f->message.find(needle) != std::string::npos, "'%s' lacks '%s'", f->message.c_str(), needle);
	};
	const Tensor a = Tensor::make(NEURON_DTYPE_F32, {2, 4, 3});
	const Tensor lu = Tensor::make(NEURON_DTYPE_F32, {2, 4, 3}), piv = Tensor::make(NEURON_DTYPE_I32, {2, 3}),
		     info = Tensor::make(NEURON_DTYPE_I32, {2}), piv64 = Tensor::make(NEURON_DTYPE_I64, {2, 3});
	cr_assert(!neuron::kernels::check_semantics(cmd_of(NEURON_OP_LU, {&lu, &piv, &info, &a})));
	rejected(cmd_of(NEURON_OP_LU, {&lu, &piv64, &info, &a}), "i32");
	const Tensor info_bad = Tensor::make(NEURON_DTYPE_I32, {3});
	rejected(cmd_of(NEURON_OP_LU, {&lu, &piv, &info_bad, &a}), "batch");
	const Tensor l = Tensor::make(NEURON_DTYPE_F32, {2, 4, 3});
	rejected(cmd_of(NEURON_OP_CHOLESKY, {&l, &info, &a}), "not square");
	const Tensor sq = Tensor::make(NEURON_DTYPE_F32, {2, 3, 3}), lsq = Tensor::make(NEURON_DTYPE_F32, {2, 3, 3});
	rejected(cmd_of(NEURON_OP_CHOLESKY, {&lsq, &info, &sq}, 2), "(upper)");
	const Tensor x = Tensor::make(NEURON_DTYPE_F32, {2, 3, 5}), b = Tensor::make(NEURON_DTYPE_F32, {2, 3, 5});
	cr_assert(!neuron::kernels::check_semantics(cmd_of(NEURON_OP_TRIANGULAR_SOLVE, {&x, &sq, &b}, NEURON_TRSM_LEFT)));
	rejected(cmd_of(NEURON_OP_TRIANGULAR_SOLVE, {&x, &sq, &b}, 0), "column dim");
	rejected(cmd_of(NEURON_OP_TRIANGULAR_SOLVE, {&x, &sq, &b}, 16 | NEURON_TRSM_LEFT), "flags other than");
	const Tensor u = Tensor::make(NEURON_DTYPE_F32, {2, 4, 2}), s = Tensor::make(NEURON_DTYPE_F32, {2, 3}),
		     vh = Tensor::make(NEURON_DTYPE_F32, {2, 3, 3});
	rejected(cmd_of(NEURON_OP_SVD, {&u, &s, &vh, &a}), "reduced");
	const Tensor q = Tensor::make(NEURON_DTYPE_F32, {2, 4, 2}), tau = Tensor::make(NEURON_DTYPE_F32, {2, 3});
	rejected(cmd_of(NEURON_OP_ORGQR, {&q, &a, &tau}), "reflectors");
	const Tensor ab = Tensor::make(NEURON_DTYPE_I32, {2, 4, 3});
	rejected(cmd_of(NEURON_OP_GEQRF, {&lu, &s, &ab}), "f32, bf16 or f16");
	// The input matrix's batch must be the outputs' (fuzz-command: an a of batch 0
	// beside x and b of batch 2 reached the kernel, which read through a null view).
	const Tensor sq0 = Tensor::make(NEURON_DTYPE_F32, {0, 3, 3}), sq1 = Tensor::make(NEURON_DTYPE_F32, {1, 3, 3});
	rejected(cmd_of(NEURON_OP_TRIANGULAR_SOLVE, {&x, &sq0, &b}, NEURON_TRSM_LEFT), "does not match the batch");
	rejected(cmd_of(NEURON_OP_CHOLESKY, {&lsq, &info, &sq1}), "does not match the batch");
	const Tensor sq2 = Tensor::make(NEURON_DTYPE_F32, {2, 3, 3}), w = Tensor::make(NEURON_DTYPE_F32, {2, 3}),
		     v = Tensor::make(NEURON_DTYPE_F32, {2, 3, 3});
	cr_assert(!neuron::kernels::check_semantics(cmd_of(NEURON_OP_EIGH, {&w, &v, &sq2})));
	rejected(cmd_of(NEURON_OP_EIGH, {&w, &v, &sq0}), "does not match the batch");
}

// A NaN or infinity in the input faults instead of reaching LAPACK: OpenBLAS's
// sbdsqr iterated without end on such a matrix (a core held for good; found by
// fuzz-command), and PyTorch's CPU svd refuses it too.
Test(isa14_linalg, svd_and_eigh_fault_on_non_finite_input)
{
	const int64_t n = 4;
	for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
		const Tensor a = random_batch(1, n, n, 5);
		const int64_t at[3] = {0, 2, 1};
		a.set(at, bad);
		const Tensor u = Tensor::make(NEURON_DTYPE_F32, {1, n, n}), s = Tensor::make(NEURON_DTYPE_F32, {1, n}),
			     vh = Tensor::make(NEURON_DTYPE_F32, {1, n, n});
		const auto svd = cmd_of(NEURON_OP_SVD, {&u, &s, &vh, &a});
		cr_assert(!neuron::kernels::check_semantics(svd));
		std::vector<neuron::kernels::View> sv = {u.view(), s.view(), vh.view(), a.view()};
		const auto fs = neuron::kernels::execute(svd, sv, 1);
		cr_assert(fs && fs->message.find("svd: the input matrix contains non-finite values") != std::string::npos,
			  "svd of a matrix holding %g: %s", bad, fs ? fs->message.c_str() : "no fault");

		// eigh reads one triangle: the bad value at [2][1] is in the lower one.
		const Tensor w = Tensor::make(NEURON_DTYPE_F32, {1, n}), v = Tensor::make(NEURON_DTYPE_F32, {1, n, n});
		const auto eigh = cmd_of(NEURON_OP_EIGH, {&w, &v, &a}, 0);
		cr_assert(!neuron::kernels::check_semantics(eigh));
		std::vector<neuron::kernels::View> ev = {w.view(), v.view(), a.view()};
		const auto fe = neuron::kernels::execute(eigh, ev, 1);
		cr_assert(fe && fe->message.find("eigh: the input matrix contains non-finite values") != std::string::npos,
			  "eigh of a matrix holding %g: %s", bad, fe ? fe->message.c_str() : "no fault");
		// Reading the upper triangle, the bad value is never read: no fault.
		const auto eigh_upper = cmd_of(NEURON_OP_EIGH, {&w, &v, &a}, 1);
		const auto fu = neuron::kernels::execute(eigh_upper, ev, 1);
		cr_assert(!fu, "eigh (upper) faulted on a value it does not read: %s", fu ? fu->message.c_str() : "");
	}
}
