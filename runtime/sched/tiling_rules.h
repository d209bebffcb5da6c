// The building blocks of tiling plans (tiling.cpp), shared by the per-family rule
// files (tiling_isa14_compute.cpp). Pure functions on a plan under construction.
#pragma once

#include "tiling.h"

#include <neuron/cmd.h>

#include <cstdint>

namespace neuron::sched::rules {

// Adds a split of extent `size` into tiles of `chunk` along dims[k] of operand k
// (-1: operand k is not split); nothing if one tile would hold it all.
void add_split(TilePlan &p, const int (&dims)[NEURON_MAX_OPERANDS], int64_t size, int64_t chunk);

// Splits dim d of every operand (all must have the output's rank and extent along
// d) into enough tiles that each holds about `budget` of `work`.
void split_same_dim(TilePlan &p, const neuron_cmd &cmd, int d, uint64_t work, uint64_t budget);

// Adds the carrying split, the plan's last: `dims` (extent `size`) cut so that each
// tile holds about `budget` of the `per_tile` work a tile holds so far.
void add_carry_split(TilePlan &p, const int (&dims)[NEURON_MAX_OPERANDS], int64_t size, uint64_t per_tile,
		     uint64_t budget, Carry carry);

// The largest dim (of size > 1) of `out` that `allowed` accepts, or -1.
template <typename F> int largest_dim(const neuron_tensor_desc &out, F allowed)
{
	int best = -1;
	for (int i = 0; i < out.ndim; ++i)
		if (allowed(i) && out.sizes[i] > 1 && (best < 0 || out.sizes[i] > out.sizes[best]))
			best = i;
	return best;
}

// Offset along split s of tile `index` (the last split varies fastest).
int64_t split_offset(const TilePlan &plan, uint64_t index, int s);

} // namespace neuron::sched::rules
