// One device's per-core scheduling state: which pools each physical core may run,
// and the logical cores the device's engines may run. The same on every backend:
// the engines (engine.h) ask it what to run next, whatever runs their tiles.
//
// Who decides the pools: the daemon's leases (daemon/leases.h) set each core's home
// and holder pool (set_pools). Taking a core away from a pool (a reclaim) is a
// switch: set_pools, then request_switch; the core's engine completes it between
// tiles, after which it runs nothing of the old pool, and reports on_switched.
//
// Which logical cores a physical core may run (eligibility): those of its home and
// holder pools, and those of a pool with no core at all on this device (so a tenant
// is never stranded; it then runs at its class's priority). Unpooled schedulers (a
// device's DMA engine) run everything.
//
// Threads and locks: mutex_ guards pools_ and logical_ (the control thread writes;
// engines copy their eligible set when generation_ moves). The switch flags and
// the wake words are read lock-free by engines.
#pragma once

#include "logical_core.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace neuron::sched {

struct CorePools {
	Pool home = Pool::Training;
	Pool holder = Pool::Training;
};

class CoreScheduler {
public:
	// Every core starts with home = holder = Training; the daemon sets the pools
	// before engines start.
	CoreScheduler(uint32_t device, uint32_t cores, bool pooled);
	CoreScheduler(const CoreScheduler &) = delete;
	CoreScheduler &operator=(const CoreScheduler &) = delete;

	uint32_t device() const { return device_; }
	uint32_t cores() const { return cores_; }
	bool pooled() const { return pooled_; }

	// Called on core's engine thread when a switch it was asked for is complete
	// (it is between tiles and runs only the new pools). Set before engines start.
	std::function<void(uint32_t core)> on_switched;

	// ---- control thread ----
	// The logical core (tenant, index), created on first use.
	std::shared_ptr<LogicalCore> attach(uint64_t tenant, uint32_t index, Pool pool, uint32_t weight);
	void add_queue(LogicalCore &l, std::shared_ptr<Queue> q);
	// Removes q; drops the logical core once it has no queue left.
	void remove_queue(LogicalCore &l, const Queue *q);
	std::vector<std::shared_ptr<LogicalCore>> logical_cores() const;

	void set_pools(uint32_t core, CorePools pools);
	CorePools pools(uint32_t core) const;
	// Asks core's engine to confirm, between tiles, that it runs only its current
	// pools (after a set_pools that removed one); on_switched follows.
	void request_switch(uint32_t core);
	// Whether physical core `core` may run logical cores of pool p (the rule above).
	bool allows(uint32_t core, Pool p) const;

	// ---- engines ----
	uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
	// The logical cores physical core `core` may run, and the generation they are of.
	void eligible(uint32_t core, std::vector<std::shared_ptr<LogicalCore>> *out, uint64_t *gen) const;
	bool switch_pending(uint32_t core) const { return slots_[core]->switch_pending.load(std::memory_order_acquire); }
	// The engine of `core` is between tiles with a fresh eligible set: a pending
	// switch is done.
	void complete_switch(uint32_t core);
	uint32_t *wake_word(uint32_t core) { return &slots_[core]->wake_word; }
	void wake(uint32_t core);
	void wake_all();

	// Fair share within a class: the virtual time of the latest tile run, per pool.
	std::atomic<uint64_t> &class_clock(Pool p) { return clock_[static_cast<int>(p)]; }

private:
	struct alignas(64) Slot {
		uint32_t wake_word = 0; // futex
		std::atomic<bool> switch_pending{false};
	};
	void bump_locked();
	bool allows_locked(uint32_t core, Pool p) const;

	uint32_t device_;
	uint32_t cores_;
	bool pooled_;
	mutable std::mutex mutex_;
	std::vector<CorePools> pools_;
	std::vector<std::shared_ptr<LogicalCore>> logical_;
	std::vector<std::unique_ptr<Slot>> slots_;
	std::atomic<uint64_t> generation_{1};
	std::atomic<uint64_t> clock_[kPoolCount]{};
};

} // namespace neuron::sched
