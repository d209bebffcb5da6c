// Affine loops on lanes (runtime/tile/independence.cpp, execution.h): which loops
// the analysis lets run their iterations on several threads, and that a run on
// lanes leaves exactly the bits of the in-order run (HBM results and the whole
// on-chip memory), on threads and one step at a time (as the scheduler preempts
// it), with the validator's step count.
#include "harness.h"
#include "canonical_kernels.h"

#include <cmath>
#include <cstring>
#include <thread>

using th::Arg;

namespace {

const uint8_t f32 = NEURON_DTYPE_F32;

// Bytes of the on-chip memory an execution ended with.
std::vector<std::byte> onchip_bytes(const neuron::tile::Execution &e, const neuron::tile::TileProgram &p)
{
	auto &m = const_cast<neuron::chip::OnChipMemory &>(e.memory());
	const uint32_t P = p.onchip.partitions;
	std::vector<std::byte> out(P * (p.sbuf_bytes_used + p.psum_bytes_used));
	std::byte *to = out.data();
	for (uint32_t q = 0; q < P && p.sbuf_bytes_used; ++q, to += p.sbuf_bytes_used)
		std::memcpy(to, m.sbuf(q, 0), p.sbuf_bytes_used);
	for (uint32_t q = 0; q < P && p.psum_bytes_used; ++q, to += p.psum_bytes_used)
		std::memcpy(to, m.psum(q, 0), p.psum_bytes_used);
	return out;
}

struct Result {
	std::vector<std::vector<std::byte>> args;
	std::vector<std::byte> onchip;
	uint64_t steps = 0;
	bool forked = false;
};

// Runs p over copies of args with `lanes` lanes: on a thread per lane, or
// (stepwise) one step at a time round robin over the lanes from this thread.
Result run(std::shared_ptr<const neuron::tile::TileProgram> p, const std::vector<Arg> &args, int lanes, bool stepwise)
{
	std::vector<Arg> copy = args;
	auto ptrs = th::pointers(copy);
	neuron::tile::Execution e(p, lanes);
	Result r;
	while (!e.done()) {
		if (!e.forked()) {
			e.step(ptrs);
			continue;
		}
		r.forked = true;
		if (stepwise) {
			for (bool all = false; !all;) {
				all = true;
				for (size_t k = 0; k < e.lanes(); ++k)
					if (!e.lane_done(k))
						all = e.step_lane(k, ptrs) && all;
			}
		} else {
			std::vector<std::thread> threads;
			for (size_t k = 0; k < e.lanes(); ++k)
				threads.emplace_back([&e, &ptrs, k] {
					while (!e.step_lane(k, ptrs)) {
					}
				});
			for (std::thread &t : threads)
				t.join();
		}
		e.join();
	}
	for (Arg &a : copy)
		r.args.push_back(a.bytes);
	r.onchip = onchip_bytes(e, *p);
	r.steps = e.steps_run();
	return r;
}

// Lanes 2 and 3, on threads and stepwise, against the in-order run: the same bytes.
void expect_in_order_bits(std::shared_ptr<const neuron::tile::TileProgram> p, const std::vector<Arg> &args,
			  bool want_fork)
{
	const Result seq = run(p, args, 1, false);
	cr_assert(!seq.forked);
	cr_expect_eq(seq.steps, p->steps);
	for (int lanes : {2, 3})
		for (bool stepwise : {false, true}) {
			const Result par = run(p, args, lanes, stepwise);
			cr_expect_eq(par.forked, want_fork, "lanes %d stepwise %d: forked %d", lanes, stepwise, par.forked);
			cr_expect_eq(par.steps, p->steps, "lanes %d: %llu steps, the validator counts %llu", lanes,
				     (unsigned long long)par.steps, (unsigned long long)p->steps);
			for (size_t a = 0; a < args.size(); ++a)
				cr_assert(par.args[a] == seq.args[a], "lanes %d stepwise %d: argument %zu differs from the in-order run",
					  lanes, stepwise, a);
			cr_assert(par.onchip == seq.onchip, "lanes %d stepwise %d: on-chip memory differs", lanes, stepwise);
		}
}

std::vector<size_t> parallel_loops(const neuron::tile::TileProgram &p)
{
	std::vector<size_t> v;
	for (size_t k = 0; k < p.parallel.size(); ++k)
		if (p.parallel[k])
			v.push_back(k);
	return v;
}

} // namespace

