// A strided N-d iterator over several operands that share one shape.
//
// Every elementwise-like kernel (fill, copy, binary/unary ops) walks the output's
// shape with one pointer per operand. Before walking, dims of size 1 are dropped,
// dims are ordered by the output's strides (innermost = smallest output stride, so
// writes stream) and adjacent dims that are contiguous for every operand are merged:
// a contiguous tensor of any rank becomes one long run, which is what the fast
// paths look for. Work is addressed by a linear range [begin, end) of elements in
// that order, so a caller can split it among threads or, later, into bounded tiles.
#pragma once

#include "kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace neuron::kernels {

template <int N> struct NdIter {
	int ndim = 0;                          // after coalescing; dim 0 is the innermost
	int64_t numel = 1;                     // elements of the shape
	int64_t size[NEURON_MAX_DIMS] = {};
	int64_t stride[N][NEURON_MAX_DIMS] = {}; // bytes
	std::byte *ptr[N] = {};
};

// shape: sizes of the iteration space (the output's); strides[k]: element strides of
// operand k over that shape; esize[k]: its element size.
template <int N>
NdIter<N> make_iter(int ndim, const int64_t *shape, const int64_t *const strides[N], const size_t esize[N],
		    std::byte *const ptrs[N])
{
	NdIter<N> it;
	for (int k = 0; k < N; ++k)
		it.ptr[k] = ptrs[k];
	int dims[NEURON_MAX_DIMS];
	int n = 0;
	// Empty first: the sizes of an empty shape are not bounded by validation,
	// and their product could overflow before it reached the zero.
	if (std::find(shape, shape + ndim, int64_t(0)) != shape + ndim) {
		it.numel = 0;
		return it;
	}
	for (int d = 0; d < ndim; ++d) {
		it.numel *= shape[d];
		if (shape[d] != 1)
			dims[n++] = d;
	}
	// Order by the output's stride, innermost first; ties keep the logical order
	// reversed. (Insertion sort: at most 8 dims, and std::stable_sort may allocate.)
	std::reverse(dims, dims + n);
	for (int i = 1; i < n; ++i)
		for (int j = i; j > 0 && strides[0][dims[j]] < strides[0][dims[j - 1]]; --j)
			std::swap(dims[j], dims[j - 1]);
	int m = 0;
	for (int i = 0; i < n; ++i) {
		const int d = dims[i];
		if (m > 0) {
			bool mergeable = true;
			for (int k = 0; k < N; ++k)
				if (strides[k][d] * static_cast<int64_t>(esize[k]) != it.stride[k][m - 1] * it.size[m - 1])
					mergeable = false;
			if (mergeable) {
				it.size[m - 1] *= shape[d];
				continue;
			}
		}
		it.size[m] = shape[d];
		for (int k = 0; k < N; ++k)
			it.stride[k][m] = strides[k][d] * static_cast<int64_t>(esize[k]);
		++m;
	}
	it.ndim = m;
	return it;
}

// Calls f(ptrs, inner_strides, n) for each maximal run of the innermost dim within
// the linear element range [begin, end). ptrs[k] points at the run's first element
// of operand k; inner_strides[k] is the byte step between its elements.
template <int N, class F> void for_each_run(const NdIter<N> &it, int64_t begin, int64_t end, F &&f)
{
	if (begin >= end)
		return;
	std::byte *p[N];
	int64_t inner[N];
	if (it.ndim == 0) { // one element (all dims of size 1)
		for (int k = 0; k < N; ++k) {
			p[k] = it.ptr[k];
			inner[k] = 0;
		}
		f(p, inner, int64_t{1});
		return;
	}
	int64_t idx[NEURON_MAX_DIMS] = {};
	int64_t rem = begin;
	for (int k = 0; k < N; ++k) {
		p[k] = it.ptr[k];
		inner[k] = it.stride[k][0];
	}
	for (int d = 0; d < it.ndim; ++d) {
		idx[d] = rem % it.size[d];
		rem /= it.size[d];
		for (int k = 0; k < N; ++k)
			p[k] += idx[d] * it.stride[k][d];
	}
	int64_t pos = begin;
	for (;;) {
		const int64_t n = std::min(it.size[0] - idx[0], end - pos);
		f(p, inner, n);
		pos += n;
		if (pos >= end)
			return;
		// The run ended at the end of dim 0: carry into the outer dims.
		for (int k = 0; k < N; ++k)
			p[k] -= idx[0] * it.stride[k][0];
		idx[0] = 0;
		for (int d = 1; d < it.ndim; ++d) {
			for (int k = 0; k < N; ++k)
				p[k] += it.stride[k][d];
			if (++idx[d] < it.size[d])
				break;
			for (int k = 0; k < N; ++k)
				p[k] -= idx[d] * it.stride[k][d];
			idx[d] = 0;
		}
	}
}

} // namespace neuron::kernels
