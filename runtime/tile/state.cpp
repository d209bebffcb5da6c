// Execution::save/load (execution.h): a kernel's state between two jobs of a
// device that keeps nothing of it (kmd), in device memory. The bytes come back
// from memory the engine does not own, so load() accepts only a cursor the
// program can stand at: the engines run without checks on the strength of
// validation, which covers every (pc, loop variables) the program reaches.
#include "execution.h"

#include <cstring>
#include <string>

namespace neuron::tile {

namespace {

constexpr uint32_t kStateMagic = 0x3153534e; // "NSS1"

struct StateHeader {
	uint32_t magic = kStateMagic;
	uint32_t depth = 0;
	uint64_t pc = 0;
	uint64_t steps = 0;
	int64_t iv[NEURON_TILE_MAX_LOOPS] = {};
	uint64_t sbuf_bytes = 0; // all partitions
	uint64_t psum_bytes = 0;
};

uint64_t sbuf_total(const TileProgram &p) { return uint64_t(p.onchip.partitions) * p.sbuf_bytes_used; }
uint64_t psum_total(const TileProgram &p) { return uint64_t(p.onchip.partitions) * p.psum_bytes_used; }

// "" when the program can stand at pc with these loop variables: exactly the
// loops whose LOOP_BEGIN lies before pc and LOOP_END at or after it are open,
// each variable inside its trip count, those of closed loops 0.
std::string reachable(const TileProgram &p, const StateHeader &h)
{
	if (h.pc > p.insns.size())
		return "pc " + std::to_string(h.pc) + " is past the program's " + std::to_string(p.insns.size()) +
		       " instructions";
	if (h.steps >= p.steps)
		return std::to_string(h.steps) + " steps run of a kernel of " + std::to_string(p.steps);
	size_t open[NEURON_TILE_MAX_LOOPS];
	uint32_t depth = 0;
	for (size_t i = 0; i < h.pc; ++i) {
		if (p.insns[i].op == NEURON_TILE_OP_LOOP_BEGIN)
			open[depth++] = i; // validation bounds the nesting
		else if (p.insns[i].op == NEURON_TILE_OP_LOOP_END)
			--depth;
	}
	if (h.depth != depth)
		return "depth " + std::to_string(h.depth) + " where the program has " + std::to_string(depth) + " loops open";
	for (uint32_t l = 0; l < NEURON_TILE_MAX_LOOPS; ++l) {
		const int64_t trip = l < depth ? p.insns[open[l]].i[0] : 1;
		if (h.iv[l] < 0 || h.iv[l] >= trip)
			return "loop variable " + std::to_string(l) + " = " + std::to_string(h.iv[l]) + " outside [0, " +
			       std::to_string(trip) + ")";
	}
	return {};
}

} // namespace

uint64_t Execution::state_bytes(const TileProgram &program)
{
	return sizeof(StateHeader) + sbuf_total(program) + psum_total(program);
}

void Execution::save(std::span<std::byte> out) const
{
	const TileProgram &p = *program_;
	StateHeader h;
	h.depth = static_cast<uint32_t>(main_.depth);
	h.pc = main_.pc;
	h.steps = steps_run();
	std::memcpy(h.iv, main_.iv, sizeof(h.iv));
	h.sbuf_bytes = sbuf_total(p);
	h.psum_bytes = psum_total(p);
	std::memcpy(out.data(), &h, sizeof(h));
	std::byte *at = out.data() + sizeof(h);
	if (h.sbuf_bytes)
		std::memcpy(at, mem_->sbuf(0, 0), h.sbuf_bytes);
	if (h.psum_bytes)
		std::memcpy(at + h.sbuf_bytes, mem_->psum(0, 0), h.psum_bytes);
}

std::string Execution::load(std::span<const std::byte> in)
{
	const TileProgram &p = *program_;
	if (in.size() != state_bytes(p))
		return "kernel state of " + std::to_string(in.size()) + " bytes, the program's is " +
		       std::to_string(state_bytes(p));
	StateHeader h;
	std::memcpy(&h, in.data(), sizeof(h));
	if (h.magic != kStateMagic || h.sbuf_bytes != sbuf_total(p) || h.psum_bytes != psum_total(p))
		return "kernel state header does not match the program (magic, SBUF or PSUM size)";
	if (auto why = reachable(p, h); !why.empty())
		return "kernel state: " + why;
	main_.pc = h.pc;
	main_.depth = static_cast<int>(h.depth);
	std::memcpy(main_.iv, h.iv, sizeof(h.iv));
	steps_.store(h.steps, std::memory_order_relaxed);
	const std::byte *at = in.data() + sizeof(h);
	if (h.sbuf_bytes)
		std::memcpy(mem_->sbuf(0, 0), at, h.sbuf_bytes);
	if (h.psum_bytes)
		std::memcpy(mem_->psum(0, 0), at + h.sbuf_bytes, h.psum_bytes);
	return {};
}

} // namespace neuron::tile
