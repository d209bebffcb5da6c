#include "collective.h"

#include "dtype.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace neuron::kernels {

namespace {

// The type integer arithmetic runs in: signed integers wrap (as PyTorch's do)
// through their unsigned type, without undefined behaviour.
template <class C, bool = std::is_integral_v<C>> struct Wrapping { using type = C; };
template <class C> struct Wrapping<C, true> { using type = std::make_unsigned_t<C>; };

template <CollectiveReduce Op, class C> inline C combine(C a, C b)
{
	using W = typename Wrapping<C>::type;
	if constexpr (Op == CollectiveReduce::Max || Op == CollectiveReduce::Min) {
		// NaN wins, as torch.maximum/minimum (std::max would drop it).
		if constexpr (std::is_floating_point_v<C>)
			if (a != a || b != b)
				return a != a ? a : b;
		return Op == CollectiveReduce::Max ? (a < b ? b : a) : (b < a ? b : a);
	} else if constexpr (Op == CollectiveReduce::Product) {
		return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
	} else { // Sum, and Avg before its division
		return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
	}
}

// Whole-buffer passes for types computed in their own storage type (float,
// integers): dst = src0 op src1, then dst = dst op src_r: loops the compiler
// vectorises (dst may be one of the sources: each element is read before written).
template <class S, CollectiveReduce Op> void reduce_passes(std::byte *dst, const std::byte *const *srcs, int n,
							    uint64_t count)
{
	for (int r = 1; r < n; ++r) {
		const std::byte *a = r == 1 ? srcs[0] : dst;
		const std::byte *b = srcs[r];
		for (uint64_t i = 0; i < count; ++i)
			st<S>(dst + i * sizeof(S), combine<Op>(ld<S>(a + i * sizeof(S)), ld<S>(b + i * sizeof(S))));
	}
	if (n == 1 && dst != srcs[0])
		std::memmove(dst, srcs[0], count * sizeof(S));
	if constexpr (Op == CollectiveReduce::Avg)
		for (uint64_t i = 0; i < count; ++i)
			st<S>(dst + i * sizeof(S), static_cast<S>(ld<S>(dst + i * sizeof(S)) / static_cast<S>(n)));
}

// Half types: combined in float, rounded after every step as a chain of torch ops on
// bf16/f16 does.
template <class S, CollectiveReduce Op> void reduce_half(std::byte *dst, const std::byte *const *srcs, int n,
							  uint64_t count)
{
	for (uint64_t i = 0; i < count; ++i) {
		const uint64_t off = i * sizeof(S);
		float acc = to_float(ld<S>(srcs[0] + off));
		for (int r = 1; r < n; ++r)
			acc = to_float(from_float<S>(combine<Op>(acc, to_float(ld<S>(srcs[r] + off)))));
		if constexpr (Op == CollectiveReduce::Avg)
			acc = acc / static_cast<float>(n);
		st<S>(dst + off, from_float<S>(acc));
	}
}

template <class S, CollectiveReduce Op> void reduce_op(std::byte *dst, const std::byte *const *srcs, int n,
							uint64_t count)
{
	if constexpr (is_floating_storage<S> && !std::is_same_v<S, float>)
		reduce_half<S, Op>(dst, srcs, n, count);
	else
		reduce_passes<S, Op>(dst, srcs, n, count);
}

template <class S> void reduce_typed(std::byte *dst, const std::byte *const *srcs, int n, uint64_t count,
				     CollectiveReduce op)
{
	switch (op) {
	case CollectiveReduce::Sum: return reduce_op<S, CollectiveReduce::Sum>(dst, srcs, n, count);
	case CollectiveReduce::Avg: return reduce_op<S, CollectiveReduce::Avg>(dst, srcs, n, count);
	case CollectiveReduce::Max: return reduce_op<S, CollectiveReduce::Max>(dst, srcs, n, count);
	case CollectiveReduce::Min: return reduce_op<S, CollectiveReduce::Min>(dst, srcs, n, count);
	case CollectiveReduce::Product: return reduce_op<S, CollectiveReduce::Product>(dst, srcs, n, count);
	}
}

} // namespace

bool is_collective_dtype(uint8_t dtype)
{
	return dtype == NEURON_DTYPE_F32 || dtype == NEURON_DTYPE_BF16 || dtype == NEURON_DTYPE_F16 ||
	       dtype == NEURON_DTYPE_I32 || dtype == NEURON_DTYPE_I64 || dtype == NEURON_DTYPE_U8;
}

uint64_t collective_element_bytes(uint8_t dtype)
{
	switch (is_collective_dtype(dtype) ? dtype : 0) {
	case NEURON_DTYPE_F32: case NEURON_DTYPE_I32: return 4;
	case NEURON_DTYPE_BF16: case NEURON_DTYPE_F16: return 2;
	case NEURON_DTYPE_I64: return 8;
	case NEURON_DTYPE_U8: return 1;
	default: return 0;
	}
}

void collective_reduce(std::byte *dst, const std::byte *const *srcs, int n, uint64_t count, uint8_t dtype,
		       CollectiveReduce op)
{
	switch (dtype) {
	case NEURON_DTYPE_F32:
		return reduce_typed<float>(dst, srcs, n, count, op);
	case NEURON_DTYPE_BF16:
		return reduce_typed<bf16_t>(dst, srcs, n, count, op);
	case NEURON_DTYPE_F16:
		return reduce_typed<f16_t>(dst, srcs, n, count, op);
	case NEURON_DTYPE_I32:
		return reduce_typed<int32_t>(dst, srcs, n, count, op);
	case NEURON_DTYPE_I64:
		return reduce_typed<int64_t>(dst, srcs, n, count, op);
	case NEURON_DTYPE_U8:
		return reduce_typed<uint8_t>(dst, srcs, n, count, op);
	default:
		return;
	}
}

} // namespace neuron::kernels
