// The per-element float formulas of the pointwise opcodes, in one place: the
// unfused kernels (elementwise.cpp, math.cpp) and the fused POINTWISE chain
// (pointwise_chain.cpp) call the same functions, so an f32 chain computes the
// very bits its unfused ops would (no FMA contraction: the kernels are built
// for x86-64 and AVX2 clones without -mfma).
#pragma once

#include "vmath.h"

#include <cmath>

namespace neuron::kernels {

inline float pw_relu(float a) { return a < 0.0f ? 0.0f : a; } // NaN propagates, as torch.relu
inline float pw_gelu_erf(float a) { return 0.5f * a * (1.0f + erf_f32(a * 0.70710678118654752f)); }
inline float pw_gelu_tanh(float x)
{
	const float c = 0.79788456080286536f; // sqrt(2 / pi)
	return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}
inline float pw_silu(float a) { return a / (1.0f + exp_f32(-a)); }
inline float pw_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float pw_rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float pw_square_or_pow(float x, float p) { return p == 2.0f ? x * x : std::pow(x, p); }

// gelu'(x), erf or tanh form (GELU_BACKWARD multiplies the incoming gradient by it).
// Always inlined: a call in the loops that use it stops their vectorisation.
[[gnu::always_inline]] inline float pw_gelu_grad(float x, bool tanh_form)
{
	if (tanh_form) {
		constexpr float k = 0.7978845608028654f, c = 0.044715f;
		const float x3 = x * x * x;
		const float t = std::tanh(k * (x + c * x3));
		return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * k * (1 + 3 * c * x * x);
	}
	// exp(-x^2 / 2) once, for erf(x / sqrt 2) and for the Gaussian density.
	constexpr float inv_sqrt2 = 0.7071067811865476f, inv_sqrt_2pi = 0.3989422804014327f;
	const float u = x * inv_sqrt2, e = exp_f32(-u * u);
	return 0.5f * (1 + erf_f32_given_gaussian(u, e)) + x * inv_sqrt_2pi * e;
}

// MAXIMUM / MINIMUM compare in double (BINARY_MATH's rule, exact for integers up
// to 2^53); NaN propagates, as torch.maximum.
inline double pw_max_min(double a, double b, bool max)
{
	return (a != a || b != b) ? NAN : (max ? (a < b ? b : a) : (b < a ? b : a));
}

} // namespace neuron::kernels
