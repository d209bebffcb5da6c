// LAYER_NORM, LAYER_NORM_BACKWARD and LAYER_NORM_PARAM_GRAD (cmd.h, ISA 1.8): a
// layer norm row by row, each pass over a row in cache.
//
// As reductions, elementwise ops and POINTWISE chains a layer norm was 5 commands
// forward and 9 backward, each walking the rows again: on a transformer's rows of
// 64 the per-run cost of the generic walks (a broadcast statistic makes every row
// a run) was most of its time.
//
// Row sums are in double, kept in 8 partials combined in a fixed order, so the
// AVX-512, AVX2 and baseline clones give the same bits. Rows go in groups of 8
// (statistics of the group, then its outputs) and each thread keeps its buffers.
// The parameter gradients sum over rows in a fixed number of chunks, so their bits
// do not depend on the thread count either.
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"
#include "vmath.h"

#include <cmath>
#include <new>
#include <string>
#include <vector>

namespace neuron::kernels::detail {

namespace {

constexpr int kPartials = 8;
// Rows reduced together: one row's sum is a chain of dependent adds (latency
// bound on rows of 64); the rows of a group are summed in one loop, so their
// chains overlap. A group short of kGroup rows repeats its first row.
constexpr int kGroup = 8;

// A group of rows: where each is read (f32), where its result goes (f32, maybe
// a buffer), and where its statistics are.
struct Group {
	int n = 0;
	const float *x[kGroup];
	const float *g[kGroup]; // backward: the incoming gradient
	float *y[kGroup];
	std::byte *out[kGroup]; // the result's place in out (y when out is f32 and contiguous)
	float *mean[kGroup], *rstd[kGroup];
};

// The sums of a group's rows in double, 8 partials per row combined in a fixed
// order (the same bits in every clone). Plain loops, no callables: a call per
// element is what a clone cannot inline.
struct GroupAcc {
	double a[kGroup][kPartials];
};

[[gnu::always_inline]] inline void combine_rows(const GroupAcc &acc, double (&out)[kGroup])
{
	for (int r = 0; r < kGroup; ++r) {
		const double *p = acc.a[r];
		out[r] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
	}
}

// Forward: mean, rstd, then y = (x - mean) * rstd [* w] [+ b] in f32.
NK_HOT void group_forward(const Group &grp, int64_t n, double eps, const float *w, const float *b)
{
	const float *x[kGroup];
	for (int r = 0; r < kGroup; ++r)
		x[r] = grp.x[r < grp.n ? r : 0];
	const int64_t whole = n / kPartials * kPartials;
	GroupAcc acc = {};
	for (int64_t i = 0; i < whole; i += kPartials)
		for (int r = 0; r < kGroup; ++r)
			for (int j = 0; j < kPartials; ++j)
				acc.a[r][j] += static_cast<double>(x[r][i + j]);
	for (int64_t i = whole; i < n; ++i)
		for (int r = 0; r < kGroup; ++r)
			acc.a[r][i - whole] += static_cast<double>(x[r][i]);
	double m[kGroup], var[kGroup];
	combine_rows(acc, m);
	for (int r = 0; r < kGroup; ++r)
		m[r] /= static_cast<double>(n);
	acc = {};
	for (int64_t i = 0; i < whole; i += kPartials)
		for (int r = 0; r < kGroup; ++r)
			for (int j = 0; j < kPartials; ++j) {
				const double c = static_cast<double>(x[r][i + j]) - m[r];
				acc.a[r][j] += c * c;
			}
	for (int64_t i = whole; i < n; ++i)
		for (int r = 0; r < kGroup; ++r) {
			const double c = static_cast<double>(x[r][i]) - m[r];
			acc.a[r][i - whole] += c * c;
		}
	combine_rows(acc, var);
	for (int r = 0; r < grp.n; ++r) {
		const float mean = static_cast<float>(m[r]);
		const float rstd = static_cast<float>(1.0 / std::sqrt(var[r] / static_cast<double>(n) + eps));
		*grp.mean[r] = mean;
		*grp.rstd[r] = rstd;
		const float *xr = x[r];
		float *y = grp.y[r];
		if (w && b) {
			for (int64_t i = 0; i < n; ++i)
				y[i] = (xr[i] - mean) * rstd * w[i] + b[i];
		} else if (w) {
			for (int64_t i = 0; i < n; ++i)
				y[i] = (xr[i] - mean) * rstd * w[i];
		} else {
			for (int64_t i = 0; i < n; ++i)
				y[i] = (xr[i] - mean) * rstd;
		}
	}
}

// Backward: with g = go [* w] and xhat = (x - mean) * rstd (f32), the row means of
// g and g * xhat in double, then dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd.
// g goes through buf (kGroup rows of n) when there is a weight.
NK_HOT void group_backward(const Group &grp, int64_t n, const float *w, float *buf)
{
	const float *g[kGroup], *x[kGroup];
	float mean[kGroup], rstd[kGroup];
	for (int r = 0; r < kGroup; ++r) {
		const int from = r < grp.n ? r : 0;
		g[r] = grp.g[from];
		x[r] = grp.x[from];
		mean[r] = *grp.mean[from];
		rstd[r] = *grp.rstd[from];
	}
	if (w) {
		for (int r = 0; r < grp.n; ++r) {
			float *gw = buf + r * n;
			for (int64_t i = 0; i < n; ++i)
				gw[i] = g[r][i] * w[i];
			g[r] = gw;
		}
		for (int r = grp.n; r < kGroup; ++r)
			g[r] = g[0];
	}
	const int64_t whole = n / kPartials * kPartials;
	GroupAcc a1 = {}, a2 = {};
	for (int64_t i = 0; i < whole; i += kPartials)
		for (int r = 0; r < kGroup; ++r)
			for (int j = 0; j < kPartials; ++j) {
				const float gv = g[r][i + j];
				a1.a[r][j] += static_cast<double>(gv);
				a2.a[r][j] += static_cast<double>(gv * ((x[r][i + j] - mean[r]) * rstd[r]));
			}
	for (int64_t i = whole; i < n; ++i)
		for (int r = 0; r < kGroup; ++r) {
			const float gv = g[r][i];
			a1.a[r][i - whole] += static_cast<double>(gv);
			a2.a[r][i - whole] += static_cast<double>(gv * ((x[r][i] - mean[r]) * rstd[r]));
		}
	double s1[kGroup], s2[kGroup];
	combine_rows(a1, s1);
	combine_rows(a2, s2);
	for (int r = 0; r < grp.n; ++r) {
		const float m1 = static_cast<float>(s1[r] / static_cast<double>(n));
		const float m2 = static_cast<float>(s2[r] / static_cast<double>(n));
		const float *gr = g[r], *xr = x[r], mr = mean[r], rr = rstd[r];
		float *dx = grp.y[r];
		for (int64_t i = 0; i < n; ++i)
			dx[i] = (gr[i] - m1 - (xr[i] - mr) * rr * m2) * rr;
	}
}

// The parameter gradients' sums of one row: sw += go * xhat (f32 product), sb += go.
NK_HOT void param_grad_row(double *sw, double *sb, const float *go, const float *x, int64_t n, float mean, float rstd)
{
	for (int64_t i = 0; i < n; ++i) {
		sw[i] += static_cast<double>(go[i] * ((x[i] - mean) * rstd));
		sb[i] += static_cast<double>(go[i]);
	}
}

// The rows of N operands of the rank of operand `ref` (rows, or statistics with
// size 1 along D): ref's shape with D collapsed to 1, one pointer per operand per row.
template <int N> NdIter<N> row_iter(std::span<const View> v, const int (&ops)[N], int D, int ref = 0)
{
	int64_t shape[NEURON_MAX_DIMS];
	std::copy(v[ref].sizes, v[ref].sizes + NEURON_MAX_DIMS, shape);
	shape[D] = 1;
	const int64_t *strides[N];
	size_t esz[N];
	std::byte *ptrs[N];
	for (int k = 0; k < N; ++k) {
		strides[k] = v[ops[k]].strides;
		esz[k] = dtype_size(v[ops[k]].dtype);
		ptrs[k] = v[ops[k]].data;
	}
	return make_iter<N>(v[ref].ndim, shape, strides, esz, ptrs);
}

// A row of an operand along D: its byte step, and whether it is f32 and contiguous.
struct RowLayout {
	int64_t step;
	uint8_t dtype;
	bool direct() const { return dtype == NEURON_DTYPE_F32 && step == static_cast<int64_t>(sizeof(float)); }
};

RowLayout row_layout(const View &v, int D)
{
	return {v.strides[D] * static_cast<int64_t>(dtype_size(v.dtype)), static_cast<uint8_t>(v.dtype)};
}

// A row as f32: in place when it is f32 and contiguous, else converted into buf.
const float *read_row(const std::byte *p, const RowLayout &l, int64_t n, float *buf)
{
	if (l.direct())
		return reinterpret_cast<const float *>(p);
	load_block<float>(buf, p, l.step, n, l.dtype);
	return buf;
}

// The result rows of a group that went through buffers, stored into out.
void store_group(const Group &grp, const RowLayout &out, int64_t n)
{
	if (out.direct())
		return;
	for (int r = 0; r < grp.n; ++r)
		store_block<float>(grp.out[r], out.step, grp.y[r], n, out.dtype);
}

// Walks rows [b, e) in groups of kGroup: add(group, slot, run pointers, run
// strides, row in the run, the slot's offset in the row buffers) fills a slot,
// process(group) runs a full group, and the last one.
template <int N, class Add, class Process>
void for_each_group(const NdIter<N> &rows, int64_t b, int64_t e, int64_t len, Add &&add, Process &&process)
{
	Group grp;
	for_each_run(rows, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
		for (int64_t r = 0; r < n; ++r) {
			const int k = grp.n++;
			add(grp, k, p, s, r, static_cast<size_t>(k) * static_cast<size_t>(len));
			if (grp.n == kGroup) {
				process(grp);
				grp.n = 0;
			}
		}
	});
	if (grp.n)
		process(grp);
}

// A thread's buffers, kept across commands: a group's rows (x, go, the result,
// go * weight) and the weight and bias as f32.
struct RowBuffers {
	std::vector<float> x, g, y, gw, w, b;
};

// Runs body(buffers, weight, bias, first row, end row) on the threads, each with
// its buffers sized for a group of `len`-long rows (weight and bias converted once
// per thread; nullptr when absent); a fault if the host has no memory for them.
template <class Body>
Result on_row_ranges(std::span<const View> v, int64_t rows, int64_t len, int param_first, int max_threads,
		     const char *name, Body &&body)
{
	const int nt = static_cast<int>(std::min<int64_t>(threads_for(rows * len, kElementwiseGrain, max_threads), rows));
	const bool has_w = static_cast<int>(v.size()) > param_first, has_b = static_cast<int>(v.size()) > param_first + 1;
	bool oom = false;
	parallel_ranges(rows, nt, [&](int64_t b, int64_t e, int) {
		thread_local RowBuffers buf;
		try {
			const size_t rows_len = static_cast<size_t>(len) * kGroup;
			for (auto *vec : {&buf.x, &buf.g, &buf.y, &buf.gw})
				if (vec->size() < rows_len)
					vec->resize(rows_len);
			for (auto *vec : {&buf.w, &buf.b})
				if (vec->size() < static_cast<size_t>(len))
					vec->resize(static_cast<size_t>(len));
		} catch (const std::bad_alloc &) {
#pragma omp atomic write
			oom = true;
			return;
		}
		auto load_param = [&](const View &p, std::vector<float> &dst) {
			load_block<float>(dst.data(), p.data, p.strides[0] * static_cast<int64_t>(dtype_size(p.dtype)), len, p.dtype);
			return dst.data();
		};
		const float *w = has_w ? load_param(v[param_first], buf.w) : nullptr;
		const float *bias = has_b ? load_param(v[param_first + 1], buf.b) : nullptr;
		body(buf, w, bias, b, e);
	});
	if (oom)
		return exec_fault(std::string(name) + ": out of host memory for a row buffer");
	return std::nullopt;
}

} // namespace

