// Tiling rules of the ISA 1.4 opcodes of block 36..63 (SCAN, SORT, ATTENTION, linear algebra), called by
// plan_tiles / narrow_to_tile (tiling.h) for the opcodes they do not handle.
#pragma once

#include "tiling.h"

namespace neuron::sched {

// Adds the splits of an ISA 1.4 command to p (nothing for other opcodes).
// threads: as plan_tiles' (the budget is per thread).
void plan_isa14_compute(TilePlan &p, const neuron_cmd &cmd, const TileBudget &budget, uint64_t threads);

// After narrow_to_tile narrowed cmd and views to tile `index`: the scalars and
// operands a tile of these ops derives from its position (a scan's carried start,
// attention's causal diagonal).
void finish_isa14_tile(const TilePlan &plan, uint64_t index, neuron_cmd &cmd, OperandViews &views);

} // namespace neuron::sched
