// Moving a strided run of elements of any dtype into / out of a contiguous buffer
// of a compute type (float, double or int64_t).
//
// Kernels that mix dtypes (bf16 inputs, integer inputs promoted to float, ...)
// convert a bounded block into a compute-type buffer, do the arithmetic there with
// one simple vectorisable loop per op, and convert the result back. The dtype
// switch happens once per block, not per element.
#pragma once

#include "dtype.h"

#include <cstddef>
#include <cstdint>

namespace neuron::kernels {

// Elements per conversion block: small enough for the stack and L1.
inline constexpr int64_t kBlock = 512;

template <class C, class S> void load_typed(C *dst, const std::byte *src, int64_t stride, int64_t n)
{
	if (n <= 0) // an empty source may have no memory (src null): nothing to read
		return;
	if (stride == static_cast<int64_t>(sizeof(S))) {
		for (int64_t i = 0; i < n; ++i)
			dst[i] = load_as<C>(ld<S>(src + i * static_cast<int64_t>(sizeof(S))));
	} else if (stride == 0) {
		const C v = load_as<C>(ld<S>(src));
		for (int64_t i = 0; i < n; ++i)
			dst[i] = v;
	} else {
		for (int64_t i = 0; i < n; ++i)
			dst[i] = load_as<C>(ld<S>(src + i * stride));
	}
}

template <class C, class D> void store_typed(std::byte *dst, int64_t stride, const C *src, int64_t n)
{
	if (stride == static_cast<int64_t>(sizeof(D))) {
		for (int64_t i = 0; i < n; ++i)
			st<D>(dst + i * static_cast<int64_t>(sizeof(D)), store_as<D>(src[i]));
	} else {
		for (int64_t i = 0; i < n; ++i)
			st<D>(dst + i * stride, store_as<D>(src[i]));
	}
}

// dst[i] = (C) src[i * stride] for a source of dtype dt.
template <class C> void load_block(C *dst, const std::byte *src, int64_t stride, int64_t n, uint8_t dt)
{
	with_dtype(dt, [&](auto s) { load_typed<C, decltype(s)>(dst, src, stride, n); });
}

// dst[i * stride] = (dtype dt) src[i].
template <class C> void store_block(std::byte *dst, int64_t stride, const C *src, int64_t n, uint8_t dt)
{
	with_dtype(dt, [&](auto d) { store_typed<C, decltype(d)>(dst, stride, src, n); });
}

// The dtype whose storage type is the compute type C itself (a block of it needs
// no conversion when contiguous).
template <class C> constexpr uint8_t native_dtype()
{
	if constexpr (std::is_same_v<C, float>)
		return NEURON_DTYPE_F32;
	else if constexpr (std::is_same_v<C, int64_t>)
		return NEURON_DTYPE_I64;
	else
		return NEURON_DTYPE_INVALID;
}

} // namespace neuron::kernels
