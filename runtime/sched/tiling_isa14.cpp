#include "tiling_isa14.h"

#include <geometry.h>

#include <algorithm>

namespace neuron::sched {

namespace {

using kernels::numel;

// Splits the positions [bits[2], bits[3]) of cmd (end 0: `count`) into tiles of
// about `per_tile` positions.
void split_positions(TilePlan &p, const neuron_cmd &cmd, uint64_t count, uint64_t per_tile, Carry carry)
{
	const uint64_t end = cmd.fscalars.bits[3] == 0 ? count : cmd.fscalars.bits[3];
	const uint64_t begin = std::min(cmd.fscalars.bits[2], end);
	const int64_t size = static_cast<int64_t>(end - begin);
	const int64_t chunk = static_cast<int64_t>(std::max<uint64_t>(per_tile, 1));
	if (size <= chunk)
		return;
	TileSplit &s = p.split[p.splits++];
	std::fill(std::begin(s.dim), std::end(s.dim), -1);
	s.size = size;
	s.chunk = chunk;
	s.count = (size + chunk - 1) / chunk;
	s.carry = carry;
	s.positions = true;
	p.tiles *= static_cast<uint64_t>(s.count);
}

// AMP_UNSCALE: the gradient's largest dim; found_inf and inv_scale stay whole.
void split_gradient(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const neuron_tensor_desc &g = cmd.operands[0];
	int d = -1;
	for (int i = 0; i < g.ndim; ++i)
		if (g.sizes[i] > 1 && (d < 0 || g.sizes[i] > g.sizes[d]))
			d = i;
	const uint64_t want = (numel(g) + budget - 1) / std::max<uint64_t>(budget, 1);
	if (d < 0 || want <= 1)
		return;
	TileSplit &s = p.split[p.splits++];
	std::fill(std::begin(s.dim), std::end(s.dim), -1);
	s.dim[0] = d;
	s.size = g.sizes[d];
	s.chunk = std::max<int64_t>((s.size + static_cast<int64_t>(want) - 1) / static_cast<int64_t>(want), 1);
	s.count = (s.size + s.chunk - 1) / s.chunk;
	p.tiles *= static_cast<uint64_t>(s.count);
}

} // namespace

bool plan_isa14(TilePlan &p, const neuron_cmd &cmd, uint64_t elem_budget, uint64_t transcendental)
{
	const neuron_tensor_desc &out = cmd.operands[0];
	switch (cmd.opcode) {
	case NEURON_OP_RNG: {
		const bool normal = cmd.iscalars[0] == NEURON_RNG_NORMAL;
		// Each position costs a Philox call (~20 multiplies), a log and a cos for normal.
		split_positions(p, cmd, numel(out), normal ? transcendental : elem_budget / 4, Carry::None);
		return true;
	}
	case NEURON_OP_DROPOUT:
		split_positions(p, cmd, numel(out), elem_budget / 4, Carry::None);
		return true;
	case NEURON_OP_RANDPERM:
		split_positions(p, cmd, numel(out), elem_budget / 4, Carry::Ordered);
		return true;
	case NEURON_OP_MULTINOMIAL: {
		// A row's work is its categories (with a log each without replacement).
		const neuron_tensor_desc &probs = cmd.operands[1];
		const uint64_t rows = probs.ndim == 2 ? static_cast<uint64_t>(probs.sizes[0]) : 1;
		const uint64_t cats = std::max<uint64_t>(static_cast<uint64_t>(probs.sizes[probs.ndim - 1]), 1);
		split_positions(p, cmd, rows, transcendental / cats, Carry::None);
		return true;
	}
	case NEURON_OP_AMP_UNSCALE:
		split_gradient(p, cmd, elem_budget);
		return true;
	case NEURON_OP_TIMESTAMP:
	case NEURON_OP_AMP_UPDATE_SCALE:
		return true;
	default:
		return false;
	}
}

} // namespace neuron::sched
