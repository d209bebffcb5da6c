// The leases of every physical NeuronCore (DESIGN.md section 3): its home pool
// and the pool that holds it now, and the state of the loan between them. The
// scheduler (runtime/sched/core_scheduler.h) only learns the result — which pools
// a core runs — and confirms when a core taken back runs nothing of the borrower
// any more (a switch, at a tile boundary), which completes a reclaim here.
//
// Owned: holder == home. Lent: the holder (borrower) may run on it; the home pool
// (lender) keeps access too, and inference goes first at every tile boundary, so a
// loan never costs the lender more than one tile. Reclaiming: the holder is
// already home again, so the borrower gets no new tile there; the reclaim completes
// when the core's engine is between tiles (at most one tile later), and that
// latency is reported.
//
// Threads: the control thread calls everything except switched(), which the
// backend calls on the core's engine thread; mutex_ guards leases_ (the control
// thread's waits for a reclaim sleep on reclaimed_).
#pragma once

#include <backend/device_backend.h>
#include <sched/logical_core.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::daemon {

using sched::Pool;

enum class LeaseState : uint8_t { Owned, Lent, Reclaiming };
const char *lease_state_name(LeaseState s);
Pool other_pool(Pool p);

struct CoreLease {
	Pool home = Pool::Training;
	Pool holder = Pool::Training;
	LeaseState state = LeaseState::Owned;
	uint64_t since_ns = 0;            // last state change
	uint64_t reclaim_start_ns = 0;    // when the running reclaim began
	uint64_t reclaim_deadline_ns = 0; // absolute
	uint64_t last_reclaim_ns = 0;     // latency of the last completed reclaim
};

struct ReclaimDone {
	uint32_t device = 0;
	uint32_t core = 0;
	Pool borrower = Pool::Training;
	Pool lender = Pool::Inference;
	uint64_t latency_ns = 0;
	bool late = false; // finished after its deadline
};

class Leases {
public:
	// On each device the first `inference_cores` cores are homed in the inference
	// pool, the rest in the training pool; the scheduler learns it at once.
	Leases(backend::DeviceBackend &devices, uint32_t inference_cores);

	// Called on an engine thread when a reclaim completes. Set before engines start.
	std::function<void(const ReclaimDone &)> on_reclaimed;

	// ---- control thread ----
	std::vector<CoreLease> of(uint32_t device) const;
	uint32_t held(uint32_t device, Pool pool) const;  // cores whose holder is `pool`
	uint32_t homed(uint32_t device, Pool pool) const; // cores homed in `pool`
	// Lends a core owned by its home pool to the other pool. "" or why not.
	std::string lend(uint32_t device, uint32_t core);
	// Starts taking a lent core back; deadline_ns is absolute (monotonic).
	std::string begin_reclaim(uint32_t device, uint32_t core, uint64_t deadline_ns);
	// Waits until the reclaim completed or deadline_ns (absolute) passed.
	bool wait_reclaimed(uint32_t device, uint32_t core, uint64_t deadline_ns);

	// ---- engine thread of (device, core): its switch is done ----
	void switched(uint32_t device, uint32_t core);

private:
	CoreLease &at(uint32_t device, uint32_t core);

	backend::DeviceBackend &devices_;
	mutable std::mutex mutex_;
	std::condition_variable reclaimed_;
	std::vector<std::vector<CoreLease>> leases_; // [device][core]
};

} // namespace neuron::daemon
