// Fault injection (neurond --enable-fault-injection --inject-fault ...): each kind
// of misbehaving engine must cost only the tenant whose work was on it. Every test
// runs four tenants side by side, each checking every result against the CPU
// (tests/common/checked_work.h), and asserts: the injected fault hit exactly the
// tenants it should (one for a fault, none for a slow core), that tenant's queue
// fault and an event name the injection, and every other tenant finished all its
// rounds with exact results. Without containment (a fault that takes the core or
// the device down with all its tenants, a stuck core nobody resets, a slow core
// reset as if stuck) these fail or hang until Criterion's timeout.
#include "checked_work.h"
#include "daemon_test.h"
#include "raw_client.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace dt;
using neuron::test::CheckedWorkResult;
using neuron::test::CheckedWorkSpec;
using neuron::test::NeurondProcess;
using neuron::test::RawClient;
namespace api = neuron::api;

namespace {

constexpr int kTenants = 4;
constexpr int kRounds = 40;

// Two cores per device, both in the training pool, so the tenants spread over
// both and the faulty core (1) runs some of everyone's work.
void daemon_with(std::initializer_list<std::string> faults)
{
	std::vector<std::string> flags = {"--inference-cores", "0", "--enable-fault-injection"};
	flags.insert(flags.end(), faults.begin(), faults.end());
	daemon_up_with(flags);
}

std::vector<CheckedWorkResult> run_tenants(std::vector<uint64_t> *ids = nullptr)
{
	std::vector<CheckedWorkResult> results(kTenants);
	std::vector<std::thread> threads;
	const std::string socket = g_daemon->socket_path();
	for (int i = 0; i < kTenants; ++i)
		threads.emplace_back([&, i] {
			CheckedWorkSpec spec;
			spec.seed = 1000 + static_cast<uint32_t>(i);
			results[i] = neuron::test::run_checked_tenant(socket, "tenant" + std::to_string(i), spec, kRounds, kWaitNs);
		});
	for (auto &t : threads)
		t.join();
	(void)ids;
	return results;
}

// The events so far (a subscription with replay, read until it goes quiet).
std::vector<api::Event> events_so_far()
{
	RawClient sub;
	cr_assert(sub.connect(g_daemon->socket_path()) && sub.hello());
	api::Request s;
	s.mutable_subscribe_events()->set_replay(true);
	api::Response r;
	cr_assert(sub.call(s, &r, 10000) && r.has_ok(), "SubscribeEvents failed");
	std::vector<api::Event> out;
	api::Response ev;
	while (sub.receive(&ev, 500))
		if (ev.has_event())
			out.push_back(ev.event());
	return out;
}

std::vector<api::Event> events_of_type(const std::vector<api::Event> &all, const char *type)
{
	std::vector<api::Event> out;
	for (const auto &e : all)
		if (e.type() == type)
			out.push_back(e);
	return out;
}

// Every tenant but the hit one finished every round with exact results; returns
// the index of the hit one (asserting there is exactly `hit` of them).
int check_containment(const std::vector<CheckedWorkResult> &results, int hit)
{
	int hit_index = -1, hits = 0;
	for (int i = 0; i < kTenants; ++i) {
		const CheckedWorkResult &r = results[i];
		cr_assert(r.error.empty(), "tenant %d failed: %s", i, r.error.c_str());
		cr_assert(r.wrong == 0, "tenant %d got %llu wrong results (first: %s)", i, (unsigned long long)r.wrong,
			  r.first_wrong.c_str());
		if (r.faulted) {
			++hits;
			hit_index = i;
			continue;
		}
		cr_assert(r.rounds == kRounds, "tenant %d ran %llu of %d rounds", i, (unsigned long long)r.rounds, kRounds);
	}
	cr_assert(hits == hit, "%d tenants were hit, expected %d", hits, hit);
	for (int i = 0; i < kTenants && hit; ++i)
		if (results[i].faulted && i != hit_index)
			cr_assert_fail("tenant %d faulted too: %s", i, results[i].fault.reason);
	return hit_index;
}

// The hit tenant's id: the one whose fault.injected event names it.
void check_events(const std::vector<api::Event> &all, const char *fault_type, const char *needle, uint64_t *tenant)
{
	const auto injected = events_of_type(all, "fault.injected");
	cr_assert(injected.size() == 1, "%zu fault.injected events, expected 1", injected.size());
	cr_assert(injected[0].message().find(needle) != std::string::npos, "fault.injected says \"%s\", not %s",
		  injected[0].message().c_str(), needle);
	*tenant = injected[0].tenant_id();
	cr_assert(*tenant != 0, "fault.injected names no tenant");
	const auto faults = events_of_type(all, fault_type);
	cr_assert(faults.size() == 1, "%zu %s events, expected 1", faults.size(), fault_type);
	cr_assert(faults[0].tenant_id() == *tenant, "%s names tenant %llu, the injection hit %llu", fault_type,
		  (unsigned long long)faults[0].tenant_id(), (unsigned long long)*tenant);
	cr_assert(faults[0].message().find(needle) != std::string::npos, "%s says \"%s\", not %s", fault_type,
		  faults[0].message().c_str(), needle);
}

// After the injection fired, a new tenant still runs exactly on every core.
void check_still_serving()
{
	for (uint32_t core = 0; core < 2; ++core) {
		CheckedWorkSpec spec;
		spec.core = core;
		spec.seed = 77 + core;
		const CheckedWorkResult r =
			neuron::test::run_checked_tenant(g_daemon->socket_path(), "after", spec, 10, kWaitNs);
		cr_assert(r.error.empty() && !r.faulted && r.rounds == 10 && r.wrong == 0,
			  "a tenant after the injection: %s%s, %llu rounds, %llu wrong", r.error.c_str(), r.fault.reason,
			  (unsigned long long)r.rounds, (unsigned long long)r.wrong);
	}
}

} // namespace