// The matmul's row-tile loop: each iteration writes its own rows of C and reuses
// the same SBUF/PSUM tiles after zeroing them; the K loop inside accumulates in
// PSUM (a carried dependency) and runs in order within each iteration.
Test(tile_parallel, matmul_row_tiles_run_on_lanes_with_the_in_order_bits)
{
	const int64_t M = 512 + 37, K = 300, N = 700;
	ref::Rng rng(5);
	std::vector<Arg> args{Arg(f32, M * N), Arg(f32, M * K), Arg(f32, K * N)};
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	auto p = th::validated(tk::matmul(f32, M, K, N), args);
	cr_assert(parallel_loops(*p) == std::vector<size_t>{0}, "only the row-tile loop (instruction 0) is parallel");
	expect_in_order_bits(p, args, true);
	const Result r = run(p, args, 2, false);
	std::vector<Arg> out = args;
	out[0].bytes = r.args[0];
	for (int64_t m = 0; m < M; m += 61)
		for (int64_t n = 0; n < N; n += 7) {
			double want = 0, mag = 0;
			for (int64_t k = 0; k < K; ++k) {
				want += args[1].get(m * K + k) * args[2].get(k * N + n);
				mag += std::fabs(args[1].get(m * K + k) * args[2].get(k * N + n));
			}
			cr_assert(std::fabs(out[0].get(m * N + n) - want) <= 1e-5 * mag + 1e-6, "C[%lld][%lld]", (long long)m,
				  (long long)n);
		}
}

// One row tile: the only loop with several iterations is K's, which accumulates
// into one PSUM tile (NKI allows it in an affine loop; it is not independent).
Test(tile_parallel, psum_accumulation_across_iterations_stays_in_order)
{
	const int64_t M = 128, K = 128 * 64, N = 512;
	ref::Rng rng(6);
	std::vector<Arg> args{Arg(f32, M * N), Arg(f32, M * K), Arg(f32, K * N)};
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	auto p = th::validated(tk::matmul(f32, M, K, N), args);
	cr_expect(parallel_loops(*p).empty());
	expect_in_order_bits(p, args, false);
}

namespace {

// loop(trip) { t = iota(base = iteration); [t = t + 1 (carried)]; store t to
// row block (per_iteration ? iteration : 0) of arg 0 }, t a [128, 512] f32 tile.
std::vector<neuron_tile_insn> store_loop(int64_t trip, bool per_iteration, bool carried, uint8_t flags = 0)
{
	using namespace tb;
	const int64_t P = 128, F = 512;
	const neuron_tile_ap t = sbuf(f32, P, F);
	std::vector<neuron_tile_insn> p{insn(NEURON_TILE_OP_MEMSET, {t}), loop(trip, flags)};
	if (!carried) {
		neuron_tile_insn io = insn(NEURON_TILE_OP_IOTA, {t});
		io.base = Affine{0, {1}}.get();
		io.i[0] = 1;
		io.i[1] = 0;
		p.push_back(io);
	}
	neuron_tile_insn add = insn(NEURON_TILE_OP_TENSOR_SCALAR, {t, t}, NEURON_PW_ADD);
	add.f[0] = 1.0;
	p.push_back(add);
	p.push_back(insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, P, F, F, {0, {per_iteration ? P * F : 0}}), t}));
	p.push_back(end_loop());
	return p;
}

} // namespace

Test(tile_parallel, iterations_writing_their_own_rows_run_on_lanes)
{
	std::vector<Arg> args{Arg(f32, 64 * 128 * 512)};
	auto p = th::validated(store_loop(64, true, false), args);
	cr_expect(parallel_loops(*p) == std::vector<size_t>{1});
	expect_in_order_bits(p, args, true);
	const Result r = run(p, args, 3, false);
	std::vector<Arg> out = args;
	out[0].bytes = r.args[0];
	for (int64_t i = 0; i < 64; ++i)
		cr_assert_eq(out[0].get(size_t(i * 128 * 512 + 5 * 512 + 9)), double(i + 5 + 1));
}

