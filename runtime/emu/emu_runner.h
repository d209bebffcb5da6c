// The emu backend's TileRunner: tiles run in this process, on the core's host
// threads, over the simulated HBM (a host mapping; chip/hbm_memory.h). A command
// of one tile runs whole on every thread; a tiled command's tiles run one per
// thread (tile_cursor.h), after the pages they will write are backed in bounded
// steps (chip/prefault.h), with a matmul's packed operand blocks and the chains'
// partial results shared in host memory for the whole command (EmuState).
#pragma once

#include <sched/tile_runner.h>

namespace neuron::emu {

class EmuRunner final : public sched::TileRunner {
public:
	std::optional<kernels::Fault> begin(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx) override;
	sched::Outcome run_whole(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx,
				 uint64_t *wall_ns) override;
	sched::Outcome run_tiles(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx,
				 uint64_t *longest_ns) override;
};

} // namespace neuron::emu
