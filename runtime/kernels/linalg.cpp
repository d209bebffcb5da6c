// ISA 1.4 dense linear algebra on batches of matrices: LU, PERMUTATION, CHOLESKY,
// TRIANGULAR_SOLVE, GEQRF, ORGQR, EIGH, SVD (cmd.h), by the LAPACK routines of
// OpenBLAS in f32 (as PyTorch's float kernels), each matrix packed column-major
// into a private buffer first (any dtype, any strides) and unpacked after.
// Matrices are independent: threads split the batch.
#include "batch.h"
#include "block.h"
#include "ops.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

extern "C" {
// LAPACK / BLAS (Fortran ABI: trailing hidden lengths of the character arguments).
void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, size_t);
void strsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m, const int *n,
	    const float *alpha, const float *a, const int *lda, float *b, const int *ldb, size_t, size_t, size_t, size_t);
void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work, const int *lwork, int *info);
void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau, float *work,
	     const int *lwork, int *info);
void ssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *lda, float *w, float *work,
	     const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);
void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u, const int *ldu,
	     float *vt, const int *ldvt, float *work, const int *lwork, int *iwork, int *info, size_t);
}

namespace neuron::kernels::detail {

namespace {

// Stride of dim d in bytes. An empty view's strides are never used and may be
// anything (semantics.cpp), so the product wraps instead of overflowing.
int64_t byte_stride(const View &v, int d)
{
	return static_cast<int64_t>(static_cast<uint64_t>(v.strides[d]) * dtype_size(v.dtype));
}

// One matrix (the last two dims of a view) at a batch position.
struct Mat {
	std::byte *base;
	int64_t rows, cols, rs, cs; // strides in bytes
	uint8_t dt;

	Mat(const View &v, std::byte *b)
		: base(b), rows(v.sizes[v.ndim - 2]), cols(v.sizes[v.ndim - 1]),
		  rs(byte_stride(v, v.ndim - 2)), cs(byte_stride(v, v.ndim - 1)), dt(v.dtype)
	{
	}
	// Column-major copy with leading dim ld (>= rows): buf[i + j ld] = m[i][j].
	void pack(float *buf, int64_t ld) const
	{
		if (rows == 0) // an empty matrix may have no memory (base null)
			return;
		for (int64_t j = 0; j < cols; ++j)
			load_block<float>(buf + j * ld, base + j * cs, rs, rows, dt);
	}
	void unpack(const float *buf, int64_t ld) const
	{
		if (rows == 0)
			return;
		for (int64_t j = 0; j < cols; ++j)
			store_block<float>(base + j * cs, rs, buf + j * ld, rows, dt);
	}
};

// One vector (the last dim of a view) at a batch position.
struct Vec {
	std::byte *base;
	int64_t n, step;
	uint8_t dt;