Result run_layer_norm(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int D = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = v[0].sizes[D];
	const double eps = cmd.fscalars.f[0];
	const auto rows = row_iter<4>(v, {0, 1, 2, 3}, D); // out, mean, rstd, in
	if (rows.numel == 0)
		return std::nullopt; // (rows of length 0 get NaN statistics: 0 / 0)
	const RowLayout out_l = row_layout(v[0], D), in_l = row_layout(v[3], D);
	return on_row_ranges(v, rows.numel, len, 4, max_threads, "layer_norm",
			     [&](RowBuffers &buf, const float *w, const float *bias, int64_t b, int64_t e) {
		for_each_group(rows, b, e, len, [&](Group &grp, int k, std::byte *const *p, const int64_t *s, int64_t r, size_t at) {
			grp.x[k] = read_row(p[3] + r * s[3], in_l, len, buf.x.data() + at);
			grp.out[k] = p[0] + r * s[0];
			grp.y[k] = out_l.direct() ? reinterpret_cast<float *>(grp.out[k]) : buf.y.data() + at;
			grp.mean[k] = reinterpret_cast<float *>(p[1] + r * s[1]);
			grp.rstd[k] = reinterpret_cast<float *>(p[2] + r * s[2]);
		}, [&](const Group &grp) {
			group_forward(grp, len, eps, w, bias);
			store_group(grp, out_l, len);
		});
	});
}

