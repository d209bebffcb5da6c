// Tiling rules of ISA 1.4's block (opcodes 64..71, cmd.h), called from
// plan_tiles (tiling.cpp).
//
// The random ops (RNG, DROPOUT, RANDPERM, MULTINOMIAL) are cut along their
// positions, not their operands: every tile sees the whole operands and writes
// the positions [bits[2], bits[3]) narrow_to_tile gives it (TileSplit::positions).
// Their numbers depend only on (seed, offset, position), so the result is the
// same for any cut. RANDPERM's positions must run in order (Carry::Ordered: its
// shuffle reads what earlier positions wrote). AMP_UNSCALE is elementwise over
// the gradient (every tile that sees an infinity sets the same flag).
// TIMESTAMP and AMP_UPDATE_SCALE are one element each: never cut.
#pragma once

#include "tiling.h"

namespace neuron::sched {

// Plans cmd if it is an ISA 1.4 opcode (true), else leaves p alone (false).
// elem_budget: elements per tile for cheap ops; transcendental: for the ones with
// a log/cos per element (both already scaled by the tile's threads).
bool plan_isa14(TilePlan &p, const neuron_cmd &cmd, uint64_t elem_budget, uint64_t transcendental);

} // namespace neuron::sched
