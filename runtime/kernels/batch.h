// Walking the batch of an op on stacks of matrices (ATTENTION, the linear algebra
// ops): the byte address of every operand at each position of the leading dims.
#pragma once

#include "kernels.h"

#include <array>
#include <cstddef>
#include <vector>

namespace neuron::kernels::detail {

using BatchBases = std::array<std::byte *, NEURON_MAX_OPERANDS>;

// The first `lead` dims of every view are the batch (operand 0's sizes; inputs may
// broadcast with stride 0). One entry per batch position, in row-major order.
inline std::vector<BatchBases> batch_bases(std::span<const View> v, int lead)
{
	int64_t count = 1;
	for (int i = 0; i < lead; ++i)
		count *= v[0].sizes[i];
	std::vector<BatchBases> out(static_cast<size_t>(count));
	int64_t pos[NEURON_MAX_DIMS] = {};
	for (int64_t idx = 0; idx < count; ++idx) {
		for (size_t k = 0; k < v.size(); ++k) {
			int64_t off = 0;
			for (int i = 0; i < lead; ++i)
				off += pos[i] * v[k].strides[i];
			// An empty operand may have no memory at all (data null): it stays null.
			out[static_cast<size_t>(idx)][k] =
				v[k].data ? v[k].data + off * static_cast<int64_t>(dtype_size(v[k].dtype)) : nullptr;
		}
		for (int i = lead - 1; i >= 0; --i) {
			if (++pos[i] < v[0].sizes[i])
				break;
			pos[i] = 0;
		}
	}
	return out;
}

} // namespace neuron::kernels::detail
