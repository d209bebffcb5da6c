// Element types and the conversions between them.
//
// Conversions follow PyTorch's CPU semantics so a plugin built on this chip gives
// the same numbers as eager PyTorch:
//  - float -> integer truncates toward zero. Out-of-range values are UB in C++ (and
//    platform-defined in PyTorch); here NaN gives 0 and the value saturates to the
//    int64 range, then wraps to the narrower type (so -1.5 -> u8 gives 255, as x86
//    PyTorch does). A simulator must never hit UB on tenant data.
//  - integer -> narrower integer wraps (two's complement), anything -> bool is != 0
//    (NaN is true), bool -> anything is 0/1.
//  - f32 -> bf16 and f32 -> f16 round to nearest even; NaN stays NaN (quieted).
//  - integers -> bf16/f16 go through float, as c10::BFloat16/c10::Half do.
#pragma once

#include <neuron/cmd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace neuron::kernels {

// Storage types with distinct C++ types so overloads can tell them apart.
struct bf16_t {
	uint16_t bits;
};
struct f16_t {
	uint16_t bits;
};
struct bool_t {
	uint8_t v;
};

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f)
{
	uint32_t u = std::bit_cast<uint32_t>(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return static_cast<uint16_t>((u >> 16) | 0x40u); // NaN: keep sign, force quiet
	u += 0x7fffu + ((u >> 16) & 1u);                          // round to nearest even
	return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16 <-> binary32, branch-light so loops over them vectorise. The
// technique (scale by powers of two and let the FPU do the rounding) is the one of
// the FP16 library by M. Dukhan; it needs strict IEEE float arithmetic (no -ffast-math).
inline float f16_to_float(uint16_t h)
{
	const uint32_t w = static_cast<uint32_t>(h) << 16;
	const uint32_t sign = w & 0x80000000u;
	const uint32_t two_w = w + w;
	const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
	const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
	const uint32_t result = sign | (two_w < (1u << 27) ? std::bit_cast<uint32_t>(denormalized)
							     : std::bit_cast<uint32_t>(normalized));
	return std::bit_cast<float>(result);
}

inline uint16_t float_to_f16(float f)
{
	float base = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
	const uint32_t w = std::bit_cast<uint32_t>(f);
	const uint32_t shl1_w = w + w;
	const uint32_t sign = w & 0x80000000u;
	uint32_t bias = shl1_w & 0xFF000000u;
	if (bias < 0x71000000u)
		bias = 0x71000000u;
	base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
	const uint32_t bits = std::bit_cast<uint32_t>(base);
	const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
	const uint32_t mantissa_bits = bits & 0x00000FFFu;
	const uint32_t nonsign = exp_bits + mantissa_bits;
	return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// float -> int64 with defined behaviour for NaN and out-of-range values (see top).
inline int64_t float_to_i64(double f)
{
	if (!(f == f))
		return 0;
	if (f >= 9223372036854775808.0)
		return INT64_MAX;
	if (f <= -9223372036854775808.0)
		return INT64_MIN;
	return static_cast<int64_t>(f);
}

template <class T> inline constexpr bool is_floating_storage =
	std::is_same_v<T, float> || std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

// Any storage type -> float (the compute type of floating outputs).
inline float to_float(float v) { return v; }
inline float to_float(bf16_t v) { return bf16_to_float(v.bits); }
inline float to_float(f16_t v) { return f16_to_float(v.bits); }
inline float to_float(int32_t v) { return static_cast<float>(v); }
inline float to_float(int64_t v) { return static_cast<float>(v); }
inline float to_float(bool_t v) { return v.v != 0 ? 1.0f : 0.0f; }
inline float to_float(uint8_t v) { return static_cast<float>(v); }

// Any storage type -> double (reduction accumulators).
template <class S> inline double to_double(S v)
{
	if constexpr (std::is_same_v<S, int32_t> || std::is_same_v<S, int64_t> || std::is_same_v<S, uint8_t>)
		return static_cast<double>(v);
	else
		return static_cast<double>(to_float(v));
}

// Any storage type -> int64 (the compute type of integer outputs).
inline int64_t to_i64(float v) { return float_to_i64(v); }
inline int64_t to_i64(bf16_t v) { return float_to_i64(bf16_to_float(v.bits)); }
inline int64_t to_i64(f16_t v) { return float_to_i64(f16_to_float(v.bits)); }
inline int64_t to_i64(int32_t v) { return v; }
inline int64_t to_i64(int64_t v) { return v; }
inline int64_t to_i64(bool_t v) { return v.v != 0; }
inline int64_t to_i64(uint8_t v) { return v; }

// Load one element as compute type C (float or int64_t).
template <class C, class S> inline C load_as(S v)
{
	if constexpr (std::is_same_v<C, float>)
		return to_float(v);
	else if constexpr (std::is_same_v<C, double>)
		return to_double(v);
	else
		return to_i64(v);
}

// Convert a float / int64 compute value to storage type D.
template <class D> inline D from_float(float v)
{
	if constexpr (std::is_same_v<D, float>)
		return v;
	else if constexpr (std::is_same_v<D, bf16_t>)
		return bf16_t{float_to_bf16(v)};
	else if constexpr (std::is_same_v<D, f16_t>)
		return f16_t{float_to_f16(v)};
	else if constexpr (std::is_same_v<D, bool_t>)
		return bool_t{static_cast<uint8_t>(v != 0.0f)};
	else
		return static_cast<D>(float_to_i64(v)); // wraps to the narrower type
}

template <class D> inline D from_i64(int64_t v)
{
	if constexpr (std::is_same_v<D, float>)
		return static_cast<float>(v);
	else if constexpr (std::is_same_v<D, bf16_t>)
		return bf16_t{float_to_bf16(static_cast<float>(v))};
	else if constexpr (std::is_same_v<D, f16_t>)
		return f16_t{float_to_f16(static_cast<float>(v))};
	else if constexpr (std::is_same_v<D, bool_t>)
		return bool_t{static_cast<uint8_t>(v != 0)};
	else
		return static_cast<D>(v); // modular since C++20
}

template <class D, class C> inline D store_as(C v)
{
	if constexpr (std::is_same_v<C, float>)
		return from_float<D>(v);
	else if constexpr (std::is_same_v<C, double>)
		return from_float<D>(static_cast<float>(v)); // double accumulators: round once to float
	else
		return from_i64<D>(v);
}

// Exact storage-to-storage cast (COPY). Goes through the narrowest exact path:
// integer->integer in int64, anything->floating through float (exact for floating
// sources; one rounding for i32/i64 as in PyTorch), floating->integer by truncation.
template <class D, class S> inline D cast_to(S v)
{
	if constexpr (std::is_same_v<D, S>)
		return v;
	else if constexpr (std::is_same_v<D, bool_t>) {
		if constexpr (is_floating_storage<S>)
			return bool_t{static_cast<uint8_t>(to_float(v) != 0.0f)};
		else
			return bool_t{static_cast<uint8_t>(to_i64(v) != 0)};
	} else if constexpr (is_floating_storage<D>)
		return from_float<D>(to_float(v));
	else
		return from_i64<D>(to_i64(v));
}

// Unaligned-safe element access; the compiler turns these into plain moves.
template <class T> inline T ld(const std::byte *p)
{
	T v;
	std::memcpy(&v, p, sizeof(T));
	return v;
}
template <class T> inline void st(std::byte *p, T v) { std::memcpy(p, &v, sizeof(T)); }

inline bool is_floating(uint8_t dt)
{
	return dt == NEURON_DTYPE_F32 || dt == NEURON_DTYPE_BF16 || dt == NEURON_DTYPE_F16;
}
inline bool is_valid_dtype(uint8_t dt) { return dt > NEURON_DTYPE_INVALID && dt < NEURON_DTYPE_COUNT_; }
const char *dtype_name(uint8_t dt);

// Calls f(S{}) with S the storage type of dtype dt (which must be valid).
template <class F> inline decltype(auto) with_dtype(uint8_t dt, F &&f)
{
	switch (dt) {
	case NEURON_DTYPE_F32:
		return f(float{});
	case NEURON_DTYPE_BF16:
		return f(bf16_t{});
	case NEURON_DTYPE_F16:
		return f(f16_t{});
	case NEURON_DTYPE_I32:
		return f(int32_t{});
	case NEURON_DTYPE_I64:
		return f(int64_t{});
	case NEURON_DTYPE_BOOL:
		return f(bool_t{});
	default:
		return f(uint8_t{});
	}
}

} // namespace neuron::kernels
