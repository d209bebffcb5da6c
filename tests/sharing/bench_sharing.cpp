// bench-sharing: the capacity-sharing figures, each as a ratio or against its goal,
// measured in one run on a private neurond (2 cores: 1 inference, 1 training, one
// host thread per command) on either backend.
//
//   bench-sharing --neurond PATH [--backend emu|kmd] [--quick]
//
//   1. reclaim latency p50/p99 under a saturating trainer, and p99 as a multiple of
//      the tile time p99 (the bound the tiling gives)         goal p99 <= 3 tiles (emu also <= 1 ms)
//   2. inference p99 beside a saturating trainer vs alone          goal <= 1.25x
//      (600 commands a side, in alternating blocks of 100)
//   3. core busy fraction while both have work (core lent)         goal >= 0.9
//   4. training throughput with a borrowed core vs without         (ratio)
//   5. inference p99 beside a training job's all_reduce loop vs alone (2 ranks,
//      16 MiB in place; the collective runner yields to inference between chunks)
//   and the longest tile seen (the preemption bound), goal <= 1 ms on emu: in the
//   engine thread's CPU time (the tile's cost) and in wall time (plus whatever the
//   host scheduler ran in between on a busy machine). On kmd a "tile" is a job of
//   tiles that neurond hands to neuron.ko; run it in the QEMU guest
//   (tests/driver/run-qemu-suite.sh with NEURON_SUITE_BENCH=1), where TCG makes
//   absolute times meaningless and only the ratios count.
#define BENCH_NAME "bench-sharing"
#include "../bench/neuron_check.h"
#include "neurond_process.h"
#include "raw_client.h"

#include <dirent.h>
#include <fstream>
#include <neuron/futex.h>
#include <neuron/neuron.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace neuron;
using detail::monotonic_ns;

namespace {

std::string g_socket;

api::Response admin(api::Request &req)
{
	test::RawClient c;
	api::Request hello;
	hello.mutable_hello()->set_api_major(1);
	hello.mutable_hello()->set_observer(true);
	api::Response r;
	if (!c.connect(g_socket) || !c.call(hello, &r) || !c.call(req, &r)) {
		std::fprintf(stderr, "bench-sharing: admin call failed\n");
		std::exit(1);
	}
	return r;
}

api::CapacityReply capacity()
{
	api::Request q;
	q.mutable_get_capacity();
	return admin(q).capacity();
}

void lend()
{
	api::Request q;
	q.mutable_lend()->set_from(api::POOL_INFERENCE);
	q.mutable_lend()->set_count(1);
	if (!admin(q).has_loans()) {
		std::fprintf(stderr, "bench-sharing: lend refused\n");
		std::exit(1);
	}
}

uint64_t reclaim(uint32_t deadline_ms, bool *late)
{
	api::Request q;
	q.mutable_reclaim()->set_pool(api::POOL_INFERENCE);
	q.mutable_reclaim()->set_deadline_ms(deadline_ms);
	api::Response r = admin(q);
	if (!r.has_loans()) {
		std::fprintf(stderr, "bench-sharing: reclaim failed: %s\n", r.has_error() ? r.error().message().c_str() : "?");
		std::exit(1);
	}
	*late = r.loans().loans(0).late();
	return r.loans().loans(0).reclaim_latency_ns();
}

struct Tenant {
	neuron_client *c = nullptr;
	std::vector<neuron_queue *> q;
	void open(const char *name, int kind, int cores)
	{
		neuron_connect_options o = {};
		o.socket_path = g_socket.c_str();
		o.client_name = name;
		o.kind = kind;
		CHECK(neuron_connect(&o, &c));
		for (int i = 0; i < cores; ++i) {
			neuron_queue *x;
			CHECK(neuron_queue_create(c, 0, NEURON_QUEUE_CORE, uint32_t(i), 0, &x));
			q.push_back(x);
		}
	}
	uint64_t alloc(uint64_t bytes)
	{
		uint64_t a;
		CHECK(neuron_alloc(c, 0, bytes, 0, &a));
		return a;
	}
	void close()
	{
		for (auto *x : q)
			neuron_queue_destroy(x);
		neuron_disconnect(c);
	}
};

neuron_cmd matmul(uint64_t out, uint64_t a, int64_t n)
{
	neuron_cmd m;
	neuron_cmd_init(&m, NEURON_OP_MATMUL, 3);
	const int64_t sz[2] = {n, n};
	m.operands[0] = neuron_desc_contiguous(out, NEURON_DTYPE_F32, 2, sz);
	m.operands[1] = m.operands[2] = neuron_desc_contiguous(a, NEURON_DTYPE_F32, 2, sz);
	m.fscalars.f[0] = 1.0;
	return m;
}

// A trainer keeping every queue `depth` matmuls deep; counts completed commands.
struct Trainer {
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> done{0};
	std::vector<std::thread> th;
	void start(Tenant &t, int64_t n)
	{
		for (auto *q : t.q) {
			const uint64_t a = t.alloc(uint64_t(n * n * 4)), o = t.alloc(uint64_t(n * n * 4));
			th.emplace_back([this, q, a, o, n] {
				const neuron_cmd m = matmul(o, a, n);
				uint64_t seq = 0;
				while (!stop.load()) {
					CHECK(neuron_submit(q, &m, &seq));
					if (seq > 3) {
						CHECK(neuron_queue_wait(q, seq - 3, -1));
						done.fetch_add(1);
					}
				}
				CHECK(neuron_queue_wait(q, seq, -1));
			});
		}
	}
	void halt()
	{
		stop.store(true);
		for (auto &x : th)
			x.join();
		th.clear();
		stop.store(false);
	}
};

// Two training ranks all-reducing 16 MiB in place in a loop (a training job's
// gradient exchange), each from its own thread; counts completed collectives.
struct Reducers {
	static constexpr uint64_t kCount = 4 << 20; // f32 elements
	Tenant rank[2];
	neuron_client *channel[2] = {};
	uint64_t group = 0, buf[2] = {};
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> done{0};
	std::vector<std::thread> th;

