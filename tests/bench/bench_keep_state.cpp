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
	}
	~Tenant()
	{
		neuron_queue_destroy(core);
		neuron_queue_destroy(dma);
		neuron_disconnect(client);
	}

	// Median time of `reps` round trips of `cmd` (submit, wait), in microseconds.
	double time_us(const neuron_cmd &cmd, int reps)
	{
		std::vector<double> us;
		for (int r = 0; r < reps; ++r) {
			uint64_t seq;
			const uint64_t t0 = monotonic_ns();
			CHECK(neuron_submit(core, &cmd, &seq));
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

struct Row {
	const char *name;
	int reps;
	bool adds_one_to_x; // its runs are counted in x, checked at the end
	std::function<neuron_cmd(const Tenant &)> make;
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
		{"round trip empty command", 2000 / scale, false, [](const Tenant &) { return nop(); }},
		{"add 4 Mi f32, out of place (rerun exact)", 40 / scale, false,
		 [](const Tenant &t) { return add_scalar(t.y, t.x); }},
		{"add 4 Mi f32, in place (undo copy)", 40 / scale, true, [](const Tenant &t) { return add_scalar(t.x, t.x); }},
		{"fp32 matmul 512 (rerun exact)", 20 / scale, false, [](const Tenant &t) { return matmul(t); }},
	};
	std::printf("bench-keep-state: the same commands on a plain neurond and on one keeping state "
		    "(--supervise), %d alternating rounds, median of round medians\n\n",
		    rounds);
	std::printf("%-44s %12s %12s %8s\n", "per command", "plain", "kept", "kept/plain");
	int in_place_runs = 0;
	for (const Row &row : rows) {
		std::vector<double> p, k;
		const neuron_cmd pc = row.make(plain), kc = row.make(kept);
		// Warm both (first touch of the memory, the BLAS pool).
		plain.time_us(pc, 2);
		kept.time_us(kc, 2);
		for (int r = 0; r < rounds; ++r) {
			// Alternate which side goes first, so a drift of the host's speed
			// within a round does not always land on the same side.
			if (r % 2 == 0) {
				p.push_back(plain.time_us(pc, row.reps));
				k.push_back(kept.time_us(kc, row.reps));
			} else {
				k.push_back(kept.time_us(kc, row.reps));
				p.push_back(plain.time_us(pc, row.reps));
			}
		}
		if (row.adds_one_to_x)
			in_place_runs += 2 + rounds * row.reps;
		const double pm = bench::median(p), km = bench::median(k);
		std::printf("%-44s %10.1fus %10.1fus %8.2f\n", row.name, pm, km, km / pm);
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
