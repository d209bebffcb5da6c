// How a ProcessGroupNeuron that is one host's part of a hierarchical group
// (hierarchical.h) names its ranks in errors: by their rank in the whole group,
// not by their index in this host's neurond group. neurond numbers a group's
// members 0..n-1 in its messages ("rank 1 (pid 42) ... left", "rank(s) 0, 1 did
// not arrive"); here those numbers become the group's ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_neuron::dist {

class RankNames {
public:
	RankNames() = default; // the identity: a group on one host
	// global[i]: the group rank of this host's i-th rank.
	explicit RankNames(std::vector<int64_t> global) : global_(std::move(global)) {}

	int64_t of(int64_t local) const;
	// message with every "rank N" and "rank(s) N, M" (neurond's local numbers)
	// given as group ranks.
	std::string translate(const std::string &message) const;

private:
	std::vector<int64_t> global_;
};

} // namespace torch_neuron::dist
