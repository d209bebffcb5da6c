// ACTIVATION_REDUCE (out, sum, in [, bias]): the activation and the sum of its
// results along the free dims in one instruction. Against references computed
// here (the activation in double, the sums in double) in every operand layout,
// with masks and 3-D tiles; bit for bit against ACTIVATION followed by REDUCE for
// f32 tiles in place (what the library's flash attention replaced); the
// validator's refusals next to the accepted form; and the independence analysis,
// which must count the sum as a write.
#include "harness.h"

#include <cmath>
#include <cstring>

using namespace tb;
using th::Arg;
using th::expect_contains;
using th::refusal;

namespace {

constexpr uint8_t f32 = NEURON_DTYPE_F32;

neuron_tile_insn load(uint32_t arg, int64_t rows, int64_t cols, int64_t offset)
{
	return insn(NEURON_TILE_OP_DMA, {sbuf(f32, rows, cols, {offset}), hbm(f32, arg, rows, cols, cols)});
}
neuron_tile_insn store(uint32_t arg, int64_t rows, int64_t cols, int64_t offset)
{
	return insn(NEURON_TILE_OP_DMA, {hbm(f32, arg, rows, cols, cols), sbuf(f32, rows, cols, {offset})});
}

neuron_tile_insn act_reduce(uint32_t fn, neuron_tile_ap out, neuron_tile_ap sum, neuron_tile_ap in, double scale,
			    double bias, const neuron_tile_ap *b = nullptr)
{
	neuron_tile_insn i = b ? insn(NEURON_TILE_OP_ACTIVATION_REDUCE, {out, sum, in, *b}, fn)
			       : insn(NEURON_TILE_OP_ACTIVATION_REDUCE, {out, sum, in}, fn);
	i.f[0] = scale;
	i.f[1] = bias;
	return i;
}

double fn_ref(uint32_t fn, double x)
{
	switch (fn) {
	case NEURON_PW_EXP: return std::exp(x);
	case NEURON_PW_SILU: return x / (1 + std::exp(-x));
	default: return x;
	}
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// The out layouts the engine takes: f32 in place, f32 strided (through a block),
// bf16 (converted; the sum is of the f32 results, before the rounding).
struct Layout {
	uint8_t dtype;
	int64_t step;
	const char *name;
};
constexpr Layout kLayouts[] = {{f32, 1, "f32"}, {f32, 2, "f32 strided"}, {NEURON_DTYPE_BF16, 1, "bf16"}};

constexpr int64_t kIn = 0, kBias = 8192, kSum = 8704, kOut = 9216, kDense = 9216 + 2 * 4 * 600 + 512;

} // namespace

// out = fn(x * 0.5 + b[p] + 0.25) and its row sums for exp, silu and the identity,
// rows of 43 (past the last full lane group) and 600 (two blocks), a partition mask
// (rows past 77 keep their old out and sum) and a column mask (columns past 30 are
// neither written nor summed).
Test(tile_activation_reduce, agrees_with_a_double_reference_in_every_layout_with_masks)
{
	const int64_t P = 100, rows = 77;
	for (const Layout &l : kLayouts)
		for (int64_t F : {int64_t{43}, int64_t{600}})
			for (uint32_t fn : {uint32_t{NEURON_PW_EXP}, uint32_t{NEURON_PW_SILU}, uint32_t{0}})
				for (bool cols_masked : {false, true}) {
					const int64_t cols = cols_masked ? 30 : F;
					std::vector<Arg> args{Arg(f32, P * F), Arg(f32, P), Arg(f32, P * F), Arg(f32, P)};
					ref::Rng rng(31);
					args[2].fill_random(rng, -3, 3);
					args[3].fill_random(rng);
					const neuron_tile_ap out = ap(NEURON_TILE_SBUF, l.dtype, 0, 0, {kOut}, {P, F}, {1, l.step});
					const neuron_tile_ap bias = sbuf(f32, P, 1, {kBias});
					neuron_tile_insn init = insn(NEURON_TILE_OP_MEMSET, {out});
					neuron_tile_insn init_sum = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, P, 1, {kSum})});
					init.f[0] = 7;
					init_sum.f[0] = 5;
					neuron_tile_insn op = masked(act_reduce(fn, out, sbuf(f32, P, 1, {kSum}), sbuf(f32, P, F, {kIn}), 0.5, 0.25, &bias),
								     0, {}, rows, 0);
					if (cols_masked)
						op = masked(op, 1, {}, cols, 1);
					std::vector<neuron_tile_insn> p{load(2, P, F, kIn), load(3, P, 1, kBias), init, init_sum, op,
									insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, P, F, {kDense}), out}),
									store(0, P, F, kDense), store(1, P, 1, kSum)};
					th::run(p, args);
					for (int64_t r = 0; r < P; ++r) {
						double want_sum = 0, magnitude = 0;
						for (int64_t c = 0; c < F; ++c) {
							const bool active = r < rows && c < cols;
							const float x = static_cast<float>(args[2].get(r * F + c));
							const double y = fn_ref(fn, static_cast<double>(x * 0.5f + static_cast<float>(args[3].get(r)) + 0.25f));
							const double want = active ? (l.dtype == f32 ? ref::to_f32(y) : ref::to_bf16(y)) : 7.0;
							const double got = args[0].get(r * F + c);
							const double tol = fn == 0 ? 0 : 2e-6 * std::fabs(y) + (l.dtype == f32 ? 0 : 8e-3 * std::fabs(y));
							cr_assert(same(got, want) || std::fabs(got - want) <= tol, "%s F %lld fn %u [%lld, %lld]: %.9g, want %.9g",
								  l.name, (long long)F, fn, (long long)r, (long long)c, got, want);
							if (active) {
								want_sum += y;
								magnitude += std::fabs(y);
							}
						}
						const double got = args[1].get(r);
						if (r >= rows)
							cr_assert_eq(got, 5.0, "%s row %lld past the mask: sum %.9g", l.name, (long long)r, got);
						else
							cr_assert(std::fabs(got - want_sum) <= 4e-6 * magnitude + 1e-30,
								  "%s F %lld fn %u row %lld: sum %.9g, want %.9g", l.name, (long long)F, fn,
								  (long long)r, got, want_sum);
					}
				}
}

