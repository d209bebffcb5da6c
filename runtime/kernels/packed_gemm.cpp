#include "packed_gemm.h"

#include "block.h"

// GCC 12 warns that the intrinsics' own internal "undefined" vectors may be used
// uninitialised (GCC bug 105593); nothing here reads one.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace neuron::kernels::detail {

namespace {

// Register block: kMR rows of a x kNR columns of b, 16 zmm accumulators (bench-gemm
// prints the tiled multiply's speed against OpenBLAS).
constexpr int kMR = 8;
constexpr int kNR = 32;
// K per pass: one kKC x kNR panel of b (32 KiB) stays in L1 while the kernel walks
// the panels of a.
constexpr int64_t kKC = 256;
// Rows of a per pass over b's panels: kMC x kKC floats (256 KiB) stay in L2.
constexpr int64_t kMC = 256;

int64_t ceil_div(int64_t x, int64_t d) { return (x + d - 1) / d; }
int64_t round_up(int64_t x, int64_t m) { return ceil_div(x, m) * m; }

// The part of the next panel of b that one kernel call brings into L2 while it
// runs: the kernel calls along a panel of b share the next panel out between them.
// Without it, the first kernel call on each panel of b waits for its 32 KiB from L3
// or memory (each panel is read once per kernel call, not as one stream the
// hardware prefetchers follow); bench-gemm shows the difference on the Xeon hosts.
struct NextPanel {
	const float *begin = nullptr, *end = nullptr;
};

// c[0..kMR) x [0..kNR) = alpha * (a-panel @ b-panel) + beta * c, kc steps of K.
// a: kc groups of kMR floats; b: kc groups of kNR floats. beta == 0 writes without
// reading c. (a is packed even when it is f32 and contiguous: read in place, its 8
// rows, 4-16 KiB apart, fall into one L1 set, which made the kernel slower.)
// Every loop over the accumulators is unrolled so that they stay in registers: a
// loop left rolled makes GCC keep them in an array on the stack, zeroed with rep
// stos and spilled after the K loop, on every call.
// Meanwhile it brings `next` (floats, see NextPanel) into L2, one line every few
// K steps.
__attribute__((target("avx512f"))) void micro_kernel(int64_t kc, const float *a, const float *b, float *c,
						      int64_t ldc, float alpha, float beta, NextPanel next = {})
{
	__m512 lo[kMR], hi[kMR];
#pragma GCC unroll 8
	for (int i = 0; i < kMR; ++i) {
		lo[i] = _mm512_setzero_ps();
		hi[i] = _mm512_setzero_ps();
	}
	const int64_t lines = (next.end - next.begin + 15) / 16;
	const int64_t step = lines > 0 ? std::max<int64_t>(1, kc / lines) : kc;
	int64_t due = lines > 0 ? 0 : kc;
	for (int64_t k = 0; k < kc; ++k) {
		if (k == due) {
			if (next.begin < next.end)
				_mm_prefetch(reinterpret_cast<const char *>(next.begin), _MM_HINT_T1);
			next.begin += 16;
			due += step;
		}
		const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
		for (int i = 0; i < kMR; ++i) {
			const __m512 ai = _mm512_set1_ps(a[i]);
			lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
			hi[i] = _mm512_fmadd_ps(ai, b1, hi[i]);
		}
		a += kMR;
		b += kNR;
	}
	const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	if (beta == 0.0f) {
#pragma GCC unroll 8
		for (int i = 0; i < kMR; ++i) {
			_mm512_storeu_ps(c + i * ldc, _mm512_mul_ps(va, lo[i]));
			_mm512_storeu_ps(c + i * ldc + 16, _mm512_mul_ps(va, hi[i]));
		}
		return;
	}
#pragma GCC unroll 8
	for (int i = 0; i < kMR; ++i) {
		float *r = c + i * ldc;
		_mm512_storeu_ps(r, _mm512_fmadd_ps(vb, _mm512_loadu_ps(r), _mm512_mul_ps(va, lo[i])));
		_mm512_storeu_ps(r + 16, _mm512_fmadd_ps(vb, _mm512_loadu_ps(r + 16), _mm512_mul_ps(va, hi[i])));
	}
}

// One panel of kMR = 8 rows of a row-major f32 matrix (row stride ld), kc columns:
// panel[k * 8 + r] = x[r * ld + k]. An 8x16 transpose in registers per 16
// columns, where a scalar copy was a visible share of a 1024 multiply.
__attribute__((target("avx512f"))) void pack_rows8_f32(const float *x, int64_t ld, int64_t kc, float *panel)
{
	static_assert(kMR == 8);
	int64_t k = 0;
	for (; k + 16 <= kc; k += 16) {
		__m512 r[8];
		for (int i = 0; i < 8; ++i)
			r[i] = _mm512_loadu_ps(x + i * ld + k);
		// Per 128-bit lane j (columns 4j .. 4j+3): pairs, then quads of rows.
		const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]);
		const __m512 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
		const __m512 t4 = _mm512_unpacklo_ps(r[4], r[5]), t5 = _mm512_unpackhi_ps(r[4], r[5]);
		const __m512 t6 = _mm512_unpacklo_ps(r[6], r[7]), t7 = _mm512_unpackhi_ps(r[6], r[7]);
		// lo4[m] / hi4[m], lane j: rows 0-3 / 4-7 of column 4j + m.
		const __m512 lo4[4] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xEE),
				       _mm512_shuffle_ps(t1, t3, 0x44), _mm512_shuffle_ps(t1, t3, 0xEE)};
		const __m512 hi4[4] = {_mm512_shuffle_ps(t4, t6, 0x44), _mm512_shuffle_ps(t4, t6, 0xEE),
				       _mm512_shuffle_ps(t5, t7, 0x44), _mm512_shuffle_ps(t5, t7, 0xEE)};
		float *out = panel + k * 8;
		for (int m = 0; m < 4; ++m) {
			_mm_storeu_ps(out + (0 + m) * 8, _mm512_extractf32x4_ps(lo4[m], 0));
			_mm_storeu_ps(out + (0 + m) * 8 + 4, _mm512_extractf32x4_ps(hi4[m], 0));
			_mm_storeu_ps(out + (4 + m) * 8, _mm512_extractf32x4_ps(lo4[m], 1));
			_mm_storeu_ps(out + (4 + m) * 8 + 4, _mm512_extractf32x4_ps(hi4[m], 1));
			_mm_storeu_ps(out + (8 + m) * 8, _mm512_extractf32x4_ps(lo4[m], 2));
			_mm_storeu_ps(out + (8 + m) * 8 + 4, _mm512_extractf32x4_ps(hi4[m], 2));
			_mm_storeu_ps(out + (12 + m) * 8, _mm512_extractf32x4_ps(lo4[m], 3));
			_mm_storeu_ps(out + (12 + m) * 8 + 4, _mm512_extractf32x4_ps(hi4[m], 3));
		}
	}
	for (; k < kc; ++k)
		for (int i = 0; i < 8; ++i)
			panel[k * 8 + i] = x[i * ld + k];
}

