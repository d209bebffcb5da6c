// ISA 1.2 ARG_REDUCE: the index of the largest / smallest element along one dim.
//
// Elements are compared as double (exact for every float dtype and for integers
// up to 2^53, as COMPARE does). PyTorch's rules: the first index wins a tie, and
// NaN counts as larger (and smaller) than everything, so the first NaN wins.
// Rows are independent: threads split the set of rows.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <algorithm>

namespace neuron::kernels::detail {

Result run_arg_reduce(const neuron_cmd &cmd, const View &out, const View &in, int max_threads)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const bool want_min = cmd.iscalars[1] == 1;
	const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
	const size_t ies = dtype_size(in.dtype);
	// Rows: out's shape (size 1 along dim) walked with in's strides.
	const int64_t *strides[2] = {out.strides, in.strides};
	const size_t esz[2] = {sizeof(int64_t), ies};
	std::byte *ptrs[2] = {out.data, in.data};
	const auto rows = make_iter<2>(out.ndim, out.sizes, strides, esz, ptrs);
	if (rows.numel == 0)
		return std::nullopt;
	const int64_t istep = in.ndim == 0 ? 0 : in.strides[dim] * static_cast<int64_t>(ies);
	const int nt = static_cast<int>(
		std::min<int64_t>(threads_for(rows.numel * len, kElementwiseGrain, max_threads), rows.numel));
	parallel_ranges(rows.numel, nt, [&](int64_t b, int64_t e, int) {
		double x[kBlock];
		for_each_run(rows, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			for (int64_t r = 0; r < n; ++r) {
				const std::byte *row = p[1] + r * s[1];
				int64_t best = 0;
				double best_v = 0;
				bool have = false, nan = false;
				for (int64_t off = 0; off < len && !nan; off += kBlock) {
					const int64_t m = std::min(kBlock, len - off);
					load_block<double>(x, row + off * istep, istep, m, in.dtype);
					for (int64_t i = 0; i < m; ++i) {
						const double v = x[i];
						if (v != v) {
							best = off + i;
							nan = true;
							break;
						}
						if (!have || (want_min ? v < best_v : v > best_v)) {
							best = off + i;
							best_v = v;
							have = true;
						}
					}
				}
				st<int64_t>(p[0] + r * s[0], best);
			}
		});
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
