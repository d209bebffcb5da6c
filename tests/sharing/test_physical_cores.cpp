// A tenant names logical cores only: neurond decides which physical cores run them,
// from the pools' leases, and on the kmd backend the kernel enforces the same
// (the core mask of the tenant's driver file, set by neurond's controller file).
// Checked against the devices' own counters: per-core tiles from the scheduler's
// engines, and on kmd the driver's per-core job counts (sysfs) and the mask the
// driver reports for the tenant's file. Also: the per-tenant telemetry is real on
// every backend (latency, busy time, tiles).
#include "daemon_backend.h"
#include "sharing_test.h"

#include <fstream>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

namespace {

// Jobs the driver completed on each core of accel0 (kmd only).
std::vector<uint64_t> driver_jobs()
{
	std::ifstream in("/sys/class/accel/accel0/device/core_jobs_completed");
	std::vector<uint64_t> v;
	for (uint64_t x; in >> x;)
		v.push_back(x);
	cr_assert(!v.empty(), "cannot read the driver's per-core job counts");
	return v;
}

uint64_t core_tiles(uint32_t core) { return core_info(capacity(), 0, core).tiles(); }

uint64_t physical_mask(uint64_t tenant_id)
{
	const auto list = tenants();
	for (const auto &t : list.tenants())
		if (t.tenant_id() == tenant_id)
			for (const auto &u : t.usage())
				if (u.device() == 0)
					return u.physical_core_mask();
	cr_assert(false, "tenant %llu has no usage on device 0", (unsigned long long)tenant_id);
	return 0;
}

uint64_t tenant_id(neuron_client *c)
{
	const uint64_t id = neuron_tenant_id(c);
	cr_assert(id != 0, "the client has no tenant id");
	return id;
}

// Waits up to 10 s for pred.
template <class F> bool eventually(F pred)
{
	for (int i = 0; i < 1000; ++i) {
		if (pred())
			return true;
		sleep_ms(10);
	}
	return pred();
}

} // namespace

// Two logical cores of a training tenant on a device whose training pool has one
// physical core: both run there and nowhere else; a loan lets them onto the
// inference core, and its reclaim takes that core away again, in the scheduler and
// (kmd) in the kernel, while the tenant keeps every core it can busy.
Test(physical_cores, logical_cores_run_only_where_the_leases_say, .fini = down, .timeout = 240)
{
	start_daemon({"--cores", "2", "--inference-cores", "1", "--tile-macs", "262144"});
	Tenant t;
	t.open("trainer", NEURON_TENANT_TRAINING, 2);
	const bool kmd = neuron::test::daemon_runs_kmd(t.client);
	const uint64_t id = tenant_id(t.client);
	neuron_queue *q = nullptr;
	cr_assert(neuron_queue_create(t.client, 0, NEURON_QUEUE_CORE, 2, 0, &q) != NEURON_OK,
		  "a queue on core 2 of a 2-core device was accepted");
	Saturator load;
	load.start(t, 256);
	cr_assert(eventually([&] { return load.completed() >= 4; }), "the trainer made no progress");
	// Training holds core 1 only: nothing runs on core 0.
	const uint64_t idle0 = core_tiles(0);
	const std::vector<uint64_t> jobs0 = kmd ? driver_jobs() : std::vector<uint64_t>{};
	sleep_ms(300);
	cr_assert_eq(core_tiles(0), idle0, "a training tenant ran on the inference pool's core");
	cr_assert_eq(physical_mask(id), 0b10u, "the tenant may use cores 0x%llx, expected 0x2",
		     (unsigned long long)physical_mask(id));
	if (kmd)
		cr_assert_eq(driver_jobs()[0], jobs0[0], "the driver ran jobs on core 0 with no tenant of its pool");

	api::Response r = lend(api::POOL_INFERENCE, 1);
	cr_assert(r.has_loans(), "lend: %s", r.has_error() ? r.error().message().c_str() : "?");
	cr_assert(eventually([&] { return core_tiles(0) > idle0; }), "the borrowed core 0 never ran the trainer");
	cr_assert(eventually([&] { return physical_mask(id) == 0b11u; }), "after the loan the tenant may use 0x%llx",
		  (unsigned long long)physical_mask(id));

	r = reclaim(api::POOL_INFERENCE, 5000);
	cr_assert(r.has_loans() && r.loans().loans(0).state() == "returned", "reclaim: %s",
		  r.has_error() ? r.error().message().c_str() : "not returned");
	// The reclaim completed at a tile boundary: from now on core 0 runs nothing of
	// the trainer, and the kernel no longer accepts its jobs there.
	cr_assert_eq(physical_mask(id), 0b10u, "after the reclaim the tenant may still use 0x%llx",
		     (unsigned long long)physical_mask(id));
	const uint64_t after0 = core_tiles(0);
	const std::vector<uint64_t> after_jobs = kmd ? driver_jobs() : std::vector<uint64_t>{};
	const uint64_t done = load.completed();
	sleep_ms(300);
	cr_assert(eventually([&] { return load.completed() > done; }), "the trainer stopped after the reclaim");
	cr_assert_eq(core_tiles(0), after0, "the trainer ran on core 0 after it was reclaimed");
	if (kmd)
		cr_assert_eq(driver_jobs()[0], after_jobs[0], "the driver ran jobs on the reclaimed core 0");
	load.stop();
	t.close();
}

// The per-tenant telemetry neuron-top shows is measured on every backend.
Test(physical_cores, tenant_telemetry_is_real, .fini = down, .timeout = 240)
{
	start_daemon({"--cores", "2", "--tile-macs", "262144"});
	Tenant t;
	t.open("measured", NEURON_TENANT_INFERENCE, 1);
	const uint64_t id = tenant_id(t.client);
	const int64_t n = 128;
	const uint64_t a = t.alloc(n * n * 4), b = t.alloc(n * n * 4), c = t.alloc(n * n * 4);
	const neuron_cmd mm = matmul_cmd(c, a, b, n);
	for (int i = 0; i < 20; ++i)
		cr_assert(neuron_submit(t.cores[0], &mm, nullptr) == NEURON_OK, "submit: %s", neuron_last_error());
	cr_assert(neuron_queue_sync(t.cores[0], test::wait_ns(120'000'000'000)) == NEURON_OK, "sync: %s", neuron_last_error());
	bool found = false;
	const auto list = tenants();
	for (const auto &ti : list.tenants()) {
		if (ti.tenant_id() != id)
			continue;
		found = true;
		cr_assert(ti.busy_ns() > 0, "busy_ns is 0 after 20 matmuls");
		cr_assert(ti.tiles() >= 20, "tiles %llu after 20 matmuls", (unsigned long long)ti.tiles());
		cr_assert(ti.latency_p50_ns() > 0 && ti.latency_p99_ns() >= ti.latency_p50_ns(),
			  "latency p50 %llu p99 %llu", (unsigned long long)ti.latency_p50_ns(),
			  (unsigned long long)ti.latency_p99_ns());
		cr_assert_eq(ti.usage(0).commands_completed(), 20u, "commands completed");
	}
	cr_assert(found, "the tenant is not listed");
	const auto cap = capacity();
	uint64_t busy = 0;
	for (const auto &core : cap.cores())
		busy += core.busy_ns();
	cr_assert(busy > 0, "no core reports busy time");
	t.close();
}
