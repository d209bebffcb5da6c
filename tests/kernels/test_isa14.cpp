// ISA 1.4 (cmd.h, opcodes 64..71): Philox4x32-10 against the published
// known-answer vectors (Random123's kat_vectors, from the SC'11 paper); RNG,
// DROPOUT, RANDPERM and MULTINOMIAL against references computed here from the
// counters cmd.h defines (position P -> Philox words), on strided views, and
// their distributions (mean, variance, Kolmogorov-Smirnov, frequencies); a
// command cut into position ranges gives the whole command's result; AMP_UNSCALE
// and AMP_UPDATE_SCALE against PyTorch's rules; TIMESTAMP against the clock;
// and the rejections.
#include "ref.h"

#include "philox.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <numeric>
#include <set>

using namespace ref;
using neuron::kernels::philox4x32_10;
using neuron::kernels::philox_at;

namespace {

neuron_cmd rng_cmd(const Tensor &out, int dist, double f0, double f1, uint64_t seed, uint64_t offset)
{
	auto c = make_cmd(NEURON_OP_RNG, {&out});
	c.iscalars[0] = dist;
	c.iscalars[1] = static_cast<int64_t>(seed);
	c.iscalars[2] = static_cast<int64_t>(offset);
	c.fscalars.f[0] = f0;
	c.fscalars.f[1] = f1;
	return c;
}

std::vector<double> values(const Tensor &t)
{
	std::vector<double> v;
	t.each([&](const int64_t *i) { v.push_back(t.get(i)); });
	return v;
}

void rejected(const neuron_cmd &c, const char *needle)
{
	const auto f = neuron::kernels::check_semantics(c);
	cr_assert(f, "accepted: expected a fault mentioning '%s'", needle);
	cr_assert(f->message.find(needle) != std::string::npos, "'%s' lacks '%s'", f->message.c_str(), needle);
}

// Kolmogorov-Smirnov statistic of samples against a CDF.
double ks_statistic(std::vector<double> x, const std::function<double(double)> &cdf)
{
	std::sort(x.begin(), x.end());
	double d = 0;
	const double n = static_cast<double>(x.size());
	for (size_t i = 0; i < x.size(); ++i) {
		const double f = cdf(x[i]);
		d = std::max({d, f - i / n, (i + 1) / n - f});
	}
	return d;
}

} // namespace

