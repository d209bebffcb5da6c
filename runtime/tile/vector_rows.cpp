#include "vector_rows.h"

#include <neuron/cmd.h>
#include <pointwise_steps.h>
#include <vmath.h>

#include <cmath>

namespace neuron::tile::rows {

namespace {

// pw_max_min's rule in f32 (a compare of two floats is the same in double):
// NaN propagates; otherwise a unless a < b (max) or b < a (min).
inline float max_min(float a, float b, bool max)
{
	return (a != a || b != b) ? NAN : (max ? (a < b ? b : a) : (b < a ? b : a));
}

template <class Cmp> void compare_with(float *o, const float *a, const float *b, float s, int64_t n, Cmp cmp)
{
	if (b)
		for (int64_t i = 0; i < n; ++i)
			o[i] = cmp(a[i], b[i]) ? 1.0f : 0.0f;
	else
		for (int64_t i = 0; i < n; ++i)
			o[i] = cmp(a[i], s) ? 1.0f : 0.0f;
}

} // namespace

NK_HOT void activation(uint32_t fn, float *o, const float *a, const float *b, float scale, float bias, int64_t n)
{
	// The formula of the block loop it replaces, term for term (a * scale + 0 + bias
	// without a bias tensor: the + 0 turns -0 into +0 as before).
	if (fn == NEURON_PW_EXP) { // the softmax step: one pass, exp_f32 inlined
		if (b)
			for (int64_t i = 0; i < n; ++i)
				o[i] = kernels::exp_f32(a[i] * scale + b[i] + bias);
		else
			for (int64_t i = 0; i < n; ++i)
				o[i] = kernels::exp_f32(a[i] * scale + 0.0f + bias);
		return;
	}
	if (b)
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] * scale + b[i] + bias;
	else
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] * scale + 0.0f + bias;
	if (fn)
		kernels::pw_eval(static_cast<uint8_t>(fn), o, o, o, n);
}

NK_HOT void activation_sum(uint32_t fn, float *o, const float *a, const float *b, float scale, float bias, int64_t n,
			   double *lanes)
{
	constexpr int W = 8;
	double s[W];
	for (int j = 0; j < W; ++j)
		s[j] = lanes[j];
	int64_t i = 0;
	if (fn == NEURON_PW_EXP) { // the softmax step: exp and the row sum in one pass
		if (b) {
			for (; i + W <= n; i += W)
				for (int j = 0; j < W; ++j) {
					const float v = kernels::exp_f32(a[i + j] * scale + b[i + j] + bias);
					o[i + j] = v;
					s[j] += static_cast<double>(v);
				}
			for (; i < n; ++i) {
				o[i] = kernels::exp_f32(a[i] * scale + b[i] + bias);
				s[0] += static_cast<double>(o[i]);
			}
		} else {
			for (; i + W <= n; i += W)
				for (int j = 0; j < W; ++j) {
					const float v = kernels::exp_f32(a[i + j] * scale + 0.0f + bias);
					o[i + j] = v;
					s[j] += static_cast<double>(v);
				}
			for (; i < n; ++i) {
				o[i] = kernels::exp_f32(a[i] * scale + 0.0f + bias);
				s[0] += static_cast<double>(o[i]);
			}
		}
	} else { // the activation, then its results summed while they are in L1
		activation(fn, o, a, b, scale, bias, n);
		for (; i + W <= n; i += W)
			for (int j = 0; j < W; ++j)
				s[j] += static_cast<double>(o[i + j]);
		for (; i < n; ++i)
			s[0] += static_cast<double>(o[i]);
	}
	for (int j = 0; j < W; ++j)
		lanes[j] = s[j];
}

double lanes_total(const double *lanes)
{
	double r = 0.0;
	for (int j = 0; j < 8; ++j)
		r += lanes[j];
	return r;
}

