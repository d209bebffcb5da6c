// Public interface of the op kernels: the arithmetic behind the simulated
// NeuronCore's ISA (<neuron/cmd.h>), run on the host CPU.
//
// The chip calls check_semantics() on its private copy of a command, resolves
// the operands to host pointers (bounds and overlap checks are its job, since
// they depend on what the tenant owns), then calls execute().
//
// Bounded tiles: the chip cuts a command into tiles (runtime/chip/tiling.h), each
// the same command on narrowed operands, and calls execute() once per tile.
#pragma once

#include "fault.h"

#include <neuron/cmd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace neuron::kernels {

// An operand resolved to host memory. sizes/strides are in elements, as in the
// descriptor. data may be null when the tensor has no elements.
struct View {
	std::byte *data;
	neuron_dtype dtype;
	int ndim;
	int64_t sizes[NEURON_MAX_DIMS];
	int64_t strides[NEURON_MAX_DIMS];
};

// Checks everything about a command that does not depend on memory ownership:
// opcode known, num_operands == arity, flags/reserved fields zero, unused operand
// slots all zero, dtypes valid and allowed for the op, ndim <= 8, sizes/strides >= 0
// and zero past ndim, addr aligned to the element size, element count and byte
// extent free of overflow, per-op shape rules and scalar arguments.
// Returns std::nullopt when fine, else a Fault naming the operand and field.
std::optional<Fault> check_semantics(const neuron_cmd &cmd);

// Whether an input may alias the output exactly (same address, dtype, sizes and
// strides): true for elementwise/unary/copy/fill, false for matmul, reductions and
// softmax (they read inputs after writing parts of the output).
bool output_may_alias_inputs(neuron_opcode op);

class GemmPacks; // gemm_packs.h

// Executes a command that passed check_semantics and whose operands were resolved
// (views[k] corresponds to cmd.operands[k]). Uses at most max_threads host threads.
// packs: where a matmul keeps its packed operand blocks across the tiles of one
// command (null: packed per call). Returns std::nullopt or a Fault
// (NEURON_FAULT_EXEC) for failures it can detect (views inconsistent with the
// command, misaligned pointers, host memory exhausted).
std::optional<Fault> execute(const neuron_cmd &cmd, std::span<const View> views, int max_threads,
			     GemmPacks *packs = nullptr);

// SOFTMAX / LOG_SOFTMAX over rows longer than one tile (runtime/chip/tiling.h):
// the chip cuts each row into chunks, narrows cmd and the views to one chunk (the
// same rows, part of dim i[0]), and runs two passes over the chunks of a row block.
// The first gathers each row's maximum and sum of exponentials into `stats` (one
// per row of the block, in a fixed row order; start from RowStats{}), the second
// writes the results. Single-threaded.
struct RowStats {
	float max = -__builtin_inff();
	bool nan = false;
	double sum = 0; // of exp(x - max)
};
std::optional<Fault> gather_row_stats(const neuron_cmd &cmd, const View &in, RowStats *stats);
std::optional<Fault> apply_row_stats(const neuron_cmd &cmd, const View &out, const View &in, const RowStats *stats);

// ARG_REDUCE over rows longer than one tile, likewise in one pass: each chunk of in
// (its first element at `offset` along dim i[0]) updates every row's best element
// so far (start from ArgBest{}), with ARG_REDUCE's rules (the first index on ties,
// the first NaN); then the indexes are stored into out (whole, size 1 along the dim).
struct ArgBest {
	int64_t index = 0;
	double value = 0;
	bool have = false, nan = false;
};
std::optional<Fault> gather_arg_best(const neuron_cmd &cmd, const View &out, const View &in, int64_t offset,
				     ArgBest *best);
std::optional<Fault> store_arg_best(const neuron_cmd &cmd, const View &out, const View &in, const ArgBest *best);

// Bytes per element of a dtype (0 for invalid).
size_t dtype_size(uint8_t dtype);

// Number of operands an opcode takes (including the output); -1 if unknown.
int op_arity(uint16_t opcode);

// Short lower-case name of an opcode ("add", "matmul"), "invalid" if unknown.
const char *op_name(uint16_t opcode);

} // namespace neuron::kernels
