// ISA 1.4 SORT: each row along one dim sorted (stably) ascending or descending;
// the first k entries of each sorted row go to values and indices (k = their
// extent along the dim), so one kernel is sort, argsort and top-k.
//
// Keys compare as int64 for integer and bool rows (exact) and as double for
// floating ones, NaN above every number (PyTorch's order). values receive the raw
// elements, so they are bit-exact copies of the input. Rows are independent:
// threads split them.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace neuron::kernels::detail {

namespace {

template <class Key> bool key_less(Key a, Key b)
{
	if constexpr (std::is_floating_point_v<Key>)
		return !(a != a) && ((b != b) || a < b);
	return a < b;
}

struct RowScratch {
	std::vector<int64_t> order;
	std::vector<double> fkeys;
	std::vector<int64_t> ikeys;
};

template <class Key>
void sort_row(std::vector<Key> &keys, std::vector<int64_t> &order, const std::byte *x, int64_t xs, int64_t len,
	      uint8_t dt, bool descending, int64_t k)
{
	for (int64_t off = 0; off < len; off += kBlock)
		load_block<Key>(keys.data() + off, x + off * xs, xs, std::min(kBlock, len - off), dt);
	for (int64_t i = 0; i < len; ++i)
		order[static_cast<size_t>(i)] = i;
	const auto cmp = [&](int64_t a, int64_t b) {
		const Key ka = keys[static_cast<size_t>(a)], kb = keys[static_cast<size_t>(b)];
		return descending ? key_less(kb, ka) : key_less(ka, kb);
	};
	if (k < len / 8) {
		// Top-k: a stable partial sort (ties keep their order, as in the full sort).
		std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
			return cmp(a, b) || (!cmp(b, a) && a < b);
		});
	} else {
		std::stable_sort(order.begin(), order.end(), cmp);
	}
}

} // namespace

Result run_sort(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const View &vals = v[0], &idx = v[1], &in = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const bool descending = cmd.iscalars[1] == 1;
	const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
	const int64_t k = vals.ndim == 0 ? 1 : vals.sizes[dim];
	const size_t es = dtype_size(in.dtype);
	int64_t shape[NEURON_MAX_DIMS];
	std::copy(vals.sizes, vals.sizes + NEURON_MAX_DIMS, shape);
	if (vals.ndim > 0)
		shape[dim] = 1;
	// Nothing to write: checked before the rows' iterator, which would scale the
	// strides of an empty output (not bounded by its extent) over rows.
	if (k == 0)
		return std::nullopt;
	const int64_t *strides[3] = {vals.strides, idx.strides, in.strides};
	const size_t esz[3] = {es, sizeof(int64_t), es};
	std::byte *ptrs[3] = {vals.data, idx.data, in.data};
	const auto rows = make_iter<3>(vals.ndim, shape, strides, esz, ptrs);
	if (rows.numel == 0)
		return std::nullopt;
	const int64_t vstep = vals.ndim ? vals.strides[dim] * static_cast<int64_t>(es) : 0;
	const int64_t istep = vals.ndim ? idx.strides[dim] * static_cast<int64_t>(sizeof(int64_t)) : 0;
	const int64_t xstep = in.ndim ? in.strides[dim] * static_cast<int64_t>(es) : 0;
	const bool fl = is_floating(in.dtype);
	const int nt = static_cast<int>(std::min<int64_t>(threads_for(rows.numel * len * 8, kElementwiseGrain, max_threads),
							  rows.numel));
	bool oom = false;
	parallel_ranges(rows.numel, nt, [&](int64_t b, int64_t e, int) {
		RowScratch sc;
		try {
			sc.order.resize(static_cast<size_t>(len));
			(fl ? sc.fkeys.resize(static_cast<size_t>(len)) : sc.ikeys.resize(static_cast<size_t>(len)));
		} catch (const std::bad_alloc &) {
#pragma omp atomic write
			oom = true;
			return;
		}
		for_each_run(rows, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			for (int64_t r = 0; r < n; ++r) {
				std::byte *vo = p[0] + r * s[0], *io = p[1] + r * s[1];
				const std::byte *x = p[2] + r * s[2];
				if (fl)
					sort_row<double>(sc.fkeys, sc.order, x, xstep, len, in.dtype, descending, k);
				else
					sort_row<int64_t>(sc.ikeys, sc.order, x, xstep, len, in.dtype, descending, k);
				for (int64_t j = 0; j < k; ++j) {
					const int64_t from = sc.order[static_cast<size_t>(j)];
					std::memcpy(vo + j * vstep, x + from * xstep, es);
					st<int64_t>(io + j * istep, from);
				}
			}
		});
	});
	if (oom)
		return exec_fault("sort: out of host memory for a row of " + std::to_string(len) + " elements");
	return std::nullopt;
}

} // namespace neuron::kernels::detail
