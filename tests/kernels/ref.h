// Test support for the kernel suites: host tensors with arbitrary views, dtype
// conversions written independently of runtime/kernels/dtype.h (frexp/ldexp
// rounding instead of bit tricks), command builders and tolerant comparison.
// References are computed in double by the tests themselves.
#pragma once

#include <kernels.h>

#include <criterion/criterion.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ref {

using neuron::kernels::View;

inline const int kAllDtypes[] = {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_F16, NEURON_DTYPE_I32,
				 NEURON_DTYPE_I64, NEURON_DTYPE_BOOL, NEURON_DTYPE_U8};
inline const int kFloatDtypes[] = {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_F16};

inline bool is_float(int dt) { return dt == NEURON_DTYPE_F32 || dt == NEURON_DTYPE_BF16 || dt == NEURON_DTYPE_F16; }

inline size_t esize(int dt)
{
	switch (dt) {
	case NEURON_DTYPE_F32:
	case NEURON_DTYPE_I32:
		return 4;
	case NEURON_DTYPE_BF16:
	case NEURON_DTYPE_F16:
		return 2;
	case NEURON_DTYPE_I64:
		return 8;
	default:
		return 1;
	}
}

inline const char *dname(int dt)
{
	static const char *n[] = {"invalid", "f32", "bf16", "f16", "i32", "i64", "bool", "u8"};
	return dt >= 0 && dt < 8 ? n[dt] : "?";
}

// ---- rounding to the narrow float formats (round to nearest even) ----

// Round x to a binary format with `bits` significant bits and smallest normal
// exponent emin (values below 2^emin are subnormal: fixed step 2^(emin-bits+1)).
inline double round_format(double x, int bits, int emin, double overflow_at)
{
	if (x != x || x == 0 || std::isinf(x))
		return x;
	const double a = std::fabs(x);
	if (a >= overflow_at)
		return std::copysign(INFINITY, x);
	int e;
	std::frexp(a, &e); // a = f * 2^e, f in [0.5, 1): exponent of the leading bit is e-1
	const int lead = std::max(e - 1, emin);
	const double quantum = std::ldexp(1.0, lead - bits + 1);
	const double r = std::nearbyint(a / quantum) * quantum; // default mode is to-nearest-even
	return std::copysign(r, x);
}

inline double to_f32(double x) { return static_cast<double>(static_cast<float>(x)); }
// bf16: 8 significant bits, float's exponent range; overflow threshold: max + half ulp.
inline double to_bf16(double x) { return round_format(to_f32(x), 8, -126, 0x1.FEp127); }
// f16: 11 significant bits, min normal 2^-14, max 65504; >= 65520 rounds to inf.
// Both narrow formats are reached through float, as the kernels (and PyTorch's
// float opmath) do.
inline double to_f16(double x) { return round_format(to_f32(x), 11, -14, 65520.0); }

inline int64_t wrap(int dt, int64_t v)
{
	switch (dt) {
	case NEURON_DTYPE_I32:
		return static_cast<int32_t>(static_cast<uint32_t>(v));
	case NEURON_DTYPE_U8:
		return static_cast<uint8_t>(v);
	case NEURON_DTYPE_BOOL:
		return v != 0;
	default:
		return v;
	}
}

// The value a dtype stores for x (x must already be integral for integer dtypes).
inline double quantize(int dt, double x)
{
	switch (dt) {
	case NEURON_DTYPE_F32:
		return to_f32(x);
	case NEURON_DTYPE_BF16:
		return to_bf16(x);
	case NEURON_DTYPE_F16:
		return to_f16(x);
	case NEURON_DTYPE_BOOL:
		return x != 0;
	default: // (saturating: 2^63 is what (double)INT64_MAX gives back)
		return static_cast<double>(wrap(dt, x >= 0x1p63 ? INT64_MAX : x <= -0x1p63 ? INT64_MIN : static_cast<int64_t>(x)));
	}
}

// ---- encoding to / decoding from storage bits ----

