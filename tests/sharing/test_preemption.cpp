// Reclaim under a saturating training load finishes by its deadline; inference goes
// before training at tile boundaries; fair share within a class. Deadlines and
// windows are the host's, or a few tile times where tiles are slow (the kmd backend
// in a TCG guest): the promise is "within a few tiles", whatever a tile costs.
#include "daemon_backend.h"
#include "sharing_test.h"

#include <cstdio>
#include <cstring>
#include <vector>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

Test(preemption, reclaim_under_saturating_training_meets_deadline, .fini = down, .timeout = 300)
{
	start_daemon({"--cores", "2"});
	Tenant train;
	train.open("trainer", NEURON_TENANT_TRAINING, 2);
	Saturator load;
	load.start(train, 512);
	wait_for_tiles(16);
	std::vector<double> ms;
	int late = 0;
	const uint32_t deadline_ms = scaled_ms(20, 3);
	for (int i = 0; i < 20; ++i) {
		api::Response r = lend(api::POOL_INFERENCE, 1);
		cr_assert(r.has_loans(), "lend %d: %s", i, r.has_error() ? r.error().message().c_str() : "?");
		// Let the borrower get onto the core.
		const uint64_t until = now_ns() + uint64_t(scaled_ms(30, 3)) * 1'000'000;
		while (now_ns() < until) {
			auto cap = capacity();
			if (core_info(cap, 0, 0).last_tenant() == neuron_tenant_id(train.client))
				break;
			sleep_ms(2);
		}
		r = reclaim(api::POOL_INFERENCE, deadline_ms);
		cr_assert(r.has_loans(), "reclaim %d: %s", i, r.has_error() ? r.error().message().c_str() : "?");
		const auto &l = r.loans().loans(0);
		late += l.late();
		ms.push_back(double(l.reclaim_latency_ns()) / 1e6);
	}
	load.stop();
	std::printf("reclaim under saturating training (512^3 matmuls, %u ms deadline): p50 %.3f ms, p99 %.3f ms, "
		    "max %.3f ms, late %d of %zu\n",
		    deadline_ms, percentile(ms, 0.5), percentile(ms, 0.99), percentile(ms, 1.0), late, ms.size());
	cr_assert_eq(late, 0, "every reclaim finished by its deadline");
	train.close();
}

