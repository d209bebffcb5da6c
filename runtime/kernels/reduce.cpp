// SUM / MEAN / AMAX over the dims named by bitmask i[0], keepdim.
//
// Accuracy: floating outputs accumulate in double (each element widened exactly),
// so an f32 sum of n elements has relative error ~n * 2^-53 before the final
// rounding to the output dtype: better than PyTorch's float pairwise sum, and
// simpler. The contiguous inner loop uses `omp simd reduction`, which lets the
// compiler keep several double partial sums (reassociation), the same accuracy
// class. Integer outputs accumulate in int64 with wrap-around (as PyTorch's int64
// sum); MEAN divides the double sum by the reduced element count (0/0 = NaN for an
// empty reduction, like PyTorch). AMAX propagates NaN.
//
// Accumulate mode (i[1], ISA 1.3) combines each result with the output's old value,
// and MEAN may divide by a given count (i[2]): the chip's tiles of a reduction cut
// along a reduced dim use both, so a sum of everything is preemptible too.
//
// Layout: the input's dims are split into kept and reduced dims, each sorted by
// input stride and coalesced. If the innermost kept dim is contiguous and inside
// every reduced dim ("outer" reduction, e.g. summing the rows of a row-major
// matrix), a tile of outputs is accumulated side by side while walking the reduced
// dims, which streams the input; otherwise each output reduces its own runs
// ("inner" reduction). Work is split among threads by outputs, or, when there are
// fewer outputs than threads, by ranges of the reduced index space with partial
// results combined at the end.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"
#include "vmath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <vector>

