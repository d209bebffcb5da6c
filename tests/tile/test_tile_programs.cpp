// Whole tile programs against CPU references in double: a tiled matmul and
// RMSNorm on shapes that do not divide the tiles, in f32 and bf16, run whole and
// one loop iteration at a time (how the scheduler runs them: preemptible between
// iterations).
#include "harness.h"
#include "canonical_kernels.h"

#include <cmath>

using th::Arg;

namespace {

void check_matmul(uint8_t dt, int64_t M, int64_t K, int64_t N, bool stepwise)
{
	ref::Rng rng(M * 7 + K * 3 + N);
	std::vector<Arg> args{Arg(NEURON_DTYPE_F32, M * N), Arg(dt, M * K), Arg(dt, K * N)};
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	const auto insns = tk::matmul(dt, M, K, N);
	auto p = th::validated(insns, args);
	auto ptrs = th::pointers(args);
	if (stepwise) {
		neuron::tile::Execution e(p);
		uint64_t steps = 0;
		while (!e.step(ptrs))
			++steps;
		cr_expect_eq(steps + 1, p->steps, "the validator counts %llu steps, the run took %llu",
			     (unsigned long long)p->steps, (unsigned long long)steps + 1);
	} else {
		neuron::tile::run(p, ptrs);
	}
	for (int64_t m = 0; m < M; ++m)
		for (int64_t n = 0; n < N; ++n) {
			double want = 0, mag = 0;
			for (int64_t k = 0; k < K; ++k) {
				want += args[1].get(m * K + k) * args[2].get(k * N + n);
				mag += std::fabs(args[1].get(m * K + k) * args[2].get(k * N + n));
			}
			const double got = args[0].get(m * N + n);
			cr_assert(std::fabs(got - want) <= 1e-5 * mag + 1e-6, "%s C[%lld][%lld] = %g, want %g (M %lld K %lld N %lld)",
				  ref::dname(dt), (long long)m, (long long)n, got, want, (long long)M, (long long)K, (long long)N);
		}
}

void check_rmsnorm(uint8_t dt, int64_t R, int64_t H)
{
	ref::Rng rng(R * 31 + H);
	const double eps = 1e-6;
	std::vector<Arg> args{Arg(dt, R * H), Arg(dt, R * H), Arg(NEURON_DTYPE_F32, H)};
	args[1].fill_random(rng, -3, 3);
	args[2].fill_random(rng, 0.5, 1.5);
	th::run(tk::rmsnorm(dt, R, H, eps), args);
	const double tol = dt == NEURON_DTYPE_F32 ? 1e-5 : 1e-2;
	for (int64_t r = 0; r < R; ++r) {
		double ss = 0;
		for (int64_t h = 0; h < H; ++h)
			ss += args[1].get(r * H + h) * args[1].get(r * H + h);
		const double rstd = 1.0 / std::sqrt(ss / double(H) + eps);
		for (int64_t h = 0; h < H; ++h) {
			const double want = args[1].get(r * H + h) * rstd * args[2].get(h);
			const double got = args[0].get(r * H + h);
			cr_assert(std::fabs(got - want) <= tol * (1 + std::fabs(want)), "%s out[%lld][%lld] = %g, want %g",
				  ref::dname(dt), (long long)r, (long long)h, got, want);
		}
	}
}

} // namespace

Test(tile_programs, matmul_f32_tails)
{
	check_matmul(NEURON_DTYPE_F32, 200, 300, 700, false);
}

Test(tile_programs, matmul_bf16_one_partial_tile)
{
	check_matmul(NEURON_DTYPE_BF16, 5, 17, 9, false);
}

Test(tile_programs, matmul_stepwise_same_result_and_step_count)
{
	check_matmul(NEURON_DTYPE_BF16, 130, 129, 513, true);
}

Test(tile_programs, rmsnorm_f32_row_tail)
{
	check_rmsnorm(NEURON_DTYPE_F32, 300, 96);
}

Test(tile_programs, rmsnorm_bf16)
{
	check_rmsnorm(NEURON_DTYPE_BF16, 128, 257);
}

// A masked store never writes past its rows: the bytes after the output stay.
Test(tile_programs, masked_store_leaves_the_rest)
{
	const int64_t R = 130, H = 8;
	std::vector<Arg> args{Arg(NEURON_DTYPE_F32, 256 * H), Arg(NEURON_DTYPE_F32, R * H), Arg(NEURON_DTYPE_F32, H)};
	ref::Rng rng(5);
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	for (size_t i = 0; i < args[0].size(); ++i)
		args[0].set(i, 1234.0);
	th::run(tk::rmsnorm(NEURON_DTYPE_F32, R, H, 1e-5), args);
	for (size_t i = R * H; i < args[0].size(); ++i)
		cr_assert_eq(args[0].get(i), 1234.0, "element %zu past the %lld rows was written", i, (long long)R);
	cr_expect_neq(args[0].get(R * H - 1), 1234.0);
}

// Code after the last loop runs as a step of its own: the step count the
// validator gives the scheduler is the number of steps the run takes.
Test(tile_programs, trailing_code_is_one_more_step)
{
	using namespace tb;
	const uint8_t f32 = NEURON_DTYPE_F32;
	std::vector<Arg> args{Arg(f32, 4 * 8)};
	std::vector<neuron_tile_insn> p{insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 8)}), loop(3), loop(2),
					insn(NEURON_TILE_OP_TENSOR_SCALAR, {sbuf(f32, 4, 8), sbuf(f32, 4, 8)}, NEURON_PW_ADD),
					end_loop(), end_loop(),
					insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, 4, 8, 8), sbuf(f32, 4, 8)})};
	p[3].f[0] = 1.0;
	auto prog = th::validated(p, args);
	cr_expect_eq(prog->steps, 3 * 2 + 3 + 1);
	auto ptrs = th::pointers(args);
	neuron::tile::Execution e(prog);
	uint64_t steps = 1;
	while (!e.step(ptrs))
		++steps;
	cr_expect_eq(steps, prog->steps);
	for (size_t i = 0; i < args[0].size(); ++i)
		cr_assert_eq(args[0].get(i), 6.0);
}
