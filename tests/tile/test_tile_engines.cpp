// The engines one instruction at a time, each against a reference computed
// here: strided DMA, transpose, activation with a per-partition bias, compare,
// select, iota, reductions with masks, casts; and the profiles' on-chip sizes.
#include "harness.h"

#include <chip/onchip_memory.h>

#include <cmath>
#include <functional>

using namespace tb;
using th::Arg;

namespace {

constexpr uint8_t f32 = NEURON_DTYPE_F32;

// [rows, cols] f32 HBM argument `arg` into SBUF at `offset`, and back out of `from`.
neuron_tile_insn load(uint32_t arg, int64_t rows, int64_t cols, int64_t offset = 0)
{
	return insn(NEURON_TILE_OP_DMA, {sbuf(f32, rows, cols, {offset}), hbm(f32, arg, rows, cols, cols)});
}
neuron_tile_insn store(uint32_t arg, int64_t rows, int64_t cols, int64_t offset = 0)
{
	return insn(NEURON_TILE_OP_DMA, {hbm(f32, arg, rows, cols, cols), sbuf(f32, rows, cols, {offset})});
}

} // namespace

Test(tile_engines, profiles_have_the_documented_onchip_sizes)
{
	const auto trn1 = th::onchip("trn1"), trn2 = th::onchip("trn2"), trn3 = th::onchip("trn3");
	cr_expect_eq(trn1.sbuf_bytes(), 24ull << 20);
	cr_expect_eq(trn2.sbuf_bytes(), 28ull << 20);
	cr_expect_eq(trn3.sbuf_bytes(), 32ull << 20);
	for (const auto &o : {trn1, trn2, trn3}) {
		cr_expect_eq(o.partitions, 128u);
		cr_expect_eq(o.psum_bytes(), 2ull << 20);
		cr_expect_eq(o.psum_partition_bytes / o.psum_bank_bytes, 8u);
	}
	cr_expect_eq(trn2.matmul_moving_max, 512u);
	cr_expect_eq(trn3.matmul_moving_max, 4096u);
}

Test(tile_engines, fresh_onchip_memory_reads_nan)
{
	neuron::chip::OnChipMemory m(th::onchip(), 64, 64);
	float v;
	std::memcpy(&v, m.sbuf(127, 60), 4);
	cr_expect(std::isnan(v));
	std::memcpy(&v, m.psum(0, 0), 4);
	cr_expect(std::isnan(v));
	cr_expect_eq(m.backed_bytes(), 2u * 128 * 64);
}

// A DMA whose HBM side walks columns: out = in^T through SBUF. Shapes with
// edges only, whole 8 x 8 blocks, and both (f32 moves in vector blocks).
Test(tile_engines, strided_dma_transposes)
{
	for (const auto [R, C] : {std::pair<int64_t, int64_t>{6, 40}, {16, 24}, {37, 50}, {128, 128}}) {
		std::vector<Arg> args{Arg(f32, R * C), Arg(f32, R * C)};
		ref::Rng rng(static_cast<uint64_t>(R * C));
		args[1].fill_random(rng);
		std::vector<neuron_tile_insn> p{
			insn(NEURON_TILE_OP_DMA, {sbuf(f32, C, R), ap(NEURON_TILE_HBM, f32, 1, 0, {}, {C, R}, {1, C})}),
			store(0, C, R)};
		th::run(p, args);
		for (int64_t r = 0; r < R; ++r)
			for (int64_t c = 0; c < C; ++c)
				cr_assert_eq(args[0].get(c * R + r), args[1].get(r * C + c), "%ldx%ld at (%ld, %ld)", (long)R,
					     (long)C, (long)r, (long)c);
	}
}

Test(tile_engines, transpose_through_psum)
{
	const int64_t P = 100, F = 37;
	std::vector<Arg> args{Arg(f32, P * F), Arg(f32, P * F)};
	ref::Rng rng(2);
	args[1].fill_random(rng);
	std::vector<neuron_tile_insn> p{load(1, P, F), insn(NEURON_TILE_OP_TRANSPOSE, {psum(F, P), sbuf(f32, P, F)}),
					insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, F, P, {4096}), psum(F, P)}),
					store(0, F, P, 4096)};
	th::run(p, args);
	for (int64_t i = 0; i < P; ++i)
		for (int64_t j = 0; j < F; ++j)
			cr_assert_eq(args[0].get(j * P + i), args[1].get(i * F + j));
}

