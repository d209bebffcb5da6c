// Isolation between tenants in separate processes: tenant A (this process) owns a
// buffer; tenant B (a forked child that connects on its own) names A's device
// address. B's queue faults with NEURON_FAULT_OUT_OF_BOUNDS and a reason naming the
// operand, B cannot free A's memory, and A's bytes are untouched.
#include "daemon_test.h"

#include <cstdio>
#include <cstring>
#include <sys/wait.h>

using namespace dt;

TestSuite(isolation, .init = daemon_up, .fini = daemon_down, .timeout = 100);

namespace {

constexpr uint64_t kABytes = 64 << 10;

enum class Attack { ReadViaDma, WriteViaCore, MatmulInput, Straddle, Free };

struct Report {
	int setup_ok;
	char setup_error[200];
	int submit_status;
	int wait_status;
	int later_submit_status;
	uint64_t seq;
	neuron_fault fault;
	int free_status;
	uint64_t b_addr;
};

// Child side: returns what B saw. Plain calls only (no Criterion asserts here).
Report intrude(Attack attack, const std::string &socket, uint64_t a_addr)
{
	Report r;
	std::memset(&r, 0, sizeof(r));
	auto setup_fail = [&](const char *what, neuron_status s) {
		std::snprintf(r.setup_error, sizeof(r.setup_error), "%s: %s: %s", what, neuron_status_name(s),
			      neuron_last_error());
		return r;
	};
	struct neuron_connect_options o = {};
	o.socket_path = socket.c_str();
	o.client_name = "intruder";
	neuron_client *c = nullptr;
	neuron_status s = neuron_connect(&o, &c);
	if (s != NEURON_OK)
		return setup_fail("connect", s);
	neuron_queue *q = nullptr;
	const bool dma = attack == Attack::ReadViaDma;
	if ((s = neuron_queue_create(c, 0, dma ? NEURON_QUEUE_DMA : NEURON_QUEUE_CORE, 0, 0, &q)) != NEURON_OK)
		return setup_fail("queue_create", s);
	uint64_t own = 0;
	if ((s = neuron_alloc(c, 0, 4096, 0, &own)) != NEURON_OK)
		return setup_fail("alloc", s);
	r.b_addr = own;
	neuron_cmd cmd;
	const int64_t n = kABytes / 4;
	switch (attack) {
	case Attack::ReadViaDma: {
		neuron_host_buffer *hb = nullptr;
		if ((s = neuron_host_alloc(c, kABytes, &hb)) != NEURON_OK)
			return setup_fail("host_alloc", s);
		r.submit_status = neuron_copy_d2h_async(q, hb, 0, a_addr, kABytes, &r.seq);
		break;
	}
	case Attack::WriteViaCore:
		cmd = make_fill_f32(desc(a_addr, NEURON_DTYPE_F32, {n}), 42.0);
		r.submit_status = neuron_submit(q, &cmd, &r.seq);
		break;
	case Attack::MatmulInput:
		// out and a are B's own (4x4 floats), b is A's.
		cmd = make_matmul(desc(own, NEURON_DTYPE_F32, {4, 4}), desc(own + 64, NEURON_DTYPE_F32, {4, 4}),
				  desc(a_addr, NEURON_DTYPE_F32, {4, 4}));
		r.submit_status = neuron_submit(q, &cmd, &r.seq);
		break;
	case Attack::Straddle:
		// From A's last 256 bytes into whatever follows (B's own buffer when the
		// allocator placed it right after A's).
		cmd = make_fill_f32(desc(a_addr + kABytes - 256, NEURON_DTYPE_F32, {128}), 42.0);
		r.submit_status = neuron_submit(q, &cmd, &r.seq);
		break;
	case Attack::Free:
		r.free_status = neuron_free(c, 0, a_addr);
		r.setup_ok = 1;
		return r;
	}
	r.setup_ok = 1;
	if (r.submit_status != NEURON_OK)
		return r;
	r.wait_status = neuron_queue_wait(q, r.seq, kWaitNs);
	neuron_queue_fault(q, &r.fault);
	// Sticky: the queue takes no more work.
	neuron_cmd nop;
	neuron_cmd_init(&nop, NEURON_OP_NOP, 0);
	r.later_submit_status = neuron_submit(q, &nop, nullptr);
	neuron_queue_destroy(q);
	neuron_disconnect(c);
	return r;
}

struct Victim {
	Tenant t;
	uint64_t addr = 0;
	std::vector<uint8_t> pattern;

	void open()
	{
		t.open("victim");
		// The first allocation on a fresh daemon: the lowest address of device 0.
		addr = dev_alloc(t.client, kABytes);
		pattern = random_bytes(kABytes, 4242);
		h2d(t.dma, addr, pattern.data(), kABytes);
	}

