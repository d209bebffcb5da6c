// What an engine counts for one physical NeuronCore (or a device's DMA engine):
// the telemetry neuron-top, neuron-ls and the capacity reply show, the same on
// every backend (the scheduler's engines write it whatever runs the tiles).
//
// Written by the core's engine thread and its tile threads, read by telemetry
// (relaxed atomics; the histograms are lock-free), except busy time: busy_ns,
// running_since_ns and busy_seq are written by the engine thread alone and read
// together through busy_now()'s seqlock.
#pragma once

#include "latency_histogram.h"

#include <neuron/futex.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace neuron::sched {

struct CoreCounters {
	std::atomic<uint64_t> busy_ns{0};       // tile groups that ended
	// When the running tile group started (monotonic ns; 0: none runs): busy_now()
	// counts a long tile while it runs (a kmd job under TCG takes seconds), not all
	// at its end, which made a window's busy fraction exceed 1.
	std::atomic<uint64_t> running_since_ns{0};
	// Odd while the engine ends a group (reads its end time, adds it to busy_ns,
	// clears running_since_ns): busy_now() waits, so that what it estimated for a
	// running group never exceeds what the engine then adds.
	std::atomic<uint64_t> busy_seq{0};
	std::atomic<uint64_t> commands{0};
	// Resets of this core (the watchdog's: a tile group made no progress for
	// --core-watchdog-ms; its command faulted NEURON_FAULT_RESET).
	std::atomic<uint64_t> resets{0};
	std::atomic<uint64_t> tiles{0};
	std::atomic<uint64_t> max_tile_ns{0};  // longest tile so far, wall time (host preemption included)
	// Longest tile of a command cut into several, in the engine thread's CPU time: the
	// tile's own cost, the preemption bound the tiling controls (on a shared host
	// the wall time also counts slices in which the OS ran something else).
	std::atomic<uint64_t> max_tile_cpu_ns{0};
	// Wall times of the tiles of tiled commands: percentiles tell the tiling's bound
	// apart from the odd tile a busy host stretched (which the maximum reports).
	LatencyHistogram tile_ns;
	// The same tiles' CPU times, and how many took more than 1 ms of it: the rare
	// long ones are hard to tell from a host that stole the vCPU (the test VMs do
	// not account steal time), a distribution is not.
	LatencyHistogram tile_cpu_ns;
	std::atomic<uint64_t> tiles_over_1ms_cpu{0};
	std::atomic<uint64_t> last_tenant{0};  // tenant of the latest tile (0: none yet)
	std::atomic<uint8_t> last_pool{0};     // its pool (chip::Pool)
};

// Busy time up to now, the running tile group included; never less than an
// earlier call returned. A seqlock on busy_seq: a read that overlapped the end of
// a group is retried, and a clean one took its clock before the engine took the
// group's end time, so the group's share it estimated is at most what is added.
inline uint64_t busy_now(const CoreCounters &c)
{
	for (;;) {
		const uint64_t seq = c.busy_seq.load();
		if (seq & 1) {
			std::this_thread::yield();
			continue;
		}
		const uint64_t since = c.running_since_ns.load();
		const uint64_t busy = c.busy_ns.load();
		const uint64_t now = neuron::detail::monotonic_ns();
		if (c.busy_seq.load() == seq)
			return busy + (since != 0 && now > since ? now - since : 0);
	}
}

} // namespace neuron::sched
