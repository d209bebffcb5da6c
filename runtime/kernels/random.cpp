// ISA 1.4 random ops: RNG, DROPOUT, RANDPERM, MULTINOMIAL (cmd.h).
//
// Every number comes from Philox4x32-10 at (seed i[1], offset i[2], position P)
// (philox.h), so a result depends only on those, never on the tiles the chip
// cut the command into or on how many threads ran it. A command writes the
// positions [bits[2], bits[3]) (end 0: all): the chip's tiles narrow that range
// instead of the operands, so positions stay those of the whole command.
#include "block.h"
#include "ops.h"
#include "parallel.h"
#include "philox.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace neuron::kernels::detail {

namespace {

struct Range {
	uint64_t begin, end;
};

uint64_t numel_of(const View &v)
{
	uint64_t n = 1;
	for (int i = 0; i < v.ndim; ++i)
		n *= static_cast<uint64_t>(v.sizes[i]);
	return n;
}

Range positions(const neuron_cmd &cmd, uint64_t count)
{
	const uint64_t end = cmd.fscalars.bits[3] == 0 ? count : std::min(cmd.fscalars.bits[3], count);
	return {std::min(cmd.fscalars.bits[2], end), end};
}

// Calls f(P, ptrs) for the positions P in [b, e) of the row-major order of
// v[0]'s shape; ptrs[k] is that element's address in operand k (the operands
// share one shape).
template <int N, class F> void walk_positions(const View *const (&v)[N], uint64_t b, uint64_t e, F &&f)
{
	// An empty range may come with a zero-sized dimension: nothing to walk,
	// and the coordinate split below would divide by zero.
	if (b >= e)
		return;
	const int nd = v[0]->ndim;
	const int64_t *size = v[0]->sizes;
	int64_t coord[NEURON_MAX_DIMS] = {};
	int64_t step[N][NEURON_MAX_DIMS];
	std::byte *p[N];
	uint64_t rem = b;
	for (int i = nd - 1; i >= 0; --i) {
		coord[i] = static_cast<int64_t>(rem % static_cast<uint64_t>(size[i]));
		rem /= static_cast<uint64_t>(size[i]);
	}
	for (int k = 0; k < N; ++k) {
		p[k] = v[k]->data;
		for (int i = 0; i < nd; ++i) {
			step[k][i] = v[k]->strides[i] * static_cast<int64_t>(dtype_size(v[k]->dtype));
			p[k] += coord[i] * step[k][i];
		}
	}
	for (uint64_t pos = b; pos < e; ++pos) {
		f(pos, p);
		for (int i = nd - 1; i >= 0; --i) {
			const bool wrap = ++coord[i] == size[i];
			for (int k = 0; k < N; ++k)
				p[k] += wrap ? -(size[i] - 1) * step[k][i] : step[k][i];
			if (!wrap)
				break;
			coord[i] = 0;
		}
	}
}

// walk_positions over [r.begin, r.end), split among threads.
template <int N, class F> void walk_parallel(const View *const (&v)[N], Range r, int max_threads, F &&f)
{
	const int64_t count = static_cast<int64_t>(r.end - r.begin);
	const int nt = threads_for(count, kElementwiseGrain / 8, max_threads);
	parallel_ranges(count, nt, [&](int64_t b, int64_t e, int) {
		walk_positions<N>(v, r.begin + static_cast<uint64_t>(b), r.begin + static_cast<uint64_t>(e), f);
	});
}

struct Key {
	uint64_t seed, offset;
	explicit Key(const neuron_cmd &cmd)
		: seed(static_cast<uint64_t>(cmd.iscalars[1])), offset(static_cast<uint64_t>(cmd.iscalars[2]))
	{
	}
	PhiloxWords at(uint64_t pos) const { return philox_at(seed, offset, pos); }
};

// UNIFORM, stored in S; a value that rounds up to `to` becomes `from`.
template <class S> S uniform_value(const PhiloxWords &w, double from, double to)
{
	const S v = from_float<S>(static_cast<float>(from + (to - from) * unit_u24(w[0])));
	return to > from && to_float(v) >= to ? from_float<S>(static_cast<float>(from)) : v;
}

double normal_value(const PhiloxWords &w, double mean, double std)
{
	const double radius = std::sqrt(-2.0 * std::log(1.0 - unit_u32(w[0])));
	return mean + std * radius * std::cos(2.0 * M_PI * unit_u32(w[1]));
}

} // namespace

