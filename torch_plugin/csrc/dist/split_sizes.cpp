#include "split_sizes.h"

#include <c10/util/Exception.h>

namespace torch_neuron::dist {

std::vector<int64_t> splits_of(const std::vector<int64_t> &given, int64_t rows, int world, const char *what)
{
	if (given.empty()) {
		TORCH_CHECK(rows % world == 0, "neuron backend: all_to_all_single: ", what, " has ", rows,
			    " rows, which world_size ", world, " does not divide (give ", what, "_split_sizes)");
		return std::vector<int64_t>(world, rows / world);
	}
	TORCH_CHECK(given.size() == static_cast<size_t>(world), "neuron backend: all_to_all_single: ", what,
		    "_split_sizes has ", given.size(), " entries, expected world_size ", world);
	int64_t sum = 0;
	for (int64_t s : given) {
		TORCH_CHECK(s >= 0, "neuron backend: all_to_all_single: negative ", what, " split size ", s);
		sum += s;
	}
	TORCH_CHECK(sum == rows, "neuron backend: all_to_all_single: ", what, "_split_sizes sum to ", sum, " but the ",
		    what, " has ", rows, " rows");
	return given;
}

} // namespace torch_neuron::dist