// out = exp(x * 0.5 + bias[p] + 0.25), bias one value per partition.
Test(tile_engines, activation_with_partition_bias)
{
	const int64_t P = 64, F = 33;
	std::vector<Arg> args{Arg(f32, P * F), Arg(f32, P * F), Arg(f32, P)};
	ref::Rng rng(3);
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	neuron_tile_insn act = insn(NEURON_TILE_OP_ACTIVATION, {sbuf(f32, P, F, {1024}), sbuf(f32, P, F), sbuf(f32, P, 1, {512})},
				    NEURON_PW_EXP);
	act.f[0] = 0.5;
	act.f[1] = 0.25;
	std::vector<neuron_tile_insn> p{load(1, P, F), load(2, P, 1, 512), act, store(0, P, F, 1024)};
	th::run(p, args);
	for (int64_t i = 0; i < P; ++i)
		for (int64_t j = 0; j < F; ++j) {
			const double want = std::exp(args[1].get(i * F + j) * 0.5 + args[2].get(i) + 0.25);
			cr_assert(std::fabs(args[0].get(i * F + j) - want) <= 1e-6 * want);
		}
}

// A causal mask from iota and compare: keep x where column <= row, else -inf.
Test(tile_engines, iota_compare_select_make_a_causal_mask)
{
	const int64_t P = 16, F = 16;
	std::vector<Arg> args{Arg(f32, P * F), Arg(f32, P * F)};
	ref::Rng rng(4);
	args[1].fill_random(rng);
	neuron_tile_insn iota = insn(NEURON_TILE_OP_IOTA, {sbuf(f32, P, F, {1024})});
	iota.i[0] = -1; // value = column - row
	iota.i[1] = 1;
	neuron_tile_insn cmp = insn(NEURON_TILE_OP_COMPARE, {sbuf(f32, P, F, {2048}), sbuf(f32, P, F, {1024})}, NEURON_CMP_LE);
	neuron_tile_insn sel = insn(NEURON_TILE_OP_SELECT, {sbuf(f32, P, F, {3072}), sbuf(f32, P, F, {2048}), sbuf(f32, P, F)});
	sel.f[0] = -INFINITY;
	std::vector<neuron_tile_insn> p{load(1, P, F), iota, cmp, sel, store(0, P, F, 3072)};
	th::run(p, args);
	for (int64_t i = 0; i < P; ++i)
		for (int64_t j = 0; j < F; ++j)
			cr_assert_eq(args[0].get(i * F + j), j <= i ? args[1].get(i * F + j) : -INFINITY);
}

// Iota into i32 is exact past 2^24 and takes its base from the loop variable.
Test(tile_engines, iota_i32_with_loop_base)
{
	std::vector<Arg> args{Arg(NEURON_DTYPE_I32, 3 * 4 * 5)};
	const int64_t big = (1ll << 26) + 1;
	neuron_tile_insn iota = insn(NEURON_TILE_OP_IOTA, {sbuf(NEURON_DTYPE_I32, 4, 5)});
	iota.base = Affine{big, {1000}}.get();
	iota.i[0] = 10;
	iota.i[1] = 1;
	std::vector<neuron_tile_insn> p{
		loop(3), iota,
		insn(NEURON_TILE_OP_DMA, {hbm(NEURON_DTYPE_I32, 0, 4, 5, 5, {0, {20}}), sbuf(NEURON_DTYPE_I32, 4, 5)}),
		end_loop()};
	th::run(p, args);
	for (int64_t l = 0; l < 3; ++l)
		for (int64_t r = 0; r < 4; ++r)
			for (int64_t c = 0; c < 5; ++c) {
				int32_t v;
				std::memcpy(&v, args[0].bytes.data() + 4 * (l * 20 + r * 5 + c), 4);
				cr_assert_eq(v, big + 1000 * l + 10 * r + c);
			}
}

