// Building tile programs (contracts/include/neuron/tile.h) by hand in the tests
// and the fuzz seeds: access patterns, instructions and loops.
#pragma once

#include <neuron/tile.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace tb {

struct Affine {
	int64_t base = 0;
	std::initializer_list<int64_t> steps = {};
	neuron_tile_affine get() const
	{
		neuron_tile_affine a{};
		a.base = base;
		int l = 0;
		for (int64_t s : steps)
			a.step[l++] = s;
		return a;
	}
};

inline neuron_tile_ap ap(uint8_t space, uint8_t dtype, uint32_t arg, uint32_t partition, Affine offset,
			 std::initializer_list<int64_t> sizes, std::initializer_list<int64_t> strides)
{
	neuron_tile_ap a{};
	a.space = space;
	a.dtype = dtype;
	a.arg = arg;
	a.partition = partition;
	a.offset = offset.get();
	int d = 0;
	for (int64_t s : sizes)
		a.sizes[d++] = s;
	a.ndim = static_cast<uint8_t>(d);
	d = 0;
	for (int64_t s : strides)
		a.strides[d++] = s;
	return a;
}

// A row-major [P, F] tile at byte `offset` of each partition from `partition`.
inline neuron_tile_ap sbuf(uint8_t dtype, int64_t P, int64_t F, Affine offset = {}, uint32_t partition = 0)
{
	return ap(NEURON_TILE_SBUF, dtype, 0, partition, offset, {P, F}, {1, 1});
}
inline neuron_tile_ap psum(int64_t P, int64_t F, Affine offset = {}, uint32_t partition = 0)
{
	return ap(NEURON_TILE_PSUM, NEURON_DTYPE_F32, 0, partition, offset, {P, F}, {1, 1});
}
// Rows x cols of a row-major HBM matrix with `ld` elements per row, from element offset.
inline neuron_tile_ap hbm(uint8_t dtype, uint32_t arg, int64_t rows, int64_t cols, int64_t ld, Affine offset = {})
{
	return ap(NEURON_TILE_HBM, dtype, arg, 0, offset, {rows, cols}, {ld, 1});
}

inline neuron_tile_insn insn(uint16_t op, std::initializer_list<neuron_tile_ap> operands, uint32_t fn = 0,
			     uint8_t flags = 0)
{
	neuron_tile_insn in{};
	in.op = op;
	in.fn = fn;
	in.flags = flags;
	for (const neuron_tile_ap &a : operands)
		in.operands[in.num_operands++] = a;
	return in;
}

// index i along dim is active iff start + i < limit
inline neuron_tile_insn masked(neuron_tile_insn in, uint8_t dim, Affine start, int64_t limit, int which = 0)
{
	in.masks[which].enabled = 1;
	in.masks[which].dim = dim;
	in.masks[which].start = start.get();
	in.masks[which].limit = limit;
	return in;
}

inline neuron_tile_insn loop(int64_t trip, uint8_t flags = 0)
{
	neuron_tile_insn in{};
	in.op = NEURON_TILE_OP_LOOP_BEGIN;
	in.i[0] = trip;
	in.flags = flags;
	return in;
}
inline neuron_tile_insn end_loop()
{
	neuron_tile_insn in{};
	in.op = NEURON_TILE_OP_LOOP_END;
	return in;
}

} // namespace tb