Result run_layer_norm_backward(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int D = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = v[0].sizes[D];
	const auto rows = row_iter<5>(v, {0, 1, 2, 3, 4}, D); // dx, go, in, mean, rstd
	if (rows.numel == 0 || len == 0)
		return std::nullopt;
	const RowLayout dx_l = row_layout(v[0], D), go_l = row_layout(v[1], D), in_l = row_layout(v[2], D);
	return on_row_ranges(v, rows.numel, len, 5, max_threads, "layer_norm_backward",
			     [&](RowBuffers &buf, const float *w, const float *, int64_t b, int64_t e) {
		for_each_group(rows, b, e, len, [&](Group &grp, int k, std::byte *const *p, const int64_t *s, int64_t r, size_t at) {
			grp.g[k] = read_row(p[1] + r * s[1], go_l, len, buf.g.data() + at);
			grp.x[k] = read_row(p[2] + r * s[2], in_l, len, buf.x.data() + at);
			grp.mean[k] = reinterpret_cast<float *>(p[3] + r * s[3]);
			grp.rstd[k] = reinterpret_cast<float *>(p[4] + r * s[4]);
			grp.out[k] = p[0] + r * s[0];
			grp.y[k] = dx_l.direct() ? reinterpret_cast<float *>(grp.out[k]) : buf.y.data() + at;
		}, [&](const Group &grp) {
			group_backward(grp, len, w, buf.gw.data());
			store_group(grp, dx_l, len);
		});
	});
}

