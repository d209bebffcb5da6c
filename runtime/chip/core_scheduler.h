// One device's per-core scheduling state: which pool each physical NeuronCore
// belongs to (its lease), and the logical cores the device's engines may run.
//
// Leases: every physical core has a home pool and a holder pool. Owned: holder ==
// home. Lent: the holder (borrower) may run on it; the home pool (lender) keeps
// access too, and inference goes first at every tile boundary, so a loan never costs
// the lender more than one tile. Reclaiming: the holder is already home again, so the
// borrower gets no new tile there; the reclaim completes when the core's engine is
// between tiles (at most one tile later), and that latency is reported.
//
// Which logical cores a physical core may run (eligibility): those of its home and
// holder pools; and those of a pool with no core at all on this device (so a tenant
// is never stranded; it then runs at its class's priority). Unpooled schedulers (a
// device's DMA engine) run everything.
//
// Threads and locks: mutex_ guards leases_ and logical_ (control thread writes,
// engines copy their eligible set when generation_ moves). reclaim_pending_ and the
// wake words are read lock-free by engines. reclaimed_ (a condition variable on
// mutex_) lets the control thread wait for a reclaim to finish.
#pragma once

#include "logical_core.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::chip {

enum class LeaseState : uint8_t { Owned, Lent, Reclaiming };
const char *lease_state_name(LeaseState s);

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

class CoreScheduler {
public:
	// The first `inference_cores` cores are homed in the inference pool, the rest in
	// the training pool.
	CoreScheduler(uint32_t device, uint32_t cores, uint32_t inference_cores, bool pooled);
	CoreScheduler(const CoreScheduler &) = delete;
	CoreScheduler &operator=(const CoreScheduler &) = delete;

	uint32_t device() const { return device_; }
	uint32_t cores() const { return cores_; }
	bool pooled() const { return pooled_; }

	// Called on an engine thread when a reclaim completes. Set before engines start.
	std::function<void(const ReclaimDone &)> on_reclaimed;

	// ---- control thread ----
	// The logical core (tenant, index), created on first use.
	std::shared_ptr<LogicalCore> attach(uint64_t tenant, uint32_t index, Pool pool, uint32_t weight);
	void add_queue(LogicalCore &l, std::shared_ptr<Queue> q);
	// Removes q; drops the logical core once it has no queue left.
	void remove_queue(LogicalCore &l, const Queue *q);

	std::vector<CoreLease> leases() const;
	std::vector<std::shared_ptr<LogicalCore>> logical_cores() const;
	// Cores whose holder is `pool`.
	uint32_t held(Pool pool) const;
	// Cores homed in `pool`.
	uint32_t homed(Pool pool) const;

	// Lends core (owned by its home pool) to the other pool. "" or why not.
	std::string lend(uint32_t core);
	// Starts taking a lent core back; deadline_ns is absolute (monotonic).
	std::string begin_reclaim(uint32_t core, uint64_t deadline_ns);
	// Waits until core's reclaim completed or deadline_ns (absolute) passed.
	bool wait_reclaimed(uint32_t core, uint64_t deadline_ns);

	// ---- engines ----
	uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
	// The logical cores physical core `core` may run, and the generation they are of.
	void eligible(uint32_t core, std::vector<std::shared_ptr<LogicalCore>> *out, uint64_t *gen) const;
	bool reclaim_pending(uint32_t core) const { return slots_[core]->reclaim_pending.load(std::memory_order_acquire); }
	// The engine of `core` is between tiles: a pending reclaim is done.
	void complete_reclaim(uint32_t core);
	uint32_t *wake_word(uint32_t core) { return &slots_[core]->wake_word; }
	void wake(uint32_t core);
	void wake_all();

	// Fair share within a class: the virtual time of the latest tile run, per pool.
	std::atomic<uint64_t> &class_clock(Pool p) { return clock_[static_cast<int>(p)]; }

private:
	struct alignas(64) Slot {
		uint32_t wake_word = 0;               // futex
		std::atomic<bool> reclaim_pending{false};
	};
	void bump_locked();
	bool pool_present_locked(Pool p) const;

	uint32_t device_;
	uint32_t cores_;
	bool pooled_;
	mutable std::mutex mutex_;
	std::condition_variable reclaimed_;
	std::vector<CoreLease> leases_;
	std::vector<std::shared_ptr<LogicalCore>> logical_;
	std::vector<std::unique_ptr<Slot>> slots_;
	std::atomic<uint64_t> generation_{1};
	std::atomic<uint64_t> clock_[kPoolCount]{};
};

} // namespace neuron::chip
