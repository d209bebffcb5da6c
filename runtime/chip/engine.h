// An engine: one host thread that plays one physical NeuronCore (or a device's DMA
// engine). At every tile boundary it asks its CoreScheduler which logical cores it may
// run, picks one (inference before training, then the lowest weighted virtual time:
// fair share within a class), claims it and runs one tile of its current command;
// further tiles of that command follow at once while no one else waits for the core
// (adaptive tiles: alone, an op runs at full speed; contended, the core switches
// within one tile).
// Logical cores are claimed one engine at a time, so each queue stays in order while
// its logical core moves between physical cores.
//
// Threads and locks: everything here is the engine thread's, except stop_ (atomic).
// It spins briefly after work (a sleeping engine costs every command a futex
// wake-up, ~30 us on these machines) and then sleeps on its eligible queues'
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
	Step run_tile(LogicalCore &l, LogicalCore::InFlight &f, Queue &q);
	// True if the core should go back to the scheduler before the next tile: another
	// eligible logical core has work, a reclaim or a new eligible set is pending.
	bool someone_waiting(const LogicalCore &self);
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
	std::vector<LogicalCore *> candidates_;
	uint64_t generation_ = 0;
	std::thread thread_;
};

} // namespace neuron::chip
