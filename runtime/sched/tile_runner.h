// How a physical engine runs the tiles the scheduler picked: the one thing the
// device backends do differently (DESIGN.md section 1). The emu backend runs them
// in this process on the core's host threads (runtime/emu/emu_runner.h); the kmd
// backend hands them to neuron.ko as compute or DMA jobs and waits for them
// (runtime/kmd/kmd_runner.h). Everything around a tile — which logical core runs
// next, inference first, weights, loans, reclaims, admission, telemetry — is the
// Engine's (engine.h), the same on every backend.
//
// Threads: a runner belongs to one Engine and is called on its thread (the emu
// runner's tiles also run on the core's OpenMP threads). It may touch the
// in-flight command of the logical core the engine holds (InFlight, its
// RunnerState) and the tenant's memory under its shared lock.
#pragma once

#include "counters.h"
#include "logical_core.h"
#include "tiling.h"

#include <fault.h>

#include <cstdint>
#include <optional>
#include <string>

namespace neuron::sched {

// How running (part of) the in-flight command ended.
struct Outcome {
	enum Kind { Done, Preempted, Fault, Ended } kind = Done; // Ended: the queue was retired
	uint32_t code = 0;                                        // Fault: its code and reason
	std::string reason;

	static Outcome of(Kind k) { return Outcome{k, 0, {}}; }
	static Outcome fault(uint32_t code, std::string reason) { return Outcome{Fault, code, std::move(reason)}; }
	static Outcome fault(kernels::Fault f) { return fault(f.code, std::move(f.message)); }
};

// What the engine offers the runner while it runs tiles (Engine implements it).
class EngineHooks {
public:
	// True when the core should go back to the scheduler after the running tiles:
	// another logical core waits, a switch or a new eligible set is pending, the
	// tenant's control thread waits to change its memory. Safe from any tile thread.
	virtual bool should_yield(const LogicalCore &l, const Queue &q) const = 0;
	// Records one unit of a tiled command in the core's tile telemetry: a tile (or
	// a group of tiles run as one), or a step that is not a tile but holds the core
	// as long (a prefault step: is_tile false). Any tile thread.
	virtual void record_tile(LogicalCore &l, uint64_t wall_ns, uint64_t cpu_ns, bool is_tile) const = 0;

protected:
	~EngineHooks() = default;
};

// What a runner is given for one turn of a logical core on a physical core.
struct RunContext {
	uint32_t core;          // the physical core (0 for a DMA engine)
	int threads;            // host threads a command may use
	CoreCounters &counters; // telemetry of this physical core
	const TileBudget &budget; // what the command's tiles were planned with (InFlight::plan)
	const EngineHooks &engine;
	LogicalCore &logical;
	Queue &queue;
	int nice = 0; // the OS nice value for threads running these tiles (thread_priority.h)

	bool yield() const { return engine.should_yield(logical, queue); }
	void record_tile(uint64_t wall_ns, uint64_t cpu_ns, bool is_tile = true) const
	{
		engine.record_tile(logical, wall_ns, cpu_ns, is_tile);
	}
};

class TileRunner {
public:
	virtual ~TileRunner() = default;

	// A command was admitted (gate.h) and planned (f.plan, f.tiles): take what its
	// tiles will share (f.state). A fault here faults the command.
	virtual std::optional<kernels::Fault> begin(LogicalCore &l, InFlight &f, const RunContext &ctx) = 0;
	// A command of one tile: run it whole (with every host thread the core has).
	// *wall_ns: how long it took.
	virtual Outcome run_whole(LogicalCore &l, InFlight &f, const RunContext &ctx, uint64_t *wall_ns) = 0;
	// A tiled command: run its tiles until it is done, ctx.yield() says someone
	// waits (Preempted, the cursor parks unfinished chains), or one faults.
	// *longest_ns: the longest tile (or tile group) it ran.
	virtual Outcome run_tiles(LogicalCore &l, InFlight &f, const RunContext &ctx, uint64_t *longest_ns) = 0;
	// The command ended (done, faulted, or its queue retired): drop f.state.
	virtual void end(InFlight &f) { f.state.reset(); }
};

} // namespace neuron::sched
