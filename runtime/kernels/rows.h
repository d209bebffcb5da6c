// Row-wise ops along one dim (SOFTMAX, LOG_SOFTMAX): the walk over rows shared by
// softmax.cpp and log_softmax.cpp. A row is the dim i[0] of out/in at one index of
// the other dims; rows are independent, so threads split the set of rows.
// row(y, x, n) computes one row of n floats from x into y (y may equal x):
// contiguous f32 rows are passed in place, other dtypes and strides go through a
// float buffer per thread.
#pragma once

#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace neuron::kernels::detail {

template <class RowFn>
Result for_each_row(const neuron_cmd &cmd, const View &out, const View &in, int max_threads, const char *name, RowFn &&row)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = out.ndim == 0 ? 1 : out.sizes[dim];
	const size_t oes = dtype_size(out.dtype), ies = dtype_size(in.dtype);
	// Iterate over rows: the shape with the row dim collapsed to 1.
	int64_t shape[NEURON_MAX_DIMS];
	std::copy(out.sizes, out.sizes + NEURON_MAX_DIMS, shape);
	if (out.ndim > 0)
		shape[dim] = 1;
	const int64_t *strides[2] = {out.strides, in.strides};
	const size_t esz[2] = {oes, ies};
	std::byte *ptrs[2] = {out.data, in.data};
	const auto rows = make_iter<2>(out.ndim, shape, strides, esz, ptrs);
	if (rows.numel == 0 || len == 0)
		return std::nullopt;
	const int64_t ostep = out.ndim == 0 ? 0 : out.strides[dim] * static_cast<int64_t>(oes);
	const int64_t istep = out.ndim == 0 ? 0 : in.strides[dim] * static_cast<int64_t>(ies);
	const bool direct = out.dtype == NEURON_DTYPE_F32 && in.dtype == NEURON_DTYPE_F32 && ostep == 4 && istep == 4;

	// Rows use exp() per element: the transcendental grain.
	const int nt = static_cast<int>(
		std::min<int64_t>(threads_for(rows.numel * len, kElementwiseGrain / 8, max_threads), rows.numel));
	bool oom = false;
	// Tiling hook: a bounded tile is a sub-range of rows.
	parallel_ranges(rows.numel, nt, [&](int64_t b, int64_t e, int) {
		std::vector<float> buf;
		if (!direct) {
			try {
				buf.resize(static_cast<size_t>(len));
			} catch (const std::bad_alloc &) {
#pragma omp atomic write
				oom = true;
				return;
			}
		}
		for_each_run(rows, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			for (int64_t r = 0; r < n; ++r) {
				std::byte *o = p[0] + r * s[0];
				const std::byte *x = p[1] + r * s[1];
				if (direct) {
					row(reinterpret_cast<float *>(o), reinterpret_cast<const float *>(x), len);
				} else {
					load_block<float>(buf.data(), x, istep, len, in.dtype);
					row(buf.data(), buf.data(), len);
					store_block<float>(o, ostep, buf.data(), len, out.dtype);
				}
			}
		});
	});
	if (oom)
		return exec_fault(std::string(name) + ": out of host memory for a row buffer");
	return std::nullopt;
}

} // namespace neuron::kernels::detail