// Row max over the first `cols` columns only (a free-dim mask), rows past
// `rows` untouched (a partition mask).
Test(tile_engines, masked_reduce)
{
	const int64_t P = 32, F = 50, rows = 20, cols = 13;
	std::vector<Arg> args{Arg(f32, P), Arg(f32, P * F)};
	ref::Rng rng(6);
	args[1].fill_random(rng);
	for (int64_t i = 0; i < P; ++i)
		args[1].set(i * F + 40, 99.0); // outside the mask: must not win
	neuron_tile_insn out_init = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, P, 1, {4096})});
	out_init.f[0] = 7.0;
	neuron_tile_insn red = insn(NEURON_TILE_OP_REDUCE, {sbuf(f32, P, 1, {4096}), sbuf(f32, P, F)}, NEURON_PW_MAXIMUM);
	red = masked(masked(red, 0, {}, rows, 0), 1, {}, cols, 1);
	std::vector<neuron_tile_insn> p{load(1, P, F), out_init, red, store(0, P, 1, 4096)};
	th::run(p, args);
	for (int64_t i = 0; i < P; ++i) {
		double want = 7.0;
		if (i < rows) {
			want = -INFINITY;
			for (int64_t j = 0; j < cols; ++j)
				want = std::max(want, args[1].get(i * F + j));
		}
		cr_assert_eq(args[0].get(i), want, "row %lld", (long long)i);
	}
}

// Sum with accumulation over a loop, bf16 input, f32 out; tensor_scalar reversed.
Test(tile_engines, reduce_accumulates_and_tensor_scalar_reverses)
{
	const int64_t P = 8, F = 24;
	std::vector<Arg> args{Arg(f32, P), Arg(NEURON_DTYPE_BF16, 3 * P * F)};
	ref::Rng rng(7);
	args[1].fill_random(rng);
	neuron_tile_insn zero = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, P, 1, {1024})});
	neuron_tile_insn ld = insn(NEURON_TILE_OP_DMA,
				   {sbuf(NEURON_DTYPE_BF16, P, F), hbm(NEURON_DTYPE_BF16, 1, P, F, F, {0, {P * F}})});
	neuron_tile_insn sub = insn(NEURON_TILE_OP_TENSOR_SCALAR, {sbuf(f32, P, F, {256}), sbuf(NEURON_DTYPE_BF16, P, F)},
				    NEURON_PW_SUB, NEURON_TILE_REVERSE);
	sub.f[0] = 2.0; // 2 - x
	neuron_tile_insn red = insn(NEURON_TILE_OP_REDUCE, {sbuf(f32, P, 1, {1024}), sbuf(f32, P, F, {256})}, NEURON_PW_ADD,
				    NEURON_TILE_ACCUMULATE);
	std::vector<neuron_tile_insn> p{zero, loop(3), ld, sub, red, end_loop(), store(0, P, 1, 1024)};
	th::run(p, args);
	for (int64_t i = 0; i < P; ++i) {
		double want = 0;
		for (int64_t l = 0; l < 3; ++l)
			for (int64_t j = 0; j < F; ++j)
				want += 2.0 - args[1].get(l * P * F + i * F + j);
		cr_assert(std::fabs(args[0].get(i) - want) < 1e-4, "row %lld: %g vs %g", (long long)i, args[0].get(i), want);
	}
}

// tensor_copy casts f32 -> bf16 with round-to-nearest-even.
Test(tile_engines, tensor_copy_casts)
{
	const int64_t P = 4, F = 64;
	std::vector<Arg> args{Arg(NEURON_DTYPE_BF16, P * F), Arg(f32, P * F)};
	ref::Rng rng(8);
	args[1].fill_random(rng, -100, 100);
	std::vector<neuron_tile_insn> p{
		load(1, P, F), insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(NEURON_DTYPE_BF16, P, F, {512}), sbuf(f32, P, F)}),
		insn(NEURON_TILE_OP_DMA, {hbm(NEURON_DTYPE_BF16, 0, P, F, F), sbuf(NEURON_DTYPE_BF16, P, F, {512})})};
	th::run(p, args);
	for (size_t i = 0; i < args[0].size(); ++i)
		cr_assert_eq(args[0].get(i), ref::to_bf16(args[1].get(i)));
}