Test(preemption, inference_goes_first_at_tile_boundaries, .fini = down, .timeout = 300)
{
	// One inference core, lent to a saturating trainer: each training command is a
	// long 768^3 matmul, yet an inference command waits for one tile, not a command.
	start_daemon({"--cores", "2"});
	Tenant train, infer;
	train.open("trainer", NEURON_TENANT_TRAINING, 2);
	infer.open("server", NEURON_TENANT_INFERENCE, 1);
	api::Response r = lend(api::POOL_INFERENCE, 1);
	cr_assert(r.has_loans(), "lend");
	Saturator load;
	load.start(train, 768, 2);
	sleep_ms(200);
	wait_for_tiles(16);
	// A tile is bounded well under 5 ms on a host; a whole 768^3 command is far
	// longer. Where tiles are slow, the bound is a few of them.
	const double bound_us = 1000.0 * scaled_ms(5, 3);
	const int64_t n = 16384;
	const uint64_t buf = infer.alloc(n * 4);
	std::vector<double> us;
	for (int i = 0; i < 60; ++i) {
		const neuron_cmd c = add_scalar_cmd(buf, n, 1.0);
		const uint64_t t0 = now_ns();
		uint64_t seq;
		cr_assert(neuron_submit(infer.cores[0], &c, &seq) == NEURON_OK);
		cr_assert(neuron_queue_wait(infer.cores[0], seq, test::wait_ns(30'000'000'000)) == NEURON_OK);
		us.push_back(double(now_ns() - t0) / 1000.0);
		sleep_ms(3);
	}
	// How long one training command takes on this machine right now.
	const uint64_t before = load.completed();
	sleep_ms(1000);
	const double per_cmd_us = 2e6 / double(std::max<uint64_t>(1, load.completed() - before));
	load.stop();
	const double p50 = percentile(us, 0.5), p99 = percentile(us, 0.99);
	std::printf("inference beside a saturating trainer on a lent core: p50 %.0f us, p99 %.0f us "
		    "(a training command takes ~%.0f us)\n", p50, p99, per_cmd_us);
	cr_assert(p50 < bound_us, "inference waited %.0f us at the median (bound %.0f us): it did not go first", p50,
		  bound_us);
	train.close();
	infer.close();
}

Test(preemption, fair_share_within_a_class, .fini = down, .timeout = 300)
{
	start_daemon({"--cores", "2", "--inference-cores", "1"});
	// Two training tenants on the one training core, both with the default weight 1:
	// each gets about half of it (test_weight.cpp: unequal weights).
	Tenant a, b;
	a.open("first", NEURON_TENANT_TRAINING, 1);
	b.open("second", NEURON_TENANT_TRAINING, 1);
	Saturator la, lb;
	la.start(a, 384);
	lb.start(b, 384);
	wait_for_tiles(16);
	// Core time within a window where both are saturating (not the drain after it).
	auto busy = [&](uint64_t *ba, uint64_t *bb) {
		const api::ListTenantsReply list = tenants(); // keep the reply alive while iterating
		for (const auto &t : list.tenants()) {
			if (t.tenant_id() == neuron_tenant_id(a.client))
				*ba = t.busy_ns();
			if (t.tenant_id() == neuron_tenant_id(b.client))
				*bb = t.busy_ns();
		}
	};
	uint64_t a0 = 0, b0 = 0, a1 = 0, b1 = 0;
	busy(&a0, &b0);
	sleep_ms(static_cast<int>(scaled_ms(1500, 40)));
	busy(&a1, &b1);
	la.stop();
	lb.stop();
	const uint64_t busy_a = a1 - a0, busy_b = b1 - b0;
	const double ratio = double(busy_a) / double(std::max<uint64_t>(busy_b, 1));
	std::printf("fair share, equal weights on one core: busy %.0f ms vs %.0f ms (ratio %.2f)\n", busy_a / 1e6,
		    busy_b / 1e6, ratio);
	cr_assert(ratio > 0.6 && ratio < 1.6, "equal weights got unequal core time: ratio %.2f", ratio);
	a.close();
	b.close();
}

// A replayed program (<neuron/program.h>) is preemptible like any command: on an
// inference core lent to a trainer, an inference command submitted while a long
// replay runs completes before the replay does, and the replay's result is the
// same bits as the same matmuls run one by one as ring commands.
Test(preemption, a_program_replay_yields_to_inference_and_stays_exact, .fini = down, .timeout = 300)
{
	start_daemon({"--cores", "2"});
	Tenant train, infer;
	// Two logical cores, a replay on each: one of them runs on the lent core.
	train.open("trainer", NEURON_TENANT_TRAINING, 2);
	infer.open("server", NEURON_TENANT_INFERENCE, 1);
	api::Response r = lend(api::POOL_INFERENCE, 1);
	cr_assert(r.has_loans(), "lend");
	// Smaller on kmd, for the QEMU guest (TCG): a node is then one job, and the
	// replay yields to the inference command between its nodes.
	const int64_t n = neuron::test::daemon_runs_kmd(train.client) ? 256 : 512;
	constexpr int kNodes = 12;
	const uint64_t bytes = n * n * 4;
	// x_{i+1} = x_i @ w, scaled down so values stay finite: nodes in the program's
	// buffer (two halves, alternating), the last into argument 2.
	std::vector<float> x(n * n), w(n * n);
	for (int64_t i = 0; i < n * n; ++i) {
		x[i] = float((i * 7919) % 1000) / 1000.0f - 0.5f;
		w[i] = (float((i * 104729) % 1000) / 1000.0f - 0.5f) / 16.0f;
	}
	const uint64_t dx = train.alloc(bytes), dw = train.alloc(bytes), ref0 = train.alloc(bytes),
		       ref1 = train.alloc(bytes);
	const uint64_t dout[2] = {train.alloc(bytes), train.alloc(bytes)};
	upload(train.dma, dx, x.data(), bytes);
	upload(train.dma, dw, w.data(), bytes);
	uint64_t arg_bytes[3] = {bytes, bytes, bytes}, buffer_bytes[1] = {2 * bytes};
	std::vector<neuron_program_node> nodes(kNodes);
	std::vector<uint32_t> deps(kNodes);
	for (int k = 0; k < kNodes; ++k) {
		neuron_cmd c = matmul_cmd(0, 0, 0, n);
		c.operands[1].mem_space = k == 0 ? NEURON_MEM_PROGRAM_ARG : NEURON_MEM_PROGRAM_BUFFER;
		c.operands[1].addr = k == 0 ? 0 : uint64_t((k - 1) % 2) * bytes;
		c.operands[2].mem_space = NEURON_MEM_PROGRAM_ARG;
		c.operands[2].host_buffer = 1;
		const bool last = k == kNodes - 1;
		c.operands[0].mem_space = last ? NEURON_MEM_PROGRAM_ARG : NEURON_MEM_PROGRAM_BUFFER;
		c.operands[0].host_buffer = last ? 2 : 0;
		c.operands[0].addr = last ? 0 : uint64_t(k % 2) * bytes;
		nodes[k].cmd = c;
		deps[k] = uint32_t(k) - 1;
		nodes[k].deps = k ? &deps[k] : nullptr;
		nodes[k].dep_count = k ? 1 : 0;
	}
	neuron_program_desc d{};
	d.arg_count = 3;
	d.arg_bytes = arg_bytes;
	d.buffer_count = 1;
	d.buffer_bytes = buffer_bytes;
	d.node_count = kNodes;
	d.nodes = nodes.data();
	// One program per queue: a program's buffer holds one replay at a time.
	uint64_t replay[2] = {0, 0};
	for (int q = 0; q < 2; ++q) {
		uint64_t program = 0;
		cr_assert(neuron_program_register(train.client, &d, &program) == NEURON_OK, "register: %s",
			  neuron_last_error());
		const uint64_t bindings[3] = {dx, dw, dout[q]};
		cr_assert(neuron_submit_program(train.cores[q], program, bindings, 3, nullptr, &replay[q]) == NEURON_OK);
	}
	sleep_ms(5); // let the replays get onto the cores
	const uint64_t buf = infer.alloc(16384 * 4);
	const neuron_cmd c = add_scalar_cmd(buf, 16384, 1.0);
	uint64_t seq;
	cr_assert(neuron_submit(infer.cores[0], &c, &seq) == NEURON_OK);
	cr_assert(neuron_queue_wait(infer.cores[0], seq, test::wait_ns(30'000'000'000)) == NEURON_OK);
	const bool replay_running = neuron_queue_completed(train.cores[0]) < replay[0] &&
				    neuron_queue_completed(train.cores[1]) < replay[1];
	for (int q = 0; q < 2; ++q)
		cr_assert(neuron_queue_wait(train.cores[q], replay[q], test::wait_ns(60'000'000'000)) == NEURON_OK,
			  "replay %d: %s", q, neuron_last_error());
	// The same chain as ring commands.
	uint64_t from = dx;
	for (int k = 0; k < kNodes; ++k) {
		const uint64_t to = k == kNodes - 1 ? ref1 : (k % 2 ? ref1 : ref0);
		const neuron_cmd m = matmul_cmd(to, from, dw, n);
		cr_assert(neuron_submit(train.cores[0], &m, &seq) == NEURON_OK);
		from = to;
	}
	cr_assert(neuron_queue_wait(train.cores[0], seq, test::wait_ns(60'000'000'000)) == NEURON_OK);
	std::vector<float> got(n * n), want(n * n);
	download(train.dma, want.data(), ref1, bytes);
	for (int q = 0; q < 2; ++q) {
		download(train.dma, got.data(), dout[q], bytes);
		cr_assert(std::memcmp(got.data(), want.data(), bytes) == 0,
			  "replay %d's result differs from the ring commands'", q);
	}
	std::printf("inference command during a %d-node replay: completed %s the replay\n", kNodes,
		    replay_running ? "before" : "after");
	cr_expect(replay_running, "the inference command waited for the whole replay (a replay must yield at tiles)");
	train.close();
	infer.close();
}
