// A kernel's state saved between jobs (Execution::save/load, runtime/tile/state.cpp):
// run one step per fresh execution, each loading what the previous one saved (as
// the kmd engine does through a per-command BO), and the results and the on-chip
// memory are the bits of the run in one execution; a state the program cannot be
// in is refused.
#include "harness.h"
#include "canonical_kernels.h"

#include <cstring>

using th::Arg;

namespace {

const uint8_t f32 = NEURON_DTYPE_F32;

// Runs p step by step, every step in a new execution loaded from the bytes the
// last one saved; returns the final state's bytes (of the last saved step).
std::vector<std::byte> run_through_saves(std::shared_ptr<const neuron::tile::TileProgram> p, std::vector<Arg> &args)
{
	auto ptrs = th::pointers(args);
	std::vector<std::byte> state(neuron::tile::Execution::state_bytes(*p));
	for (uint64_t s = 0; s < p->steps; ++s) {
		neuron::tile::Execution e(p);
		if (s > 0) {
			const std::string why = e.load(state);
			cr_assert(why.empty(), "step %llu: %s", (unsigned long long)s, why.c_str());
		}
		cr_assert_eq(e.steps_run(), s);
		const bool done = e.step(ptrs);
		cr_assert_eq(done, s + 1 == p->steps, "step %llu of %llu: done %d", (unsigned long long)s,
			     (unsigned long long)p->steps, done);
		e.save(state);
	}
	return state;
}

// The same state from the in-order run in one execution.
std::vector<std::byte> run_in_one(std::shared_ptr<const neuron::tile::TileProgram> p, std::vector<Arg> &args)
{
	auto ptrs = th::pointers(args);
	neuron::tile::Execution e(p);
	while (!e.step(ptrs)) {
	}
	std::vector<std::byte> state(neuron::tile::Execution::state_bytes(*p));
	e.save(state);
	return state;
}

void expect_same_bits(const std::vector<neuron_tile_insn> &insns, std::vector<Arg> args)
{
	auto p = th::validated(insns, args);
	cr_assert_gt(p->steps, 2u, "a kernel of several steps");
	std::vector<Arg> once = args, saved = args;
	const std::vector<std::byte> a = run_in_one(p, once);
	const std::vector<std::byte> b = run_through_saves(p, saved);
	for (size_t k = 0; k < args.size(); ++k)
		cr_assert(once[k].bytes == saved[k].bytes, "argument %zu differs", k);
	cr_assert(a == b, "the final state (cursor and on-chip bytes) differs");
	cr_expect_eq(a.size(), 72 + p->onchip.partitions * (p->sbuf_bytes_used + p->psum_bytes_used));
}

} // namespace

Test(tile_state, matmul_through_saved_states_has_the_bits_of_one_run)
{
	const int64_t M = 256 + 13, K = 300, N = 200;
	ref::Rng rng(11);
	std::vector<Arg> args{Arg(f32, M * N), Arg(f32, M * K), Arg(f32, K * N)};
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	expect_same_bits(tk::matmul(f32, M, K, N), args);
}

Test(tile_state, rmsnorm_through_saved_states_has_the_bits_of_one_run)
{
	const int64_t R = 128 * 3 + 5, H = 96;
	ref::Rng rng(12);
	std::vector<Arg> args{Arg(f32, R * H), Arg(f32, R * H), Arg(f32, H)};
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	expect_same_bits(tk::rmsnorm(f32, R, H, 1e-6), args);
}

// Bytes the program cannot stand at are refused (the engine runs without bounds
// checks on the strength of validation, so a cursor must be one it reaches).
Test(tile_state, load_refuses_a_state_the_program_cannot_be_in)
{
	const int64_t M = 256, K = 256, N = 128;
	std::vector<Arg> args{Arg(f32, M * N), Arg(f32, M * K), Arg(f32, K * N)};
	auto p = th::validated(tk::matmul(f32, M, K, N), args);
	auto ptrs = th::pointers(args);
	neuron::tile::Execution e(p);
	e.step(ptrs);
	std::vector<std::byte> good(neuron::tile::Execution::state_bytes(*p));
	e.save(good);
	auto refused = [&](std::vector<std::byte> bytes, const char *part) {
		neuron::tile::Execution f(p);
		const std::string why = f.load(bytes);
		cr_assert(!why.empty(), "accepted (%s)", part);
		th::expect_contains(why, part);
	};
	{
		neuron::tile::Execution f(p);
		cr_expect(f.load(good).empty());
	}
	refused(std::vector<std::byte>(good.begin(), good.end() - 1), "bytes");
	auto patch = [&](size_t offset, int64_t v) {
		std::vector<std::byte> b = good;
		std::memcpy(b.data() + offset, &v, sizeof(v));
		return b;
	};
	refused(patch(0, 0), "header");                               // magic
	refused(patch(8, int64_t(p->insns.size()) + 1), "pc");        // pc
	refused(patch(16, int64_t(p->steps)), "steps");               // steps run
	refused(patch(24, -1), "loop variable 0");                    // iv[0]
	refused(patch(24 + 3 * 8, 1), "loop variable 3");             // a closed loop's variable
	std::vector<std::byte> depth = good;
	uint32_t d = 0;
	std::memcpy(&d, depth.data() + 4, sizeof(d));
	d = d ? d - 1 : 1; // one loop more or fewer than are open there
	std::memcpy(depth.data() + 4, &d, sizeof(d));
	refused(depth, "depth");
}