// Matmul accumulation in one PSUM bank: two K halves added, then overwritten.
Test(tile_engines, matmul_accumulate_and_overwrite)
{
	const int64_t K = 128, M = 3, N = 4;
	std::vector<Arg> args{Arg(f32, M * N), Arg(f32, 2 * K * M), Arg(f32, 2 * K * N)};
	ref::Rng rng(9);
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	auto ld = [&](uint32_t arg, int64_t cols, int64_t off) {
		return insn(NEURON_TILE_OP_DMA, {sbuf(f32, K, cols, {off}), hbm(f32, arg, K, cols, cols, {0, {K * cols}})});
	};
	std::vector<neuron_tile_insn> p{insn(NEURON_TILE_OP_MEMSET, {psum(M, N, {2048})}),
					loop(2),
					ld(1, M, 0),
					ld(2, N, 64),
					insn(NEURON_TILE_OP_MATMUL, {psum(M, N, {2048}), sbuf(f32, K, M), sbuf(f32, K, N, {64})}, 0,
					     NEURON_TILE_ACCUMULATE),
					end_loop(),
					insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, M, N, {128}), psum(M, N, {2048})}),
					store(0, M, N, 128)};
	th::run(p, args);
	for (int64_t m = 0; m < M; ++m)
		for (int64_t n = 0; n < N; ++n) {
			double want = 0;
			for (int64_t k = 0; k < 2 * K; ++k)
				want += args[1].get(k * M + m) * args[2].get(k * N + n);
			cr_assert(std::fabs(args[0].get(m * N + n) - want) < 1e-4);
		}
	// Without ACCUMULATE the second K half replaces the first.
	p[4].flags = 0;
	th::run(p, args);
	for (int64_t m = 0; m < M; ++m)
		for (int64_t n = 0; n < N; ++n) {
			double want = 0;
			for (int64_t k = K; k < 2 * K; ++k)
				want += args[1].get(k * M + m) * args[2].get(k * N + n);
			cr_assert(std::fabs(args[0].get(m * N + n) - want) < 1e-4);
		}
}

// A full step of the PE array (K = 128 partitions, M = 128, N = 512: one PSUM bank),
// the size kernels use and the one that takes the packed multiply: two K halves
// accumulated, f32 and bf16 operands, against a double reference.
Test(tile_engines, full_size_matmul_accumulates_in_f32)
{
	const int64_t K = 128, M = 128, N = 512;
	for (const uint8_t dt : {f32, uint8_t(NEURON_DTYPE_BF16)}) {
		std::vector<Arg> args{Arg(f32, M * N), Arg(dt, 2 * K * M), Arg(dt, 2 * K * N)};
		ref::Rng rng(11);
		args[1].fill_random(rng);
		args[2].fill_random(rng);
		auto ld = [&](uint32_t arg, int64_t cols, int64_t off) {
			return insn(NEURON_TILE_OP_DMA, {sbuf(dt, K, cols, {off}), hbm(dt, arg, K, cols, cols, {0, {K * cols}})});
		};
		// On-chip offsets are bytes: operands at 0 and 4 KiB, the result at 8 KiB.
		std::vector<neuron_tile_insn> p{insn(NEURON_TILE_OP_MEMSET, {psum(M, N)}),
						loop(2),
						ld(1, M, 0),
						ld(2, N, 4096),
						insn(NEURON_TILE_OP_MATMUL, {psum(M, N), sbuf(dt, K, M), sbuf(dt, K, N, {4096})}, 0,
						     NEURON_TILE_ACCUMULATE),
						end_loop(),
						insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, M, N, {8192}), psum(M, N)}),
						store(0, M, N, 8192)};
		th::run(p, args);
		double worst = 0;
		for (int64_t m = 0; m < M; ++m)
			for (int64_t n = 0; n < N; ++n) {
				double want = 0;
				for (int64_t k = 0; k < 2 * K; ++k)
					want += args[1].get(k * M + m) * args[2].get(k * N + n);
				worst = std::max(worst, std::fabs(args[0].get(m * N + n) - want));
			}
		// 256 products of magnitude < 1 summed in f32: a few ulps of ~10.
		cr_assert(worst < 1e-4, "%s: max error %g", dt == f32 ? "f32" : "bf16", worst);
	}
}