namespace {

typedef float v8sf __attribute__((vector_size(32)));

// One 8 x 8 block: three rounds of two-input shuffles (pairs of rows 1, 2, then 4
// apart), after which vector c holds column c. Inlined into each clone of
// transpose32, so that the AVX2 one shuffles whole ymm registers.
// __builtin_shufflevector (constant lanes) is both GCC's (12+) and Clang's: the
// fuzz build compiles with Clang, which has no __builtin_shuffle.
__attribute__((always_inline)) inline void transpose8(std::byte *out, int64_t out_row, const std::byte *in, int64_t in_row)
{
	v8sf r[8], u[8], v[8];
	for (int i = 0; i < 8; ++i)
		__builtin_memcpy(&r[i], in + i * in_row, 32);
	for (int k = 0; k < 8; k += 2) {
		u[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 2, 10, 4, 12, 6, 14);
		u[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 1, 9, 3, 11, 5, 13, 7, 15);
	}
	for (int x : {0, 1, 4, 5}) {
		v[x] = __builtin_shufflevector(u[x], u[x + 2], 0, 1, 8, 9, 4, 5, 12, 13);
		v[x + 2] = __builtin_shufflevector(u[x], u[x + 2], 2, 3, 10, 11, 6, 7, 14, 15);
	}
	for (int x = 0; x < 4; ++x) {
		const v8sf a = __builtin_shufflevector(v[x], v[x + 4], 0, 1, 2, 3, 8, 9, 10, 11),
			   b = __builtin_shufflevector(v[x], v[x + 4], 4, 5, 6, 7, 12, 13, 14, 15);
		__builtin_memcpy(out + x * out_row, &a, 32);
		__builtin_memcpy(out + (x + 4) * out_row, &b, 32);
	}
}

} // namespace

NK_HOT void transpose32(std::byte *out, int64_t out_row, const std::byte *in, int64_t in_row, int64_t P, int64_t F)
{
	const int64_t P8 = P / 8 * 8, F8 = F / 8 * 8;
	for (int64_t p = 0; p < P8; p += 8)
		for (int64_t f = 0; f < F8; f += 8)
			transpose8(out + f * out_row + p * 4, out_row, in + p * in_row + f * 4, in_row);
	for (int64_t p = 0; p < P; ++p) // the edges: columns past F8 of every row, rows past P8
		for (int64_t f = p < P8 ? F8 : 0; f < F; ++f)
			__builtin_memcpy(out + f * out_row + p * 4, in + p * in_row + f * 4, 4);
}

NK_HOT void compare(uint32_t fn, float *o, const float *a, const float *b, float s, int64_t n)
{
	switch (fn) {
	case NEURON_CMP_EQ: compare_with(o, a, b, s, n, [](float x, float y) { return x == y; }); break;
	case NEURON_CMP_NE: compare_with(o, a, b, s, n, [](float x, float y) { return x != y; }); break;
	case NEURON_CMP_LT: compare_with(o, a, b, s, n, [](float x, float y) { return x < y; }); break;
	case NEURON_CMP_LE: compare_with(o, a, b, s, n, [](float x, float y) { return x <= y; }); break;
	case NEURON_CMP_GT: compare_with(o, a, b, s, n, [](float x, float y) { return x > y; }); break;
	default: compare_with(o, a, b, s, n, [](float x, float y) { return x >= y; }); break;
	}
}

NK_HOT void select(float *o, const float *c, const float *a, const float *b, float s, int64_t n)
{
	if (b)
		for (int64_t i = 0; i < n; ++i)
			o[i] = c[i] != 0.0f ? a[i] : b[i];
	else
		for (int64_t i = 0; i < n; ++i)
			o[i] = c[i] != 0.0f ? a[i] : s;
}

