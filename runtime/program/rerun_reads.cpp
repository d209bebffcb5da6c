#include "rerun_reads.h"

#include <interval_set.h>

#include <cstdint>

namespace neuron::program {

namespace {

bool reads_before_written(const std::vector<RegionAccess> &acc)
{
	kernels::IntervalSet<uint64_t> covered; // bytes overwritten whole by earlier nodes
	bool written = false, early_read = false;
	for (size_t i = 0; i < acc.size();) {
		// One node's accesses: its reads see what came before it, its writes
		// count for the nodes after it.
		size_t end = i;
		while (end < acc.size() && acc[end].pos == acc[i].pos)
			++end;
		for (size_t k = i; k < end; ++k)
			if (acc[k].read && !covered.contains(acc[k].lo, acc[k].hi))
				early_read = true;
		for (size_t k = i; k < end; ++k) {
			written |= acc[k].write;
			if (acc[k].covers)
				covered.add(acc[k].lo, acc[k].hi);
		}
		i = end;
	}
	return written && early_read;
}

} // namespace

std::vector<uint8_t> read_before_written(const std::vector<std::vector<RegionAccess>> &accesses)
{
	std::vector<uint8_t> out(accesses.size(), 0);
	for (size_t r = 0; r < accesses.size(); ++r)
		out[r] = reads_before_written(accesses[r]) ? 1 : 0;
	return out;
}

} // namespace neuron::program
