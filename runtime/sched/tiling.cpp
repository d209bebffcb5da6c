#include "tiling.h"
#include "tiling_isa14.h"
#include "tiling_isa14_compute.h"
#include "tiling_rules.h"

#include <geometry.h>
#include <gemm_packs.h>
#include <kernels.h>

#include <algorithm>
#include <cmath>

namespace neuron::sched {

namespace {

using kernels::numel;

bool transcendental(uint16_t op)
{
	return op == NEURON_OP_GELU || op == NEURON_OP_SILU || op == NEURON_OP_TANH || op == NEURON_OP_EXP ||
	       op == NEURON_OP_SOFTMAX || op == NEURON_OP_LOG_SOFTMAX || op == NEURON_OP_UNARY_MATH ||
	       op == NEURON_OP_BINARY_MATH || op == NEURON_OP_ADAM_STEP || op == NEURON_OP_POINTWISE;
}

bool elementwise(uint16_t op)
{
	// The ops whose output element i depends only on element i of each input
	// (comparisons too: only their bool output may not alias the inputs).
	return kernels::output_may_alias_inputs(static_cast<neuron_opcode>(op)) || op == NEURON_OP_COMPARE ||
	       op == NEURON_OP_COMPARE_SCALAR;
}

} // namespace

namespace rules {

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

// Adds the carrying split, the plan's last: dim `dims` (extent `size`) cut so that
// each tile holds about `budget` of the `per_tile` work a tile holds so far.
void add_carry_split(TilePlan &p, const int (&dims)[NEURON_MAX_OPERANDS], int64_t size, uint64_t per_tile,
		     uint64_t budget, Carry carry)
{
	const int64_t want = static_cast<int64_t>((per_tile + budget - 1) / std::max<uint64_t>(budget, 1));
	const int before = p.splits;
	add_split(p, dims, size, (size + want - 1) / want);
	if (p.splits > before) {
		p.split[before].carry = carry;
		p.tiles *= static_cast<uint64_t>(p.split[before].passes());
	}
}

// Offset along split s of tile `index` (the last split varies fastest).
int64_t split_offset(const TilePlan &plan, uint64_t index, int s)
{
	for (int k = plan.splits - 1; k > s; --k)
		index /= static_cast<uint64_t>(plan.split[k].count * plan.split[k].passes());
	const TileSplit &sp = plan.split[s];
	return static_cast<int64_t>(index % static_cast<uint64_t>(sp.count * sp.passes()) % static_cast<uint64_t>(sp.count)) *
	       sp.chunk;
}

} // namespace rules

namespace {

using namespace rules;

// MATMUL, and MATMUL_EPILOGUE whose bias (operand 3, out's shape) is cut as out is.
void plan_matmul(TilePlan &p, const neuron_cmd &cmd, uint64_t budget, bool partials)
{
	const neuron_tensor_desc &o = cmd.operands[0], &a = cmd.operands[1], &b = cmd.operands[2];
	const int nd = o.ndim;
	if (nd < 2 || a.ndim != nd || b.ndim != nd)
		return;
	const int bias = cmd.opcode == NEURON_OP_MATMUL_EPILOGUE ? 0 : -1; // operand 3 follows out's dims
	const uint64_t M = static_cast<uint64_t>(o.sizes[nd - 2]), N = static_cast<uint64_t>(o.sizes[nd - 1]);
	const uint64_t K = static_cast<uint64_t>(a.sizes[nd - 1]);
	const uint64_t item = std::max<uint64_t>(M * N * K, 1);
	if (nd == 3 && a.sizes[0] == o.sizes[0] && b.sizes[0] == o.sizes[0]) {
		const int dims[NEURON_MAX_OPERANDS] = {0, 0, 0, bias, -1, -1};
		add_split(p, dims, o.sizes[0], static_cast<int64_t>(std::max<uint64_t>(budget / item, 1)));
	}
	if (item <= budget)
		return;
	// Blocks Mt x Nt x Kt with Kt up to 512 and the output block near-square: the
	// packed multiply (kernels/packed_gemm.h) reads each packed block once per tile
	// and passes over the output block once per 256 of K, so a long Kt and a small
	// output block suit it (bench-runtime prints the result against OpenBLAS on the
	// whole matrix). Small budgets (tests) get
	// near-cubic blocks. With K left whole, a long K would force thin output blocks.
	// Only an fp32 output may carry partial sums: a bf16/fp16 one would round them,
	// so theirs stay in f32 per chain (chain_partials.h) if the runner keeps them.
	const uint64_t side = std::max<uint64_t>(static_cast<uint64_t>(std::cbrt(double(budget))), 1);
	const uint64_t k_target = std::clamp<uint64_t>(budget / (128 * 128), side, 512);
	const bool exact = o.dtype == NEURON_DTYPE_F32;
	uint64_t Kt = K;
	if ((exact || partials) && K > k_target + k_target / 2) {
		const uint64_t pieces = (K + k_target - 1) / k_target;
		Kt = (K + pieces - 1) / pieces;
	}
	// Near-square output blocks: each streams Mt rows of a and Nt columns of b once.
	const uint64_t target = std::max<uint64_t>(budget / std::max<uint64_t>(Kt, 1), 1);
	const uint64_t sq = static_cast<uint64_t>(std::sqrt(double(target)));
	uint64_t Mt, Nt;
	if (N <= sq) {
		Nt = N;
		Mt = std::max<uint64_t>(target / std::max<uint64_t>(N, 1), 1);
	} else {
		Mt = std::clamp<uint64_t>(sq, 1, M);
		Nt = std::max<uint64_t>(target / Mt, 1);
	}
	// Whole multiples of 64: BLAS micro-kernels work on 8-16 wide panels, and ragged
	// block edges cost it (1024 cut at 362 ran at 0.65 of BLAS here, at 320 at 0.96).
	auto round64 = [](uint64_t x, uint64_t whole) { return x >= 64 && x < whole ? x / 64 * 64 : x; };
	Mt = round64(Mt, M);
	Nt = round64(Nt, N);
	Kt = round64(Kt, K);
	const int mdims[NEURON_MAX_OPERANDS] = {nd - 2, nd - 2, -1, bias < 0 ? -1 : nd - 2, -1, -1};
	const int ndims[NEURON_MAX_OPERANDS] = {nd - 1, -1, nd - 1, bias < 0 ? -1 : nd - 1, -1, -1};
	const int kdims[NEURON_MAX_OPERANDS] = {-1, nd - 1, nd - 2, -1, -1, -1};
	add_split(p, mdims, static_cast<int64_t>(M), static_cast<int64_t>(Mt));
	add_split(p, ndims, static_cast<int64_t>(N), static_cast<int64_t>(Nt));
	// Last, so it varies fastest: an output block's K tiles run back to back, in
	// order, while the block is in cache.
	const int before = p.splits;
	add_split(p, kdims, static_cast<int64_t>(K), static_cast<int64_t>(Kt));
	if (p.splits > before)
		p.split[before].carry = exact ? Carry::Accumulate : Carry::F32Partials;
}

// SUM / MEAN / AMAX: a kept dim first (each tile computes whole outputs); if tiles
// are still over budget (a sum of everything, or too few outputs), the largest
// reduced dim too, as the last split: its later tiles add into (max with) the
// output (cmd.h, NEURON_REDUCE_ACCUMULATE), in order, like a matmul's K tiles.
// Partial results are exact in f32 and integer outputs (integers wrap the same
// either way) and for AMAX of any dtype; a bf16/f16 sum or mean keeps them in f32
// per chain (chain_partials.h) if the runner does, else is not split so.
void plan_reduction(TilePlan &p, const neuron_cmd &cmd, uint64_t budget, bool partials)
{
	const neuron_tensor_desc &out = cmd.operands[0], &in = cmd.operands[1];
	const uint64_t mask = static_cast<uint64_t>(cmd.iscalars[0]);
	const uint64_t work = numel(in);
	const int d = largest_dim(out, [&](int i) { return !(mask >> i & 1); });
	if (d >= 0)
		split_same_dim(p, cmd, d, work, budget);
	const bool exact = cmd.opcode == NEURON_OP_AMAX ||
			   (out.dtype != NEURON_DTYPE_BF16 && out.dtype != NEURON_DTYPE_F16);
	const uint64_t per_tile = work / p.tiles;
	if ((!exact && !partials) || per_tile <= budget)
		return;
	const int r = largest_dim(in, [&](int i) { return (mask >> i & 1) != 0; });
	if (r < 0)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {-1, r, -1, -1, -1, -1};
	add_carry_split(p, dims, in.sizes[r], per_tile, budget, exact ? Carry::Accumulate : Carry::F32Partials);
}

// SOFTMAX / LOG_SOFTMAX along dim D = i[0]: blocks of whole rows (a dim other than
// D); rows longer than a tile are cut along D too, last, with two passes per chain
// (Carry::RowStats) if the runner keeps each row's statistics between tiles.
void plan_softmax(TilePlan &p, const neuron_cmd &cmd, uint64_t budget, bool stats)
{
	const neuron_tensor_desc &out = cmd.operands[0];
	const int64_t along = cmd.iscalars[0];
	const uint64_t work = numel(out);
	const int d = largest_dim(out, [&](int i) { return i != along; });
	if (d >= 0)
		split_same_dim(p, cmd, d, work, budget);
	const uint64_t per_tile = work / p.tiles;
	if (!stats || per_tile <= budget || out.ndim == 0 || out.sizes[along] <= 1)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {static_cast<int>(along), static_cast<int>(along), -1, -1, -1, -1};
	add_carry_split(p, dims, out.sizes[along], per_tile, budget, Carry::RowStats);
}

// LAYER_NORM / LAYER_NORM_BACKWARD along dim D = i[0]: blocks of whole rows along
// the largest dim d other than D, cutting the operands that hold rows or row
// statistics (all of out's rank) and never the 1-D weight and bias. A row is never
// cut: its statistics need all of it.
void plan_layer_norm(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const neuron_tensor_desc &out = cmd.operands[0];
	const int64_t along = cmd.iscalars[0];
	const int d = largest_dim(out, [&](int i) { return i != along; });
	const uint64_t want = (numel(out) + budget - 1) / std::max<uint64_t>(budget, 1);
	if (d < 0 || want <= 1)
		return;
	const int row_operands = cmd.opcode == NEURON_OP_LAYER_NORM ? 4 : 5;
	int dims[NEURON_MAX_OPERANDS];
	for (int k = 0; k < NEURON_MAX_OPERANDS; ++k)
		dims[k] = k < row_operands ? d : -1;
	add_split(p, dims, out.sizes[d], (out.sizes[d] + static_cast<int64_t>(want) - 1) / static_cast<int64_t>(want));
}

// LAYER_NORM_PARAM_GRAD: blocks of whole rows of go, in and the statistics (as
// above); dw and db are whole in every tile, the later tiles adding to them
// (NEURON_LN_ACCUMULATE), in order, like a reduction's.
void plan_layer_norm_param_grad(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const neuron_tensor_desc &in = cmd.operands[3];
	const int64_t along = cmd.iscalars[0];
	const int d = largest_dim(in, [&](int i) { return i != along; });
	const uint64_t work = numel(in);
	if (d < 0 || work <= budget)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {-1, -1, d, d, d, d};
	add_carry_split(p, dims, in.sizes[d], work, budget, Carry::Accumulate);
}

// ARG_REDUCE along dim D = i[0]: like softmax, blocks of whole rows (out keeps D
// with size 1); rows longer than a tile are cut along D in `in` only, last, each
// chain carrying its rows' best element so far (Carry::ArgBest), if the runner keeps
// it between tiles.
void plan_arg_reduce(TilePlan &p, const neuron_cmd &cmd, uint64_t budget, bool carry)
{
	const neuron_tensor_desc &in = cmd.operands[1];
	const int64_t along = cmd.iscalars[0];
	const uint64_t work = numel(in);
	const int d = largest_dim(cmd.operands[0], [&](int i) { return i != along; });
	if (d >= 0)
		split_same_dim(p, cmd, d, work, budget);
	const uint64_t per_tile = work / p.tiles;
	if (!carry || per_tile <= budget || in.ndim == 0 || in.sizes[along] <= 1)
		return;
	const int dims[NEURON_MAX_OPERANDS] = {-1, static_cast<int>(along), -1, -1, -1, -1};
	add_carry_split(p, dims, in.sizes[along], per_tile, budget, Carry::ArgBest);
}

// Indexing ops (cmd.h, ISA 1.1) along dim D = i[0]. First a dim d other than D:
// every output element is written by exactly one tile (with d = D the adds would
// sum one output element over several tiles). `drive` is the operand whose extent
// along d is split; every other operand split along d has at least that extent
// there (the op's shape rules), so narrowing it to the same block is exact.
// If tiles are still too big (D is the only long dim: a 1-d index_select or
// index_add), D too, last: the index positions j in chunks, one ordered chain per
// block (Carry::Ordered), so the writes to each output element come in the whole
// op's order (j ascending; adds sum in that order, copies let the last one win).
void plan_indexing(TilePlan &p, const neuron_cmd &cmd, uint64_t budget)
{
	const int D = static_cast<int>(cmd.iscalars[0]);
	int drive = 0;                       // INDEX_SELECT, GATHER: the output
	bool split[NEURON_MAX_OPERANDS] = {}; // operands that share the output's dims
	// Along D: each operand's dim that follows the index positions j (-1: whole).
	int along[NEURON_MAX_OPERANDS] = {-1, -1, -1, -1, -1, -1};
	int positions = 0; // the operand whose extent along its `along` dim is the count of j
	switch (cmd.opcode) {
	case NEURON_OP_INDEX_SELECT: // out, in, index[1-d]
		split[0] = split[1] = true;
		along[0] = D, along[2] = 0, positions = 2;
		break;
	case NEURON_OP_GATHER: // out, in, index (out's shape)
		split[0] = split[1] = split[2] = true;
		along[0] = along[2] = D, positions = 2;
		break;
	case NEURON_OP_INDEX_ADD: // out, index[1-d], src
		split[0] = split[2] = true;
		drive = 2;
		along[1] = 0, along[2] = D, positions = 1;
		break;
	case NEURON_OP_SCATTER_ADD: // out, index, src (index has src's shape)
		split[0] = split[1] = split[2] = true;
		drive = 2;
		along[1] = along[2] = D, positions = 1;
		break;
	default:
		return;
	}
	const neuron_tensor_desc &dv = cmd.operands[drive];
	bool same_rank = true;
	for (int k = 0; k < cmd.num_operands; ++k)
		same_rank = same_rank && (!split[k] || cmd.operands[k].ndim == dv.ndim);
	const int d = same_rank ? largest_dim(dv, [&](int i) { return i != D; }) : -1;
	bool fits = d >= 0;
	for (int k = 0; k < cmd.num_operands && fits; ++k)
		fits = !split[k] || cmd.operands[k].sizes[d] >= dv.sizes[d];
	const uint64_t want = (numel(dv) + budget - 1) / std::max<uint64_t>(budget, 1);
	if (want <= 1)
		return;
	if (fits) {
		int dims[NEURON_MAX_OPERANDS];
		std::fill(std::begin(dims), std::end(dims), -1);
		for (int k = 0; k < cmd.num_operands; ++k)
			if (split[k])
				dims[k] = d;
		add_split(p, dims, dv.sizes[d], (dv.sizes[d] + static_cast<int64_t>(want) - 1) / static_cast<int64_t>(want));
	}
	const uint64_t per_tile = numel(dv) / p.tiles;
	const neuron_tensor_desc &ix = cmd.operands[positions];
	if (per_tile <= budget || dv.ndim == 0 || ix.ndim == 0)
		return;
	const int64_t count = ix.sizes[along[positions]];
	for (int k = 0; k < cmd.num_operands; ++k)
		if (along[k] >= 0 && (along[k] >= cmd.operands[k].ndim || cmd.operands[k].sizes[along[k]] != count))
			return;
	add_carry_split(p, along, count, per_tile, budget, Carry::Ordered);
}

// The accumulate split's tiles (the last split, so narrowed first, on the whole
// command): later tiles add to the partial results of the tiles before.
void accumulate_after_first(neuron_cmd &cmd, bool later, bool last)
{
	if (cmd.opcode == NEURON_OP_MATMUL) {
		if (later)
			cmd.fscalars.f[1] = 1.0; // beta: add to the K tiles before
		return;
	}
	if (cmd.opcode == NEURON_OP_MATMUL_EPILOGUE) {
		// The bias goes in with the first K tile, the activation after the last.
		if (later) {
			cmd.fscalars.f[1] = 1.0;
			cmd.iscalars[1] |= NEURON_EPILOGUE_NO_BIAS;
		}
		if (!last)
			cmd.iscalars[1] |= NEURON_EPILOGUE_NO_ACT;
		return;
	}
	if (cmd.opcode == NEURON_OP_LAYER_NORM_PARAM_GRAD) {
		if (later)
			cmd.iscalars[1] |= NEURON_LN_ACCUMULATE;
		return;
	}
	// A reduction: every tile's mean divides by the whole command's count.
	if (cmd.opcode == NEURON_OP_MEAN && cmd.iscalars[2] == 0) {
		const neuron_tensor_desc &in = cmd.operands[1];
		int64_t count = 1;
		for (int i = 0; i < in.ndim; ++i)
			if (cmd.iscalars[0] >> i & 1)
				count *= in.sizes[i];
		cmd.iscalars[2] = count;
	}
	if (later)
		cmd.iscalars[1] = NEURON_REDUCE_ACCUMULATE;
}

} // namespace

TilePlan plan_tiles(const neuron_cmd &cmd, const TileBudget &budget, int threads)
{
	TilePlan p;
	if (cmd.num_operands == 0)
		return p;
	if (cmd.opcode == NEURON_OP_TILE_KERNEL) {
		// Its tiles are its steps (one loop iteration each, i[2] of them, counted
		// when its program was registered), in order: one chain, no operand cut.
		const int none[NEURON_MAX_OPERANDS] = {-1, -1, -1, -1, -1, -1};
		add_split(p, none, std::max<int64_t>(cmd.iscalars[2], 1), 1);
		if (p.splits)
			p.split[0].carry = Carry::Ordered;
		return p;
	}
	const neuron_tensor_desc &out = cmd.operands[0];
	const uint64_t per = static_cast<uint64_t>(std::max(threads, 1));
	const uint64_t elem_budget = per * (transcendental(cmd.opcode) ? budget.transcendental_elements : budget.elements);
	if (plan_isa14(p, cmd, per * budget.elements, per * budget.transcendental_elements)) {
		// ISA 1.4's block: its own rules (tiling_isa14.h).
	} else if ((cmd.opcode == NEURON_OP_MATMUL && cmd.num_operands == 3) ||
		   (cmd.opcode == NEURON_OP_MATMUL_EPILOGUE && cmd.num_operands == 4)) {
		plan_matmul(p, cmd, per * budget.matmul_macs, budget.chain_partials);
	} else if (elementwise(cmd.opcode)) {
		// Any dim will do: every element is independent.
		const int d = largest_dim(out, [](int) { return true; });
		if (d >= 0)
			split_same_dim(p, cmd, d, numel(out), elem_budget);
	} else if ((cmd.opcode == NEURON_OP_SUM || cmd.opcode == NEURON_OP_MEAN || cmd.opcode == NEURON_OP_AMAX) &&
		   cmd.num_operands == 2) {
		plan_reduction(p, cmd, elem_budget, budget.chain_partials);
	} else if ((cmd.opcode == NEURON_OP_SOFTMAX || cmd.opcode == NEURON_OP_LOG_SOFTMAX) && cmd.num_operands == 2) {
		plan_softmax(p, cmd, elem_budget, budget.chain_partials);
	} else if ((cmd.opcode == NEURON_OP_LAYER_NORM && cmd.num_operands >= 4) ||
		   (cmd.opcode == NEURON_OP_LAYER_NORM_BACKWARD && cmd.num_operands >= 5)) {
		plan_layer_norm(p, cmd, elem_budget);
	} else if (cmd.opcode == NEURON_OP_LAYER_NORM_PARAM_GRAD && cmd.num_operands == 6) {
		plan_layer_norm_param_grad(p, cmd, elem_budget);
	} else if (cmd.opcode >= NEURON_OP_INDEX_SELECT && cmd.opcode <= NEURON_OP_SCATTER_ADD && cmd.num_operands == 3) {
		plan_indexing(p, cmd, elem_budget);
	} else if (cmd.opcode == NEURON_OP_ARG_REDUCE && cmd.num_operands == 2) {
		plan_arg_reduce(p, cmd, elem_budget, budget.chain_partials);
	} else if (cmd.opcode == NEURON_OP_ADAM_STEP && cmd.num_operands == 5) {
		// Elementwise over param, exp_avg, exp_avg_sq and grad (one shape); the step
		// count (one element, operand 4) is read whole by every tile.
		const int d = largest_dim(out, [](int) { return true; });
		if (d >= 0) {
			const uint64_t want = (numel(out) + elem_budget - 1) / elem_budget;
			const int dims[NEURON_MAX_OPERANDS] = {d, d, d, d, -1, -1};
			if (want > 1)
				add_split(p, dims, out.sizes[d], (out.sizes[d] + int64_t(want) - 1) / int64_t(want));
		}
	} else if ((cmd.opcode == NEURON_OP_INDEX_COPY || cmd.opcode == NEURON_OP_SCATTER) && cmd.num_operands == 3) {
		// ISA 1.3: the copying forms have their adds' operands and shape rules, and
		// plan_indexing never splits dim i[0], so each tile keeps every write to its
		// output elements in index order (the last duplicate still wins).
		neuron_cmd as_add = cmd;
		as_add.opcode = cmd.opcode == NEURON_OP_INDEX_COPY ? NEURON_OP_INDEX_ADD : NEURON_OP_SCATTER_ADD;
		plan_indexing(p, as_add, elem_budget);
	} else {
		plan_isa14_compute(p, cmd, budget, per); // tiling_isa14_compute.cpp
	}
	return p;
}

void narrow_to_tile(const TilePlan &plan, uint64_t index, neuron_cmd &cmd, OperandViews &views)
{
	const uint64_t tile_index = index;
	for (int s = plan.splits - 1; s >= 0; --s) {
		const TileSplit &sp = plan.split[s];
		// A two-pass split runs its chunks twice: index i and i + count are one chunk.
		const uint64_t span = static_cast<uint64_t>(sp.count * sp.passes());
		const int64_t i = static_cast<int64_t>(index % span % static_cast<uint64_t>(sp.count));
		index /= span;
		const int64_t offset = i * sp.chunk;
		const int64_t len = std::min(sp.chunk, sp.size - offset);
		if (sp.carry == Carry::Accumulate || sp.carry == Carry::F32Partials)
			accumulate_after_first(cmd, offset > 0, offset + len == sp.size);
		if (sp.positions) {
			cmd.fscalars.bits[2] += static_cast<uint64_t>(offset);
			cmd.fscalars.bits[3] = cmd.fscalars.bits[2] + static_cast<uint64_t>(len);
			continue;
		}

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
	finish_isa14_tile(plan, tile_index, cmd, views); // tiling_isa14_compute.cpp
}

uint64_t pack_floats(const neuron_cmd &cmd, const TilePlan &plan)
{
	if ((cmd.opcode != NEURON_OP_MATMUL && cmd.opcode != NEURON_OP_MATMUL_EPILOGUE) || plan.tiles <= 1)
		return 0;
	// Tile 0 has the full block extents (only the last block along a dim is short).
	neuron_cmd tile = cmd;
	OperandViews none{};
	narrow_to_tile(plan, 0, tile, none);
	const int nd = cmd.operands[0].ndim;
	const auto extent = [](const neuron_tensor_desc &d, int i) { return static_cast<uint64_t>(d.sizes[i]); };
	const uint64_t Mt = extent(tile.operands[0], nd - 2), Nt = extent(tile.operands[0], nd - 1);
	const uint64_t Kt = extent(tile.operands[1], nd - 1);
	if (Mt == 0 || Nt == 0 || Kt == 0 ||
	    kernels::tile_pack_floats(static_cast<int64_t>(Mt), static_cast<int64_t>(Nt), static_cast<int64_t>(Kt)) == 0)
		return 0;
	const uint64_t M = extent(cmd.operands[0], nd - 2), N = extent(cmd.operands[0], nd - 1);
	const uint64_t K = extent(cmd.operands[1], nd - 1);
	const uint64_t batch = nd == 3 ? extent(cmd.operands[0], 0) : 1;
	const uint64_t mb = (M + Mt - 1) / Mt, nb = (N + Nt - 1) / Nt, kb = (K + Kt - 1) / Kt;
	const auto block = [&](uint64_t lanes) {
		return kernels::pack_block_floats(static_cast<int64_t>(lanes), static_cast<int64_t>(Kt));
	};
	return batch * kb * (mb * block(Mt) + nb * block(Nt));
}

} // namespace neuron::sched
