// Validation of a program at registration (<neuron/program.h>): everything the
// gate would check of each node as a ring command (kernels::check_semantics and
// the work limits, gate::check_command), plus what only a program has: operands
// inside their argument's declared size or their buffer, the dependency graph
// (indices, no cycles), and a memory plan that never reuses bytes while another
// node may still touch them. Run once per program; nothing of a refused program
// runs.
//
// Pure functions; the control thread calls them before it allocates anything.
#pragma once

#include "program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace neuron::program {

struct NodeSpec {
	neuron_cmd cmd{};
	std::vector<uint32_t> deps; // indices of nodes that must complete first
	std::string label;
};

struct Description {
	uint32_t device = 0;
	chip::OnChip onchip{};  // the device's on-chip memories (its profile's), for tile programs
	std::vector<std::vector<std::byte>> tile_images; // tile programs in their wire form (<neuron/tile.h>)
	std::vector<uint64_t> arg_bytes;
	std::vector<uint64_t> buffer_bytes;
	std::vector<NodeSpec> nodes;
};

// Arguments and buffers are each at most this large (so every operand's place
// fits a synthetic address space while it is checked).
inline constexpr uint64_t kMaxRegionBytes = 1ull << 40;
// Pairs of overlapping accesses the memory-plan check compares at most.
inline constexpr uint64_t kMaxHazardChecks = 50'000'000;

// "" and *out filled (nodes in execution order, arg_written; id, device and
// buffer addresses left for the caller), or why the program is refused, naming
// the node, operand and limit.
std::string validate(const Description &d, Program *out);

} // namespace neuron::program