	void open()
	{
		for (int r = 0; r < 2; ++r) {
			rank[r].open(r ? "bench-rank1" : "bench-rank0", NEURON_TENANT_TRAINING, 0);
			buf[r] = rank[r].alloc(kCount * 4);
			neuron_connect_options o = {};
			o.socket_path = g_socket.c_str();
			o.client_name = "bench-rank-channel";
			CHECK(neuron_connect(&o, &channel[r]));
		}
		uint64_t ids[2] = {};
		std::thread other([&] { CHECK(join(1, &ids[1])); });
		CHECK(join(0, &ids[0]));
		other.join();
		group = ids[0];
	}
	neuron_status join(int r, uint64_t *id)
	{
		return neuron_group_join(channel[r], neuron_tenant_id(rank[r].c), "bench-allreduce", "bench-sharing-secret", 20, uint32_t(r), 2,
					 10000, id);
	}
	void start()
	{
		for (int r = 0; r < 2; ++r)
			th.emplace_back([this, r] {
				neuron_collective c{};
				c.op = NEURON_COLL_ALL_REDUCE;
				c.reduce = NEURON_REDUCE_SUM;
				c.dtype = NEURON_DTYPE_F32;
				c.count = kCount;
				c.input = c.output = buf[r];
				// Both ranks run the same number (seq must match): rank 0 decides when to stop.
				for (uint64_t seq = next_seq; ; ++seq) {
					CHECK(neuron_group_run(channel[r], group, seq, &c));
					if (r == 0)
						done.fetch_add(1);
					if (seq + 1 == stop_at.load())
						break;
					if (r == 0 && stop.load() && stop_at.load() == 0)
						stop_at.store(seq + 2);
				}
			});
	}
	void halt()
	{
		stop.store(true);
		for (auto &x : th)
			x.join();
		th.clear();
		next_seq = stop_at.load();
		stop.store(false);
		stop_at.store(0);
	}
	void close()
	{
		for (int r = 0; r < 2; ++r) {
			neuron_disconnect(channel[r]);
			rank[r].close();
		}
	}
	uint64_t next_seq = 0;
	std::atomic<uint64_t> stop_at{0};
};

double pct(std::vector<double> v, double q)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

// Latency of small inference requests (one add of 64K elements each), one at a time.
std::vector<double> inference_latency(Tenant &inf, uint64_t buf, int n)
{
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_ADD_SCALAR, 2);
	const int64_t count = 65536;
	c.operands[0] = c.operands[1] = neuron_desc_contiguous(buf, NEURON_DTYPE_F32, 1, &count);
	c.fscalars.f[0] = 1.0;
	std::vector<double> us;
	for (int i = 0; i < n; ++i) {
		const uint64_t t0 = monotonic_ns();
		uint64_t seq;
		CHECK(neuron_submit(inf.q[0], &c, &seq));
		CHECK(neuron_queue_wait(inf.q[0], seq, -1));
		us.push_back(double(monotonic_ns() - t0) / 1000.0);
		std::this_thread::sleep_for(std::chrono::microseconds(500));
	}
	return us;
}