// A [P, 3, 20] tile: the sum runs over both free dims.
Test(tile_activation_reduce, three_dim_tiles_sum_every_free_dim)
{
	const int64_t P = 32, A = 3, B = 20;
	std::vector<Arg> args{Arg(f32, P), Arg(f32, P * A * B)};
	ref::Rng rng(32);
	args[1].fill_random(rng, -2, 2);
	const neuron_tile_ap in = ap(NEURON_TILE_SBUF, f32, 0, 0, {}, {P, A, B}, {1, B, 1});
	const neuron_tile_ap out = ap(NEURON_TILE_SBUF, f32, 0, 0, {4096}, {P, A, B}, {1, B, 1});
	const neuron_tile_ap sum = ap(NEURON_TILE_SBUF, f32, 0, 0, {8192}, {P, 1, 1}, {1, 1, 1});
	std::vector<neuron_tile_insn> p{load(1, P, A * B, 0), act_reduce(NEURON_PW_EXP, out, sum, in, 1.0, -1.0),
					store(0, P, 1, 8192)};
	th::run(p, args);
	for (int64_t r = 0; r < P; ++r) {
		double want = 0;
		for (int64_t i = 0; i < A * B; ++i)
			want += std::exp(static_cast<double>(static_cast<float>(args[1].get(r * A * B + i)) + -1.0f));
		cr_assert(std::fabs(args[0].get(r) - want) <= 4e-6 * want, "row %lld: %.9g, want %.9g", (long long)r,
			  args[0].get(r), want);
	}
}

