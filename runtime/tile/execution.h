// One run of a validated tile program (program.h): its own on-chip memory and
// where it stands (program counter, open loops). It runs a step at a time: the
// instructions up to the next loop-iteration boundary, so whoever drives it (the
// scheduler's tiles: one step per tile) can give the core to someone else
// between any two iterations and resume later, on any physical core.
//
// Ownership: held by the in-flight command (the runner's state), touched by one
// thread at a time (the one running its current tile).
#pragma once

#include "engines.h"
#include "program.h"

#include <chip/onchip_memory.h>

#include <memory>

namespace neuron::tile {

class Execution {
public:
	explicit Execution(std::shared_ptr<const TileProgram> program);

	// Runs instructions until one loop iteration ends (or the program does), with
	// `args` the host address of each HBM argument (checked against the
	// program's argument sizes by the caller). True when the program has ended.
	bool step(std::span<std::byte *const> args);
	bool done() const { return pc_ >= program_->insns.size(); }
	uint64_t steps_run() const { return steps_; }
	size_t arg_count() const { return program_->arg_bytes.size(); }
	const chip::OnChipMemory &memory() const { return mem_; }

private:
	std::shared_ptr<const TileProgram> program_;
	chip::OnChipMemory mem_;
	size_t pc_ = 0;
	int depth_ = 0;
	int64_t iv_[NEURON_TILE_MAX_LOOPS] = {};
	uint64_t steps_ = 0;
};

// Runs a whole program (tests, the CPU path).
void run(std::shared_ptr<const TileProgram> program, std::span<std::byte *const> args);

} // namespace neuron::tile