// Rows are summed in this many chunks, each into its own double partials, then
// the chunks in order: the result does not depend on the thread count.
constexpr int64_t kParamGradChunks = 8;

Result run_layer_norm_param_grad(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int D = static_cast<int>(cmd.iscalars[0]);
	const int64_t len = v[3].sizes[D];
	const bool accumulate = cmd.iscalars[1] & NEURON_LN_ACCUMULATE;
	const auto rows = row_iter<4>(v, {2, 3, 4, 5}, D, 3); // go, in, mean, rstd
	if (len == 0)
		return std::nullopt;
	const int64_t chunks = std::min(kParamGradChunks, rows.numel);
	std::vector<double> part;
	try {
		part.assign(static_cast<size_t>(std::max<int64_t>(chunks, 1) * 2 * len), 0.0);
	} catch (const std::bad_alloc &) {
		return exec_fault("layer_norm_param_grad: out of host memory for the partial sums");
	}
	const RowLayout go_l = row_layout(v[2], D), in_l = row_layout(v[3], D);
	bool oom = false;
	if (chunks > 0) {
		const int nt = static_cast<int>(
			std::min<int64_t>(threads_for(rows.numel * len, kElementwiseGrain, max_threads), chunks));
		parallel_ranges(chunks, nt, [&](int64_t cb, int64_t ce, int) {
			thread_local RowBuffers buf;
			try {
				for (auto *vec : {&buf.x, &buf.g})
					if (vec->size() < static_cast<size_t>(len))
						vec->resize(static_cast<size_t>(len));
			} catch (const std::bad_alloc &) {
#pragma omp atomic write
				oom = true;
				return;
			}
			for (int64_t c = cb; c < ce; ++c) {
				double *sw = part.data() + c * 2 * len, *sb = sw + len;
				for_each_run(rows, c * rows.numel / chunks, (c + 1) * rows.numel / chunks,
					     [&](std::byte *const *p, const int64_t *s, int64_t n) {
					for (int64_t r = 0; r < n; ++r) {
						const float *go = read_row(p[0] + r * s[0], go_l, len, buf.g.data());
						const float *x = read_row(p[1] + r * s[1], in_l, len, buf.x.data());
						param_grad_row(sw, sb, go, x, len, *reinterpret_cast<const float *>(p[2] + r * s[2]),
							       *reinterpret_cast<const float *>(p[3] + r * s[3]));
					}
				});
			}
		});
	}
	if (oom)
		return exec_fault("layer_norm_param_grad: out of host memory for a row buffer");
	const int64_t wstep = v[0].strides[0], bstep = v[1].strides[0];
	float *dw = reinterpret_cast<float *>(v[0].data), *db = reinterpret_cast<float *>(v[1].data);
	for (int64_t j = 0; j < len; ++j) {
		double w = 0, b = 0;
		for (int64_t c = 0; c < chunks; ++c) {
			w += part[static_cast<size_t>(c * 2 * len + j)];
			b += part[static_cast<size_t>(c * 2 * len + len + j)];
		}
		float &wj = dw[j * wstep], &bj = db[j * bstep];
		wj = accumulate ? wj + static_cast<float>(w) : static_cast<float>(w);
		bj = accumulate ? bj + static_cast<float>(b) : static_cast<float>(b);
	}
	return std::nullopt;
}

} // namespace neuron::kernels::detail
