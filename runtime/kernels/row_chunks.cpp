// SOFTMAX / LOG_SOFTMAX over rows too long for one tile, in two passes over the
// row's chunks (kernels.h: gather_row_stats, apply_row_stats), and ARG_REDUCE in
// one (gather_arg_best, store_arg_best; the rules of arg_reduce.cpp).
//
// Pass 1 keeps, per row, the running maximum m and the sum of exp(x - m), rescaled
// by exp(m_old - m_new) whenever a chunk raises the maximum (the "online softmax");
// pass 2 writes exp(x - m) / sum, or x - m - log(sum). The numerics follow
// softmax.cpp and log_softmax.cpp (float exponentials for softmax, double ones for
// log-softmax, double sums; NaN anywhere in a row gives NaN; a row of -inf gives
// NaN), so a row cut into chunks matches the whole-row kernels up to the order of
// the sum.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "vmath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace neuron::kernels {

namespace {

using detail::Result;

// Calls row(ordinal, out_row, in_row) for each row of the chunk (dim i[0] of in and
// out, at one index of the other dims): rows in one fixed order, so both passes
// number them alike. out may be null (pass 1).
template <class Fn> Result each_row(const neuron_cmd &cmd, const View *out, const View &in, Fn &&row)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	int64_t shape[NEURON_MAX_DIMS];
	std::copy(in.sizes, in.sizes + NEURON_MAX_DIMS, shape);
	if (in.ndim > 0)
		shape[dim] = 1;
	const View &o = out ? *out : in;
	const int64_t *strides[2] = {in.strides, o.strides};
	const size_t esz[2] = {dtype_size(in.dtype), dtype_size(o.dtype)};
	std::byte *ptrs[2] = {in.data, o.data};
	const auto rows = make_iter<2>(in.ndim, shape, strides, esz, ptrs);
	int64_t ordinal = 0;
	for_each_run(rows, 0, rows.numel, [&](std::byte *const *p, const int64_t *s, int64_t n) {
		for (int64_t r = 0; r < n; ++r)
			row(ordinal++, p[1] + r * s[1], p[0] + r * s[0]);
	});
	return std::nullopt;
}

bool is_log(const neuron_cmd &cmd) { return cmd.opcode == NEURON_OP_LOG_SOFTMAX; }

// A float buffer for one chunk of a row.
Result row_buffer(std::vector<float> &x, int64_t len)
{
	try {
		x.resize(static_cast<size_t>(len));
	} catch (const std::bad_alloc &) {
		return detail::exec_fault("softmax: out of host memory for a row buffer");
	}
	return std::nullopt;
}

} // namespace

std::optional<Fault> gather_row_stats(const neuron_cmd &cmd, const View &in, RowStats *stats)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
	const int64_t step = in.ndim == 0 ? 0 : in.strides[dim] * static_cast<int64_t>(dtype_size(in.dtype));
	std::vector<float> x;
	if (auto f = row_buffer(x, len))
		return f;
	const bool log = is_log(cmd);
	return each_row(cmd, nullptr, in, [&](int64_t r, std::byte *, const std::byte *row) {
		RowStats &st = stats[r];
		load_block<float>(x.data(), row, step, len, in.dtype);
		bool nan = false;
		const float cm = max_f32(x.data(), len, &nan);
		st.nan = st.nan || nan;
		if (st.nan || cm == -std::numeric_limits<float>::infinity())
			return; // nothing to add: NaN wins, and exp(-inf) is 0
		if (cm > st.max) {
			st.sum *= std::exp(static_cast<double>(st.max) - static_cast<double>(cm));
			st.max = cm;
		}
		double sum = 0;
		if (log) {
			for (int64_t i = 0; i < len; ++i)
				sum += std::exp(static_cast<double>(x[size_t(i)] - st.max));
		} else {
#pragma omp simd reduction(+ : sum)
			for (int64_t i = 0; i < len; ++i)
				sum += static_cast<double>(exp_f32(x[size_t(i)] - st.max));
		}
		st.sum += sum;
	});
}

