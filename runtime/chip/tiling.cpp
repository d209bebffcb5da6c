#include "tiling.h"

#include <geometry.h>
#include <kernels.h>

#include <algorithm>
#include <cmath>

namespace neuron::chip {

namespace {

using kernels::numel;

bool transcendental(uint16_t op)
{
	return op == NEURON_OP_GELU || op == NEURON_OP_SILU || op == NEURON_OP_TANH || op == NEURON_OP_EXP ||
	       op == NEURON_OP_SOFTMAX;
}

bool elementwise(uint16_t op)
{
	// The ops whose output element i depends only on element i of each input.
	return kernels::output_may_alias_inputs(static_cast<neuron_opcode>(op));
}

void add_split(TilePlan &p, const int (&dims)[NEURON_MAX_OPERANDS], int64_t size, int64_t chunk)
{
	chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(size, 1));
	if (size <= 1 || chunk >= size)
		return;
	TileSplit &s = p.split[p.splits++];
	std::copy(std::begin(dims), std::end(dims), s.dim);
	s.size = size;
	s.chunk = chunk;
	s.count = (size + chunk - 1) / chunk;
	p.tiles *= static_cast<uint64_t>(s.count);
}

// Splits dim d of every operand (all operands must have the output's ndim and extent
// along d) into enough tiles that each holds about `budget` of `work` elements.
void split_same_dim(TilePlan &p, const neuron_cmd &cmd, int d, uint64_t work, uint64_t budget)
{
	const int64_t size = cmd.operands[0].sizes[d];
	for (int k = 0; k < cmd.num_operands; ++k)
		if (cmd.operands[k].ndim != cmd.operands[0].ndim || cmd.operands[k].sizes[d] != size)
			return;
	const uint64_t want = (work + budget - 1) / std::max<uint64_t>(budget, 1);
	if (want <= 1)
		return;
	int dims[NEURON_MAX_OPERANDS];
	std::fill(std::begin(dims), std::end(dims), -1);
	for (int k = 0; k < cmd.num_operands; ++k)
		dims[k] = d;
	add_split(p, dims, size, (size + static_cast<int64_t>(want) - 1) / static_cast<int64_t>(want));
}

// The largest dim of the output that `allowed` accepts, or -1.
template <typename F> int largest_dim(const neuron_tensor_desc &out, F allowed)
{
	int best = -1;
	for (int i = 0; i < out.ndim; ++i)
		if (allowed(i) && out.sizes[i] > 1 && (best < 0 || out.sizes[i] > out.sizes[best]))
			best = i;
	return best;
}

void plan_matmul(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const neuron_tensor_desc &o = cmd.operands[0], &a = cmd.operands[1], &b = cmd.operands[2];
	const int nd = o.ndim;
	if (nd < 2 || a.ndim != nd || b.ndim != nd)
		return;
	const uint64_t M = static_cast<uint64_t>(o.sizes[nd - 2]), N = static_cast<uint64_t>(o.sizes[nd - 1]);
	const uint64_t K = static_cast<uint64_t>(a.sizes[nd - 1]);
	const uint64_t item = std::max<uint64_t>(M * N * K, 1);
	if (nd == 3 && a.sizes[0] == o.sizes[0] && b.sizes[0] == o.sizes[0]) {
		const int dims[NEURON_MAX_OPERANDS] = {0, 0, 0, -1, -1, -1};
		add_split(p, dims, o.sizes[0], static_cast<int64_t>(std::max<uint64_t>(budget / item, 1)));
	}
	if (item <= budget)
		return;
	// Near-square output blocks: each streams Mt rows of a and Nt columns of b once.
	const uint64_t target = std::max<uint64_t>(budget / std::max<uint64_t>(K, 1), 1);
	const uint64_t side = static_cast<uint64_t>(std::sqrt(double(target)));
	uint64_t Mt, Nt;
	if (N <= side) {
		Nt = N;
		Mt = std::max<uint64_t>(target / std::max<uint64_t>(N, 1), 1);
	} else {
		Mt = std::clamp<uint64_t>(side, 1, M);
		Nt = std::max<uint64_t>(target / Mt, 1);
	}
	const int mdims[NEURON_MAX_OPERANDS] = {nd - 2, nd - 2, -1, -1, -1, -1};
	const int ndims[NEURON_MAX_OPERANDS] = {nd - 1, -1, nd - 1, -1, -1, -1};
	add_split(p, mdims, static_cast<int64_t>(M), static_cast<int64_t>(Mt));
	add_split(p, ndims, static_cast<int64_t>(N), static_cast<int64_t>(Nt));
}

} // namespace

TilePlan plan_tiles(const neuron_cmd &cmd, const TileBudget &budget)
{
	TilePlan p;
	if (cmd.num_operands == 0)
		return p;
	const neuron_tensor_desc &out = cmd.operands[0];
	const uint64_t elem_budget = transcendental(cmd.opcode) ? budget.transcendental_elements : budget.elements;
	if (cmd.opcode == NEURON_OP_MATMUL && cmd.num_operands == 3) {
		plan_matmul(p, cmd, budget.matmul_macs);
	} else if (elementwise(cmd.opcode)) {
		// Any dim will do: every element is independent.
		const int d = largest_dim(out, [](int) { return true; });
		if (d >= 0)
			split_same_dim(p, cmd, d, numel(out), elem_budget);
	} else if ((cmd.opcode == NEURON_OP_SUM || cmd.opcode == NEURON_OP_MEAN || cmd.opcode == NEURON_OP_AMAX) &&
		   cmd.num_operands == 2) {
		const uint64_t mask = static_cast<uint64_t>(cmd.iscalars[0]);
		const int d = largest_dim(out, [&](int i) { return !(mask >> i & 1); });
		if (d >= 0)
			split_same_dim(p, cmd, d, numel(cmd.operands[1]), elem_budget);
	} else if (cmd.opcode == NEURON_OP_SOFTMAX && cmd.num_operands == 2) {
		const int64_t along = cmd.iscalars[0];
		const int d = largest_dim(out, [&](int i) { return i != along; });
		if (d >= 0)
			split_same_dim(p, cmd, d, numel(out), elem_budget);
	}
	return p;
}

void narrow_to_tile(const TilePlan &plan, uint64_t index, neuron_cmd &cmd, OperandViews &views)
{
	for (int s = plan.splits - 1; s >= 0; --s) {
		const TileSplit &sp = plan.split[s];
		const int64_t i = static_cast<int64_t>(index % static_cast<uint64_t>(sp.count));
		index /= static_cast<uint64_t>(sp.count);
		const int64_t offset = i * sp.chunk;
		const int64_t len = std::min(sp.chunk, sp.size - offset);
		for (int k = 0; k < cmd.num_operands; ++k) {
			const int d = sp.dim[k];
			if (d < 0)
				continue;
			neuron_tensor_desc &desc = cmd.operands[k];
			const int64_t bytes = offset * desc.strides[d] * static_cast<int64_t>(kernels::dtype_size(desc.dtype));
			desc.sizes[d] = len;
			desc.addr += static_cast<uint64_t>(bytes);
			views[k].sizes[d] = len;
			if (views[k].data)
				views[k].data += bytes;
		}
	}
}

} // namespace neuron::chip
