// Cutting a validated command into tiles, so that a NeuronCore can switch tenants
// between tiles and a reclaim waits for at most one tile (DESIGN.md section 2, "Time").
//
// A tile is the same command restricted to a block of its output: every operand is
// narrowed along the split dimensions (an operand that does not have a split
// dimension, e.g. b for a split along M, is left whole; a broadcast operand with
// stride 0 keeps pointing at the same bytes). Which dims may be split depends on the
// op: elementwise/copy/fill/compare any dim; matmul the batch, M, N and K dims (the
// tiles after the first along K add into the output, beta = 1, as BLAS itself
// accumulates K blocks into C); reductions a dim they do not reduce, then if still
// too long a dim they reduce (later tiles accumulate into the output,
// NEURON_REDUCE_ACCUMULATE); softmax, log-softmax and arg-reduce a dim they do not
// reduce; the indexing ops a dim other than the one they index; the Adam step any
// dim of its four tensors (not the step count). Where a bf16/f16 output would round
// the partial results of a K or reduced-dim split, they stay in f32 per chain
// (chain_partials.h) when the runner keeps them (TileBudget::f32_partials). Left
// whole (correct, only not preemptible): a softmax, log-softmax or arg-reduce over
// one long row, and opcodes this file does not know (ops added later).
//
// Pure functions on private copies; no shared state, no locks.
#pragma once

#include "operands.h"

#include <neuron/cmd.h>

#include <cstdint>

namespace neuron::chip {

// Work budget of one tile. Calibrated on the 2-core EPYC test machines so that a tile
// takes well under 1 ms (bench-sharing prints the measured tile times).
struct TileBudget {
	uint64_t matmul_macs = 1ull << 26;       // multiply-adds per matmul tile
	uint64_t elements = 1ull << 19;          // elements per cheap elementwise/copy/reduce tile
	uint64_t transcendental_elements = 1ull << 17; // exp/gelu/silu/tanh/softmax
	// Whoever runs the tiles keeps f32 partial results per chain (chain_partials.h),
	// so a bf16/f16 output may be split where partial results add up. The kmd pump
	// does not: its tiles are separate jobs.
	bool f32_partials = true;
};

struct TileSplit {
	int dim[NEURON_MAX_OPERANDS]; // the split dim in each operand, -1 if the operand is not split
	int64_t size = 1;             // extent of the split dim
	int64_t chunk = 1;            // tile extent along it
	int64_t count = 1;            // ceil(size / chunk)
	bool accumulate = false;      // a matmul K split: tiles past the first add into the output
	bool f32_partials = false;    // ... into an f32 buffer per chain (chain_partials.h)
};

struct TilePlan {
	int splits = 0;
	TileSplit split[3];
	uint64_t tiles = 1;
};

// threads: host threads one tile may use (the budget is per thread). The emu engines
// run every tile on one thread (tile_cursor.h); the kmd pump's jobs likewise.
TilePlan plan_tiles(const neuron_cmd &cmd, const TileBudget &budget, int threads);

// Tiles c*n .. c*n + n-1 form chain c, n = chain_length(plan): the tiles of a matmul's
// K split that add into one output block, in order (the accumulate split is the
// last, so it varies fastest). Chains are independent; without a K split n is 1.
inline uint64_t chain_length(const TilePlan &plan)
{
	const bool k_split = plan.splits > 0 && plan.split[plan.splits - 1].accumulate;
	return k_split ? static_cast<uint64_t>(plan.split[plan.splits - 1].count) : 1;
}

// Whether the chains keep f32 partial results (chain_partials.h).
inline bool has_f32_partials(const TilePlan &plan)
{
	return plan.splits > 0 && plan.split[plan.splits - 1].f32_partials;
}

// Floats of packed operand blocks a tiled MATMUL keeps (kernels::GemmPacks) at
// most: every block of a and b once. 0 for other ops and untiled plans.
uint64_t pack_floats(const neuron_cmd &cmd, const TilePlan &plan);

// Narrows cmd (descriptors) and views (host pointers) to tile `index` of plan, in place.
// Both must describe the whole command on entry (views resolved by resolve_operands).
// Tiles of one command must run in index order (a K split accumulates).
void narrow_to_tile(const TilePlan &plan, uint64_t index, neuron_cmd &cmd, OperandViews &views);

} // namespace neuron::chip