	// A's bytes are exactly what A wrote, and A's queues still work.
	void check_untouched()
	{
		std::vector<uint8_t> back(kABytes, 0);
		d2h(t.dma, back.data(), addr, kABytes);
		for (uint64_t i = 0; i < kABytes; ++i)
			cr_assert(back[i] == pattern[i], "A's byte %llu changed from 0x%02x to 0x%02x",
				  (unsigned long long)i, pattern[i], back[i]);
		const uint64_t scratch = dev_alloc(t.client, 1024);
		run(t.core, make_fill_f32(desc(scratch, NEURON_DTYPE_F32, {256}), 7.0));
		const auto v = download_f32(t.dma, scratch, 256);
		for (float x : v)
			cr_assert(x == 7.0f, "A's core queue stopped working after B's fault");
		NEURON_OK_OR_FAIL(neuron_free(t.client, 0, addr));
	}
};

Report run_child(Attack attack, uint64_t a_addr)
{
	const std::string socket = g_daemon->socket_path();
	Child child = fork_child();
	if (child.pid == 0) {
		const Report r = intrude(attack, socket, a_addr);
		child_report_and_exit(child, &r, sizeof(r));
	}
	Report r;
	std::memset(&r, 0, sizeof(r));
	const bool got = read_report(child, &r, sizeof(r), 60000);
	const int status = reap_child(child, 10000);
	cr_assert(got, "tenant B's process sent no report (wait status %d)", status);
	cr_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "tenant B exited with status %d", status);
	cr_assert(r.setup_ok, "tenant B could not set up: %s", r.setup_error);
	return r;
}

void expect_oob_fault(const Report &r, const char *operand)
{
	cr_assert(r.submit_status == NEURON_OK, "B's submit failed before reaching the device: %s",
		  neuron_status_name(static_cast<neuron_status>(r.submit_status)));
	cr_assert(r.wait_status == NEURON_ERR_FAULT, "B's wait returned %s, expected NEURON_ERR_FAULT",
		  neuron_status_name(static_cast<neuron_status>(r.wait_status)));
	cr_assert(r.fault.code == NEURON_FAULT_OUT_OF_BOUNDS, "B's fault code is %u, expected OUT_OF_BOUNDS (%d)",
		  r.fault.code, NEURON_FAULT_OUT_OF_BOUNDS);
	cr_assert(r.fault.seq == r.seq, "fault names command %llu, B submitted %llu", (unsigned long long)r.fault.seq,
		  (unsigned long long)r.seq);
	cr_assert(std::strstr(r.fault.reason, operand), "fault reason \"%s\" does not name %s", r.fault.reason,
		  operand);
	cr_assert(r.later_submit_status == NEURON_ERR_FAULT, "a submit after the fault returned %s, not sticky FAULT",
		  neuron_status_name(static_cast<neuron_status>(r.later_submit_status)));
}

} // namespace

DAEMON_TEST(isolation, dma_read_of_another_tenants_memory_faults)
{
	Victim v;
	v.open();
	const Report r = run_child(Attack::ReadViaDma, v.addr);
	expect_oob_fault(r, "operand 1");
	v.check_untouched();
	v.t.close();
}

DAEMON_TEST(isolation, core_write_to_another_tenants_memory_faults)
{
	Victim v;
	v.open();
	const Report r = run_child(Attack::WriteViaCore, v.addr);
	expect_oob_fault(r, "operand 0");
	v.check_untouched();
	v.t.close();
}

DAEMON_TEST(isolation, matmul_input_in_another_tenants_memory_faults)
{
	Victim v;
	v.open();
	const Report r = run_child(Attack::MatmulInput, v.addr);
	expect_oob_fault(r, "operand 2");
	v.check_untouched();
	v.t.close();
}

DAEMON_TEST(isolation, range_straddling_two_tenants_faults)
{
	Victim v;
	v.open();
	const Report r = run_child(Attack::Straddle, v.addr);
	expect_oob_fault(r, "operand 0");
	v.check_untouched();
	v.t.close();
}

DAEMON_TEST(isolation, freeing_another_tenants_address_is_not_found)
{
	Victim v;
	v.open();
	const uint64_t before = hbm_used(v.t.client);
	const Report r = run_child(Attack::Free, v.addr);
	cr_assert(r.free_status == NEURON_ERR_NOT_FOUND, "B freeing A's address returned %s, expected NEURON_ERR_NOT_FOUND",
		  neuron_status_name(static_cast<neuron_status>(r.free_status)));
	// Once B's own 4 KiB went back (B exited), exactly A's memory is in use.
	const uint64_t after = wait_hbm_used(v.t.client, 0, before, 5000);
	cr_assert(after == before, "HBM in use went from %llu to %llu bytes after B's free attempt and exit",
		  (unsigned long long)before, (unsigned long long)after);
	v.check_untouched(); // ends with A's own free succeeding: the buffer was still A's
	v.t.close();
}
