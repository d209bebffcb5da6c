// ISA 1.1 pointwise families: UNARY_MATH (log, sqrt, rsqrt, abs, sigmoid, erf,
// reciprocal, pow, clamp, neg), BINARY_MATH (maximum, minimum, pow, gelu and
// threshold backward), COMPARE / COMPARE_SCALAR (bool results) and WHERE; the
// ISA 1.4 functions of the first two are in special_math.cpp.
//
// Floating math runs in float on blocks converted from any dtype (block.h), as the
// other elementwise kernels do; comparisons and maximum/minimum run in double so
// integer operands up to 2^53 compare exactly. WHERE moves raw elements (a, b and
// out share one dtype), so it is exact for every dtype.
#include "ops.h"
#include "pointwise.h"
#include "special_math.h"
#include "vmath.h"
#include "pointwise_math.h"

#include <atomic>
#include <cmath>
#include <cstring>

namespace neuron::kernels::detail {

namespace {

// dx = g * gelu'(x), erf form: the loop vectorises (vmath.h), unlike libm's erff.
NK_HOT void gelu_backward_erf(float *g, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		g[i] *= pw_gelu_grad(x[i], false);
}

} // namespace

// The ISA 1.4 functions: one element at a time in double (special_math.cpp).
Result run_special_unary(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int fn = static_cast<int>(cmd.iscalars[0]);
	const int64_t i1 = cmd.iscalars[1];
	const double *f = cmd.fscalars.f;
	pointwise<2>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		double x[kBlock];
		load_block<double>(x, q[1], s[1], n, v[1].dtype);
		for (int64_t i = 0; i < n; ++i)
			x[i] = unary_fn(fn, x[i], f, i1);
		store_block<double>(q[0], s[0], x, n, v[0].dtype);
	});
	return std::nullopt;
}

// FMOD / REMAINDER / FLOOR_DIVIDE of integers, exactly in int64 (PyTorch's
// semantics); a zero divisor faults the command (the CPU raises ZeroDivisionError).
Result run_integer_division(int fn, std::span<const View> v, int max_threads)
{
	bool div0 = false;
	pointwise<3>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		int64_t a[kBlock], b[kBlock];
		load_block<int64_t>(a, q[1], s[1], n, v[1].dtype);
		load_block<int64_t>(b, q[2], s[2], n, v[2].dtype);
		for (int64_t i = 0; i < n; ++i) {
			if (b[i] == 0) {
				div0 = true;
				a[i] = 0;
				continue;
			}
			if (b[i] == -1) { // INT64_MIN / -1 overflows: the quotient wraps, the remainder is 0
				a[i] = fn == NEURON_BINARY_FLOOR_DIVIDE ? static_cast<int64_t>(0 - static_cast<uint64_t>(a[i])) : 0;
				continue;
			}
			const int64_t r = a[i] % b[i];
			if (fn == NEURON_BINARY_FMOD)
				a[i] = r;
			else if (fn == NEURON_BINARY_REMAINDER)
				a[i] = (r != 0 && ((r < 0) != (b[i] < 0))) ? r + b[i] : r;
			else
				a[i] = a[i] / b[i] - ((r != 0 && ((r < 0) != (b[i] < 0))) ? 1 : 0);
		}
		store_block<int64_t>(q[0], s[0], a, n, v[0].dtype);
	});
	if (div0)
		return exec_fault("integer division by zero (binary_math fn " + std::to_string(fn) + ")");
	return std::nullopt;
}

Result run_special_binary(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int fn = static_cast<int>(cmd.iscalars[0]);
	const int64_t i1 = cmd.iscalars[1];
	const double *f = cmd.fscalars.f;
	if (!is_floating(v[0].dtype))
		return run_integer_division(fn, v, max_threads);
	if (is_polynomial(fn)) {
		// Degrees first, so that no element runs a recurrence of unbounded length.
		std::atomic<bool> too_high{false};
		pointwise<3>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
			double b[kBlock];
			load_block<double>(b, q[2], s[2], n, v[2].dtype);
			for (int64_t i = 0; i < n; ++i)
				if (b[i] > kMaxPolynomialDegree)
					too_high.store(true, std::memory_order_relaxed);
		});
		if (too_high.load())
			return exec_fault("a polynomial degree above the device's limit of " +
					  std::to_string(static_cast<int>(kMaxPolynomialDegree)) + " (binary_math fn " +
					  std::to_string(fn) + "): compute it on the CPU");
	}
	pointwise<3>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		double a[kBlock], b[kBlock];
		load_block<double>(a, q[1], s[1], n, v[1].dtype);
		load_block<double>(b, q[2], s[2], n, v[2].dtype);
		for (int64_t i = 0; i < n; ++i)
			a[i] = binary_fn(fn, a[i], b[i], f, i1);
		store_block<double>(q[0], s[0], a, n, v[0].dtype);
	});
	return std::nullopt;
}

