// ISA 1.1 indexing: INDEX_SELECT, INDEX_ADD, GATHER, SCATTER_ADD along dim i[0];
// ISA 1.3 adds the copying writes INDEX_COPY and SCATTER; ISA 1.4 the combining
// functions of the adds (product, max, min: index_reduce, scatter_reduce).
//
// Index values are data, so their range is checked here (check_semantics cannot):
// every index is validated before anything is written, and one out of range faults
// the command with the offending value and position. The adds accumulate in double
// and run in index order on one thread, so duplicate indices add deterministically;
// the copying writes run in the same order, so the last duplicate wins.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <cstring>
#include <string>

namespace neuron::kernels::detail {

namespace {

int64_t index_at(const View &ix, const int64_t *pos)
{
	int64_t off = 0;
	for (int d = 0; d < ix.ndim; ++d)
		off += pos[d] * ix.strides[d];
	const std::byte *p = ix.data + off * static_cast<int64_t>(dtype_size(ix.dtype));
	return ix.dtype == NEURON_DTYPE_I32 ? static_cast<int64_t>(ld<int32_t>(p)) : ld<int64_t>(p);
}

template <class F> void for_each_pos(int ndim, const int64_t *sizes, F &&f)
{
	int64_t total = 1;
	for (int d = 0; d < ndim; ++d)
		total *= sizes[d];
	int64_t pos[NEURON_MAX_DIMS] = {};
	for (int64_t n = 0; n < total; ++n) {
		f(pos);
		for (int d = ndim - 1; d >= 0; --d) {
			if (++pos[d] < sizes[d])
				break;
			pos[d] = 0;
		}
	}
}

std::byte *elem(const View &v, const int64_t *pos)
{
	int64_t off = 0;
	for (int d = 0; d < v.ndim; ++d)
		off += pos[d] * v.strides[d];
	return v.data + off * static_cast<int64_t>(dtype_size(v.dtype));
}

Fault range_fault(const char *op, int64_t value, int64_t j, int64_t size, int dim)
{
	return exec_fault(std::string(op) + ": index " + std::to_string(value) + " at position " + std::to_string(j) +
			  " is out of range for dim " + std::to_string(dim) + " of size " + std::to_string(size));
}

// INDEX_SELECT / INDEX_ADD / INDEX_COPY: the first of the `count` entries of the
// 1-d index outside [0, limit), as a fault (checked before anything is written).
std::optional<Fault> check_index_1d(const char *op, const View &ix, int64_t count, int64_t limit, int dim)
{
	for (int64_t j = 0; j < count; ++j) {
		const int64_t k = index_at(ix, &j);
		if (k < 0 || k >= limit)
			return range_fault(op, k, j, limit, dim);
	}
	return std::nullopt;
}

void copy_run(std::byte *dst, int64_t ds, const std::byte *src, int64_t ss, int64_t n, size_t es)
{
	if (ds == static_cast<int64_t>(es) && ss == static_cast<int64_t>(es))
		std::memcpy(dst, src, static_cast<size_t>(n) * es);
	else
		for (int64_t i = 0; i < n; ++i)
			std::memcpy(dst + i * ds, src + i * ss, es);
}

// GATHER / SCATTER_ADD / SCATTER: the first entry of ix (over the positions of
// `shape`, row-major) outside [0, limit), as a fault; checked before anything is
// written, so a bad index leaves the output untouched.
std::optional<Fault> check_positions(const char *op, const View &ix, const View &shape, int64_t limit, int dim)
{
	std::optional<Fault> f;
	int64_t n = 0;
	for_each_pos(shape.ndim, shape.sizes, [&](const int64_t *pos) {
		const int64_t k = index_at(ix, pos);
		if (!f && (k < 0 || k >= limit))
			f = range_fault(op, k, n, limit, dim);
		++n;
	});
	return f;
}

// Calls f(dst_run, src_run, dst_stride, src_stride, n) over the slice shape
// (sizes with dim set to 1) of two views offset to their slices.
template <class F> void slice_runs(const View &a, std::byte *abase, const View &b, std::byte *bbase, int dim, F &&f)
{
	int64_t shape[NEURON_MAX_DIMS];
	std::copy(a.sizes, a.sizes + NEURON_MAX_DIMS, shape);
	shape[dim] = 1;
	const int64_t *strides[2] = {a.strides, b.strides};
	const size_t esz[2] = {dtype_size(a.dtype), dtype_size(b.dtype)};
	std::byte *ptrs[2] = {abase, bbase};
	const auto it = make_iter<2>(a.ndim, shape, strides, esz, ptrs);
	if (it.numel == 0)
		return;
	for_each_run(it, 0, it.numel, [&](std::byte *const *p, const int64_t *s, int64_t n) { f(p[0], p[1], s[0], s[1], n); });
}

// For j ascending: f on the runs of out's slice index[j] and src's slice j along
// dim (INDEX_ADD, INDEX_COPY; indices already checked).
template <class F> void each_indexed_slice(const View &out, const View &ix, const View &src, int dim, int64_t count, F &&f)
{
	const int64_t oes = static_cast<int64_t>(dtype_size(out.dtype)), ses = static_cast<int64_t>(dtype_size(src.dtype));
	for (int64_t j = 0; j < count; ++j) {
		const int64_t k = index_at(ix, &j);
		slice_runs(out, out.data + k * out.strides[dim] * oes, src, src.data + j * src.strides[dim] * ses, dim, f);
	}
}

// dst (op)= src over a run, op: the command's combining function (i[1], enum
// neuron_index_reduce; SUM for the ISA 1.1 adds).
void add_run(std::byte *dst, int64_t ds, const std::byte *src, int64_t ss, int64_t n, uint8_t ddt, uint8_t sdt,
	     int64_t op = NEURON_INDEX_REDUCE_SUM)
{
	for (int64_t off = 0; off < n; off += kBlock) {
		const int64_t m = std::min(kBlock, n - off);
		double a[kBlock], b[kBlock];
		load_block<double>(a, dst + off * ds, ds, m, ddt);
		load_block<double>(b, src + off * ss, ss, m, sdt);
		switch (op) {
		case NEURON_INDEX_REDUCE_PROD:
			for (int64_t i = 0; i < m; ++i)
				a[i] *= b[i];
			break;
		case NEURON_INDEX_REDUCE_AMAX: // NaN wins, as torch.scatter_reduce
			for (int64_t i = 0; i < m; ++i)
				a[i] = (a[i] != a[i] || b[i] != b[i]) ? (a[i] != a[i] ? a[i] : b[i]) : std::max(a[i], b[i]);
			break;
		case NEURON_INDEX_REDUCE_AMIN:
			for (int64_t i = 0; i < m; ++i)
				a[i] = (a[i] != a[i] || b[i] != b[i]) ? (a[i] != a[i] ? a[i] : b[i]) : std::min(a[i], b[i]);
			break;
		default:
			for (int64_t i = 0; i < m; ++i)
				a[i] += b[i];
			break;
		}
		if (is_floating(ddt)) {
			store_block<double>(dst + off * ds, ds, a, m, ddt);
		} else {
			int64_t r[kBlock];
			for (int64_t i = 0; i < m; ++i)
				r[i] = float_to_i64(a[i]);
			store_block<int64_t>(dst + off * ds, ds, r, m, ddt);
		}
	}
}

} // namespace

Result run_index_select(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const View &out = v[0], &in = v[1], &ix = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t count = out.ndim ? out.sizes[dim] : 1;
	const int64_t limit = in.ndim ? in.sizes[dim] : 1;
	if (auto f = check_index_1d("index_select", ix, count, limit, dim))
		return f;
	if (out.ndim == 0) {
		std::memcpy(out.data, in.data, dtype_size(out.dtype));
		return std::nullopt;
	}
	const size_t es = dtype_size(out.dtype);
	int64_t slice = 1;
	for (int d = 0; d < out.ndim; ++d)
		slice *= d == dim ? 1 : out.sizes[d];
	const int nt = static_cast<int>(std::min<int64_t>(threads_for(count * slice, kElementwiseGrain, max_threads), count));
	parallel_ranges(count, std::max(nt, 1), [&](int64_t b, int64_t e, int) {
		for (int64_t j = b; j < e; ++j) {
			const int64_t k = index_at(ix, &j);
			slice_runs(out, out.data + j * out.strides[dim] * static_cast<int64_t>(es), in,
				   in.data + k * in.strides[dim] * static_cast<int64_t>(es), dim,
				   [&](std::byte *d, std::byte *s, int64_t dsd, int64_t ssd, int64_t n) {
					   copy_run(d, dsd, s, ssd, n, es);
				   });
		}
	});
	return std::nullopt;
}

Result run_index_add(const neuron_cmd &cmd, std::span<const View> v, int)
{
	const View &out = v[0], &ix = v[1], &src = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t count = src.ndim ? src.sizes[dim] : 1;
	const int64_t limit = out.ndim ? out.sizes[dim] : 1;
	if (auto f = check_index_1d("index_add", ix, count, limit, dim))
		return f;
	const int64_t op = cmd.iscalars[1];
	if (out.ndim == 0) {
		add_run(out.data, 0, src.data, 0, 1, out.dtype, src.dtype, op);
		return std::nullopt;
	}
	each_indexed_slice(out, ix, src, dim, count, [&](std::byte *d, std::byte *s, int64_t dsd, int64_t ssd, int64_t n) {
		add_run(d, dsd, s, ssd, n, out.dtype, src.dtype, op);
	});
	return std::nullopt;
}

Result run_gather(const neuron_cmd &cmd, std::span<const View> v, int)
{
	const View &out = v[0], &in = v[1], &ix = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t limit = in.ndim ? in.sizes[dim] : 1;
	if (auto f = check_positions("gather", ix, out, limit, dim))
		return f;
	const size_t es = dtype_size(out.dtype);
	for_each_pos(out.ndim, out.sizes, [&](const int64_t *pos) {
		int64_t p2[NEURON_MAX_DIMS];
		std::copy(pos, pos + NEURON_MAX_DIMS, p2);
		if (in.ndim)
			p2[dim] = index_at(ix, pos);
		std::memcpy(elem(out, pos), elem(in, p2), es);
	});
	return std::nullopt;
}

Result run_scatter_add(const neuron_cmd &cmd, std::span<const View> v, int)
{
	const View &out = v[0], &ix = v[1], &src = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t limit = out.ndim ? out.sizes[dim] : 1;
	if (auto f = check_positions("scatter_add", ix, src, limit, dim))
		return f;
	for_each_pos(src.ndim, src.sizes, [&](const int64_t *pos) {
		int64_t p2[NEURON_MAX_DIMS];
		std::copy(pos, pos + NEURON_MAX_DIMS, p2);
		if (out.ndim)
			p2[dim] = index_at(ix, pos);
		add_run(elem(out, p2), 0, elem(src, pos), 0, 1, out.dtype, src.dtype, cmd.iscalars[1]);
	});
	return std::nullopt;
}

// ---- ISA 1.3 ----

Result run_index_copy(const neuron_cmd &cmd, std::span<const View> v, int)
{
	const View &out = v[0], &ix = v[1], &src = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t count = src.ndim ? src.sizes[dim] : 1;
	const int64_t limit = out.ndim ? out.sizes[dim] : 1;
	if (auto f = check_index_1d("index_copy", ix, count, limit, dim))
		return f;
	const size_t es = dtype_size(out.dtype);
	if (out.ndim == 0) {
		std::memcpy(out.data, src.data, es);
		return std::nullopt;
	}
	// One thread, j ascending: a later duplicate overwrites an earlier one.
	each_indexed_slice(out, ix, src, dim, count, [&](std::byte *d, std::byte *s, int64_t dsd, int64_t ssd, int64_t n) {
		copy_run(d, dsd, s, ssd, n, es);
	});
	return std::nullopt;
}

Result run_scatter(const neuron_cmd &cmd, std::span<const View> v, int)
{
	const View &out = v[0], &ix = v[1], &src = v[2];
	const int dim = static_cast<int>(cmd.iscalars[0]);
	const int64_t limit = out.ndim ? out.sizes[dim] : 1;
	if (auto f = check_positions("scatter", ix, src, limit, dim))
		return f;
	const size_t es = dtype_size(out.dtype);
	for_each_pos(src.ndim, src.sizes, [&](const int64_t *pos) {
		int64_t p2[NEURON_MAX_DIMS];
		std::copy(pos, pos + NEURON_MAX_DIMS, p2);
		if (out.ndim)
			p2[dim] = index_at(ix, pos);
		std::memcpy(elem(out, p2), elem(src, pos), es);
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
