#include "chain_partials.h"

#include <geometry.h>
#include <kernels.h>

#include <algorithm>
#include <new>
#include <span>

namespace neuron::chip {

float *ChainPartials::get(uint64_t chain, size_t floats)
{
	std::lock_guard lock(mutex_);
	std::vector<float> &b = buffers_[chain];
	if (b.size() < floats)
		b.resize(floats);
	return b.data();
}

void ChainPartials::release(uint64_t chain)
{
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

} // namespace

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
		av.data = reinterpret_cast<std::byte *>(partials.get(chain, static_cast<size_t>(kernels::numel(out))));
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

} // namespace neuron::chip