Result run_unary_math(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int fn = static_cast<int>(cmd.iscalars[0]);
	if (fn >= kFirstSpecialUnary)
		return run_special_unary(cmd, v, max_threads);
	const int64_t flags = cmd.iscalars[1];
	const float p0 = static_cast<float>(cmd.fscalars.f[0]), p1 = static_cast<float>(cmd.fscalars.f[1]);
	const uint8_t odt = v[0].dtype, idt = v[1].dtype;
	pointwise<2>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		float x[kBlock];
		load_block<float>(x, q[1], s[1], n, idt);
		switch (fn) {
		case NEURON_UNARY_LOG: for (int64_t i = 0; i < n; ++i) x[i] = std::log(x[i]); break;
		case NEURON_UNARY_SQRT: for (int64_t i = 0; i < n; ++i) x[i] = std::sqrt(x[i]); break;
		case NEURON_UNARY_RSQRT: for (int64_t i = 0; i < n; ++i) x[i] = pw_rsqrt(x[i]); break;
		case NEURON_UNARY_ABS: for (int64_t i = 0; i < n; ++i) x[i] = std::fabs(x[i]); break;
		case NEURON_UNARY_SIGMOID: for (int64_t i = 0; i < n; ++i) x[i] = pw_sigmoid(x[i]); break;
		case NEURON_UNARY_ERF: for (int64_t i = 0; i < n; ++i) x[i] = std::erf(x[i]); break;
		case NEURON_UNARY_RECIPROCAL: for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / x[i]; break;
		case NEURON_UNARY_POW:
			for (int64_t i = 0; i < n; ++i) x[i] = pw_square_or_pow(x[i], p0);
			break;
		case NEURON_UNARY_CLAMP:
			// NaN stays NaN (as torch.clamp): comparisons with NaN are false.
			if (flags & 1)
				for (int64_t i = 0; i < n; ++i) x[i] = x[i] < p0 ? p0 : x[i];
			if (flags & 2)
				for (int64_t i = 0; i < n; ++i) x[i] = x[i] > p1 ? p1 : x[i];
			break;
		default: for (int64_t i = 0; i < n; ++i) x[i] = -x[i]; break; // NEG
		}
		store_block<float>(q[0], s[0], x, n, odt);
	});
	return std::nullopt;
}

Result run_binary_math(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int fn = static_cast<int>(cmd.iscalars[0]);
	if (fn >= kFirstSpecialBinary)
		return run_special_binary(cmd, v, max_threads);
	const bool tanh_form = cmd.iscalars[1] == 1;
	const double thr = cmd.fscalars.f[0];
	const uint8_t odt = v[0].dtype, adt = v[1].dtype, bdt = v[2].dtype;
	pointwise<3>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		if (fn == NEURON_BINARY_MAXIMUM || fn == NEURON_BINARY_MINIMUM) {
			double a[kBlock], b[kBlock];
			load_block<double>(a, q[1], s[1], n, adt);
			load_block<double>(b, q[2], s[2], n, bdt);
			const bool mx = fn == NEURON_BINARY_MAXIMUM;
			for (int64_t i = 0; i < n; ++i)
				a[i] = pw_max_min(a[i], b[i], mx);
			if (is_floating(odt)) {
				float f[kBlock];
				for (int64_t i = 0; i < n; ++i)
					f[i] = static_cast<float>(a[i]);
				store_block<float>(q[0], s[0], f, n, odt);
			} else {
				int64_t r[kBlock];
				for (int64_t i = 0; i < n; ++i)
					r[i] = float_to_i64(a[i]);
				store_block<int64_t>(q[0], s[0], r, n, odt);
			}
			return;
		}
		float a[kBlock], b[kBlock];
		load_block<float>(a, q[1], s[1], n, adt);
		load_block<float>(b, q[2], s[2], n, bdt);
		switch (fn) {
		case NEURON_BINARY_POW: for (int64_t i = 0; i < n; ++i) a[i] = std::pow(a[i], b[i]); break;
		case NEURON_BINARY_GELU_BACKWARD:
			if (tanh_form)
				for (int64_t i = 0; i < n; ++i)
					a[i] *= pw_gelu_grad(b[i], true);
			else
				gelu_backward_erf(a, b, n);
			break;
		default: // THRESHOLD_BACKWARD
			for (int64_t i = 0; i < n; ++i)
				a[i] = b[i] > thr ? a[i] : 0.0f;
			break;
		}
		store_block<float>(q[0], s[0], a, n, odt);
	});
	return std::nullopt;
}

