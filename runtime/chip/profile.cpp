#include "profile.h"

#include <array>

namespace neuron::chip {

static constexpr uint64_t GiB = 1ull << 30;

// Physical cores and HBM per chip from the public Trainium material
// (shared/notes/runtime-and-tools.md section 1).
static const std::array<Profile, 3> kProfiles = {{
	{"trn1", 2, 32 * GiB},
	{"trn2", 8, 96 * GiB},
	{"trn3", 8, 144 * GiB},
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