// What flash attention's forward did before: ACTIVATION (exp) into an f32 tile in
// place, then REDUCE (add) over it. The fused instruction gives the same bits, out
// and sums, with and without the bias tile, on rows of 128 and 600.
Test(tile_activation_reduce, bitwise_activation_then_reduce_for_f32_in_place)
{
	const int64_t P = 128;
	for (int64_t F : {int64_t{128}, int64_t{600}})
		for (bool with_bias : {false, true}) {
			std::vector<Arg> args{Arg(f32, P * F), Arg(f32, P), Arg(f32, P * F), Arg(f32, P), Arg(f32, P * F), Arg(f32, P)};
			ref::Rng rng(33);
			args[4].fill_random(rng, -8, 2);
			args[5].fill_random(rng, -1, 1);
			const neuron_tile_ap x = sbuf(f32, P, F), b = sbuf(f32, P, 1, {kBias});
			const neuron_tile_ap o1 = sbuf(f32, P, F, {kOut}), s1 = sbuf(f32, P, 1, {kSum});
			const neuron_tile_ap o2 = sbuf(f32, P, F, {kDense}), s2 = sbuf(f32, P, 1, {kSum + 4});
			neuron_tile_insn act = with_bias ? insn(NEURON_TILE_OP_ACTIVATION, {o1, x, b}, NEURON_PW_EXP)
							 : insn(NEURON_TILE_OP_ACTIVATION, {o1, x}, NEURON_PW_EXP);
			act.f[0] = 0.125;
			act.f[1] = 0.5;
			std::vector<neuron_tile_insn> p{load(4, P, F, 0), load(5, P, 1, kBias), act,
							insn(NEURON_TILE_OP_REDUCE, {s1, o1}, NEURON_PW_ADD),
							act_reduce(NEURON_PW_EXP, o2, s2, x, 0.125, 0.5, with_bias ? &b : nullptr),
							store(0, P, F, kOut), store(1, P, 1, kSum), store(2, P, F, kDense), store(3, P, 1, kSum + 4)};
			th::run(p, args);
			cr_assert(args[0].bytes == args[2].bytes, "F %lld bias %d: out differs from activation's", (long long)F, with_bias);
			cr_assert(args[1].bytes == args[3].bytes, "F %lld bias %d: sums differ from reduce's", (long long)F, with_bias);
		}
}

Test(tile_activation_reduce, validation_refusals)
{
	const neuron_tile_ap out = sbuf(f32, 64, 16), in = sbuf(f32, 64, 16, {64}), sum = sbuf(f32, 64, 1, {128}),
			     bias = sbuf(f32, 64, 1, {132});
	auto one = [](neuron_tile_insn i) { return std::vector<neuron_tile_insn>{i}; };
	cr_expect_eq(refusal(one(act_reduce(NEURON_PW_EXP, out, sum, in, 1, 0, &bias)), {}), "");
	cr_expect_eq(refusal(one(act_reduce(NEURON_PW_EXP, out, psum(64, 1), in, 1, 0)), {}), "", "a sum in PSUM");
	// the sum: out's partitions, 1 along the free dims
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sbuf(f32, 32, 1, {128}), in, 1, 0)), {}),
			"must have out [64, 16]'s partitions");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sbuf(f32, 64, 2, {128}), in, 1, 0)), {}),
			"be 1 along every free dim");
	const neuron_tile_ap sum3 = ap(NEURON_TILE_SBUF, f32, 0, 0, {128}, {64, 1, 1}, {1, 1, 1}); // 3-D for a 2-D out
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sum3, in, 1, 0)), {}), "must have out");
	// partition limits, on every operand
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, sbuf(f32, 129, 16), sbuf(f32, 129, 1, {128}),
					       sbuf(f32, 129, 16, {64}), 1, 0)),
				{}),
			"err_num_partition_exceed_arch_limit");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sbuf(f32, 129, 1, {128}), in, 1, 0)), {}),
			"err_num_partition_exceed_arch_limit");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sbuf(f32, 64, 1, {128}, 32), in, 1, 0)), {}),
			"starts at partition");
	// the activation's rules
	expect_contains(refusal(one(act_reduce(NEURON_PW_ADD, out, sum, in, 1, 0)), {}), "not a unary");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sum, in, INFINITY, 0)), {}), "scale f[0] must be finite");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sum, sbuf(f32, 64, 3, {64}), 1, 0)), {}), "does not fit out");
	const neuron_tile_ap wide_bias = sbuf(f32, 64, 2, {132});
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sum, in, 1, 0, &wide_bias)), {}), "does not fit out");
	// memories and operands
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, hbm(f32, 0, 64, 1, 1), in, 1, 0)), {256}),
			"only dma reaches HBM");
	expect_contains(refusal(one(insn(NEURON_TILE_OP_ACTIVATION_REDUCE, {out, sum}, NEURON_PW_EXP)), {}), "takes 3..4");
	// the sum shares no byte with another operand (out in place over in is allowed)
	cr_expect_eq(refusal(one(act_reduce(NEURON_PW_EXP, in, sum, in, 1, 0)), {}), "");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sbuf(f32, 64, 1, {64 + 8}), in, 1, 0)), {}),
			"sum (operand 1) overlaps operand 2");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, sbuf(f32, 64, 1, {0}), in, 1, 0)), {}), "overlaps");
	expect_contains(refusal(one(act_reduce(NEURON_PW_EXP, out, bias, in, 1, 0, &bias)), {}),
			"sum (operand 1) overlaps operand 3");
	neuron_tile_insn accumulate = act_reduce(NEURON_PW_EXP, out, sum, in, 1, 0);
	accumulate.flags = NEURON_TILE_ACCUMULATE;
	expect_contains(refusal(one(accumulate), {}), "flags 1");
}

