// A strided 2-d matrix operand of any storage dtype, as the matmul kernels see one
// (a batch entry of a MATMUL operand, or a block of it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace neuron::kernels::detail {

struct Mat {
	std::byte *p;      // element (0, 0)
	uint8_t dt;        // neuron_dtype of the storage
	int64_t rows, cols; // extents
	int64_t rs, cs;    // element strides
	size_t es;         // bytes per element

	Mat sub(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const
	{
		return Mat{p + static_cast<int64_t>(es) * (r0 * rs + c0 * cs), dt, r1 - r0, c1 - c0, rs, cs, es};
	}
	Mat t() const { return Mat{p, dt, cols, rows, cs, rs, es}; }
	std::byte *at(int64_t r, int64_t c) const { return p + static_cast<int64_t>(es) * (r * rs + c * cs); }
};

} // namespace neuron::kernels::detail
