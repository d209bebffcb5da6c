// The arithmetic of collective groups (daemon/collective_*.h): element-wise
// reduction of several members' buffers into one, on device memory that neurond
// addresses (emu backend). Floating inputs are combined in float and rounded once
// per step as PyTorch's CPU reference (gloo) does; integers in their own type.
#pragma once

#include <cstddef>
#include <cstdint>

namespace neuron::kernels {

enum class CollectiveReduce { Sum, Avg, Max, Min, Product };

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i] for i < count, in rank
// order; Avg divides the sum by n (integers: truncated toward zero). dst may be
// one of the sources. dtype: an enum neuron_dtype that is_collective_dtype().
void collective_reduce(std::byte *dst, const std::byte *const *srcs, int n, uint64_t count, uint8_t dtype,
		       CollectiveReduce op);

bool is_collective_dtype(uint8_t dtype);
// Bytes per element of a collective dtype; 0 for any other.
uint64_t collective_element_bytes(uint8_t dtype);

} // namespace neuron::kernels
