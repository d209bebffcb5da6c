#include "collective.h"

#include "dtype.h"

#include <algorithm>
#include <type_traits>

namespace neuron::kernels {

namespace {

// The type integer arithmetic runs in: signed integers wrap (as PyTorch's do)
// through their unsigned type, without undefined behaviour.
template <class C, bool = std::is_integral_v<C>> struct Wrapping { using type = C; };
template <class C> struct Wrapping<C, true> { using type = std::make_unsigned_t<C>; };

template <class C> inline C combine(C a, C b, CollectiveReduce op)
{
	using W = typename Wrapping<C>::type;
	switch (op) {
	case CollectiveReduce::Max:
		return std::max(a, b);
	case CollectiveReduce::Min:
		return std::min(a, b);
	case CollectiveReduce::Product:
		return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
	default: // Sum, and Avg before its division
		return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
	}
}

// NaN wins in max/min, as torch.maximum/minimum (std::max would drop it).
template <class C> inline C combine_nan(C a, C b, CollectiveReduce op)
{
	if constexpr (std::is_floating_point_v<C>)
		if ((op == CollectiveReduce::Max || op == CollectiveReduce::Min) && (a != a || b != b))
			return a != a ? a : b;
	return combine(a, b, op);
}

template <class S> void reduce_typed(std::byte *dst, const std::byte *const *srcs, int n, uint64_t count,
				     CollectiveReduce op)
{
	// Compute type: float for floating storage, the storage type itself for integers
	// (so int64 sums stay exact and wrap as PyTorch's do).
	using C = std::conditional_t<is_floating_storage<S>, float, S>;
	const auto load = [](const std::byte *p) {
		if constexpr (is_floating_storage<S>)
			return to_float(ld<S>(p));
		else
			return ld<S>(p);
	};
	const auto store = [](std::byte *p, C v) {
		if constexpr (is_floating_storage<S>)
			st<S>(p, from_float<S>(v));
		else
			st<S>(p, v);
	};
	for (uint64_t i = 0; i < count; ++i) {
		const uint64_t off = i * sizeof(S);
		C acc = load(srcs[0] + off);
		for (int r = 1; r < n; ++r) {
			acc = combine_nan(acc, load(srcs[r] + off), op);
			// Half types round after every step, as a chain of torch.add on bf16 does.
			if constexpr (is_floating_storage<S> && !std::is_same_v<S, float>)
				acc = to_float(from_float<S>(acc));
		}
		if (op == CollectiveReduce::Avg)
			acc = acc / static_cast<C>(n);
		store(dst + off, acc);
	}
}

} // namespace

bool is_collective_dtype(uint8_t dtype)
{
	return dtype == NEURON_DTYPE_F32 || dtype == NEURON_DTYPE_BF16 || dtype == NEURON_DTYPE_F16 ||
	       dtype == NEURON_DTYPE_I32 || dtype == NEURON_DTYPE_I64 || dtype == NEURON_DTYPE_U8;
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