inline uint16_t f16_bits(double v) // v already an f16 value
{
	uint16_t sign = std::signbit(v) ? 0x8000 : 0;
	const double a = std::fabs(v);
	if (v != v)
		return 0x7E00;
	if (std::isinf(a))
		return sign | 0x7C00;
	if (a < 0x1p-14)
		return sign | static_cast<uint16_t>(std::ldexp(a, 24));
	int e;
	const double f = std::frexp(a, &e); // a = f * 2^e
	const int mant = static_cast<int>(std::ldexp(f, 11)) - 1024;
	return sign | static_cast<uint16_t>(((e - 1 + 15) << 10) | mant);
}

inline double f16_value(uint16_t b)
{
	const double s = (b & 0x8000) ? -1 : 1;
	const int ex = (b >> 10) & 31, m = b & 1023;
	if (ex == 0)
		return s * std::ldexp(m, -24);
	if (ex == 31)
		return m ? NAN : s * INFINITY;
	return s * std::ldexp(1024 + m, ex - 25);
}

inline void encode(int dt, std::byte *p, double v)
{
	switch (dt) {
	case NEURON_DTYPE_F32: {
		const float f = static_cast<float>(v);
		std::memcpy(p, &f, 4);
		break;
	}
	case NEURON_DTYPE_BF16: {
		const float f = static_cast<float>(to_bf16(v));
		uint32_t u;
		std::memcpy(&u, &f, 4);
		const uint16_t b = static_cast<uint16_t>(u >> 16);
		std::memcpy(p, &b, 2);
		break;
	}
	case NEURON_DTYPE_F16: {
		const uint16_t b = f16_bits(to_f16(v));
		std::memcpy(p, &b, 2);
		break;
	}
	case NEURON_DTYPE_I32: {
		const int32_t i = static_cast<int32_t>(wrap(dt, static_cast<int64_t>(v)));
		std::memcpy(p, &i, 4);
		break;
	}
	case NEURON_DTYPE_I64: {
		const int64_t i = static_cast<int64_t>(v);
		std::memcpy(p, &i, 8);
		break;
	}
	case NEURON_DTYPE_BOOL:
		*reinterpret_cast<uint8_t *>(p) = v != 0;
		break;
	default:
		*reinterpret_cast<uint8_t *>(p) = static_cast<uint8_t>(wrap(dt, static_cast<int64_t>(v)));
		break;
	}
}

inline double decode(int dt, const std::byte *p)
{
	switch (dt) {
	case NEURON_DTYPE_F32: {
		float f;
		std::memcpy(&f, p, 4);
		return f;
	}
	case NEURON_DTYPE_BF16: {
		uint16_t b;
		std::memcpy(&b, p, 2);
		const uint32_t u = static_cast<uint32_t>(b) << 16;
		float f;
		std::memcpy(&f, &u, 4);
		return f;
	}
	case NEURON_DTYPE_F16: {
		uint16_t b;
		std::memcpy(&b, p, 2);
		return f16_value(b);
	}
	case NEURON_DTYPE_I32: {
		int32_t i;
		std::memcpy(&i, p, 4);
		return i;
	}
	case NEURON_DTYPE_I64: {
		int64_t i;
		std::memcpy(&i, p, 8);
		return static_cast<double>(i);
	}
	default:
		return static_cast<double>(*reinterpret_cast<const uint8_t *>(p));
	}
}

// ---- tensors ----

struct Rng {
	uint64_t s;
	explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53; }
	int64_t integer(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1)); }
};

struct Tensor {
	std::shared_ptr<std::vector<uint64_t>> store; // uint64_t: 8-byte aligned storage
	int dt = NEURON_DTYPE_F32;
	int ndim = 0;
	int64_t sizes[NEURON_MAX_DIMS] = {};
	int64_t strides[NEURON_MAX_DIMS] = {};
	int64_t offset = 0; // elements

