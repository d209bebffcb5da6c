// bench-keep-state: what restart survival costs a tenant while nothing restarts
// (daemon/README.md "Restart with tenants alive"). Two neurond run side by side in
// the same run, a plain one and one under --supervise (state kept: memfd HBM, the
// journal, a progress and a "started" store per command, the undo copy of commands
// that cannot be run again exactly). The same tenant work runs on each, in
// alternating rounds, and each row prints kept / plain time per command:
//
//   1. empty command round trip (submit NOP + wait): the per-command stores
//   2. out-of-place add over 4 Mi f32 (run again exactly after a crash: no undo copy)
//   3. in-place add over 4 Mi f32 (x += 1: its 16 MiB are copied to the undo log first)
//   4. fp32 matmul 512 (run again exactly)
//   5. a program replay, t = x + 1 into a 4 Mi f32 scratch buffer then y = t + 1:
//      nothing saved (each replay overwrites t and y before reading them)
//   6. a program replay of x += 1 over 4 Mi f32: x (16 MiB) saved before it runs
//
//   bench-keep-state [--neurond PATH] [--rounds N] [--quick]
#define BENCH_NAME "bench-keep-state"
#include "neuron_check.h"
#include "daemon_launcher.h"
#include "stats.h"

#include <neuron/futex.h>
#include <neuron/neuron.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using neuron::detail::monotonic_ns;

namespace {

constexpr int64_t kElems = 4 << 20;
constexpr int kMatmulN = 512;

// One tenant of one neurond with the operands of every row in device memory.
struct Tenant {
	neuron_client *client = nullptr;
	neuron_queue *core = nullptr, *dma = nullptr;
	uint64_t x = 0, y = 0, a = 0, b = 0, c = 0;
	uint64_t scratch_program = 0, in_place_program = 0;

	explicit Tenant(const std::string &socket)
	{
		neuron_connect_options o = {};
		o.socket_path = socket.c_str();
		o.client_name = "bench-keep-state";
		CHECK(neuron_connect(&o, &client));
		CHECK(neuron_queue_create(client, 0, NEURON_QUEUE_CORE, 0, 0, &core));
		CHECK(neuron_queue_create(client, 0, NEURON_QUEUE_DMA, 0, 0, &dma));
		const uint64_t bytes = uint64_t(kElems) * sizeof(float);
		const uint64_t mbytes = uint64_t(kMatmulN) * kMatmulN * sizeof(float);
		CHECK(neuron_alloc(client, 0, bytes, 0, &x));
		CHECK(neuron_alloc(client, 0, bytes, 0, &y));
		CHECK(neuron_alloc(client, 0, mbytes, 0, &a));
		CHECK(neuron_alloc(client, 0, mbytes, 0, &b));
		CHECK(neuron_alloc(client, 0, mbytes, 0, &c));
		std::vector<float> ones(size_t(kMatmulN) * kMatmulN, 0.5f);
		CHECK(neuron_memcpy_h2d(dma, a, ones.data(), mbytes));
		CHECK(neuron_memcpy_h2d(dma, b, ones.data(), mbytes));
		register_programs();
	}

	void register_programs();
	~Tenant()
	{
		neuron_queue_destroy(core);
		neuron_queue_destroy(dma);
		neuron_disconnect(client);
	}