Result run_rng(const neuron_cmd &cmd, const View &out, int max_threads)
{
	const Key key(cmd);
	const Range r = positions(cmd, numel_of(out));
	const View *v[1] = {&out};
	const double f0 = cmd.fscalars.f[0], f1 = cmd.fscalars.f[1];
	const int64_t dist = cmd.iscalars[0];
	with_dtype(out.dtype, [&](auto tag) {
		using S = decltype(tag);
		auto store = [&](auto value_of) {
			walk_parallel<1>(v, r, max_threads, [&](uint64_t pos, std::byte *const *p) { st<S>(p[0], value_of(key.at(pos))); });
		};
		switch (dist) {
		case NEURON_RNG_UNIFORM:
			store([&](const PhiloxWords &w) { return uniform_value<S>(w, f0, f1); });
			break;
		case NEURON_RNG_NORMAL:
			store([&](const PhiloxWords &w) { return from_float<S>(static_cast<float>(normal_value(w, f0, f1))); });
			break;
		case NEURON_RNG_BERNOULLI:
			store([&](const PhiloxWords &w) { return from_i64<S>(unit_u32(w[0]) < f0 ? 1 : 0); });
			break;
		default: {
			const uint64_t from = cmd.fscalars.bits[0], range = cmd.fscalars.bits[1];
			store([&](const PhiloxWords &w) {
				const uint64_t bits = uint64_t{w[0]} | uint64_t{w[1]} << 32;
				return from_i64<S>(static_cast<int64_t>(from + (range ? bits % range : bits)));
			});
		}
		}
	});
	return std::nullopt;
}

Result run_dropout(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const Key key(cmd);
	const Range r = positions(cmd, numel_of(v[0]));
	const View *ops[3] = {&v[0], &v[1], &v[2]};
	const float scale = static_cast<float>(cmd.fscalars.f[0]);
	const double keep = cmd.fscalars.f[1];
	with_dtype(v[0].dtype, [&](auto tag) {
		using S = decltype(tag);
		walk_parallel<3>(ops, r, max_threads, [&](uint64_t pos, std::byte *const *p) {
			const bool kept = unit_u32(key.at(pos)[0]) < keep;
			st<bool_t>(p[1], bool_t{static_cast<uint8_t>(kept)});
			st<S>(p[0], from_float<S>(kept ? to_float(ld<S>(p[2])) * scale : 0.0f));
		});
	});
	return std::nullopt;
}

Result run_randperm(const neuron_cmd &cmd, const View &out, int)
{
	const Key key(cmd);
	const Range r = positions(cmd, static_cast<uint64_t>(out.sizes[0]));
	const int64_t stride = out.strides[0] * static_cast<int64_t>(dtype_size(out.dtype));
	with_dtype(out.dtype, [&](auto tag) {
		using S = decltype(tag);
		auto at = [&](uint64_t i) { return out.data + static_cast<int64_t>(i) * stride; };
		for (uint64_t pos = r.begin; pos < r.end; ++pos) {
			const PhiloxWords w = key.at(pos);
			const uint64_t bits = uint64_t{w[0]} | uint64_t{w[1]} << 32;
			const uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(pos + 1) * bits) >> 64);
			if (j != pos)
				st<S>(at(pos), ld<S>(at(j)));
			st<S>(at(j), from_i64<S>(static_cast<int64_t>(pos)));
		}
	});
	return std::nullopt;
}

