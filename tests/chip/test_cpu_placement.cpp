// sched::CpuPlacement: each core's engine threads get CPUs of their own only when
// the host has one for every engine thread; pin_thread restricts a running thread
// and the threads it starts later (as the OpenMP tile threads of an engine).
#include <criterion/criterion.h>

#include <sched/cpu_placement.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

using neuron::sched::CpuPlacement;

Test(cpu_placement, one_cpu_per_engine_thread)
{
	const auto p = CpuPlacement::plan({0, 1, 2, 3}, 2, 2);
	cr_assert(p.pinned());
	cr_assert_eq(p.per_core.size(), 2u);
	cr_assert(p.per_core[0] == (std::vector<int>{0, 1}));
	cr_assert(p.per_core[1] == (std::vector<int>{2, 3}));
	const std::string text = p.describe();
	cr_assert_str_eq(text.c_str(), "nc0->0,1 nc1->2,3");
}

Test(cpu_placement, uses_the_allowed_cpus_only)
{
	// A cpuset of CPUs 4, 6 and 9: cores go to those, in order.
	const auto p = CpuPlacement::plan({4, 6, 9}, 3, 1);
	cr_assert(p.pinned());
	cr_assert(p.per_core[0] == std::vector<int>{4});
	cr_assert(p.per_core[1] == std::vector<int>{6});
	cr_assert(p.per_core[2] == std::vector<int>{9});
}

Test(cpu_placement, overcommitted_hosts_are_not_pinned)
{
	// 8 cores x 1 thread on 2 CPUs, and 2 cores x 2 threads on 2 CPUs (bench-runtime's
	// daemon): pinning would forbid the balancing those need.
	for (auto [cores, threads] : {std::pair<uint32_t, int>{8, 1}, {2, 2}}) {
		const auto p = CpuPlacement::plan({0, 1}, cores, threads);
		cr_assert(!p.pinned(), "%u cores x %d threads pinned on 2 CPUs", cores, threads);
		const std::string text = p.describe();
		cr_assert(text.find("for 2 CPUs") != std::string::npos, "%s", text.c_str());
	}
	cr_assert(!CpuPlacement::plan({0, 1}, 0, 1).pinned());
}

namespace {

std::vector<int> affinity_of_this_thread()
{
	cpu_set_t set;
	CPU_ZERO(&set);
	pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
	std::vector<int> cpus;
	for (int c = 0; c < CPU_SETSIZE; ++c)
		if (CPU_ISSET(c, &set))
			cpus.push_back(c);
	return cpus;
}

} // namespace

Test(cpu_placement, pin_thread_restricts_it_and_its_children)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	int first = -1;
	for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
		if (CPU_ISSET(c, &set))
			first = c;
	std::atomic<bool> pinned{false};
	std::vector<int> seen, child_seen;
	std::thread t([&] {
		while (!pinned.load())
			std::this_thread::yield();
		seen = affinity_of_this_thread();
		std::thread child([&] { child_seen = affinity_of_this_thread(); });
		child.join();
	});
	cr_assert(neuron::sched::pin_thread(t, {first}), "pin_thread refused: %s", strerror(errno));
	pinned.store(true);
	t.join();
	cr_assert(seen == std::vector<int>{first}, "the pinned thread may run on %zu CPUs", seen.size());
	cr_assert(child_seen == std::vector<int>{first}, "its child may run on %zu CPUs", child_seen.size());
	// A CPU the kernel does not have is refused with an error, not ignored.
	std::thread idle([] {});
	cr_assert(!neuron::sched::pin_thread(idle, {CPU_SETSIZE - 1}), "CPU %d accepted", CPU_SETSIZE - 1);
	idle.join();
}
