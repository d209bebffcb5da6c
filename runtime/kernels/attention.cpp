// ISA 1.4 ATTENTION: fused scaled dot-product attention, the flash-attention
// forward on the host: for a block of query rows, the keys are visited once in
// blocks; each block's scores come from one GEMM, are masked, and fold into the
// rows' running maximum, sum of exponentials and weighted sum of values (the
// online softmax), so the [L, S] score matrix never exists whole.
//
// Math in f32 (scores, exponentials, the weighted sums); operands of any floating
// dtype and strides are packed into f32 blocks. A row that sees no key gets out 0
// and lse -inf, as PyTorch's math path (its safe softmax). Work items are (batch
// position, block of rows); threads split them.
#include "batch.h"
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"
#include "vmath.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <new>
#include <vector>

namespace neuron::kernels::detail {

namespace {

constexpr int64_t kRowBlock = 64, kKeyBlock = 256;

struct Geometry {
	int64_t L, S, E, Ev;
	float scale;
	bool causal;
	int64_t diag; // causal: key j is visible to row i iff j <= i + diag
	bool bool_mask;
};

// The six operands' base pointers at one position of the leading dims.
struct Batch {
	std::byte *p[6];
	Batch(const BatchBases &b) { std::copy(b.begin(), b.begin() + 6, p); }
};

// Row r of a [rows, cols] matrix view (the last two dims of operand v).
const std::byte *at(const View &v, const std::byte *base, int64_t r, int64_t c)
{
	const int n = v.ndim;
	return base + (r * v.strides[n - 2] + c * v.strides[n - 1]) * static_cast<int64_t>(dtype_size(v.dtype));
}

// Packs rows [r0, r0 + nr) x cols [0, nc) of a matrix view into dst (row-major, ld nc).
void pack(float *dst, const View &v, const std::byte *base, int64_t r0, int64_t nr, int64_t nc, float mul = 1.0f)
{
	const int64_t cs = v.strides[v.ndim - 1] * static_cast<int64_t>(dtype_size(v.dtype));
	for (int64_t r = 0; r < nr; ++r) {
		float *row = dst + r * nc;
		for (int64_t c = 0; c < nc; c += kBlock)
			load_block<float>(row + c, at(v, base, r0 + r, c), cs, std::min(kBlock, nc - c), v.dtype);
		if (mul != 1.0f)
			for (int64_t c = 0; c < nc; ++c)
				row[c] *= mul;
	}
}

// A block of rows sgemm reads: in place when the view is f32 with contiguous rows
// (packing was a fifth of a small attention's time), else packed into buf.
struct BlasRows {
	const float *p;
	int ld;
};

BlasRows blas_rows(std::vector<float> &buf, const View &v, const std::byte *base, int64_t r0, int64_t nr, int64_t nc)
{
	const int n = v.ndim;
	const int64_t rs = v.strides[n - 2];
	if (v.dtype == NEURON_DTYPE_F32 && (nc <= 1 || v.strides[n - 1] == 1) && rs >= std::max<int64_t>(1, nc) &&
	    rs <= INT_MAX)
		return {reinterpret_cast<const float *>(at(v, base, r0, 0)), static_cast<int>(rs)};
	pack(buf.data(), v, base, r0, nr, nc);
	return {buf.data(), static_cast<int>(std::max<int64_t>(1, nc))};
}

struct Scratch {
	std::vector<float> q, k, v, s, acc, m, l, mask, m_new, sum;
};

// Adds the mask and the causal limit of key block [c0, c0 + nc) to the scores of
// rows [r0, r0 + nr) (s: nr x nc).
void apply_mask(float *s, const Geometry &g, const View &mv, const std::byte *mbase, int64_t r0, int64_t nr, int64_t c0,
		int64_t nc, float *tmp)
{
	const int nd = mv.ndim;
	const int64_t cs = mv.strides[nd - 1] * static_cast<int64_t>(dtype_size(mv.dtype));
	// One value for the whole matrix: no mask is a broadcast zero from the plugin,
	// which changes no score (nor does a broadcast true), so it is not added.
	const bool constant = mv.strides[nd - 1] == 0 && mv.strides[nd - 2] == 0;
	bool keep_scores = false;
	if (constant) {
		load_block<float>(tmp, mbase, 0, 1, mv.dtype);
		keep_scores = g.bool_mask ? tmp[0] != 0.0f : tmp[0] == 0.0f;
		std::fill(tmp + 1, tmp + nc, tmp[0]);
	}
	for (int64_t r = 0; r < nr; ++r) {
		float *row = s + r * nc;
		if (!constant)
			load_block<float>(tmp, at(mv, mbase, r0 + r, c0), cs, nc, mv.dtype);
		if (!keep_scores && g.bool_mask)
			for (int64_t c = 0; c < nc; ++c)
				row[c] = tmp[c] != 0.0f ? row[c] : -INFINITY;
		else if (!keep_scores)
			for (int64_t c = 0; c < nc; ++c)
				row[c] += tmp[c];
		if (g.causal) {
			const int64_t last = r0 + r + g.diag; // last visible key
			for (int64_t c = std::max<int64_t>(last + 1 - c0, 0); c < nc; ++c)
				row[c] = -INFINITY;
		}
	}
}

// One block's softmax step, in the clone for this CPU: each row's new running
// maximum (NaN scores ignored, as `x > m ? x : m` does), then the scores become
// exp(score - max) (rows that see no key yet: 0) and each row's sum of them is
// returned in sum[r]. libm's expf is a scalar call: it and its loop were half of a
// small attention's time (8 x 4 heads x 32 x 32 x 16); so is a row at a time (32
// floats give the exp polynomial too few independent vectors), hence whole-block
// passes. Maxima and sums keep 8 partials, each in order: every clone gives the
// same bits.
NK_HOT void exp_block(float *s, int64_t nr, int64_t nc, const float *m_old, float *m_new, float *sum)
{
	constexpr int W = 8;
	for (int64_t r = 0; r < nr; ++r) {
		const float *row = s + r * nc;
		float part[W];
		std::fill(part, part + W, m_old[r]);
		int64_t c = 0;
		for (; c + W <= nc; c += W)
			for (int j = 0; j < W; ++j)
				part[j] = row[c + j] > part[j] ? row[c + j] : part[j];
		for (int j = 0; c < nc; ++c, ++j)
			part[j] = row[c] > part[j] ? row[c] : part[j];
		float mx = part[0];
		for (int j = 1; j < W; ++j)
			mx = part[j] > mx ? part[j] : mx;
		m_new[r] = mx;
	}
	for (int64_t r = 0; r < nr; ++r) {
		float *row = s + r * nc;
		// A row with nothing visible yet: exp(-inf - -inf) would be NaN.
		const float mx = m_new[r] == -INFINITY ? INFINITY : m_new[r];
		for (int64_t c = 0; c < nc; ++c)
			row[c] = exp_f32(row[c] - mx);
	}
	for (int64_t r = 0; r < nr; ++r) {
		const float *row = s + r * nc;
		float part[W] = {};
		int64_t c = 0;
		for (; c + W <= nc; c += W)
			for (int j = 0; j < W; ++j)
				part[j] += row[c + j];
		for (int j = 0; c < nc; ++c, ++j)
			part[j] += row[c];
		sum[r] = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
	}
}

// Folds one block of scores (nr x nc, overwritten by the probabilities) into the
// running max m, sum l and weighted values acc (nr x Ev).
void online_softmax(float *s, float *m, float *l, float *acc, BlasRows vb, int64_t nr, int64_t nc, int64_t Ev,
		    float *m_new, float *sum)
{
	exp_block(s, nr, nc, m, m_new, sum);
	for (int64_t r = 0; r < nr; ++r) {
		const float mx = m_new[r];
		if (mx == -INFINITY) { // nothing visible yet (a NaN score among -inf too): contributes nothing
			std::fill(s + r * nc, s + (r + 1) * nc, 0.0f);
			continue;
		}
		const float corr = m[r] == -INFINITY ? 0.0f : exp_f32(m[r] - mx);
		l[r] = l[r] * corr + sum[r];
		m[r] = mx;
		if (corr != 1.0f)
			for (int64_t e = 0; e < Ev; ++e)
				acc[r * Ev + e] *= corr;
	}
	if (Ev == 0)
		return;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nr), static_cast<int>(Ev),
		    static_cast<int>(nc), 1.0f, s, static_cast<int>(nc), vb.p, vb.ld, 1.0f, acc,
		    static_cast<int>(Ev));
}