namespace {

// One row of MULTINOMIAL: weights w (C of them) -> S categories into out.
struct MultinomialRow {
	const Key &key;
	uint64_t row;
	std::vector<double> &w;
	int64_t samples;

	std::optional<std::string> validate(bool replacement) const
	{
		double sum = 0;
		int64_t positive = 0;
		for (double x : w) {
			if (!std::isfinite(x) || x < 0)
				return "a negative, infinite or NaN weight";
			sum += x;
			positive += x > 0;
		}
		if (!(sum > 0))
			return "weights that sum to zero";
		if (!replacement && positive < samples)
			return std::to_string(positive) + " positive weights for " + std::to_string(samples) +
			       " samples without replacement";
		return std::nullopt;
	}

	void with_replacement(int64_t *idx) const
	{
		std::vector<double> cdf(w.size());
		std::partial_sum(w.begin(), w.end(), cdf.begin());
		const double total = cdf.back();
		for (int64_t s = 0; s < samples; ++s) {
			const double target = unit_u32(key.at(row * static_cast<uint64_t>(samples) + static_cast<uint64_t>(s))[0]) * total;
			const auto it = std::upper_bound(cdf.begin(), cdf.end(), target);
			idx[s] = std::min<int64_t>(it - cdf.begin(), static_cast<int64_t>(w.size()) - 1);
		}
	}

	void without_replacement(int64_t *idx) const
	{
		const uint64_t c = w.size();
		std::vector<double> keys(c);
		std::vector<int64_t> order(c);
		for (uint64_t i = 0; i < c; ++i) {
			const double e = -std::log(1.0 - unit_u32(key.at(row * c + i)[0]));
			keys[i] = w[i] > 0 ? w[i] / e : -1.0;
			order[i] = static_cast<int64_t>(i);
		}
		std::partial_sort(order.begin(), order.begin() + samples, order.end(), [&](int64_t a, int64_t b) {
			return keys[a] > keys[b] || (keys[a] == keys[b] && a < b);
		});
		std::copy(order.begin(), order.begin() + samples, idx);
	}
};

} // namespace

Result run_multinomial(const neuron_cmd &cmd, std::span<const View> v, int)
{
	const Key key(cmd);
	const View &out = v[0], &probs = v[1];
	const bool two_d = probs.ndim == 2;
	const uint64_t rows = two_d ? static_cast<uint64_t>(probs.sizes[0]) : 1;
	const int64_t cats = probs.sizes[probs.ndim - 1], samples = out.sizes[out.ndim - 1];
	const int64_t pr = two_d ? probs.strides[0] : 0, pc = probs.strides[probs.ndim - 1];
	const int64_t orow = two_d ? out.strides[0] : 0, ocol = out.strides[out.ndim - 1];
	const size_t pes = dtype_size(probs.dtype);
	const bool replacement = cmd.iscalars[0] == 1;
	const Range r = positions(cmd, rows);
	std::vector<double> w(static_cast<size_t>(cats));
	std::vector<int64_t> idx(static_cast<size_t>(samples));
	for (uint64_t row = r.begin; row < r.end && samples > 0; ++row) {
		const std::byte *src = probs.data + static_cast<int64_t>(row) * pr * static_cast<int64_t>(pes);
		for (int64_t c = 0; c < cats; ++c)
			load_block<double>(&w[static_cast<size_t>(c)], src + c * pc * static_cast<int64_t>(pes), 0, 1, probs.dtype);
		MultinomialRow mr{key, row, w, samples};
		if (auto why = mr.validate(replacement))
			return exec_fault("multinomial: row " + std::to_string(row) + " of probs has " + *why);
		replacement ? mr.with_replacement(idx.data()) : mr.without_replacement(idx.data());
		std::byte *dst = out.data + static_cast<int64_t>(row) * orow * 8;
		for (int64_t s = 0; s < samples; ++s)
			st<int64_t>(dst + s * ocol * 8, idx[static_cast<size_t>(s)]);
	}
	return std::nullopt;
}

} // namespace neuron::kernels::detail
