// all_to_all_single's split sizes, checked the same way by the one-host group
// (process_group.cpp) and the hierarchical one (hierarchical_routes.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace torch_neuron::dist {

// Split sizes along dim 0 of a tensor with `rows` rows over `world` ranks (given
// empty: equal parts, which world must divide). `what` names the tensor
// ("input", "output") in the error.
std::vector<int64_t> splits_of(const std::vector<int64_t> &given, int64_t rows, int world, const char *what);

} // namespace torch_neuron::dist