Test(isa14, philox_known_answers)
{
	struct Kat {
		neuron::kernels::PhiloxWords ctr;
		uint32_t k0, k1;
		neuron::kernels::PhiloxWords out;
	} kats[] = {
		{{0, 0, 0, 0}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff,
		 {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0,
		 {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	};
	for (const Kat &k : kats)
		cr_assert(philox4x32_10(k.ctr, k.k0, k.k1) == k.out, "Philox4x32-10 known answer");
	// Position and offset map to the counter words as cmd.h says.
	const auto w = philox_at(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
	cr_assert(w == kats[2].out);
}

// Each element of a transposed/sliced output gets the words of its row-major
// position, whatever the strides; every dtype, both range forms.
Test(isa14, rng_values_follow_positions_on_strided_views)
{
	const uint64_t seed = 0x1234567890abcdefull, offset = 7;
	for (int dt : kFloatDtypes) {
		const Tensor out = Tensor::make(dt, {9, 14}).transpose(0, 1).slice(0, 1, 13, 2); // 6 x 9
		run(rng_cmd(out, NEURON_RNG_UNIFORM, -3, 5, seed, offset), {&out});
		int64_t pos = 0;
		out.each([&](const int64_t *i) {
			const auto w = philox_at(seed, offset, static_cast<uint64_t>(pos++));
			double v = quantize(dt, -3.0 + 8.0 * static_cast<float>((w[0] >> 8) * 0x1p-24));
			if (v >= 5)
				v = -3;
			cr_assert(out.get(i) == v, "%s uniform at position %lld: %g vs %g", dname(dt), (long long)pos - 1,
				  out.get(i), v);
		});
		run(rng_cmd(out, NEURON_RNG_NORMAL, 1.5, 2, seed, offset), {&out});
		pos = 0;
		out.each([&](const int64_t *i) {
			const auto w = philox_at(seed, offset, static_cast<uint64_t>(pos++));
			const double z = std::sqrt(-2 * std::log(1 - w[0] * 0x1p-32)) * std::cos(2 * M_PI * (w[1] * 0x1p-32));
			const double v = quantize(dt, 1.5 + 2 * z);
			cr_assert(std::fabs(out.get(i) - v) <= 1e-6 * (1 + std::fabs(v)) + (dt == NEURON_DTYPE_F32 ? 0 : 2e-2 * std::fabs(v)),
				  "%s normal: %g vs %g", dname(dt), out.get(i), v);
		});
	}
	for (int dt : kAllDtypes) {
		const Tensor out = Tensor::make(dt, {5, 7}).transpose(0, 1);
		run(rng_cmd(out, NEURON_RNG_BERNOULLI, 0.3, 0, seed, offset), {&out});
		int64_t pos = 0;
		out.each([&](const int64_t *i) {
			const auto w = philox_at(seed, offset, static_cast<uint64_t>(pos++));
			cr_assert(out.get(i) == (w[0] * 0x1p-32 < 0.3 ? 1.0 : 0.0), "%s bernoulli", dname(dt));
		});
		if (dt == NEURON_DTYPE_BOOL)
			continue;
		auto ints = rng_cmd(out, NEURON_RNG_INTEGER, 0, 0, seed, offset);
		ints.fscalars.bits[0] = static_cast<uint64_t>(-5);
		ints.fscalars.bits[1] = 17;
		run(ints, {&out});
		pos = 0;
		out.each([&](const int64_t *i) {
			const auto w = philox_at(seed, offset, static_cast<uint64_t>(pos++));
			const uint64_t bits = uint64_t{w[0]} | uint64_t{w[1]} << 32;
			const double v = quantize(dt, static_cast<double>(-5 + static_cast<int64_t>(bits % 17)));
			cr_assert(out.get(i) == v, "%s integer: %g vs %g", dname(dt), out.get(i), v);
		});
	}
}

// A command cut into position ranges (as the chip's tiles do) writes exactly its
// range, with the whole command's numbers; another offset gives other numbers.
Test(isa14, position_ranges_reproduce_the_whole_command)
{
	const Tensor whole = Tensor::make(NEURON_DTYPE_F32, {40, 30}), parts = Tensor::make(NEURON_DTYPE_F32, {40, 30});
	run(rng_cmd(whole, NEURON_RNG_NORMAL, 0, 1, 99, 3), {&whole});
	for (uint64_t b = 0; b < 1200; b += 337) {
		auto c = rng_cmd(parts, NEURON_RNG_NORMAL, 0, 1, 99, 3);
		c.fscalars.bits[2] = b;
		c.fscalars.bits[3] = std::min<uint64_t>(b + 337, 1200);
		run(c, {&parts});
	}
	cr_assert(values(whole) == values(parts), "ranges reproduce the whole command");
	const Tensor partial = Tensor::make(NEURON_DTYPE_F32, {40, 30});
	partial.each([&](const int64_t *i) { partial.set(i, 42); });
	auto c = rng_cmd(partial, NEURON_RNG_NORMAL, 0, 1, 99, 3);
	c.fscalars.bits[2] = 100;
	c.fscalars.bits[3] = 200;
	run(c, {&partial});
	const auto pv = values(partial), wv = values(whole);
	for (size_t i = 0; i < pv.size(); ++i)
		cr_assert(pv[i] == (i >= 100 && i < 200 ? wv[i] : 42.0), "only positions [100, 200) are written");
	const Tensor other = Tensor::make(NEURON_DTYPE_F32, {40, 30});
	run(rng_cmd(other, NEURON_RNG_NORMAL, 0, 1, 99, 4), {&other});
	cr_assert(values(other) != values(whole), "another offset gives other numbers");
}

Test(isa14, distributions_pass_mean_variance_and_ks)
{
	const int64_t n = 200000;
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {n});
	// Thresholds: 6 standard errors for the moments, the KS critical value at
	// alpha = 0.001 (1.95 / sqrt(n)); the seeds are fixed, so this never flakes.
	const double se = 1 / std::sqrt(static_cast<double>(n)), ks_crit = 1.95 * se;
	run(rng_cmd(out, NEURON_RNG_NORMAL, 2, 3, 5, 0), {&out});
	auto x = values(out);
	double mean = std::accumulate(x.begin(), x.end(), 0.0) / n, var = 0;
	for (double v : x)
		var += (v - mean) * (v - mean) / (n - 1);
	cr_assert(std::fabs(mean - 2) < 6 * 3 * se, "normal mean %g", mean);
	cr_assert(std::fabs(var - 9) < 6 * 9 * std::sqrt(2.0) * se, "normal variance %g", var);
	const double d_normal = ks_statistic(x, [](double v) { return 0.5 * std::erfc(-(v - 2) / 3 / std::sqrt(2.0)); });
	cr_assert(d_normal < ks_crit, "normal KS %g >= %g", d_normal, ks_crit);
	run(rng_cmd(out, NEURON_RNG_UNIFORM, -1, 3, 6, 0), {&out});
	x = values(out);
	mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
	cr_assert(std::fabs(mean - 1) < 6 * (4 / std::sqrt(12.0)) * se, "uniform mean %g", mean);
	for (double v : x)
		cr_assert(v >= -1 && v < 3, "uniform value %g outside [-1, 3)", v);
	const double d_uniform = ks_statistic(x, [](double v) { return std::clamp((v + 1) / 4, 0.0, 1.0); });
	cr_assert(d_uniform < ks_crit, "uniform KS %g", d_uniform);
	run(rng_cmd(out, NEURON_RNG_BERNOULLI, 0.25, 0, 7, 0), {&out});
	x = values(out);
	mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
	cr_assert(std::fabs(mean - 0.25) < 6 * std::sqrt(0.25 * 0.75) * se, "bernoulli rate %g", mean);
	// Extremes are exact: p = 0 never, p = 1 always.
	run(rng_cmd(out, NEURON_RNG_BERNOULLI, 1, 0, 7, 1), {&out});
	x = values(out);
	cr_assert(std::all_of(x.begin(), x.end(), [](double v) { return v == 1; }));
}

Test(isa14, dropout_uses_the_bernoulli_draw)
{
	for (int dt : kFloatDtypes) {
		const Tensor in = Tensor::make(dt, {33, 17}), out = Tensor::make(dt, {33, 17});
		const Tensor mask = Tensor::make(NEURON_DTYPE_BOOL, {17, 33}).transpose(0, 1);
		const Tensor bern = Tensor::make(NEURON_DTYPE_BOOL, {33, 17});
		in.randomize(11, -3, 3);
		auto c = make_cmd(NEURON_OP_DROPOUT, {&out, &mask, &in});
		c.fscalars.f[0] = 1 / 0.7;
		c.fscalars.f[1] = 0.7;
		c.iscalars[1] = 1234;
		c.iscalars[2] = 9;
		run(c, {&out, &mask, &in});
		run(rng_cmd(bern, NEURON_RNG_BERNOULLI, 0.7, 0, 1234, 9), {&bern});
		cr_assert(values(mask) == values(bern), "%s: dropout's mask is BERNOULLI(keep)", dname(dt));
		expect_tensor(out, [&](const int64_t *i) { return mask.get(i) ? quantize(dt, in.get(i)) * (1 / 0.7) : 0.0; },
			      tol_for(dt), "dropout");
	}
}

// The inside-out Fisher-Yates of cmd.h, sequentially, as the reference.
Test(isa14, randperm_is_the_specified_shuffle_and_uniform)
{
	for (int dt : {NEURON_DTYPE_I64, NEURON_DTYPE_I32, NEURON_DTYPE_F32}) {
		const int64_t n = 1000;
		const Tensor out = Tensor::make(dt, {2 * n}).slice(0, 1, 2 * n, 2);
		auto c = make_cmd(NEURON_OP_RANDPERM, {&out});
		c.iscalars[1] = 77;
		c.iscalars[2] = 5;
		run(c, {&out});
		std::vector<int64_t> ref(static_cast<size_t>(n));
		for (uint64_t p = 0; p < static_cast<uint64_t>(n); ++p) {
			const auto w = philox_at(77, 5, p);
			const uint64_t bits = uint64_t{w[0]} | uint64_t{w[1]} << 32;
			const uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(p + 1) * bits) >> 64);
			ref[p] = ref[j];
			ref[j] = static_cast<int64_t>(p);
		}
		const auto got = values(out);
		for (int64_t i = 0; i < n; ++i)
			cr_assert(got[static_cast<size_t>(i)] == static_cast<double>(ref[static_cast<size_t>(i)]), "%s randperm[%lld]",
				  dname(dt), (long long)i);
		std::set<double> distinct(got.begin(), got.end());
		cr_assert(distinct.size() == static_cast<size_t>(n) && *distinct.begin() == 0 && *distinct.rbegin() == n - 1);
		// In two ordered ranges: the same permutation.
		const Tensor parts = Tensor::make(dt, {n});
		for (uint64_t b : {uint64_t{0}, uint64_t{400}}) {
			auto pc = make_cmd(NEURON_OP_RANDPERM, {&parts});
			pc.iscalars[1] = 77;
			pc.iscalars[2] = 5;
			pc.fscalars.bits[2] = b;
			pc.fscalars.bits[3] = b == 0 ? 400 : 1000;
			run(pc, {&parts});
		}
		cr_assert(values(parts) == got);
	}
	// Uniformity: over 6000 offsets each of the 6 permutations of 3 comes ~1000 times.
	std::map<std::vector<double>, int> seen;
	const Tensor small = Tensor::make(NEURON_DTYPE_I64, {3});
	for (int off = 0; off < 6000; ++off) {
		auto c = make_cmd(NEURON_OP_RANDPERM, {&small});
		c.iscalars[1] = 3;
		c.iscalars[2] = off;
		run(c, {&small});
		++seen[values(small)];
	}
	cr_assert_eq(seen.size(), 6u);
	double chi2 = 0;
	for (auto &[perm, k] : seen)
		chi2 += (k - 1000.0) * (k - 1000.0) / 1000.0;
	cr_assert(chi2 < 20.5, "chi-square %g (5 dof, p = 0.001 at 20.5)", chi2); // fixed seed: deterministic
}

Test(isa14, multinomial_frequencies_and_rules)
{
	const std::vector<double> w = {1, 0, 3, 6};
	const int64_t rows = 4, samples = 5000;
	const Tensor probs = Tensor::make(NEURON_DTYPE_F32, {4, rows}).transpose(0, 1);
	const Tensor out = Tensor::make(NEURON_DTYPE_I64, {rows, samples});
	probs.each([&](const int64_t *i) { probs.set(i, w[static_cast<size_t>(i[1])]); });
	auto c = make_cmd(NEURON_OP_MULTINOMIAL, {&out, &probs});
	c.iscalars[0] = 1;
	c.iscalars[1] = 21;
	run(c, {&out, &probs});
	std::vector<double> count(4, 0);
	out.each([&](const int64_t *i) { count[static_cast<size_t>(out.get(i))] += 1; });
	cr_assert(count[1] == 0, "a zero weight is never drawn");
	double chi2 = 0;
	for (size_t k : {size_t{0}, size_t{2}, size_t{3}}) {
		const double e = rows * samples * w[k] / 10;
		chi2 += (count[k] - e) * (count[k] - e) / e;
	}
	cr_assert(chi2 < 13.8, "with replacement: chi-square %g (2 dof, p = 0.001 at 13.8)", chi2);
	// The reference for one sample, from cmd.h's rule.
	const auto w0 = philox_at(21, 0, 1 * samples + 7);
	const double target = w0[0] * 0x1p-32 * 10;
	const int64_t idx[2] = {1, 7};
	cr_assert(out.get(idx) == (target < 1 ? 0 : target < 4 ? 2 : 3), "row 1 sample 7");

	// Without replacement: distinct, positive-weight categories; the first pick is
	// category k with probability w_k / sum.
	const Tensor three = Tensor::make(NEURON_DTYPE_I64, {rows, 3});
	std::vector<double> first(4, 0);
	for (int off = 0; off < 500; ++off) {
		auto nc = make_cmd(NEURON_OP_MULTINOMIAL, {&three, &probs});
		nc.iscalars[1] = 5;
		nc.iscalars[2] = off;
		run(nc, {&three, &probs});
		for (int64_t r = 0; r < rows; ++r) {
			std::set<double> got;
			for (int64_t s = 0; s < 3; ++s) {
				const int64_t i[2] = {r, s};
				got.insert(three.get(i));
			}
			cr_assert(got == std::set<double>({0, 2, 3}), "three distinct positive categories");
			const int64_t i0[2] = {r, 0};
			first[static_cast<size_t>(three.get(i0))] += 1;
		}
	}
	chi2 = 0;
	for (size_t k : {size_t{0}, size_t{2}, size_t{3}}) {
		const double e = 2000 * w[k] / 10;
		chi2 += (first[k] - e) * (first[k] - e) / e;
	}
	cr_assert(chi2 < 13.8, "first picks: chi-square %g", chi2);
	// Too few positive weights, or a negative one: the command faults.
	const Tensor four = Tensor::make(NEURON_DTYPE_I64, {rows, 4});
	auto too_many = make_cmd(NEURON_OP_MULTINOMIAL, {&four, &probs});
	std::vector<View> views = {four.view(), probs.view()};
	auto e = neuron::kernels::execute(too_many, views, 1);
	cr_assert(e && e->message.find("3 positive weights for 4 samples") != std::string::npos);
	const int64_t neg[2] = {2, 0};
	probs.set(neg, -1);
	views = {out.view(), probs.view()};
	e = neuron::kernels::execute(c, views, 1);
	cr_assert(e && e->message.find("row 2") != std::string::npos && e->message.find("negative") != std::string::npos);
}

Test(isa14, amp_unscale_and_update_scale_follow_pytorch)
{
	for (int dt : kFloatDtypes) {
		const Tensor g = Tensor::make(dt, {6, 9}).transpose(0, 1), found = Tensor::make(NEURON_DTYPE_F32, {1}),
			     inv = Tensor::make(NEURON_DTYPE_F32, {});
		g.randomize(3, -100, 100);
		const Tensor g0 = g.clone();
		const int64_t z[1] = {0};
		found.set(z, 0);
		inv.set(z, 0.125);
		auto c = make_cmd(NEURON_OP_AMP_UNSCALE, {&g, &found, &inv});
		run(c, {&g, &found, &inv});
		cr_assert(found.get(z) == 0, "all finite: found_inf untouched");
		expect_tensor(g, [&](const int64_t *i) { return g0.get(i) * 0.125; }, tol_for(dt), "unscaled");
		const int64_t at[2] = {4, 2};
		g.set(at, dt == NEURON_DTYPE_F32 ? INFINITY : NAN);
		run(c, {&g, &found, &inv});
		cr_assert(found.get(z) == 1, "%s: a non-finite element sets found_inf", dname(dt));
	}
	// _amp_update_scale_ step by step: growth every 3 clean steps, backoff on inf.
	const Tensor scale = Tensor::make(NEURON_DTYPE_F32, {1}), tracker = Tensor::make(NEURON_DTYPE_I32, {1}),
		     found = Tensor::make(NEURON_DTYPE_F32, {1});
	const int64_t z[1] = {0};
	scale.set(z, 1024);
	tracker.set(z, 0);
	auto c = make_cmd(NEURON_OP_AMP_UPDATE_SCALE, {&scale, &tracker, &found});
	c.fscalars.f[0] = 2;
	c.fscalars.f[1] = 0.5;
	c.iscalars[0] = 3;
	double s = 1024;
	int t = 0;
	for (int step = 0; step < 10; ++step) {
		const bool inf = step == 4 || step == 5;
		found.set(z, inf ? 1 : 0);
		run(c, {&scale, &tracker, &found});
		if (inf) {
			s *= 0.5;
			t = 0;
		} else if (++t == 3) {
			s *= 2;
			t = 0;
		}
		cr_assert(scale.get(z) == s && tracker.get(z) == t, "step %d: scale %g/%g tracker %g/%d", step, scale.get(z),
			  s, tracker.get(z), t);
	}
	// Growth that overflows f32 keeps the scale.
	scale.set(z, 3e38);
	tracker.set(z, 2);
	found.set(z, 0);
	run(c, {&scale, &tracker, &found});
	cr_assert(scale.get(z) == static_cast<double>(3e38f) && tracker.get(z) == 0);
}

Test(isa14, timestamp_reads_the_device_clock)
{
	const Tensor a = Tensor::make(NEURON_DTYPE_I64, {1}), b = Tensor::make(NEURON_DTYPE_I64, {});
	timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run(make_cmd(NEURON_OP_TIMESTAMP, {&a}), {&a});
	run(make_cmd(NEURON_OP_TIMESTAMP, {&b}), {&b});
	clock_gettime(CLOCK_MONOTONIC, &t1);
	const int64_t z[1] = {0};
	const double ns0 = t0.tv_sec * 1e9 + t0.tv_nsec, ns1 = t1.tv_sec * 1e9 + t1.tv_nsec;
	cr_assert(a.get(z) >= ns0 && a.get(z) <= b.get(nullptr) && b.get(nullptr) <= ns1, "timestamps in order and in time");
}

Test(isa14, rejections)
{
	const Tensor f = Tensor::make(NEURON_DTYPE_F32, {4, 5}), i32 = Tensor::make(NEURON_DTYPE_I32, {4, 5}),
		     b = Tensor::make(NEURON_DTYPE_BOOL, {4, 5}), i64 = Tensor::make(NEURON_DTYPE_I64, {4, 5});
	rejected(rng_cmd(i32, NEURON_RNG_NORMAL, 0, 1, 1, 0), "operand 0 (out)");
	rejected(rng_cmd(f, NEURON_RNG_NORMAL, 0, -1, 1, 0), "std");
	rejected(rng_cmd(f, NEURON_RNG_UNIFORM, 2, 1, 1, 0), "from");
	rejected(rng_cmd(f, NEURON_RNG_BERNOULLI, 1.5, 0, 1, 0), "probability");
	rejected(rng_cmd(f, 9, 0, 1, 1, 0), "distribution");
	rejected(rng_cmd(b, NEURON_RNG_INTEGER, 0, 0, 1, 0), "any dtype but bool");
	auto range = rng_cmd(f, NEURON_RNG_NORMAL, 0, 1, 1, 0);
	range.fscalars.bits[3] = 21;
	rejected(range, "positions");
	auto unused = rng_cmd(f, NEURON_RNG_NORMAL, 0, 1, 1, 0);
	unused.iscalars[3] = 1;
	rejected(unused, "i[3]");
	rejected(make_cmd(NEURON_OP_DROPOUT, {&f, &f, &f}), "operand 1 (mask)");
	rejected(make_cmd(NEURON_OP_RANDPERM, {&i64}), "1-d");
	const Tensor big = Tensor::make(NEURON_DTYPE_F32, {(1 << 24) + 1});
	rejected(make_cmd(NEURON_OP_RANDPERM, {&big}), "exactly");
	const Tensor out6 = Tensor::make(NEURON_DTYPE_I64, {4, 6});
	rejected(make_cmd(NEURON_OP_MULTINOMIAL, {&out6, &f}), "without replacement");
	rejected(make_cmd(NEURON_OP_MULTINOMIAL, {&f, &f}), "operand 0 (out)");
	rejected(make_cmd(NEURON_OP_TIMESTAMP, {&i64}), "one");
	const Tensor one = Tensor::make(NEURON_DTYPE_F32, {1}), one_i = Tensor::make(NEURON_DTYPE_I32, {1});
	rejected(make_cmd(NEURON_OP_AMP_UNSCALE, {&f, &f, &one}), "operand 1 (found_inf)");
	auto upd = make_cmd(NEURON_OP_AMP_UPDATE_SCALE, {&one, &one_i, &one});
	upd.fscalars.f[0] = 2;
	upd.fscalars.f[1] = 0.5;
	rejected(upd, "growth interval");
	upd.iscalars[0] = 1;
	cr_assert(!neuron::kernels::check_semantics(upd));
	upd.fscalars.f[1] = 0;
	rejected(upd, "f[1]");
	// The opcodes between the blocks are unknown.
	neuron_cmd gap{};
	gap.opcode = 50;
	const auto fault = neuron::kernels::check_semantics(gap);
	cr_assert(fault && fault->code == NEURON_FAULT_BAD_OPCODE);
}
