// LOG_SOFTMAX along dim i[0]: out = x - max(x) - log(sum(exp(x - max(x)))).
// Same numerics as softmax.cpp (float exponentials, double sums) over the same walk of
// rows (rows.h); only the per-row function differs.
#include "rows.h"
#include "vmath.h"

#include <cmath>
#include <limits>

namespace neuron::kernels::detail {

namespace {

// y = x - logsumexp(x) for n floats (y may equal x). Vectorised as softmax_row:
// the exponentials in float with exp_f32 (libm's scalar exp in double made
// LOG_SOFTMAX of a 256 x 96 logits block 9x slower than PyTorch's CPU kernel),
// summed in double.
NK_HOT void log_softmax_row(float *y, const float *x, int64_t n)
{
	bool nan;
	float m = max_f32(x, n, &nan);
	if (nan)
		m = std::numeric_limits<float>::quiet_NaN();
	else if (std::isinf(m))
		m = 0; // all -inf: every result is -inf - log(0) = NaN, as PyTorch
	double sum = 0;
#pragma omp simd reduction(+ : sum)
	for (int64_t i = 0; i < n; ++i)
		sum += static_cast<double>(exp_f32(x[i] - m));
	const float lse = static_cast<float>(std::log(sum)) + m;
	for (int64_t i = 0; i < n; ++i)
		y[i] = x[i] - lse;
}

} // namespace

Result run_log_softmax(const neuron_cmd &cmd, const View &out, const View &in, int max_threads)
{
	return for_each_row(cmd, out, in, max_threads, "log_softmax", log_softmax_row);
}

} // namespace neuron::kernels::detail
