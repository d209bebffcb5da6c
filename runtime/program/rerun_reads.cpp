#include "rerun_reads.h"

#include <iterator>
#include <map>

namespace neuron::program {

namespace {

// Disjoint, merged byte intervals [lo, hi), keyed by lo.
class Covered {
public:
	bool contains(uint64_t lo, uint64_t hi) const
	{
		if (lo >= hi)
			return true;
		auto it = spans_.upper_bound(lo);
		if (it == spans_.begin())
			return false;
		--it;
		return it->first <= lo && hi <= it->second;
	}

	void add(uint64_t lo, uint64_t hi)
	{
		if (lo >= hi)
			return;
		auto it = spans_.upper_bound(lo);
		if (it != spans_.begin() && std::prev(it)->second >= lo) {
			--it;
			lo = it->first;
			hi = std::max(hi, it->second);
			it = spans_.erase(it);
		}
		while (it != spans_.end() && it->first <= hi) {
			hi = std::max(hi, it->second);
			it = spans_.erase(it);
		}
		spans_.emplace(lo, hi);
	}

private:
	std::map<uint64_t, uint64_t> spans_;
};

bool reads_before_written(const std::vector<RegionAccess> &acc)
{
	Covered covered;
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
