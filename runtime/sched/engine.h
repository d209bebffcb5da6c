// An engine: one host thread that schedules one physical NeuronCore (or a device's
// DMA engine), on every backend. At every tile boundary it asks its CoreScheduler
// which logical cores it may run, picks one (inference before training, then the
// lowest weighted virtual time: fair share within a class), claims it, admits its
// next command through the gate (gate/admit.h) and has its TileRunner run it:
// whole if the command is one tile, else tile after tile until it is done or
// someone else waits for the core (adaptive tiles: alone, an op runs at full speed;
// contended, the core switches after the running tiles). The runner decides where
// tiles run: in this process (emu) or as jobs of neuron.ko (kmd).
// Logical cores are claimed one engine at a time, so each queue stays in order while
// its logical core moves between physical cores.
//
// Threads and locks: everything here is the engine thread's, except stop_ (atomic)
// and what the watchdog (watchdog.h) touches: progress_ns_ (atomic, written by tile
// threads too), reset_pending_ (atomic) and the reset's reason and group
// (reset_mutex_), with reset_word_ as the futex an injected stall sleeps on.
// While a tiled command runs, the runner's tile threads share the command's
// TileCursor (its own mutex), the counters (atomics), the tenant's memory (shared
// lock per tile) and read-only engine state (eligible_, generation_, which change
// only between tile groups: yield() reads them). It spins briefly after work (a
// sleeping engine costs every command a futex wake-up, ~30 us on these machines)
// and then sleeps on its eligible queues' doorbells and its scheduler wake word at
// once with futex_waitv.
#pragma once

#include "core_scheduler.h"
#include "fault_injection.h"
#include "thread_priority.h"
#include "tile_runner.h"
#include "tiling.h"

#include <gate/admit.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace neuron::sched {

struct EngineOptions {
	int threads = 1;            // host threads one command may use
	uint64_t spin_ns = 50000;   // how long to poll after the last command before sleeping
	bool tiling = true;         // cut commands into tiles (off for DMA engines)
	bool dma = false;           // serves DMA queues (COPY and NOP, host buffers)
	// Nice value of the engine thread while it runs training work beside inference
	// pools (thread_priority.h); 0: every tile at normal priority.
	int training_nice = 0;
	TileBudget tile_budget;
	// Called on the engine thread when a queue faults (the daemon logs it).
	std::function<void(const Queue &, uint32_t code, uint64_t seq, const std::string &reason)> on_fault;
	// Test only (fault_injection.h): the faults injected into this engine, and the
	// hook told (on the engine thread) whenever one fires on a tenant's queue.
	std::vector<InjectedFault> faults;
	std::function<void(const Queue &, const std::string &what)> on_injected;
};

class Engine : private EngineHooks {
public:
	// sched_core: this engine's index in sched. name: for logs ("nd0/nc3").
	Engine(CoreScheduler &sched, uint32_t sched_core, std::string name, CoreCounters &counters,
	       std::unique_ptr<TileRunner> runner, EngineOptions options);
	~Engine();
	Engine(const Engine &) = delete;
	Engine &operator=(const Engine &) = delete;

	void stop();
	// Restricts this engine's thread (and the OpenMP threads it starts later) to
	// `cpus` (cpu_placement.h); false with errno if the kernel refused.
	bool pin(const std::vector<int> &cpus);
	const std::string &name() const { return name_; }

	// The watchdog's side (watchdog.h), any thread. How long the running tile
	// group has made no progress (no tile ended since it started or since the
	// last one); 0 while the engine runs nothing. *group_start_ns: which group
	// (its start, for request_reset).
	uint64_t stalled_ns(uint64_t now_ns, uint64_t *group_start_ns) const;
	// Resets the core: the command it runs stops at its next tile boundary (an
	// injected stall at once) and faults NEURON_FAULT_RESET with `reason`; its
	// tenant alone is hit, the core then runs the others' work again.
	// group_start_ns: the start of the stalled group as the watchdog saw it
	// (counters' running_since_ns): a reset that comes after that group ended is
	// dropped. False if a reset is already pending.
	bool request_reset(uint64_t group_start_ns, std::string reason);

private:
	enum class Step { Idle, Progress };
	void run();
	void refresh();
	// Picks a logical core and runs one tile (group) of it; false if nothing could run.
	bool run_one();
	Step step(LogicalCore &l);
	Step start_command(LogicalCore &l, const std::shared_ptr<Queue> &q);
	bool keep_before_start(Queue &q, uint64_t seq, const neuron_cmd &cmd, const gate::Operands &ops);
	bool keep_program_before_start(Queue &q, uint64_t seq, const program::Program &p, const program::Exec &exec,
				       const backend::TenantMemory &m);
	Step start_program(LogicalCore &l, const std::shared_ptr<Queue> &q, uint64_t seq);
	Step next_node(LogicalCore &l, Queue &q);
	bool begin_current(LogicalCore &l, Queue &q);
	void finish_command(LogicalCore &l);
	void fault_inflight(LogicalCore &l, Queue &q, uint32_t code, const std::string &reason);
	bool write_stamp(LogicalCore &l, Queue &q, uint64_t end_ns);
	void complete_command(LogicalCore &l, Queue &q);
	// EngineHooks. should_yield is called by tile threads too: it only reads what
	// does not change during a tile group.
	bool should_yield(const LogicalCore &self, const Queue &q) const override;
	void record_tile(LogicalCore &l, uint64_t wall_ns, uint64_t cpu_ns, bool is_tile) const override;
	// One tile (or tile group, or whole command) ran on this core for l.
	void count_tile(LogicalCore &l, uint64_t wall_ns) const;
	RunContext context(LogicalCore &l, Queue &q) const;
	void charge(LogicalCore &l, uint64_t wall_ns);
	void fault(Queue &q, uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason);
	void sleep_until_doorbell();
	// Fault injection (test only): a command starting now may be hit (true: it was
	// faulted); a stuck core's stall; a slow core's extra time.
	bool inject_at_start(Queue &q, uint64_t seq, uint64_t user_tag);
	Outcome stall(uint64_t group_start_ns);
	void slow_down(Queue &q, uint64_t group_ns);
	// The pending reset's reason, taken (the engine handles it now), or nullopt.
	std::optional<std::string> take_reset(uint64_t group_start_ns);
	void wait_for_reset_or_stop(uint64_t max_ns);

	CoreScheduler &sched_;
	int nice_ = 0; // of the tile group being run (options_.training_nice or 0)
	uint32_t sched_core_;
	std::string name_;
	CoreCounters &counters_;
	std::unique_ptr<TileRunner> runner_;
	EngineOptions options_;
	std::atomic<bool> stop_{false};
	FaultInjector injector_;                     // engine thread only
	const InjectedFault *stall_next_ = nullptr;  // a stuck-core fired for the command just started
	mutable std::atomic<uint64_t> progress_ns_{0}; // last tile end or group start (watchdog)
	std::atomic<bool> reset_pending_{false};
	uint32_t reset_word_ = 0;                    // futex: bumped by request_reset
	std::mutex reset_mutex_;                     // guards reset_reason_
	std::string reset_reason_;
	uint64_t reset_group_ = 0;                   // guarded by reset_mutex_
	// engine thread only
	std::vector<std::shared_ptr<LogicalCore>> eligible_;
	std::vector<std::shared_ptr<Queue>> watched_;
	std::vector<std::shared_ptr<Queue>> blockers_; // queues a sleep also waits on (sleep_until_doorbell)
	std::vector<LogicalCore *> candidates_;
	uint64_t generation_ = 0;
	std::thread thread_;
};

} // namespace neuron::sched
