// LOG_SOFTMAX along dim i[0]: out = x - max(x) - log(sum(exp(x - max(x)))).
// Same structure and numerics as softmax.cpp (float math, double sums).
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <cmath>
#include <limits>
#include <vector>

namespace neuron::kernels::detail {

Result run_log_softmax(const neuron_cmd &cmd, const View &out, const View &in, int max_threads)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = out.ndim == 0 ? 1 : out.sizes[dim];
	const size_t oes = dtype_size(out.dtype), ies = dtype_size(in.dtype);
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
	const int nt = static_cast<int>(
		std::min<int64_t>(threads_for(rows.numel * len, kElementwiseGrain / 8, max_threads), rows.numel));
	bool oom = false;
	parallel_ranges(rows.numel, nt, [&](int64_t b, int64_t e, int) {
		std::vector<float> buf;
		try {
			buf.resize(static_cast<size_t>(len));
		} catch (const std::bad_alloc &) {
#pragma omp atomic write
			oom = true;
			return;
		}
		for_each_run(rows, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			for (int64_t r = 0; r < n; ++r) {
				float *x = buf.data();
				load_block<float>(x, p[1] + r * s[1], istep, len, in.dtype);
				float m = -std::numeric_limits<float>::infinity();
				bool nan = false;
				for (int64_t i = 0; i < len; ++i) {
					nan = nan || x[i] != x[i];
					m = x[i] > m ? x[i] : m;
				}
				if (nan)
					m = std::numeric_limits<float>::quiet_NaN();
				else if (std::isinf(m))
					m = 0; // all -inf: every result is -inf - log(0) = NaN, as PyTorch
				double sum = 0;
				for (int64_t i = 0; i < len; ++i)
					sum += std::exp(static_cast<double>(x[i] - m));
				const float lse = static_cast<float>(std::log(sum)) + m;
				for (int64_t i = 0; i < len; ++i)
					x[i] -= lse;
				store_block<float>(p[0] + r * s[0], ostep, x, len, out.dtype);
			}
		});
	});
	if (oom)
		return exec_fault("log_softmax: out of host memory for a row buffer");
	return std::nullopt;
}

} // namespace neuron::kernels::detail