	static Tensor make(int dt, std::vector<int64_t> shape)
	{
		Tensor t;
		t.dt = dt;
		t.ndim = static_cast<int>(shape.size());
		int64_t n = 1;
		for (int d = t.ndim - 1; d >= 0; --d) {
			t.sizes[d] = shape[static_cast<size_t>(d)];
			t.strides[d] = n;
			n *= std::max<int64_t>(shape[static_cast<size_t>(d)], 1);
		}
		// A sentinel pattern in the whole store shows writes outside the view.
		t.store = std::make_shared<std::vector<uint64_t>>((static_cast<size_t>(n) * esize(dt) + 7) / 8 + 1,
								  0x5A5A5A5A5A5A5A5Aull);
		return t;
	}
	std::byte *base() const { return reinterpret_cast<std::byte *>(store->data()) + offset * esize(dt); }
	int64_t numel() const
	{
		int64_t n = 1;
		for (int d = 0; d < ndim; ++d)
			n *= sizes[d];
		return n;
	}
	std::vector<int64_t> shape() const { return std::vector<int64_t>(sizes, sizes + ndim); }

	Tensor transpose(int a, int b) const
	{
		Tensor t = *this;
		std::swap(t.sizes[a], t.sizes[b]);
		std::swap(t.strides[a], t.strides[b]);
		return t;
	}
	Tensor slice(int d, int64_t start, int64_t stop, int64_t step) const
	{
		Tensor t = *this;
		t.offset += start * strides[d];
		t.sizes[d] = stop > start ? (stop - start + step - 1) / step : 0;
		t.strides[d] *= step;
		return t;
	}
	Tensor expand(int d, int64_t n) const // dim d must have size 1
	{
		Tensor t = *this;
		t.sizes[d] = n;
		t.strides[d] = 0;
		return t;
	}

	std::byte *at(const int64_t *idx) const
	{
		int64_t off = 0;
		for (int d = 0; d < ndim; ++d)
			off += idx[d] * strides[d];
		return base() + off * static_cast<int64_t>(esize(dt));
	}
	double get(const int64_t *idx) const { return decode(dt, at(idx)); }
	void set(const int64_t *idx, double v) const { encode(dt, at(idx), v); }

	// Calls f(idx) for every logical index in row-major order.
	void each(const std::function<void(const int64_t *)> &f) const
	{
		if (numel() == 0)
			return;
		int64_t idx[NEURON_MAX_DIMS] = {};
		for (;;) {
			f(idx);
			int d = ndim - 1;
			for (; d >= 0; --d) {
				if (++idx[d] < sizes[d])
					break;
				idx[d] = 0;
			}
			if (d < 0)
				return;
		}
	}

	// Random values representable in the dtype: floats in [lo, hi], integers in
	// [lo, hi] (wrapped to the dtype), bools 0/1.
	void randomize(uint64_t seed, double lo = -4, double hi = 4) const
	{
		Rng r(seed);
		each([&](const int64_t *idx) {
			if (is_float(dt))
				set(idx, r.uniform(lo, hi));
			else if (dt == NEURON_DTYPE_BOOL)
				set(idx, static_cast<double>(r.next() & 1));
			else
				set(idx, static_cast<double>(r.integer(static_cast<int64_t>(lo), static_cast<int64_t>(hi))));
		});
	}

	View view() const
	{
		View v{};
		v.data = base();
		v.dtype = static_cast<neuron_dtype>(dt);
		v.ndim = ndim;
		for (int d = 0; d < ndim; ++d) {
			v.sizes[d] = sizes[d];
			v.strides[d] = strides[d];
		}
		return v;
	}
	neuron_tensor_desc desc() const
	{
		neuron_tensor_desc d{};
		d.addr = 0x10000 + static_cast<uint64_t>(offset) * esize(dt); // nominal, aligned
		d.mem_space = NEURON_MEM_DEVICE;
		d.dtype = static_cast<uint8_t>(dt);
		d.ndim = static_cast<uint8_t>(ndim);
		for (int i = 0; i < ndim; ++i) {
			d.sizes[i] = sizes[i];
			d.strides[i] = strides[i];
		}
		return d;
	}
	// A deep copy with the same layout (to keep old output values for references).
	Tensor clone() const
	{
		Tensor t = *this;
		t.store = std::make_shared<std::vector<uint64_t>>(*store);
		return t;
	}
};

