// The automatic policy: inference idle -> its cores are lent to training after the
// hold time; an inference load step -> they are reclaimed; the step ends -> lent again.
#include "sharing_test.h"

#include <cstdio>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

static uint32_t lent_now()
{
	return pool_info(capacity(), api::POOL_INFERENCE).lent_cores();
}

static bool wait_lent(uint32_t want, int timeout_ms, uint64_t *took_ns)
{
	const uint64_t t0 = now_ns();
	while (now_ns() - t0 < uint64_t(timeout_ms) * 1000000ull) {
		if (lent_now() == want) {
			*took_ns = now_ns() - t0;
			return true;
		}
		sleep_ms(10);
	}
	return false;
}

Test(auto_policy, reacts_to_a_load_step_both_ways, .fini = down, .timeout = 120)
{
	start_daemon({"--cores", "4", "--policy", "auto", "--auto-reclaim-depth", "8", "--auto-lend-depth", "1",
		      "--auto-hold-ms", "300"});
	Tenant train, infer;
	train.open("trainer", NEURON_TENANT_TRAINING, 2);
	infer.open("server", NEURON_TENANT_INFERENCE, 1);
	uint64_t took = 0;
	cr_assert(wait_lent(2, 5000, &took), "idle inference: both inference cores should be lent (lent %u)", lent_now());
	std::printf("auto policy: idle inference lent its 2 cores after %.0f ms (hold 300 ms)\n", took / 1e6);

	// Load step: a burst of inference commands, far above the reclaim depth.
	const int64_t n = 1 << 20;
	const uint64_t buf = infer.alloc(n * 4);
	const neuron_cmd c = add_scalar_cmd(buf, n, 1.0);
	uint64_t last = 0;
	const uint64_t t0 = now_ns();
	bool reclaimed = false;
	while (now_ns() - t0 < 5'000'000'000ull && !reclaimed) {
		for (int i = 0; i < 16; ++i)
			cr_assert(neuron_submit(infer.cores[0], &c, &last) == NEURON_OK);
		reclaimed = lent_now() == 0;
		sleep_ms(5);
	}
	cr_assert(reclaimed, "the inference load step did not make the policy reclaim");
	std::printf("auto policy: load step reclaimed the cores after %.0f ms\n", (now_ns() - t0) / 1e6);
	cr_assert(neuron_queue_wait(infer.cores[0], last, test::wait_ns(60'000'000'000)) == NEURON_OK);
	// The step ends: lent again after the hold time.
	cr_assert(wait_lent(2, 5000, &took), "inference went idle again but the cores were not lent (lent %u)", lent_now());
	std::printf("auto policy: load gone, lent again after %.0f ms\n", took / 1e6);
	bool auto_reason = false;
	const api::CapacityReply cap = capacity(); // keep the reply alive while iterating
	for (const auto &l : cap.loans())
		auto_reason |= l.reason().find("auto") != std::string::npos;
	cr_assert(auto_reason, "loans carry the reason 'auto'");
	train.close();
	infer.close();
}

Test(auto_policy, policy_set_at_run_time_and_validated, .fini = down)
{
	start_daemon({});
	api::Request req;
	auto *p = req.mutable_set_policy()->mutable_policy();
	p->set_mode("auto");
	p->mutable_auto_()->set_reclaim_depth(2);
	p->mutable_auto_()->set_lend_depth(5);
	api::Response r = admin_call(req);
	cr_assert(r.has_error() && r.error().code() == api::ERROR_INVALID_ARGUMENT, "flapping thresholds refused");
	p->mutable_auto_()->set_lend_depth(0);
	r = admin_call(req);
	cr_assert(r.has_ok(), "valid auto policy accepted: %s", r.has_error() ? r.error().message().c_str() : "");
	cr_assert_eq(capacity().policy().mode(), "auto");
	p->set_mode("scheduled");
	r = admin_call(req);
	cr_assert(r.has_error(), "scheduled without windows refused");
	auto *w = p->add_windows();
	w->set_start("00:00");
	w->set_end("24:00"); // always open
	r = admin_call(req);
	cr_assert(r.has_ok(), "scheduled accepted: %s", r.has_error() ? r.error().message().c_str() : "");
	Tenant train;
	train.open("trainer", NEURON_TENANT_TRAINING, 1);
	uint64_t took = 0;
	cr_assert(wait_lent(1, 3000, &took), "an open window lends the inference core");
	train.close();
}