	Vec(const View &v, std::byte *b)
		: base(b), n(v.ndim ? v.sizes[v.ndim - 1] : 1),
		  step(v.ndim ? byte_stride(v, v.ndim - 1) : 0), dt(v.dtype)
	{
	}
	template <class T> void store(const T *src, int64_t count) const { store_block<T>(base, step, src, count, dt); }
	template <class T> void load(T *dst, int64_t count) const { load_block<T>(dst, base, step, count, dt); }
};

void store_i32(std::byte *p, int v) { st<int32_t>(p, v); }

// Runs f(batch bases) for every matrix of the batch, threads splitting them;
// returns the first fault any matrix reported.
// lead: the number of batch dims (operand 0's leading dims).
template <class F> Result each_matrix(std::span<const View> v, int lead, int max_threads, int64_t work_each, F &&f)
{
	std::vector<BatchBases> bs;
	try {
		bs = batch_bases(v, lead);
	} catch (const std::bad_alloc &) {
		return exec_fault("linear algebra: out of host memory");
	}
	const int64_t count = static_cast<int64_t>(bs.size());
	const int nt = static_cast<int>(std::min<int64_t>(threads_for(count * work_each, int64_t{1} << 22, max_threads), count));
	std::string fault;
	parallel_ranges(count, std::max(nt, 1), [&](int64_t b, int64_t e, int) {
		try {
			for (int64_t i = b; i < e; ++i) {
				std::string err = f(bs[static_cast<size_t>(i)]);
				if (!err.empty()) {
#pragma omp critical
					if (fault.empty())
						fault = err;
					return;
				}
			}
		} catch (const std::bad_alloc &) {
#pragma omp critical
			if (fault.empty())
				fault = "out of host memory for a matrix";
		}
	});
	if (!fault.empty())
		return exec_fault(fault);
	return std::nullopt;
}

} // namespace

Result run_lu(const neuron_cmd &, std::span<const View> v, int max_threads)
{
	const View &a = v[3];
	const int m = static_cast<int>(a.sizes[a.ndim - 2]), n = static_cast<int>(a.sizes[a.ndim - 1]), k = std::min(m, n);
	prepare_blas();
	return each_matrix(v, a.ndim - 2, max_threads, int64_t{m} * n * k, [&](const BatchBases &b) -> std::string {
		std::vector<float> buf(static_cast<size_t>(std::max(m, 1)) * static_cast<size_t>(n));
		std::vector<int> piv(static_cast<size_t>(k) + 1);
		Mat(a, b[3]).pack(buf.data(), std::max(m, 1));
		int info = 0;
		const int lda = std::max(m, 1);
		if (m > 0 && n > 0)
			sgetrf_(&m, &n, buf.data(), &lda, piv.data(), &info);
		Mat(v[0], b[0]).unpack(buf.data(), lda);
		const std::vector<int64_t> pivots(piv.begin(), piv.begin() + k);
		Vec(v[1], b[1]).store<int64_t>(pivots.data(), k);
		store_i32(b[2], std::max(info, 0));
		return info < 0 ? "lu: LAPACK sgetrf rejected argument " + std::to_string(-info) : std::string();
	});
}

Result run_permutation(const neuron_cmd &, std::span<const View> v, int max_threads)
{
	const View &perm = v[0], &piv = v[1];
	const int64_t m = perm.sizes[perm.ndim - 1], k = piv.sizes[piv.ndim - 1];
	return each_matrix(v, perm.ndim - 1, max_threads, m + k, [&](const BatchBases &b) -> std::string {
		std::vector<int64_t> p(static_cast<size_t>(m)), swaps(static_cast<size_t>(k));
		for (int64_t i = 0; i < m; ++i)
			p[static_cast<size_t>(i)] = i;
		Vec(piv, b[1]).load<int64_t>(swaps.data(), k);
		for (int64_t i = 0; i < k; ++i) {
			const int64_t s = swaps[static_cast<size_t>(i)] - 1;
			if (s < 0 || s >= m)
				return "permutation: pivot " + std::to_string(s + 1) + " at position " + std::to_string(i) +
				       " is outside [1, " + std::to_string(m) + "]";
			std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(s)]);
		}
		Vec(perm, b[0]).store<int64_t>(p.data(), m);
		return {};
	});
}

Result run_cholesky(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const View &a = v[2];
	const int n = static_cast<int>(a.sizes[a.ndim - 1]);
	const bool upper = cmd.iscalars[0] == 1;
	prepare_blas();
	return each_matrix(v, a.ndim - 2, max_threads, int64_t{n} * n * n, [&](const BatchBases &b) -> std::string {
		const int ld = std::max(n, 1);
		std::vector<float> buf(static_cast<size_t>(ld) * static_cast<size_t>(n));
		Mat(a, b[2]).pack(buf.data(), ld);
		int info = 0;
		if (n > 0)
			spotrf_(upper ? "U" : "L", &n, buf.data(), &ld, &info, 1);
		for (int j = 0; j < n; ++j) // zero the triangle that is not the factor
			for (int i = 0; i < n; ++i)
				if (upper ? i > j : i < j)
					buf[static_cast<size_t>(i + j * ld)] = 0;
		Mat(v[0], b[0]).unpack(buf.data(), ld);
		store_i32(b[1], std::max(info, 0));
		return info < 0 ? "cholesky: LAPACK spotrf rejected argument " + std::to_string(-info) : std::string();
	});
}

Result run_triangular_solve(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const View &x = v[0], &a = v[1], &bv = v[2];
	const int64_t f = cmd.iscalars[0];
	const bool left = f & NEURON_TRSM_LEFT;
	const int rows = static_cast<int>(x.sizes[x.ndim - 2]), cols = static_cast<int>(x.sizes[x.ndim - 1]);
	const int n = static_cast<int>(a.sizes[a.ndim - 1]);
	prepare_blas();
	return each_matrix(v, x.ndim - 2, max_threads, int64_t{n} * n * (left ? cols : rows), [&](const BatchBases &b) -> std::string {
		const int lda = std::max(n, 1), ldb = std::max(rows, 1);
		std::vector<float> A(static_cast<size_t>(lda) * static_cast<size_t>(n)),
			B(static_cast<size_t>(ldb) * static_cast<size_t>(cols));
		Mat(a, b[1]).pack(A.data(), lda);
		Mat(bv, b[2]).pack(B.data(), ldb);
		const float one = 1.0f;
		if (rows > 0 && cols > 0)
			strsm_(left ? "L" : "R", f & NEURON_TRSM_UPPER ? "U" : "L", f & NEURON_TRSM_TRANSPOSE ? "T" : "N",
			       f & NEURON_TRSM_UNIT ? "U" : "N", &rows, &cols, &one, A.data(), &lda, B.data(), &ldb, 1, 1, 1, 1);
		Mat(x, b[0]).unpack(B.data(), ldb);
		return {};
	});
}

