// The AVX2 + FMA register kernel of the packed multiply (micro_kernel.h), for
// hosts without AVX-512 (AMD Zen 1-3, Intel Haswell to Alder Lake): 6 rows of a x
// 16 columns of b in 12 ymm accumulators, with two registers for b and one for the
// broadcast element of a: the 16 ymm registers, as in BLIS's and OpenBLAS's
// Haswell/Zen sgemm kernels. 12 independent accumulators cover the FMA latency
// (4-5 cycles on two FMA pipes); 6 broadcasts and 2 loads per 12 FMAs stay within
// the load ports.
#include "micro_kernel.h"

#include <immintrin.h>


namespace neuron::kernels::detail {

namespace {

constexpr int kMR = 6;
constexpr int kNR = 16;
static_assert(kMR * kNR <= kMaxMicroBlock);

// One K step: rows 0..R of a's group times b's 16 columns, into the accumulators.
template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void step(const float *a, const float *b, __m256 *lo,
								      __m256 *hi)
{
	const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
	for (int i = 0; i < R; ++i) {
		const __m256 ai = _mm256_broadcast_ss(a + i);
		lo[i] = _mm256_fmadd_ps(ai, b0, lo[i]);
		hi[i] = _mm256_fmadd_ps(ai, b1, hi[i]);
	}
}

// c[0..R) x [0..kNR) = alpha * (a-panel @ b-panel) + beta * c, kc steps of K; the
// same arithmetic, per element, as the AVX-512 kernel (one f32 FMA chain along K
// from zero, then alpha * sum + beta * c). Loops over the accumulators are
// unrolled so that they stay in registers (see micro_kernel_avx512.cpp).
// c's rows are requested first, so that their misses overlap the K loop: c's rows
// lie ldc floats apart, a power of two for the usual sizes, so the lines of an
// output block share a few cache sets and rarely survive from one pass to the next;
// waiting for them at the end cost bench-gemm ~15% on a whole 1024 product (0.72 of
// OpenBLAS without, 0.87 with). K goes 4 steps at a time, with one line of `next`
// per group until all of it is requested.
template <int R>
__attribute__((target("avx2,fma"))) void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
						float alpha, float beta, NextPanel next)
{
	__m256 lo[R], hi[R];
#pragma GCC unroll 6
	for (int i = 0; i < R; ++i) {
		lo[i] = _mm256_setzero_ps();
		hi[i] = _mm256_setzero_ps();
	}
#pragma GCC unroll 6
	for (int i = 0; i < R; ++i) {
		_mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
		_mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + 15), _MM_HINT_T0);
	}
	int64_t k = 0;
	for (; k + 4 <= kc; k += 4) {
		if (next.begin < next.end) {
			_mm_prefetch(reinterpret_cast<const char *>(next.begin), _MM_HINT_T1);
			next.begin += 16;
		}
		step<R>(a, b, lo, hi);
		step<R>(a + kMR, b + kNR, lo, hi);
		step<R>(a + 2 * kMR, b + 2 * kNR, lo, hi);
		step<R>(a + 3 * kMR, b + 3 * kNR, lo, hi);
		a += 4 * kMR;
		b += 4 * kNR;
	}
	for (; k < kc; ++k) {
		step<R>(a, b, lo, hi);
		a += kMR;
		b += kNR;
	}
	const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
	if (beta == 0.0f) {
#pragma GCC unroll 6
		for (int i = 0; i < R; ++i) {
			_mm256_storeu_ps(c + i * ldc, _mm256_mul_ps(va, lo[i]));
			_mm256_storeu_ps(c + i * ldc + 8, _mm256_mul_ps(va, hi[i]));
		}
		return;
	}
#pragma GCC unroll 6
	for (int i = 0; i < R; ++i) {
		float *r = c + i * ldc;
		_mm256_storeu_ps(r, _mm256_fmadd_ps(vb, _mm256_loadu_ps(r), _mm256_mul_ps(va, lo[i])));
		_mm256_storeu_ps(r + 8, _mm256_fmadd_ps(vb, _mm256_loadu_ps(r + 8), _mm256_mul_ps(va, hi[i])));
	}
}

void run(int rows, int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
	 NextPanel next)
{
	static_assert(kMR == 6);
	switch (rows) {
	case 6: return kernel<6>(kc, a, b, c, ldc, alpha, beta, next);
	case 5: return kernel<5>(kc, a, b, c, ldc, alpha, beta, next);
	case 4: return kernel<4>(kc, a, b, c, ldc, alpha, beta, next);
	case 3: return kernel<3>(kc, a, b, c, ldc, alpha, beta, next);
	case 2: return kernel<2>(kc, a, b, c, ldc, alpha, beta, next);
	default: return kernel<1>(kc, a, b, c, ldc, alpha, beta, next);
	}
}

constexpr MicroKernel kAvx2{"AVX2", kMR, kNR, run, nullptr};

} // namespace

const MicroKernel *avx2_micro_kernel()
{
	static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	return yes ? &kAvx2 : nullptr;
}

} // namespace neuron::kernels::detail
