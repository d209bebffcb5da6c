// An engine: one host thread that plays one physical NeuronCore (or a device's DMA
// engine). At every tile boundary it asks its CoreScheduler which logical cores it may
// run, picks one (inference before training, then the lowest weighted virtual time:
// fair share within a class), claims it and runs its current command: whole if the
// command is one tile, else tiles on all the core's host threads at once, one thread
// per tile (tile_cursor.h). Tiles follow each other without a trip through the
// scheduler while no one else waits for the core (adaptive tiles: alone, an op runs
// at full speed; contended, the core switches after the running tiles).
// Logical cores are claimed one engine at a time, so each queue stays in order while
// its logical core moves between physical cores.
//
// Threads and locks: everything here is the engine thread's, except stop_ (atomic).
// While a tiled command runs, the engine thread and its OpenMP worker threads share
// the command's TileCursor (its own mutex), the counters (atomics), the tenant's
// memory (shared lock per tile) and read-only engine state (eligible_, generation_,
// which change only between tile groups); faults are reported by the engine thread
// after the group. It spins briefly after work (a sleeping engine costs every command
// a futex wake-up, ~30 us on these machines) and then sleeps on its eligible queues'
// doorbells and its scheduler wake word at once with futex_waitv.
#pragma once

#include "core_scheduler.h"
#include "queue.h"
#include "tiling.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace neuron::chip {

class Device;
struct CoreCounters;

struct EngineOptions {
	int threads = 1;            // host threads one command may use
	uint64_t spin_ns = 50000;   // how long to poll after the last command before sleeping
	bool tiling = true;         // cut commands into tiles (off for DMA engines)
	TileBudget tile_budget;
	// Called on the engine thread when a queue faults (the daemon logs it).
	std::function<void(const Queue &, uint32_t code, uint64_t seq, const std::string &reason)> on_fault;
};

class Engine {
public:
	// core < 0: the device's DMA engine. sched_core: this engine's index in sched.
	Engine(Device &device, int core, CoreScheduler &sched, uint32_t sched_core, EngineOptions options);
	~Engine();
	Engine(const Engine &) = delete;
	Engine &operator=(const Engine &) = delete;

	void stop();
	std::string name() const;

private:
	enum class Step { Idle, Progress };
	void run();
	void refresh();
	// Picks a logical core and runs one tile of it; false if nothing could run.
	bool run_one();
	Step step(LogicalCore &l);
	// How running (part of) the in-flight command ended.
	struct Outcome {
		enum Kind { Done, Preempted, Fault, Ended } kind = Done; // Ended: the queue was retired
		uint32_t code = 0;                                        // Fault: its code and reason
		std::string reason;

		static Outcome of(Kind k) { return Outcome{k, 0, {}}; }
		static Outcome fault(uint32_t code, std::string reason) { return Outcome{Fault, code, std::move(reason)}; }
	};
	Outcome run_whole(LogicalCore &l, LogicalCore::InFlight &f, Queue &q);
	Outcome run_tiles(LogicalCore &l, LogicalCore::InFlight &f, Queue &q);
	bool run_prefault_step(Prefault::Chunk &chunk, uint64_t &wall_ns);
	void record_tile(uint64_t wall_ns, uint64_t cpu_ns);
	Outcome run_tile(LogicalCore &l, const LogicalCore::InFlight &f, Queue &q, uint64_t index, int threads,
			 uint64_t &wall_ns);
	void charge(LogicalCore &l, uint64_t wall_ns);
	// True if the core should go back to the scheduler before the next tile: another
	// eligible logical core has work, a reclaim or a new eligible set is pending, or
	// the tenant's control thread waits to change its memory. Called by the engine's
	// worker threads too: it only reads what does not change during a tile group.
	bool someone_waiting(const LogicalCore &self, const Queue &q) const;
	Step start_command(LogicalCore &l, const std::shared_ptr<Queue> &q);
	void finish_command(LogicalCore &l);
	void fault(Queue &q, uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason);
	void sleep_until_doorbell();

	Device &device_;
	int core_;
	CoreScheduler &sched_;
	uint32_t sched_core_;
	EngineOptions options_;
	CoreCounters &counters_;
	std::atomic<bool> stop_{false};
	// engine thread only
	std::vector<std::shared_ptr<LogicalCore>> eligible_;
	std::vector<std::shared_ptr<Queue>> watched_;
	std::vector<std::shared_ptr<Queue>> blockers_; // queues a sleep also waits on (sleep_until_doorbell)
	std::vector<LogicalCore *> candidates_;
	uint64_t generation_ = 0;
	std::thread thread_;
};

} // namespace neuron::chip