// Packs x (lanes x K: a as is, b transposed) into panels of `width` lanes: for each
// K pass of kKC, panel after panel, each kc groups of `width` floats (lane-fastest).
// Lanes past the end are zero. Reads along whichever of x's dims is contiguous.
void pack_panels(const Mat &x, int width, float *dst)
{
	const int64_t lanes = x.rows, K = x.cols, padded = round_up(lanes, width);
	float line[kKC];
	for (int64_t k0 = 0; k0 < K; k0 += kKC) {
		const int64_t kc = std::min(kKC, K - k0);
		float *pass = dst + padded * k0;
		for (int64_t p0 = 0; p0 < padded; p0 += width) {
			float *panel = pass + p0 * kc;
			const int64_t n = std::min<int64_t>(width, lanes - p0);
			if (width == 8 && n == 8 && x.dt == NEURON_DTYPE_F32 && x.cs == 1) {
				pack_rows8_f32(reinterpret_cast<const float *>(x.at(p0, k0)), x.rs, kc, panel);
			} else if (std::abs(x.cs) <= std::abs(x.rs)) {
				// Each lane is a contiguous (or the shorter-stride) run along K.
				for (int64_t l = 0; l < n; ++l) {
					load_block<float>(line, x.at(p0 + l, k0), x.cs * static_cast<int64_t>(x.es), kc, x.dt);
					for (int64_t k = 0; k < kc; ++k)
						panel[k * width + l] = line[k];
				}
			} else if (x.dt == NEURON_DTYPE_F32 && x.rs == 1) {
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

// A block at the edge of c (fewer than kMR rows or kNR columns): the kernel writes
// a full block into a scratch buffer, then the valid part is merged.
void edge_block(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t rows, int64_t cols,
		float alpha, float beta)
{
	alignas(64) float t[kMR * kNR];
	micro_kernel(kc, a, b, t, kNR, 1.0f, 0.0f);
	for (int64_t i = 0; i < rows; ++i)
		for (int64_t j = 0; j < cols; ++j) {
			float &out = c[i * ldc + j];
			const float prod = alpha * t[i * kNR + j];
			out = beta == 0.0f ? prod : std::fma(beta, out, prod);
		}
}

} // namespace

bool packed_gemm_available()
{
	static const bool yes = __builtin_cpu_supports("avx512f");
	return yes;
}

bool packed_gemm_suits(int64_t M, int64_t N, int64_t K)
{
	// Thin shapes (matrix-vector, a few rows) waste most of a panel; tiny ones do
	// not pay for packing. OpenBLAS has kernels for both.
	return packed_gemm_available() && M >= kMR && N >= kNR / 2 && K >= 16 && M * N * K >= (int64_t{1} << 18);
}

void packed_gemm(float alpha, const Mat &a, const Mat &b, float beta, float *c, int64_t ldc, GemmPacks *packs)
{
	thread_local AlignedFloats own_a, own_b;
	const int64_t M = a.rows, N = b.cols, K = a.cols;
	const float *pa = packed(a, kMR, packs, own_a);
	const float *pb = packed(b.t(), kNR, packs, own_b);
	const int64_t Mp = round_up(M, kMR), Np = round_up(N, kNR);
	for (int64_t k0 = 0; k0 < K; k0 += kKC) {
		const int64_t kc = std::min(kKC, K - k0);
		const float *pass_a = pa + Mp * k0, *pass_b = pb + Np * k0;
		const float bk = k0 == 0 ? beta : 1.0f; // later passes add into c
		for (int64_t m0 = 0; m0 < M; m0 += kMC) {
			const int64_t m1 = std::min(M, m0 + kMC), panel = kNR * kc; // floats in a panel of b
			// Each kernel call along a panel of b prefetches its share of the next one.
			const int64_t share = round_up(ceil_div(panel, ceil_div(m1 - m0, kMR)), 16);
			for (int64_t j = 0; j < N; j += kNR) {
				const float *panel_b = pass_b + j * kc;
				const int64_t cols = std::min<int64_t>(kNR, N - j);
				for (int64_t i = m0; i < m1; i += kMR) {
					const float *panel_a = pass_a + i * kc;
					const int64_t rows = std::min<int64_t>(kMR, M - i);
					float *cb = c + i * ldc + j;
					NextPanel next;
					if (j + kNR < N) {
						const int64_t from = std::min((i - m0) / kMR * share, panel);
						next = {panel_b + panel + from, panel_b + panel + std::min(from + share, panel)};
					}
					if (rows == kMR && cols == kNR)
						micro_kernel(kc, panel_a, panel_b, cb, ldc, alpha, bk, next);
					else
						edge_block(kc, panel_a, panel_b, cb, ldc, rows, cols, alpha, bk);
				}
			}
		}
	}
}

} // namespace neuron::kernels::detail

namespace neuron::kernels {

size_t tile_pack_floats(int64_t M, int64_t N, int64_t K)
{
	using detail::kNR;
	// Either operand may take the wider panels (a column-major output swaps them),
	// and each block's slot is rounded to a cache line.
	if (!detail::packed_gemm_suits(M, N, K) && !detail::packed_gemm_suits(N, M, K))
		return 0;
	return static_cast<size_t>((detail::round_up(M, kNR) + detail::round_up(N, kNR)) * K + 32);
}

} // namespace neuron::kernels