Result run_compare(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int fn = static_cast<int>(cmd.iscalars[0]);
	const bool scalar = cmd.opcode == NEURON_OP_COMPARE_SCALAR;
	const double sv = cmd.fscalars.f[0];
	auto body = [&](std::byte *const *q, const int64_t *s, int64_t n) {
		double a[kBlock], b[kBlock];
		load_block<double>(a, q[1], s[1], n, v[1].dtype);
		if (scalar)
			for (int64_t i = 0; i < n; ++i)
				b[i] = sv;
		else
			load_block<double>(b, q[2], s[2], n, v[2].dtype);
		for (int64_t i = 0; i < n; ++i) {
			bool r;
			switch (fn) {
			case NEURON_CMP_EQ: r = a[i] == b[i]; break;
			case NEURON_CMP_NE: r = a[i] != b[i]; break;
			case NEURON_CMP_LT: r = a[i] < b[i]; break;
			case NEURON_CMP_LE: r = a[i] <= b[i]; break;
			case NEURON_CMP_GT: r = a[i] > b[i]; break;
			default: r = a[i] >= b[i]; break;
			}
			const uint8_t byte = r ? 1 : 0;
			std::memcpy(q[0] + i * s[0], &byte, 1);
		}
	};
	if (scalar)
		pointwise<2>(v, max_threads, body);
	else
		pointwise<3>(v, max_threads, body);
	return std::nullopt;
}

namespace {

// WHERE's 4-byte moves (f32 tensors: a transformer's masks) as a select of bits,
// cloned per ISA so that it becomes a vector blend: the baseline build has none
// and branched on every element (a random mask: 2.3x PyTorch's CPU kernel).
NK_HOT void select32(uint32_t *o, const uint8_t *c, const uint32_t *a, const uint32_t *b, int64_t n)
{
	for (int64_t i = 0; i < n; ++i) {
		const uint32_t m = c[i] ? ~0u : 0u;
		o[i] = (a[i] & m) | (b[i] & ~m);
	}
}
// The same with one side a single value: v where c is `when`, else x.
NK_HOT void select32_value(uint32_t *o, const uint8_t *c, bool when, uint32_t v, const uint32_t *x, int64_t n)
{
	const uint8_t w = when ? 1 : 0;
	for (int64_t i = 0; i < n; ++i) {
		const uint32_t m = (c[i] != 0) == w ? ~0u : 0u;
		o[i] = (v & m) | (x[i] & ~m);
	}
}

// out[i] = cond[i] ? a[i] : b[i] over raw elements of T (an unsigned integer of the
// dtype's size); strides in bytes. A fixed-size element is a plain load and store
// (a select the compiler vectorises on contiguous runs), where a memmove of the
// dtype's size per element was a libc call each: 2% of neurond's time in a
// transformer training step (its masks).
template <class T>
void where_run(std::byte *const *q, const int64_t *s, int64_t n)
{
	const auto at = [](std::byte *p, int64_t i, int64_t stride) { return p + i * stride; };
	const bool dense = s[0] == sizeof(T) && s[1] == 1;
	if (dense && s[2] == sizeof(T) && s[3] == sizeof(T)) {
		T *o = reinterpret_cast<T *>(q[0]);
		const auto *c = reinterpret_cast<const uint8_t *>(q[1]);
		const T *a = reinterpret_cast<const T *>(q[2]), *b = reinterpret_cast<const T *>(q[3]);
		if constexpr (sizeof(T) == 4)
			select32(o, c, a, b, n);
		else
			for (int64_t i = 0; i < n; ++i)
				o[i] = c[i] ? a[i] : b[i];
		return;
	}
	// One side a value broadcast along the run (masked_fill's fill value).
	if (dense && (s[2] == 0) != (s[3] == 0) && (s[2] == sizeof(T) || s[3] == sizeof(T))) {
		T *o = reinterpret_cast<T *>(q[0]);
		const auto *c = reinterpret_cast<const uint8_t *>(q[1]);
		const bool a_fixed = s[2] == 0;
		T v;
		std::memcpy(&v, a_fixed ? q[2] : q[3], sizeof(T));
		const T *x = reinterpret_cast<const T *>(a_fixed ? q[3] : q[2]);
		if constexpr (sizeof(T) == 4)
			select32_value(o, c, a_fixed, v, x, n);
		else if (a_fixed)
			for (int64_t i = 0; i < n; ++i)
				o[i] = c[i] ? v : x[i];
		else
			for (int64_t i = 0; i < n; ++i)
				o[i] = c[i] ? x[i] : v;
		return;
	}
	for (int64_t i = 0; i < n; ++i) {
		const bool c = std::to_integer<uint8_t>(*at(q[1], i, s[1])) != 0;
		T x;
		std::memcpy(&x, c ? at(q[2], i, s[2]) : at(q[3], i, s[3]), sizeof(T));
		std::memcpy(at(q[0], i, s[0]), &x, sizeof(T));
	}
}

} // namespace

Result run_where(std::span<const View> v, int max_threads)
{
	const size_t es = dtype_size(v[0].dtype);
	pointwise<4>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		switch (es) {
		case 1: return where_run<uint8_t>(q, s, n);
		case 2: return where_run<uint16_t>(q, s, n);
		case 4: return where_run<uint32_t>(q, s, n);
		case 8: return where_run<uint64_t>(q, s, n);
		default:
			for (int64_t i = 0; i < n; ++i) {
				const bool c = std::to_integer<uint8_t>(q[1][i * s[1]]) != 0;
				std::memmove(q[0] + i * s[0], c ? q[2] + i * s[2] : q[3] + i * s[3], es);
			}
		}
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