namespace {

// The vector/scalar engines run an f32 operand with unit stride in place and any
// other through a converted block: every op below runs with all its operands in
// each layout (f32 unit stride, f32 every other element, bf16), a [P, 1] operand
// broadcast along the free dim, against a reference computed here in f32.
struct Layout {
	uint8_t dtype;
	int64_t step; // elements between a row's neighbours
	const char *name;
};
constexpr Layout kLayouts[] = {{f32, 1, "f32"}, {f32, 2, "f32 strided"}, {NEURON_DTYPE_BF16, 1, "bf16"}};

neuron_tile_ap tile(const Layout &l, int64_t P, int64_t F, int64_t offset)
{
	return ap(NEURON_TILE_SBUF, l.dtype, 0, 0, {offset}, {P, F}, {1, l.step});
}

// A value as the layout stores it.
double stored(const Layout &l, double v) { return l.dtype == f32 ? v : ref::to_bf16(v); }

constexpr int64_t kP = 8, kF = 43; // 43: past the vector loops' last full lane group
constexpr int64_t kX = 4096, kY = 8192, kB = 12288, kOut = 16384, kDense = 20480;

// x, y [P, F] and b [P, 1] (HBM args 1, 2, 3, with a NaN in x and ties with y) in the
// layout at kX, kY, kB (y 0 in places); op(out, x, y, b) writes kOut; its f32 value lands in arg 0.
std::vector<Arg> run_in_layout(const Layout &l, const std::function<neuron_tile_insn(neuron_tile_ap, neuron_tile_ap,
											neuron_tile_ap, neuron_tile_ap)> &op)
{
	std::vector<Arg> args{Arg(f32, kP * kF), Arg(f32, kP * kF), Arg(f32, kP * kF), Arg(f32, kP)};
	ref::Rng rng(21);
	args[1].fill_random(rng, -3, 3);
	args[2].fill_random(rng, -3, 3);
	args[3].fill_random(rng);
	args[1].set(5 * kF + 17, NAN);
	for (int64_t i = 0; i < kP * kF; i += 7)
		args[2].set(i, args[1].get(i)); // equal elements for the compares
	for (int64_t i = 3; i < kP * kF; i += 11)
		args[2].set(i, 0.0); // select's condition false
	const auto to_layout = [&](int64_t cols, int64_t dense, int64_t at) {
		return insn(NEURON_TILE_OP_TENSOR_COPY, {tile(l, kP, cols, at), sbuf(f32, kP, cols, {dense})});
	};
	std::vector<neuron_tile_insn> p{load(1, kP, kF, 0),
					load(2, kP, kF, 1024),
					load(3, kP, 1, 2048),
					to_layout(kF, 0, kX),
					to_layout(kF, 1024, kY),
					to_layout(1, 2048, kB),
					op(tile(l, kP, kF, kOut), tile(l, kP, kF, kX), tile(l, kP, kF, kY), tile(l, kP, 1, kB)),
					insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, kP, kF, {kDense}), tile(l, kP, kF, kOut)}),
					store(0, kP, kF, kDense)};
	th::run(p, args);
	return args;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Each layout's result against want(x, y, b, p, f) in f32 (x, y, b as stored),
// within rel (0: exact) and, in bf16, its rounding.
void check_op(const char *what,
	      const std::function<neuron_tile_insn(neuron_tile_ap, neuron_tile_ap, neuron_tile_ap, neuron_tile_ap)> &op,
	      const std::function<float(float, float, float, int64_t, int64_t)> &want, double rel = 0)
{
	for (const Layout &l : kLayouts) {
		const std::vector<Arg> args = run_in_layout(l, op);
		for (int64_t p = 0; p < kP; ++p)
			for (int64_t f = 0; f < kF; ++f) {
				const int64_t i = p * kF + f;
				const float x = static_cast<float>(stored(l, args[1].get(i)));
				const float y = static_cast<float>(stored(l, args[2].get(i)));
				const float b = static_cast<float>(stored(l, args[3].get(p)));
				const double w = stored(l, want(x, y, b, p, f)), got = args[0].get(i);
				const bool ok = rel == 0 ? same(got, w) : (same(got, w) || std::fabs(got - w) <= rel * std::fabs(w));
				cr_assert(ok, "%s, %s, [%lld, %lld]: %.9g, want %.9g", what, l.name, (long long)p, (long long)f,
					  got, w);
			}
	}
}

