// A tile program (contracts/include/neuron/tile.h) as neurond keeps it once
// validated: its instructions, where each loop begins and ends, and what the
// validator learnt about it (the on-chip bytes it touches, the arguments it
// writes, its work, how many loop-iteration boundaries it has).
//
// Built by parse() + validate() on the control thread, then immutable and shared
// by every execution (execution.h), each with its own on-chip memory.
#pragma once

#include <chip/profile.h>
#include <neuron/tile.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace neuron::tile {

struct TileProgram {
	chip::OnChip onchip{};               // the profile it was validated for
	std::vector<uint64_t> arg_bytes;     // declared size of each HBM argument
	std::vector<uint8_t> arg_written;    // 1 if some instruction writes the argument
	std::vector<neuron_tile_insn> insns;
	std::vector<uint32_t> match;         // LOOP_BEGIN -> its LOOP_END and back; 0 elsewhere
	uint64_t sbuf_bytes_used = 0;        // per partition: the highest SBUF byte touched + 1
	uint64_t psum_bytes_used = 0;        // the same for PSUM
	uint64_t work = 0;                   // elements touched (MACs for MATMUL), all iterations
	uint64_t max_step_work = 0;          // the most work between two loop-iteration boundaries
	uint64_t steps = 1;                  // Execution::step calls: loop_ends run, + 1 if code follows the last
	// 1 on the LOOP_BEGIN of an affine loop whose iterations may run on several
	// host threads at once with the bits of running them in order (independence.cpp)
	std::vector<uint8_t> parallel;
};

// Decodes the wire form (header, argument sizes, instructions); "" or what is
// wrong with it. Checks only the framing: validate() checks the instructions.
std::string parse(std::span<const std::byte> bytes, std::vector<uint64_t> *arg_bytes,
		  std::vector<neuron_tile_insn> *insns);
// The wire form of a program (tests, tools).
std::vector<std::byte> serialize(std::span<const uint64_t> arg_bytes, std::span<const neuron_tile_insn> insns);

// "" and *out filled, or why the program is refused, naming the instruction (its
// index, op and source line), the operand and the limit. Pure.
std::string validate(const chip::OnChip &onchip, std::span<const uint64_t> arg_bytes,
		     std::span<const neuron_tile_insn> insns, TileProgram *out);

// Fills p->parallel for a validated program (validate() calls it). Pure.
void find_parallel_loops(TileProgram *p);

const char *op_name(uint16_t op);
size_t dtype_bytes(uint8_t dtype); // 0 for a dtype tiles do not take

} // namespace neuron::tile
