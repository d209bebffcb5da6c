// Tile kernels through neurond (<neuron/tile.h>, TILE_KERNEL nodes of a
// program): registered once with their program, validated for the device's
// profile, replayed with one EXEC_PROGRAM whose kernel runs on the simulated
// core's SBUF/PSUM engines one loop iteration per tile (on kmd one compute job
// per step, the kernel's state saved in device memory between them); bad kernels
// are refused at registration naming the instruction, and a TILE_KERNEL on a ring
// faults.
#include "daemon_backend.h"
#include "daemon_test.h"

#include "../tile/canonical_kernels.h"
#include "../tile/harness.h"
#include "../tile/kernel_program.h"

#include <tile/execution.h>
#include <tile/program.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

using namespace dt;

TestSuite(tile_kernels, .init = daemon_up, .fini = daemon_down, .timeout = 100);

namespace {

using th::KernelProgram;

void expect_refused(neuron_client *c, const KernelProgram &p, const char *needle)
{
	uint64_t id = 0;
	cr_assert(p.enrol(c, &id) != NEURON_OK, "a bad kernel was registered; expected a refusal about '%s'", needle);
	const std::string why = neuron_last_error();
	cr_assert(why.find(needle) != std::string::npos, "refusal '%s' does not mention '%s'", why.c_str(), needle);
}

} // namespace

DAEMON_TEST(tile_kernels, rmsnorm_replays_match_the_cpu)
{
	Tenant t;
	t.open("tile-rmsnorm");
	const int64_t R = 300, H = 64;
	const double eps = 1e-6;
	KernelProgram p({R * H * 4, R * H * 4, H * 4}, tk::rmsnorm(NEURON_DTYPE_F32, R, H, eps));
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(p.enrol(t.client, &id));
	for (uint32_t call = 0; call < 2; ++call) {
		const auto x = random_f32(R * H, 30 + call, -2, 2), g = random_f32(H, 40 + call, 0.5, 1.5);
		const uint64_t dout = dev_alloc(t.client, R * H * 4), dx = dev_alloc(t.client, R * H * 4),
			       dg = dev_alloc(t.client, H * 4);
		upload_f32(t.dma, dx, x);
		upload_f32(t.dma, dg, g);
		const uint64_t bindings[3] = {dout, dx, dg};
		uint64_t seq = 0;
		NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, &seq));
		sync(t.core);
		std::vector<double> ref(R * H);
		for (int64_t r = 0; r < R; ++r) {
			double ss = 0;
			for (int64_t h = 0; h < H; ++h)
				ss += double(x[r * H + h]) * x[r * H + h];
			const double rstd = 1 / std::sqrt(ss / H + eps);
			for (int64_t h = 0; h < H; ++h)
				ref[r * H + h] = x[r * H + h] * rstd * g[h];
		}
		expect_close(download_f32(t.dma, dout, R * H), ref, 1e-5, 1e-6, "rmsnorm tile kernel");
	}
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	t.close();
}

DAEMON_TEST(tile_kernels, matmul_kernel_matches_the_cpu)
{
	Tenant t;
	t.open("tile-matmul");
	const int64_t M = 130, K = 200, N = 600;
	KernelProgram p({M * N * 4, M * K * 4, K * N * 4}, tk::matmul(NEURON_DTYPE_F32, M, K, N));
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(p.enrol(t.client, &id));
	const auto a = random_f32(M * K, 1), b = random_f32(K * N, 2);
	const uint64_t dc = dev_alloc(t.client, M * N * 4), da = dev_alloc(t.client, M * K * 4),
		       db = dev_alloc(t.client, K * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	const uint64_t bindings[3] = {dc, da, db};
	uint64_t seq = 0;
	NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, &seq));
	sync(t.core);
	std::vector<double> ref(M * N, 0.0);
	for (int64_t m = 0; m < M; ++m)
		for (int64_t k = 0; k < K; ++k)
			for (int64_t n = 0; n < N; ++n)
				ref[m * N + n] += double(a[m * K + k]) * b[k * N + n];
	expect_close(download_f32(t.dma, dc, M * N), ref, 1e-4, 1e-4, "matmul tile kernel");
	t.close();
}

