// ISA 1.4 SCAN: inclusive scans (sum, product, max, min, log-sum-exp) along one
// dim, each row starting from its init element.
//
// As PyTorch's CPU kernels: floating outputs accumulate in double (cumsum of f32
// rounds once per element, not once per addition), integer outputs in int64
// (wrapping). MAX/MIN keep the first NaN. Rows are independent: threads split them;
// a row is walked in order by one thread. A tile that continues a row (the chip
// cuts long rows, runtime/sched/tiling_isa14_compute.cpp) starts from the last element the
// tile before it wrote, passed as init.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>

namespace neuron::kernels::detail {

namespace {

struct Rows {
	NdIter<3> it; // out, in, init over the shape with the scanned dim of size 1
	int64_t len = 1;
	int64_t ostep = 0, istep = 0; // bytes between elements of a row
};

Rows scan_rows(const neuron_cmd &cmd, const View &out, const View &in, const View &init)
{
	Rows r;
	const int dim = static_cast<int>(cmd.iscalars[0]);
	int64_t shape[NEURON_MAX_DIMS];
	std::copy(out.sizes, out.sizes + NEURON_MAX_DIMS, shape);
	if (out.ndim > 0) {
		r.len = out.sizes[dim];
		shape[dim] = 1;
		r.ostep = out.strides[dim] * static_cast<int64_t>(dtype_size(out.dtype));
		r.istep = in.strides[dim] * static_cast<int64_t>(dtype_size(in.dtype));
	}
	const int64_t *strides[3] = {out.strides, in.strides, init.strides};
	const size_t esz[3] = {dtype_size(out.dtype), dtype_size(in.dtype), dtype_size(init.dtype)};
	std::byte *ptrs[3] = {out.data, in.data, init.data};
	r.it = make_iter<3>(out.ndim, shape, strides, esz, ptrs);
	return r;
}

template <class Acc> Acc combine(int fn, Acc acc, Acc x)
{
	switch (fn) {
	case NEURON_SCAN_SUM: return acc + x;
	case NEURON_SCAN_PROD: return acc * x;
	case NEURON_SCAN_MAX:
		if constexpr (std::is_floating_point_v<Acc>)
			if (acc != acc || x != x)
				return acc != acc ? acc : x;
		return x > acc ? x : acc;
	case NEURON_SCAN_MIN:
		if constexpr (std::is_floating_point_v<Acc>)
			if (acc != acc || x != x)
				return acc != acc ? acc : x;
		return x < acc ? x : acc;
	default: // LOGSUMEXP (floating only)
		if constexpr (std::is_floating_point_v<Acc>) {
			if (std::isinf(acc) && acc == x)
				return acc;
			const Acc m = std::max(acc, x);
			return m + std::log1p(std::exp(-std::fabs(acc - x)));
		}
		return acc;
	}
}

// Wrapping integer arithmetic (int64 overflow is UB in C++; PyTorch wraps).
template <> int64_t combine<int64_t>(int fn, int64_t acc, int64_t x)
{
	switch (fn) {
	case NEURON_SCAN_SUM: return static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
	case NEURON_SCAN_PROD: return static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x));
	case NEURON_SCAN_MAX: return std::max(acc, x);
	default: return std::min(acc, x);
	}
}

template <class Acc> void scan_row(int fn, std::byte *o, int64_t os, const std::byte *x, int64_t xs, const std::byte *init,
				   int64_t len, uint8_t odt, uint8_t idt, uint8_t initdt)
{
	Acc acc;
	load_block<Acc>(&acc, init, 0, 1, initdt);
	Acc buf[kBlock];
	for (int64_t off = 0; off < len; off += kBlock) {
		const int64_t n = std::min(kBlock, len - off);
		load_block<Acc>(buf, x + off * xs, xs, n, idt);
		for (int64_t i = 0; i < n; ++i) {
			acc = combine<Acc>(fn, acc, buf[i]);
			buf[i] = acc;
		}
		store_block<Acc>(o + off * os, os, buf, n, odt);
	}
}

} // namespace

Result run_scan(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const View &out = v[0], &in = v[1], &init = v[2];
	const int fn = static_cast<int>(cmd.iscalars[1]);
	const Rows rows = scan_rows(cmd, out, in, init);
	if (rows.it.numel == 0 || rows.len == 0)
		return std::nullopt;
	const bool fl = is_floating(out.dtype);
	const int nt = static_cast<int>(
		std::min<int64_t>(threads_for(rows.it.numel * rows.len, kElementwiseGrain, max_threads), rows.it.numel));
	parallel_ranges(rows.it.numel, nt, [&](int64_t b, int64_t e, int) {
		for_each_run(rows.it, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			for (int64_t r = 0; r < n; ++r) {
				std::byte *o = p[0] + r * s[0];
				const std::byte *x = p[1] + r * s[1], *i0 = p[2] + r * s[2];
				if (fl)
					scan_row<double>(fn, o, rows.ostep, x, rows.istep, i0, rows.len, out.dtype, in.dtype,
							 init.dtype);
				else
					scan_row<int64_t>(fn, o, rows.ostep, x, rows.istep, i0, rows.len, out.dtype, in.dtype,
							  init.dtype);
			}
		});
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