using Ap = neuron_tile_ap;

} // namespace

Test(tile_engines, vector_ops_agree_in_place_strided_and_bf16)
{
	check_op(
		"exp(x * 0.5 + b + 0.25)",
		[](Ap o, Ap x, Ap, Ap b) {
			neuron_tile_insn in = insn(NEURON_TILE_OP_ACTIVATION, {o, x, b}, NEURON_PW_EXP);
			in.f[0] = 0.5;
			in.f[1] = 0.25;
			return in;
		},
		[](float x, float, float b, int64_t, int64_t) { return static_cast<float>(std::exp(x * 0.5f + b + 0.25f)); },
		1e-6);
	check_op(
		"x * -2 + 1",
		[](Ap o, Ap x, Ap, Ap) {
			neuron_tile_insn in = insn(NEURON_TILE_OP_ACTIVATION, {o, x});
			in.f[0] = -2;
			in.f[1] = 1;
			return in;
		},
		[](float x, float, float, int64_t, int64_t) { return x * -2.0f + 1.0f; });
	check_op(
		"silu(x + b)",
		[](Ap o, Ap x, Ap, Ap b) {
			neuron_tile_insn in = insn(NEURON_TILE_OP_ACTIVATION, {o, x, b}, NEURON_PW_SILU);
			in.f[0] = 1;
			return in;
		},
		[](float x, float, float b, int64_t, int64_t) {
			const float a = x + b;
			return static_cast<float>(a / (1.0 + std::exp(-static_cast<double>(a))));
		},
		1e-6);
	for (uint32_t fn : {NEURON_PW_ADD, NEURON_PW_MUL, NEURON_PW_SUB, NEURON_PW_MAXIMUM, NEURON_PW_MINIMUM})
		check_op(
			"tensor_tensor", [fn](Ap o, Ap x, Ap y, Ap) { return insn(NEURON_TILE_OP_TENSOR_TENSOR, {o, x, y}, fn); },
			[fn](float x, float y, float, int64_t, int64_t) {
				switch (fn) {
				case NEURON_PW_ADD: return x + y;
				case NEURON_PW_MUL: return x * y;
				case NEURON_PW_SUB: return x - y;
				case NEURON_PW_MAXIMUM: return x != x || y != y ? NAN : std::max(x, y);
				default: return x != x || y != y ? NAN : std::min(x, y);
				}
			});
	check_op(
		"x + b (b broadcast)", [](Ap o, Ap x, Ap, Ap b) { return insn(NEURON_TILE_OP_TENSOR_TENSOR, {o, x, b}, NEURON_PW_ADD); },
		[](float x, float, float b, int64_t, int64_t) { return x + b; });
	for (uint32_t fn : {NEURON_PW_ADD, NEURON_PW_MUL, NEURON_PW_SUB, NEURON_PW_MAXIMUM, NEURON_PW_MINIMUM, NEURON_PW_DIV})
		for (uint8_t flags : {uint8_t{0}, uint8_t{NEURON_TILE_REVERSE}})
			check_op(
				"tensor_scalar",
				[fn, flags](Ap o, Ap x, Ap, Ap) {
					neuron_tile_insn in = insn(NEURON_TILE_OP_TENSOR_SCALAR, {o, x}, fn, flags);
					in.f[0] = 0.75;
					return in;
				},
				[fn, flags](float x, float, float, int64_t, int64_t) {
					const float a = flags ? 0.75f : x, b = flags ? x : 0.75f;
					switch (fn) {
					case NEURON_PW_ADD: return a + b;
					case NEURON_PW_MUL: return a * b;
					case NEURON_PW_SUB: return a - b;
					case NEURON_PW_DIV: return a / b;
					case NEURON_PW_MAXIMUM: return a != a || b != b ? NAN : (a < b ? b : a);
					default: return a != a || b != b ? NAN : (b < a ? b : a);
					}
				});
	for (uint32_t fn = NEURON_CMP_EQ; fn < NEURON_CMP_COUNT_; ++fn)
		for (bool scalar : {false, true})
			check_op(
				"compare",
				[fn, scalar](Ap o, Ap x, Ap y, Ap) {
					neuron_tile_insn in = scalar ? insn(NEURON_TILE_OP_COMPARE, {o, x}, fn)
								     : insn(NEURON_TILE_OP_COMPARE, {o, x, y}, fn);
					in.f[0] = 0.5;
					return in;
				},
				[fn, scalar](float x, float y, float, int64_t, int64_t) {
					const float b = scalar ? 0.5f : y;
					const bool r[] = {x == b, x != b, x < b, x <= b, x > b, x >= b};
					return r[fn] ? 1.0f : 0.0f;
				});
	for (bool scalar : {false, true})
		check_op(
			"select on y",
			[scalar](Ap o, Ap x, Ap y, Ap) {
				neuron_tile_insn in = scalar ? insn(NEURON_TILE_OP_SELECT, {o, y, x}) : insn(NEURON_TILE_OP_SELECT, {o, y, x, y});
				in.f[0] = -INFINITY;
				return in;
			},
			[scalar](float x, float y, float, int64_t, int64_t) { return y != 0.0f ? x : scalar ? -INFINITY : y; });
	check_op(
		"iota", [](Ap o, Ap, Ap, Ap) {
			neuron_tile_insn in = insn(NEURON_TILE_OP_IOTA, {o});
			in.base = Affine{-100}.get();
			in.i[0] = -3;
			in.i[1] = 2;
			return in;
		},
		[](float, float, float, int64_t p, int64_t f) { return static_cast<float>(-100 - 3 * p + 2 * f); });
}

