// A long tile kernel (<neuron/tile.h>, a TILE_KERNEL node) from a training tenant
// yields at its loop boundaries: on an inference core lent to the trainer, an
// inference tenant's small commands complete while the kernel is still running,
// on both backends (on kmd each step is a compute job, the kernel's state saved
// in device memory between them), and the kernel's result is the same bits as the same tile program run whole
// (unpreempted) by the interpreter in this process. Ordering is asserted, not
// timing (the approach of test_preemption.cpp's program-replay test).
#include "sharing_test.h"

#include "../tile/canonical_kernels.h"
#include "../tile/harness.h"
#include "../tile/kernel_program.h"

#include <tile/program.h>

#include <cstdio>
#include <cstring>
#include <vector>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

// threads: host threads per core; with 2 the kernel's row-tile loop (affine,
// independent iterations: runtime/tile/independence.cpp) runs on two lanes, which
// must yield at their steps and give the bits of the in-order run all the same
// (on kmd the loop runs in order, one lane: runtime/kmd/README.md "Tile kernels").
static void yields_and_stays_exact(const char *threads)
{
	start_daemon({"--cores", "2", "--threads-per-core", threads});
	Tenant train, infer;
	// Two logical cores, the kernel on each: one of them runs on the lent core.
	train.open("trainer", NEURON_TENANT_TRAINING, 2);
	infer.open("server", NEURON_TENANT_INFERENCE, 1);
	api::Response r = lend(api::POOL_INFERENCE, 1);
	cr_assert(r.has_loans(), "lend");

	// The tiled matmul kernel (tests/tile/canonical_kernels.h) on 512 x 8192 x 512:
	// 4 x 64 loop iterations of a 128 x 128 x 512 matmul each, every one a step
	// (a point where the core may switch tenants). Long enough in steps that the
	// kernels outlast five inference commands now that a step runs at BLAS speed.
	constexpr int64_t M = 512, K = 8192, N = 512;
	std::vector<th::Arg> args{th::Arg(NEURON_DTYPE_F32, M * N), th::Arg(NEURON_DTYPE_F32, M * K),
				  th::Arg(NEURON_DTYPE_F32, K * N)};
	ref::Rng rng(17);
	args[1].fill_random(rng);
	args[2].fill_random(rng);
	const auto insns = tk::matmul(NEURON_DTYPE_F32, M, K, N);
	const th::KernelProgram kernel(th::sizes_of(args), insns);
	const std::vector<uint64_t> &bytes = kernel.bytes;
	const uint64_t da = train.alloc(bytes[1]), db = train.alloc(bytes[2]);
	upload(train.dma, da, args[1].bytes.data(), bytes[1]);
	upload(train.dma, db, args[2].bytes.data(), bytes[2]);
	const uint64_t dout[2] = {train.alloc(bytes[0]), train.alloc(bytes[0])};
	uint64_t replay[2] = {0, 0};
	for (int q = 0; q < 2; ++q) {
		uint64_t program = 0;
		cr_assert(kernel.enrol(train.client, &program) == NEURON_OK,
			  "register: %s", neuron_last_error());
		const uint64_t bindings[3] = {dout[q], da, db};
		cr_assert(neuron_submit_program(train.cores[q], program, bindings, 3, nullptr, &replay[q]) == NEURON_OK);
	}
	wait_for_tiles(8); // the kernels are on the cores (their steps are the tiles run so far)
	cr_assert(neuron_queue_completed(train.cores[0]) < replay[0] && neuron_queue_completed(train.cores[1]) < replay[1],
		  "the kernels finished before the inference tenant started: make them longer");

	// Small inference commands, one after the other, each waited for.
	constexpr int kInference = 5;
	const uint64_t buf = infer.alloc(16384 * 4);
	const neuron_cmd zero = fill_cmd(buf, 16384, 0.0);
	uint64_t zseq;
	cr_assert(neuron_submit(infer.cores[0], &zero, &zseq) == NEURON_OK);
	int done_while_running = 0;
	for (int i = 0; i < kInference; ++i) {
		const neuron_cmd add = add_scalar_cmd(buf, 16384, 1.0);
		uint64_t seq;
		cr_assert(neuron_submit(infer.cores[0], &add, &seq) == NEURON_OK);
		cr_assert(neuron_queue_wait(infer.cores[0], seq, test::wait_ns(30'000'000'000)) == NEURON_OK);
		done_while_running += neuron_queue_completed(train.cores[0]) < replay[0] &&
				      neuron_queue_completed(train.cores[1]) < replay[1];
	}
	for (int q = 0; q < 2; ++q)
		cr_assert(neuron_queue_wait(train.cores[q], replay[q], test::wait_ns(120'000'000'000)) == NEURON_OK,
			  "kernel %d: %s", q, neuron_last_error());

	// The inference tenant's commands did run (each added 1 to every element).
	std::vector<float> sums(16384);
	download(infer.dma, sums.data(), buf, sums.size() * 4);
	for (float v : sums)
		cr_assert(v == float(kInference), "inference result %g, want %d", v, kInference);

	// The same program run whole in this process: the preempted runs give its bits.
	th::run(insns, args);
	std::vector<std::byte> got(bytes[0]);
	for (int q = 0; q < 2; ++q) {
		download(train.dma, got.data(), dout[q], bytes[0]);
		cr_assert(std::memcmp(got.data(), args[0].bytes.data(), bytes[0]) == 0,
			  "kernel %d's result differs from the unpreempted run", q);
	}
	std::printf("figure: inference commands completed while the %lldx%lldx%lld matmul kernel ran: %d of %d\n",
		    (long long)M, (long long)K, (long long)N, done_while_running, kInference);
	cr_assert_eq(done_while_running, kInference,
		     "an inference command waited for the whole kernel (a kernel must yield at its loop boundaries)");
	train.close();
	infer.close();
}

Test(kernel_preemption, a_long_kernel_yields_to_inference_and_stays_exact, .fini = down, .timeout = 300)
{
	yields_and_stays_exact("1");
}

Test(kernel_preemption, a_kernel_on_lanes_yields_to_inference_and_stays_exact, .fini = down, .timeout = 300)
{
	yields_and_stays_exact("2");
}
