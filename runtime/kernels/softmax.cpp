// SOFTMAX along dim i[0]: out = exp(x - max(x)) / sum(exp(x - max(x))).
//
// Subtracting the row maximum keeps exp() from overflowing (numerically stable);
// the exponentials are computed in float (PyTorch's opmath for f32/bf16/f16) and
// summed in double. A row containing NaN gives NaN; a row of -inf gives NaN, both
// as in PyTorch. Rows are independent, so threads split the set of rows.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"
#include "vmath.h"

#include <cmath>
#include <limits>
#include <new>
#include <vector>

namespace neuron::kernels::detail {

namespace {

// Softmax of n contiguous floats, from x into y (y may equal x). Each pass is a
// simple loop the compiler vectorises (exp_f32 instead of libm's scalar expf).
NK_HOT void softmax_row(float *y, const float *x, int64_t n)
{
	bool nan;
	float m = max_f32(x, n, &nan);
	if (nan)
		m = std::numeric_limits<float>::quiet_NaN();
	for (int64_t i = 0; i < n; ++i)
		y[i] = exp_f32(x[i] - m);
	double sum = 0;
#pragma omp simd reduction(+ : sum)
	for (int64_t i = 0; i < n; ++i)
		sum += static_cast<double>(y[i]);
	const float inv = static_cast<float>(1.0 / sum);
	for (int64_t i = 0; i < n; ++i)
		y[i] *= inv;
}

} // namespace

Result run_softmax(const neuron_cmd &cmd, const View &out, const View &in, int max_threads)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = out.ndim == 0 ? 1 : out.sizes[dim];
	const size_t oes = dtype_size(out.dtype), ies = dtype_size(in.dtype);
	// Iterate over rows: the shape with the softmax dim collapsed to 1.
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
					softmax_row(reinterpret_cast<float *>(o), reinterpret_cast<const float *>(x), len);
				} else {
					load_block<float>(buf.data(), x, istep, len, in.dtype);
					softmax_row(buf.data(), buf.data(), len);
					store_block<float>(o, ostep, buf.data(), len, out.dtype);
				}
			}
		});
	});
	if (oom)
		return exec_fault("softmax: out of host memory for a row buffer");
	return std::nullopt;
}

} // namespace neuron::kernels::detail
