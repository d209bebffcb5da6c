#include "packed_gemm.h"

#include "block.h"
#include "micro_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace neuron::kernels::detail {

namespace {

// K per pass: one kKC x nr panel of b (32 KiB for AVX-512, 16 KiB for AVX2) stays
// in L1 while the kernel walks the panels of a.
constexpr int64_t kKC = 256;
// Rows of a per pass over b's panels: kMC x kKC floats (256 KiB) stay in L2.
constexpr int64_t kMC = 256;

int64_t ceil_div(int64_t x, int64_t d) { return (x + d - 1) / d; }
int64_t round_up(int64_t x, int64_t m) { return ceil_div(x, m) * m; }

std::atomic<const MicroKernel *> &active()
{
	static std::atomic<const MicroKernel *> k{avx512_micro_kernel() ? avx512_micro_kernel() : avx2_micro_kernel()};
	return k;
}

// kc lines of W contiguous f32 lanes of x (rs == 1) into a panel of width W.
template <int W>
void copy_lines(float *panel, const Mat &x, int64_t p0, int64_t k0, int64_t kc)
{
	const float *src = reinterpret_cast<const float *>(x.at(p0, k0));
	for (int64_t k = 0; k < kc; ++k)
		std::memcpy(panel + k * W, src + k * x.cs, W * sizeof(float));
}

// Packs x (lanes x K: a as is, b transposed) into panels of `width` lanes: for each
// K pass of kKC, panel after panel, each kc groups of `width` floats (lane-fastest).
// Lanes past the end are zero. Reads along whichever of x's dims is contiguous.
void pack_panels(const Mat &x, int width, float *dst)
{
	const MicroKernel *mk = active_micro_kernel();
	const auto pack_rows = mk && mk->mr == width ? mk->pack_rows_f32 : nullptr;
	const int64_t lanes = x.rows, K = x.cols, padded = round_up(lanes, width);
	float line[kKC];
	for (int64_t k0 = 0; k0 < K; k0 += kKC) {
		const int64_t kc = std::min(kKC, K - k0);
		float *pass = dst + padded * k0;
		for (int64_t p0 = 0; p0 < padded; p0 += width) {
			float *panel = pass + p0 * kc;
			const int64_t n = std::min<int64_t>(width, lanes - p0);
			if (pack_rows && n == width && x.dt == NEURON_DTYPE_F32 && x.cs == 1) {
				pack_rows(reinterpret_cast<const float *>(x.at(p0, k0)), x.rs, kc, panel);
			} else if (std::abs(x.cs) <= std::abs(x.rs)) {
				// Each lane is a contiguous (or the shorter-stride) run along K.
				for (int64_t l = 0; l < n; ++l) {
					load_block<float>(line, x.at(p0 + l, k0), x.cs * static_cast<int64_t>(x.es), kc, x.dt);
					for (int64_t k = 0; k < kc; ++k)
						panel[k * width + l] = line[k];
				}
			} else if (x.dt == NEURON_DTYPE_F32 && x.rs == 1) {
				// A panel's lanes are contiguous: one copy per k. The kernels' full
				// widths copy a fixed size, inlined (a libc call per 64 or 128 bytes
				// was ~6% of a transformer training step's device time).
				if (n == width && width == 32)
					copy_lines<32>(panel, x, p0, k0, kc);
				else if (n == width && width == 16)
					copy_lines<16>(panel, x, p0, k0, kc);
				else
					for (int64_t k = 0; k < kc; ++k)
						std::memcpy(panel + k * width, x.at(p0, k0 + k), static_cast<size_t>(n) * sizeof(float));
			} else {
				for (int64_t k = 0; k < kc; ++k)
					load_block<float>(panel + k * width, x.at(p0, k0 + k), x.rs * static_cast<int64_t>(x.es), n,
							  x.dt);
			}
			if (n < width)
				for (int64_t k = 0; k < kc; ++k)
					std::fill(panel + k * width + n, panel + (k + 1) * width, 0.0f);
		}
	}
}

// The packed copy of x: from the command's packs, else packed into `own`.
const float *packed(const Mat &x, int width, GemmPacks *packs, AlignedFloats &own)
{
	const size_t floats = static_cast<size_t>(round_up(x.rows, width) * x.cols);
	if (packs)
		if (const float *p = packs->get(x, width, floats, [&](float *dst) { pack_panels(x, width, dst); }))
			return p;
	float *dst = own.reserve(floats);
	pack_panels(x, width, dst);
	return dst;
}

// A block at the edge of c with fewer than nr columns: the kernel writes its rows
// into a scratch buffer, then the valid columns are merged.
void edge_block(const MicroKernel &mk, int rows, int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
		int64_t cols, float alpha, float beta)
{
	alignas(64) float t[kMaxMicroBlock];
	mk.run(rows, kc, a, b, t, mk.nr, 1.0f, 0.0f, {});
	for (int64_t i = 0; i < rows; ++i)
		for (int64_t j = 0; j < cols; ++j) {
			float &out = c[i * ldc + j];
			const float prod = alpha * t[i * mk.nr + j];
			out = beta == 0.0f ? prod : std::fma(beta, out, prod);
		}
}

} // namespace

