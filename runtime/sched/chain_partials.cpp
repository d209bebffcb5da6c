#include "chain_partials.h"

#include <geometry.h>
#include <kernels.h>

#include <algorithm>
#include <memory>
#include <new>
#include <span>

namespace neuron::sched {

void *ChainPartials::get(uint64_t chain, size_t bytes)
{
	if (base_) {
		if (chain >= chains_ || bytes > slot_bytes_)
			throw std::bad_alloc();
		return base_ + chain * slot_bytes_;
	}
	std::lock_guard lock(mutex_);
	std::vector<std::max_align_t> &b = buffers_[chain];
	const size_t n = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
	if (b.size() < n)
		b.resize(n);
	return b.data();
}

void ChainPartials::release(uint64_t chain)
{
	if (base_)
		return; // the region belongs to the command
	std::lock_guard lock(mutex_);
	buffers_.erase(chain);
}

void ChainPartials::clear()
{
	std::lock_guard lock(mutex_);
	buffers_.clear();
}

namespace {

// COPY (with the dtype conversion) from src to dst, same shape.
std::optional<kernels::Fault> copy(const neuron_tensor_desc &dst, const kernels::View &dv,
				   const neuron_tensor_desc &src, const kernels::View &sv, int threads)
{
	neuron_cmd c{};
	c.opcode = NEURON_OP_COPY;
	c.num_operands = 2;
	c.operands[0] = dst;
	c.operands[1] = src;
	const kernels::View v[2] = {dv, sv};
	return kernels::execute(c, v, threads);
}

// Carry::F32Partials.
std::optional<kernels::Fault> execute_with_partials(ChainPartials &partials, const TilePlan &plan, uint64_t index,
						    const neuron_cmd &tile, const OperandViews &views, int threads,
						    kernels::GemmPacks *packs)
{
	const uint64_t n = chain_length(plan), chain = index / n, pos = index % n;
	const neuron_tensor_desc &out = tile.operands[0];
	// The f32 buffer, shaped like this tile's output block, row-major.
	neuron_tensor_desc acc = out;
	acc.dtype = NEURON_DTYPE_F32;
	int64_t stride = 1;
	for (int i = out.ndim - 1; i >= 0; --i) {
		acc.strides[i] = stride;
		stride *= std::max<int64_t>(out.sizes[i], 1);
	}
	OperandViews v = views;
	kernels::View &av = v[0];
	av.dtype = NEURON_DTYPE_F32;
	std::copy(std::begin(acc.strides), std::end(acc.strides), std::begin(av.strides));
	try {
		av.data = static_cast<std::byte *>(partials.get(chain, kernels::numel(out) * sizeof(float)));
	} catch (const std::bad_alloc &) {
		return kernels::Fault{NEURON_FAULT_EXEC, "out of host memory for a tile's f32 partial results"};
	}
	neuron_cmd cmd = tile;
	cmd.operands[0] = acc;
	// A matmul's first K tile adds beta * the old output: start from it.
	if (pos == 0 && tile.opcode == NEURON_OP_MATMUL && tile.fscalars.f[1] != 0.0)
		if (auto f = copy(acc, av, out, views[0], threads))
			return f;
	if (auto f = kernels::execute(cmd, std::span(v.data(), cmd.num_operands), threads, packs))
		return f;
	if (pos + 1 < n)
		return std::nullopt;
	auto f = copy(out, views[0], acc, av, threads);
	partials.release(chain);
	return f;
}

// Chain `chain`'s per-row state, `rows` of T, default-constructed at the chain's
// first tile (`first`); nullptr when host memory ran out.
template <class T> T *row_state(ChainPartials &partials, uint64_t chain, size_t rows, bool first)
{
	T *state;
	try {
		state = static_cast<T *>(partials.get(chain, rows * sizeof(T)));
	} catch (const std::bad_alloc &) {
		return nullptr;
	}
	if (first)
		std::uninitialized_default_construct_n(state, rows);
	return state;
}

// Carry::RowStats.
std::optional<kernels::Fault> execute_row_pass(ChainPartials &partials, const TilePlan &plan, uint64_t index,
					       const neuron_cmd &tile, const OperandViews &views)
{
	const uint64_t n = chain_length(plan), chain = index / n, pos = index % n;
	const uint64_t chunks = static_cast<uint64_t>(plan.split[plan.splits - 1].count);
	const neuron_tensor_desc &in = tile.operands[1];
	const int64_t along = in.sizes[tile.iscalars[0]];
	const size_t rows = static_cast<size_t>(kernels::numel(in) / static_cast<uint64_t>(std::max<int64_t>(along, 1)));
	kernels::RowStats *stats = row_state<kernels::RowStats>(partials, chain, rows, pos == 0); // max -inf, sum 0
	if (!stats)
		return kernels::Fault{NEURON_FAULT_EXEC, "out of host memory for a tile's row statistics"};
	if (pos < chunks)
		return kernels::gather_row_stats(tile, views[1], stats);
	auto f = kernels::apply_row_stats(tile, views[0], views[1], stats);
	if (pos + 1 == n)
		partials.release(chain);
	return f;
}

// Carry::ArgBest.
std::optional<kernels::Fault> execute_arg_pass(ChainPartials &partials, const TilePlan &plan, uint64_t index,
					       const neuron_cmd &tile, const OperandViews &views)
{
	const TileSplit &split = plan.split[plan.splits - 1];
	const uint64_t n = chain_length(plan), chain = index / n, pos = index % n;
	const size_t rows = static_cast<size_t>(kernels::numel(tile.operands[0]));
	kernels::ArgBest *best = row_state<kernels::ArgBest>(partials, chain, rows, pos == 0);
	if (!best)
		return kernels::Fault{NEURON_FAULT_EXEC, "out of host memory for a tile's arg-reduce state"};
	const int64_t offset = static_cast<int64_t>(pos) * split.chunk;
	if (auto f = kernels::gather_arg_best(tile, views[0], views[1], offset, best))
		return f;
	if (pos + 1 < n)
		return std::nullopt;
	auto f = kernels::store_arg_best(tile, views[0], views[1], best);
	partials.release(chain);
	return f;
}

} // namespace

uint64_t chain_state_bytes(const neuron_cmd &cmd, const TilePlan &plan)
{
	const Carry carry = plan_carry(plan);
	if (carry != Carry::F32Partials && carry != Carry::RowStats && carry != Carry::ArgBest)
		return 0;
	// Tile 0 is the first of the first chain: full-sized chunks along every split
	// (only the last chunk of a split can be smaller), so its state is the largest.
	neuron_cmd tile = cmd;
	OperandViews none{};
	narrow_to_tile(plan, 0, tile, none);
	uint64_t bytes = 0;
	switch (carry) {
	case Carry::F32Partials:
		bytes = kernels::numel(tile.operands[0]) * sizeof(float);
		break;
	case Carry::RowStats: {
		const neuron_tensor_desc &in = tile.operands[1];
		const int64_t along = std::max<int64_t>(in.sizes[tile.iscalars[0]], 1);
		bytes = kernels::numel(in) / static_cast<uint64_t>(along) * sizeof(kernels::RowStats);
		break;
	}
	case Carry::ArgBest:
		bytes = kernels::numel(tile.operands[0]) * sizeof(kernels::ArgBest);
		break;
	default:
		break;
	}
	return (bytes + 63) & ~uint64_t(63);
}

std::optional<kernels::Fault> execute_tile(ChainPartials &partials, const TilePlan &plan, uint64_t index,
					   const neuron_cmd &tile, const OperandViews &views, int threads,
					   kernels::GemmPacks *packs)
{
	switch (plan_carry(plan)) {
	case Carry::F32Partials:
		return execute_with_partials(partials, plan, index, tile, views, threads, packs);
	case Carry::RowStats:
		return execute_row_pass(partials, plan, index, tile, views);
	case Carry::ArgBest:
		return execute_arg_pass(partials, plan, index, tile, views);
	case Carry::None:
	case Carry::Ordered:
	case Carry::Accumulate:
		break;
	}
	return kernels::execute(tile, std::span(views.data(), tile.num_operands), threads, packs);
}

} // namespace neuron::sched
