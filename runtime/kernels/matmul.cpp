// MATMUL: out[b] = f[0] * a[b] @ b[b] + f[1] * out[b], 2-d or batched 3-d.
//
// Arithmetic is f32 (bf16/f16 inputs are converted and the result rounded back, as
// PyTorch's CPU path accumulates in f32). Shapes that suit panels go to the packed
// multiply (packed_gemm.h), which reads any dtype and strides while packing and
// keeps packed blocks for the command's later tiles (gemm_packs.h); thin or tiny
// products, and hosts with neither AVX-512 nor AVX2 + FMA, go to OpenBLAS sgemm
// (with the kernel set blas_select.h chooses for the CPU), directly on the
// operands when each is row- or column-contiguous (the transpose flags absorb the
// column-major case), else on float copies. A column-major output is computed as
// out^T = b^T @ a^T; any other non-row-major output through a float buffer.
//
// Threads: OpenBLAS (pthread build) has one process-wide thread count, which
// cannot bound each op separately, so it is set to 1 and this file splits the work
// itself into pieces (a batch x a range of output rows or columns) run on at most
// max_threads OpenMP threads. The chip's preemptible tiles are cut before this
// (runtime/chip/tiling.h) and arrive here one per call, on one thread.
#include "blas_select.h"
#include "block.h"
#include "matrix.h"
#include "packed_gemm.h"
#include "ops.h"
#include "parallel.h"

#include <cblas.h>

#include <atomic>
#include <climits>
#include <mutex>
#include <new>
#include <vector>

