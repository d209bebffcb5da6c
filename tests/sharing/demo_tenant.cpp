// demo-tenant: the load programs of demo_sharing.sh.
//   demo-tenant training CORES RATE_FILE            matmuls on CORES logical cores, forever;
//                                                   writes its matmuls/s to RATE_FILE each second
//   demo-tenant inference CORES RATE_FILE LOAD_FILE requests whose rate follows LOAD_FILE
//                                                   ("idle": none, "busy": steady, 3 in flight,
//                                                   "burst": floods of 32)
#include <neuron/neuron.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

static void check(neuron_status s, const char *what)
{
	if (s != NEURON_OK) {
		std::fprintf(stderr, "demo-tenant: %s: %s\n", what, neuron_last_error());
		std::exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		std::fprintf(stderr, "usage: demo-tenant training|inference CORES RATE_FILE [LOAD_FILE]\n");
		return 2;
	}
	const bool training = std::string(argv[1]) == "training";
	const int cores = std::atoi(argv[2]);
	const std::string rate_file = argv[3], load_file = argc > 4 ? argv[4] : "";
	neuron_connect_options o = {};
	o.client_name = training ? "demo-trainer" : "demo-server";
	o.kind = training ? NEURON_TENANT_TRAINING : NEURON_TENANT_INFERENCE;
	neuron_client *c;
	check(neuron_connect(&o, &c), "connect");
	std::atomic<uint64_t> done{0};
	std::vector<std::thread> th;
	for (int i = 0; i < cores; ++i) {
		neuron_queue *q;
		check(neuron_queue_create(c, 0, NEURON_QUEUE_CORE, uint32_t(i), 0, &q), "queue");
		const int64_t n = training ? 512 : 128;
		uint64_t a, out;
		check(neuron_alloc(c, 0, uint64_t(n * n * 4), 0, &a), "alloc");
		check(neuron_alloc(c, 0, uint64_t(n * n * 4), 0, &out), "alloc");
		th.emplace_back([&, q, a, out, n] {
			neuron_cmd m;
			neuron_cmd_init(&m, NEURON_OP_MATMUL, 3);
			const int64_t sz[2] = {n, n};
			m.operands[0] = neuron_desc_contiguous(out, NEURON_DTYPE_F32, 2, sz);
			m.operands[1] = m.operands[2] = neuron_desc_contiguous(a, NEURON_DTYPE_F32, 2, sz);
			m.fscalars.f[0] = 1.0;
			for (;;) {
				std::string load = "busy";
				if (!training) {
					std::ifstream f(load_file);
					f >> load;
				}
				// Inference "busy" keeps 3 requests in flight: a queue depth of 2-3, above
				// the demo's lend threshold (1) and below its reclaim threshold (6), so
				// the auto policy leaves the cores where they are. "burst" floods (depth
				// up to 32: reclaim); "idle" sends nothing (depth 0: lend).
				const int batch = training ? 4 : load == "idle" ? 0 : load == "burst" ? 32 : 1;
				const uint64_t in_flight = training ? 0 : load == "busy" ? 2 : 0;
				uint64_t seq = 0;
				for (int k = 0; k < batch; ++k)
					check(neuron_submit(q, &m, &seq), "submit");
				if (seq > in_flight)
					check(neuron_queue_wait(q, seq - in_flight, -1), "wait");
				done += uint64_t(batch);
				if (load == "idle")
					std::this_thread::sleep_for(std::chrono::milliseconds(20));
			}
		});
	}
	uint64_t last = 0;
	for (;;) {
		std::this_thread::sleep_for(std::chrono::seconds(1));
		const uint64_t now = done.load();
		std::ofstream(rate_file) << (now - last) << "\n";
		last = now;
	}
}
