// Chip profiles: the numbers that distinguish trn1, trn2 and trn3 (DESIGN.md section 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace neuron::chip {

// One NeuronCore's on-chip memories and the tensor engine's tile limits
// (shared/notes/kernels.md section 1; tile programs are checked against them,
// contracts/include/neuron/tile.h).
struct OnChip {
	uint32_t partitions;           // of SBUF and PSUM (nl.tile_size.pmax)
	uint64_t sbuf_partition_bytes; // SBUF = partitions x this
	uint64_t psum_partition_bytes; // PSUM = partitions x this
	uint64_t psum_bank_bytes;      // a matmul's output stays inside one bank
	uint32_t matmul_stationary_max; // M: free size of the stationary operand
	uint32_t matmul_moving_max;     // N: free size of the moving operand

	uint64_t sbuf_bytes() const { return partitions * sbuf_partition_bytes; }
	uint64_t psum_bytes() const { return partitions * psum_partition_bytes; }
};

struct Profile {
	std::string name;
	uint32_t cores;
	uint64_t hbm_bytes;
	OnChip onchip;
};

// The named profile, or nullopt for an unknown name.
std::optional<Profile> find_profile(std::string_view name);
// "trn1, trn2, trn3" for error messages.
std::string profile_names();

} // namespace neuron::chip