const MicroKernel *active_micro_kernel() { return active().load(std::memory_order_relaxed); }

bool use_micro_kernel(std::string_view name)
{
	const MicroKernel *k = name.empty() ? (avx512_micro_kernel() ? avx512_micro_kernel() : avx2_micro_kernel())
						 : nullptr;
	for (const MicroKernel *c : {avx512_micro_kernel(), avx2_micro_kernel()})
		if (c && c->name == name)
			k = c;
	if (!k)
		return false;
	active().store(k, std::memory_order_relaxed);
	return true;
}

bool packed_gemm_available() { return active_micro_kernel() != nullptr; }

bool packed_gemm_suits(int64_t M, int64_t N, int64_t K)
{
	// Thin shapes (matrix-vector, a few rows) waste most of a panel; tiny ones do
	// not pay for packing. OpenBLAS has kernels for both.
	const MicroKernel *mk = active_micro_kernel();
	return mk && M >= mk->mr && N >= mk->nr / 2 && K >= 16 && M * N * K >= (int64_t{1} << 18);
}

void packed_gemm(float alpha, const Mat &a, const Mat &b, float beta, float *c, int64_t ldc, GemmPacks *packs)
{
	thread_local AlignedFloats own_a, own_b;
	const MicroKernel &mk = *active_micro_kernel();
	const int64_t mr = mk.mr, nr = mk.nr, mc = kMC / mr * mr; // passes start on a panel of a
	const int64_t M = a.rows, N = b.cols, K = a.cols;
	const float *pa = packed(a, mk.mr, packs, own_a);
	const float *pb = packed(b.t(), mk.nr, packs, own_b);
	const int64_t Mp = round_up(M, mr), Np = round_up(N, nr);
	for (int64_t k0 = 0; k0 < K; k0 += kKC) {
		const int64_t kc = std::min(kKC, K - k0);
		const float *pass_a = pa + Mp * k0, *pass_b = pb + Np * k0;
		const float bk = k0 == 0 ? beta : 1.0f; // later passes add into c
		for (int64_t m0 = 0; m0 < M; m0 += mc) {
			const int64_t m1 = std::min(M, m0 + mc), panel = nr * kc; // floats in a panel of b
			// Each kernel call along a panel of b prefetches its share of the next one.
			const int64_t share = round_up(ceil_div(panel, ceil_div(m1 - m0, mr)), 16);
			for (int64_t j = 0; j < N; j += nr) {
				const float *panel_b = pass_b + j * kc;
				const int64_t cols = std::min(nr, N - j);
				for (int64_t i = m0; i < m1; i += mr) {
					const float *panel_a = pass_a + i * kc;
					const int rows = static_cast<int>(std::min(mr, M - i));
					float *cb = c + i * ldc + j;
					NextPanel next;
					if (j + nr < N) {
						const int64_t from = std::min((i - m0) / mr * share, panel);
						next = {panel_b + panel + from, panel_b + panel + std::min(from + share, panel)};
					}
					if (cols == nr)
						mk.run(rows, kc, panel_a, panel_b, cb, ldc, alpha, bk, next);
					else
						edge_block(mk, rows, kc, panel_a, panel_b, cb, ldc, cols, alpha, bk);
				}
			}
		}
	}
}

} // namespace neuron::kernels::detail

namespace neuron::kernels {

size_t pack_block_floats(int64_t lanes, int64_t K)
{
	// Either operand may take either panel width (a column-major output swaps
	// them); each block's slot is rounded to a cache line.
	const detail::MicroKernel *mk = detail::active_micro_kernel();
	const int64_t width = mk ? std::max(detail::round_up(lanes, mk->mr), detail::round_up(lanes, mk->nr)) : lanes;
	return static_cast<size_t>(detail::round_up(width * K, 16));
}

size_t tile_pack_floats(int64_t M, int64_t N, int64_t K)
{
	if (!detail::packed_gemm_suits(M, N, K) && !detail::packed_gemm_suits(N, M, K))
		return 0;
	return pack_block_floats(M, K) + pack_block_floats(N, K);
}

} // namespace neuron::kernels