namespace neuron::kernels::detail {

namespace {

// How sgemm can read a float matrix in place, if it can.
struct BlasLayout {
	bool ok;
	CBLAS_TRANSPOSE trans;
	int64_t ld;
};

BlasLayout blas_layout(const Mat &m)
{
	if (m.dt != NEURON_DTYPE_F32)
		return {false, CblasNoTrans, 0};
	// Strides of size-1 dims are irrelevant; BLAS still wants ld >= the other dim.
	const bool row_major = (m.cols <= 1 || m.cs == 1) && (m.rows <= 1 || m.rs >= std::max<int64_t>(1, m.cols));
	if (row_major) {
		const int64_t ld = m.rows <= 1 ? std::max<int64_t>(1, m.cols) : m.rs;
		if (ld <= INT_MAX)
			return {true, CblasNoTrans, ld};
	}
	const bool col_major = (m.rows <= 1 || m.rs == 1) && (m.cols <= 1 || m.cs >= std::max<int64_t>(1, m.rows));
	if (col_major) {
		const int64_t ld = m.cols <= 1 ? std::max<int64_t>(1, m.rows) : m.cs;
		if (ld <= INT_MAX)
			return {true, CblasTrans, ld};
	}
	return {false, CblasNoTrans, 0};
}

// Pack any matrix (any dtype, any strides) into a contiguous row-major float buffer.
void pack(const Mat &m, std::vector<float> &buf)
{
	buf.resize(static_cast<size_t>(m.rows * m.cols));
	for (int64_t r = 0; r < m.rows; ++r)
		load_block<float>(buf.data() + r * m.cols, m.p + r * m.rs * static_cast<int64_t>(m.es),
				  m.cs * static_cast<int64_t>(m.es), m.cols, m.dt);
}

void unpack(const std::vector<float> &buf, const Mat &m)
{
	for (int64_t r = 0; r < m.rows; ++r)
		store_block<float>(m.p + r * m.rs * static_cast<int64_t>(m.es), m.cs * static_cast<int64_t>(m.es),
				   buf.data() + r * m.cols, m.cols, m.dt);
}

struct Scratch {
	std::vector<float> a, b, c;
};

// A float operand sgemm can read: in place or packed into `buf`.
struct Operand {
	const float *p;
	CBLAS_TRANSPOSE trans;
	int ld;
};

Operand prepare_input(const Mat &m, std::vector<float> &buf)
{
	const BlasLayout l = blas_layout(m);
	if (l.ok)
		return {reinterpret_cast<const float *>(m.p), l.trans, static_cast<int>(l.ld)};
	pack(m, buf);
	return {buf.data(), CblasNoTrans, static_cast<int>(std::max<int64_t>(1, m.cols))};
}

// out = alpha * a @ b + beta * out for one tile; all dims fit in int (checked).
void gemm_tile(float alpha, const Mat &a, const Mat &b, float beta, const Mat &out, Scratch &s, GemmPacks *packs)
{
	const BlasLayout lo = blas_layout(out);
	if (lo.ok && lo.trans == CblasTrans) {
		// Column-major output: compute out^T = b^T @ a^T into it; out^T is row-major
		// (blas_layout is symmetric under transposition), so this recurses once.
		gemm_tile(alpha, b.t(), a.t(), beta, out.t(), s, packs);
		return;
	}
	const int M = static_cast<int>(out.rows), N = static_cast<int>(out.cols), K = static_cast<int>(a.cols);
	// A row-major f32 output is written in place, any other through a float buffer.
	float *c = reinterpret_cast<float *>(out.p);
	int ldc = static_cast<int>(lo.ld);
	if (!lo.ok) {
		if (beta != 0.0f)
			pack(out, s.c);
		else
			s.c.assign(static_cast<size_t>(out.rows * out.cols), 0.0f); // old contents ignored, NaNs too
		c = s.c.data();
		ldc = std::max(1, N);
	}
	if (packed_gemm_suits(M, N, K)) {
		packed_gemm(alpha, a, b, beta, c, ldc, packs); // packing reads any dtype and strides
	} else {
		const Operand A = prepare_input(a, s.a);
		const Operand B = prepare_input(b, s.b);
		cblas_sgemm(CblasRowMajor, A.trans, B.trans, M, N, K, alpha, A.p, A.ld, B.p, B.ld, beta, c, ldc);
	}
	if (!lo.ok)
		unpack(s.c, out);
}

// K == 0: the product is empty, out = beta * out (0 when beta == 0).
void scale_output(float beta, const Mat &out)
{
	std::vector<float> row(static_cast<size_t>(out.cols));
	for (int64_t r = 0; r < out.rows; ++r) {
		std::byte *p = out.p + r * out.rs * static_cast<int64_t>(out.es);
		const int64_t step = out.cs * static_cast<int64_t>(out.es);
		if (beta != 0.0f)
			load_block<float>(row.data(), p, step, out.cols, out.dt);
		for (auto &x : row)
			x = beta != 0.0f ? beta * x : 0.0f;
		store_block<float>(p, step, row.data(), out.cols, out.dt);
	}
}

struct Tile {
	int64_t batch, r0, r1, c0, c1;
};

} // namespace

// Before the first BLAS call: the kernel set for this CPU (blas_select.h), then one
// thread per call (the kernels split work themselves).
void prepare_blas()
{
	static std::once_flag once;
	std::call_once(once, [] {
		select_blas();
		openblas_set_num_threads(1);
	});
}

Result run_matmul(const neuron_cmd &cmd, std::span<const View> v, int max_threads, GemmPacks *packs)
{
	const View &o = v[0], &a = v[1], &b = v[2];
	const bool batched = o.ndim == 3;
	const int d = batched ? 1 : 0; // index of the M dim
	const int64_t nb = batched ? o.sizes[0] : 1;
	const int64_t M = o.sizes[d], N = o.sizes[d + 1], K = a.sizes[d + 1];
	if (nb == 0 || M == 0 || N == 0)
		return std::nullopt;
	if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
		return exec_fault("matmul: a dimension exceeds the BLAS index range (2^31-1)");
	const float alpha = static_cast<float>(cmd.fscalars.f[0]);
	const float beta = static_cast<float>(cmd.fscalars.f[1]);
	// Each operand's own element size: the chip's f32 partial results
	// (chain_partials.h) pair an f32 output with bf16/f16 inputs.
	auto mat = [&](const View &t, int64_t bi) {
		const size_t es = dtype_size(t.dtype);
		const int64_t bstride = batched ? t.strides[0] : 0;
		return Mat{t.data + bi * bstride * static_cast<int64_t>(es),
			   static_cast<uint8_t>(t.dtype),
			   t.sizes[d],
			   t.sizes[d + 1],
			   t.strides[d],
			   t.strides[d + 1],
			   es};
	};

	// Pieces for the threads (see the top of this file): whole batches when there
	// are enough of them, else ranges of the longer of the output's rows and columns.
	const double macs = static_cast<double>(nb) * static_cast<double>(M) * static_cast<double>(N) *
			    static_cast<double>(std::max<int64_t>(K, 1));
	// Threads only from ~16M multiply-adds (~0.4 ms on one core), each with >= 8M:
	// entering an OpenMP region on a busy host can stall for a scheduler slice
	// (~2 ms measured for a 256x64x256 product that takes ~90 us on one thread),
	// so only work well above that cost is spread out. (The chip runs a tiled
	// command one tile per thread; only a command run whole is split here.)
	constexpr double kThreadedMacs = 16777216.0, kMacsPerThread = 8388608.0;
	const int nt = macs < kThreadedMacs ? 1
					    : std::max(1, std::min<int>(max_threads, static_cast<int>(macs / kMacsPerThread)));
	std::vector<Tile> tiles;
	try {
		const int64_t per_batch = nb >= nt ? 1 : (nt + nb - 1) / nb;
		const bool split_rows = M >= N;
		const int64_t extent = split_rows ? M : N;
		const int64_t pieces = std::min<int64_t>(per_batch, extent);
		tiles.reserve(static_cast<size_t>(nb * pieces));
		for (int64_t bi = 0; bi < nb; ++bi)
			for (int64_t p = 0; p < pieces; ++p) {
				const int64_t lo = extent * p / pieces, hi = extent * (p + 1) / pieces;
				tiles.push_back(split_rows ? Tile{bi, lo, hi, 0, N} : Tile{bi, 0, M, lo, hi});
			}
	} catch (const std::bad_alloc &) {
		return exec_fault("matmul: out of host memory");
	}

	prepare_blas();
	std::atomic<bool> oom{false};
	const int threads = std::min<int64_t>(nt, static_cast<int64_t>(tiles.size()));
	parallel_ranges(static_cast<int64_t>(tiles.size()), threads, [&](int64_t begin, int64_t end, int) {
		try {
			Scratch s;
			for (int64_t i = begin; i < end; ++i) {
				const Tile &t = tiles[static_cast<size_t>(i)];
				const Mat out = mat(o, t.batch).sub(t.r0, t.r1, t.c0, t.c1);
				if (K == 0) {
					scale_output(beta, out);
					continue;
				}
				const Mat am = mat(a, t.batch).sub(t.r0, t.r1, 0, K);
				const Mat bm = mat(b, t.batch).sub(0, K, t.c0, t.c1);
				gemm_tile(alpha, am, bm, beta, out, s, packs);
			}
		} catch (const std::bad_alloc &) {
			oom = true;
		}
	});
	if (oom)
		return exec_fault("matmul: out of host memory for conversion buffers");
	return std::nullopt;
}

} // namespace neuron::kernels::detail
