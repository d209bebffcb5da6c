// SOFTMAX along dim i[0]: out = exp(x - max(x)) / sum(exp(x - max(x))).
//
// Subtracting the row maximum keeps exp() from overflowing (numerically stable);
// the exponentials are computed in float (PyTorch's opmath for f32/bf16/f16) and
// summed in double. A row containing NaN gives NaN; a row of -inf gives NaN, both
// as in PyTorch. The walk over rows is rows.h's, shared with LOG_SOFTMAX.
#include "rows.h"
#include "vmath.h"

#include <cmath>
#include <limits>

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
	return for_each_row(cmd, out, in, max_threads, "softmax", softmax_row);
}

} // namespace neuron::kernels::detail
