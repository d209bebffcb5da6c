// Which host CPUs each NeuronCore's engine threads run on.
//
// On a real chip every NeuronCore is its own hardware. On the simulated chip a
// core is host threads, and the host scheduler is free to put an inference
// core's engine on the CPU where a training core's engine is in the middle of a
// tile: the inference command then waits for that tile's time slice. That is
// where bench-sharing's inference tail came from in the 2-vCPU QEMU guest (the
// inference core's engine waited ~0.3 ms for a CPU per command beside a trainer,
// ~1 us alone). When the host has a CPU for every engine thread, each core's
// engine threads get CPUs of their own, as each core has its own silicon. When
// it has not (more cores x threads per core than CPUs), pinning would only take
// away the scheduler's freedom to balance, so nothing is pinned.
//
// DMA engines, tenants and the daemon's other threads are not pinned: they run
// briefly and wherever a CPU is free.
#pragma once

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace neuron::sched {

struct CpuPlacement {
	// CPUs of each physical core, in the order the backend counts its cores
	// (device 0's cores, then device 1's, ...); empty: nothing is pinned.
	std::vector<std::vector<int>> per_core;
	// Why nothing is pinned, for the start log ("" when pinned).
	std::string unpinned_reason;
	// Set when the kernel refused a thread's mask (a cpuset changed under us):
	// that thread runs wherever the host scheduler puts it.
	std::string refused;

	// The plan for `cores` physical cores of `threads_per_core` host threads each
	// on the CPUs in `allowed` (this process's affinity set, ascending).
	static CpuPlacement plan(const std::vector<int> &allowed, uint32_t cores, int threads_per_core);
	// The same on the CPUs this process may run on (sched_getaffinity).
	static CpuPlacement plan_for_this_process(uint32_t cores, int threads_per_core);
	// Nothing pinned, with the reason given.
	static CpuPlacement none(std::string reason);

	bool pinned() const { return !per_core.empty(); }
	// One line for the log: "nc0->0 nc1->1" or the reason nothing is pinned.
	std::string describe() const;
};

// Restricts `thread` (and the threads it starts later, which inherit its mask)
// to `cpus`. False, with errno set, if the kernel refused; empty cpus: no-op.
bool pin_thread(std::thread &thread, const std::vector<int> &cpus);

} // namespace neuron::sched