void store_rows(const View &out, std::byte *obase, const View &lse, std::byte *lbase, const Scratch &sc, int64_t r0,
		int64_t nr, int64_t Ev)
{
	const int64_t ocs = out.strides[out.ndim - 1] * static_cast<int64_t>(dtype_size(out.dtype));
	const int64_t lstep = lse.strides[lse.ndim - 1] * static_cast<int64_t>(sizeof(float));
	std::vector<float> row(static_cast<size_t>(Ev));
	for (int64_t r = 0; r < nr; ++r) {
		const float l = sc.l[static_cast<size_t>(r)];
		const float inv = l > 0 ? 1.0f / l : 0.0f;
		for (int64_t e = 0; e < Ev; ++e)
			row[static_cast<size_t>(e)] = sc.acc[static_cast<size_t>(r * Ev + e)] * inv;
		std::byte *o = const_cast<std::byte *>(at(out, obase, r0 + r, 0));
		for (int64_t e = 0; e < Ev; e += kBlock)
			store_block<float>(o + e * ocs, ocs, row.data() + e, std::min(kBlock, Ev - e), out.dtype);
		const float lse_v = l > 0 ? sc.m[static_cast<size_t>(r)] + std::log(l) : -INFINITY;
		st<float>(lbase + (r0 + r) * lstep, lse_v);
	}
}

