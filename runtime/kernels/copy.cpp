// FILL and COPY: strided stores of a constant, and strided copies with a cast
// between any pair of dtypes (see dtype.h for the conversion rules).
#include "dtype.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"

#include <algorithm>
#include <cstring>

namespace neuron::kernels::detail {

namespace {

// A copy moves bytes, so it pays to split it only for bigger chunks than compute ops.
constexpr int64_t kCopyGrain = int64_t{1} << 18;

template <class T> void fill_run(std::byte *p, int64_t stride, int64_t n, T v)
{
	if (stride == static_cast<int64_t>(sizeof(T))) {
		for (int64_t i = 0; i < n; ++i)
			st<T>(p + i * static_cast<int64_t>(sizeof(T)), v);
	} else {
		for (int64_t i = 0; i < n; ++i)
			st<T>(p + i * stride, v);
	}
}

template <class D, class S> void cast_run(std::byte *dst, int64_t ds, const std::byte *src, int64_t ss, int64_t n)
{
	constexpr int64_t dsz = sizeof(D), ssz = sizeof(S);
	if (ds == dsz && ss == ssz) { // compile-time strides: this is the loop that vectorises
		for (int64_t i = 0; i < n; ++i)
			st<D>(dst + i * dsz, cast_to<D>(ld<S>(src + i * ssz)));
	} else {
		for (int64_t i = 0; i < n; ++i)
			st<D>(dst + i * ds, cast_to<D>(ld<S>(src + i * ss)));
	}
}

// Same dtype, any strides: move elements as unsigned integers of their size.
template <class T> void move_run(std::byte *dst, int64_t ds, const std::byte *src, int64_t ss, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		st<T>(dst + i * ds, ld<T>(src + i * ss));
}

using CastFn = void (*)(std::byte *, int64_t, const std::byte *, int64_t, int64_t);

CastFn cast_fn(uint8_t out_dt, uint8_t in_dt)
{
	return with_dtype(out_dt, [&](auto d) {
		return with_dtype(in_dt, [&](auto s) -> CastFn { return &cast_run<decltype(d), decltype(s)>; });
	});
}

CastFn move_fn(size_t esize)
{
	switch (esize) {
	case 1:
		return &move_run<uint8_t>;
	case 2:
		return &move_run<uint16_t>;
	case 4:
		return &move_run<uint32_t>;
	default:
		return &move_run<uint64_t>;
	}
}

// A transposing copy: the output is contiguous along the iterator's dim 0 but the
// input along dim 1, so a plain walk reads one element per cache line (and per
// page, for long rows). Walking kTransposeTile x kTransposeTile tiles keeps the
// lines of both sides in L1. Work items are (outer position, block of dim 1).
constexpr int64_t kTransposeTile = 16;

void blocked_copy(const NdIter<2> &it, CastFn fn, int nt)
{
	const int64_t n0 = it.size[0], n1 = it.size[1], T = kTransposeTile;
	NdIter<2> outer; // the dims above the two tiled ones
	outer.ndim = it.ndim - 2;
	outer.numel = it.numel / (n0 * n1);
	for (int k = 0; k < 2; ++k) {
		outer.ptr[k] = it.ptr[k];
		for (int d = 2; d < it.ndim; ++d)
			outer.stride[k][d - 2] = it.stride[k][d];
	}
	for (int d = 2; d < it.ndim; ++d)
		outer.size[d - 2] = it.size[d];
	const int64_t blocks = (n1 + T - 1) / T;
	parallel_ranges(outer.numel * blocks, nt, [&](int64_t b, int64_t e, int) {
		for (int64_t task = b; task < e; ++task) {
			const int64_t pos = task / blocks, j0 = task % blocks * T, j1 = std::min(n1, j0 + T);
			for_each_run(outer, pos, pos + 1, [&](std::byte *const *p, const int64_t *, int64_t) {
				for (int64_t i0 = 0; i0 < n0; i0 += T)
					for (int64_t j = j0; j < j1; ++j)
						fn(p[0] + j * it.stride[0][1] + i0 * it.stride[0][0], it.stride[0][0],
						   p[1] + j * it.stride[1][1] + i0 * it.stride[1][0], it.stride[1][0],
						   std::min(T, n0 - i0));
			});
		}
	});
}

} // namespace

Result run_fill(const neuron_cmd &cmd, const View &out, int max_threads)
{
	const size_t es = dtype_size(out.dtype);
	// The value in the output's storage format, computed once.
	std::byte value[8] = {};
	with_dtype(out.dtype, [&](auto d) {
		using D = decltype(d);
		const D v = is_floating(out.dtype) ? from_float<D>(static_cast<float>(cmd.fscalars.f[0]))
						   : from_i64<D>(cmd.iscalars[0]);
		std::memcpy(value, &v, sizeof(D));
	});
	bool zero = true;
	for (size_t i = 0; i < es; ++i)
		zero = zero && value[i] == std::byte{0};

	const int64_t *strides[1] = {out.strides};
	const size_t esz[1] = {es};
	std::byte *ptrs[1] = {out.data};
	const auto it = make_iter<1>(out.ndim, out.sizes, strides, esz, ptrs);
	const int nt = threads_for(it.numel, kCopyGrain, max_threads);
	// Tiling hook: a bounded tile is a sub-range [b, e) of it.numel.
	parallel_ranges(it.numel, nt, [&](int64_t b, int64_t e, int) {
		for_each_run(it, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			if (zero && s[0] == static_cast<int64_t>(es)) {
				std::memset(p[0], 0, static_cast<size_t>(n) * es);
				return;
			}
			switch (es) {
			case 1:
				fill_run(p[0], s[0], n, ld<uint8_t>(value));
				break;
			case 2:
				fill_run(p[0], s[0], n, ld<uint16_t>(value));
				break;
			case 4:
				fill_run(p[0], s[0], n, ld<uint32_t>(value));
				break;
			default:
				fill_run(p[0], s[0], n, ld<uint64_t>(value));
				break;
			}
		});
	});
	return std::nullopt;
}

Result run_copy(const View &out, const View &in, int max_threads)
{
	const size_t oes = dtype_size(out.dtype), ies = dtype_size(in.dtype);
	const bool same = out.dtype == in.dtype;
	const int64_t *strides[2] = {out.strides, in.strides};
	const size_t esz[2] = {oes, ies};
	std::byte *ptrs[2] = {out.data, in.data};
	const auto it = make_iter<2>(out.ndim, out.sizes, strides, esz, ptrs);
	if (it.numel == 0)
		return std::nullopt;
	if (same && out.data == in.data &&
	    std::equal(it.stride[0], it.stride[0] + it.ndim, it.stride[1]))
		return std::nullopt; // exact in-place copy of itself

	const CastFn fn = same ? move_fn(oes) : cast_fn(out.dtype, in.dtype);
	const int nt = threads_for(it.numel, kCopyGrain, max_threads);
	if (it.ndim >= 2 && it.size[0] >= kTransposeTile && it.size[1] >= kTransposeTile &&
	    it.stride[1][0] != static_cast<int64_t>(ies) && it.stride[1][1] == static_cast<int64_t>(ies)) {
		blocked_copy(it, fn, nt);
		return std::nullopt;
	}
	parallel_ranges(it.numel, nt, [&](int64_t b, int64_t e, int) {
		for_each_run(it, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			if (same && s[0] == static_cast<int64_t>(oes) && s[1] == static_cast<int64_t>(ies)) {
				if (p[0] != p[1])
					std::memcpy(p[0], p[1], static_cast<size_t>(n) * oes);
				return;
			}
			fn(p[0], s[0], p[1], s[1], n);
		});
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
