// The AVX2 + FMA register kernel of the packed multiply (micro_kernel.h), for
// hosts without AVX-512 (AMD Zen 1-3, Intel Haswell to Alder Lake): 6 rows of a x
// 16 columns of b in 12 ymm accumulators, with two registers for b and one for the
// broadcast element of a: the 16 ymm registers, as in BLIS's and OpenBLAS's
// Haswell/Zen sgemm kernels. 12 independent accumulators cover the FMA latency
// (4-5 cycles on two FMA pipes); 6 broadcasts and 2 loads per 12 FMAs stay within
// the load ports.
#include "micro_kernel.h"

#include "blas_select.h"

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

// The full block's K step in one asm statement: 12 accumulators, two b registers
// and the broadcast use 15 of the 16 ymm registers. Written with intrinsics and
// unrolled 4 steps deep, GCC 12 schedules the next step's loads early and spills
// two accumulators to the stack in the loop (bench-gemm --kernel AVX2: 0.82-0.89
// of OpenBLAS's Zen/Haswell sgemm); an asm statement keeps the step's order.
__attribute__((target("avx2,fma"), always_inline)) inline void step6(const float *a, const float *b, __m256 *lo,
								       __m256 *hi)
{
	__m256 b0, b1, t;
	asm("vmovups (%[b]), %[b0]\n\t"
	    "vmovups 32(%[b]), %[b1]\n\t"
	    "vbroadcastss (%[a]), %[t]\n\t"
	    "vfmadd231ps %[b0], %[t], %[l0]\n\t"
	    "vfmadd231ps %[b1], %[t], %[h0]\n\t"
	    "vbroadcastss 4(%[a]), %[t]\n\t"
	    "vfmadd231ps %[b0], %[t], %[l1]\n\t"
	    "vfmadd231ps %[b1], %[t], %[h1]\n\t"
	    "vbroadcastss 8(%[a]), %[t]\n\t"
	    "vfmadd231ps %[b0], %[t], %[l2]\n\t"
	    "vfmadd231ps %[b1], %[t], %[h2]\n\t"
	    "vbroadcastss 12(%[a]), %[t]\n\t"
	    "vfmadd231ps %[b0], %[t], %[l3]\n\t"
	    "vfmadd231ps %[b1], %[t], %[h3]\n\t"
	    "vbroadcastss 16(%[a]), %[t]\n\t"
	    "vfmadd231ps %[b0], %[t], %[l4]\n\t"
	    "vfmadd231ps %[b1], %[t], %[h4]\n\t"
	    "vbroadcastss 20(%[a]), %[t]\n\t"
	    "vfmadd231ps %[b0], %[t], %[l5]\n\t"
	    "vfmadd231ps %[b1], %[t], %[h5]"
	    : [l0] "+x"(lo[0]), [l1] "+x"(lo[1]), [l2] "+x"(lo[2]), [l3] "+x"(lo[3]), [l4] "+x"(lo[4]),
	      [l5] "+x"(lo[5]), [h0] "+x"(hi[0]), [h1] "+x"(hi[1]), [h2] "+x"(hi[2]), [h3] "+x"(hi[3]),
	      [h4] "+x"(hi[4]), [h5] "+x"(hi[5]), [b0] "=&x"(b0), [b1] "=&x"(b1), [t] "=&x"(t)
	    : [a] "r"(a), [b] "r"(b)
	    : "memory"); // reads a and b (29 operands: no room for "m" inputs)
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
		if constexpr (R == kMR) {
			step6(a, b, lo, hi);
			step6(a + kMR, b + kNR, lo, hi);
			step6(a + 2 * kMR, b + 2 * kNR, lo, hi);
			step6(a + 3 * kMR, b + 3 * kNR, lo, hi);
		} else {
			step<R>(a, b, lo, hi);
			step<R>(a + kMR, b + kNR, lo, hi);
			step<R>(a + 2 * kMR, b + 2 * kNR, lo, hi);
			step<R>(a + 3 * kMR, b + 3 * kNR, lo, hi);
		}
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

// One panel of kMR = 6 rows of a row-major f32 matrix (row stride ld), kc columns:
// panel[k * 6 + r] = x[r * ld + k]. A 6x8 transpose in registers per 8 columns:
// the generic packing (one row into a line buffer, then a scatter at stride 6)
// took 5-6% of a 1024 multiply under perf.
__attribute__((target("avx2"))) void pack_rows6_f32(const float *x, int64_t ld, int64_t kc, float *panel)
{
	static_assert(kMR == 6);
	int64_t k = 0;
	for (; k + 8 <= kc; k += 8) {
		__m256 r[6];
		for (int i = 0; i < 6; ++i)
			r[i] = _mm256_loadu_ps(x + i * ld + k);
		// Per 128-bit lane j (columns 4j .. 4j+3): pairs of rows, then rows 0-3.
		const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
		const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
		// q[m], lane j: rows 0-3 of column 4j + m.
		const __m256 q[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
				     _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
		// p[m / 2], lane j, 64-bit half m % 2: rows 4-5 of column 4j + m.
		const __m256 p[2] = {_mm256_unpacklo_ps(r[4], r[5]), _mm256_unpackhi_ps(r[4], r[5])};
		float *out = panel + k * 6;
		for (int j = 0; j < 2; ++j) {
			const __m128 p0 = j ? _mm256_extractf128_ps(p[0], 1) : _mm256_castps256_ps128(p[0]);
			const __m128 p1 = j ? _mm256_extractf128_ps(p[1], 1) : _mm256_castps256_ps128(p[1]);
			const __m128 pm[4] = {p0, p0, p1, p1};
			for (int m = 0; m < 4; ++m) {
				float *col = out + (4 * j + m) * 6;
				_mm_storeu_ps(col, j ? _mm256_extractf128_ps(q[m], 1) : _mm256_castps256_ps128(q[m]));
				if (m % 2 == 0)
					_mm_storel_pi(reinterpret_cast<__m64 *>(col + 4), pm[m]);
				else
					_mm_storeh_pi(reinterpret_cast<__m64 *>(col + 4), pm[m]);
			}
		}
	}
	for (; k < kc; ++k)
		for (int i = 0; i < 6; ++i)
			panel[k * 6 + i] = x[i * ld + k];
}

constexpr MicroKernel kAvx2{"AVX2", kMR, kNR, run, pack_rows6_f32};

} // namespace

const MicroKernel *avx2_micro_kernel()
{
	static const bool yes = [] {
		const CpuFeatures f = host_cpu_features();
		return f.avx2 && f.fma;
	}();
	return yes ? &kAvx2 : nullptr;
}

} // namespace neuron::kernels::detail