std::optional<Fault> apply_row_stats(const neuron_cmd &cmd, const View &out, const View &in, const RowStats *stats)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
	const int64_t istep = in.ndim == 0 ? 0 : in.strides[dim] * static_cast<int64_t>(dtype_size(in.dtype));
	const int64_t ostep = out.ndim == 0 ? 0 : out.strides[dim] * static_cast<int64_t>(dtype_size(out.dtype));
	std::vector<float> x;
	if (auto f = row_buffer(x, len))
		return f;
	const bool log = is_log(cmd);
	constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
	return each_row(cmd, &out, in, [&](int64_t r, std::byte *orow, const std::byte *row) {
		const RowStats &st = stats[r];
		load_block<float>(x.data(), row, istep, len, in.dtype);
		// NaN in the row, or a row of -inf (sum 0): NaN, as the whole-row kernels.
		const bool nan = st.nan || st.sum == 0;
		if (log) {
			const float lse = static_cast<float>(std::log(st.sum)) + st.max;
			for (int64_t i = 0; i < len; ++i)
				x[size_t(i)] = nan ? kNaN : x[size_t(i)] - lse;
		} else {
			const float inv = static_cast<float>(1.0 / st.sum);
			for (int64_t i = 0; i < len; ++i)
				x[size_t(i)] = nan ? kNaN : exp_f32(x[size_t(i)] - st.max) * inv;
		}
		store_block<float>(orow, ostep, x.data(), len, out.dtype);
	});
}

namespace {

// Calls row(ordinal, out_row, in_row) for ARG_REDUCE's rows: out's shape (size 1
// along the dim) walked with in's strides, as arg_reduce.cpp walks them.
template <class Fn> void each_arg_row(const View &out, const View &in, Fn &&row)
{
	const int64_t *strides[2] = {out.strides, in.strides};
	const size_t esz[2] = {sizeof(int64_t), dtype_size(in.dtype)};
	std::byte *ptrs[2] = {out.data, in.data};
	const auto rows = make_iter<2>(out.ndim, out.sizes, strides, esz, ptrs);
	int64_t ordinal = 0;
	for_each_run(rows, 0, rows.numel, [&](std::byte *const *p, const int64_t *s, int64_t n) {
		for (int64_t r = 0; r < n; ++r)
			row(ordinal++, p[0] + r * s[0], p[1] + r * s[1]);
	});
}

} // namespace

std::optional<Fault> gather_arg_best(const neuron_cmd &cmd, const View &out, const View &in, int64_t offset,
				     ArgBest *best)
{
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const bool want_min = cmd.iscalars[1] == 1;
	const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
	const int64_t istep = in.ndim == 0 ? 0 : in.strides[dim] * static_cast<int64_t>(dtype_size(in.dtype));
	double x[kBlock];
	each_arg_row(out, in, [&](int64_t r, std::byte *, const std::byte *row) {
		ArgBest &b = best[r];
		for (int64_t off = 0; off < len && !b.nan; off += kBlock) {
			const int64_t m = std::min(kBlock, len - off);
			load_block<double>(x, row + off * istep, istep, m, in.dtype);
			for (int64_t i = 0; i < m; ++i) {
				const double v = x[i];
				if (v != v) { // the first NaN wins for good
					b.index = offset + off + i;
					b.nan = true;
					break;
				}
				if (!b.have || (want_min ? v < b.value : v > b.value)) {
					b.index = offset + off + i;
					b.value = v;
					b.have = true;
				}
			}
		}
	});
	return std::nullopt;
}

std::optional<Fault> store_arg_best(const neuron_cmd &, const View &out, const View &in, const ArgBest *best)
{
	each_arg_row(out, in, [&](int64_t r, std::byte *orow, const std::byte *) { st<int64_t>(orow, best[r].index); });
	return std::nullopt;
}

} // namespace neuron::kernels