	// Median time of `reps` round trips (submit, wait), in microseconds.
	double time_us(const std::function<uint64_t(Tenant &)> &submit, int reps)
	{
		std::vector<double> us;
		for (int r = 0; r < reps; ++r) {
			const uint64_t t0 = monotonic_ns();
			const uint64_t seq = submit(*this);
			CHECK(neuron_queue_wait(core, seq, 60'000'000'000));
			us.push_back(double(monotonic_ns() - t0) / 1000.0);
		}
		return bench::median(us);
	}

	float read_first(uint64_t addr)
	{
		float v;
		CHECK(neuron_memcpy_d2h(dma, &v, addr, sizeof v));
		return v;
	}
};

neuron_cmd nop()
{
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_NOP, 0);
	return cmd;
}

neuron_cmd add_scalar(uint64_t out, uint64_t in)
{
	const int64_t n = kElems;
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_ADD_SCALAR, 2);
	cmd.operands[0] = neuron_desc_contiguous(out, NEURON_DTYPE_F32, 1, &n);
	cmd.operands[1] = neuron_desc_contiguous(in, NEURON_DTYPE_F32, 1, &n);
	cmd.fscalars.f[0] = 1.0;
	return cmd;
}

neuron_cmd matmul(const Tenant &t)
{
	const int64_t sizes[2] = {kMatmulN, kMatmulN};
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_MATMUL, 3);
	cmd.operands[0] = neuron_desc_contiguous(t.c, NEURON_DTYPE_F32, 2, sizes);
	cmd.operands[1] = neuron_desc_contiguous(t.a, NEURON_DTYPE_F32, 2, sizes);
	cmd.operands[2] = neuron_desc_contiguous(t.b, NEURON_DTYPE_F32, 2, sizes);
	cmd.fscalars.f[0] = 1.0;
	return cmd;
}

neuron_tensor_desc program_region(uint8_t space, uint32_t index)
{
	const int64_t n = kElems;
	neuron_tensor_desc d = neuron_desc_contiguous(0, NEURON_DTYPE_F32, 1, &n);
	d.mem_space = space;
	d.host_buffer = index;
	return d;
}

void Tenant::register_programs()
{
	const uint64_t bytes = uint64_t(kElems) * sizeof(float);
	const neuron_tensor_desc arg0 = program_region(NEURON_MEM_PROGRAM_ARG, 0),
				 arg1 = program_region(NEURON_MEM_PROGRAM_ARG, 1),
				 t = program_region(NEURON_MEM_PROGRAM_BUFFER, 0);
	// t = x + 1; y = t + 1 (arguments x, y; buffer t).
	const uint64_t two_args[2] = {bytes, bytes}, one_buffer[1] = {bytes};
	const uint32_t dep0[1] = {0};
	neuron_program_node scratch[2]{};
	scratch[0].cmd = add_scalar(0, 0);
	scratch[0].cmd.operands[0] = t;
	scratch[0].cmd.operands[1] = arg0;
	scratch[1].cmd = add_scalar(0, 0);
	scratch[1].cmd.operands[0] = arg1;
	scratch[1].cmd.operands[1] = t;
	scratch[1].deps = dep0;
	scratch[1].dep_count = 1;
	const neuron_program_desc sd = {0, 2, two_args, 1, one_buffer, 2, scratch};
	CHECK(neuron_program_register(client, &sd, &scratch_program));
	// x += 1 (argument x).
	neuron_program_node in_place[1]{};
	in_place[0].cmd = add_scalar(0, 0);
	in_place[0].cmd.operands[0] = arg0;
	in_place[0].cmd.operands[1] = arg0;
	const neuron_program_desc id = {0, 1, two_args, 0, nullptr, 1, in_place};
	CHECK(neuron_program_register(client, &id, &in_place_program));
}

std::function<uint64_t(Tenant &)> command(std::function<neuron_cmd(const Tenant &)> make)
{
	return [make](Tenant &t) {
		const neuron_cmd cmd = make(t);
		uint64_t seq;
		CHECK(neuron_submit(t.core, &cmd, &seq));
		return seq;
	};
}

std::function<uint64_t(Tenant &)> replay(uint64_t Tenant::*program, uint32_t args)
{
	return [program, args](Tenant &t) {
		const uint64_t bindings[2] = {t.x, t.y};
		uint64_t seq;
		CHECK(neuron_submit_program(t.core, t.*program, bindings, args, nullptr, &seq));
		return seq;
	};
}

struct Row {
	const char *name;
	int reps;
	bool adds_one_to_x; // its runs are counted in x, checked at the end
	std::function<uint64_t(Tenant &)> submit;
};

} // namespace