inline std::string shape_str(const Tensor &t)
{
	std::string s = std::string(dname(t.dt)) + "[";
	for (int d = 0; d < t.ndim; ++d)
		s += (d ? "," : "") + std::to_string(t.sizes[d]) + (t.strides[d] == 0 ? "b" : "");
	return s + "]";
}

inline neuron_cmd make_cmd(uint16_t opcode, std::vector<const Tensor *> ops)
{
	neuron_cmd c{};
	c.opcode = opcode;
	c.num_operands = static_cast<uint8_t>(ops.size());
	for (size_t k = 0; k < ops.size(); ++k)
		c.operands[k] = ops[k]->desc();
	return c;
}

// check_semantics must accept the command, then execute must succeed.
inline void run(const neuron_cmd &cmd, std::vector<const Tensor *> ops, int threads = 4)
{
	const auto f = neuron::kernels::check_semantics(cmd);
	cr_assert(!f, "check_semantics rejected a valid %s: %s", neuron::kernels::op_name(cmd.opcode),
		  f ? f->message.c_str() : "");
	std::vector<View> views;
	for (const Tensor *t : ops)
		views.push_back(t->view());
	const auto e = neuron::kernels::execute(cmd, views, threads);
	cr_assert(!e, "execute failed: %s", e ? e->message.c_str() : "");
}

struct Tol {
	double rtol, atol;
};
// Per output dtype: f32 results differ from the double reference by float
// rounding of intermediates (a few ulp); bf16/f16 by one ulp of the final rounding
// (2^-8 / 2^-11 relative) plus float intermediates. Integers are exact.
inline Tol tol_for(int dt)
{
	switch (dt) {
	case NEURON_DTYPE_F32:
		return {2e-6, 1e-6};
	case NEURON_DTYPE_BF16:
		return {8e-3, 1e-3};
	case NEURON_DTYPE_F16:
		return {1e-3, 1e-4};
	default:
		return {0, 0};
	}
}

// Every element of out must match expected(idx) (a double computed by the test),
// after rounding it to out's dtype. NaN matches NaN; integers must be exact.
inline void expect_tensor(const Tensor &out, const std::function<double(const int64_t *)> &expected, Tol tol,
			  const std::string &what)
{
	bool ok = true;
	out.each([&](const int64_t *idx) {
		if (!ok)
			return;
		const double got = out.get(idx);
		const double want = quantize(out.dt, expected(idx));
		bool good;
		if (want != want)
			good = got != got;
		else if (std::isinf(want))
			good = got == want;
		else
			good = std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
		if (!good) {
			ok = false;
			std::string at;
			for (int d = 0; d < out.ndim; ++d)
				at += (d ? "," : "") + std::to_string(idx[d]);
			cr_expect_fail("%s: out%s[%s] = %.9g, expected %.9g", what.c_str(), shape_str(out).c_str(), at.c_str(), got,
				want);
		}
	});
	cr_assert(ok, "%s: mismatch (see above)", what.c_str());
}

// The sentinel bytes around a view must be untouched: checks that every store word
// not reachable through `t` still holds the pattern. Only for views made by slicing.
inline void expect_outside_untouched(const Tensor &t, const std::string &what)
{
	std::vector<bool> inside(t.store->size() * 8, false);
	const auto *base = reinterpret_cast<const std::byte *>(t.store->data());
	t.each([&](const int64_t *idx) {
		const size_t off = static_cast<size_t>(t.at(idx) - base);
		for (size_t b = 0; b < esize(t.dt); ++b)
			inside[off + b] = true;
	});
	for (size_t i = 0; i < inside.size(); ++i)
		if (!inside[i] && static_cast<uint8_t>(base[i]) != 0x5A)
			cr_assert_fail("%s: byte %zu outside the view was written", what.c_str(), i);
}

} // namespace ref
