// neuron-demo: an example tenant. Runs a small MLP layer on the device
// (relu(x @ W + b), softmax over rows, column sums) through neurond and checks each
// result against the same computation on the CPU.
//
//   neuron-demo [--size N] [--linger SECONDS] [--socket PATH]
#include <neuron/neuron.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

namespace {

int failures = 0;

#define CHECK(call)                                                                                 \
	do {                                                                                            \
		if (neuron_status s_ = (call); s_ != NEURON_OK) {                                           \
			std::fprintf(stderr, "neuron-demo: %s: %s\n", neuron_status_name(s_), neuron_last_error()); \
			std::exit(1);                                                                           \
		}                                                                                           \
	} while (0)

void compare(const char *what, const std::vector<float> &got, const std::vector<double> &want, double tol)
{
	double worst = 0;
	for (size_t i = 0; i < got.size(); ++i)
		worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
	const bool ok = worst <= tol;
	failures += !ok;
	std::printf("  %-34s max rel. error %.2e  %s\n", what, worst, ok ? "OK" : "MISMATCH");
}

} // namespace

int main(int argc, char **argv)
{
	CLI::App app{"neuron-demo: an example tenant checked against the CPU"};
	int n = 256;
	double linger = 0;
	std::string socket;
	app.add_option("--size", n, "rows, columns and inner size of the matmul")->check(CLI::Range(1, 4096));
	app.add_option("--linger", linger, "seconds to stay connected at the end (to be seen by neuron-ls -w)")
		->check(CLI::Range(0.0, 600.0));
	app.add_option("--socket", socket, "neurond socket");
	CLI11_PARSE(app, argc, argv);
	std::setvbuf(stdout, nullptr, _IOLBF, 0); // interleave sensibly with other tools' output

	neuron_connect_options opts = {};
	opts.socket_path = socket.empty() ? nullptr : socket.c_str();
	opts.client_name = "neuron-demo";
	neuron_client *c;
	CHECK(neuron_connect(&opts, &c));
	struct neuron_device_info info; // "struct": neuron_device_info is also the function
	CHECK(neuron_device_info(c, 0, &info));
	std::printf("neuron-demo: tenant %llu on device 0 (%s, %u cores, %s backend)\n",
		    (unsigned long long)neuron_tenant_id(c), info.profile, info.core_count, info.backend);

	neuron_queue *core, *dma;
	CHECK(neuron_queue_create(c, 0, NEURON_QUEUE_CORE, 0, 0, &core));
	CHECK(neuron_queue_create(c, 0, NEURON_QUEUE_DMA, 0, 0, &dma));

	std::mt19937 rng(1);
	std::normal_distribution<float> normal(0.0f, 1.0f);
	const size_t nn = size_t(n) * n;
	std::vector<float> x(nn), w(nn), b(n);
	for (auto *v : {&x, &w, &b})
		for (float &f : *v)
			f = normal(rng) / std::sqrt(float(n));

	const uint64_t mat = nn * sizeof(float);
	uint64_t dx, dw, db, dh, dp, ds;
	CHECK(neuron_alloc(c, 0, mat, 0, &dx));
	CHECK(neuron_alloc(c, 0, mat, 0, &dw));
	CHECK(neuron_alloc(c, 0, n * sizeof(float), 0, &db));
	CHECK(neuron_alloc(c, 0, mat, 0, &dh));
	CHECK(neuron_alloc(c, 0, mat, 0, &dp));
	CHECK(neuron_alloc(c, 0, n * sizeof(float), 0, &ds));
	CHECK(neuron_memcpy_h2d(dma, dx, x.data(), mat));
	CHECK(neuron_memcpy_h2d(dma, dw, w.data(), mat));
	CHECK(neuron_memcpy_h2d(dma, db, b.data(), n * sizeof(float)));

	// The core queue must not start before the uploads: order it after the DMA queue.
	neuron_event uploaded;
	CHECK(neuron_event_record(dma, &uploaded));
	CHECK(neuron_queue_wait_event(core, &uploaded));

	const int64_t sq[2] = {n, n}, row[2] = {1, n}, col[2] = {1, n};
	auto d2 = [&](uint64_t a, const int64_t *s) { return neuron_desc_contiguous(a, NEURON_DTYPE_F32, 2, s); };
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_MATMUL, 3); // h = x @ w
	cmd.operands[0] = d2(dh, sq);
	cmd.operands[1] = d2(dx, sq);
	cmd.operands[2] = d2(dw, sq);
	cmd.fscalars.f[0] = 1.0;
	CHECK(neuron_submit(core, &cmd, nullptr));
	neuron_cmd_init(&cmd, NEURON_OP_ADD, 3); // h = h + b (b broadcast over rows)
	cmd.operands[0] = d2(dh, sq);
	cmd.operands[1] = d2(dh, sq);
	cmd.operands[2] = d2(db, sq);
	cmd.operands[2].strides[0] = 0;
	cmd.fscalars.f[0] = 1.0;
	CHECK(neuron_submit(core, &cmd, nullptr));
	neuron_cmd_init(&cmd, NEURON_OP_RELU, 2); // in place
	cmd.operands[0] = d2(dh, sq);
	cmd.operands[1] = d2(dh, sq);
	CHECK(neuron_submit(core, &cmd, nullptr));
	neuron_cmd_init(&cmd, NEURON_OP_SOFTMAX, 2); // p = softmax(h, dim=1)
	cmd.operands[0] = d2(dp, sq);
	cmd.operands[1] = d2(dh, sq);
	cmd.iscalars[0] = 1;
	CHECK(neuron_submit(core, &cmd, nullptr));
	neuron_cmd_init(&cmd, NEURON_OP_SUM, 2); // s = p.sum(dim=0, keepdim)
	cmd.operands[0] = d2(ds, row);
	cmd.operands[1] = d2(dp, sq);
	cmd.iscalars[0] = 1; // bit 0: reduce dim 0
	(void)col;
	CHECK(neuron_submit(core, &cmd, nullptr));
	neuron_event computed;
	CHECK(neuron_event_record(core, &computed));
	CHECK(neuron_queue_wait_event(dma, &computed));

	std::vector<float> h(nn), p(nn), s(n);
	CHECK(neuron_memcpy_d2h(dma, h.data(), dh, mat));
	CHECK(neuron_memcpy_d2h(dma, p.data(), dp, mat));
	CHECK(neuron_memcpy_d2h(dma, s.data(), ds, n * sizeof(float)));

	// CPU reference in double.
	std::vector<double> rh(nn), rp(nn), rs(n, 0.0);
	for (int i = 0; i < n; ++i)
		for (int j = 0; j < n; ++j) {
			double acc = b[j];
			for (int k = 0; k < n; ++k)
				acc += double(x[size_t(i) * n + k]) * w[size_t(k) * n + j];
			rh[size_t(i) * n + j] = std::max(acc, 0.0);
		}
	for (int i = 0; i < n; ++i) {
		double mx = -INFINITY, sum = 0;
		for (int j = 0; j < n; ++j)
			mx = std::max(mx, rh[size_t(i) * n + j]);
		for (int j = 0; j < n; ++j)
			sum += std::exp(rh[size_t(i) * n + j] - mx);
		for (int j = 0; j < n; ++j)
			rp[size_t(i) * n + j] = std::exp(rh[size_t(i) * n + j] - mx) / sum;
	}
	for (int i = 0; i < n; ++i)
		for (int j = 0; j < n; ++j)
			rs[j] += rp[size_t(i) * n + j];

	std::printf("neuron-demo: %dx%d layer on the device vs the CPU:\n", n, n);
	compare("relu(x @ W + b)", h, rh, 1e-4);
	compare("softmax(h, dim=1)", p, rp, 1e-5);
	compare("softmax(...).sum(dim=0)", s, rs, 1e-4);

	if (linger > 0) {
		std::printf("neuron-demo: staying connected for %.1f s\n", linger);
		std::fflush(stdout);
		std::this_thread::sleep_for(std::chrono::duration<double>(linger));
	}
	for (uint64_t a : {dx, dw, db, dh, dp, ds})
		CHECK(neuron_free(c, 0, a));
	neuron_queue_destroy(core);
	neuron_queue_destroy(dma);
	neuron_disconnect(c);
	std::printf("neuron-demo: %s\n", failures ? "FAILED" : "all results match the CPU");
	return failures ? 1 : 0;
}
