#include "profile.h"

#include <array>

namespace neuron::chip {

static constexpr uint64_t KiB = 1ull << 10;
static constexpr uint64_t GiB = 1ull << 30;

// Physical cores and HBM per chip from the public Trainium material
// (shared/notes/runtime-and-tools.md section 1); on-chip memories per NeuronCore
// from the NKI architecture guides (shared/notes/kernels.md section 1): SBUF
// 24 MiB (128 x 192 KiB) on NeuronCore-v2, 28 MiB (128 x 224 KiB) on v3, 32 MiB
// (128 x 256 KiB) on v4; PSUM 2 MiB (128 x 16 KiB, 8 banks of 2 KiB) on all three.
// The tensor engine's moving operand reaches 4096 f32 columns on v4, 512 before.
static const std::array<Profile, 3> kProfiles = {{
	{"trn1", 2, 32 * GiB, {128, 192 * KiB, 16 * KiB, 2 * KiB, 128, 512}},
	{"trn2", 8, 96 * GiB, {128, 224 * KiB, 16 * KiB, 2 * KiB, 128, 512}},
	{"trn3", 8, 144 * GiB, {128, 256 * KiB, 16 * KiB, 2 * KiB, 128, 4096}},
}};

std::optional<Profile> find_profile(std::string_view name)
{
	for (const Profile &p : kProfiles)
		if (p.name == name)
			return p;
	return std::nullopt;
}

std::string profile_names()
{
	std::string out;
	for (const Profile &p : kProfiles)
		out += (out.empty() ? "" : ", ") + p.name;
	return out;
}

} // namespace neuron::chip
