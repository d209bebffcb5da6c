// One run of a validated tile program (program.h): its own on-chip memory and
// where it stands (program counter, open loops). It runs a step at a time: the
// instructions up to the next loop-iteration boundary, so whoever drives it (the
// scheduler's tiles: one step per tile) can give the core to someone else
// between any two iterations and resume later, on any physical core.
//
// Lanes: when it reaches an affine loop whose iterations are independent
// (TileProgram::parallel, independence.cpp) and may use more than one host thread,
// the execution forks: up to `lanes` lanes, each with its own copy of the on-chip
// memory, take the loop's iterations in increasing order (the next unclaimed one
// when a lane finishes one) and run them step by step, on as many threads as the
// driver has, each lane on one thread at a time. Steps still end at every loop
// iteration boundary (the same count as in order), so the core can switch
// tenants between any two of any lane. When every lane is done, join() makes the
// memory of the lane that ran the last iteration the execution's: the bits the
// in-order run leaves (what independence.cpp proves). A fork needs HBM arguments
// that do not overlap when one of them is written (checked at the fork); else the
// loop runs in order.
//
// Ownership: held by the in-flight command (the runner's state). step() and
// join() are called by one thread at a time; step_lane(k) by one thread per lane.
#pragma once

#include "engines.h"
#include "program.h"

#include <chip/onchip_memory.h>

#include <atomic>
#include <memory>
#include <vector>

namespace neuron::tile {

class Execution {
public:
	explicit Execution(std::shared_ptr<const TileProgram> program, int lanes = 1);

	// Runs instructions until one loop iteration ends (or the program does), with
	// `args` the host address of each HBM argument (checked against the
	// program's argument sizes by the caller). True when the program has ended.
	// Stops early, without a step, when it forks (forked()); not while forked.
	bool step(std::span<std::byte *const> args);
	bool done() const { return lanes_.empty() && main_.pc >= program_->insns.size(); }
	uint64_t steps_run() const { return steps_.load(std::memory_order_relaxed); }
	size_t arg_count() const { return program_->arg_bytes.size(); }
	const chip::OnChipMemory &memory() const { return *mem_; } // not while forked

	// The lanes of a forked loop (0 when not forked).
	bool forked() const { return !lanes_.empty(); }
	size_t lanes() const { return lanes_.size(); }
	// Runs lane k's next step; true when the lane has no iteration left to run.
	bool step_lane(size_t k, std::span<std::byte *const> args);
	bool lane_done(size_t k) const { return lanes_[k].done; }
	// Every lane done: the program goes on after the loop with the memory of the
	// lane that ran its last iteration.
	void join();

	// The state a device that keeps nothing between jobs saves to its own memory
	// when it stops the kernel (kmd: a per-command BO, runtime/kmd/README.md), as a
	// real core's context switch saves SBUF/PSUM: the cursor (where it stands, its
	// loop variables, the steps run) and the on-chip bytes the program can touch
	// (TileProgram::sbuf_bytes_used and psum_bytes_used per partition). state.cpp.
	static uint64_t state_bytes(const TileProgram &program);
	// Writes it into `out` (state_bytes() long). Not while forked.
	void save(std::span<std::byte> out) const;
	// Reads back what save() wrote, for a fresh execution of the same program
	// (not forked); "" or why the bytes are not a state of this program (a cursor
	// the program cannot reach is refused: the engines trust validated positions).
	std::string load(std::span<const std::byte> in);

private:
	struct Cursor {
		size_t pc = 0;
		int depth = 0;
		int64_t iv[NEURON_TILE_MAX_LOOPS] = {};
	};
	struct Lane {
		Cursor at;
		std::unique_ptr<chip::OnChipMemory> mem;
		bool done = false;
		bool last = false; // it claimed the loop's last iteration
	};
	enum class Stop { Boundary, Fork, End };

	Stop advance(Cursor &c, chip::OnChipMemory &mem, std::span<std::byte *const> args, Lane *lane);
	bool may_fork(std::span<std::byte *const> args);
	bool fork();

	std::shared_ptr<const TileProgram> program_;
	std::unique_ptr<chip::OnChipMemory> mem_;
	Cursor main_;
	int max_lanes_;
	int fork_ok_ = -1; // -1: not checked yet (the arguments' overlap)
	std::vector<Lane> lanes_;
	size_t fork_end_ = 0; // the forked loop's loop_end
	int64_t trip_ = 0;
	std::atomic<int64_t> next_iteration_{0};
	std::atomic<uint64_t> steps_{0};
};

// Runs a whole program (tests, the CPU path); with lanes > 1 a forked loop's lanes
// run on threads of their own.
void run(std::shared_ptr<const TileProgram> program, std::span<std::byte *const> args, int lanes = 1);

} // namespace neuron::tile
