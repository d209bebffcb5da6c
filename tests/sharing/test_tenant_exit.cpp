// A tenant killed (SIGKILL) while its pool holds borrowed cores and it is running on
// them: its memory and queues go at once, the loan goes back to the lender, and the
// lender's tenants run normally.
#include "sharing_test.h"

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

Test(tenant_exit, killed_while_holding_borrowed_cores, .fini = down, .timeout = 120)
{
	start_daemon({"--cores", "2"});
	api::Response r = lend(api::POOL_INFERENCE, 1);
	cr_assert(r.has_loans(), "lend");
	const uint32_t core = r.loans().loans(0).core();
	int pipefd[2];
	cr_assert(pipe(pipefd) == 0);
	const pid_t child = fork();
	if (child == 0) {
		close(pipefd[0]);
		Tenant t;
		t.open("doomed-trainer", NEURON_TENANT_TRAINING, 2);
		uint64_t id = neuron_tenant_id(t.client);
		(void)!write(pipefd[1], &id, sizeof(id));
		Saturator s;
		s.start(t, 512);
		for (;;)
			pause();
	}
	close(pipefd[1]);
	uint64_t child_tenant = 0;
	cr_assert(read(pipefd[0], &child_tenant, sizeof(child_tenant)) == sizeof(child_tenant), "child started");
	close(pipefd[0]);
	// Wait until the child runs on the borrowed core.
	bool on_borrowed = false;
	for (int i = 0; i < 500 && !on_borrowed; ++i) {
		on_borrowed = core_info(capacity(), 0, core).last_tenant() == child_tenant;
		sleep_ms(5);
	}
	cr_assert(on_borrowed, "the trainer never ran on the borrowed core");
	kill(child, SIGKILL);
	int status = 0;
	waitpid(child, &status, 0);
	const uint64_t t0 = now_ns();
	bool home = false;
	api::CapacityReply cap;
	while (!home && now_ns() - t0 < 5'000'000'000ull) {
		cap = capacity();
		home = core_info(cap, 0, core).lease_state() == "owned" && pool_info(cap, api::POOL_TRAINING).tenants() == 0;
		if (!home)
			sleep_ms(5);
	}
	cr_assert(home, "the borrowed core did not go back to inference after the borrower died");
	bool reason = false;
	for (const auto &l : cap.loans())
		reason |= l.reason().find("borrower-gone") != std::string::npos && !l.late();
	cr_assert(reason, "the ledger records the loan returned because its borrower is gone, in time");
	// Memory came back, and an inference tenant works on the core.
	Tenant infer;
	infer.open("server", NEURON_TENANT_INFERENCE, 1);
	struct neuron_device_info info;
	cr_assert(neuron_device_info(infer.client, 0, &info) == NEURON_OK);
	cr_assert_eq(info.hbm_used_bytes, 0ull, "the dead tenant's HBM was freed (%llu bytes used)",
		     (unsigned long long)info.hbm_used_bytes);
	const uint64_t buf = infer.alloc(4096);
	const neuron_cmd c = fill_cmd(buf, 1024, 5.0);
	uint64_t seq;
	cr_assert(neuron_submit(infer.cores[0], &c, &seq) == NEURON_OK);
	cr_assert(neuron_queue_wait(infer.cores[0], seq, test::wait_ns(10'000'000'000)) == NEURON_OK, "inference works");
	infer.close();
}
