// The kmd backend's TileRunners: what the scheduler's engines (sched/engine.h)
// picked runs as jobs of neuron.ko, submitted on the tenant's own driver file,
// one job per physical core at a time (the engine waits for it), so the kernel
// never holds more than one job per core of neurond's and a reclaim or an
// inference arrival waits for at most the running tile.
//  - KmdCoreRunner: a NeuronCore. A command of one tile is one job; a tiled
//    command's tiles go out in groups, one tile per host thread the core has, each
//    group one job (tile_job.h) that neurond's attached engine runs. Chains whose
//    tiles carry partial results keep them in device memory the daemon allocates
//    for the command in the tenant's file (not a tenant allocation).
//  - KmdDmaRunner: a device's DMA engine. A COPY becomes DMA jobs of its
//    contiguous runs (dma_run.h), run by the kernel; host buffers the driver
//    could not import without a copy are staged in and out around them.
// Before a job goes out the command's operands are resolved again through the gate
// against the tenant's memory (it may have freed some), under its shared lock,
// which the runner holds until the job completed (a free waits for the tile, as on
// emu). The kernel's core mask of the tenant's file gets the core first.
#pragma once

#include "kmd.h"

#include <sched/tile_runner.h>

#include <cstdint>

namespace neuron::kmd {

class KmdBackend;

class KmdCoreRunner final : public sched::TileRunner {
public:
	KmdCoreRunner(KmdBackend &backend, uint32_t device, uint32_t core)
		: backend_(backend), device_(device), core_(core)
	{
	}

	std::optional<kernels::Fault> begin(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx) override;
	sched::Outcome run_whole(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx,
				 uint64_t *wall_ns) override;
	sched::Outcome run_tiles(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx,
				 uint64_t *longest_ns) override;
	void end(sched::InFlight &f) override;

private:
	KmdBackend &backend_;
	uint32_t device_;
	uint32_t core_;
};

class KmdDmaRunner final : public sched::TileRunner {
public:
	KmdDmaRunner(KmdBackend &backend, uint32_t device) : backend_(backend), device_(device) {}

	std::optional<kernels::Fault> begin(sched::LogicalCore &, sched::InFlight &, const sched::RunContext &) override
	{
		return std::nullopt;
	}
	sched::Outcome run_whole(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx,
				 uint64_t *wall_ns) override;
	sched::Outcome run_tiles(sched::LogicalCore &l, sched::InFlight &f, const sched::RunContext &ctx,
				 uint64_t *longest_ns) override;

private:
	KmdBackend &backend_;
	uint32_t device_;
};

} // namespace neuron::kmd