Result run_geqrf(const neuron_cmd &, std::span<const View> v, int max_threads)
{
	const View &a = v[2];
	const int m = static_cast<int>(a.sizes[a.ndim - 2]), n = static_cast<int>(a.sizes[a.ndim - 1]), k = std::min(m, n);
	prepare_blas();
	return each_matrix(v, a.ndim - 2, max_threads, int64_t{m} * n * k, [&](const BatchBases &b) -> std::string {
		const int lda = std::max(m, 1);
		std::vector<float> buf(static_cast<size_t>(lda) * static_cast<size_t>(n)), tau(static_cast<size_t>(k) + 1);
		Mat(a, b[2]).pack(buf.data(), lda);
		int info = 0;
		if (m > 0 && n > 0) {
			float q = 0;
			int lwork = -1;
			sgeqrf_(&m, &n, buf.data(), &lda, tau.data(), &q, &lwork, &info);
			lwork = std::max(1, static_cast<int>(q));
			std::vector<float> work(static_cast<size_t>(lwork));
			sgeqrf_(&m, &n, buf.data(), &lda, tau.data(), work.data(), &lwork, &info);
		}
		Mat(v[0], b[0]).unpack(buf.data(), lda);
		Vec(v[1], b[1]).store<float>(tau.data(), k);
		return info < 0 ? "geqrf: LAPACK rejected argument " + std::to_string(-info) : std::string();
	});
}

Result run_orgqr(const neuron_cmd &, std::span<const View> v, int max_threads)
{
	const View &q = v[0], &packed = v[1], &tau = v[2];
	const int m = static_cast<int>(q.sizes[q.ndim - 2]), kq = static_cast<int>(q.sizes[q.ndim - 1]);
	const int k = static_cast<int>(tau.sizes[tau.ndim - 1]);
	prepare_blas();
	return each_matrix(v, q.ndim - 2, max_threads, int64_t{m} * kq * std::max(k, 1), [&](const BatchBases &b) -> std::string {
		const int lda = std::max(m, 1);
		std::vector<float> buf(static_cast<size_t>(lda) * static_cast<size_t>(std::max(kq, 1)), 0.0f);
		std::vector<float> t(static_cast<size_t>(k) + 1);
		// The reflectors: the first min(kq, packed's columns) columns of packed.
		const Mat p(packed, b[1]);
		for (int64_t j = 0; m > 0 && j < std::min<int64_t>(kq, p.cols); ++j)
			load_block<float>(buf.data() + j * lda, p.base + j * p.cs, p.rs, m, p.dt);
		Vec(tau, b[2]).load<float>(t.data(), k);
		int info = 0;
		if (m > 0 && kq > 0) {
			float w = 0;
			int lwork = -1;
			sorgqr_(&m, &kq, &k, buf.data(), &lda, t.data(), &w, &lwork, &info);
			lwork = std::max(1, static_cast<int>(w));
			std::vector<float> work(static_cast<size_t>(lwork));
			sorgqr_(&m, &kq, &k, buf.data(), &lda, t.data(), work.data(), &lwork, &info);
		}
		Mat(q, b[0]).unpack(buf.data(), lda);
		return info < 0 ? "orgqr: LAPACK rejected argument " + std::to_string(-info) : std::string();
	});
}

// LAPACK's iterative solvers can iterate without end on NaN or infinity (sbdsqr did
// in fuzzing: a core held for good): refuse such input as PyTorch's CPU svd/eigh do.
static bool all_finite(const std::vector<float> &m)
{
	return std::all_of(m.begin(), m.end(), [](float x) { return std::isfinite(x); });
}

// Whether the triangle ssyevd reads of a column-major n x n matrix is finite (the
// other triangle may hold anything, as for PyTorch's eigh).
static bool triangle_finite(const std::vector<float> &m, int n, int ld, bool upper)
{
	for (int c = 0; c < n; ++c)
		for (int r = upper ? 0 : c; r < (upper ? c + 1 : n); ++r)
			if (!std::isfinite(m[static_cast<size_t>(r) + static_cast<size_t>(c) * static_cast<size_t>(ld)]))
				return false;
	return true;
}