namespace neuron::kernels::detail {

namespace {

constexpr int64_t kTile = 2048;

// acc[t] += x[t]: an outer reduction's rows (a bias gradient, the sum over a
// batch), cloned per ISA: each acc[t] is its own sum in row order, so every clone
// gives the same bits (the baseline build's two doubles per instruction made a
// 256 x 256 column sum 2.7x PyTorch's CPU kernel).
NK_HOT void add_f32_to_f64(double *__restrict acc, const float *__restrict x, int64_t n)
{
	for (int64_t t = 0; t < n; ++t)
		acc[t] += static_cast<double>(x[t]);
} // outputs accumulated together (16 KiB of doubles: fits L1)

struct Plan {
	int nk = 0, nr = 0;
	int64_t ksize[NEURON_MAX_DIMS], kin[NEURON_MAX_DIMS], kout[NEURON_MAX_DIMS]; // bytes
	int64_t rsize[NEURON_MAX_DIMS], rin[NEURON_MAX_DIMS];
	int64_t nout = 1, nred = 1;
	bool outer = false;
	std::byte *in = nullptr, *out = nullptr;
	uint8_t out_dt = 0;
	size_t ies = 0;
	NdIter<1> red; // iteration over the reduced dims; ptr set per use
};

Plan make_plan(const View &out, const View &in, uint64_t mask)
{
	Plan p;
	p.in = in.data;
	p.out = out.data;
	p.out_dt = static_cast<uint8_t>(out.dtype);
	p.ies = dtype_size(in.dtype);
	const int64_t ies = static_cast<int64_t>(p.ies), oes = static_cast<int64_t>(dtype_size(out.dtype));
	for (int d = 0; d < in.ndim; ++d)
		((mask >> d) & 1u ? p.nred : p.nout) *= in.sizes[d];
	if (p.nout == 0)
		return p;
	// With an empty reduction the input is never read (and its strides, unchecked
	// for an empty tensor, may be anything): outputs just get the initial value.
	const bool read_input = p.nred > 0;
	for (int d = 0; d < in.ndim; ++d) {
		const int64_t n = in.sizes[d];
		if (n == 1)
			continue;
		if ((mask >> d) & 1u) {
			if (read_input) {
				p.rsize[p.nr] = n;
				p.rin[p.nr++] = in.strides[d] * ies;
			}
		} else {
			p.ksize[p.nk] = n;
			p.kin[p.nk] = read_input ? in.strides[d] * ies : 0;
			p.kout[p.nk++] = out.strides[d] * oes;
		}
	}
	// Sort by input stride, innermost first (insertion sort, <= 8 dims), then merge
	// neighbours that are contiguous with each other.
	auto sort = [](int n, int64_t *key, int64_t *s, int64_t *o) {
		for (int i = 1; i < n; ++i)
			for (int j = i; j > 0 && key[j] < key[j - 1]; --j) {
				std::swap(key[j], key[j - 1]);
				std::swap(s[j], s[j - 1]);
				if (o)
					std::swap(o[j], o[j - 1]);
			}
	};
	sort(p.nk, p.kin, p.ksize, p.kout);
	sort(p.nr, p.rin, p.rsize, nullptr);
	int m = 0;
	for (int i = 0; i < p.nk; ++i) {
		if (m > 0 && p.kin[i] == p.kin[m - 1] * p.ksize[m - 1] && p.kout[i] == p.kout[m - 1] * p.ksize[m - 1]) {
			p.ksize[m - 1] *= p.ksize[i];
			continue;
		}
		p.ksize[m] = p.ksize[i], p.kin[m] = p.kin[i], p.kout[m] = p.kout[i];
		++m;
	}
	p.nk = m;
	m = 0;
	for (int i = 0; i < p.nr; ++i) {
		if (m > 0 && p.rin[i] == p.rin[m - 1] * p.rsize[m - 1]) {
			p.rsize[m - 1] *= p.rsize[i];
			continue;
		}
		p.rsize[m] = p.rsize[i], p.rin[m] = p.rin[i];
		++m;
	}
	p.nr = m;
	p.outer = p.nk > 0 && p.kin[0] == ies && (p.nr == 0 || p.kin[0] < p.rin[0]);
	p.red.ndim = p.nr;
	p.red.numel = p.nred;
	for (int i = 0; i < p.nr; ++i) {
		p.red.size[i] = p.rsize[i];
		p.red.stride[0][i] = p.rin[i];
	}
	if (p.nk == 0) { // full reduction: one output, a virtual kept dim of size 1
		p.nk = 1;
		p.ksize[0] = 1;
		p.kin[0] = p.kout[0] = 0;
	}
	return p;
}

// Accumulator rules for one (accumulator type A, input storage S, op) triple.
template <class A, class S, bool Max> struct Rules {
	static A init()
	{
		if constexpr (!Max)
			return A{0};
		else if constexpr (std::is_floating_point_v<A>)
			return -std::numeric_limits<A>::infinity();
		else
			return std::numeric_limits<A>::min();
	}
	static A comb(A acc, A x)
	{
		if constexpr (!Max) {
			if constexpr (std::is_floating_point_v<A>)
				return acc + x;
			else
				return static_cast<A>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
		} else if constexpr (std::is_floating_point_v<A>) {
			return (x > acc || x != x) ? x : acc; // NaN sticks
		} else {
			return x > acc ? x : acc;
		}
	}
	static A elem(const std::byte *p) { return load_as<A>(ld<S>(p)); }

	// Reduce a strided run of n elements.
	static A run(const std::byte *p, int64_t stride, int64_t n)
	{
		if constexpr (std::is_same_v<S, float> && std::is_same_v<A, double>) {
			if (stride == 4)
				return run_f32(reinterpret_cast<const float *>(p), n);
		}
		A acc = init();
		for (int64_t i = 0; i < n; ++i)
			acc = comb(acc, elem(p + i * stride));
		return acc;
	}

	// The hot case, contiguous f32: `omp simd` allows the compiler to keep several
	// partial sums (reassociation) so the loop vectorises; max_f32 (vmath.h) does
	// the same for a NaN-propagating max.
	static double run_f32(const float *x, int64_t n)
	{
		if constexpr (!Max) {
			double s = 0;
#pragma omp simd reduction(+ : s)
			for (int64_t i = 0; i < n; ++i)
				s += static_cast<double>(x[i]);
			return s;
		} else {
			bool nan;
			const float m = max_f32(x, n, &nan);
			return nan ? std::numeric_limits<double>::quiet_NaN() : m;
		}
	}

	// acc[t] = comb(acc[t], element t) for n contiguous input elements.
	static void row(A *__restrict acc, const std::byte *p, int64_t n)
	{
		if constexpr (std::is_same_v<S, float> && std::is_same_v<A, double> && !Max) {
			add_f32_to_f64(acc, reinterpret_cast<const float *>(p), n); // the hot case
		} else {
			constexpr int64_t es = sizeof(S);
			for (int64_t t = 0; t < n; ++t)
				acc[t] = comb(acc[t], elem(p + t * es));
		}
	}
};

// Walks outputs [o0, o1) in segments along the innermost kept dim, reducing over
// the linear reduced range [r0, r1); calls emit(o, len, acc) per segment.
template <class A, class S, bool Max, class Emit>
void reduce_range(const Plan &p, int64_t o0, int64_t o1, int64_t r0, int64_t r1, Emit &&emit)
{
	using R = Rules<A, S, Max>;
	A acc[kTile];
	int64_t o = o0;
	while (o < o1) {
		// Position of output o: index along kept dim 0, and input offset of its row.
		int64_t rem = o;
		const int64_t j = rem % p.ksize[0];
		rem /= p.ksize[0];
		int64_t in_off = j * p.kin[0];
		for (int d = 1; d < p.nk; ++d) {
			in_off += (rem % p.ksize[d]) * p.kin[d];
			rem /= p.ksize[d];
		}
		const int64_t len = std::min({kTile, p.ksize[0] - j, o1 - o});
		for (int64_t t = 0; t < len; ++t)
			acc[t] = R::init();
		NdIter<1> red = p.red;
		if (p.outer) {
			red.ptr[0] = p.in + in_off;
			for_each_run(red, r0, r1, [&](std::byte *const *q, const int64_t *s, int64_t n) {
				for (int64_t i = 0; i < n; ++i)
					R::row(acc, q[0] + i * s[0], len);
			});
		} else {
			for (int64_t t = 0; t < len; ++t) {
				red.ptr[0] = p.in + in_off + t * p.kin[0];
				for_each_run(red, r0, r1, [&](std::byte *const *q, const int64_t *s, int64_t n) {
					acc[t] = R::comb(acc[t], R::run(q[0], s[0], n));
				});
			}
		}
		emit(o, len, acc);
		o += len;
	}
}

// Byte offset of output o in the output tensor.
int64_t out_offset(const Plan &p, int64_t o)
{
	int64_t off = 0;
	for (int d = 0; d < p.nk; ++d) {
		off += (o % p.ksize[d]) * p.kout[d];
		o /= p.ksize[d];
	}
	return off;
}

// How results reach the output: MEAN's divisor, and whether they add to (max with)
// the output's old values.
struct Finish {
	bool mean = false;
	int64_t divisor = 0; // 0: the reduced element count
	bool accumulate = false;
};

template <class A, class S, bool Max>
Result reduce_typed(const Plan &p, Finish fin, int max_threads)
{
	using R = Rules<A, S, Max>;
	const A divisor = static_cast<A>(fin.divisor > 0 ? fin.divisor : p.nred);
	// Final values go to the output along kept dim 0 (consecutive outputs of a segment).
	auto store = [&](int64_t o, int64_t len, A *acc) {
		if (fin.mean)
			for (int64_t t = 0; t < len; ++t)
				acc[t] = acc[t] / divisor;
		std::byte *dst = p.out + out_offset(p, o);
		if (fin.accumulate) {
			constexpr int64_t kChunk = 256;
			A old[kChunk];
			for (int64_t b = 0; b < len; b += kChunk) {
				const int64_t n = std::min(kChunk, len - b);
				load_block<A>(old, dst + b * p.kout[0], p.kout[0], n, p.out_dt);
				for (int64_t t = 0; t < n; ++t)
					acc[b + t] = R::comb(old[t], acc[b + t]);
			}
		}
		store_block<A>(dst, p.kout[0], acc, len, p.out_dt);
	};
	const int nt = threads_for(p.nout * std::max<int64_t>(p.nred, 1), kElementwiseGrain, max_threads);
	// Tiling hook: a bounded tile of a reduction is a range of outputs (each
	// computed completely), i.e. reduce_range(p, o0, o1, 0, p.nred, store).
	if (nt <= 1 || p.nout >= nt) {
		parallel_ranges(p.nout, std::min<int64_t>(nt, p.nout), [&](int64_t b, int64_t e, int) {
			reduce_range<A, S, Max>(p, b, e, 0, p.nred, store);
		});
		return std::nullopt;
	}
	// Few outputs, long reductions: each thread reduces a slice of the reduced range
	// for every output, then the partials are combined in thread order.
	std::vector<A> partial;
	try {
		partial.assign(static_cast<size_t>(nt * p.nout), R::init());
	} catch (const std::bad_alloc &) {
		return exec_fault("reduction: out of host memory");
	}
	parallel_ranges(p.nred, nt, [&](int64_t b, int64_t e, int t) {
		reduce_range<A, S, Max>(p, 0, p.nout, b, e, [&](int64_t o, int64_t len, A *acc) {
			std::copy(acc, acc + len, partial.begin() + t * p.nout + o);
		});
	});
	for (int t = 1; t < nt; ++t)
		for (int64_t o = 0; o < p.nout; ++o)
			partial[static_cast<size_t>(o)] = R::comb(partial[static_cast<size_t>(o)],
								  partial[static_cast<size_t>(t * p.nout + o)]);
	// Emit segment by segment so the output strides are honoured.
	for (int64_t o = 0; o < p.nout;) {
		const int64_t len = std::min(p.ksize[0] - o % p.ksize[0], p.nout - o);
		store(o, len, partial.data() + o);
		o += len;
	}
	return std::nullopt;
}

} // namespace

Result run_reduce(const neuron_cmd &cmd, const View &out, const View &in, int max_threads)
{
	const Plan p = make_plan(out, in, static_cast<uint64_t>(cmd.iscalars[0]));
	if (p.nout == 0)
		return std::nullopt;
	const bool is_max = cmd.opcode == NEURON_OP_AMAX;
	const Finish fin{cmd.opcode == NEURON_OP_MEAN, cmd.iscalars[2], cmd.iscalars[1] == NEURON_REDUCE_ACCUMULATE};
	const Finish no_mean{false, 0, fin.accumulate};
	// Accumulate in double for floating outputs, int64 for integer outputs. (AMAX has
	// in dtype == out dtype, so a floating AMAX compares exact doubles.)
	const bool floating = is_floating(out.dtype);
	return with_dtype(in.dtype, [&](auto s) -> Result {
		using S = decltype(s);
		if (floating)
			return is_max ? reduce_typed<double, S, true>(p, no_mean, max_threads)
				      : reduce_typed<double, S, false>(p, fin, max_threads);
		return is_max ? reduce_typed<int64_t, S, true>(p, no_mean, max_threads)
			      : reduce_typed<int64_t, S, false>(p, no_mean, max_threads);
	});
}

} // namespace neuron::kernels::detail