NK_HOT void tensor_scalar(uint32_t fn, float *o, const float *a, float s, bool reverse, int64_t n)
{
	switch (fn) {
	case NEURON_PW_ADD:
		for (int64_t i = 0; i < n; ++i)
			o[i] = reverse ? s + a[i] : a[i] + s;
		return;
	case NEURON_PW_MUL:
		for (int64_t i = 0; i < n; ++i)
			o[i] = reverse ? s * a[i] : a[i] * s;
		return;
	case NEURON_PW_SUB:
		if (reverse)
			for (int64_t i = 0; i < n; ++i)
				o[i] = s - a[i];
		else
			for (int64_t i = 0; i < n; ++i)
				o[i] = a[i] - s;
		return;
	case NEURON_PW_MAXIMUM:
	case NEURON_PW_MINIMUM: {
		const bool max = fn == NEURON_PW_MAXIMUM;
		if (reverse)
			for (int64_t i = 0; i < n; ++i)
				o[i] = max_min(s, a[i], max);
		else
			for (int64_t i = 0; i < n; ++i)
				o[i] = max_min(a[i], s, max);
		return;
	}
	default: { // the rest through pw_eval, the scalar spread over a block
		constexpr int64_t kChunk = 256;
		float sv[kChunk];
		for (int64_t i = 0; i < kChunk; ++i)
			sv[i] = s;
		for (int64_t i = 0; i < n; i += kChunk) {
			const int64_t m = n - i < kChunk ? n - i : kChunk;
			if (reverse)
				kernels::pw_eval(static_cast<uint8_t>(fn), o + i, sv, a + i, m);
			else
				kernels::pw_eval(static_cast<uint8_t>(fn), o + i, a + i, sv, m);
		}
	}
	}
}

NK_HOT void iota(float *o, int64_t base, int64_t step, int64_t n)
{
	// int32 arithmetic when every value fits (vector converts; the f32 rounding of an
	// int32 is that of the same int64), else int64 (scalar converts on AVX2)
	const int64_t lim = int64_t{1} << 30;
	if (base > -lim && base < lim && step > -lim && step < lim && n < lim &&
	    std::abs(static_cast<double>(step) * static_cast<double>(n)) < static_cast<double>(lim)) {
		const int32_t b = static_cast<int32_t>(base), s = static_cast<int32_t>(step);
		for (int32_t e = 0; e < static_cast<int32_t>(n); ++e)
			o[e] = static_cast<float>(b + s * e);
		return;
	}
	for (int64_t e = 0; e < n; ++e)
		o[e] = static_cast<float>(base + step * e);
}

NK_HOT double sum_row(const float *x, int64_t n)
{
	constexpr int W = 8;
	double s[W] = {};
	int64_t i = 0;
	for (; i + W <= n; i += W)
		for (int j = 0; j < W; ++j)
			s[j] += static_cast<double>(x[i + j]);
	for (; i < n; ++i)
		s[0] += static_cast<double>(x[i]);
	double r = 0.0;
	for (int j = 0; j < W; ++j)
		r += s[j];
	return r;
}

NK_HOT float extreme_row(const float *x, int64_t n, bool max)
{
	bool nan = false;
	float r;
	if (max) {
		r = kernels::max_f32(x, n, &nan);
	} else { // max_f32's lanes with the compare turned
		constexpr int W = 8;
		float m[W];
		int bad[W];
		for (int j = 0; j < W; ++j) {
			m[j] = __builtin_inff();
			bad[j] = 0;
		}
		int64_t i = 0;
		for (; i + W <= n; i += W)
			for (int j = 0; j < W; ++j) {
				const float v = x[i + j];
				m[j] = v < m[j] ? v : m[j];
				bad[j] |= v != v;
			}
		for (; i < n; ++i) {
			m[0] = x[i] < m[0] ? x[i] : m[0];
			bad[0] |= x[i] != x[i];
		}
		r = m[0];
		for (int j = 1; j < W; ++j) {
			r = m[j] < r ? m[j] : r;
			bad[0] |= bad[j];
		}
		nan = bad[0] != 0;
	}
	return nan ? NAN : r;
}

} // namespace neuron::tile::rows
