// Chip profiles: the numbers that distinguish trn1, trn2 and trn3 (DESIGN.md section 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace neuron::chip {

struct Profile {
	std::string name;
	uint32_t cores;
	uint64_t hbm_bytes;
};

// The named profile, or nullopt for an unknown name.
std::optional<Profile> find_profile(std::string_view name);
// "trn1, trn2, trn3" for error messages.
std::string profile_names();

} // namespace neuron::chip