// REDUCE in each layout: sum (f32-accurate), max and min (exact, NaN propagates:
// row 5 holds one), rows of 43 and of 300 elements.
Test(tile_engines, reductions_agree_in_place_strided_and_bf16)
{
	for (const Layout &l : kLayouts)
		for (int64_t F : {int64_t{43}, int64_t{300}})
			for (uint32_t fn : {NEURON_PW_ADD, NEURON_PW_MAXIMUM, NEURON_PW_MINIMUM}) {
				std::vector<Arg> args{Arg(f32, kP), Arg(f32, kP * F)};
				ref::Rng rng(22);
				args[1].fill_random(rng, -5, 5);
				args[1].set(5 * F + F / 2, NAN);
				std::vector<neuron_tile_insn> p{
					load(1, kP, F, 0),
					insn(NEURON_TILE_OP_TENSOR_COPY, {tile(l, kP, F, kX), sbuf(f32, kP, F)}),
					insn(NEURON_TILE_OP_REDUCE, {sbuf(f32, kP, 1, {kOut}), tile(l, kP, F, kX)}, fn),
					store(0, kP, 1, kOut)};
				th::run(p, args);
				for (int64_t r = 0; r < kP; ++r) {
					double want = fn == NEURON_PW_ADD ? 0 : fn == NEURON_PW_MAXIMUM ? -INFINITY : INFINITY;
					for (int64_t c = 0; c < F; ++c) {
						const double v = stored(l, args[1].get(r * F + c));
						want = fn == NEURON_PW_ADD ? want + v
						       : v != v || want != want ? NAN
						       : fn == NEURON_PW_MAXIMUM ? std::max(want, v)
										 : std::min(want, v);
					}
					const double got = args[0].get(r);
					cr_assert(same(got, static_cast<float>(want)) || std::fabs(got - want) <= 1e-6 * F,
						  "%s, F %lld, fn %u, row %lld: %.9g, want %.9g", l.name, (long long)F, fn,
						  (long long)r, got, want);
				}
			}
}

