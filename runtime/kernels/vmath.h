// exp() for float that the compiler can vectorise.
//
// glibc's expf is a scalar call (its vector variants are only used under
// -ffast-math), which makes EXP/SILU/SOFTMAX ~10x slower than memory speed.
// This is the classic Cephes scheme: x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite
// split of ln2 so r is exact), a degree-6 polynomial for exp(r), and 2^n built
// in the exponent bits. Max error ~1-2 ulp over the whole range (PyTorch's Sleef
// expf is 1 ulp); NaN propagates, overflow gives inf, and results in the
// subnormal range are produced (the scaling is split in two steps).
#pragma once

#include <bit>
#include <cstdint>

// Hot loops are compiled three times (AVX-512, AVX2 and baseline x86-64) and picked
// at load time by the dynamic loader: the daemon must run on hosts other than the
// build host, so no -march=native. The AVX-512 clone halves GELU and EXP on a Zen 4
// host (16 lanes; 134 -> 66 us for GELU of 64K floats). The loader picks by the
// CPU's features: NEURON_MAX_CPU_ISA (blas_select.h) caps the matmul paths only.
// The project builds with -ffp-contract=off, so the clones that have FMA compute
// each formula as written, as the others do.
#define NK_HOT __attribute__((target_clones("avx512f", "avx2", "default")))

namespace neuron::kernels {

inline float exp_f32(float x)
{
	const float hi = 88.7228394f, lo = -103.972084f; // exp(hi) ~ FLT_MAX, exp(lo) < min subnormal / 2
	const bool is_nan = x != x;
	float xc = is_nan ? 0.0f : x; // keeps the int conversion below defined
	xc = xc > hi ? hi : xc;
	xc = xc < lo ? lo : xc;
	// n = round(x / ln2), by the 1.5 * 2^23 trick (no SSE4.1 round needed).
	const float shifter = 12582912.0f;
	const float n = (xc * 1.44269504088896341f + shifter) - shifter;
	float r = xc - n * 0.693359375f; // ln2 = C1 + C2, C1 has few bits so n*C1 is exact
	r = r - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	const float er = p * r * r + r + 1.0f;
	// 2^n = 2^a * 2^b with a, b in the normal exponent range (n in [-150, 128]).
	const int32_t ni = static_cast<int32_t>(n);
	const int32_t a = ni / 2, b = ni - ni / 2;
	const float sa = std::bit_cast<float>(static_cast<uint32_t>(a + 127) << 23);
	const float sb = std::bit_cast<float>(static_cast<uint32_t>(b + 127) << 23);
	float y = er * sa * sb;
	y = x > hi ? __builtin_inff() : y;
	y = x < lo ? 0.0f : y;
	return is_nan ? x : y;
}

// erf() for float that the compiler can vectorise, for GELU (libm's erff is a
// scalar call: it was the daemon's top function in a transformer training step).
// Abramowitz & Stegun 7.1.26 with exp_f32 for the Gaussian, as PyTorch's vectorised
// CPU GELU computes it: absolute error <= 1.5e-7, which GELU's 1 + erf absorbs. Its
// relative error near 0 and in the tails is poor, so UNARY_ERF keeps libm's erff.
// erf_f32(x) given e = exp_f32(-x * x), for a caller that needs that Gaussian too
// (GELU's derivative: one exp instead of two).
[[gnu::always_inline]] inline float erf_f32_given_gaussian(float x, float e)
{
	const float a = x < 0.0f ? -x : x;
	const float t = 1.0f / (1.0f + 0.3275911f * a);
	const float r = (((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f;
	const float y = 1.0f - r * t * e;
	return x < 0.0f ? -y : (x != x ? x : y);
}
inline float erf_f32(float x) { return erf_f32_given_gaussian(x, exp_f32(-x * x)); }

// max of n floats and whether any is NaN. A NaN-propagating max is not a
// reduction compilers will vectorise, so this keeps 8 independent lanes (a
// NaN-ignoring max plus a NaN flag each) that map onto vector compares/blends.
inline float max_f32(const float *x, int64_t n, bool *saw_nan)
{
	constexpr int W = 8;
	float m[W];
	int nan[W];
	for (int j = 0; j < W; ++j) {
		m[j] = -__builtin_inff();
		nan[j] = 0;
	}
	int64_t i = 0;
	for (; i + W <= n; i += W)
		for (int j = 0; j < W; ++j) {
			const float v = x[i + j];
			m[j] = v > m[j] ? v : m[j];
			nan[j] |= v != v;
		}
	for (; i < n; ++i) {
		m[0] = x[i] > m[0] ? x[i] : m[0];
		nan[0] |= x[i] != x[i];
	}
	float r = m[0];
	int any = nan[0];
	for (int j = 1; j < W; ++j) {
		r = m[j] > r ? m[j] : r;
		any |= nan[j];
	}
	*saw_nan = any != 0;
	return r;
}

} // namespace neuron::kernels