// Every iteration stores to the same HBM rows: the last one wins in order, so the
// loop is not parallel (NKI's err_unexpected_output_dependencies; neurond runs
// it in order rather than refusing it).
Test(tile_parallel, iterations_writing_the_same_hbm_bytes_stay_in_order)
{
	std::vector<Arg> args{Arg(f32, 128 * 512)};
	auto p = th::validated(store_loop(64, false, false), args);
	cr_expect(parallel_loops(*p).empty());
	expect_in_order_bits(p, args, false);
	const Result r = run(p, args, 2, false);
	std::vector<Arg> out = args;
	out[0].bytes = r.args[0];
	cr_expect_eq(out[0].get(0), 64.0);
}

// An iteration reads the SBUF tile the previous one wrote (t = t + 1 each time).
Test(tile_parallel, a_value_carried_in_sbuf_stays_in_order)
{
	std::vector<Arg> args{Arg(f32, 64 * 128 * 512)};
	auto p = th::validated(store_loop(64, true, true), args);
	cr_expect(parallel_loops(*p).empty());
	expect_in_order_bits(p, args, false);
	const Result r = run(p, args, 2, false);
	std::vector<Arg> out = args;
	out[0].bytes = r.args[0];
	cr_expect(std::isnan(out[0].get(0)) == false);
	cr_expect_eq(out[0].get(63 * 128 * 512), 0.0 + 64.0);
}

Test(tile_parallel, sequential_loops_and_small_loops_stay_in_order)
{
	std::vector<Arg> args{Arg(f32, 64 * 128 * 512)};
	cr_expect(parallel_loops(*th::validated(store_loop(64, true, false, NEURON_TILE_SEQUENTIAL), args)).empty());
	cr_expect(parallel_loops(*th::validated(store_loop(2, true, false), args)).empty(), "too little work to fork");
}

// An output argument overlapping another argument at run time: the fork is refused
// and the loop runs in order (the analysis assumed distinct arguments).
Test(tile_parallel, aliased_arguments_run_in_order)
{
	using namespace tb;
	const int64_t P = 128, F = 512, T = 32;
	std::vector<Arg> args{Arg(f32, T * P * F), Arg(f32, T * P * F)};
	const neuron_tile_ap t = sbuf(f32, P, F);
	std::vector<neuron_tile_insn> insns{loop(T), insn(NEURON_TILE_OP_DMA, {t, hbm(f32, 1, P, F, F, {0, {P * F}})})};
	neuron_tile_insn add = insn(NEURON_TILE_OP_TENSOR_SCALAR, {t, t}, NEURON_PW_ADD);
	add.f[0] = 1.0;
	insns.push_back(add);
	insns.push_back(insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, P, F, F, {0, {P * F}}), t}));
	insns.push_back(end_loop());
	auto p = th::validated(insns, args);
	cr_assert(parallel_loops(*p) == std::vector<size_t>{0});
	ref::Rng rng(9);
	args[1].fill_random(rng);
	std::vector<std::byte *> same{args[1].bytes.data(), args[1].bytes.data()};
	const std::vector<std::byte> before = args[1].bytes;
	neuron::tile::Execution e(p, 2);
	while (!e.step(same))
		cr_assert(!e.forked(), "forked over aliased arguments");
	std::vector<Arg> in = args;
	in[1].bytes = before;
	for (size_t i = 0; i < args[1].size(); i += 997)
		cr_assert_eq(args[1].get(i), double(float(in[1].get(i) + 1.0f)));
}

// Two stores per iteration into a stacked output [2, T, P, F] (flash attention's
// dk/dv): disjoint across iterations, so parallel. Shifted by one block, the
// second store meets the next iteration's first: in order.
Test(tile_parallel, stacked_outputs_are_disjoint_shifted_ones_are_not)
{
	using namespace tb;
	const int64_t P = 128, F = 512, T = 32;
	for (int64_t second : {T * P * F, P * F}) {
		std::vector<Arg> args{Arg(f32, 2 * T * P * F)};
		const neuron_tile_ap t = sbuf(f32, P, F);
		neuron_tile_insn io = insn(NEURON_TILE_OP_IOTA, {t});
		io.base = Affine{0, {1}}.get();
		io.i[0] = 1;
		const std::vector<neuron_tile_insn> insns{
			loop(T), io, insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, P, F, F, {0, {P * F}}), t}),
			insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, P, F, F, {second, {P * F}}), t}), end_loop()};
		auto p = th::validated(insns, args);
		const bool disjoint = second == T * P * F;
		cr_expect_eq(parallel_loops(*p).size(), disjoint ? 1u : 0u, "second store at %lld", (long long)second);
		expect_in_order_bits(p, args, disjoint);
	}
}