void attend_rows(std::span<const View> v, const Geometry &g, const Batch &b, int64_t r0, int64_t nr, Scratch &sc)
{
	const View &out = v[0], &lse = v[1], &q = v[2], &k = v[3], &val = v[4], &mask = v[5];
	const int64_t E = g.E, Ev = g.Ev;
	sc.q.resize(static_cast<size_t>(nr * E));
	sc.acc.assign(static_cast<size_t>(nr * Ev), 0.0f);
	sc.m.assign(static_cast<size_t>(nr), -INFINITY);
	sc.l.assign(static_cast<size_t>(nr), 0.0f);
	sc.m_new.resize(static_cast<size_t>(nr));
	sc.sum.resize(static_cast<size_t>(nr));
	sc.k.resize(static_cast<size_t>(kKeyBlock * E));
	sc.v.resize(static_cast<size_t>(kKeyBlock * Ev));
	sc.s.resize(static_cast<size_t>(nr * kKeyBlock));
	sc.mask.resize(static_cast<size_t>(kKeyBlock));
	pack(sc.q.data(), q, b.p[2], r0, nr, E, g.scale);
	// Causal: keys past the block's last row's limit are never visible.
	const int64_t S_end = g.causal ? std::clamp<int64_t>(r0 + nr + g.diag, 0, g.S) : g.S;
	for (int64_t c0 = 0; c0 < S_end; c0 += kKeyBlock) {
		const int64_t nc = std::min(kKeyBlock, S_end - c0);
		const BlasRows kb = blas_rows(sc.k, k, b.p[3], c0, nc, E), vb = blas_rows(sc.v, val, b.p[4], c0, nc, Ev);
		if (E > 0)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nr), static_cast<int>(nc),
				    static_cast<int>(E), 1.0f, sc.q.data(), static_cast<int>(E), kb.p, kb.ld, 0.0f,
				    sc.s.data(), static_cast<int>(nc));
		else
			std::fill(sc.s.begin(), sc.s.begin() + nr * nc, 0.0f);
		apply_mask(sc.s.data(), g, mask, b.p[5], r0, nr, c0, nc, sc.mask.data());
		online_softmax(sc.s.data(), sc.m.data(), sc.l.data(), sc.acc.data(), vb, nr, nc, Ev, sc.m_new.data(),
			       sc.sum.data());
	}
	store_rows(out, b.p[0], lse, b.p[1], sc, r0, nr, Ev);
}

} // namespace

Result run_attention(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const int n = v[0].ndim;
	Geometry g{};
	g.L = v[0].sizes[n - 2], g.Ev = v[0].sizes[n - 1], g.E = v[2].sizes[n - 1], g.S = v[3].sizes[n - 2];
	g.scale = static_cast<float>(cmd.fscalars.f[0]);
	g.causal = (cmd.iscalars[0] & NEURON_ATTENTION_CAUSAL) != 0;
	g.diag = g.causal ? cmd.iscalars[1] : 0;
	g.bool_mask = v[5].dtype == NEURON_DTYPE_BOOL;
	if (g.L == 0)
		return std::nullopt;
	prepare_blas();
	std::vector<Batch> bs;
	try {
		for (const BatchBases &b : batch_bases(v, v[0].ndim - 2))
			bs.emplace_back(b);
	} catch (const std::bad_alloc &) {
		return exec_fault("attention: out of host memory");
	}
	if (bs.empty())
		return std::nullopt;
	const int64_t row_blocks = (g.L + kRowBlock - 1) / kRowBlock;
	const int64_t items = static_cast<int64_t>(bs.size()) * row_blocks;
	const int64_t work = items * kRowBlock * std::max<int64_t>(g.S, 1) * (g.E + g.Ev + 1);
	const int nt = static_cast<int>(std::min<int64_t>(threads_for(work, int64_t{1} << 24, max_threads), items));
	bool oom = false;
	parallel_ranges(items, nt, [&](int64_t b, int64_t e, int) {
		Scratch sc;
		try {
			for (int64_t it = b; it < e; ++it) {
				const int64_t r0 = (it % row_blocks) * kRowBlock;
				attend_rows(v, g, bs[static_cast<size_t>(it / row_blocks)], r0, std::min(kRowBlock, g.L - r0), sc);
			}
		} catch (const std::bad_alloc &) {
#pragma omp atomic write
			oom = true;
		}
	});
	if (oom)
		return exec_fault("attention: out of host memory for a block of scores");
	return std::nullopt;
}

} // namespace neuron::kernels::detail