int main(int argc, char **argv)
{
	std::string neurond = "neurond";
	int rounds = 5;
	bool quick = false;
	for (int i = 1; i < argc; ++i) {
		const std::string arg = argv[i];
		if (arg == "--neurond" && i + 1 < argc)
			neurond = argv[++i];
		else if (arg == "--rounds" && i + 1 < argc)
			rounds = std::atoi(argv[++i]);
		else if (arg == "--quick")
			quick = true;
		else {
			std::fprintf(stderr, "usage: bench-keep-state [--neurond PATH] [--rounds N] [--quick]\n");
			return 2;
		}
	}
	if (rounds < 1) {
		std::fprintf(stderr, "bench-keep-state: --rounds must be at least 1\n");
		return 2;
	}
	bench::DaemonLauncher plain_daemon, kept_daemon;
	const std::string plain_socket = plain_daemon.start(neurond, {"--pin-cores", "off"});
	const std::string kept_socket = kept_daemon.start(neurond, {"--pin-cores", "off", "--supervise"});
	if (plain_socket.empty() || kept_socket.empty())
		return 1;
	Tenant plain(plain_socket), kept(kept_socket);

	const int scale = quick ? 4 : 1;
	const std::vector<Row> rows = {
		{"round trip empty command", 2000 / scale, false, command([](const Tenant &) { return nop(); })},
		{"add 4 Mi f32, out of place (rerun exact)", 40 / scale, false,
		 command([](const Tenant &t) { return add_scalar(t.y, t.x); })},
		{"add 4 Mi f32, in place (undo copy)", 40 / scale, true,
		 command([](const Tenant &t) { return add_scalar(t.x, t.x); })},
		{"fp32 matmul 512 (rerun exact)", 20 / scale, false, command([](const Tenant &t) { return matmul(t); })},
		{"replay t = x + 1; y = t + 1 (nothing saved)", 40 / scale, false, replay(&Tenant::scratch_program, 2)},
		{"replay x += 1, 4 Mi f32 (x saved)", 40 / scale, true, replay(&Tenant::in_place_program, 1)},
	};
	std::printf("bench-keep-state: the same commands on a plain neurond and on one keeping state "
		    "(--supervise), %d alternating rounds, median of round medians\n\n",
		    rounds);
	std::printf("%-46s %12s %12s %8s\n", "per command", "plain", "kept", "kept/plain");
	int in_place_runs = 0;
	for (const Row &row : rows) {
		std::vector<double> p, k;
		// Warm both (first touch of the memory, the BLAS pool).
		plain.time_us(row.submit, 2);
		kept.time_us(row.submit, 2);
		for (int r = 0; r < rounds; ++r) {
			// Alternate which side goes first, so a drift of the host's speed
			// within a round does not always land on the same side.
			if (r % 2 == 0) {
				p.push_back(plain.time_us(row.submit, row.reps));
				k.push_back(kept.time_us(row.submit, row.reps));
			} else {
				k.push_back(kept.time_us(row.submit, row.reps));
				p.push_back(plain.time_us(row.submit, row.reps));
			}
		}
		if (row.adds_one_to_x)
			in_place_runs += 2 + rounds * row.reps;
		const double pm = bench::median(p), km = bench::median(k);
		std::printf("%-46s %10.1fus %10.1fus %8.2f\n", row.name, pm, km, km / pm);
	}
	// Each in-place add ran exactly once on both: x (zeroed at allocation) holds
	// the number of runs (the kept side's undo log must not change a result).
	const float px = plain.read_first(plain.x), kx = kept.read_first(kept.x);
	if (px != float(in_place_runs) || kx != float(in_place_runs)) {
		std::fprintf(stderr, "bench-keep-state: in-place add ran %g / %g times, expected %d\n", double(px),
			     double(kx), in_place_runs);
		return 1;
	}
	return 0;
}
