// The AVX-512 register kernel of the packed multiply (micro_kernel.h): 8 rows of
// a x 32 columns of b, 16 zmm accumulators (bench-gemm prints the tiled
// multiply's speed against OpenBLAS).
#include "micro_kernel.h"

#include "blas_select.h"

// GCC 12 warns that the intrinsics' own internal "undefined" vectors may be used
// uninitialised (GCC bug 105593); nothing here reads one.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>

namespace neuron::kernels::detail {

namespace {

constexpr int kMR = 8;
constexpr int kNR = 32;
static_assert(kMR * kNR <= kMaxMicroBlock);

// c[0..R) x [0..kNR) = alpha * (a-panel @ b-panel) + beta * c, kc steps of K.
// a: kc groups of kMR floats (rows past R unused); b: kc groups of kNR floats.
// beta == 0 writes without reading c. (a is packed even when it is f32 and
// contiguous: read in place, its 8 rows, 4-16 KiB apart, fall into one L1 set,
// which made the kernel slower.) Every loop over the accumulators is unrolled so
// that they stay in registers: a loop left rolled makes GCC keep them in an array
// on the stack, zeroed with rep stos and spilled after the K loop, on every call.
// Meanwhile it brings `next` (see NextPanel) into L2, one line every few K steps.
template <int R>
__attribute__((target("avx512f"))) void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
					       float alpha, float beta, NextPanel next)
{
	__m512 lo[R], hi[R];
#pragma GCC unroll 8
	for (int i = 0; i < R; ++i) {
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
		for (int i = 0; i < R; ++i) {
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
		for (int i = 0; i < R; ++i) {
			_mm512_storeu_ps(c + i * ldc, _mm512_mul_ps(va, lo[i]));
			_mm512_storeu_ps(c + i * ldc + 16, _mm512_mul_ps(va, hi[i]));
		}
		return;
	}
#pragma GCC unroll 8
	for (int i = 0; i < R; ++i) {
		float *r = c + i * ldc;
		_mm512_storeu_ps(r, _mm512_fmadd_ps(vb, _mm512_loadu_ps(r), _mm512_mul_ps(va, lo[i])));
		_mm512_storeu_ps(r + 16, _mm512_fmadd_ps(vb, _mm512_loadu_ps(r + 16), _mm512_mul_ps(va, hi[i])));
	}
}

void run(int rows, int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
	 NextPanel next)
{
	static_assert(kMR == 8);
	switch (rows) {
	case 8: return kernel<8>(kc, a, b, c, ldc, alpha, beta, next);
	case 7: return kernel<7>(kc, a, b, c, ldc, alpha, beta, next);
	case 6: return kernel<6>(kc, a, b, c, ldc, alpha, beta, next);
	case 5: return kernel<5>(kc, a, b, c, ldc, alpha, beta, next);
	case 4: return kernel<4>(kc, a, b, c, ldc, alpha, beta, next);
	case 3: return kernel<3>(kc, a, b, c, ldc, alpha, beta, next);
	case 2: return kernel<2>(kc, a, b, c, ldc, alpha, beta, next);
	default: return kernel<1>(kc, a, b, c, ldc, alpha, beta, next);
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

constexpr MicroKernel kAvx512{"AVX-512", kMR, kNR, run, pack_rows8_f32};

} // namespace

const MicroKernel *avx512_micro_kernel()
{
	static const bool yes = host_cpu_features().avx512; // NEURON_MAX_CPU_ISA may hide it
	return yes ? &kAvx512 : nullptr;
}

} // namespace neuron::kernels::detail