// Time the given threads spent runnable but waiting for a CPU (ns; the second
// field of /proc/.../schedstat): where an inference command's tail goes when the
// host's CPUs are shared. `task_dir` is /proc/PID/task; `prefix` selects threads
// by name ("nd0/nc": the daemon's core engines).
uint64_t run_queue_wait_ns(const std::string &task_dir, const std::string &prefix)
{
	uint64_t total = 0;
	DIR *d = opendir(task_dir.c_str());
	if (!d)
		return 0;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		const std::string t = task_dir + "/" + e->d_name;
		std::ifstream comm(t + "/comm");
		std::string name;
		std::getline(comm, name);
		if (name.rfind(prefix, 0) != 0)
			continue;
		std::ifstream stat(t + "/schedstat");
		uint64_t on_cpu = 0, waiting = 0;
		if (stat >> on_cpu >> waiting)
			total += waiting;
	}
	closedir(d);
	return total;
}

uint64_t self_run_queue_wait_ns()
{
	std::ifstream stat("/proc/thread-self/schedstat");
	uint64_t on_cpu = 0, waiting = 0;
	stat >> on_cpu >> waiting;
	return waiting;
}

// Tiles run so far on every core, and the largest per-core tile p99.
// One side of the inference-latency comparison: its samples and the run-queue time
// its commands' threads spent waiting for a CPU, summed over its blocks.
struct InferenceSide {
	std::vector<double> us;
	uint64_t engine_wait_ns = 0, tenant_wait_ns = 0;

	void measure(Tenant &inf, uint64_t buf, int n, const std::string &daemon_tasks)
	{
		const uint64_t e0 = run_queue_wait_ns(daemon_tasks, "nd0/nc0"), t0 = self_run_queue_wait_ns();
		const auto v = inference_latency(inf, buf, n);
		engine_wait_ns += run_queue_wait_ns(daemon_tasks, "nd0/nc0") - e0;
		tenant_wait_ns += self_run_queue_wait_ns() - t0;
		us.insert(us.end(), v.begin(), v.end());
	}
	double engine_wait_us() const { return us.empty() ? 0 : double(engine_wait_ns) / 1000.0 / double(us.size()); }
	double tenant_wait_us() const { return us.empty() ? 0 : double(tenant_wait_ns) / 1000.0 / double(us.size()); }
};

uint64_t total_tiles(uint64_t *tile_p99_ns = nullptr)
{
	uint64_t n = 0, p99 = 0;
	const api::CapacityReply cap = capacity();
	for (const auto &c : cap.cores()) {
		n += c.tiles();
		p99 = std::max<uint64_t>(p99, c.tile_p99_ns());
	}
	if (tile_p99_ns)
		*tile_p99_ns = p99;
	return n;
}

// Starts the trainer again and returns once it has finished a tile, so that the
// next inference block runs beside a trainer that is really running.
void restart_trainer(Trainer &t, Tenant &train, int64_t n)
{
	const uint64_t c0 = total_tiles();
	t.start(train, n);
	for (int i = 0; i < 6000 && total_tiles() <= c0; ++i)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

uint64_t total_busy()
{
	uint64_t b = 0;
	const api::CapacityReply cap = capacity(); // alive while iterating
	for (const auto &c : cap.cores())
		b += c.busy_ns();
	return b;
}

} // namespace