namespace {

// loop(8) { t = iota(base = iteration) [+ s, the last iteration's sum]; u, s =
// exp(t * 2^-9) with sums; store u and s to the iteration's rows }.
std::vector<neuron_tile_insn> sum_loop(bool carried)
{
	const int64_t P = 128, F = 2048;
	const neuron_tile_ap t = sbuf(f32, P, F), u = sbuf(f32, P, F, {F * 4}), s = sbuf(f32, P, 1, {2 * F * 4});
	neuron_tile_insn io = insn(NEURON_TILE_OP_IOTA, {t});
	io.base = Affine{0, {1}}.get();
	io.i[0] = 1;
	io.i[1] = 1;
	neuron_tile_insn init = insn(NEURON_TILE_OP_MEMSET, {s});
	std::vector<neuron_tile_insn> p{init, loop(8), io}; // 8 x 3 x 2^18 elements: enough work to fork
	if (carried)
		p.push_back(insn(NEURON_TILE_OP_TENSOR_TENSOR, {t, t, s}, NEURON_PW_ADD));
	p.push_back(act_reduce(NEURON_PW_EXP, u, s, t, 1.0 / 512, 0));
	p.push_back(insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, P, F, F, {0, {P * F}}), u}));
	p.push_back(insn(NEURON_TILE_OP_DMA, {hbm(f32, 1, P, 1, 1, {0, {P}}), s}));
	p.push_back(end_loop());
	return p;
}

} // namespace

// Each iteration defines its sum before anything reads it: the loop runs on lanes
// with the in-order bits. Reading the last iteration's sum makes it carried: in order.
Test(tile_activation_reduce, the_sum_is_a_write_for_the_independence_analysis)
{
	for (bool carried : {false, true}) {
		std::vector<Arg> args{Arg(f32, 8 * 128 * 2048), Arg(f32, 8 * 128)};
		auto p = th::validated(sum_loop(carried), args);
		cr_expect_eq(p->parallel[1], carried ? 0 : 1, "carried %d", carried);
		auto run = [&](int lanes) {
			std::vector<Arg> copy = args;
			neuron::tile::run(p, th::pointers(copy), lanes);
			return copy;
		};
		const std::vector<Arg> seq = run(1), par = run(2);
		cr_assert(seq[0].bytes == par[0].bytes && seq[1].bytes == par[1].bytes, "carried %d: lanes differ", carried);
		// the sums of the first iteration's rows: exp((p + f) / 512) over f
		for (int64_t r : {int64_t{0}, int64_t{77}}) {
			double want = 0;
			for (int64_t f = 0; f < 2048; ++f)
				want += std::exp(static_cast<double>(static_cast<float>(r + f) * (1.0f / 512)));
			cr_assert(std::fabs(seq[1].get(r) - want) <= 4e-6 * want, "row %lld: %.9g, want %.9g", (long long)r,
				  seq[1].get(r), want);
		}
	}
}