TestSuite(faults, .fini = daemon_down, .timeout = 120);

DAEMON_TEST(faults, engine_fault_hits_one_tenant)
{
	daemon_with({"--inject-fault", "engine-fault:core=1,after=3"});
	const auto results = run_tenants();
	const int hit = check_containment(results, 1);
	const CheckedWorkResult &r = results[hit];
	cr_assert(r.fault_queue == "core" && r.fault.code == NEURON_FAULT_EXEC, "the hit tenant's %s queue: code %u",
		  r.fault_queue.c_str(), r.fault.code);
	cr_assert(std::strstr(r.fault.reason, "injected engine-fault (--inject-fault engine-fault:core=1,after=3)"),
		  "the fault does not name the injection: %s", r.fault.reason);
	uint64_t tenant = 0;
	check_events(events_so_far(), "queue.fault", "injected engine-fault", &tenant);
	check_still_serving();
}

DAEMON_TEST(faults, dma_error_hits_one_tenant)
{
	daemon_with({"--inject-fault", "dma-error:after=10"});
	const auto results = run_tenants();
	const int hit = check_containment(results, 1);
	const CheckedWorkResult &r = results[hit];
	cr_assert(r.fault_queue == "dma" && r.fault.code == NEURON_FAULT_EXEC, "the hit tenant's %s queue: code %u",
		  r.fault_queue.c_str(), r.fault.code);
	cr_assert(std::strstr(r.fault.reason, "injected dma-error") && std::strstr(r.fault.reason, "nd0/dma"),
		  "the fault does not name the injection: %s", r.fault.reason);
	uint64_t tenant = 0;
	check_events(events_so_far(), "queue.fault", "injected dma-error", &tenant);
	check_still_serving();
}

// A slow core is not a stuck one: it keeps making progress, so the watchdog leaves
// it alone and nobody faults; every result stays exact.
DAEMON_TEST(faults, slow_core_faults_nobody)
{
	daemon_with({"--inject-fault", "slow-core:core=1,factor=20", "--core-watchdog-ms", "2000"});
	const auto results = run_tenants();
	check_containment(results, 0);
	const auto all = events_so_far();
	const auto injected = events_of_type(all, "fault.injected");
	cr_assert(injected.size() == 1 && injected[0].message().find("runs 20 times slower") != std::string::npos,
		  "expected one fault.injected event for the slow core, got %zu", injected.size());
	cr_assert(events_of_type(all, "queue.fault").empty() && events_of_type(all, "core.reset").empty(),
		  "a slow core caused a fault or a reset");
}

// A stuck core: the watchdog resets it; only the tenant whose command was on it
// faults (RESET), the others finish (their work moves to the other core or waits
// for the reset), and the core serves again afterwards.
DAEMON_TEST(faults, stuck_core_is_reset_and_hits_one_tenant)
{
	daemon_with({"--inject-fault", "stuck-core:core=1,after=3", "--core-watchdog-ms", "300"});
	const auto results = run_tenants();
	const int hit = check_containment(results, 1);
	const CheckedWorkResult &r = results[hit];
	cr_assert(r.fault_queue == "core" && r.fault.code == NEURON_FAULT_RESET, "the hit tenant's %s queue: code %u",
		  r.fault_queue.c_str(), r.fault.code);
	cr_assert(std::strstr(r.fault.reason, "core nd0/nc1 was reset by the watchdog: no progress for") &&
			  std::strstr(r.fault.reason, "injected stuck-core"),
		  "the fault does not say what happened: %s", r.fault.reason);
	uint64_t tenant = 0;
	check_events(events_so_far(), "core.reset", "injected stuck-core", &tenant);
	check_still_serving();
}

// Production daemons cannot be told to fault: --inject-fault alone is refused at
// start, and so is a bad spec, each with a reason.
Test(faults, injection_needs_the_enable_flag)
{
	struct Case {
		std::vector<std::string> flags;
		const char *says;
	};
	const Case cases[] = {
		{{"--inject-fault", "engine-fault:core=1"}, "refused without --enable-fault-injection"},
		{{"--enable-fault-injection", "--inject-fault", "melt:core=1"}, "unknown kind 'melt'"},
		{{"--enable-fault-injection", "--inject-fault", "engine-fault"}, "needs core=C"},
		{{"--enable-fault-injection", "--inject-fault", "slow-core:core=0,factor=1"}, "factor must be"},
		{{"--enable-fault-injection", "--inject-fault", "dma-error:core=0"}, "core does not apply"},
		{{"--enable-fault-injection", "--inject-fault", "engine-fault:core=7"}, "has no core 7"},
		{{"--enable-fault-injection", "--inject-fault", "engine-fault:core=0,device=5"}, "no device 5"},
		{{"--enable-fault-injection", "--core-watchdog-ms", "0", "--inject-fault", "stuck-core:core=0"},
		 "only ever freed by the watchdog"},
	};
	for (const auto &c : cases) {
		auto settings = NeurondProcess::default_settings();
		settings.insert(settings.end(), c.flags.begin(), c.flags.end());
		NeurondProcess d({}, settings);
		std::string error;
		cr_assert(d.spawn(&error), "%s", error.c_str());
		const auto e = d.wait_exit(10000);
		cr_assert(e.exited && e.code != 0, "neurond %s started (%s)", c.flags.back().c_str(), e.describe().c_str());
		cr_assert(d.log().find(c.says) != std::string::npos, "neurond %s: the error does not say \"%s\":\n%s",
			  c.flags.back().c_str(), c.says, d.log_tail().c_str());
	}
}