int main(int argc, char **argv)
{
	std::string neurond, backend = "emu";
	bool quick = false;
	std::vector<std::string> extra; // --neurond-arg: e.g. --training-nice 0 to compare
	const char *usage = "usage: bench-sharing --neurond PATH [--backend emu|kmd] [--quick] [--neurond-arg ARG]...\n";
	for (int i = 1; i < argc; ++i) {
		std::string a = argv[i];
		if (a == "--neurond" && i + 1 < argc)
			neurond = argv[++i];
		else if (a == "--backend" && i + 1 < argc)
			backend = argv[++i];
		else if (a == "--quick")
			quick = true;
		else if (a == "--neurond-arg" && i + 1 < argc)
			extra.push_back(argv[++i]);
		else {
			std::fprintf(stderr, "%s", usage);
			return 2;
		}
	}
	if (neurond.empty() || (backend != "emu" && backend != "kmd")) {
		std::fprintf(stderr, "%s", usage);
		return 2;
	}
	setenv("NEURON_DAEMON", neurond.c_str(), 1);
	std::vector<std::string> args = {"--backend", backend, "--devices", "1", "--cores", "2", "--inference-cores", "1",
					 "--hbm-mib", "256", "--threads-per-core", "1", "--spin-us", "50", "--log-level", "warn"};
	args.insert(args.end(), extra.begin(), extra.end());
	test::NeurondProcess d(std::string(), args);
	std::string err;
	if (!d.start(&err)) {
		std::fprintf(stderr, "bench-sharing: %s\n", err.c_str());
		return 1;
	}
	g_socket = d.socket_path();
	const int reps = quick ? 30 : 100;
	const int64_t n = 512;
	setvbuf(stdout, nullptr, _IOLBF, 0);
	std::printf("bench-sharing: neurond --backend %s with 2 cores (1 inference, 1 training), 1 host thread per "
		    "command, trainer = %lldx%lld fp32 matmuls\n\n", backend.c_str(), (long long)n, (long long)n);
	std::printf("%-58s %12s %12s %8s %s\n", "measure", "value", "reference", "ratio", "goal");

	Tenant train, inf;
	train.open("bench-trainer", NEURON_TENANT_TRAINING, 2);
	inf.open("bench-server", NEURON_TENANT_INFERENCE, 1);
	const uint64_t ibuf = inf.alloc(65536 * 4);
	Trainer t;

	std::fprintf(stderr, "bench-sharing: phase training throughput\n");
	// 4. Training throughput without, then with, the borrowed core, in tiles (the
	// trainer's matmuls are all alike): under TCG a matmul takes longer than a
	// window. Windows last at least 20 tile times, so counting whole tiles is
	// exact to 5%; the tile time is measured on the first tiles.
	t.start(train, n);
	for (int i = 0; i < 600 && total_tiles() < 5; ++i)
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	uint64_t warm_p99 = 0;
	total_tiles(&warm_p99);
	const auto window = std::chrono::milliseconds(std::clamp<uint64_t>(20 * warm_p99 / 1000000, quick ? 1000 : 2000, 120000));
	std::fprintf(stderr, "bench-sharing: windows of %lld ms (tile p99 %.3f ms)\n", (long long)window.count(),
		     double(warm_p99) / 1e6);
	uint64_t c0 = total_tiles(), t0 = monotonic_ns();
	std::this_thread::sleep_for(window);
	const double without = double(total_tiles() - c0) / (double(monotonic_ns() - t0) / 1e9);
	lend();
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	c0 = total_tiles();
	t0 = monotonic_ns();
	const uint64_t busy0 = total_busy();
	std::this_thread::sleep_for(window);
	const double with = double(total_tiles() - c0) / (double(monotonic_ns() - t0) / 1e9);
	const double trainer_busy = double(total_busy() - busy0) / (2.0 * double(monotonic_ns() - t0));

	std::fprintf(stderr, "bench-sharing: phase busy fraction\n");
	// 3. Busy fraction while both have work: inference requests on the lent core too.
	std::atomic<bool> inf_stop{false};
	std::thread inf_load([&] {
		while (!inf_stop.load())
			inference_latency(inf, ibuf, 10);
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	const uint64_t b0 = total_busy(), w0 = monotonic_ns();
	std::this_thread::sleep_for(window);
	const double busy = double(total_busy() - b0) / (2.0 * double(monotonic_ns() - w0));
	inf_stop.store(true);
	inf_load.join();

	std::fprintf(stderr, "bench-sharing: phase reclaim latency\n");
	// 1. Reclaim latency under the saturating trainer (it runs on the lent core).
	std::vector<double> rec_ms;
	for (int i = 0; i < reps; ++i) {
		bool l = false;
		if (i > 0)
			lend();
		std::this_thread::sleep_for(std::chrono::milliseconds(15));
		// A deadline far past any tile, so that every reclaim is measured; "late"
		// below is against the goal (1 ms on emu, 3 tile times on kmd).
		rec_ms.push_back(double(reclaim(60000, &l)) / 1e6);
	}

	std::fprintf(stderr, "bench-sharing: phase inference latency\n");
	// 2. Inference p99 beside the trainer (core not lent) vs alone, and how long
	// the inference core's engine (core 0) and this (the tenant's) thread waited for a CPU.
	// The two sides are measured in alternating blocks, so that a slow spell of the
	// host (a neighbour VM, a TCG translation flush) falls on both alike instead of
	// on whichever side it happened to coincide with: one block each gave ratios
	// from 0.45x to 2.25x on a quiet host, with the reference p99 alone moving 2-9x.
	const std::string tasks = "/proc/" + std::to_string(d.pid()) + "/task";
	const int blocks = quick ? 2 : 6, per_block = reps;
	InferenceSide beside, alone;
	for (int b = 0; b < blocks; ++b) {
		if (b > 0)
			restart_trainer(t, train, n);
		beside.measure(inf, ibuf, per_block, tasks);
		t.halt();
		std::this_thread::sleep_for(std::chrono::milliseconds(200));
		alone.measure(inf, ibuf, per_block, tasks);
	}
	uint64_t max_tile = 0, max_tile_cpu = 0, tile_p99 = 0, tile_p999 = 0, cpu_p999 = 0, over_1ms = 0, tiles = 0;
	const api::CapacityReply cap = capacity();
	for (const auto &c : cap.cores()) {
		max_tile = std::max<uint64_t>(max_tile, c.max_tile_ns());
		max_tile_cpu = std::max<uint64_t>(max_tile_cpu, c.max_tile_cpu_ns());
		cpu_p999 = std::max<uint64_t>(cpu_p999, c.tile_cpu_p999_ns());
		over_1ms += c.tiles_over_1ms_cpu();
		tiles += c.tiles();
		tile_p99 = std::max<uint64_t>(tile_p99, c.tile_p99_ns());
		tile_p999 = std::max<uint64_t>(tile_p999, c.tile_p999_ns());
	}

	const double p99 = pct(rec_ms, 0.99);
	const bool emu = backend == "emu";
	const double tile_ms = double(tile_p99) / 1e6;
	const double bound_ms = emu ? 1.0 : 3 * tile_ms;
	const long late = std::count_if(rec_ms.begin(), rec_ms.end(), [&](double ms) { return ms > bound_ms; });
	std::printf("%-58s %10.3fms %12s %8s %s\n", "reclaim latency p50 under a saturating trainer", pct(rec_ms, 0.5), "-", "-", "");
	std::printf("%-58s %10.3fms %12s %8s %s (over it: %ld of %d)\n", "reclaim latency p99 under a saturating trainer",
		    p99, "-", "-", !emu ? "" : p99 <= 1.0 ? "<= 1 ms: met" : "<= 1 ms: NOT met", late, reps);
	std::printf("%-58s %10.3fms %10.3fms %8.2f %s\n", "reclaim latency p99 in tile times (vs tile p99)", p99, tile_ms,
		    p99 / tile_ms, p99 / tile_ms <= 3.0 ? "<= 3 tiles: met" : "<= 3 tiles: NOT met");
	const double ib = pct(beside.us, 0.99), ia = pct(alone.us, 0.99);
	std::printf("%-58s %10.0fus %10.0fus %8.2f %s (%zu commands each)\n",
		    "inference p99 beside a saturating trainer (vs alone)", ib, ia, ib / ia,
		    ib / ia <= 1.25 ? "<= 1.25x: met" : "<= 1.25x: NOT met", beside.us.size());
	std::printf("%-58s %10.0fus %10.0fus %8.2f\n", "inference p50 beside a saturating trainer (vs alone)",
		    pct(beside.us, 0.5), pct(alone.us, 0.5), pct(beside.us, 0.5) / pct(alone.us, 0.5));
	std::printf("%-58s %10.1fus %10.1fus %8s %s\n", "CPU wait per inference cmd, tenant thread (beside vs alone)",
		    beside.tenant_wait_us(), alone.tenant_wait_us(), "-", "(run-queue time, /proc schedstat)");
	std::printf("%-58s %10.1fus %10.1fus %8s %s\n", "CPU wait per inference cmd, engine of the inference core",
		    beside.engine_wait_us(), alone.engine_wait_us(), "-", "(nd0/nc0)");
	std::printf("%-58s %12.3f %12s %8s %s\n", "core busy fraction, inference + training on 2 cores", busy, "-", "-",
		    busy >= 0.9 ? ">= 0.9: met" : ">= 0.9: NOT met");
	std::printf("%-58s %12.3f %12s %8s\n", "core busy fraction, training alone on 2 cores", trainer_busy, "-", "-");
	std::printf("%-58s %7.1ftile/s %7.1ftile/s %8.2f %s\n", "training throughput with a borrowed core (vs without)", with,
		    without, with / without, "(2 cores vs 1; the host has 2 shared CPUs)");
	std::printf("%-58s %10.3fms %12s %8s %s\n", "tile time p99 / p99.9, wall", double(tile_p99) / 1e6, "-", "-", "");
	std::printf("%-58s %10.3fms %12s %8s %s\n", "", double(tile_p999) / 1e6, "-", "-", "");
	std::printf("%-58s %10.3fms %12s %8s %s\n", "tile time p99.9, engine CPU time", double(cpu_p999) / 1e6, "-", "-",
		    "");
	std::printf("%-58s %10.3fms %12s %8s %s (%llu of %llu tiles over 1 ms)\n",
		    "longest tile, engine CPU time (preemption bound)", double(max_tile_cpu) / 1e6, "-", "-",
		    !emu ? "(kmd: the job's wall time)" : max_tile_cpu <= 1000000 ? "<= 1 ms: met" : "<= 1 ms: NOT met",
		    (unsigned long long)over_1ms,
		    (unsigned long long)tiles);
	std::printf("%-58s %10.3fms %12s %8s %s\n", "longest tile, wall time (+ host preemption)", double(max_tile) / 1e6,
		    "-", "-", "(a loaded host adds its time slices)");

	// 5. On both backends (kmd: the members' BOs shared into neurond's file, the
	// chunks DMA and compute jobs of it).
	{
		std::fprintf(stderr, "bench-sharing: phase inference beside a collective loop\n");
		// Collectives are planned on neurond's collective thread, not on a NeuronCore's
		// engine; it yields to pending inference work between chunks. Alternating
		// blocks as in 2.
		Reducers red;
		red.open();
		InferenceSide coll_beside, coll_alone;
		uint64_t coll_ns = 0, colls = 0;
		for (int b = 0; b < blocks; ++b) {
			const uint64_t before = red.done.load(), t0 = monotonic_ns();
			red.start();
			while (red.done.load() == before)
				std::this_thread::sleep_for(std::chrono::milliseconds(1));
			coll_beside.measure(inf, ibuf, per_block, tasks);
			red.halt();
			coll_ns += monotonic_ns() - t0;
			colls += red.done.load() - before;
			std::this_thread::sleep_for(std::chrono::milliseconds(200));
			coll_alone.measure(inf, ibuf, per_block, tasks);
		}
		const double cb = pct(coll_beside.us, 0.99), ca = pct(coll_alone.us, 0.99);
		std::printf("%-58s %10.0fus %10.0fus %8.2f %s\n", "inference p99 beside a 2-rank all_reduce loop (vs alone)", cb, ca,
			    cb / ca, "(16 MiB f32 in place; goal as row 2: <= 1.25x)");
		std::printf("%-58s %10.0fus %10.0fus %8.2f\n", "inference p50 beside a 2-rank all_reduce loop (vs alone)",
			    pct(coll_beside.us, 0.5), pct(coll_alone.us, 0.5), pct(coll_beside.us, 0.5) / pct(coll_alone.us, 0.5));
		std::printf("%-58s %10.1fus %10.1fus %8s %s\n", "  CPU wait per inference cmd, tenant thread / engine",
			    coll_beside.tenant_wait_us(), coll_beside.engine_wait_us(), "-", "(beside the all_reduce loop)");
		std::printf("%-58s %10.1f/s %12s %8s %s\n", "  all_reduces meanwhile (16 MiB, 2 ranks)",
			    double(colls) / (double(coll_ns) / 1e9), "-", "-", "(while inference runs beside)");
		red.close();
	}
	train.close();
	inf.close();
	d.stop(5000);
	return 0;
}
