// Tiling of the ISA 1.4 opcodes (cmd.h):
//  - SCAN: blocks of whole rows (a dim other than the scanned one); rows longer
//    than a tile are cut along the scanned dim too, last, as an ordered chain
//    whose later tiles start from the last element the tile before wrote (their
//    init operand is redirected to it). Only if the runner keeps chains in order
//    on one engine (TileBudget::chain_partials; the kmd pump does not cut them).
//    A carried f32 start is the rounded output, so a cut f32 cumsum may differ
//    from an uncut one in the last bit; integers are exact either way.
//  - SORT: blocks of whole rows; a row is sorted whole (not preemptible inside).
//  - the linear algebra ops: blocks of whole matrices along a batch dim.
//  - ATTENTION: a leading dim, then blocks of query rows (out, lse, q and the mask
//    narrowed together, k and v whole); a row block's causal diagonal moves with
//    its first row. A single row is never cut (its keys are one online softmax).
#include "tiling_isa14_compute.h"

#include "tiling_rules.h"

#include <geometry.h>

#include <algorithm>

namespace neuron::sched {

using namespace rules;

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / std::max<uint64_t>(b, 1); }

void plan_scan(TilePlan &p, const neuron_cmd &cmd, uint64_t budget, bool carry)
{
	const neuron_tensor_desc &out = cmd.operands[0];
	const int along = static_cast<int>(cmd.iscalars[0]);
	const uint64_t work = kernels::numel(out);
	const int d = largest_dim(out, [&](int i) { return i != along; });
	if (d >= 0)
		split_same_dim(p, cmd, d, work, budget); // init has out's extent on every other dim
	const uint64_t per_tile = work / p.tiles;
	if (!carry || per_tile <= budget || out.ndim == 0 || out.sizes[along] <= 1)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {along, along, -1, -1, -1, -1};
	add_carry_split(p, dims, out.sizes[along], per_tile, budget, Carry::Ordered);
}

void plan_sort(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const neuron_tensor_desc &in = cmd.operands[2];
	const int along = static_cast<int>(cmd.iscalars[0]);
	const int d = largest_dim(in, [&](int i) { return i != along; });
	if (d < 0)
		return;
	const uint64_t want = ceil_div(kernels::command_work(cmd), budget);
	if (want <= 1)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {d, d, d, -1, -1, -1};
	add_split(p, dims, in.sizes[d], static_cast<int64_t>(ceil_div(static_cast<uint64_t>(in.sizes[d]), want)));
}

void plan_attention(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const neuron_tensor_desc &out = cmd.operands[0];
	const int n = out.ndim, rows = n - 2;
	const uint64_t work = kernels::command_work(cmd);
	if (work <= budget)
		return;
	// A leading dim: every operand has it (k, v and the mask maybe with stride 0).
	const int lead = largest_dim(out, [&](int i) { return i < rows; });
	if (lead >= 0) {
		const int dims[NEURON_MAX_OPERANDS] = {lead, lead, lead, lead, lead, lead};
		const uint64_t want = ceil_div(work, budget);
		add_split(p, dims, out.sizes[lead],
			  static_cast<int64_t>(ceil_div(static_cast<uint64_t>(out.sizes[lead]), want)));
	}
	const uint64_t per_tile = work / p.tiles;
	if (per_tile <= budget || out.sizes[rows] <= 1)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {rows, rows, rows, -1, -1, rows};
	const uint64_t want = ceil_div(per_tile, budget);
	add_split(p, dims, out.sizes[rows], static_cast<int64_t>(ceil_div(static_cast<uint64_t>(out.sizes[rows]), want)));
}

// The linear algebra ops: blocks of whole matrices along a batch dim (every
// operand has the batch dims first; a matrix is factored whole).
void plan_linalg(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const int lead = cmd.opcode == NEURON_OP_PERMUTATION ? cmd.operands[0].ndim - 1 : cmd.operands[0].ndim - 2;
	const uint64_t want = ceil_div(kernels::command_work(cmd), budget);
	if (lead <= 0 || want <= 1)
		return;
	const int d = largest_dim(cmd.operands[0], [&](int i) { return i < lead; });
	if (d < 0)
		return;
	int dims[NEURON_MAX_OPERANDS] = {-1, -1, -1, -1, -1, -1};
	for (int k = 0; k < cmd.num_operands; ++k)
		dims[k] = d;
	add_split(p, dims, cmd.operands[0].sizes[d],
		  static_cast<int64_t>(ceil_div(static_cast<uint64_t>(cmd.operands[0].sizes[d]), want)));
}

// The split of `plan` along operand 0's dim `dim`, or -1.
int split_along(const TilePlan &plan, int dim)
{
	for (int s = 0; s < plan.splits; ++s)
		if (plan.split[s].dim[0] == dim)
			return s;
	return -1;
}

} // namespace

void plan_isa14_compute(TilePlan &p, const neuron_cmd &cmd, const TileBudget &budget, uint64_t threads)
{
	const uint64_t elements = threads * budget.elements;
	switch (cmd.opcode) {
	case NEURON_OP_SCAN:
		if (cmd.num_operands == 3)
			plan_scan(p, cmd, elements, budget.chain_partials);
		break;
	case NEURON_OP_SORT:
		if (cmd.num_operands == 3)
			plan_sort(p, cmd, elements);
		break;
	case NEURON_OP_ATTENTION:
		if (cmd.num_operands == 6)
			plan_attention(p, cmd, threads * budget.matmul_macs);
		break;
	case NEURON_OP_LU:
	case NEURON_OP_PERMUTATION:
	case NEURON_OP_CHOLESKY:
	case NEURON_OP_TRIANGULAR_SOLVE:
	case NEURON_OP_GEQRF:
	case NEURON_OP_ORGQR:
	case NEURON_OP_EIGH:
	case NEURON_OP_SVD:
		plan_linalg(p, cmd, threads * budget.matmul_macs);
		break;
	default:
		break;
	}
}

void finish_isa14_tile(const TilePlan &plan, uint64_t index, neuron_cmd &cmd, OperandViews &views)
{
	if (cmd.opcode == NEURON_OP_SCAN && plan_carry(plan) == Carry::Ordered) {
		const int along = static_cast<int>(cmd.iscalars[0]);
		const int64_t offset = split_offset(plan, index, plan.splits - 1);
		if (offset == 0)
			return;
		// Start from out's element just before this tile, along the scanned dim.
		neuron_tensor_desc init = cmd.operands[0];
		const int64_t back = init.strides[along] * static_cast<int64_t>(kernels::dtype_size(init.dtype));
		init.sizes[along] = 1;
		init.addr -= static_cast<uint64_t>(back);
		cmd.operands[2] = init;
		views[2] = views[0];
		views[2].sizes[along] = 1;
		if (views[2].data)
			views[2].data -= back;
		return;
	}
	if (cmd.opcode == NEURON_OP_ATTENTION && (cmd.iscalars[0] & NEURON_ATTENTION_CAUSAL)) {
		const int s = split_along(plan, cmd.operands[0].ndim - 2);
		if (s >= 0)
			cmd.iscalars[1] += split_offset(plan, index, s);
	}
}

} // namespace neuron::sched