DAEMON_TEST(tile_kernels, bad_kernels_are_refused_at_registration)
{
	Tenant t;
	t.open("tile-refusals");
	// x declared one row short: the masked load of the last rows leaves it.
	const int64_t R = 300, H = 64;
	auto insns = tk::rmsnorm(NEURON_DTYPE_F32, R, H, 1e-6);
	insns[2].line = 17;
	expect_refused(t.client, KernelProgram({R * H * 4, (R - 1) * H * 4, H * 4}, insns),
		       "tile program 0: instruction 2 (dma, line 17)");
	// The node passes a 4-byte-short operand for argument 2.
	KernelProgram p({R * H * 4, R * H * 4, H * 4}, insns);
	p.node.cmd.operands[2].sizes[0] -= 4;
	expect_refused(t.client, p, "declares 256 for its argument 2");
	// The kernel stores into argument 1, which the node passes as an input.
	auto writes_x = insns;
	writes_x[8].operands[0].arg = 1;
	expect_refused(t.client, KernelProgram({R * H * 4, R * H * 4, H * 4}, writes_x), "writes its argument 1");
	// A node that names no output.
	expect_refused(t.client, KernelProgram({R * H * 4, R * H * 4, H * 4}, insns, 0), "i[1]=0 outputs");
	t.close();
}

DAEMON_TEST(tile_kernels, tile_kernel_on_a_ring_faults)
{
	Tenant t;
	t.open("tile-ring");
	const uint64_t d = dev_alloc(t.client, 64);
	neuron_cmd c = make_cmd(NEURON_OP_TILE_KERNEL, {desc(d, NEURON_DTYPE_U8, {32}), desc(d + 32, NEURON_DTYPE_U8, {32})});
	c.iscalars[1] = 1;
	submit(t.core, c);
	neuron_queue_sync(t.core, kWaitNs);
	const neuron_fault f = fault_of(t.core);
	cr_expect_eq(f.code, NEURON_FAULT_BAD_OPCODE);
	cr_expect(std::string(f.reason).find("only as a node of a program") != std::string::npos, "reason: %s", f.reason);
	t.close();
}

// A kernel of many steps gives the bits of its program run whole by the
// interpreter in this process, on both backends: on kmd every step is a compute
// job that loads the kernel's state (cursor, the SBUF/PSUM bytes it uses) from a
// BO of the command, runs one loop iteration and stores the state back, so the
// bits also show that nothing is lost between jobs.
DAEMON_TEST(tile_kernels, kernels_of_many_steps_give_the_interpreters_bits)
{
	Tenant t;
	t.open("tile-bits");
	const bool kmd = neuron::test::daemon_runs_kmd(t.client);
	const int64_t M = 256 + 13, K = 300, N = 200;
	std::vector<th::Arg> args{th::Arg(NEURON_DTYPE_F32, M * N), th::Arg(NEURON_DTYPE_F32, M * K),
				  th::Arg(NEURON_DTYPE_F32, K * N)};
	const auto a = random_f32(M * K, 7), b = random_f32(K * N, 8);
	std::memcpy(args[1].bytes.data(), a.data(), a.size() * 4);
	std::memcpy(args[2].bytes.data(), b.data(), b.size() * 4);
	const auto insns = tk::matmul(NEURON_DTYPE_F32, M, K, N);
	const auto tp = th::validated(insns, args);
	cr_assert_gt(tp->steps, 4u);
	KernelProgram p(th::sizes_of(args), insns);
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(p.enrol(t.client, &id));
	const uint64_t dc = dev_alloc(t.client, M * N * 4), da = dev_alloc(t.client, M * K * 4),
		       db = dev_alloc(t.client, K * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	const uint64_t bindings[3] = {dc, da, db};
	double ms[2] = {0, 0};
	for (int call = 0; call < 2; ++call) { // the second: the engine's validated program is cached
		const auto start = std::chrono::steady_clock::now();
		uint64_t seq = 0;
		NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, &seq));
		sync(t.core);
		ms[call] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
	}
	auto ptrs = th::pointers(args);
	const auto start = std::chrono::steady_clock::now();
	neuron::tile::run(tp, ptrs); // in this process: what the kernel costs without jobs or scheduling
	const double local_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
	const std::vector<float> got = download_f32(t.dma, dc, M * N);
	cr_assert(std::memcmp(got.data(), args[0].bytes.data(), M * N * 4) == 0,
		  "the kernel's result differs from the interpreter's bits");
	// "figure:" lines reach the QEMU suite's console (tests/driver/guest-init-daemon.sh).
	std::printf("figure: tile kernel %lldx%lldx%lld f32 matmul through neurond --backend %s: %llu steps, %llu state "
		    "bytes per step, %.1f ms (again %.1f ms); the interpreter in this process %.1f ms\n",
		    (long long)M, (long long)K, (long long)N, kmd ? "kmd" : "emu", (unsigned long long)tp->steps,
		    (unsigned long long)neuron::tile::Execution::state_bytes(*tp), ms[0], ms[1], local_ms);
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	t.close();
}
