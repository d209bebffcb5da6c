// sched::busy_now: a core's busy time counts the running tile group while it runs,
// and never goes backwards while an engine ends groups and starts new ones.
#include <sched/counters.h>

#include <neuron/futex.h>

#include <criterion/criterion.h>

#include <atomic>
#include <thread>

using neuron::detail::monotonic_ns;
using neuron::sched::busy_now;
using neuron::sched::CoreCounters;

Test(busy_now, idle_core_reports_the_groups_that_ended)
{
	CoreCounters c;
	c.busy_ns = 1234;
	cr_assert_eq(busy_now(c), 1234u);
}

Test(busy_now, a_running_group_counts_from_its_start)
{
	CoreCounters c;
	c.busy_ns = 1000;
	c.running_since_ns = monotonic_ns() - 5'000'000;
	const uint64_t b = busy_now(c);
	cr_assert(b >= 1000u + 5'000'000u && b < 1000u + 5'000'000u + 10'000'000'000u, "busy %llu",
		  (unsigned long long)b);
	// A start after the reader's clock (another CPU's view) adds nothing.
	c.running_since_ns = monotonic_ns() + 1'000'000'000;
	cr_assert_eq(busy_now(c), 1000u);
}

// The engine's protocol (engine.cpp step/charge): store the start, run, then in
// busy_seq's odd window take the end time, add the wall time, clear the start.
// A reader must never see the busy time go back.
Test(busy_now, monotonic_while_an_engine_runs_groups)
{
	CoreCounters c;
	std::atomic<bool> stop{false};
	std::thread engine([&] {
		while (!stop.load(std::memory_order_relaxed)) {
			const uint64_t start = monotonic_ns();
			c.running_since_ns.store(start);
			while (monotonic_ns() < start + 2000) { // a group of ~2 us
			}
			c.busy_seq.fetch_add(1);
			c.busy_ns.fetch_add(monotonic_ns() - start);
			c.running_since_ns.store(0);
			c.busy_seq.fetch_add(1);
		}
	});
	uint64_t last = 0, reads = 0;
	const uint64_t end = monotonic_ns() + 300'000'000;
	while (monotonic_ns() < end) {
		const uint64_t b = busy_now(c);
		cr_assert_geq(b, last, "busy time went back from %llu to %llu ns after %llu reads",
			      (unsigned long long)last, (unsigned long long)b, (unsigned long long)reads);
		last = b;
		++reads;
	}
	stop = true;
	engine.join();
	cr_assert_gt(last, 0u, "the engine ran no group");
}