Result run_eigh(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const View &a = v[2];
	const int n = static_cast<int>(a.sizes[a.ndim - 1]);
	const bool upper = cmd.iscalars[0] == 1;
	prepare_blas();
	return each_matrix(v, a.ndim - 2, max_threads, int64_t{n} * n * n * 4, [&](const BatchBases &b) -> std::string {
		const int lda = std::max(n, 1);
		std::vector<float> buf(static_cast<size_t>(lda) * static_cast<size_t>(n)), w(static_cast<size_t>(n) + 1);
		Mat(a, b[2]).pack(buf.data(), lda);
		if (!triangle_finite(buf, n, lda, upper))
			return "eigh: the input matrix contains non-finite values (NaN or infinity)";
		int info = 0;
		if (n > 0) {
			float wq = 0;
			int iq = 0, lwork = -1, liwork = -1;
			ssyevd_("V", upper ? "U" : "L", &n, buf.data(), &lda, w.data(), &wq, &lwork, &iq, &liwork, &info, 1, 1);
			lwork = std::max(1, static_cast<int>(wq));
			liwork = std::max(1, iq);
			std::vector<float> work(static_cast<size_t>(lwork));
			std::vector<int> iwork(static_cast<size_t>(liwork));
			ssyevd_("V", upper ? "U" : "L", &n, buf.data(), &lda, w.data(), work.data(), &lwork, iwork.data(), &liwork,
				&info, 1, 1);
		}
		if (info > 0)
			return "eigh: the algorithm failed to converge (LAPACK ssyevd info " + std::to_string(info) + ")";
		Vec(v[0], b[0]).store<float>(w.data(), n);
		Mat(v[1], b[1]).unpack(buf.data(), lda);
		return info < 0 ? "eigh: LAPACK rejected argument " + std::to_string(-info) : std::string();
	});
}

Result run_svd(const neuron_cmd &, std::span<const View> v, int max_threads)
{
	const View &u = v[0], &vh = v[2], &a = v[3];
	const int m = static_cast<int>(a.sizes[a.ndim - 2]), n = static_cast<int>(a.sizes[a.ndim - 1]), k = std::min(m, n);
	const int ucols = static_cast<int>(u.sizes[u.ndim - 1]), vrows = static_cast<int>(vh.sizes[vh.ndim - 2]);
	const bool full = ucols == m && vrows == n && !(m == k && n == k);
	prepare_blas();
	return each_matrix(v, a.ndim - 2, max_threads, int64_t{m} * n * k * 4, [&](const BatchBases &b) -> std::string {
		const int lda = std::max(m, 1), ldu = std::max(m, 1), ldvt = std::max(full ? n : k, 1);
		std::vector<float> A(static_cast<size_t>(lda) * static_cast<size_t>(n)), S(static_cast<size_t>(k) + 1),
			U(static_cast<size_t>(ldu) * static_cast<size_t>(std::max(ucols, 1))),
			VT(static_cast<size_t>(ldvt) * static_cast<size_t>(n));
		std::vector<int> iwork(static_cast<size_t>(8 * std::max(k, 1)));
		Mat(a, b[3]).pack(A.data(), lda);
		if (!all_finite(A))
			return "svd: the input matrix contains non-finite values (NaN or infinity)";
		int info = 0;
		if (k > 0) {
			const char *job = full ? "A" : "S";
			float wq = 0;
			int lwork = -1;
			sgesdd_(job, &m, &n, A.data(), &lda, S.data(), U.data(), &ldu, VT.data(), &ldvt, &wq, &lwork, iwork.data(),
				&info, 1);
			lwork = std::max(1, static_cast<int>(wq));
			std::vector<float> work(static_cast<size_t>(lwork));
			sgesdd_(job, &m, &n, A.data(), &lda, S.data(), U.data(), &ldu, VT.data(), &ldvt, work.data(), &lwork,
				iwork.data(), &info, 1);
		} else { // empty: identities for the full factors
			for (int i = 0; i < std::min(m, ucols); ++i)
				U[static_cast<size_t>(i + i * ldu)] = 1;
			for (int i = 0; i < std::min(n, vrows); ++i)
				VT[static_cast<size_t>(i + i * ldvt)] = 1;
		}
		if (info > 0)
			return "svd: the algorithm failed to converge (LAPACK sgesdd info " + std::to_string(info) + ")";
		Mat(v[0], b[0]).unpack(U.data(), ldu);
		Vec(v[1], b[1]).store<float>(S.data(), k);
		Mat(v[2], b[2]).unpack(VT.data(), ldvt);
		return info < 0 ? "svd: LAPACK rejected argument " + std::to_string(-info) : std::string();
	});
}

} // namespace neuron::kernels::detail