// TRANSPOSE from an f32 tile (read in place) and from a bf16 one (converted), exact;
// shapes of whole 8 x 8 blocks, blocks with edges, and edges only (rows::transpose32).
Test(tile_engines, transpose_in_place_and_bf16)
{
	const int64_t shapes[][2] = {{40, 37}, {128, 128}, {5, 3}, {9, 64}};
	for (const Layout &l : kLayouts)
		for (const auto &shape : shapes) {
			const int64_t P = shape[0], F = shape[1];
			std::vector<Arg> args{Arg(f32, P * F), Arg(f32, P * F)};
			ref::Rng rng(23);
			args[1].fill_random(rng);
			std::vector<neuron_tile_insn> p{
				load(1, P, F), insn(NEURON_TILE_OP_TENSOR_COPY, {tile(l, P, F, kX), sbuf(f32, P, F)}),
				insn(NEURON_TILE_OP_TRANSPOSE, {psum(F, P), tile(l, P, F, kX)}),
				insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, F, P, {kOut}), psum(F, P)}), store(0, F, P, kOut)};
			th::run(p, args);
			for (int64_t i = 0; i < P; ++i)
				for (int64_t j = 0; j < F; ++j)
					cr_assert_eq(args[0].get(j * P + i), stored(l, args[1].get(i * F + j)), "%s %lldx%lld [%lld, %lld]",
						     l.name, (long long)P, (long long)F, (long long)i, (long long)j);
		}
}

// [P, 1] ops (an online softmax's statistics) walk their partitions as one row:
// exp(x - y) and max(x, y) per partition, f32 and bf16, with a partition mask
// (rows past it keep the memset's 7).
Test(tile_engines, column_ops_with_partition_mask)
{
	const int64_t P = 100, rows = 77;
	for (const Layout &l : {kLayouts[0], kLayouts[2]})
		for (uint32_t fn : {NEURON_PW_EXP, NEURON_PW_MAXIMUM}) {
			std::vector<Arg> args{Arg(f32, P), Arg(f32, P), Arg(f32, P)};
			ref::Rng rng(24);
			args[1].fill_random(rng, -2, 2);
			args[2].fill_random(rng, -2, 2);
			args[1].set(9, NAN);
			const auto col = [&](int64_t at) { return tile(l, P, 1, at); };
			neuron_tile_insn op = fn == NEURON_PW_EXP
						      ? insn(NEURON_TILE_OP_ACTIVATION, {col(kOut), col(kX), col(kY)}, fn)
						      : insn(NEURON_TILE_OP_TENSOR_TENSOR, {col(kOut), col(kX), col(kY)}, fn);
			op.f[0] = 1;
			neuron_tile_insn neg = insn(NEURON_TILE_OP_TENSOR_SCALAR, {col(kY), col(kY)}, NEURON_PW_MUL);
			neg.f[0] = fn == NEURON_PW_EXP ? -1.0 : 1.0;
			neuron_tile_insn init = insn(NEURON_TILE_OP_MEMSET, {col(kOut)});
			init.f[0] = 7;
			std::vector<neuron_tile_insn> p{
				load(1, P, 1, 0), load(2, P, 1, 1024),
				insn(NEURON_TILE_OP_TENSOR_COPY, {col(kX), sbuf(f32, P, 1)}),
				insn(NEURON_TILE_OP_TENSOR_COPY, {col(kY), sbuf(f32, P, 1, {1024})}), neg, init,
				masked(op, 0, {}, rows, 0), insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, P, 1, {kDense}), col(kOut)}),
				store(0, P, 1, kDense)};
			th::run(p, args);
			for (int64_t r = 0; r < P; ++r) {
				const float x = static_cast<float>(stored(l, args[1].get(r)));
				const float y = static_cast<float>(stored(l, args[2].get(r)));
				const float w = r >= rows ? 7.0f
						: fn == NEURON_PW_EXP ? static_cast<float>(std::exp(static_cast<double>(x + -y + 0.0f)))
						: x != x ? NAN : std::max(x, y);
				const double want = stored(l, w), got = args[0].get(r);
				cr_assert(same(got, want) || std::fabs(got - want) <= 1e-6 * std::fabs(want) + (l.dtype == f32 ? 0 : 8e-3 * std::fabs(want)),
					  "%s fn %u row %lld: %.9g, want %.9g", l.name, fn, (long long)r, got, want);
			}
		}
}
