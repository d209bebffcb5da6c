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
// (chain_partials.h) when the runner keeps them (TileBudget::chain_partials). A
// softmax, log-softmax or arg-reduce row longer than a tile is cut too (same flag):
// a softmax chain runs the row's chunks twice (statistics, then results), an
// arg-reduce chain carries each row's best element (kernels::gather_row_stats,
// gather_arg_best). An indexing op is cut along the dim it indexes too, as an
// ordered chain, if its other dims leave tiles too big. A TILE_KERNEL node's tiles
// are its steps (one loop iteration of its tile program each, runtime/tile), one
// ordered chain; the runner runs them, never the kernels. Left whole (correct, only
// not preemptible): opcodes this file does not know.
//
// Pure functions on private copies; no shared state, no locks.
#pragma once

#include <kernels.h>
#include <neuron/cmd.h>

#include <array>

#include <cstdint>

namespace neuron::sched {

// Operand views of a command, in operand order (gate::Operands::views).
using OperandViews = std::array<kernels::View, NEURON_MAX_OPERANDS>;

// Work budget of one tile. Calibrated on the 2-core test machines so that a tile
// takes well under 1 ms (bench-sharing prints the measured tile times).
struct TileBudget {
	uint64_t matmul_macs = 1ull << 26;       // multiply-adds per matmul tile
	uint64_t elements = 1ull << 19;          // elements per cheap elementwise/copy/reduce tile
	uint64_t transcendental_elements = 1ull << 17; // exp/gelu/silu/tanh/softmax
	// Whoever runs the tiles keeps partial results per chain (chain_partials.h: f32
	// sums for bf16/f16 outputs, softmax row statistics), so those ops may be split
	// where their partial results carry from tile to tile. Both backends do (kmd in
	// device memory); off only to test what a runner without it would do.
	bool chain_partials = true;
};

// What the tiles of a split carry from one to the next. A split that carries
// anything is the plan's last (its index varies fastest), and its tiles form chains
// (chain_length) that run in order, one thread at a time (tile_cursor.h).
enum class Carry : uint8_t {
	None,        // independent tiles
	Ordered,     // the index positions of an indexing op: only the order of the writes
	Accumulate,  // matmul K, a reduced dim: tiles past the first add into the output
	F32Partials, // the same, into an f32 buffer per chain (bf16/f16 outputs; chain_partials.h)
	RowStats,    // softmax rows: two passes over the chunks, statistics then results
	ArgBest,     // arg-reduce rows: each row's best element so far, then its index
};

struct TileSplit {
	int dim[NEURON_MAX_OPERANDS]; // the split dim in each operand, -1 if the operand is not split
	int64_t size = 1;             // extent of the split dim
	int64_t chunk = 1;            // tile extent along it
	int64_t count = 1;            // ceil(size / chunk)
	Carry carry = Carry::None;
	// A split of the command's positions rather than of its operands (every dim
	// -1): the tile writes positions [bits[2] + offset, + len) of the whole
	// command (cmd.h, ISA 1.4's random ops; tiling_isa14.h).
	bool positions = false;
	// Tiles per chunk: 2 for RowStats (each chunk is run once per pass), else 1.
	int64_t passes() const { return carry == Carry::RowStats ? 2 : 1; }
};

struct TilePlan {
	int splits = 0;
	TileSplit split[3];
	uint64_t tiles = 1;
};

// threads: host threads one tile may use (the budget is per thread). The engines
// run every tile on one thread (tile_cursor.h), on every backend.
TilePlan plan_tiles(const neuron_cmd &cmd, const TileBudget &budget, int threads);

// The carry of the plan's chains (Carry::None without a carrying split).
inline Carry plan_carry(const TilePlan &plan)
{
	return plan.splits > 0 ? plan.split[plan.splits - 1].carry : Carry::None;
}

// Tiles c*n .. c*n + n-1 form chain c, n = chain_length(plan): the tiles of the
// carrying split (the last, so it varies fastest) for one block of the others, in
// order: the K tiles adding into one output block, the chunks of one block of
// rows. Chains are independent; without a carrying split n is 1.
inline uint64_t chain_length(const TilePlan &plan)
{
	if (plan_carry(plan) == Carry::None)
		return 1;
	const TileSplit &last = plan.split[plan.splits - 1];
	return static_cast<uint64_t>(last.count * last.passes());
}

// Floats of packed operand blocks a tiled MATMUL keeps (kernels::GemmPacks) at
// most: every block of a and b once. 0 for other ops and untiled plans.
uint64_t pack_floats(const neuron_cmd &cmd, const TilePlan &plan);

// Narrows cmd (descriptors) and views (host pointers) to tile `index` of plan, in place.
// Both must describe the whole command on entry (views resolved by resolve_operands).
// Tiles of one chain must run in index order.
void narrow_to_tile(const TilePlan &plan, uint64_t index, neuron_cmd &cmd, OperandViews &views);

} // namespace neuron::sched
