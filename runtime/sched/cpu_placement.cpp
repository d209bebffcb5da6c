#include "cpu_placement.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>

namespace neuron::sched {

CpuPlacement CpuPlacement::none(std::string reason)
{
	CpuPlacement p;
	p.unpinned_reason = std::move(reason);
	return p;
}

CpuPlacement CpuPlacement::plan(const std::vector<int> &allowed, uint32_t cores, int threads_per_core)
{
	if (cores == 0 || threads_per_core < 1)
		return none("no engine threads to place");
	const uint64_t wanted = uint64_t{cores} * uint64_t(threads_per_core);
	if (wanted > allowed.size())
		return none(std::to_string(cores) + " cores x " + std::to_string(threads_per_core) + " threads for " +
			    std::to_string(allowed.size()) + " CPUs: the host scheduler places them");
	CpuPlacement p;
	p.per_core.resize(cores);
	for (uint32_t c = 0; c < cores; ++c)
		for (int t = 0; t < threads_per_core; ++t)
			p.per_core[c].push_back(allowed[size_t(c) * size_t(threads_per_core) + size_t(t)]);
	return p;
}

CpuPlacement CpuPlacement::plan_for_this_process(uint32_t cores, int threads_per_core)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return none("sched_getaffinity failed");
	std::vector<int> allowed;
	for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
		if (CPU_ISSET(cpu, &set))
			allowed.push_back(cpu);
	return plan(allowed, cores, threads_per_core);
}

std::string CpuPlacement::describe() const
{
	if (!pinned())
		return "not pinned (" + unpinned_reason + ")";
	std::string s;
	for (size_t c = 0; c < per_core.size(); ++c) {
		s += (c ? " nc" : "nc") + std::to_string(c) + "->";
		for (size_t i = 0; i < per_core[c].size(); ++i)
			s += (i ? "," : "") + std::to_string(per_core[c][i]);
	}
	return refused.empty() ? s : s + " (" + refused + ")";
}

bool pin_thread(std::thread &thread, const std::vector<int> &cpus)
{
	if (cpus.empty() || !thread.joinable())
		return true;
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int cpu : cpus)
		CPU_SET(cpu, &set);
	const int err = pthread_setaffinity_np(thread.native_handle(), sizeof(set), &set);
	if (err)
		errno = err;
	return err == 0;
}

} // namespace neuron::sched
